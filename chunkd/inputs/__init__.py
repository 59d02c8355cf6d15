"""Documents that are not plain text, each made one text to chunk: the formats
registered in ``chunkd.inputs.base.FORMATS``, one module each (``pdf``, ``docx``,
``html``), which every front end reads through this package.

A PDF becomes its pages' text in order, ``base.PAGE_BREAK`` between pages, with the offset
where each page starts (``Extracted.page_starts``); HTML and DOCX become Markdown-like
text (headings as ``#`` lines, paragraphs, list items, tables as pipe rows), so that the
markdown and sections strategies give their chunks heading paths. Every offset of a
chunk refers to that text, which ``chunkd extract FILE`` prints.

Which format a file is: by its content first (each format's ``sniff``, in the
registry's order), then by its name's extension; anything else is text (``detect``).

Extraction runs in a long-lived worker process (``chunkd.inputs.worker``), so that a
file built to hurt cannot take the caller down: it is stopped after ``Limits.seconds``,
its memory may grow by ``worker.EXTRACT_MEMORY`` only, the text it gives is at most
``Limits.max_bytes`` of UTF-8, and a DOCX's parts may expand to at most
``DOCX_EXPANSION`` times that. Nothing is fetched, no script runs, no link is followed.
The parsers' libraries are imported only in the worker.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from chunkd.inputs.base import (DEFAULT_MAX_BYTES, DEFAULT_SECONDS, FORMATS, HEAD_BYTES,
                                   DocumentError, Extracted, Format, Limits, register)
from chunkd.options import MAX_SIZE
from chunkd.inputs.readers import (BLOCK_SIZE, Document, FileOpener, InputError, OnBytes, display_name,
                            file_document, read_blocks)

if TYPE_CHECKING:
    from chunkd.model.chunker import Source

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_SECONDS", "FORMATS", "HEAD_BYTES",
           "DocumentError", "DocumentFile", "Extracted", "Format", "Limits", "detect",
           "detect_file", "document_source", "extract", "extract_source", "file_opener",
           "register", "say_warnings"]


# --- what the registry says ------------------------------------------------------------

def kinds() -> tuple[str, ...]:
    """The formats' names: ``--input``'s choices besides ``text`` (and containers)."""
    return tuple(FORMATS)


def labels(conjunction: str = "or", *more: str) -> str:
    """The formats as messages and help name them, and ``more`` after them:
    "PDF, HTML or DOCX", "PDF, HTML, DOCX or text"."""
    names = [*(form.label for form in FORMATS.values()), *more]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"


def default_include() -> tuple[str, ...]:
    """The file names the daemon takes by default of every format."""
    return tuple(glob for form in FORMATS.values() for glob in form.include)


def markdown_like(media_type: str) -> bool:
    """Whether a format of ``media_type`` becomes Markdown-like text."""
    return any(form.markdown and form.media_type == media_type for form in FORMATS.values())


def media_type(kind: str) -> str:
    """The media type of ``kind`` (a format's name, or "text")."""
    return FORMATS[kind].media_type if kind in FORMATS else "text/plain"


# --- which format ------------------------------------------------------------------------

def detect(head: bytes, name: str | None, whole: Callable[[], bytes | str] | None) -> str:
    """The kind of a file (a format's name, or "text") from its first bytes and, failing
    that, its name; ``whole`` gives the file (its bytes or its path) to a format that
    needs more than the head to tell (None: say whether it may be one)."""
    for form in FORMATS.values():
        if form.sniff(head, whole):
            return form.name
    if name is not None:
        extension = os.path.splitext(name)[1].lower()
        for form in FORMATS.values():
            if extension in form.extensions:
                return form.name
    return "text"


def detect_bytes(data: bytes | memoryview, name: object) -> str:
    """The kind of a file given as bytes, by its content, then by ``name``'s extension
    if it is a string."""
    return detect(bytes(data[:HEAD_BYTES]), name if isinstance(name, str) else None,
                  lambda: bytes(data))


def detect_file(path: str) -> str:
    """The kind of the file at ``path``: a regular file's by its content, then its
    name; any other (a pipe, whose bytes a look would consume) by its name alone;
    "text" if it cannot be read (reading it as text then reports the problem)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return detect(b"", path, None)
        with open(path, "rb") as stream:
            head = stream.read(HEAD_BYTES)
    except OSError:
        return "text"
    return detect(head, path, lambda: path)


# --- extraction ----------------------------------------------------------------------

def extract(data: bytes, kind: str, where: str, limits: Limits,
            beat: Callable[[], None] | None = None) -> Extracted:
    """The text of the document ``data`` of ``kind``, extracted by this process's
    worker within ``limits``; every failure is an ``InputError`` naming ``where``.
    ``beat`` is called while it waits (a watchdog's sign of life)."""
    if len(data) > limits.max_bytes:
        raise InputError(f"{where}: {len(data)} bytes, over --max-bytes {limits.max_bytes}")
    form = FORMATS[kind]
    _check_library(form, where)
    # The worker (processes, sockets) only where a document is extracted: the plain
    # text filter starts without it.
    from chunkd.inputs.worker import WorkerFailed, extract_in_worker

    try:
        return extract_in_worker(data, form, limits, beat)
    except (DocumentError, WorkerFailed) as error:
        raise InputError(f"{where}: {error}") from None


def extract_source(data: bytes, name: object, where: str, limits: Limits,
                   beat: Callable[[], None] | None = None,
                   here: bool = False) -> tuple[Source, Extracted] | None:
    """A file given as bytes, if it is of a registered format: what a chunker learns
    of it (``Source``, named ``name``) and its text, extracted by the worker (``here``:
    in this process, which bounds itself); None for text."""
    kind = detect_bytes(data, name)
    if kind not in FORMATS:
        return None
    if not here:
        extracted = extract(data, kind, where, limits, beat)
    else:
        from chunkd.inputs.worker import extract_checked

        try:
            extracted = extract_checked(data, FORMATS[kind], limits)
        except DocumentError as error:
            raise InputError(f"{where}: {error}") from None
    return source_of(name, kind, extracted), extracted


def source_of(name: object, kind: str, extracted: Extracted) -> Source:
    """What a chunker learns of a document of ``kind`` with the text ``extracted``."""
    from chunkd.model.chunker import Source

    return Source(name, FORMATS[kind].media_type, extracted.page_starts)


_found: set[str] = set()


def _check_library(form: Format, where: str) -> None:
    """The format's parser library is installed (the worker imports it), or a missing
    extra is said in one line."""
    if form.library in _found:
        return
    import importlib.util  # only for a whole-document format: a plain run has no use for it

    try:
        found = importlib.util.find_spec(form.library) is not None
    except ImportError:
        found = False
    if not found:
        # Caused by the missing module, as an import would say: the daemon retries an
        # error of the installation (``cause: environment``) once the extra is there.
        raise InputError(f"{where}: reading {form.label} needs the documents extra "
                         f"({form.library.partition('.')[0]} is not installed): pip install "
                         "'.[documents]' from chunkd's folder") from ModuleNotFoundError(
            f"No module named {form.library!r}", name=form.library)
    _found.add(form.library)


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
    """A document of a registered format (None: stdin) as a reader's text blocks:
    extracted when first asked (so that a ``--jobs`` worker extracts its own files),
    then given a block at a time. Picklable before use, without ``on_bytes``."""

    def __init__(self, path: str | None, kind: str, limits: Limits,
                 on_bytes: OnBytes = None) -> None:
        self.path, self.kind, self.limits, self.on_bytes = path, kind, limits, on_bytes
        self.where = "stdin" if path is None else display_name(path)
        self.extracted: Extracted | None = None

    def extract(self) -> Extracted:
        """The document's text and page starts (extracted once)."""
        if self.extracted is None:
            data = read_document(self.path, self.limits.max_bytes, self.on_bytes)
            self.extracted = extract(data, self.kind, self.where, self.limits)
        return self.extracted

    def __iter__(self) -> Iterator[str]:
        text = self.extract().text
        return (text[start:start + BLOCK_SIZE] for start in range(0, len(text), BLOCK_SIZE))


# --- front ends ----------------------------------------------------------------------

def max_bytes_value(text: str) -> int:
    """``--max-bytes``'s value (the type of each command's): a whole number of bytes
    from 1 to ``MAX_SIZE``, which no file reaches and every count of it holds (the
    extraction's limits travel as 64-bit JSON numbers)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= number <= MAX_SIZE:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_SIZE}, got {number}")
    return number


def add_max_bytes_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                         meaning: str) -> None:
    """``--max-bytes``, declared here for every command (one name, type and default);
    ``meaning``: what the bound does in the command."""
    parser.add_argument("--max-bytes", type=max_bytes_value, default=DEFAULT_MAX_BYTES,
                        metavar="N", help=f"{meaning} (default: {DEFAULT_MAX_BYTES}, 64 MiB)")


def add_document_options(parser: argparse.ArgumentParser, max_bytes: str | None = None) -> None:
    """The options of a document's extraction (``Limits``); ``max_bytes``: what
    ``--max-bytes`` means in the command, where it bounds more than the extraction."""
    group = parser.add_argument_group(f"{labels('and')} input")
    add_max_bytes_option(group, max_bytes or f"a {labels()} file, and the text it becomes, "
                                              "may be at most N bytes; text input streams, "
                                              "unbounded")
    group.add_argument("--extract-timeout", type=float, default=DEFAULT_SECONDS,
                       metavar="SECONDS",
                       help=f"the most seconds the extraction of a {labels()} "
                            f"document's text may take (default: {DEFAULT_SECONDS:g})")
    group.add_argument("--ocr", action="store_true",
                       help="read a PDF's pages that have no text (scans) with "
                            "Tesseract (offline, within --extract-timeout; needs the ocr "
                            "extra and Debian's tesseract-ocr); without it such pages "
                            "are named on stderr")


def check_limits(parser: argparse.ArgumentParser, max_bytes: int, seconds: float,
                 ocr: bool = False) -> Limits:
    """The limits the options give, or a usage error."""
    if not 0 < seconds <= 86400:
        parser.error(f"--extract-timeout must be more than 0 and at most 86400, got {seconds:g}")
    if ocr:
        from chunkd.inputs.pdf import ocr_problem

        problem = ocr_problem()
        if problem is not None:
            parser.error(problem)
    return Limits(max_bytes, seconds, ocr)


def file_opener(input: str, limits: Limits) -> FileOpener:
    """How ``chunkd.inputs.readers.documents`` makes a FILE's document for ``--input``: "auto"
    tells each file's kind (``detect_file``), a format's name takes every input as
    that format (stdin, ``-``, too), "text" reads text; a document is extracted within
    ``limits`` when it is read."""
    def open_file(path: str, errors: str, on_bytes: OnBytes, size: int | None) -> Document:
        kind = detect_file(path) if input == "auto" else input
        if kind not in FORMATS:
            return file_document(path, errors, on_bytes, size)
        blocks = DocumentFile(None if path == "-" else path, kind, limits, on_bytes)
        return Document(path, blocks, size=size, media_type=FORMATS[kind].media_type)
    return open_file


def document_source(document: Document) -> tuple[Source, Extracted | None]:
    """What a chunker learns of ``document`` before its text (``Source``), and the text
    a document of a registered format became (extracted now: ``InputError`` if it
    cannot be; its warnings said on stderr), or None for a text document."""
    from chunkd.model.chunker import Source

    blocks = document.blocks
    if not isinstance(blocks, DocumentFile):
        return Source(document.name, document.media_type), None
    extracted = blocks.extract()
    say_warnings(blocks.where, extracted)
    return Source(document.name, document.media_type, extracted.page_starts), extracted


def say_warnings(where: str, extracted: Extracted) -> None:
    """What the extraction of the document ``where`` warns of, a line each on stderr."""
    for warning in extracted.warnings:
        print(f"chunkd: {where}: {warning}", file=sys.stderr, flush=True)


# The built-in formats register themselves on import, in the order they are sniffed.
from chunkd.inputs import pdf  # noqa: E402,F401,I001
from chunkd.inputs import html  # noqa: E402,F401
from chunkd.inputs import docx  # noqa: E402,F401
