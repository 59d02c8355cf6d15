"""The extraction worker: one long-lived process per process that extracts, which reads
document after document (a fork per document costs more than reading a small one).

Every bound of a forked extraction holds: the parent gives each document
``Limits.seconds`` and kills the worker past them; the worker's memory may grow by
``EXTRACT_MEMORY`` beyond what it started with, no further (a MemoryError); the parent
reads at most about twice ``Limits.max_bytes`` of its answer. A worker that was killed,
crashed, hit a fault that may have left it unwell (out of memory, too deep a
recursion, a parser's unexpected error) or has read ``MOST_DOCUMENTS`` documents is
replaced by a fresh one at the next document, which is unaffected; a document whose
worker ends without answering is read once more by a fresh worker (the old one may have
ended before it), and fails if that one ends too. A process forked
from the parent (a ``--jobs`` worker) starts its own worker. The worker ends when its
parent does.

Requests and answers go over two pipes, each a length-prefixed frame: a request is
its JSON header (the format's name and the limits) and the document's bytes; an
answer is ``T``, a JSON header (page starts, warnings), a newline and the text as
UTF-8, or ``E`` and why not (``F`` too, from a worker that then ends).
"""

from __future__ import annotations

import os
import selectors
import signal
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from chunkd.processes.forked import keep_only_descriptors, limit_memory
from chunkd.inputs.base import FORMATS, DocumentError, Extracted, Format, Limits

#: The memory (address space) the worker may take beyond what it starts with.
EXTRACT_MEMORY = 2 * 2**30
#: A worker is replaced after this many documents (what a parser's caches and the
#: heap's fragments may hold builds up no further).
MOST_DOCUMENTS = 200
_LENGTH = struct.Struct("<Q")


class ParserFault(DocumentError):
    """A failure that may have left the process that met it unwell."""


#: What an extraction past the worker's memory is told.
OUT_OF_MEMORY = (f"extracting its text needs more than the {EXTRACT_MEMORY // 2**30} GiB of "
                 "memory it may take")


def extract_checked(data: bytes, form: Format, limits: Limits) -> Extracted:
    """The document's text in this process (which bounds its own time and memory),
    at most ``limits.max_bytes`` of UTF-8; every failure is a ``DocumentError`` (a
    ``ParserFault`` where the process may be unwell after it)."""
    try:
        extracted = form.parse(data, limits)
        size = len(extracted.text.encode("utf-8", "replace"))   # as large again as the text
    except DocumentError:
        raise
    except MemoryError:
        raise ParserFault(OUT_OF_MEMORY) from None
    except RecursionError:
        raise ParserFault("nested too deeply to read") from None
    except Exception as error:  # a parser's fault on a malformed file: said, in one line
        raise ParserFault(f"not a readable {form.label} "
                          f"({type(error).__name__}: {error})") from None
    if size > limits.max_bytes:
        raise DocumentError(f"its text is {size} bytes, over --max-bytes {limits.max_bytes}")
    return extracted


class WorkerFailed(Exception):
    """The worker gave no answer; the message says why (no file name)."""


class WorkerEnded(WorkerFailed):
    """The worker ended without an answer: killed or crashed, while it read the document
    or before (killed while idle, and not yet found ended when it was sent it)."""


