"""Documents that are not plain text: PDF, HTML and DOCX, each made one text to chunk.

A PDF becomes its pages' text in order, ``base.PAGE_BREAK`` between pages, with the offset
where each page starts (``Extracted.page_starts``); HTML and DOCX become Markdown-like
text (headings as ``#`` lines, paragraphs, list items, tables as pipe rows), so that the
markdown and sections strategies give their chunks heading paths. Every offset of a
chunk refers to that text, which ``chunkd extract FILE`` prints.

Which kind a file is: by its content first (``%PDF-``, a ZIP holding
``word/document.xml``, an HTML doctype or ``<html>``), then by its name's extension;
anything else is text (``detect``).

Extraction runs in a process forked for the document (``extract``), so that a file
built to hurt cannot take the caller down: it is killed after ``Limits.seconds``, its
memory may grow by ``EXTRACT_MEMORY`` only, the text it gives is at most
``Limits.max_bytes`` of UTF-8, and a DOCX's parts may expand to at most
``DOCX_EXPANSION`` times that. Nothing is fetched, no script runs, no link is followed.
The parsers (``pdf``, ``html``, ``docx``) are imported only in that process.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import signal
import stat
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from chunkd.child import TooLong, limit_memory, read_until_end
from chunkd.documents.base import DocumentError, Extracted
from chunkd.readers import (BLOCK_SIZE, Document, FileOpener, InputError, OnBytes, display_name,
                            file_document, read_blocks)

if TYPE_CHECKING:
    from chunkd.readers import Document
    from chunkd.strategies.base import Source

#: The kinds of input ``--input`` names besides ``text`` and the container formats.
KINDS = ("pdf", "html", "docx")
MEDIA_TYPES = {
    "pdf": "application/pdf",
    "html": "text/html",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}
EXTENSIONS = {".pdf": "pdf", ".html": "html", ".htm": "html", ".xhtml": "html",
              ".docx": "docx"}

DEFAULT_MAX_BYTES = 64 * 2**20
DEFAULT_SECONDS = 60.0
#: The memory (address space) an extraction's process may take beyond its parent's.
EXTRACT_MEMORY = 2 * 2**30
#: A DOCX's parts may expand to this many times --max-bytes (a ZIP bomb expands more).
DOCX_EXPANSION = 4
#: How much of a file's head ``detect`` reads.
HEAD_BYTES = 1024


@dataclass(frozen=True)
class Limits:
    """What one document's extraction may take: bytes of input and of extracted text
    (``--max-bytes``), and seconds (``--extract-timeout``)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    seconds: float = DEFAULT_SECONDS


# --- which kind ----------------------------------------------------------------------

def detect(head: bytes, name: str | None, is_docx: Callable[[], bool]) -> str:
    """The kind of a file ("pdf", "html", "docx" or "text") from its first bytes and,
    failing that, its name; ``is_docx`` says whether the file (a ZIP) holds
    ``word/document.xml``."""
    if b"%PDF-" in head[:HEAD_BYTES]:  # the specification allows bytes before it
        return "pdf"
    if head.startswith(b"PK\x03\x04") and is_docx():
        return "docx"
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith((b"<!doctype html", b"<html")):
        return "html"
    if name is not None:
        return EXTENSIONS.get(os.path.splitext(name)[1].lower(), "text")
    return "text"


def holds_docx(data: bytes | str) -> bool:
    """Whether ``data`` (a ZIP's bytes, or a file's path) holds ``word/document.xml``."""
    try:
        with zipfile.ZipFile(data if isinstance(data, str) else io.BytesIO(data)) as archive:
            return "word/document.xml" in archive.NameToInfo
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False


def detect_file(path: str) -> str:
    """The kind of the file at ``path``: a regular file's by its content, then its
    name; any other (a pipe, whose bytes a look would consume) by its name alone;
    "text" if it cannot be read (reading it as text then reports the problem)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return detect(b"", path, lambda: False)
        with open(path, "rb") as stream:
            head = stream.read(HEAD_BYTES)
    except OSError:
        return "text"
    return detect(head, path, lambda: holds_docx(path))


# --- extraction ----------------------------------------------------------------------

def extract_here(data: bytes, kind: str, max_bytes: int) -> Extracted:
    """The document's text, in this process; ``DocumentError`` if it is not one."""
    if kind == "pdf":
        from chunkd.documents.pdf import pdf_text
        return pdf_text(data, max_bytes)
    if kind == "html":
        from chunkd.documents.html import html_text
        return Extracted(html_text(data))
    if kind == "docx":
        from chunkd.documents.docx import docx_text
        return Extracted(docx_text(data, DOCX_EXPANSION * max_bytes))
    raise ValueError(f"not a document kind: {kind!r}")


