"""HTML: the document's text as Markdown-like text (``chunkd.inputs.markdown``),
parsed by Lexbor (``selectolax``), an HTML5 parser: what a browser would build,
without running a script, loading a resource or following a link. Its bytes are
decoded as a browser decodes them (``decoded``): Lexbor reads UTF-8 only. Its nesting
is bounded first, as a browser bounds it (``within_bounds``): Lexbor's time grows with
the square of the depth."""

from __future__ import annotations

import codecs
import re
from itertools import islice

from chunkd.inputs.base import DocumentError, Extracted, Format, Limits, Whole, register
from chunkd.inputs.markdown import MarkdownText
from chunkd.model.patterns import deferred

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


# --- a bound on the depth Lexbor builds -------------------------------------------------

#: The most elements open at once (the HTML5 stack of open elements) that a document
#: is parsed with, as Chromium's parser bounds it: beyond it an element is made the
#: next sibling of the innermost one (that one is closed first), not its child.
#: Lexbor's tree building walks that stack for many tags, so its time grows with the
#: square of the depth (200,000 nested ``<div>`` took more than a minute).
MAX_DEPTH = 512
#: The most formatting elements (``<b>``, ``<font>``, ...) left open at once beyond
#: which another's tags are dropped (its text kept): each one left open is made again
#: inside every later block (the HTML5 "active formatting elements"), a tree that
#: grows with the square of their number, and with each paragraph by as many
#: elements (200,000 ``<b id=N><p>x`` made 6 million with 32 and ran out of memory).
#: They are inline: the text is the same.
MAX_FORMATTING = 8
#: The most start tags one ``<select>`` is parsed with, options or any other (Lexbor
#: builds any element inside a select, and its time grows with the square of their
#: number or depth); a select's content is not the document's text anyway.
MAX_IN_SELECT = 1024
#: The most attributes a tag is parsed with, further ones dropped (Lexbor compares
#: each with those before it: 100,000 on one tag took 22 s); and the most that the
#: ``<html>`` and ``<body>`` tags may give their element, a repeated one's merged
#: into the first one's (HTML5), beyond which a repeated tag's are dropped. The
#: extraction reads no attribute.
MAX_ATTRIBUTES = 1024
#: A document with fewer tags than this is parsed as it is (no bound can be reached).
_FEW_TAGS = 2048
#: The largest document the pass reads (about 2.5 us a tag: 1.2 s for 16 MiB of
#: ordinary HTML, seven times Lexbor's own parse); a larger one is parsed as it is,
#: within the extraction's time and memory bounds, so that a large page pays no more
#: than those bounds allow (the pass over 500 MiB took 38 s before Lexbor began).
MAX_SCANNED = 16 << 20

_WS = rb"[\t\n\f\r ]"
#: A tag as the HTML5 tokenizer reads it: the name, then attributes, a value quoted
#: only right after its "=" (an "=" or a quote anywhere else is part of a name).
_ATTRIBUTE_IN_TAG = (rb"[^\t\n\f\r />][^\t\n\f\r />=]*+(?>" + _WS + rb"*+=" + _WS + rb"*+"
                     rb"(?>\"[^\"]*+\"|'[^']*+'|[^\t\n\f\r >]*+))?+")
_TAG = deferred(rb"<(/?)([A-Za-z][^\t\n\f\r />]*+)(?>" + _WS + rb"++|/(?!>)|"
                + _ATTRIBUTE_IN_TAG + rb")*+(/?)>")
#: One attribute, from where the one before it (or the tag's name) ends: what lies
#: between two is white space and slashes.
_ATTRIBUTES = deferred(_ATTRIBUTE_IN_TAG)
_MARKUP = deferred(rb"<[!?/A-Za-z]")
_COMMENT_END = deferred(rb"--!?>")

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "image", "input",
                  "keygen", "link", "meta", "param", "source", "track", "wbr", "basefont",
                  "bgsound", "frame"})
RAW_TEXT = frozenset({"script", "style", "xmp", "iframe", "noembed", "noframes",
                      "textarea", "title"})
FORMATTING = frozenset({"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small",
                        "strike", "strong", "tt", "u"})
