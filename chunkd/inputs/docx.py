"""DOCX: the document's body as Markdown-like text (``chunkd.inputs.markdown``),
read by ``python-docx``: headings by their style (Title, Heading 1 to 9) or outline
level, list items (numbered paragraphs, List styles) by their level, tables, and runs
of preformatted paragraphs as code. Headers, footers, comments and images are left out."""

from __future__ import annotations

import io
import re

from chunkd.inputs.base import DocumentError, Extracted, Format, Limits, Whole, register
from chunkd.inputs.markdown import MarkdownText
from chunkd.model.patterns import deferred

#: A DOCX's parts may expand to this many times --max-bytes (a ZIP bomb expands more).
DOCX_EXPANSION = 4

_HEADING_STYLE = deferred(r"heading (\d)", re.IGNORECASE)
_CODE_STYLES = frozenset({"preformatted text", "html preformatted", "source code",
                          "source text", "code"})


def docx_text(data: bytes, most_expanded: int) -> str:
    """The DOCX document's text; ``most_expanded``: the most bytes its parts may take
    uncompressed, as its ZIP directory declares them (a ZIP reader never expands a
    part past its declared size)."""
    _check_archive(data, most_expanded)
    import zipfile  # here and below: a run that meets no ZIP starts without it

    # python-docx's XML parser (no entities resolved, nothing fetched) and its element
    # classes, for its tables' grid of cells; the two parts read are parsed directly,
    # not the whole package as docx.Document does (a third of the time a document).
    from docx.oxml.parser import parse_xml
    from docx.table import Table
    from lxml.etree import XMLSyntaxError

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            body = parse_xml(archive.read("word/document.xml")).find(_BODY)
            styles = (parse_xml(archive.read("word/styles.xml"))
                      if "word/styles.xml" in archive.NameToInfo else None)
    except (XMLSyntaxError, zipfile.BadZipFile, KeyError, ValueError) as error:
        raise DocumentError(f"not a readable DOCX ({error})") from None
    if body is None:
        raise DocumentError("not a readable DOCX (its document has no body)")
    out = MarkdownText()
    code: list[str] = []
    names, default_name = _style_names(styles)

    def end_code() -> None:
        if code:
            out.code("\n".join(code))
            code.clear()

    for element in body.iterchildren():
        tag = element.tag.rpartition("}")[2]
        if tag == "tbl":
            end_code()
            table = Table(element, None)  # type: ignore[arg-type]  # cells need no package
            out.table([["\n".join(map(paragraph_text, cell._tc.iterchildren(_P)))
                         for cell in row.cells] for row in table.rows])
        elif tag == "p":
            style = names.get(_style_id(element) or "", default_name)
            if style.lower() in _CODE_STYLES:
                code.append(paragraph_text(element))
                continue
            end_code()
            _paragraph(out, element, style)
    end_code()
    return out.text()


def _style_names(styles) -> tuple[dict[str, str], str]:
    """The paragraph styles' names by id, and the default paragraph style's name, from
    the ``w:styles`` element ``styles`` (as python-docx's ``Styles`` gives them, but
    for letter case, which is not compared)."""
    names: dict[str, str] = {}
    default = ""
    for style in styles.iterchildren(_W + "style") if styles is not None else ():
        named = style.find(_W + "name")
        name = (named.get(_VALUE) or "") if named is not None else ""
        names[style.get(_W + "styleId") or ""] = name
        if (style.get(_W + "type", "paragraph") == "paragraph"
                and style.get(_W + "default") in ("1", "true", "on")):
            default = name  # the last default one, as the specification says
    return names, default


def paragraph_text(paragraph) -> str:
    """A ``w:p`` element's text, as python-docx's ``Paragraph.text`` gives it (its runs
    and its hyperlinks' runs: text, tabs, line breaks, non-breaking hyphens), read
    from the XML directly: python-docx asks XPath for each run, the most of its time."""
    parts: list[str] = []
    for child in paragraph:
        if child.tag == _RUN:
            runs = (child,)
        elif child.tag == _HYPERLINK:
            runs = child.iterchildren(_RUN)
        else:
            continue
        for run in runs:
            for item in run:
                tag = item.tag
                if tag == _TEXT:
                    parts.append(item.text or "")
                elif tag == _BREAK:
                    parts.append("\n" if item.get(_TYPE, "textWrapping") == "textWrapping" else "")
                elif tag in _SIGNS:
                    parts.append(_SIGNS[tag])
    return "".join(parts)


def _style_id(paragraph) -> str | None:
    properties = paragraph.find(_PROPERTIES)
    style = properties.find(_STYLE) if properties is not None else None
    return style.get(_VALUE) if style is not None else None


def _paragraph(out: MarkdownText, paragraph, style: str) -> None:
    text = paragraph_text(paragraph)
    properties = paragraph.find(_PROPERTIES)
    level = _heading_level(properties, style)
    if level is not None:
        out.heading(level, text)
        return
    numbering = properties.find(_NUMBERING) if properties is not None else None
    if numbering is not None or style.lower().startswith("list"):
        depth = 0
        level_element = numbering.find(_LEVEL) if numbering is not None else None
        if level_element is not None:
            depth = int(level_element.get(_VALUE))
        out.item(depth, text)
        return
    out.paragraph(text)


def _heading_level(properties, style: str) -> int | None:
    """A heading's level (1 for the Title), or None for another paragraph (its
    ``w:pPr`` element ``properties``, if any)."""
    if style.lower() == "title":
        return 1
    match = _HEADING_STYLE.fullmatch(style.strip())
    if match:
        return min(int(match.group(1)), 6)
    outline = properties.find(_OUTLINE_LEVEL) if properties is not None else None
    if outline is not None:
        value = outline.get(_VALUE)
        if value is not None and value.isdigit() and int(value) < 9:
            return min(int(value) + 1, 6)
    return None


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_OUTLINE_LEVEL, _VALUE = _W + "outlineLvl", _W + "val"
_BODY, _P, _PROPERTIES, _STYLE = _W + "body", _W + "p", _W + "pPr", _W + "pStyle"
_NUMBERING, _LEVEL = _W + "numPr", _W + "ilvl"
_RUN, _HYPERLINK, _TEXT, _BREAK, _TYPE = _W + "r", _W + "hyperlink", _W + "t", _W + "br", _W + "type"
#: What a run's other text elements stand for (python-docx's ``str`` of each).
_SIGNS = {_W + "tab": "\t", _W + "ptab": "\t", _W + "cr": "\n", _W + "noBreakHyphen": "-"}


def _check_archive(data: bytes, most_expanded: int) -> None:
    """Refuse a ZIP that is not one, holds no ``word/document.xml``, or whose parts
    would expand past ``most_expanded`` bytes (a ZIP bomb)."""
    import zipfile

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
    import zipfile

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