def extract_checked(data: bytes, kind: str, max_bytes: int) -> Extracted:
    """``extract_here``, its text at most ``max_bytes`` of UTF-8, every failure a
    ``DocumentError`` (for a process that bounds its own time and memory)."""
    try:
        extracted = extract_here(data, kind, max_bytes)
    except DocumentError:
        raise
    except MemoryError:
        raise DocumentError(f"extracting its text needs more than the "
                            f"{EXTRACT_MEMORY // 2**30} GiB of memory it may take") from None
    except RecursionError:
        raise DocumentError("nested too deeply to read") from None
    except Exception as error:  # a parser's fault on a malformed file: said, in one line
        raise DocumentError(f"not a readable {kind.upper()} "
                            f"({type(error).__name__}: {error})") from None
    size = len(extracted.text.encode("utf-8", "replace"))
    if size > max_bytes:
        raise DocumentError(f"its text is {size} bytes, over --max-bytes {max_bytes}")
    return extracted


def extract(data: bytes, kind: str, where: str, limits: Limits,
            beat: Callable[[], None] | None = None) -> Extracted:
    """The text of the document ``data`` of ``kind``, extracted in a process forked for
    it within ``limits``; every failure is an ``InputError`` naming ``where``.
    ``beat`` is called while it waits (a watchdog's sign of life)."""
    if len(data) > limits.max_bytes:
        raise InputError(f"{where}: {len(data)} bytes, over --max-bytes {limits.max_bytes}")
    _import_parser(kind, where)
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as error:
        os.close(read_end)
        os.close(write_end)
        raise InputError(f"{where}: cannot start its extraction: "
                         f"{error.strerror or error}") from None
    if pid == 0:
        os.close(read_end)
        _extract_in_child(write_end, data, kind, limits)
    os.close(write_end)
    try:
        answer = read_until_end(read_end, time.monotonic() + limits.seconds,
                                2 * limits.max_bytes + (1 << 20), beat)
    except TooLong:
        answer = b"E" + f"its text is over --max-bytes {limits.max_bytes}".encode()
    finally:
        os.close(read_end)
        os.kill(pid, signal.SIGKILL)  # at the limit; or a process already ending
        _, ended = os.waitpid(pid, 0)
    if answer is None:
        raise InputError(f"{where}: extracting its text took more than "
                         f"{limits.seconds:g} s (--extract-timeout)")
    if answer[:1] == b"E":
        raise InputError(f"{where}: {answer[1:].decode('utf-8', 'replace')}")
    if answer[:1] != b"T":
        how = (f"signal {signal.Signals(os.WTERMSIG(ended)).name}"
               if os.WIFSIGNALED(ended) else f"status {os.WEXITSTATUS(ended)}")
        raise InputError(f"{where}: extracting its text failed: its process ended with "
                         f"{how}")
    head_end = answer.index(b"\n")
    starts = orjson.loads(answer[1:head_end])
    return Extracted(answer[head_end + 1:].decode("utf-8"),
                     None if starts is None else tuple(starts))


#: The library each kind's parser uses.
PARSERS = {"pdf": "pypdfium2", "html": "selectolax.lexbor", "docx": "docx"}


def _import_parser(kind: str, where: str) -> None:
    """Import the kind's parser here, once, so that every extraction's process has it
    from its parent (importing python-docx takes longer than reading a document); a
    missing extra is said in one line."""
    try:
        importlib.import_module(PARSERS[kind])
    except ImportError as error:
        raise InputError(f"{where}: reading {kind.upper()} needs the documents extra "
                         f"({error.name} is not installed): pip install '.[documents]' "
                         "from chunkd's folder") from None


