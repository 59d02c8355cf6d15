"""The markdown strategy: Markdown sections, each cut by the recursive splitter.

A section is what the ``sections`` window strategy takes for one (an ATX heading line
outside fenced code, to the next one; the text before the first heading); each section's
text is split exactly as ``RecursiveCharacterTextSplitter`` splits it alone, never across
a section boundary, and every chunk carries its section's heading path.

It streams: the section scanner (``chunkd.kernel.chosen.SectionScanner``) reports a section as
soon as its heading line is complete and says up to where no new section can start
(``settled``); text up to there goes at once to the current section's recursive
splitter, so the only text held here is a line that may still turn out to be a heading,
and the white space that begins a document: until the first section is known, that
white space may belong to the text before the first heading (a section) or to no
section (a heading comes first), and LangChain's splitter can make a chunk even of white
space (a space is as long as a size of 1). A piece fed whole (``split_text``) is held
whole until the next feed, and each section's text is sliced from it.

With ``embed_text`` the heading path goes before each chunk's text, and counts toward
the size, as in Docling's HybridChunker: see ``EmbedPrefix``; and each section's pipe
tables are cut apart from its text, between rows, with the table's header before every
piece of its body: see ``TableSplitter``. Without ``embed_text`` the chunks stay
LangChain's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from chunkd.model.chunk import Chunk
from chunkd.options import Flag, Option, register_option, switch
from chunkd.model.patterns import deferred
from chunkd.model.chunker import DocumentChunker
from chunkd.strategies.base import Strategy, register
from chunkd.strategies.recursive import Recursive
from chunkd.units import CHARS

if TYPE_CHECKING:
    from chunkd.kernel.chosen import RecursiveSplitter
    from chunkd.strategies.base import SettingsView

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
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        from chunkd.strategies.recursive import STRIP_WHITESPACE

        recursive = cast("RecursiveSplitter", Recursive.splitter(settings))
        if not settings.embed_text:
            return MarkdownSplitter(recursive, settings[STRIP_HEADINGS])
        return MarkdownSplitter(TableSplitter(recursive, EmbedPrefix(settings),
                                              settings[STRIP_WHITESPACE]),
                                settings[STRIP_HEADINGS])


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

    def __init__(self, settings: SettingsView) -> None:
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
        from chunkd.kernel.chosen import cut_heading

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


#: A table's header row and separator row are each at most this many code points, and a
#: body row has its first "|" within this many: bounds on what is held of a line before
#: it is known not to start a table (or to end one).
LINE_LIMIT = 65_536

#: A table's separator row (GFM's delimiter row): cells of "-" with an optional ":"
#: either side, between pipes (the outer ones optional).
_DELIMITER = deferred(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*\Z")
_UNESCAPED_PIPE = deferred(r"(?<!\\)\|")
#: What opens fenced code, and what may close it (the section scanner's rule).
_FENCE = deferred(r" {0,3}(`{3,}|~{3,})")
_CLOSING = deferred(r" {0,3}(`+|~+)")
#: What a line that may matter to tables has: a pipe, or the start of a fence.
_TABLE_OR_FENCE = deferred(r"\||^ {0,3}(?:```|~~~)", re.MULTILINE)


def closes_fence(fence: str, line: str) -> bool:
    """Whether ``line`` (without its line ending) closes fenced code opened by the run
    ``fence``: as many of its character or more, then only white space."""
    closing = _CLOSING.match(line)
    return (closing is not None and closing.group(1)[0] == fence[0]
            and len(closing.group(1)) >= len(fence) and line[closing.end():].strip() == "")


def cell_count(row: str) -> int:
    """The cells of a table row: its text split at the pipes that are not escaped, less
    an outer pipe at either end."""
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return len(_UNESCAPED_PIPE.split(row))


def starts_table(header: str, separator: str) -> bool:
    """Whether two lines (without their line endings) are a table's header row and
    separator row: both have a pipe, and as many cells."""
    return ("|" in header and "|" in separator and _DELIMITER.match(separator) is not None
            and cell_count(header) == cell_count(separator))


class _Table:
    """The table in hand: the header its pieces are embedded under (``repeat``, the
    header row and separator row, each then a newline: "" when that and the heading path
    would take more than half the size), and the piece being filled."""

    def __init__(self, start: int, repeat: str) -> None:
        self.start = start                   # the header row's offset
        self.repeat = repeat
        self.piece: tuple[int, int] | None = None   # rows [start, end) not yet a chunk
        self.long_row: int | None = None     # a row cut as it streams: its start


class TableSplitter:
    """The text of one section for ``embed_text``: each Markdown pipe table (outside
    fenced code) one chunk when it fits the size, else cut between rows into chunks
    that each fit, those that start after the separator row embedded under the table's
    header; the text between tables (and a row too long to fit alone) split by the
    recursive splitter. The recursive splitter's ``feed``/``finish``, for the section
    ``begin`` announced; every chunk comes with its ``embed_text``.

    Text goes on to the recursive splitter a line at a time. What is held: the line in
    hand (at most ``LINE_LIMIT`` code points; a table's row until it is complete or
    longer than ``max_chars`` times the size, when it cannot fit), the line before it
    while it may be a header row, and the piece of a table being filled (within the
    size); of a table, only its header row and separator row are kept."""

    def __init__(self, splitter: RecursiveSplitter, prefixes: EmbedPrefix,
                 strip: bool) -> None:
        self.splitter = splitter
        self.prefixes = prefixes
        self.length = prefixes.length
        self.strip = strip
        self.size = prefixes.settings.chunk_size
        bound = prefixes.settings.measure.max_chars
        #: A row longer than this cannot fit, whatever its end: it is cut as it streams.
        self.row_limit = self.size * bound if bound else None
        self.begin((), heading_line=False)

    def begin(self, headings: tuple[str, ...], heading_line: bool) -> None:
        """A section starts (the last one is finished): its heading path, and whether its
        text starts with its heading line (which no table starts at)."""
        self.headings = headings
        self.prefix = self.prefixes.fitted(headings)
        self.prefix_length = self.length(self.prefix)
        self._resize(self.prefix)
        self.buf, self.buf_start = "", 0   # the section's text from buf_start on
        self.given = 0            # the text before this is in chunks or in the splitter
        self.origin: int | None = None     # the splitter's offset 0; None: it is empty
        self.line_start = 0       # the line in hand...
        self.scanned = 0          # ...read up to here
        self.pipe = False         # ...has a "|"
        self.long_line: str | None = None  # ...its first LINE_LIMIT code points, when longer
        self.long_blank = True    # ...and whether the rest of it is white space
        self.header: tuple[int, str] | None = None   # the line before, if a header row may
        self.fence: str | None = None      # the open fence's run
        self.heading_line = heading_line
        self.table: _Table | None = None

    def _resize(self, reserved: str) -> None:
        """Split the next text at the size less ``reserved``'s length."""
        size, overlap = self.prefixes.sized(self.length(reserved))
        if (size, overlap) != (self.splitter.chunk_size, self.splitter.chunk_overlap):
            self.splitter.resize(size, overlap)

    def feed(self, text: str) -> list[Chunk]:
        self.buf = self.buf[self.given - self.buf_start:] + text
        self.buf_start = self.given
        return self._advance(final=False)

    def finish(self) -> list[Chunk]:
        end = self.buf_start + len(self.buf)
        chunks = self._advance(final=True)
        if self.table is not None:
            chunks += self._end_table()
        return chunks + self._prose(end) + self._end_prose()

    # --- lines -------------------------------------------------------------------------

    def _advance(self, final: bool) -> list[Chunk]:
        """Read the lines now complete (and the last one if ``final``)."""
        chunks: list[Chunk] = []
        end = self.buf_start + len(self.buf)
        while True:
            self._skip_plain_lines()
            newline = self.buf.find("\n", self.scanned - self.buf_start)
            if newline < 0:
                break
            line_end = self.buf_start + newline + 1
            self._see(line_end)
            chunks += self._line(line_end)
            self.line_start = self.scanned = line_end
            self.pipe = False
        self._see(end)
        if final and self.line_start < end:
            chunks += self._line(end)
            self.line_start = end
        elif self.line_start < end:
            chunks += self._line_goes_on(end)
        self.scanned = end
        if self.table is None:
            held = (end if self.long_line is not None else
                    self.header[0] if self.header is not None else self.line_start)
            chunks += self._prose(held)
        return chunks

    def _skip_plain_lines(self) -> None:
        """Outside tables, pass over the complete lines that have no pipe and do not
        start a fence (they neither start a table nor change a fence): a search, not a
        line at a time."""
        if self.table is not None or self.long_line is not None or self.scanned > self.line_start:
            return
        start = self.line_start - self.buf_start
        complete = self.buf.rfind("\n", start) + 1
        if complete:
            found = _TABLE_OR_FENCE.search(self.buf, start, complete)
            plain = self.buf.rfind("\n", start, found.start()) + 1 if found else complete
            if plain > start:
                self.line_start = self.scanned = self.buf_start + plain
                self.header, self.heading_line = None, False

    def _see(self, upto: int) -> None:
        """The line in hand is read up to ``upto``: note a "|" in its first
        ``LINE_LIMIT`` code points, and whether what is read of a long line is blank."""
        limit = self.line_start + LINE_LIMIT
        if not self.pipe and self.scanned < limit:
            self.pipe = "|" in self._text(self.scanned, min(upto, limit))
        if self.long_line is not None and self.long_blank:
            self.long_blank = self._text(self.scanned, upto).strip() == ""

    def _text(self, start: int, end: int) -> str:
        return self.buf[start - self.buf_start:end - self.buf_start]

    def _line_goes_on(self, end: int) -> list[Chunk]:
        """The line in hand reaches ``end`` and goes on: cut a row that cannot fit as
        it streams, give up a line too long to be a header or separator row."""
        table, length = self.table, end - self.line_start
        if table is not None and table.long_row is not None:
            return self._long_row(end)
        if table is not None and self.pipe:
            if self.row_limit is not None and length > self.row_limit:
                return self._start_long_row(end)
            return []
        if self.long_line is not None or length <= LINE_LIMIT:
            return []
        chunks = self._end_table() if table is not None else []
        line = self._text(self.line_start, end)
        self.long_line, self.long_blank = line[:LINE_LIMIT], line[LINE_LIMIT:].strip() == ""
        self.header, self.heading_line = None, False
        return chunks

    def _line(self, end: int) -> list[Chunk]:
        """The line in hand is complete: it ends at ``end`` (after its newline, if any).
        A line is read by its first ``LINE_LIMIT`` code points (and whether the rest is
        white space)."""
        chunks: list[Chunk] = []
        table = self.table
        if table is not None:
            if table.long_row is not None:
                return self._long_row(end) + self._end_long_row()
            if self.pipe and self._text(self.line_start, end).strip():
                return self._row(self.line_start, end)
            chunks = self._end_table()
        if self.long_line is not None:
            head, blank = self.long_line, self.long_blank
            self.long_line = None
        else:
            content = self._text(self.line_start, end).removesuffix("\n").removesuffix("\r")
            head, blank = content[:LINE_LIMIT], content[LINE_LIMIT:].strip() == ""
        heading_line, self.heading_line = self.heading_line, False
        header, self.header = self.header, None
        if self.fence is not None:
            if blank and closes_fence(self.fence, head):
                self.fence = None
            return chunks
        if (fence := _FENCE.match(head)) is not None:
            self.fence = fence.group(1)
            return chunks
        within = end - self.line_start <= LINE_LIMIT
        if header is not None and within and starts_table(header[1], head):
            chunks += self._prose(header[0]) + self._end_prose()
            repeat = header[1].strip() + "\n" + head.strip() + "\n"
            if 2 * self.length(self.prefix + repeat) > self.size:
                repeat = ""
            self.table = _Table(header[0], repeat)
            chunks += self._row(header[0], self.line_start) + self._row(self.line_start, end)
        elif self.pipe and within and not heading_line:
            self.header = (self.line_start, head)
        return chunks

    # --- the text between tables ---------------------------------------------------------

    def _prose(self, upto: int) -> list[Chunk]:
        """The text up to ``upto`` goes to the recursive splitter."""
        if upto <= self.given:
            return []
        if self.origin is None:
            self.origin = self.given
        text = self._text(self.given, upto)
        self.given = upto
        return self._embedded(self.splitter.feed(text), "")

    def _end_prose(self) -> list[Chunk]:
        """The recursive splitter's text ends (a table starts, or the section ends)."""
        if self.origin is None:
            return []
        chunks = self._embedded(self.splitter.finish(), "")
        self.origin = None
        return chunks

    def _embedded(self, chunks: list[Chunk], reserved: str) -> list[Chunk]:
        """The recursive splitter's chunks, placed in the section, each with its
        ``embed_text``: the section's prefix, then ``reserved`` (a table's header),
        then its text; or, in tokens where that is too long, the section's prefix
        fitted to the text alone."""
        origin = self.origin
        assert origin is not None, "only text given to the splitter is split"
        placed = []
        for chunk in chunks:
            embed_text = self.prefix + reserved + chunk.text
            if not reserved or self.length(embed_text) > self.size:
                embed_text = self.prefixes.embed_text(self.prefix, self.prefix_length,
                                                      self.headings, chunk)
            placed.append(chunk._replace(start=origin + chunk.start, end=origin + chunk.end,
                                         embed_text=embed_text))
        return placed

    # --- tables --------------------------------------------------------------------------

    def _fits(self, start: int, end: int) -> bool:
        """Whether the rows [start, end) of the table in hand fit in one chunk."""
        table = self.table
        assert table is not None
        text = self._text(start, end)
        if self.strip:
            text = text.strip()
        return self.length(self.prefix + self._repeat(start) + text) <= self.size

    def _row(self, start: int, end: int) -> list[Chunk]:
        """The table's next row, [start, end): into the piece in hand if it fits, else
        ends that piece and starts the next; a row that does not fit alone is cut by the
        recursive splitter."""
        table = self.table
        assert table is not None
        if table.piece is not None and self._fits(table.piece[0], end):
            table.piece = (table.piece[0], end)
            return []
        chunks = self._end_piece()
        if (self.row_limit is None or end - start <= self.row_limit) and self._fits(start, end):
            table.piece = (start, end)
            return chunks
        self._cut_row(start)
        return chunks + self._long_row(end) + self._end_long_row()

    def _cut_row(self, start: int) -> None:
        """The row at ``start`` goes to the recursive splitter, at the size less the
        prefix and the header it is embedded under."""
        table = self.table
        assert table is not None
        table.long_row = start
        self._resize(self.prefix + self._repeat(start))
        self.origin = start

    def _start_long_row(self, end: int) -> list[Chunk]:
        """The row in hand, read up to ``end``, is too long to fit: cut it as it streams."""
        chunks = self._end_piece()
        self._cut_row(self.line_start)
        return chunks + self._long_row(end)

    def _long_row(self, end: int) -> list[Chunk]:
        """The row being cut reaches ``end``."""
        table = self.table
        assert table is not None and table.long_row is not None
        if end <= self.given:
            return []
        text = self._text(self.given, end)
        self.given = end
        return self._embedded(self.splitter.feed(text), self._repeat(table.long_row))

    def _end_long_row(self) -> list[Chunk]:
        """The row being cut has ended."""
        table = self.table
        assert table is not None and table.long_row is not None
        chunks = self._embedded(self.splitter.finish(), self._repeat(table.long_row))
        table.long_row, self.origin = None, None
        self._resize(self.prefix)
        return chunks

    def _repeat(self, start: int) -> str:
        """The header a piece of the table that starts at ``start`` is embedded under."""
        table = self.table
        assert table is not None
        return "" if start == table.start else table.repeat

    def _end_piece(self) -> list[Chunk]:
        """The piece in hand is a chunk."""
        table = self.table
        assert table is not None
        if table.piece is None:
            return []
        start, end = table.piece
        table.piece = None
        self.given = end
        text, before = self._text(start, end), self.prefix + self._repeat(start)
        if self.strip:
            start += len(text) - len(text.lstrip())
            text = text.strip()
        if not text:
            return []
        return [Chunk(0, start, start + len(text), self.length(text), text,
                      embed_text=before + text)]

    def _end_table(self) -> list[Chunk]:
        """The table in hand has ended."""
        chunks = self._end_piece()
        self.table = None
        return chunks


class MarkdownSplitter:
    """Sections of one document at a time, each split by ``splitter`` (a recursive
    splitter, reused from section to section; for ``embed_text``, a ``TableSplitter``
    around one, told of each section's start)."""

    def __init__(self, splitter: RecursiveSplitter | TableSplitter,
                 strip_headings: bool) -> None:
        from chunkd.kernel.chosen import SectionScanner

        self.scanner = SectionScanner()
        self.splitter = splitter
        self.strip_headings = strip_headings
        self._start_document()

    def _start_document(self) -> None:
        self.held = ""           # the document from ``base`` on
        self.base = 0            # document offset of held[0]
        self.given = 0           # the document before this went to a splitter (or nowhere)
        # Where the current section's split text starts (None: after a stripped
        # heading line that has not ended yet).
        self.body: int | None = 0
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
            if isinstance(self.splitter, TableSplitter):  # the last section was finished
                self.splitter.begin(headings, heading_line=bool(headings)
                                    and not self.strip_headings)
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
        for chunk in chunks:
            placed.append(chunk._replace(index=self.next_index, start=body + chunk.start,
                                         end=body + chunk.end, headings=self.headings))
            self.next_index += 1
        return placed
