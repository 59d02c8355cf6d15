"""HTML: the document's text as Markdown-like text (``chunkd.documents.markdown``),
parsed by Lexbor (``selectolax``), an HTML5 parser: what a browser would build,
without running a script, loading a resource or following a link. Its bytes are
decoded as a browser decodes them (``decoded``): Lexbor reads UTF-8 only."""

from __future__ import annotations

import codecs
import re

from chunkd.documents.base import DocumentError, Extracted, Format, Limits, Whole, register
from chunkd.documents.markdown import MarkdownText
from chunkd.patterns import deferred

#: Elements whose content is not the document's text.
SKIPPED = frozenset({"head", "script", "style", "noscript", "template", "iframe", "object",
                     "embed", "svg", "math", "canvas", "select", "textarea", "button",
                     "-comment", "-doctype"})
HEADINGS = {f"h{level}": level for level in range(1, 7)}
LISTS = frozenset({"ul", "ol", "menu"})
#: Elements that end the paragraph before them and start a new one.
BLOCKS = frozenset({"p", "div", "section", "article", "main", "header", "footer", "nav",
                    "aside", "address", "blockquote", "figure", "figcaption", "form",
                    "fieldset", "details", "summary", "dl", "dt", "dd", "hr", "center",
                    "body", "html", "li", "caption", "legend", "hgroup", "search"})


#: Byte-order marks and their encodings, UTF-32's before UTF-16's (whose marks begin
#: them). The WHATWG's own list has no UTF-32; a browser reads it as garbage.
BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"))
#: How much of the document a ``<meta>`` that declares its encoding is looked for in.
PRESCAN_BYTES = 1024
#: The decoders the WHATWG Encoding Standard gives labels that Python's codecs name
#: otherwise (by the codec's name): browsers read Latin-1 and ASCII as windows-1252,
#: Shift_JIS with Microsoft's extensions, and so on. A declared UTF-16 is read as
#: UTF-8 (a ``<meta>`` readable as ASCII cannot be UTF-16).
WHATWG_DECODERS = {
    "ascii": "cp1252", "iso8859-1": "cp1252", "iso8859-9": "cp1254",
    "iso8859-11": "cp874", "tis-620": "cp874", "shift_jis": "cp932", "euc_kr": "cp949",
    "gb2312": "gb18030", "gbk": "gb18030", "big5": "big5hkscs",
    "utf-16": "utf-8", "utf-16-le": "utf-8", "utf-16-be": "utf-8",
}
#: The WHATWG's labels that Python's codecs do not know (by the codec they name).
WHATWG_LABELS = {
    "windows-31j": "cp932", "x-sjis": "cp932", "x-mac-cyrillic": "mac-cyrillic",
    "x-mac-ukrainian": "mac-cyrillic", "windows-874": "cp874", "dos-874": "cp874",
    "iso-8859-8-i": "iso8859-8", "csiso88598i": "iso8859-8", "logical": "iso8859-8",
    "unicode-1-1-utf-8": "utf-8", "unicode11utf8": "utf-8", "unicode20utf8": "utf-8",
    "x-unicode20utf8": "utf-8", "x-gbk": "gb18030", "x-euc-jp": "euc_jp",
    "x-user-defined": "cp1252", "ucs-2": "utf-8", "unicodefffe": "utf-8",
    **{f"x-cp125{digit}": f"cp125{digit}" for digit in range(9)},
}
#: The codecs a label may name (the WHATWG's encodings): not Python's others, such as
#: UTF-7, ``unicode_escape`` or ``base64``.
DECODERS = frozenset({
    "utf-8", "cp866", "iso8859-2", "iso8859-3", "iso8859-4", "iso8859-5", "iso8859-6",
    "iso8859-7", "iso8859-8", "iso8859-10", "iso8859-13", "iso8859-14", "iso8859-15",
    "iso8859-16", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "cp874", "cp1250",
    "cp1251", "cp1252", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258",
    "gb18030", "big5hkscs", "euc_jp", "iso2022_jp", "cp932", "cp949"})
