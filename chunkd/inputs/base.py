"""What the formats and the package share: the registry of input formats (one ``Format``
declared in each format's module), what an extraction is given (``Limits``) and gives
(``Extracted``), its error, and the break between a PDF's pages. The format modules
import this, never the package; their parsers' libraries are imported only in the
extraction's process."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

#: Between two pages of a PDF's text.
PAGE_BREAK = "\n\f\n"

DEFAULT_MAX_BYTES = 64 * 2**20
DEFAULT_SECONDS = 60.0
#: How much of a file's head a format's ``sniff`` is shown.
HEAD_BYTES = 1024


class Limits(NamedTuple):
    """What one document's extraction may take: bytes of input and of extracted text
    (``--max-bytes``), and seconds (``--extract-timeout``); and whether a page without
    text is read by OCR (``--ocr``)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    seconds: float = DEFAULT_SECONDS
    ocr: bool = False


class Extracted(NamedTuple):
    """A document's text; for a PDF the offset in it where each page starts (page 1 at
    0); and what the reader should be told of it (one line each, no file name), such
    as the pages that have no text."""

    text: str
    page_starts: tuple[int, ...] | None = None
    warnings: tuple[str, ...] = ()


class DocumentError(Exception):
    """The document cannot be read as its kind; the message says why (no file name)."""


#: A file as a whole, for a sniffer that needs more than its head: its bytes, or its
#: path. None in its place: say from the head alone whether the file may be one.
Whole = Callable[[], "bytes | str"]


class Format(NamedTuple):
    """One input format besides text: how a file is told to be one (``sniff`` its head,
    then its name's ``extensions``), what it is called (``name``, ``--input``'s choice;
    ``label``, in messages), its ``media_type``, its ``parse`` (run in the extraction's
    bounded process, ``library`` imported there: a missing one is a missing extra),
    whether its text has pages (``paged``: ``Extracted.page_starts``) or is
    Markdown-like (``markdown``: the auto strategy then takes the markdown strategy),
    and the names the daemon takes by default (``include``)."""

    name: str
    label: str
    media_type: str
    extensions: tuple[str, ...]
    sniff: Callable[[bytes, Whole | None], bool]
    parse: Callable[[bytes, Limits], Extracted]
    library: str
    paged: bool = False
    markdown: bool = False
    include: tuple[str, ...] = ()


#: Every registered format by name, in the order they are sniffed.
FORMATS: dict[str, Format] = {}


def register(form: Format) -> Format:
    """Add ``form`` to the registry (the same name again replaces it)."""
    FORMATS[form.name] = form
    return form