def _extract_in_child(out: int, data: bytes, kind: str, limits: Limits) -> None:
    """An extraction's process: write ``T``, the page starts as JSON, a newline and the
    text as UTF-8; or ``E`` and why not."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent kills it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(limits.seconds) + 5)  # ends it even if the parent was killed
        limit_memory(EXTRACT_MEMORY)
        try:
            extracted = extract_checked(data, kind, limits.max_bytes)
            answer = (b"T" + orjson.dumps(extracted.page_starts) + b"\n"
                      + extracted.text.encode("utf-8", "replace"))
        except DocumentError as error:
            answer = b"E" + str(error).encode("utf-8", "replace")
        view = memoryview(answer)
        while view:
            view = view[os.write(out, view):]
    finally:
        os._exit(0)


def read_document(path: str | None, max_bytes: int, on_bytes: OnBytes = None) -> bytes:
    """The bytes of the file at ``path`` (None: stdin), at most ``max_bytes``
    (``InputError`` past); ``on_bytes`` sees each block read."""
    where = "stdin" if path is None else display_name(path)
    try:
        stream = sys.stdin.buffer if path is None else open(path, "rb")
    except OSError as error:
        raise InputError(f"{where}: {error.strerror or error}") from None
    data = bytearray()
    try:
        for block in read_blocks(stream, on_bytes):
            data += block
            if len(data) > max_bytes:
                raise InputError(f"{where}: over --max-bytes {max_bytes} bytes")
    except OSError as error:
        raise InputError(f"{where}: read failed: {error.strerror or error}") from None
    finally:
        if path is not None:
            stream.close()
    return bytes(data)


class DocumentFile:
    """A PDF, HTML or DOCX file (None: stdin) as a reader's text blocks: extracted when
    first asked (so that a ``--jobs`` worker extracts its own files), then given a
    block at a time. Picklable before use, without ``on_bytes``."""

    def __init__(self, path: str | None, kind: str, limits: Limits,
                 on_bytes: OnBytes = None) -> None:
        self.path, self.kind, self.limits, self.on_bytes = path, kind, limits, on_bytes
        self.extracted: Extracted | None = None

    def extract(self) -> Extracted:
        """The document's text and page starts (extracted once)."""
        if self.extracted is None:
            data = read_document(self.path, self.limits.max_bytes, self.on_bytes)
            where = "stdin" if self.path is None else display_name(self.path)
            self.extracted = extract(data, self.kind, where, self.limits)
        return self.extracted

    def __iter__(self) -> Iterator[str]:
        text = self.extract().text
        return (text[start:start + BLOCK_SIZE] for start in range(0, len(text), BLOCK_SIZE))


# --- front ends ----------------------------------------------------------------------

def add_document_options(parser: argparse.ArgumentParser, max_bytes: bool = True) -> None:
    """The options that bound a document's extraction (``Limits``); ``max_bytes``:
    the command has no ``--max-bytes`` of its own yet."""
    group = parser.add_argument_group("PDF, HTML and DOCX input")
    if max_bytes:
        group.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, metavar="N",
                           help="a PDF, HTML or DOCX file, and the text it becomes, may be "
                                f"at most N bytes (default: {DEFAULT_MAX_BYTES}, 64 MiB); "
                                "text input streams, unbounded")
    group.add_argument("--extract-timeout", type=float, default=DEFAULT_SECONDS,
                       metavar="SECONDS",
                       help="the most seconds the extraction of a PDF, HTML or DOCX "
                            f"document's text may take (default: {DEFAULT_SECONDS:g})")


def check_limits(parser: argparse.ArgumentParser, max_bytes: int, seconds: float) -> Limits:
    """The limits the options give, or a usage error."""
    if max_bytes < 1:
        parser.error(f"--max-bytes must be at least 1, got {max_bytes}")
    if not 0 < seconds <= 86400:
        parser.error(f"--extract-timeout must be more than 0 and at most 86400, got {seconds:g}")
    return Limits(max_bytes, seconds)


def file_opener(input: str, limits: Limits) -> FileOpener:
    """How ``chunkd.readers.documents`` makes a FILE's document for ``--input``: "auto"
    tells each file's kind (``detect_file``), "pdf", "html" or "docx" takes every input
    as that kind (stdin, ``-``, too), "text" reads text; a document is extracted
    within ``limits`` when it is read."""
    def open_file(path: str, errors: str, on_bytes: OnBytes, size: int | None) -> Document:
        kind = detect_file(path) if input == "auto" else input
        if kind not in KINDS:
            return file_document(path, errors, on_bytes, size)
        blocks = DocumentFile(None if path == "-" else path, kind, limits, on_bytes)
        return Document(path, blocks, size=size, media_type=MEDIA_TYPES[kind])
    return open_file


def document_source(document: Document) -> tuple[Source, Extracted | None]:
    """What a chunker learns of ``document`` before its text (``Source``), and the text
    a PDF, HTML or DOCX document became (extracted now: ``InputError`` if it cannot
    be), or None for a text document."""
    from chunkd.strategies.base import Source

    blocks = document.blocks
    if not isinstance(blocks, DocumentFile):
        return Source(document.name, document.media_type), None
    extracted = blocks.extract()
    return Source(document.name, document.media_type, extracted.page_starts), extracted
