"""DOCX: the document's body as Markdown-like text (``chunkd.documents.markdown``),
read by ``python-docx``: headings by their style (Title, Heading 1 to 9) or outline
level, list items (numbered paragraphs, List styles) by their level, tables, and runs
of preformatted paragraphs as code. Headers, footers, comments and images are left out."""

from __future__ import annotations

import io
import re
import zipfile

from chunkd.documents.base import DocumentError, Extracted, Format, Limits, Whole, register
from chunkd.documents.markdown import MarkdownText

#: A DOCX's parts may expand to this many times --max-bytes (a ZIP bomb expands more).
DOCX_EXPANSION = 4

_HEADING_STYLE = re.compile(r"heading (\d)", re.IGNORECASE)
_CODE_STYLES = frozenset({"preformatted text", "html preformatted", "source code",
                          "source text", "code"})


def docx_text(data: bytes, most_expanded: int) -> str:
    """The DOCX document's text; ``most_expanded``: the most bytes its parts may take
    uncompressed, as its ZIP directory declares them (a ZIP reader never expands a
    part past its declared size)."""
    _check_archive(data, most_expanded)
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, KeyError, ValueError) as error:
        raise DocumentError(f"not a readable DOCX ({error})") from None
    out = MarkdownText()
    code: list[str] = []
    # Style names by id, read once: python-docx looks a paragraph's style up each time.
    names = {style.style_id: style.name or "" for style in document.styles}
    default = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
    default_name = (default.name or "") if default is not None else ""

    def end_code() -> None:
        if code:
            out.code("\n".join(code))
            code.clear()

    for element in document.element.body.iterchildren():
        tag = element.tag.rpartition("}")[2]
        if tag == "tbl":
            end_code()
            table = Table(element, document)
            out.table([[cell.text for cell in row.cells] for row in table.rows])
        elif tag == "p":
            paragraph = Paragraph(element, document)
            style = names.get(element.style, default_name)
            if style.lower() in _CODE_STYLES:
                code.append(paragraph.text)
                continue
            end_code()
            _paragraph(out, paragraph, style)
    end_code()
    return out.text()


def _paragraph(out: MarkdownText, paragraph, style: str) -> None:
    text = paragraph.text
    level = _heading_level(paragraph, style)
    if level is not None:
        out.heading(level, text)
        return
    properties = paragraph._p.pPr
    numbering = properties.numPr if properties is not None else None
    if numbering is not None or style.lower().startswith("list"):
        depth = 0
        if numbering is not None and numbering.ilvl is not None:
            depth = int(numbering.ilvl.val)
        out.item(depth, text)
        return
    out.paragraph(text)


def _heading_level(paragraph, style: str) -> int | None:
    """A heading's level (1 for the Title), or None for another paragraph."""
    if style.lower() == "title":
        return 1
    match = _HEADING_STYLE.fullmatch(style.strip())
    if match:
        return min(int(match.group(1)), 6)
    properties = paragraph._p.pPr
    outline = properties.find(_OUTLINE_LEVEL) if properties is not None else None
    if outline is not None:
        value = outline.get(_VALUE)
        if value is not None and value.isdigit() and int(value) < 9:
            return min(int(value) + 1, 6)
    return None


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_OUTLINE_LEVEL, _VALUE = _W + "outlineLvl", _W + "val"


def _check_archive(data: bytes, most_expanded: int) -> None:
    """Refuse a ZIP that is not one, holds no ``word/document.xml``, or whose parts
    would expand past ``most_expanded`` bytes (a ZIP bomb)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, EOFError) as error:
        raise DocumentError(f"not a readable DOCX (not a ZIP archive: {error})") from None
    with archive:
        members = archive.infolist()
        if not any(member.filename == "word/document.xml" for member in members):
            raise DocumentError("not a DOCX: its ZIP archive holds no word/document.xml")
        expanded = sum(member.file_size for member in members)
        if expanded > most_expanded:
            raise DocumentError(f"its parts would expand to {expanded} bytes, over "
                                f"{most_expanded} ({DOCX_EXPANSION} times --max-bytes): a ZIP bomb, or "
                                "raise --max-bytes")


def holds_docx(data: bytes | str) -> bool:
    """Whether ``data`` (a ZIP's bytes, or a file's path) holds ``word/document.xml``."""
    try:
        with zipfile.ZipFile(data if isinstance(data, str) else io.BytesIO(data)) as archive:
            return "word/document.xml" in archive.NameToInfo
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False


def _sniff(head: bytes, whole: Whole | None) -> bool:
    """A ZIP archive that holds ``word/document.xml`` (without the whole file: any ZIP)."""
    return head.startswith(b"PK\x03\x04") and (whole is None or holds_docx(whole()))


def _parse(data: bytes, limits: Limits) -> Extracted:
    return Extracted(docx_text(data, DOCX_EXPANSION * limits.max_bytes))


register(Format(name="docx", label="DOCX",
                media_type="application/vnd.openxmlformats-officedocument"
                           ".wordprocessingml.document",
                extensions=(".docx",), sniff=_sniff, parse=_parse, library="docx",
                markdown=True, include=("*.docx",)))
