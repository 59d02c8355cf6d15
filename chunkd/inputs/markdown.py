"""The Markdown-like text HTML and DOCX become: blocks in document order, a blank line
between two blocks (a line break between two list items), headings as ``#`` lines,
list items as ``- `` lines indented by depth (to ``MOST_INDENTED``), tables as pipe rows under a header row,
code in fences. Inline text is one line with its white space collapsed."""

from __future__ import annotations

from chunkd.model.patterns import deferred

_SPACE = deferred(r"[ \t\n\r\f\v]+")
#: What starts a heading line or a code fence.
_OPENS_BLOCK = deferred(r"#|```|~~~")
#: The deepest list level indented deeper than the one above it (Word's lists have 9
#: levels, 0 to 8): deeper items stay at its indentation, as headings stop at ``######``,
#: so that a small file of lists nested thousands deep does not grow with the square of
#: its depth (270 KB took the extraction to its 2 GiB).
MOST_INDENTED = 8


def inline(text: str) -> str:
    """Text as one line: runs of white space (not no-break spaces) made one space."""
    return _SPACE.sub(" ", text).strip()


class MarkdownText:
    """Collects a document's blocks; ``text()`` joins them."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0           # code points so far
        self.item_last = False  # whether the last block is a list item

    def _add(self, block: str, item: bool = False) -> None:
        if self.parts:
            self.parts.append("\n" if item and self.item_last else "\n\n")
        self.parts.append(block)
        self.size += len(block) + 2
        self.item_last = item

    def heading(self, level: int, text: str) -> None:
        text = inline(text)
        if text:
            self._add("#" * min(max(level, 1), 6) + " " + text)

    def paragraph(self, text: str) -> None:
        text = inline(text)
        if text:
            # A paragraph that would read as a heading or a code fence keeps its first
            # character as a character.
            self._add("\\" + text if _OPENS_BLOCK.match(text) else text)

    def item(self, depth: int, text: str) -> None:
        text = inline(text)
        if text:
            self._add("  " * min(depth, MOST_INDENTED) + "- " + text, item=True)

    def code(self, text: str) -> None:
        text = text.strip("\n")
        if text.strip():
            fence = "```"
            while fence in text:
                fence += "`"
            self._add(f"{fence}\n{text}\n{fence}")

    def table(self, rows: list[list[str]]) -> None:
        rows = [[inline(cell).replace("|", "\\|") for cell in row] for row in rows]
        rows = [row for row in rows if any(row)]
        if not rows:
            return
        width = max(len(row) for row in rows)
        lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in rows]
        lines.insert(1, "|" + " --- |" * width)
        self._add("\n".join(lines))

    def text(self) -> str:
        return "".join(self.parts)
