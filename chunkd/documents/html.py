"""HTML: the document's text as Markdown-like text (``chunkd.documents.markdown``),
parsed by Lexbor (``selectolax``), an HTML5 parser: what a browser would build,
without running a script, loading a resource or following a link."""

from __future__ import annotations

from chunkd.documents.base import DocumentError, Extracted, Format, Limits, Whole, register
from chunkd.documents.markdown import MarkdownText

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


def html_text(data: bytes) -> str:
    """The HTML document's text (its encoding: a BOM, a ``<meta charset>``, else UTF-8)."""
    from selectolax.lexbor import LexborHTMLParser, SelectolaxError

    try:
        tree = LexborHTMLParser(data)
    except SelectolaxError:  # HTML5 parsing takes any bytes: Lexbor fails when it cannot allocate
        raise MemoryError from None
    except Exception as error:  # the parser refuses input it cannot take
        raise DocumentError(f"not a readable HTML document ({error})") from None
    root = tree.root
    out = MarkdownText()
    if root is not None:
        _Walk(out).block(root)
    return out.text()


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
    """An HTML doctype or ``<html>`` first (after a BOM and white space)."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").lower().startswith((b"<!doctype html", b"<html"))


def _parse(data: bytes, limits: Limits) -> Extracted:
    return Extracted(html_text(data))


register(Format(name="html", label="HTML", media_type="text/html",
                extensions=(".html", ".htm", ".xhtml"), sniff=_sniff, parse=_parse,
                library="selectolax.lexbor", markdown=True,
                include=("*.html", "*.htm")))
