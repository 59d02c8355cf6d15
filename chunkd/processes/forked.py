"""Work in another process, bounded: what ``chunkd serve``'s splits (a process forked
for each) and the documents' extraction worker share. The parent reads a child's
progress and answer from a pipe until the child ends, or gives up at a deadline (and
kills it); a child may grow its memory by a fixed amount, no further."""

from __future__ import annotations

import math
import os
import resource
import select
import socket
import threading
import time
from collections.abc import Callable

import orjson

#: What a child writes to its pipe: lines of progress (``PROGRESS``, JSON, a newline),
#: then ``ANSWER`` and its answer.
PROGRESS, ANSWER = b"p", b"a"
#: The end of a peer's input (its FIN), where the system tells it (Linux); elsewhere a
#: client's end is seen only once a write to it fails.
_INPUT_ENDED = getattr(select, "POLLRDHUP", 0)


class ClientGone(Exception):
    """The connection watched while a child works has ended (``read_until_end``)."""


def read_until_end(fd: int, deadline: float, told: Callable[[dict], None] | None = None,
                   client: socket.socket | None = None) -> bytes | None:
    """What a child answers on ``fd`` (after ``ANSWER``, until it ends; b"" if it ended
    without), each progress line before it given to ``told``; None at the deadline;
    ``ClientGone`` once ``client`` has gone away: its connection reset or closed both
    ways (POLLERR, POLLHUP), or a write to it failed (``told`` raises it).

    The end of a client's input is not its end: a client may end its sending after
    its request (``shutdown(SHUT_WR)``, legal HTTP) and still read the answer, and TCP
    tells that half-close from a close only when something is written to it (a closed
    peer answers with a reset). So at the end of its input the last progress line is
    told again (or the next one, if none was yet): written to a connection that was
    closed, it makes the reset that ends the split."""
    pending, answer = b"", list[bytes]()
    last: dict | None = None  # the last progress line told
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if client is not None:  # POLLERR and POLLHUP are always reported
        poller.register(client, _INPUT_ENDED)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        for ready, events in poller.poll(math.ceil(min(left, 1.0) * 1000)):
            if ready != fd:
                if events & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    raise ClientGone
                poller.modify(ready, 0)  # its input ended: only a reset or hang-up now
                if last is not None and told is not None:
                    told(last)
                continue
            data = os.read(fd, 1 << 20)
            if not data:
                return b"".join(answer)
            if answer:
                answer.append(data)
                continue
            pending += data
            while pending[:1] == PROGRESS and b"\n" in pending:
                line, pending = pending[1:].split(b"\n", 1)
                last = orjson.loads(line)
                if told is not None:
                    told(last)
            if pending[:1] == ANSWER:
                answer.append(pending[1:])


def write_all(out: int, data: bytes) -> None:
    """Write all of ``data`` to the pipe ``out``."""
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]


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


def keep_only_descriptors(keep: set[int]) -> None:
    """Close every descriptor of this forked process but ``keep``: the parent's
    sockets, files and pipes are not the child's (a reader waits on a pipe to end until
    every copy of its writing end is closed). A thread another library starts again in
    every fork (LanceDB's event loop) loses its descriptors here and fails: it has
    nothing to do in this process, nor to say on stderr."""
    threading.excepthook = _ignored
    try:  # Linux: only the descriptors open, not every number up to the limit
        opened = sorted(map(int, os.listdir("/proc/self/fd")))
    except OSError:
        opened = list(range(resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
    for fd in opened:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:  # the listing's own, or one never open
                pass


def _ignored(_failure: threading.ExceptHookArgs) -> None:
    pass
