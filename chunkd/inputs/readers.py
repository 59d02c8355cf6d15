"""Input readers: bytes in, documents of decoded text out.

A document is read as a stream of text blocks, so that the kernel can chunk it while
it arrives and memory never holds more than a block.  Every problem with the input
is raised as ``InputError`` with a message that names the document and the place.

File names are bytes on Linux: chunkd carries them as Python does (``str`` with
undecodable bytes as lone surrogates, ``os.fsdecode``), shows them in messages with
``display_name`` and writes them losslessly in records (``chunkd.outputs.writers``).
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

from chunkd.model.chunk import INPUT_MAY_NAME, OPTIONAL_FIELDS
from chunkd.kernel.chosen import IMPLEMENTATION
from chunkd.processes.stdio import widen_pipe
from chunkd.model.patterns import deferred

if TYPE_CHECKING:
    import orjson

#: What is read, decoded and split at a time: small enough that a block's bytes and its
#: text stay in the processor's cache between the three (four times this took 1.25 times
#: as long on a 43 MB book).
BLOCK_SIZE = 1 << 16
#: What an NDJSON line from a pipe is gathered in: reads this large are allocated apart
#: from the heap and given back when freed, so a long line's parts do not leave the
#: heap holding its size again once they are joined.
LINE_READ_SIZE = 1 << 18

#: UTF-8 decoding's fast path compiled (``chunkd.kernel._utf8``), where the core is; None: the
#: codec's decoder alone, the same text.
decode_valid: Callable[[bytes | memoryview, int], tuple[str, int]] | None = None
if IMPLEMENTATION == "compiled":
    try:
        from chunkd.kernel._utf8 import decode_valid
    except ImportError:  # built before it had this module
        pass

#: Keys of a chunk record; an NDJSON input line may not use them for its own fields.
RESERVED_KEYS = frozenset({"doc", "index", "start", "end", "length", "text", *OPTIONAL_FIELDS,
                           "chunks", "parents", "page_starts"}  # --format json's documents
                          - set(INPUT_MAY_NAME))

#: Integers a record can carry exactly: JSON tools commonly read 64 bits, no more.
INT_RANGE = range(-2**63, 2**64)


class InputError(Exception):
    """Input that cannot be read or decoded; the message says what and where."""


def display_name(name: str) -> str:
    """A file name for a one-line message: undecodable bytes and control characters
    as ``\\xNN`` escapes (lossless names go into records, not messages)."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_CONTROL = deferred(r"[\x00-\x1f\x7f]")


class Document:
    """One input document: its name (None for stdin), its text blocks, and the
    extra fields of its NDJSON line, which are copied into every chunk record.
    ``size`` is its length in bytes or code points where known before reading (it
    decides whether ``--jobs`` hands it to a worker), else None (a pipe, a device).
    ``media_type``: a PDF's, an HTML or a DOCX file's (its blocks are then a
    ``chunkd.inputs.DocumentFile``), else None."""

    def __init__(self, name: object, blocks: Iterable[str], fields: dict | None = None,
                 size: int | None = None, media_type: str | None = None) -> None:
        self.name = name  # a path, an NDJSON line's "id" (any JSON value) or its number
        self.blocks = blocks
        self.fields = {} if fields is None else fields
        self.size = size
        self.media_type = media_type

    def __repr__(self) -> str:
        return f"Document({self.name!r}, size={self.size}, media_type={self.media_type!r})"


#: Called with every raw block read (to hash the input, or to show progress).
OnBytes = Callable[[bytes], None] | None


def read_blocks(stream: BinaryIO, on_bytes: OnBytes = None,
                block_size: int = BLOCK_SIZE) -> Iterator[bytes]:
    """The stream's bytes, as they arrive (a pipe's data is passed on without waiting
    for a full block)."""
    read = getattr(stream, "read1", stream.read)
    while data := read(block_size):
        if on_bytes is not None:
            on_bytes(data)
        yield data


class NotRegularFile(OSError):
    """``open_regular``'s refusal: a FIFO, a device, a socket or a folder."""

    def __init__(self) -> None:
        super().__init__(None, "not a regular file")


