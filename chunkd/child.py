"""Work in a process forked for it, bounded: what ``chunkd serve``'s splits and the
extraction of PDF, HTML and DOCX documents share. The parent reads the child's answer
from a pipe until the child ends, or gives up at a deadline (and kills it); the child
may grow its memory by a fixed amount, no further."""

from __future__ import annotations

import os
import resource
import selectors
import time
from collections.abc import Callable


class TooLong(Exception):
    """The child wrote more than the reader takes."""


def read_until_end(fd: int, deadline: float, most: int | None = None,
                   beat: Callable[[], None] | None = None) -> bytes | None:
    """What a child writes to ``fd`` until it ends; None at the deadline. ``most``:
    more bytes than this raise ``TooLong``; ``beat`` is called at least every second
    while it waits (a sign of life for a watchdog)."""
    parts: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not selector.select(min(left, 1.0)):
                if beat is not None:
                    beat()
                continue
            data = os.read(fd, 1 << 20)
            if not data:
                return b"".join(parts)
            size += len(data)
            if most is not None and size > most:
                raise TooLong()
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
