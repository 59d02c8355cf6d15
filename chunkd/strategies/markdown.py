"""The markdown strategy: Markdown sections, each cut by the recursive splitter.

A section is what the ``sections`` window strategy takes for one (an ATX heading line
outside fenced code, to the next one; the text before the first heading); each section's
text is split exactly as ``RecursiveCharacterTextSplitter`` splits it alone, never across
a section boundary, and every chunk carries its section's heading path.

It streams: the section scanner (``chunkd.core.SectionScanner``) reports a section as
soon as its heading line is complete and says up to where no new section can start
(``settled``); text up to there goes at once to the current section's recursive
splitter, so the only text held here is a line that may still turn out to be a heading,
and the white space that begins a document: until the first section is known, that
white space may belong to the text before the first heading (a section) or to no
section (a heading comes first), and LangChain's splitter can make a chunk even of white
space (a space is as long as a size of 1). A piece fed whole (``split_text``) is held
whole until the next feed, and each section's text is sliced from it.

With ``embed_text`` the heading path goes before each chunk's text, and counts toward
the size, as in Docling's HybridChunker: see ``EmbedPrefix``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from chunkd.chunk import Chunk
from chunkd.options import Flag, Option, register_option, switch
from chunkd.strategies.base import Chunker, Strategy, register
from chunkd.strategies.recursive import Recursive
from chunkd.units import CHARS

if TYPE_CHECKING:
    from chunkd.core import RecursiveSplitter
    from chunkd.strategies.base import Settings

#: Between the heading path and the chunk's text in ``embed_text``.
PATH_JOIN, TEXT_JOIN = " > ", "\n\n"


@register
class Markdown(Strategy):
    """Markdown sections, then LangChain's recursive splitting inside each, in code
    points or cl100k_base tokens; ``headings`` on every chunk."""

    name = "markdown"
    units = ("chars", "tokens")
    default_size = 1000
    fields = ("headings",)
    embeds = True

    @classmethod
    def default_overlap(cls, size: int) -> int:
        return Recursive.default_overlap(size)

    @classmethod
    def splitter(cls, settings: Settings) -> Chunker:
        prefixes = EmbedPrefix(settings) if settings.embed_text else None
        return MarkdownSplitter(Recursive.splitter(settings),  # type: ignore[arg-type]
                                settings[STRIP_HEADINGS], prefixes)


#: Leave each section's heading line out of its chunks (it stays in ``headings``).
STRIP_HEADINGS = register_option(Option[bool](
    False, "leave each section's heading line out of its chunks", name="strip_headings",
    check=switch, applies=lambda kind: issubclass(kind, Markdown),
    refusal="{option} is for --strategy markdown, not {strategy}", flags=(
        Flag("--strip-headings", "markdown: leave each section's heading line out of its "
                                 "chunks (it stays in \"headings\")"),)), after="parent_overlap")


class EmbedPrefix:
    """What goes before each chunk's text in ``embed_text`` (the heading path, then a
    blank line), fitted so that every ``embed_text`` is at most the size in the unit.

    The prefix takes at most half the size: the outermost headings are dropped until it
    fits; if the innermost alone does not, it is cut at a grapheme boundary and ends
    with "…" (no prefix at all if nothing of it fits). The section's text is then split
    at the size less the prefix's length (the overlap kept below that), and in code
    points the two lengths add up. In tokens they add up too when the chunk's text
    begins with a character that is not white space (the pre-tokenizer always cuts
    between the blank line and it). Two cases are counted whole, and the chunk's prefix
    shortened further if the whole is too long: a text that begins with white space
    (``strip_whitespace=False``), which may merge with the blank line into other
    tokens, and a text longer than its share (as LangChain's chunks in tokens can be).
    So an ``embed_text`` is longer than the size only where its text alone is."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        unit = settings.measure
        self.length: Callable[[str], int] = unit.count
        self.tokens = unit is not CHARS

    def fitted(self, headings: tuple[str, ...],
               fits: Callable[[str], bool] | None = None) -> str:
        """The longest prefix for ``headings`` that ``fits`` (by default: that takes at
        most half the size); "" when none does."""
        if fits is None:
            fits = self.within_half
        for first in range(len(headings)):
            prefix = PATH_JOIN.join(headings[first:]) + TEXT_JOIN
            if fits(prefix):
                return prefix
        if not headings:
            return ""
        from chunkd.core import cut_heading

        innermost = headings[-1]
        # Bisect on the code points kept: ``fits(cut(kept))`` holds, ``fits(cut(too_many))``
        # does not (the whole heading did not fit). Exact for code points; for tokens it
        # finds a cut that fits, which is all the bound needs.
        kept, too_many = 0, len(innermost)
        while too_many - kept > 1:
            middle = (kept + too_many) // 2
            if fits(cut_heading(innermost, middle) + TEXT_JOIN):
                kept = middle
            else:
                too_many = middle
        cut = cut_heading(innermost, kept) if kept else ""
        return cut + TEXT_JOIN if len(cut) > 1 else ""   # "…" alone says nothing

    def within_half(self, prefix: str) -> bool:
        return 2 * self.length(prefix) <= self.settings.chunk_size

    def sized(self, prefix_length: int) -> tuple[int, int]:
        """The size and overlap that a section's text is split at under a prefix of
        ``prefix_length``."""
        size = self.settings.chunk_size - prefix_length
        return size, min(self.settings.chunk_overlap, size - 1)

    def embed_text(self, prefix: str, prefix_length: int, headings: tuple[str, ...],
                   chunk: Chunk) -> str:
        """A chunk's ``embed_text`` under its section's ``prefix``."""
        text = chunk.text
        if not prefix:
            return text
        size = self.settings.chunk_size
        if self.tokens and (text[:1].isspace() or chunk.length + prefix_length > size) \
                and self.length(prefix + text) > size:
            prefix = self.fitted(headings, lambda shorter: len(shorter) <= len(prefix)
                                 and self.length(shorter + text) <= size)
        return prefix + text


class MarkdownSplitter:
    """Sections of one document at a time, each split by ``splitter`` (a recursive
    splitter, reused from section to section); with ``prefixes``, resized for each
    section to leave room for its heading path in ``embed_text``."""

    def __init__(self, splitter: RecursiveSplitter, strip_headings: bool,
                 prefixes: EmbedPrefix | None = None) -> None:
        from chunkd.core import SectionScanner

        self.scanner = SectionScanner()
        self.splitter = splitter
        self.strip_headings = strip_headings
        self.prefixes = prefixes
        self._start_document()

    def _start_document(self) -> None:
        self.held = ""           # the document from ``base`` on
        self.base = 0            # document offset of held[0]
        self.given = 0           # the document before this went to a splitter (or nowhere)
        # Where the current section's split text starts (None: after a stripped
        # heading line that has not ended yet).
        self.body: int | None = 0
        self.headings: tuple[str, ...] = ()
        self.prefix = ""         # the current section's in embed_text, and its length
        self.prefix_length = 0
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
        chunks = self._sections(self.scanner.finish(), final=True)
        if self.started:
            chunks += self._end_section(self.base + len(self.held), final=True)
        self._start_document()
        return chunks

    def _sections(self, starts: list[tuple[int, tuple[str, ...]]],
                  final: bool = False) -> list[Chunk]:
        """End the current section at each new section's start, and begin the next
        (``final``: the document has ended)."""
        chunks: list[Chunk] = []
        for offset, headings in starts:
            if self.started:
                chunks += self._end_section(offset)
            else:                         # white space before a first heading is nobody's
                self.started = True
                self._take(offset)
            self.headings = headings
            self.body = (self._line_end(offset, final)
                         if self.strip_headings and headings else offset)
            if self.prefixes is not None:
                self.prefix = self.prefixes.fitted(headings)
                self.prefix_length = self.prefixes.length(self.prefix)
                size, overlap = self.prefixes.sized(self.prefix_length)
                if size != self.splitter.chunk_size:    # the last section was finished
                    self.splitter.resize(size, overlap)
        return chunks

    def _end_section(self, end: int, final: bool = False) -> list[Chunk]:
        return self._placed(self.splitter.feed(self._take(end, final)) + self.splitter.finish())

    def _line_end(self, start: int, final: bool) -> int | None:
        """The end of the heading line at ``start``, or the document's if ``final``:
        None while the line goes on (a long heading is reported before its end)."""
        newline = self.held.find("\n", max(start, self.base) - self.base)
        if newline >= 0:
            return self.base + newline + 1
        return self.base + len(self.held) if final else None

    def _take(self, upto: int, final: bool = False) -> str:
        """The current section's text from ``given`` to ``upto``, without its heading
        line when headings are stripped; it is given."""
        if self.body is None:               # in a stripped heading line that goes on
            self.body = self._line_end(self.given, final)
            if self.body is None:
                self.given = upto
                return ""
        start = max(self.given, self.body)
        piece = self.held[start - self.base:upto - self.base] if upto > start else ""
        self.given = upto
        return piece

    def _placed(self, chunks: list[Chunk]) -> list[Chunk]:
        """Chunks of the current section's split text as chunks of the document."""
        placed: list[Chunk] = []
        if not chunks:
            return placed
        body = self.body
        assert body is not None, "only text after a known heading line is split"
        prefixes = self.prefixes
        for chunk in chunks:
            embed_text = (None if prefixes is None
                          else prefixes.embed_text(self.prefix, self.prefix_length,
                                                   self.headings, chunk))
            placed.append(chunk._replace(index=self.next_index, start=body + chunk.start,
                                         end=body + chunk.end, headings=self.headings,
                                         embed_text=embed_text))
            self.next_index += 1
        return placed
