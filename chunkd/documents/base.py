"""What the document parsers and the package share: an extraction's result, its error,
and the break between a PDF's pages (the package imports the parsers only in the
extraction's process, and they import this, never the package)."""

from __future__ import annotations

from dataclasses import dataclass

#: Between two pages of a PDF's text.
PAGE_BREAK = "\n\f\n"


@dataclass(frozen=True)
class Extracted:
    """A document's text, and for a PDF the offset in it where each page starts
    (page 1 at 0)."""

    text: str
    page_starts: tuple[int, ...] | None = None


class DocumentError(Exception):
    """The document cannot be read as its kind; the message says why (no file name)."""
