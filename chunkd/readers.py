"""Input readers: bytes in, documents of decoded text out.

A document is read as a stream of text blocks, so that the kernel can chunk it while
it arrives and memory never holds more than a block.  Every problem with the input
is raised as ``InputError`` with a message that names the document and the place.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import orjson

BLOCK_SIZE = 1 << 18

#: Keys of a chunk record; an NDJSON input line may not use them for its own fields.
RESERVED_KEYS = frozenset({"doc", "index", "start", "end", "length", "text"})


class InputError(Exception):
    """Input that cannot be read or decoded; the message says what and where."""


@dataclass
class Document:
    """One input document: its name (None for stdin), its text blocks, and the
    extra fields of its NDJSON line, which are copied into every chunk record."""

    name: str | int | None
    blocks: Iterable[str]
    fields: dict = field(default_factory=dict)


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


def decode_blocks(blocks: Iterable[bytes], where: str, errors: str = "strict") -> Iterator[str]:
    """Decode UTF-8 incrementally; invalid bytes raise ``InputError`` with their
    byte offset, or become U+FFFD with ``errors="replace"``."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors)
    offset = 0                         # bytes of the input before this block
    for data in blocks:
        held = len(decoder.getstate()[0])  # bytes of a split character held back
        try:
            text = decoder.decode(data)
        except UnicodeDecodeError as error:
            raise InputError(f"{where}: invalid UTF-8 at byte {offset - held + error.start}"
                             " (use --errors replace to substitute U+FFFD)") from None
        offset += len(data)
        if text:
            yield text
    held = len(decoder.getstate()[0])
    try:
        text = decoder.decode(b"", final=True)
    except UnicodeDecodeError as error:
        raise InputError(f"{where}: invalid UTF-8 at byte {offset - held + error.start}"
                         " (truncated character at the end)") from None
    if text:
        yield text


class FileBlocks:
    """A file's decoded text blocks, opened only when iterated; picklable (without
    ``on_bytes``), so that ``--jobs`` workers can read their own files."""

    def __init__(self, path: str, errors: str, on_bytes: OnBytes = None) -> None:
        self.path, self.errors, self.on_bytes = path, errors, on_bytes

    def __iter__(self) -> Iterator[str]:
        return decode_blocks(self._raw_blocks(), self.path, self.errors)

    def _raw_blocks(self) -> Iterator[bytes]:
        try:
            stream = open(self.path, "rb")
        except OSError as error:
            raise InputError(f"{self.path}: {error.strerror or error}") from None
        with stream:
            try:
                yield from read_blocks(stream, self.on_bytes)
            except OSError as error:
                raise InputError(f"{self.path}: read failed: {error.strerror or error}") from None


def file_document(path: str, errors: str, on_bytes: OnBytes = None) -> Document:
    """The file at ``path`` as one document; ``on_bytes`` sees every raw block."""
    return Document(path, FileBlocks(path, errors, on_bytes))


def stream_document(stream: BinaryIO, errors: str, on_bytes: OnBytes = None) -> Document:
    """A byte stream (stdin) as one unnamed document."""
    return Document(None, decode_blocks(read_blocks(stream, on_bytes), "stdin", errors))


def ndjson_documents(stream: BinaryIO, errors: str, where: str = "stdin",
                     on_bytes: OnBytes = None) -> Iterator[Document | InputError]:
    """One document per line ``{"text": ..., "id": ...}``; a bad line is yielded as an
    ``InputError`` (naming its line number) so that the lines after it still count.
    A line without ``"id"`` is named by its line number."""
    for number, line in enumerate(iter(stream.readline, b""), start=1):
        if on_bytes is not None:
            on_bytes(line)
        if not line.strip():
            continue
        try:
            record = orjson.loads(line.decode("utf-8", errors) if errors != "strict" else line)
        except (orjson.JSONDecodeError, UnicodeDecodeError) as error:
            yield InputError(f"{where}: line {number}: malformed JSON at column "
                             f"{getattr(error, 'colno', '?')}: {getattr(error, 'msg', error)}")
            continue
        problem = _ndjson_problem(record)
        if problem:
            yield InputError(f"{where}: line {number}: {problem}")
            continue
        name = record.pop("id", number)
        text = record.pop("text")
        yield Document(name, [text] if text else [], record)


def _ndjson_problem(record: object) -> str | None:
    if not isinstance(record, dict):
        return "expected a JSON object"
    if not isinstance(record.get("text"), str):
        return 'expected a "text" field holding a string'
    clashing = sorted(RESERVED_KEYS.intersection(record) - {"text"})
    if clashing:
        return f"field {clashing[0]!r} is reserved for chunk records; rename it"
    return None