#: HTML5's "special" elements (an end tag of another element stops at them).
SPECIAL = frozenset({
    "address", "applet", "area", "article", "aside", "base", "basefont", "bgsound",
    "blockquote", "body", "br", "button", "caption", "center", "col", "colgroup", "dd",
    "details", "dir", "div", "dl", "dt", "embed", "fieldset", "figcaption", "figure",
    "footer", "form", "frame", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head",
    "header", "hgroup", "hr", "html", "iframe", "img", "input", "keygen", "li", "link",
    "listing", "main", "marquee", "menu", "meta", "nav", "noembed", "noframes", "noscript",
    "object", "ol", "p", "param", "plaintext", "pre", "script", "search", "section",
    "select", "source", "style", "summary", "table", "tbody", "td", "template", "textarea",
    "tfoot", "th", "thead", "title", "tr", "track", "ul", "wbr", "xmp",
    "mi", "mo", "mn", "ms", "mtext", "annotation-xml", "foreignobject", "desc"})
#: Where "in scope" stops (HTML5's default scope), and its variants.
SCOPE = frozenset({"applet", "caption", "html", "table", "td", "th", "marquee", "object",
                   "template", "mi", "mo", "mn", "ms", "mtext", "annotation-xml",
                   "foreignobject", "desc", "title"})
BUTTON_SCOPE = SCOPE | {"button"}
LIST_SCOPE = SCOPE | {"ol", "ul"}
TABLE_SCOPE = frozenset({"html", "table", "template"})
#: The elements whose start tag closes an open ``<p>`` (in button scope).
CLOSES_P = frozenset({
    "address", "article", "aside", "blockquote", "center", "details", "dialog", "dir",
    "div", "dl", "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main",
    "menu", "nav", "ol", "p", "search", "section", "summary", "ul", "h1", "h2", "h3",
    "h4", "h5", "h6", "pre", "listing", "form", "plaintext", "xmp", "hr"})
TABLE_PARTS = frozenset({"caption", "col", "colgroup", "tbody", "td", "tfoot", "th",
                         "thead", "tr"})
#: Start tags that end foreign content (SVG, MathML).
BREAKOUT = frozenset({
    "b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt",
    "em", "embed", "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li",
    "listing", "menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s", "small", "span",
    "strong", "strike", "sub", "sup", "table", "tt", "u", "ul", "var", "font"})
INTEGRATION = frozenset({"foreignobject", "desc", "title", "mi", "mo", "mn", "ms", "mtext"})
MARKERS = frozenset({"applet", "object", "marquee", "td", "th", "caption", "template"})
_MARKER = ""


