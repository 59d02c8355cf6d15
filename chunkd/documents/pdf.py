"""PDF: each page's text in order, by PDFium (``pypdfium2``), the page breaks known."""

from __future__ import annotations

import re

from chunkd.documents.base import PAGE_BREAK, DocumentError, Extracted

#: PDFium writes U+FFFE where a word was broken at a line's end after a hyphen (the
#: line break itself it leaves out): the hyphen it stands for.
_BROKEN_WORD = "\ufffe"
_LINE_BREAK = re.compile(r"[ \t]*(?:\r\n?|\n)")
#: Characters a text cannot carry into JSON records: lone surrogates, NUL.
_UNWRITABLE = re.compile("[\ud800-\udfff\x00]")


def pdf_text(data: bytes, max_bytes: int) -> Extracted:
    """The pages' text, ``PAGE_BREAK`` between pages, and where each page starts."""
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as error:
        message = str(error)
        if "password" in message.lower():
            raise DocumentError("encrypted: it needs a password to be read") from None
        raise DocumentError(f"not a readable PDF ({message})") from None
    pages: list[str] = []
    starts: list[int] = []
    offset = size = 0
    try:
        for number in range(len(document)):
            page = document[number]
            textpage = page.get_textpage()
            text = _clean(textpage.get_text_range())
            textpage.close()
            page.close()
            starts.append(offset)
            pages.append(text)
            offset += len(text) + len(PAGE_BREAK)
            size += len(text)
            if size > max_bytes:  # code points: at most the bytes of their UTF-8
                raise DocumentError(f"its text is over --max-bytes {max_bytes} by page "
                                    f"{number + 1}")
    except pdfium.PdfiumError as error:
        raise DocumentError(f"page {len(pages) + 1} is not readable ({error})") from None
    finally:
        document.close()
    return Extracted(PAGE_BREAK.join(pages), tuple(starts))


def _clean(text: str) -> str:
    """A page's text with line breaks as ``\\n`` (no white space before them), broken
    words' hyphens back, no trailing white space, and nothing records cannot carry."""
    text = _LINE_BREAK.sub("\n", text).replace(_BROKEN_WORD, "-")
    return _UNWRITABLE.sub("\ufffd", text).rstrip()
