"""Work in another process, bounded: what ``chunkd serve``'s splits (a process forked
for each) and the documents' extraction worker share. The parent reads a child's
progress and answer from a pipe until the child ends, or gives up at a deadline (and
kills it); a child may grow its memory by a fixed amount, no further."""

from __future__ import annotations

import os
import resource
import selectors
import socket
import threading
import time
from collections.abc import Callable

import orjson

#: What a child writes to its pipe: lines of progress (``PROGRESS``, JSON, a newline),
#: then ``ANSWER`` and its answer.
PROGRESS, ANSWER = b"p", b"a"


class ClientGone(Exception):
    """The connection watched while a child works has ended (``read_until_end``)."""


def read_until_end(fd: int, deadline: float, told: Callable[[dict], None] | None = None,
                   client: socket.socket | None = None) -> bytes | None:
    """What a child answers on ``fd`` (after ``ANSWER``, until it ends; b"" if it ended
    without), each progress line before it given to ``told``; None at the deadline;
    ``ClientGone`` once ``client`` has closed (a client that sends nothing after its
    request, as a browser: the connection readable is its end)."""
    pending, answer = b"", list[bytes]()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        if client is not None:
            selector.register(client, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            for key, _ in selector.select(min(left, 1.0)):
                if key.fileobj is client:
                    if _closed(client):
                        raise ClientGone
                    selector.unregister(client)  # it sent more: its end cannot be seen
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
                    if told is not None:
                        told(orjson.loads(line))
                if pending[:1] == ANSWER:
                    answer.append(pending[1:])


def _closed(connection: socket.socket) -> bool:
    """Whether a readable connection has ended (or failed)."""
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


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
