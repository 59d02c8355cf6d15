"""Work in another process, bounded: what ``chunkd serve``'s splits (a process forked
for each) and the documents' extraction worker share. The parent reads a child's
answer from a pipe until the child ends, or gives up at a deadline (and kills it); a
child may grow its memory by a fixed amount, no further."""

from __future__ import annotations

import os
import resource
import selectors
import time


def read_until_end(fd: int, deadline: float) -> bytes | None:
    """What a child writes to ``fd`` until it ends; None at the deadline."""
    parts: list[bytes] = []
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not selector.select(min(left, 1.0)):
                continue
            data = os.read(fd, 1 << 20)
            if not data:
                return b"".join(parts)
            parts.append(data)


def limit_memory(more: int) -> None:
    """Let this process grow by ``more`` bytes of address space, no further (beyond
    that, an allocation fails: a MemoryError)."""
    try:
        with open("/proc/self/statm") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return  # not Linux: the time limit and the other bounds still hold
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > size + more:
        resource.setrlimit(resource.RLIMIT_AS, (size + more, hard))