class FolderLink(OSError):
    """``open_regular``'s refusal of a path through a folder's symbolic link."""

    def __init__(self) -> None:
        super().__init__(errno.ELOOP, "a folder on its path is a symbolic link (not followed)")


def open_regular(path: str, follow_symlinks: bool = True, root: str | None = None) -> BinaryIO:
    """``path`` opened for reading (unbuffered) if it is a regular file, else
    ``NotRegularFile``. It is opened with O_NONBLOCK and checked on its descriptor, so
    that a FIFO, or a device, put in its place after any earlier check neither blocks the
    open nor is read for ever. With ``root``, ``path`` is relative to that folder, and
    no folder on the way is followed if it is a link, whatever ``follow_symlinks`` (as
    the daemon enters none): each is opened beneath the one before with O_NOFOLLOW
    (which guards only a path's last part), so one swapped for a link leads nowhere."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    fd = os.open(path, flags) if root is None else _open_beneath(root, path, flags)
    stream = open(fd, "rb", buffering=0)
    if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
        stream.close()
        raise NotRegularFile
    return stream


def _open_beneath(root: str, relative: str, flags: int) -> int:
    """``relative`` opened with ``flags`` beneath the folder ``root`` (followed, as the
    user named it), every folder between opened with O_NOFOLLOW (``open_subfolder``)."""
    *folders, name = relative.split(os.sep)
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with subfolder(top, folders) as folder:
            return os.open(name, flags, dir_fd=folder)
    finally:
        os.close(top)


#: A folder opened on the way to a file: never through a symbolic link.
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_subfolder(base: int, parts: list[str], create: bool = False) -> int:
    """A descriptor of the folder ``base/parts...``, opened one component at a time,
    never through a symbolic link (``FolderLink`` if one is on the way; ``ENOTDIR`` if
    a file is); created if asked, with its parent's permissions."""
    fd = os.dup(base)
    try:
        for part in parts:
            made = False
            if create:
                try:
                    os.mkdir(part, 0o700, dir_fd=fd)
                    made = True
                except FileExistsError:
                    pass
            try:
                child = os.open(part, DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as error:  # a link answers ENOTDIR (or ELOOP): say which it is
                if error.errno in (errno.ENOTDIR, errno.ELOOP) and _is_link(fd, part):
                    raise FolderLink from None
                raise
            parent, fd = fd, child  # from here the new folder's descriptor is the one held
            try:
                if made:  # as open as its parent (the service's umask would close it to the group)
                    os.fchmod(child, stat.S_IMODE(os.fstat(parent).st_mode))
            finally:
                os.close(parent)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def subfolder(base: int, parts: list[str], create: bool = False) -> Iterator[int]:
    """``open_subfolder`` for a ``with`` block."""
    fd = open_subfolder(base, parts, create)
    try:
        yield fd
    finally:
        os.close(fd)


def _is_link(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:  # gone meanwhile: the error at hand stands
        return False


def decode_blocks(blocks: Iterable[bytes | memoryview], where: str,
                  errors: str = "strict") -> Iterator[str]:
    """Decode UTF-8 incrementally; invalid bytes raise ``InputError`` with their
    byte offset, or become U+FFFD with ``errors="replace"``. Runs of valid characters
    are decoded by the compiled fast path where there is one (``decode_valid``); the
    codec's decoder reads the rest (a character cut by a block's end, invalid bytes,
    the block after them), so the text and the errors are the codec's."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors)
    offset = 0                         # bytes of the input before those decoded next

    def decode(data: bytes | memoryview, final: bool = False) -> str:
        nonlocal offset
        held = len(decoder.getstate()[0])  # bytes of a split character held back
        try:
            text = decoder.decode(data, final)
        except UnicodeDecodeError as error:
            why = ("truncated character at the end" if final
                   else "use --errors replace to substitute U+FFFD")
            raise InputError(f"{where}: invalid UTF-8 at byte {offset - held + error.start}"
                             f" ({why})") from None
        offset += len(data)
        return text

    for block in blocks:
        if decode_valid is None or (data := _byte_view(block)) is None:
            pieces = [decode(block)]
        else:
            # Each piece goes as it is, not joined: a block that a character straddles
            # would be copied whole to add that character.
            pieces, at = [], 0
            if decoder.getstate()[0]:  # its continuation bytes complete a split character
                while at < min(3, len(data)) and 0x80 <= data[at] <= 0xBF:
                    at += 1
                pieces.append(decode(data[:at]))
            if decoder.getstate()[0]:  # still cut short: the decoder judges what follows
                pieces.append(decode(data[at:]))
            else:
                valid, end = decode_valid(data, at)
                offset += end - at
                pieces.append(valid)
                if end < len(data):
                    pieces.append(decode(data[end:]))
        yield from filter(None, pieces)
    text = decode(b"", final=True)
    if text:
        yield text


def _byte_view(data: bytes | bytearray | memoryview) -> bytes | memoryview | None:
    """``data`` as ``decode_valid`` takes it: bytes, or any other contiguous buffer
    (a bytearray, a view of an Arrow buffer's signed bytes) as a flat view of unsigned
    bytes; None where it is not contiguous, for the codec."""
    if isinstance(data, bytes):
        return data
    try:
        return memoryview(data).cast("B")
    except (TypeError, ValueError):
        return None


class FileBlocks:
    """A file's decoded text blocks, opened only when iterated; picklable (without
    ``on_bytes``), so that ``--jobs`` workers can read their own files."""

    def __init__(self, path: str, errors: str, on_bytes: OnBytes = None) -> None:
        self.path, self.errors, self.on_bytes = path, errors, on_bytes

    def __iter__(self) -> Iterator[str]:
        return decode_blocks(self._raw_blocks(), display_name(self.path), self.errors)

    def _raw_blocks(self) -> Iterator[bytes]:
        try:
            stream = open(self.path, "rb")
        except OSError as error:
            raise InputError(f"{display_name(self.path)}: {error.strerror or error}") from None
        with stream:
            try:
                yield from read_blocks(stream, self.on_bytes)
            except OSError as error:
                raise InputError(f"{display_name(self.path)}: read failed: "
                                 f"{error.strerror or error}") from None


def file_document(path: str, errors: str, on_bytes: OnBytes = None,
                  size: int | None = None) -> Document:
    """The file at ``path`` as one document; ``on_bytes`` sees every raw block."""
    return Document(path, FileBlocks(path, errors, on_bytes), size=size)


def stream_document(stream: BinaryIO, errors: str, on_bytes: OnBytes = None) -> Document:
    """A byte stream (stdin) as one unnamed document."""
    return Document(None, decode_blocks(read_blocks(stream, on_bytes), "stdin", errors))


class Paused(NamedTuple):
    """What a reader asked for pauses yields where its input has nothing more for now
    (the next read would wait for a pipe's writer): a caller holding documents back
    to batch them sends them on, so that records follow their lines promptly, and
    reads on when ``fd`` (the input) is readable again."""

    fd: int


def _lines(stream: BinaryIO, pauses: bool) -> Iterator[bytes | Paused]:
    """The stream's lines (the last may lack its newline); with ``pauses``, a
    ``Paused`` before a read that would wait. A regular file never waits: it is read
    by lines."""
    try:
        fd = stream.fileno()
        waits = pauses and not stat.S_ISREG(os.fstat(fd).st_mode)
    except (AttributeError, OSError, ValueError):  # not a file (io.UnsupportedOperation)
        waits = False
    if not waits:
        yield from iter(stream.readline, b"")
        return
    # read1 takes what has arrived, in one read: the stream's buffer is left empty, so
    # poll tells whether the next read would wait (poll, unlike select, takes any
    # descriptor number).
    read = getattr(stream, "read1", stream.read)
    parts: list[bytes] = []             # the start of a line whose end has not arrived
    paused = Paused(fd)
    import select  # here: only lines from a pipe or a terminal are waited for

    ready = select.poll()
    ready.register(fd, select.POLLIN)
    while True:
        if not ready.poll(0):
            yield paused
        data = read(LINE_READ_SIZE)
        if not data:
            break
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            parts.append(data[start:end + 1])
            start = end + 1
            yield _joined(parts)
        if start < len(data):
            parts.append(data[start:])
    if parts:
        yield _joined(parts)


def _joined(parts: list[bytes]) -> bytes:
    """The parts as one line, emptying the list: no name in ``_lines`` holds the line
    (or its parts) while it is parsed and chunked."""
    line = b"".join(parts)
    parts.clear()
    return line


def ndjson_documents(stream: BinaryIO, errors: str, where: str = "stdin",
                     on_bytes: OnBytes = None,
                     pauses: bool = False) -> Iterator[Document | InputError | Paused]:
    """One document per line ``{"text": ..., "id": ...}``; a bad line is yielded as an
    ``InputError`` (naming its line number) so that the lines after it still count.
    A line without ``"id"`` is named by its line number. A line is held whole while it
    is parsed: memory grows with the longest line (JSON must be read to its end).
    With ``pauses``, a ``Paused`` where the input stops for now (``_lines``)."""
    offset = 0                          # bytes of the input before this line
    number = 0
    for line in _lines(stream, pauses):
        if isinstance(line, Paused):
            yield line
            continue
        number += 1
        if on_bytes is not None:
            on_bytes(line)
        at, offset = offset, offset + len(line)
        if not line.strip():
            continue
        try:
            record = _parse_line(line, errors)
        except ValueError as error:
            yield InputError(f"{where}: line {number}: {_line_problem(line, at, error)}")
            continue
        problem = _record_problem(record)
        if problem:
            yield InputError(f"{where}: line {number}: {problem}")
            continue
        assert isinstance(record, dict), "_record_problem checked it"
        del line  # only the parsed text is held while the document is chunked
        name = record.pop("id", number)
        text = record.pop("text")
        yield Document(name, TextBlocks(text), record, size=len(text))


class TextBlocks:
    """A text already in memory, given in blocks as a stream would give it, so that
    its chunks and their output are made a block at a time, not all at once;
    picklable, for ``--jobs`` workers."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __iter__(self) -> Iterator[str]:
        text = self.text
        for start in range(0, len(text), BLOCK_SIZE):
            yield text[start:start + BLOCK_SIZE]


class BytesBlocks:
    """A text in memory as UTF-8 bytes (a Parquet value, say, left in Arrow's memory),
    decoded a block at a time, as a file is: a Python string of the whole could take
    four times its bytes. Picklable, as bytes, for ``--jobs`` workers."""

    def __init__(self, data: bytes | memoryview, where: str, errors: str) -> None:
        self.data, self.where, self.errors = data, where, errors

    def __iter__(self) -> Iterator[str]:
        view = memoryview(self.data)
        return decode_blocks((view[start:start + BLOCK_SIZE]
                              for start in range(0, len(view), BLOCK_SIZE)),
                             self.where, self.errors)

    def __reduce__(self) -> tuple:
        return BytesBlocks, (bytes(self.data), self.where, self.errors)


#: An integer literal that may lie beyond 64 bits, where orjson would make it a float.
_LONG_INTEGER = deferred(rb"[:\[,]\s*-?\d{19}")


def _parse_line(line: bytes, errors: str) -> object:
    import orjson  # here, not at start-up: most inputs are not JSON lines

    surrogates = False
    try:
        record = orjson.loads(line.decode("utf-8", errors) if errors != "strict" else line)
    except orjson.JSONDecodeError as error:
        if "surrogate" not in error.msg:
            raise
        if errors == "strict":
            raise ValueError(_surrogate_problem(line, error)) from None
        surrogates = True  # valid JSON that orjson refuses: Python's parser keeps them
    if surrogates or _LONG_INTEGER.search(line):  # rare: parse again, integers exact
        import json

        try:
            record = json.loads(line.decode("utf-8", errors), parse_int=_int64,
                                parse_constant=_no_constant)
        except RecursionError:
            raise ValueError("nested too deeply (at most 254 levels)") from None
    return _replace_surrogates(record) if surrogates else record


def _surrogate_problem(line: bytes, error: orjson.JSONDecodeError) -> str:
    """A lone surrogate escape (``\\ud800``, which JavaScript's ``JSON.stringify``
    writes) named where orjson found it: the column counts characters, as for
    malformed JSON."""
    escape = line.decode("utf-8", "replace")[error.pos:error.pos + 6]
    shown = f" {escape}" if re.fullmatch(r"\\u[0-9A-Fa-f]{4}", escape) else ""
    return (f"a lone surrogate{shown} at column {error.colno}: valid JSON, but not Unicode "
            "text (use --errors replace to substitute U+FFFD)")


def _no_constant(name: str) -> float:
    """Python's parser takes NaN and Infinity, which JSON (and orjson) does not."""
    raise ValueError(f"malformed JSON: {name} is not a JSON value")


_SURROGATE = deferred("[\ud800-\udfff]")


def _replace_surrogates(value: object) -> object:
    """``value`` with every lone surrogate of its strings (keys too) made U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_replace_surrogates(key): _replace_surrogates(item)
                for key, item in value.items()}
    return value


def _int64(literal: str) -> int:
    number = int(literal)
    if number not in INT_RANGE:
        raise ValueError(f"integer {literal} is beyond 64 bits, which JSON tools read "
                         "inexactly; write it as a string")
    return number


def _line_problem(line: bytes, at: int, error: ValueError) -> str:
    """Why a line is not a JSON record, naming the place."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return (f"invalid UTF-8 at byte {at + bad.start} of the input "
                "(use --errors replace to substitute U+FFFD)")
    import json

    if isinstance(error, json.JSONDecodeError):
        return f"malformed JSON at column {error.colno}: {error.msg}"
    return str(error)


def _record_problem(record: object) -> str | None:
    if not isinstance(record, dict):
        return "expected a JSON object"
    if not isinstance(record.get("text"), str):
        return 'expected a "text" field holding a string'
    clashing = sorted(RESERVED_KEYS.intersection(record) - {"text"})
    if clashing:
        return f"field {clashing[0]!r} is reserved for chunk records; rename it"
    carried = {key: value for key, value in record.items() if key != "text"}
    if carried:
        import orjson

        try:  # what every chunk record repeats must be writable (orjson's depth limit)
            orjson.dumps(carried)
        except orjson.JSONEncodeError:
            return "fields nested too deeply to copy into chunk records (at most 254 levels)"
    return None


#: Makes a FILE's document (``file_document``'s arguments): for ``documents``, the
#: readers of other kinds of files (``chunkd.inputs.file_opener``).
FileOpener = Callable[[str, str, OnBytes, "int | None"], Document]


def documents(paths: list[str], input: str, errors: str, on_bytes: OnBytes = None,
              workers_read_files: bool = False, pauses: bool = False,
              open_file: FileOpener = file_document) -> Iterator[Document | InputError | Paused]:
    """The documents the command line names, in order: each FILE (``-``, or none:
    stdin) is one document, or with ``input="ndjson"`` each of its lines; an unreadable
    one comes as an ``InputError``. With ``input`` "text" or "auto" stdin is text;
    every other input is what ``open_file`` makes of it (a text file, unless
    ``chunkd.inputs.file_opener`` tells PDF, HTML and DOCX files).
    ``workers_read_files``: files are read later by ``--jobs`` workers, so their bytes
    are not seen here. ``pauses``: NDJSON from a pipe yields a ``Paused`` where it
    waits for its writer."""
    for path in paths or ["-"]:
        if path == "-" and sys.stdin is None:  # started with stdin closed (<&-)
            yield InputError("stdin: not open (Bad file descriptor)")
            continue
        if path == "-":
            widen_pipe(sys.stdin)
        if input == "ndjson":
            if path == "-":
                yield from ndjson_documents(sys.stdin.buffer, errors, on_bytes=on_bytes,
                                            pauses=pauses)
                continue
            try:
                with open(path, "rb") as stream:
                    yield from ndjson_documents(stream, errors, display_name(path), on_bytes,
                                                pauses)
            except OSError as error:
                yield InputError(f"{display_name(path)}: {error.strerror or error}")
        elif path == "-" and input in ("text", "auto"):
            yield stream_document(sys.stdin.buffer, errors, on_bytes)
        else:
            try:
                st = os.stat(path)
                size = st.st_size if stat.S_ISREG(st.st_mode) else None  # a pipe: unknown
            except OSError:
                size = None  # reading it reports the problem
            yield open_file(path, errors, None if workers_read_files else on_bytes, size)