_COMMENT_OR_TAG = deferred(
    rb"<!--.*?-->|<meta[\t\n\f\r /]((?:\"[^\"]*\"|'[^']*'|[^'\">])*)>|<[^>]*>",
    re.DOTALL | re.IGNORECASE)
_ATTRIBUTE = deferred(rb"""([^\t\n\f\r />=][^\t\n\f\r /=>]*)\s*"""
                        rb"""(?:=\s*("[^"]*"|'[^']*'|[^\t\n\f\r >]*))?""")
_CONTENT_CHARSET = deferred(rb"""charset\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\t\n\f\r ;]+))""",
                              re.IGNORECASE)


def decoded(data: bytes) -> tuple[bytes | str, str | None]:
    """The document for Lexbor, decoded as a browser decodes it (the WHATWG's order: a
    BOM, else a ``<meta charset>`` or ``<meta http-equiv="Content-Type">`` among the
    first ``PRESCAN_BYTES``, else UTF-8; bytes invalid in it become U+FFFD, as Lexbor
    makes invalid UTF-8), or the bytes themselves where they are UTF-8; and a warning
    where a declared encoding is unknown (then UTF-8 too)."""
    for mark, encoding in BOMS:
        if data.startswith(mark):  # not part of the text (Lexbor would keep a UTF-8 one)
            rest = data[len(mark):]
            return (rest if encoding == "utf-8" else rest.decode(encoding, "replace")), None
    unknown = None
    for label in _declared(data[:PRESCAN_BYTES]):
        declared = decoder(label)
        if declared is not None:
            return (data if declared == "utf-8" else data.decode(declared, "replace")), None
        unknown = unknown or label
    if unknown is not None:
        return data, (f"its <meta> declares the encoding {unknown[:40]!a}, "
                      "unknown: read as UTF-8")
    return data, None


def decoder(label: str) -> str | None:
    """The Python codec that decodes what the WHATWG's encoding ``label`` names, or
    None if it names none."""
    label = label.strip("\t\n\f\r ").lower()
    try:
        name = WHATWG_LABELS.get(label) or codecs.lookup(label).name
    except (LookupError, ValueError):  # ValueError: a NUL in it
        return None
    name = WHATWG_DECODERS.get(name, name)
    return name if name in DECODERS else None


def _declared(head: bytes) -> list[str]:
    """The encodings the ``<meta>`` elements in ``head`` declare, in order (comments
    and other tags skipped, as a browser's prescan skips them)."""
    labels = []
    for tag in _COMMENT_OR_TAG.finditer(head):
        if tag.group(1) is None:
            continue
        attributes: dict[bytes, bytes] = {}
        for name, value in _ATTRIBUTE.findall(tag.group(1)):
            quoted = value[:1] in (b'"', b"'")
            attributes.setdefault(name.lower(), value[1:-1] if quoted else value)
        if b"charset" in attributes:
            labels.append(attributes[b"charset"].decode("latin-1"))
        elif (attributes.get(b"http-equiv", b"").lower() == b"content-type"
              and (found := _CONTENT_CHARSET.search(attributes.get(b"content", b"")))):
            labels.append(next(part for part in found.groups() if part is not None)
                          .decode("latin-1"))
    return labels


def html_extracted(data: bytes) -> Extracted:
    """The HTML document's text (its encoding: a BOM, a ``<meta charset>``, else UTF-8:
    see ``decoded``), and a warning where its declared encoding is unknown."""
    from selectolax.lexbor import LexborHTMLParser, SelectolaxError

    document, warning = decoded(data)
    try:
        tree = LexborHTMLParser(document)
    except SelectolaxError:  # HTML5 parsing takes any bytes: Lexbor fails when it cannot allocate
        raise MemoryError from None
    except Exception as error:  # the parser refuses input it cannot take
        raise DocumentError(f"not a readable HTML document ({error})") from None
    root = tree.root
    out = MarkdownText()
    if root is not None:
        _Walk(out).block(root)
    return Extracted(out.text(), warnings=() if warning is None else (warning,))