class _OpenElements:
    """A model of the HTML5 tree builder's stack of open elements, on a document's
    tags, in time linear in them: it pops an element only where the tree builder
    surely pops it, so its depth bounds the builder's (a few elements a tree builder
    adds on its own, as a table's ``<tbody>``, aside). It records the edits that keep
    it within ``MAX_DEPTH``, ``MAX_FORMATTING``, ``MAX_IN_SELECT`` and (for the
    attributes ``<html>`` and ``<body>`` merge) ``MAX_ATTRIBUTES``."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.foreign: list[bool] = []
        #: The indices of the open elements of each kind (``_KINDS``), so that a scope
        #: is known without walking the stack; and of the HTML elements (not SVG's
        #: nor MathML's).
        self.of_kind: dict[str, list[int]] = {kind: [-1] for kind in _KINDS}
        self.html_below: list[int] = [-1]
        self.where: dict[str, list[int]] = {}
        self.formatting: list[str] = []  # names, and markers ("")
        self.formatting_open = 0
        self.in_select = 0
        #: The attributes the ``<html>`` and ``<body>`` tags gave their element so far.
        self.merged = {"html": 0, "body": 0}
        self.edits: list[tuple[int, int, bytes]] = []
        self.push("html")
        self.push("body")  # these two are never popped

    # the stack

    def top(self) -> int:
        return len(self.names) - 1

    def topmost(self, name: str) -> int:
        found = self.where.get(name)
        return found[-1] if found else -1

    def push(self, name: str, foreign: bool = False) -> None:
        index = len(self.names)
        self.names.append(name)
        self.foreign.append(foreign)
        self.where.setdefault(name, []).append(index)
        for kind in (_FOREIGN_KINDS if foreign else _HTML_KINDS).get(name, ()):
            self.of_kind[kind].append(index)
        if not foreign:
            self.html_below.append(index)
        if name in MARKERS and not foreign:
            self.formatting.append(_MARKER)

    def pop(self) -> None:
        name = self.names.pop()
        foreign = self.foreign.pop()
        self.where[name].pop()
        for kind in (_FOREIGN_KINDS if foreign else _HTML_KINDS).get(name, ()):
            self.of_kind[kind].pop()
        if not foreign:
            self.html_below.pop()
        if name in MARKERS and not foreign:
            while self.formatting and self.formatting.pop() != _MARKER:
                self.formatting_open -= 1
        if name == "select" and self.topmost("select") < 2:
            self.in_select = 0

    def pop_to(self, index: int) -> None:
        """Pop the element at ``index`` and those above it (never html, body)."""
        while len(self.names) > max(index, 2):
            self.pop()

    def above(self, index: int, kind: str) -> bool:
        """Whether the element at ``index`` (not html nor body) is open with no element
        of ``kind`` above it."""
        return index >= 2 and index >= self.of_kind[kind][-1]

    # the tags

    def start(self, name: str, self_closing: bool, span: tuple[int, int],
              attributes: int = 0) -> str | None:
        """Model a start tag (with its number of ``attributes``, counted for ``<html>``
        and ``<body>`` only); its name where its content is raw text."""
        top = self.top()
        if self.foreign[top] and self.names[top] not in INTEGRATION:
            if name not in BREAKOUT:
                if not self_closing:
                    self.bounded_push(name, span, foreign=True)
                return None  # raw text only in HTML
            while self.foreign[-1] and self.names[-1] not in INTEGRATION:
                self.pop()
        if name in self.merged and attributes:
            # A repeated one's attributes join the element's, each compared with those
            # it has: beyond the bound, the tag is written without them.
            self.merged[name] += attributes
            if self.merged[name] > MAX_ATTRIBUTES:
                self.edit(span, b"<" + name.encode() + b">")
        select = self.topmost("select")
        if select >= 2:
            # Lexbor parses a select's content as a body's (HTML5 as revised in 2025):
            # another select or an input closes it where it is in scope.
            if name in ("select", "input") and self.above(select, "scope"):
                self.pop_to(select)
                if name == "select":
                    return None
            else:  # dropped beyond the bound: a select's content is not the text
                self.in_select += 1
                if self.in_select > MAX_IN_SELECT:
                    self.edit(span, b"")
                    return None
                if name == "optgroup" and self.names[-1] == "optgroup":
                    self.pop()
        if name in ("html", "body", "head"):
            return None
        if name in TABLE_PARTS and not self.table_parts(name):
            return None
        if name in CLOSES_P and self.above(self.topmost("p"), "button"):
            self.pop_to(self.topmost("p"))
        if name in HEADING_NAMES and self.names[-1] in HEADING_NAMES:
            self.pop()
        elif name == "li" and self.above(self.topmost("li"), "li_stop"):
            self.pop_to(self.topmost("li"))
        elif name in ("dd", "dt"):
            item = max(self.topmost("dd"), self.topmost("dt"))
            if self.above(item, "dd_stop"):
                self.pop_to(item)
        elif name in ("option", "optgroup") and self.names[-1] == "option":
            self.pop()
        elif name == "button" and self.above(self.topmost("button"), "scope"):
            self.pop_to(self.topmost("button"))
        elif name == "table" and self.names[-1] in ("table", "tbody", "thead", "tfoot", "tr"):
            self.pop_to(self.topmost("table"))
        elif name in ("a", "nobr") and self.topmost(name) >= 2:
            self.end(name)
        if self.names[-1] == "colgroup" and name != "col":
            self.pop()
        if name in VOID or ((name in ("svg", "math")) and self_closing):
            return None
        if name in FORMATTING:
            if self.formatting_open >= MAX_FORMATTING:
                self.edits.append((*span, b""))
                return None
            self.formatting.append(name)
            self.formatting_open += 1
        if not self.bounded_push(name, span, foreign=name in ("svg", "math")):
            return None
        return name if name in RAW_TEXT or name == "plaintext" else None

    def edit(self, span: tuple[int, int], replacement: bytes) -> None:
        """Replace the tag at ``span`` (or the edit of it made already)."""
        if self.edits and self.edits[-1][:2] == span:
            self.edits[-1] = (*span, replacement)
        else:
            self.edits.append((*span, replacement))

    def bounded_push(self, name: str, span: tuple[int, int], foreign: bool) -> bool:
        """Push, within ``MAX_DEPTH``: at the bound, the innermost element is closed
        first (its end tag put before this start tag), or the tag is dropped where its
        end tag would not surely close it. Whether it was pushed."""
        if len(self.names) >= MAX_DEPTH:
            innermost = self.names[-1]
            self.end(innermost)
            if len(self.names) >= MAX_DEPTH:
                self.edits.append((*span, b""))
                return False
            self.edits.append((span[0], span[0], b"</" + innermost.encode("latin-1") + b">"))
        self.push(name, foreign)
        return True

    def table_parts(self, name: str) -> bool:
        """Model a table part's start tag; whether it is then pushed (it is ignored
        outside a table)."""
        table, template = self.topmost("table"), self.topmost("template")
        if template > table:
            return True
        if table < 2:
            return False
        if name in ("td", "th", "tr", "tbody", "thead", "tfoot", "caption", "colgroup"):
            cell = max(self.topmost("td"), self.topmost("th"))
            if self.above(cell, "table"):
                self.pop_to(cell)
        if name in ("tr", "tbody", "thead", "tfoot", "caption", "colgroup"):
            if self.above(self.topmost("tr"), "table"):
                self.pop_to(self.topmost("tr"))
        if name in ("tbody", "thead", "tfoot", "caption", "colgroup"):
            section = max(self.topmost(part) for part in ("tbody", "thead", "tfoot"))
            if self.above(section, "table"):
                self.pop_to(section)
        return name != "col"

    def end(self, name: str) -> None:
        """Model an end tag."""
        top = self.top()
        if self.foreign[top]:
            found = self.topmost(name)
            if found > self.html_below[-1]:
                self.pop_to(found)
                return
        if name in ("html", "body", "br"):
            return
        if name in FORMATTING:
            for index in range(len(self.formatting) - 1, -1, -1):
                entry = self.formatting[index]
                if entry == _MARKER:
                    break
                if entry == name:
                    del self.formatting[index]
                    self.formatting_open -= 1
                    break
            if self.above(self.topmost(name), "special"):
                self.pop_to(self.topmost(name))
        elif name == "p":
            if self.above(self.topmost("p"), "button"):
                self.pop_to(self.topmost("p"))
        elif name == "li":
            if self.above(self.topmost("li"), "list"):
                self.pop_to(self.topmost("li"))
        elif name in HEADING_NAMES:
            heading = max(self.topmost(level) for level in HEADING_NAMES)
            if self.above(heading, "scope"):
                self.pop_to(heading)
        elif name in TABLE_PARTS or name == "table":
            if self.above(self.topmost(name), "table"):
                self.pop_to(self.topmost(name))
        elif name == "template":
            self.pop_to(self.topmost("template"))
        elif name == "select":
            if self.above(self.topmost("select"), "scope"):
                self.pop_to(self.topmost("select"))
        elif name in SPECIAL:
            if name in RAW_TEXT or name in ("option", "optgroup", "head", "frameset",
                                            "noscript"):
                if self.names[-1] == name:
                    self.pop()
            elif self.above(self.topmost(name), "scope"):
                self.pop_to(self.topmost(name))
        elif self.above(self.topmost(name), "special"):
            self.pop_to(self.topmost(name))


HEADING_NAMES = frozenset(HEADINGS)
#: The kinds of element a scope is made of (``_OpenElements.of_kind``).
_KINDS = {"special": SPECIAL, "scope": SCOPE, "button": BUTTON_SCOPE, "list": LIST_SCOPE,
          "table": TABLE_SCOPE, "li_stop": SPECIAL - {"address", "div", "p", "li"},
          "dd_stop": SPECIAL - {"address", "div", "p", "dd", "dt"}}


def _kinds_of(foreign: bool) -> dict[str, tuple[str, ...]]:
    """For each element name of some kind, its kinds: of the HTML elements, or of the
    foreign ones (SVG's and MathML's integration points and ``annotation-xml``)."""
    names = set().union(*_KINDS.values())
    if foreign:
        names &= INTEGRATION | {"annotation-xml"}
    return {name: tuple(kind for kind, members in _KINDS.items() if name in members)
            for name in names}


_HTML_KINDS = _kinds_of(False)
_FOREIGN_KINDS = _kinds_of(True)


def within_bounds(data: bytes) -> bytes:
    """``data``, an HTML document in UTF-8, with its nesting within ``MAX_DEPTH`` (an
    element beyond it made a sibling of the innermost one), its open formatting
    elements within ``MAX_FORMATTING`` and a select's tags within ``MAX_IN_SELECT``
    (their tags dropped, their text kept), a tag's attributes, and those ``<html>``
    and ``<body>`` merge, within ``MAX_ATTRIBUTES``; the document itself where it is within
    them, as nearly every one is. One pass over its tags, modelling the HTML5 tree
    builder (``_OpenElements``)."""
    if len(data) > MAX_SCANNED or data.count(b"<") < _FEW_TAGS:
        return data
    model = _OpenElements()
    position, length = 0, len(data)
    markup, tag = _MARKUP.search, _TAG.match
    while (found := markup(data, position)) is not None:
        at = found.start()
        second = data[at + 1:at + 2]
        if second == b"!":
            if data.startswith(b"<!--", at):
                if data.startswith((b"<!-->", b"<!--->"), at):
                    position = data.index(b">", at + 4) + 1
                    continue
                end = _COMMENT_END.search(data, at + 4)
                if end is None:
                    break
                position = end.end()
            elif data.startswith(b"<![CDATA[", at) and model.foreign[-1]:
                end_at = data.find(b"]]>", at)
                if end_at < 0:
                    break
                position = end_at + 3
            else:
                end_at = data.find(b">", at)
                if end_at < 0:
                    break
                position = end_at + 1
            continue
        if second == b"?" or (second == b"/" and not data[at + 2:at + 3].isalpha()):
            if data.startswith(b"</>", at):
                position = at + 3
                continue
            end_at = data.find(b">", at)
            if end_at < 0:
                break
            position = end_at + 1
            continue
        matched = tag(data, at)
        if matched is None:  # the end of the document within a tag: no more tags
            break
        position = matched.end()
        name = matched.group(2).lower().decode("latin-1")
        many = position - at > 2 * MAX_ATTRIBUTES  # room for more than the bound
        if matched.group(1):
            model.end(name)
            raw = None
        else:
            counted = (sum(1 for _ in islice(_ATTRIBUTES.finditer(
                data, matched.end(2), matched.start(3)), MAX_ATTRIBUTES + 1))
                if name in model.merged else 0)
            raw = model.start(name, bool(matched.group(3)), (at, position), counted)
        if many and not (model.edits and model.edits[-1][:2] == (at, position)):
            _drop_attributes(model, matched)
        if raw == "plaintext":
            break
        if raw is not None:
            end = re.compile(rb"</" + raw.encode() + rb"[\t\n\f\r />]",
                             re.IGNORECASE).search(data, position)
            if end is None:
                break
            position = end.start()
    if not model.edits:
        return data
    parts, last = [], 0
    for start, end_at, replacement in model.edits:
        parts += [data[last:start], replacement]
        last = end_at
    parts.append(data[last:length])
    return b"".join(parts)


def _drop_attributes(model: _OpenElements, tag: re.Match[bytes]) -> None:
    """The attributes of ``tag`` beyond ``MAX_ATTRIBUTES`` dropped (the tag's end, with
    a self-closing slash apart from the last value kept, left)."""
    attributes = list(islice(_ATTRIBUTES.finditer(tag.string, tag.end(2), tag.start(3)),
                             MAX_ATTRIBUTES + 1))
    if len(attributes) > MAX_ATTRIBUTES:
        model.edits.append((attributes[MAX_ATTRIBUTES - 1].end(), tag.start(3),
                            b" " if tag.group(3) else b""))


def html_extracted(data: bytes) -> Extracted:
    """The HTML document's text (its encoding: a BOM, a ``<meta charset>``, else UTF-8:
    see ``decoded``), and a warning where its declared encoding is unknown."""
    from selectolax.lexbor import LexborHTMLParser, SelectolaxError

    document, warning = decoded(data)
    encoded = document.encode() if isinstance(document, str) else document
    bounded = within_bounds(encoded)
    if bounded is not encoded:
        document = bounded
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