class Worker:
    """A started worker process and the parent's ends of its pipes."""

    def __init__(self) -> None:
        self.formats = dict(FORMATS)  # what it can read: the registry as it was forked
        self.documents = 0
        self.ended: str | None = None  # how it ended, once it has
        requests, self.requests = os.pipe()
        self.answers, answers = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(self.requests)
            os.close(self.answers)
            _serve(requests, answers)
        self.pid = pid
        os.close(requests)
        os.close(answers)

    def usable(self, form: Format) -> bool:
        """Whether this worker may take the next document, of ``form``."""
        if self.ended is None:
            pid, status = _reaped(self.pid, os.WNOHANG)
            if pid:  # it ended (killed from outside): reaped now, not to be killed
                self.forget()
                self.ended = _how(status)
        return (self.ended is None and self.formats.get(form.name) is form
                and self.documents < MOST_DOCUMENTS)

    def extract(self, data: bytes, form: Format, limits: Limits,
                beat: Callable[[], None] | None) -> bytes:
        """The worker's answer for one document; ``WorkerFailed`` (and the worker
        stopped) if it gives none in time, or one larger than the limits allow."""
        deadline = time.monotonic() + limits.seconds
        header = orjson.dumps({"format": form.name, "max_bytes": limits.max_bytes,
                               "seconds": limits.seconds, "ocr": limits.ocr})
        self.documents += 1
        try:
            _send(self.requests, [header, data], deadline, beat)
            answer = _receive(self.answers, deadline, 2 * limits.max_bytes + (1 << 20), beat)
        except (BrokenPipeError, EOFError):
            raise WorkerEnded(f"extracting its text failed: its process ended with "
                              f"{self.stop()}") from None
        except Deadline:
            self.stop()
            raise WorkerFailed(f"extracting its text took more than {limits.seconds:g} s "
                               "(--extract-timeout)") from None
        except TooLarge:
            self.stop()
            raise WorkerFailed(f"its text is over --max-bytes {limits.max_bytes}") from None
        except BaseException:  # the caller's stop (a daemon stopping, Ctrl-C): mid-document
            self.stop()
            raise
        if answer[:1] == b"F":  # it ends after a fault
            self.stop()
        return answer

    def stop(self) -> str:
        """End the worker (killed, if it has not ended) and reap it; how it ended."""
        if self.ended is None:
            self.forget()
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.ended = _how(_reaped(self.pid, 0)[1])
        return self.ended

    def forget(self) -> None:
        """Close this process's ends of the pipes (a fork's copy: the worker is its
        parent's)."""
        if self.ended is None:
            os.close(self.requests)
            os.close(self.answers)
            self.ended = "closed"


def _how(status: int) -> str:
    """How a process with wait status ``status`` ended, in words."""
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"status {os.WEXITSTATUS(status)}"


def _reaped(pid: int, options: int) -> tuple[int, int]:
    """``os.waitpid``; a child already reaped by someone else counts as ended (status 0)."""
    try:
        return os.waitpid(pid, options)
    except ChildProcessError:
        return pid, 0


class Deadline(Exception):
    """The time a document's extraction may take is over."""


class TooLarge(Exception):
    """The answer is larger than the limits allow."""


_worker: Worker | None = None
_lock = threading.Lock()


def _forget_in_child() -> None:
    """A forked process starts its own worker when it needs one."""
    global _worker, _lock
    _lock = threading.Lock()
    if _worker is not None:
        _worker.forget()
    _worker = None


os.register_at_fork(after_in_child=_forget_in_child)


def extract_in_worker(data: bytes, form: Format, limits: Limits,
                      beat: Callable[[], None] | None = None) -> Extracted:
    """``data``'s text, extracted by this process's worker within ``limits``;
    ``DocumentError`` if it cannot be, ``WorkerFailed`` if the worker gave no answer.
    ``beat`` is called at least every second while it waits."""
    global _worker
    with _lock:
        if _worker is not None and not _worker.usable(form):
            _worker.stop()
            _worker = None
        if _worker is None:
            _worker = Worker()
        try:
            answer = _worker.extract(data, form, limits, beat)
        except WorkerEnded:
            # A worker that read documents before may have ended before this one (killed
            # while idle, still exiting when checked): the document goes to a fresh
            # worker, once. A fresh worker's end is the document's failure.
            if _worker.documents == 1:
                raise
            _worker = Worker()
            answer = _worker.extract(data, form, limits, beat)
    if answer[:1] in (b"E", b"F"):
        raise DocumentError(answer[1:].decode("utf-8", "replace"))
    head_end = answer.index(b"\n")
    head = orjson.loads(answer[1:head_end])
    starts = head["page_starts"]
    return Extracted(answer[head_end + 1:].decode("utf-8"),
                     None if starts is None else tuple(starts), tuple(head["warnings"]))


#: Whether Ctrl-C reached this process, one that leaves it to its parent (a --jobs
#: worker): every extraction it waits on from then on ends at once.
_interrupted = False
#: Whether this process waits on its worker, where ``interrupt_extractions`` may raise.
_waiting = False


def interrupt_extractions(_number: int, _frame: object) -> None:
    """The SIGINT handler of a process that leaves Ctrl-C to its parent: the extraction
    it waits on ends at once with ``KeyboardInterrupt`` (its worker killed and reaped,
    as in a process that handles Ctrl-C itself), and so does any later one; whatever
    else it does goes on undisturbed."""
    global _interrupted
    _interrupted = True
    if _waiting:
        raise KeyboardInterrupt