class _Walk:
    """One pass over the tree: inline text gathers in ``pending`` until a block ends
    the paragraph it belongs to."""

    def __init__(self, out: MarkdownText) -> None:
        self.out = out
        self.pending: list[str] = []

    def flush(self) -> None:
        if self.pending:
            self.out.paragraph("".join(self.pending))
            self.pending = []

    def block(self, node) -> None:
        """The content of ``node``, its inline text into paragraphs: down the tree with
        a stack of the elements open (no recursion: a page nested thousands deep, as
        unclosed tags make it, is walked like any other, in linear time)."""
        # Each open element: its children still to walk, and whether it is a block
        # (whose end ends the paragraph).
        open_elements = [(node.iter(include_text=True), False)]
        while open_elements:
            children, ends_paragraph = open_elements[-1]
            child = next(children, None)
            if child is None:
                open_elements.pop()
                if ends_paragraph:
                    self.flush()
                continue
            tag = child.tag
            if tag == "-text":
                self.pending.append(child.text_content or "")
            elif tag in SKIPPED:
                continue
            elif tag == "br":
                self.pending.append("\n")
            elif tag in HEADINGS:
                self.flush()
                self.out.heading(HEADINGS[tag], text_of(child))
            elif tag in LISTS:
                self.flush()
                self.list(child)
            elif tag == "table":
                self.flush()
                self.out.table(rows_of(child))
            elif tag == "pre":
                self.flush()
                self.out.code(child.text(deep=True) or "")
            elif tag in BLOCKS:
                self.flush()
                open_elements.append((child.iter(include_text=True), True))
            else:  # inline: its text joins the paragraph (a block inside still ends it)
                open_elements.append((child.iter(include_text=True), False))

    def list(self, node) -> None:
        """A list's items, a line each, nested lists indented below their item (a
        stack of the lists open, each with its depth)."""
        open_lists = [(node.iter(), 0)]
        while open_lists:
            items, depth = open_lists[-1]
            item = next(items, None)
            if item is None:
                open_lists.pop()
                continue
            if item.tag != "li":
                if item.tag in LISTS:
                    open_lists.append((item.iter(), depth + 1))
                continue
            words: list[str] = []
            nested = []
            for child in item.iter(include_text=True):
                if child.tag in LISTS:
                    nested.append(child)
                elif child.tag == "-text":
                    words.append(child.text_content or "")
                elif child.tag not in SKIPPED:
                    words.append(text_of(child))
            self.out.item(depth, " ".join(words))
            # the nested lists come before the next item (the last nested one on top)
            open_lists.extend((inner.iter(), depth + 1) for inner in reversed(nested))


def text_of(node) -> str:
    """All the text inside ``node``, skipped elements left out."""
    words: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.tag == "-text":
            words.append(current.text_content or "")
        elif current.tag == "br":
            words.append(" ")
        elif current.tag not in SKIPPED:
            children = list(current.iter(include_text=True))
            if current.tag in BLOCKS or current.tag in HEADINGS:
                words.append(" ")
            stack.extend(reversed(children))
    return "".join(words)


def rows_of(node) -> list[list[str]]:
    """A table's rows (its own, not a nested table's), each a list of cell texts."""
    rows: list[list[str]] = []
    for child in node.iter():
        if child.tag == "tr":
            rows.append([text_of(cell) for cell in child.iter() if cell.tag in ("td", "th")])
        elif child.tag in ("thead", "tbody", "tfoot"):
            rows.extend(rows_of(child))
    return rows


def _sniff(head: bytes, whole: Whole | None) -> bool:
    """An HTML doctype or ``<html>`` first (after a BOM, in its encoding, and white
    space)."""
    for mark, encoding in BOMS:
        if head.startswith(mark):
            start = head[len(mark):].decode(encoding, "replace").lstrip(" \t\r\n")
            return start.lower().startswith(("<!doctype html", "<html"))
    return head.lstrip(b" \t\r\n").lower().startswith((b"<!doctype html", b"<html"))


def _parse(data: bytes, limits: Limits) -> Extracted:
    return html_extracted(data)


register(Format(name="html", label="HTML", media_type="text/html",
                extensions=(".html", ".htm", ".xhtml"), sniff=_sniff, parse=_parse,
                library="selectolax.lexbor", markdown=True,
                include=("*.html", "*.htm")))
