"""Standard output as chunkd's commands write it, and their exit statuses.

A write that fails is one line on stderr naming stdout (a full disk, a closed
descriptor) and exit status 1; a reader that went away (``chunkd ... | head -1``) ends
the command quietly with status 0, as a Unix filter should; Ctrl-C is status 130; a
bug in chunkd is one line naming the exception's type and where, status 70.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import sys
from collections.abc import Callable
from typing import BinaryIO, Protocol

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_BUG = 70  # sysexits.h's EX_SOFTWARE
#: The buffer a pipe chunkd streams through is given (Linux's default is 64 KiB): a
#: sixteenth of the switches between chunkd and the process at the other end, which
#: made 42.7 MB through ``chunkd --chars 1000 | reader`` 0.35 s instead of 0.43 s.
#: 1 MiB is the most an unprivileged process may ask for by default.
PIPE_BYTES = 1 << 20
#: Writes in a row that may write nothing, each after waiting for the stream to be
#: writable, before the output is given up as stuck.
IDLE_WRITES = 100


class Stream(Protocol):
    """What output is written to: a binary stream, or an ``Output``; ``write`` returns
    how much it wrote (None: nothing, for now)."""

    def write(self, data: bytes | bytearray | memoryview, /) -> int | None: ...


def raised_through(error: BaseException) -> list[tuple[str, int, str]]:
    """The frames (path, line, function) ``error`` was raised through, innermost last;
    for one raised in another process (a ``concurrent.futures`` pool's), those there."""
    remote = getattr(error.__cause__, "tb", None)
    if isinstance(remote, str):
        return [(path, int(line), function) for path, line, function in
                re.findall(r'^  File "([^"]*)", line (\d+), in (.*)$', remote, re.MULTILINE)]
    import traceback

    return [(frame.filename, frame.lineno or 0, frame.name)
            for frame in traceback.extract_tb(error.__traceback__)]


def bug_line(error: BaseException) -> str:
    """What chunkd says of an exception it never expects (a bug): its type and the last
    place in chunkd it was raised through. Never its message, which may hold anything
    an input or an endpoint said (a secret among it)."""
    package = os.path.dirname(os.path.dirname(__file__))
    ours = [("chunkd" + path[len(package):], line) for path, line, _ in raised_through(error)
            if path.startswith(package + os.sep)]
    where = f" at {ours[-1][0]}:{ours[-1][1]}" if ours else ""
    return f"a bug in chunkd ({type(error).__name__}{where}); please report it"


def write_all(stream: Stream, data: bytes | bytearray | memoryview) -> None:
    """Write all of ``data`` to ``stream``, or raise ``OSError``. A raw stream (stdout
    under ``python -u`` or ``PYTHONUNBUFFERED=1``) may write part of it: Linux writes at
    most 2 GiB - 4 KiB at once, a signal or a file size limit can cut a write short;
    one whose descriptor another process made non-blocking may write nothing until it
    is writable again. The rest is written until all is, so nothing is lost."""
    view = memoryview(data)
    idle = 0
    while view:
        try:
            written = stream.write(view)
        except BlockingIOError as error:  # a buffered stream, non-blocking underneath
            written = error.characters_written
        if not written:  # None or 0: wait for the stream rather than spin
            idle += 1
            if idle > IDLE_WRITES:
                raise OSError(errno.EIO, "writes make no progress")
            _wait_writable(stream)
            continue
        idle = 0
        view = view[written:]


def _wait_writable(stream: Stream) -> None:
    """Until the stream's descriptor can be written (at once for a file); a stream
    without one is only tried again."""
    fileno = getattr(stream, "fileno", None)
    try:
        descriptor = fileno() if fileno is not None else None
    except (OSError, ValueError):  # io.UnsupportedOperation: no descriptor
        descriptor = None
    if descriptor is None:
        return
    import select  # here: a write that would wait is rare, and start-up is not

    poll = select.poll()
    poll.register(descriptor, select.POLLOUT)
    poll.poll()


class OutputError(Exception):
    """The output cannot be written (a full disk, a closed descriptor)."""


class Output:
    """stdout as the writers see it: a write that fails is an ``OutputError`` naming
    stdout, except a reader that went away (``BrokenPipeError``), which ends quietly."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def write(self, data: bytes | bytearray | memoryview, /) -> int:
        """Write all of ``data`` (see ``write_all``); returns its length, as a stream's
        ``write`` does."""
        try:
            write_all(self.stream, data)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(f"stdout: {error.strerror or error}") from None
        return len(data)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(f"stdout: {error.strerror or error}") from None


def widen_pipe(stream: object) -> None:
    """Grow the pipe ``stream`` is an end of to ``PIPE_BYTES``, if it is a pipe with
    less; nothing where it is not one, has no descriptor (a stream in memory), or the
    system says no (a user's pipe quota spent): it only makes streaming cheaper."""
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
        if stat.S_ISFIFO(os.fstat(fd).st_mode) \
                and fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_BYTES:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    # io.UnsupportedOperation (no descriptor) is an OSError; ValueError: closed;
    # AttributeError: not Linux, no such fcntl.
    except (OSError, ValueError, AttributeError):
        pass


def run_writing(program: str, body: Callable[[Output], int]) -> int:
    """Run a command's ``body`` on stdout; returns its exit status, or the status of
    the output failing (see the module's docstring)."""
    if sys.stdout is None:  # started with stdout closed (>&-)
        print(f"{program}: stdout: not open (Bad file descriptor)", file=sys.stderr)
        return EXIT_FAILED
    widen_pipe(sys.stdout)
    try:
        return body(Output(sys.stdout.buffer))
    except BrokenPipeError:
        silence_stdout()
        return EXIT_OK
    except OutputError as error:
        print(f"{program}: {error}", file=sys.stderr)
        silence_stdout()
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def silence_stdout() -> None:
    """Nothing more goes to stdout, not even Python's flush at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
