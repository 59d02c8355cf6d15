"""The markdown strategy: Markdown sections, each cut by the recursive splitter.

A section is what the ``sections`` window strategy takes for one (an ATX heading line
outside fenced code, to the next one; the text before the first heading); each section's
text is split exactly as ``RecursiveCharacterTextSplitter`` splits it alone, never across
a section boundary, and every chunk carries its section's heading path.

It streams: the section scanner (``chunkd._windows.SectionScanner``) reports a section as
soon as its heading line is complete and says up to where no new section can start
(``settled``); text up to there goes at once to the current section's recursive
splitter, so the only text held here is a line that may still turn out to be a heading,
and the white space that begins a document: until the first section is known, that
white space may belong to the text before the first heading (a section) or to no
section (a heading comes first), and LangChain's splitter can make a chunk even of white
space (a space is as long as a size of 1). A piece fed whole (``split_text``) is held
whole until the next feed, and each section's text is sliced from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chunkd.chunk import Chunk
from chunkd.strategies import Chunker, Strategy, register
from chunkd.strategies.recursive import Recursive

if TYPE_CHECKING:
    from chunkd.settings import Settings


@register
class Markdown(Strategy):
    """Markdown sections, then LangChain's recursive splitting inside each, in code
    points or cl100k_base tokens; ``headings`` on every chunk."""

    name = "markdown"
    units = ("chars", "tokens")
    default_size = 1000
    fields = ("headings",)
    strips_headings = True

    @classmethod
    def default_overlap(cls, size: int) -> int:
        return Recursive.default_overlap(size)

    @classmethod
    def splitter(cls, settings: Settings) -> Chunker:
        return MarkdownSplitter(Recursive.splitter(settings), settings.strip_headings)


class MarkdownSplitter:
    """Sections of one document at a time, each split by ``splitter`` (a recursive
    splitter, reused from section to section)."""

    def __init__(self, splitter: Chunker, strip_headings: bool) -> None:
        from chunkd._windows import SectionScanner

        self.scanner = SectionScanner()
        self.splitter = splitter
        self.strip_headings = strip_headings
        self._start_document()

    def _start_document(self) -> None:
        self.held = ""           # the document from ``base`` on
        self.base = 0            # document offset of held[0]
        self.given = 0           # the document before this went to a splitter (or nowhere)
        self.body = 0            # where the current section's split text starts
        self.headings: tuple[str, ...] = ()
        self.started = False     # the first section is known
        self.next_index = 0

    def feed(self, text: str) -> list[Chunk]:
        """Take the next piece of the document; return the chunks now final."""
        # What was given is dropped here, once a feed, not at every section: a large
        # piece holds many sections, and cutting the rest off at each would copy it as
        # many times.
        self.held = self.held[self.given - self.base:] + text
        self.base = self.given
        chunks = self._sections(self.scanner.feed(text))
        if self.started:
            chunks += self._placed(self.splitter.feed(self._take(self.scanner.settled)))
        return chunks

    def finish(self) -> list[Chunk]:
        """End the document; return its last chunks."""
        chunks = self._sections(self.scanner.finish())
        if self.started:
            chunks += self._end_section(self.base + len(self.held))
        self._start_document()
        return chunks

    def _sections(self, starts: list[tuple[int, tuple[str, ...]]]) -> list[Chunk]:
        """End the current section at each new section's start, and begin the next."""
        chunks: list[Chunk] = []
        for offset, headings in starts:
            if self.started:
                chunks += self._end_section(offset)
            else:                         # white space before a first heading is nobody's
                self.started = True
                self._take(offset)
            self.headings = headings
            self.body = self._line_end(offset) if self.strip_headings and headings else offset
        return chunks

    def _end_section(self, end: int) -> list[Chunk]:
        return self._placed(self.splitter.feed(self._take(end)) + self.splitter.finish())

    def _line_end(self, start: int) -> int:
        """The end of the heading line at ``start`` (complete, since it was reported)."""
        newline = self.held.find("\n", start - self.base)
        return self.base + (len(self.held) if newline < 0 else newline + 1)

    def _take(self, upto: int) -> str:
        """The current section's text from ``given`` to ``upto``, without its heading
        line when headings are stripped; it is given."""
        start = max(self.given, self.body)
        piece = self.held[start - self.base:upto - self.base] if upto > start else ""
        self.given = upto
        return piece

    def _placed(self, chunks: list[Chunk]) -> list[Chunk]:
        """Chunks of the current section's split text as chunks of the document."""
        placed = []
        for chunk in chunks:
            placed.append(chunk._replace(index=self.next_index, start=self.body + chunk.start,
                                         end=self.body + chunk.end, headings=self.headings))
            self.next_index += 1
        return placed
