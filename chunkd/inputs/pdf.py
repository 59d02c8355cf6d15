"""PDF: each page's text in order, by PDFium (``pypdfium2``), the page breaks known. A
page without text (a scan) is named in a warning; with ``--ocr`` it is rendered and
read by Tesseract (``tesserocr``, with Debian's ``tesseract-ocr`` language data), in
the extraction's process and within its bounds."""

from __future__ import annotations

import os

from chunkd.inputs.base import (HEAD_BYTES, PAGE_BREAK, DocumentError, Extracted, Format,
                                   Limits, Whole, register)
from chunkd.model.patterns import deferred

#: PDFium writes U+FFFE where a word was broken at a line's end after a hyphen (the
#: line break itself it leaves out): the hyphen it stands for.
_BROKEN_WORD = "\ufffe"
_LINE_BREAK = deferred(r"[ \t]*(?:\r\n?|\n)")
#: Characters a text cannot carry into JSON records: lone surrogates, NUL.
_UNWRITABLE = deferred("[\ud800-\udfff\x00]")
#: The resolution a page is rendered at for OCR (Tesseract reads best at about 300).
OCR_DPI = 300
#: The language OCR reads (Tesseract's name for it).
OCR_LANGUAGE = "eng"


def pdf_text(data: bytes, limits: Limits) -> Extracted:
    """The pages' text, ``PAGE_BREAK`` between pages, where each page starts, and a
    warning naming the pages without text (read by OCR if ``limits.ocr``)."""
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as error:
        message = str(error)
        if "password" in message.lower():
            raise DocumentError("encrypted: it needs a password to be read") from None
        raise DocumentError(f"not a readable PDF ({message})") from None
    reader = _OcrReader() if limits.ocr else None
    pages: list[str] = []
    starts: list[int] = []
    blank: list[int] = []
    offset = size = 0
    try:
        for number in range(len(document)):
            page = document[number]
            textpage = page.get_textpage()
            text = _clean(textpage.get_text_range())
            textpage.close()
            if not text.strip():
                if reader is not None:
                    text = _clean(reader.read(page))
                if not text.strip():
                    blank.append(number + 1)
            page.close()
            starts.append(offset)
            pages.append(text)
            offset += len(text) + len(PAGE_BREAK)
            size += len(text)
            if size > limits.max_bytes:  # code points: at most the bytes of their UTF-8
                raise DocumentError(f"its text is over --max-bytes {limits.max_bytes} by "
                                    f"page {number + 1}")
    except pdfium.PdfiumError as error:
        raise DocumentError(f"page {len(pages) + 1} is not readable ({error})") from None
    finally:
        if reader is not None:
            reader.close()
        document.close()
    warnings = (_blank_warning(blank, len(pages), limits.ocr),) if blank else ()
    return Extracted(PAGE_BREAK.join(pages), tuple(starts), warnings)


def _blank_warning(blank: list[int], count: int, ocr: bool) -> str:
    """One line naming the pages without text and what can be done."""
    listed = _page_list(blank)
    what = f"{listed} of {count} {'has' if len(blank) == 1 else 'have'} no text"
    if ocr:
        return f"{what}, and OCR found none"
    return f"{what} (scanned?): --ocr reads such pages with Tesseract"


def _page_list(numbers: list[int]) -> str:
    """"page 3", "pages 1-4, 7" (runs of consecutive pages joined)."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and runs[-1][1] == number - 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    spans = [str(first) if first == last else f"{first}-{last}" for first, last in runs]
    return ("page " if len(numbers) == 1 else "pages ") + ", ".join(spans)


def _clean(text: str) -> str:
    """A page's text with line breaks as ``\\n`` (no white space before them), broken
    words' hyphens back, no trailing white space, and nothing records cannot carry."""
    text = _LINE_BREAK.sub("\n", text).replace(_BROKEN_WORD, "-")
    return _UNWRITABLE.sub("\ufffd", text).rstrip()


def tessdata() -> str | None:
    """The folder of Tesseract's language data: ``TESSDATA_PREFIX``, else Debian's
    (``tesseract-ocr``'s), else None (tesserocr's own default then)."""
    given = os.environ.get("TESSDATA_PREFIX")
    if given:
        return given
    import glob

    found = sorted(glob.glob("/usr/share/tesseract-ocr/*/tessdata"))
    return found[-1] if found else None


def ocr_problem() -> str | None:
    """Why ``--ocr`` cannot run here (what to install), or None."""
    import importlib.util

    if importlib.util.find_spec("tesserocr") is None:
        return "--ocr needs tesserocr: pip install '.[ocr]' from chunkd's folder"
    folder = tessdata()
    if folder is None or not os.path.isfile(os.path.join(folder, f"{OCR_LANGUAGE}.traineddata")):
        return (f"--ocr needs Tesseract's {OCR_LANGUAGE} language data: apt-get install "
                "tesseract-ocr (or set TESSDATA_PREFIX to its folder)")
    return None


class _OcrReader:
    """Tesseract, started once for a document's pages without text."""

    def __init__(self) -> None:
        problem = ocr_problem()
        if problem is not None:
            raise DocumentError(problem)
        import tesserocr

        folder = tessdata()
        self.api = tesserocr.PyTessBaseAPI(
            **({"path": folder.rstrip("/") + "/"} if folder else {}), lang=OCR_LANGUAGE)

    def read(self, page) -> str:
        """The text of ``page`` (a pypdfium2 page), rendered in grey at ``OCR_DPI``."""
        bitmap = page.render(scale=OCR_DPI / 72, grayscale=True)
        self.api.SetImageBytes(bytes(bitmap.buffer), bitmap.width, bitmap.height,
                               bitmap.n_channels, bitmap.stride)
        text = self.api.GetUTF8Text()
        bitmap.close()
        return text

    def close(self) -> None:
        self.api.End()


def _sniff(head: bytes, whole: Whole | None) -> bool:
    """``%PDF-`` in the first KiB, as readers find it (bytes may come before it), but
    after nothing that reads as text: a note or a web page that mentions the header is
    not a PDF (its name may still say it is one)."""
    at = head.find(b"%PDF-", 0, HEAD_BYTES)
    return at == 0 or at > 0 and (not head[:at].strip() or not _reads_as_text(head[:at]))


def _reads_as_text(data: bytes) -> bool:
    """Whether ``data`` is UTF-8 of printable characters and white space."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return False
    return all(character.isprintable() or character in "\t\n\r\f" for character in text)


register(Format(name="pdf", label="PDF", media_type="application/pdf", extensions=(".pdf",),
                sniff=_sniff, parse=pdf_text, library="pypdfium2", paged=True,
                include=("*.pdf",)))