# --- the parent's side of the pipes ---------------------------------------------------

def _send(fd: int, parts: list[bytes], deadline: float,
          beat: Callable[[], None] | None) -> None:
    """Write the frame of ``parts`` (each length-prefixed) to ``fd`` by ``deadline``."""
    frame = b"".join(_LENGTH.pack(len(part)) + part for part in parts)
    view = memoryview(frame)
    os.set_blocking(fd, False)
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_WRITE)
        while view:
            _wait(selector, deadline, beat)
            try:
                view = view[os.write(fd, view[:1 << 16]):]
            except BlockingIOError:
                continue


def _receive(fd: int, deadline: float, most: int, beat: Callable[[], None] | None) -> bytes:
    """One length-prefixed frame from ``fd`` by ``deadline``: ``TooLarge`` past
    ``most`` bytes, ``EOFError`` if the writer ends first."""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        (size,) = _LENGTH.unpack(_read(fd, _LENGTH.size, selector, deadline, beat))
        if size > most:
            raise TooLarge()
        return _read(fd, size, selector, deadline, beat)


def _read(fd: int, size: int, selector: selectors.BaseSelector, deadline: float,
          beat: Callable[[], None] | None) -> bytes:
    parts: list[bytes] = []
    while size:
        _wait(selector, deadline, beat)
        data = os.read(fd, min(size, 1 << 20))
        if not data:
            raise EOFError()
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def _wait(selector: selectors.BaseSelector, deadline: float,
          beat: Callable[[], None] | None) -> None:
    """Until ``selector``'s pipe is ready; ``beat`` at least every second meanwhile."""
    global _waiting
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Deadline()
        _waiting = True  # before the check: a Ctrl-C after it raises in the handler
        try:
            if _interrupted:
                raise KeyboardInterrupt
            if selector.select(min(left, 1.0)):
                return
        finally:
            _waiting = False
        if beat is not None:
            beat()


# --- the worker's side ----------------------------------------------------------------

def _serve(requests: int, answers: int) -> None:
    """The worker process: answer each request until the parent ends, or a fault."""
    try:
        _detach(requests, answers)
        limit_memory(EXTRACT_MEMORY)
        while True:
            header = _read_blocking(requests)
            if header is None:
                break
            data = _read_blocking(requests)
            if data is None:
                break
            request = orjson.loads(header)
            signal.alarm(int(request["seconds"]) + 5)  # ends it if the parent is gone
            answer = _answer(data, request)
            data = b""
            _write_blocking(answers, _LENGTH.pack(len(answer)) + answer)
            signal.alarm(0)
            if answer[:1] == b"F":
                break
    finally:
        os._exit(0)


def _answer(data: bytes, request: dict[str, Any]) -> bytes:
    form = FORMATS[request["format"]]
    limits = Limits(request["max_bytes"], request["seconds"], request["ocr"])
    try:
        extracted = extract_checked(data, form, limits)
        head = orjson.dumps({"page_starts": extracted.page_starts,
                             "warnings": extracted.warnings})
        return b"T" + head + b"\n" + extracted.text.encode("utf-8", "replace")
    except ParserFault as error:
        return b"F" + str(error).encode("utf-8", "replace")
    except DocumentError as error:
        return b"E" + str(error).encode("utf-8", "replace")
    except MemoryError:   # the answer's copies of the text: freed as it unwinds
        return b"F" + OUT_OF_MEMORY.encode()


def _detach(requests: int, answers: int) -> None:
    """Keep nothing of the parent's but the two pipes (its output, which a reader
    waits on to end, least of all) and stderr; end with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent kills it
    for name in ("SIGTERM", "SIGALRM", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:  # Linux: killed when the parent ends
        import ctypes  # in the worker only: ctypes costs every command's start-up

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)
    keep_only_descriptors({0, 1, 2, requests, answers})


def _read_blocking(fd: int) -> bytes | None:
    """One length-prefixed part from ``fd``; None at its end."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    return _read_exactly(fd, _LENGTH.unpack(head)[0])


def _read_exactly(fd: int, size: int) -> bytes | None:
    parts: list[bytes] = []
    while size:
        data = os.read(fd, min(size, 1 << 20))
        if not data:
            return None
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def _write_blocking(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
