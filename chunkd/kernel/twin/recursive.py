"""The streaming recursive splitter in plain Python: the twin of the compiled kernel.

``chunkd.kernel._kernel.RecursiveSplitter`` is this algorithm compiled, with the same
constructor and the same results; ``chunkd.kernel.chosen`` picks one of the two. The tests
compare them on every setting and unit, whole and in random pieces, and both with
LangChain. Its counts are Python numbers, so it also runs length functions that
return floats (LangChain's drop-in falls back on it for those).

LangChain-identical recursive splitting on a stream
---------------------------------------------------
LangChain's ``_split_text(text, seps)`` looks global: it picks the first separator
that occurs *anywhere* in ``text``. That seems to force reading the whole document
before emitting anything. It does not, because of these facts (``F(text, seps)`` is
LangChain's result, a piece is *long* when its length is at least the chunk size):

1. If ``seps[0]`` does not occur in ``text``, ``F(text, seps) == F(text, seps[1:])``:
   the choice simply skips it.
2. A long piece is split with ``seps[1:]`` (or, with none left, kept as it is), and
   the short pieces around it are merged in separate runs: merging never crosses a
   long piece.
3. Length only grows as text is appended to a piece: code points obviously; cl100k
   tokens too, at least past a lower bound that never shrinks (below). So a piece
   whose known beginning is long is long.

Therefore one level (one separator) can read its text once, left to right:

* While it has not seen ``seps[0]``, and the piece in hand is already long, either
  ``seps[0]`` appears later (the first piece is this text plus more, a long piece,
  which goes to ``F(piece, seps[1:])``) or it never appears (the whole text goes to
  ``F(text, seps[1:])``). Both mean: hand the text to a child level with
  ``seps[1:]`` now, and end the child where the piece ends or at the end of the text.
  If the text ends while the piece is still short and ``seps[0]`` was never seen,
  the child takes it all (fact 1).
* Once ``seps[0]`` has been seen, each piece is either complete and short (it goes
  to the merger) or grows long before its end (the merger's run ends, the piece goes
  to a child level, as above).
* The merger (``_merge_splits``) is a greedy left-to-right loop: it takes one piece
  at a time and emits a chunk as soon as the next piece does not fit. Its state is
  at most one chunk plus the overlap.

So each level holds at most one unfinished piece and one chunk in progress, and
memory is bounded by a small multiple of the chunk size, whatever the document's size.

Details that decide equality
----------------------------
* Where the separator goes. ``"end"``: a piece ends after its separator. ``"start"``
  (or True): it ends where the next separator starts, which then begins the next
  piece. False: it ends where the separator starts, and the next piece begins after
  it. Text is handed down only as far as the piece surely reaches: for "start" and
  False, not past the first position where a separator may still begin.
* A literal separator may straddle two input blocks: its search resumes
  ``len(sep) - 1`` code points before the end of a block. Matches are found left to
  right without overlap, as ``re.split`` finds them (``"\\n\\n\\n"`` splits after
  the first two newlines). Empty pieces are dropped.
* A separator that is a real regular expression (``is_separator_regex``, the
  ``from_language`` lists) cannot be matched on a stream in general (lookarounds,
  ``$``, ``\\b``): its level waits for the whole text it is given and runs the
  pattern on that text alone, as LangChain does. Memory then holds that text.
* ``""`` splits into code points; a code point that is long (possible in tokens
  with a tiny size) is kept unstripped, as LangChain keeps it. A separator after
  ``""`` is never used. Merged chunks are stripped with ``str.strip()`` (Unicode
  white space: U+3000, U+0085, U+001C, ...) unless ``strip_whitespace`` is False,
  and empty chunks are dropped.
* When the separator is dropped (keep_separator False), merged pieces are joined
  with the separator's text, and its length counts towards the chunk's, as in
  LangChain; where the document does not have exactly that text between the pieces
  (a repeated separator, a pattern), the chunk is not a piece of the document and
  ``document[start:end]`` is the stretch it came from.
* Offsets: each piece keeps its document offset; a chunk starts at its first
  piece's offset plus the white space that the strip removed.
* Units (``chunkd.units.LengthUnit``): "the piece in hand is long" must be decided
  on a count that cannot fall back under the size as the piece grows. A BPE count is
  not strictly monotone as text is appended (the last pre-tokens can re-merge). So
  the piece is counted by its *settled* prefixes (``unit.settled``: cl100k_base's
  are the pre-tokens followed by two more, which stay pre-tokens of any longer
  text), and the unsettled rest is bounded below by one unit per ``max_chars`` code
  points (no cl100k token covers more than 128). Any bound gives the same chunks;
  a tighter one only delegates sooner. A complete piece is judged on its exact
  count: the settled count plus the count of the rest.
* A unit with no bound (``max_chars`` None, settled (0, 0): a plain length function)
  is judged only once a piece is complete. The chunks are the same; memory holds
  the longest piece.
* The unsettled rest is offered to ``settled`` again only once it has doubled since
  the last offer, so that a unit that settles little costs linear time in all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from chunkd.model.chunk import Chunk
from chunkd.kernel.splitting import (SEPARATORS, checked_arguments, joined_chunk, literal_text,
                              separator_source)
from chunkd.model.length import CHARS, Chars, LengthUnit, checked_unit

class RecursiveSplitter:
    """The compiled kernel's ``RecursiveSplitter``, in plain Python: same arguments,
    same results (see ``chunkd.kernel._kernel``)."""

    def __init__(self, chunk_size: int, chunk_overlap: int, *,
                 separators: Iterable[str | re.Pattern] = SEPARATORS,
                 keep_separator: bool | str = "end", strip_whitespace: bool = True,
                 merge_long: bool = False, join: str | None = None,
                 unit: LengthUnit | None = None, measure_chunks: bool = True) -> None:
        self.keep, used = checked_arguments(chunk_size, chunk_overlap, separators,
                                            keep_separator, merge_long)
        self.unit: LengthUnit = CHARS if unit is None else checked_unit(unit)
        self.chars = type(self.unit) is Chars
        self.chunk_size, self.chunk_overlap = chunk_size, chunk_overlap
        self.strip, self.merge_long = strip_whitespace, merge_long
        self.measure_chunks = measure_chunks
        #: None, or a list to which each chunk joined with a dropped separator adds
        #: ``(index, Joined)`` (as the kernel's ``joined``).
        self.joined: list | None = None
        level = None
        for separator in reversed(used):
            level = _Level(self, separator, level, join)
        assert level is not None, "checked_arguments gives at least one separator"
        self.top: _Level = level
        self._start_document()

    def _start_document(self) -> None:
        self.buf, self.base = "", 0  # the text still needed, from document offset base
        self.pending: list[str] = []
        self.pending_len = 0
        self.next_index = 0
        self.out: list[Chunk] = []
        self.top.reset(0)

    def feed(self, text: str) -> list[Chunk]:
        """Take the next piece of the document; return the chunks now final."""
        self.pending.append(text)
        self.pending_len += len(text)
        # Join rarely while the levels hold much text (see the kernel's feed).
        if self.pending_len < self.base + len(self.buf) - self.top.needed_from():
            return []
        self._take_pending()
        self.top.advance(self.base + len(self.buf), False)
        return self._take()

    def finish(self) -> list[Chunk]:
        """End the document; return its remaining chunks and start a new document."""
        self._take_pending()
        self.top.advance(self.base + len(self.buf), True)
        chunks = self._take()
        self._start_document()
        return chunks

    def _take_pending(self) -> None:
        drop = self.top.needed_from() - self.base
        self.buf = self.buf[drop:] + "".join(self.pending)
        self.base += drop
        self.pending = []
        self.pending_len = 0

    def resize(self, chunk_size: int, chunk_overlap: int) -> None:
        """Split the next document at another size and overlap, in the same unit.
        Only between documents: nothing of one may have been fed."""
        if self.base + len(self.buf) + self.pending_len:
            raise ValueError("resize a splitter between documents only")
        checked_arguments(chunk_size, chunk_overlap, ("",), "end", False)
        self.chunk_size, self.chunk_overlap = chunk_size, chunk_overlap

    def length(self, text: str) -> int:
        """The length of ``text`` in the unit."""
        return len(text) if self.chars else self.unit.count(text)

    def _take(self) -> list[Chunk]:
        chunks, self.out = self.out, []
        return chunks

    def text(self, start: int, end: int) -> str:
        """document[start:end], which must still be in the buffer."""
        return self.buf[start - self.base:end - self.base]

    def emit(self, start: int, end: int, strip: bool) -> None:
        """Make the chunk document[start:end], stripped of white space if ``strip``."""
        text = self.text(start, end)
        if strip:
            start += len(text) - len(text.lstrip())
            text = text.strip()
            if not text:
                return
        self._append(start, start + len(text), text)

    def emit_joined(self, spans: list[tuple[int, int]], join: str) -> None:
        """Make the chunk of the pieces ``spans`` joined with ``join``."""
        made = joined_chunk(self.buf, self.base, spans, join, self.strip)
        if made is not None:
            start, end, text, placed = made
            if self.joined is not None:
                self.joined.append((self.next_index, placed))
            self._append(start, end, text)

    def _append(self, start: int, end: int, text: str) -> None:
        length = self.length(text) if self.measure_chunks else -1
        self.out.append(Chunk(self.next_index, start, end, length, text))
        self.next_index += 1


class _Level:
    """One separator's pass over its scope: cutting pieces, merging, delegating."""

    def __init__(self, sp: RecursiveSplitter, separator: str | re.Pattern,
                 child: _Level | None, join: str | None) -> None:
        self.sp, self.child = sp, child
        source = separator_source(separator)
        self.by_code_point = source == ""
        # A pattern that is a plain literal streams as that literal (as in the kernel).
        self.literal: str | None = (separator if isinstance(separator, str) else
                                    source if self.by_code_point else literal_text(separator))
        self.pattern = (separator if isinstance(separator, re.Pattern) and self.literal is None
                        else None)
        self.join = (source if join is None else join) if sp.keep is False else ""
        self.join_length = sp.length(self.join) if sp.keep is False else 0

    @property
    def next_level(self) -> _Level:
        """The next separator's level: only a level that has one delegates."""
        assert self.child is not None, "the last level keeps its long pieces whole"
        return self.child

    def reset(self, start: int) -> None:
        self.delegating = False  # the piece in hand is being fed to the child
        self.decided = False     # the separator has occurred in this scope
        self.piece_start = self.scan_pos = start
        self.start_counting(start)
        self.run: list[tuple[int, int, int]] = []  # the merger's pieces
        self.total = 0

    def start_counting(self, start: int) -> None:
        """A piece begins at ``start``: nothing of it counted yet."""
        self.counted_pos = start  # the piece's settled prefix ends here...
        self.counted = 0          # ...and has this length in the unit
        self.unsettled = 0        # the rest's length at the last call of settled

    def needed_from(self) -> int:
        """The lowest document offset this level and its descendants still read."""
        need = self.scan_pos if self.delegating else self.piece_start
        if self.run:
            need = min(need, self.run[0][0])
        if self.delegating:
            need = min(need, self.next_level.needed_from())
        return need

    def advance(self, limit: int, final: bool) -> None:
        """Take the scope's text up to document offset ``limit``; ``final``: it ends there."""
        if self.by_code_point:
            return self.advance_code_points(limit, final)
        if self.pattern is not None:
            if final:
                self.split_by_pattern(limit)
            return
        sp, sep = self.sp, self.literal
        assert sep is not None, "a level cuts by code point, by pattern or by literal"
        while (pos := sp.buf.find(sep, self.scan_pos - sp.base, limit - sp.base)) >= 0:
            self.cut(pos + sp.base, pos + sp.base + len(sep))
        if final:
            self.end_scope(limit)
        else:
            self.scan_pos = max(self.scan_pos, limit - len(sep) + 1)
            self.grow_piece(limit if sp.keep == "end" else self.scan_pos)

    def split_by_pattern(self, limit: int) -> None:
        """Run the regular expression on the whole scope's text, as LangChain does."""
        start, pattern = self.piece_start, self.pattern
        assert pattern is not None, "called for a pattern's level only"
        for match in pattern.finditer(self.sp.text(start, limit)):
            self.cut(start + match.start(), start + match.end())
        self.end_scope(limit)

    def cut(self, at: int, after: int) -> None:
        """The separator occurs at [at, after): the piece in hand ends, the next begins."""
        keep = self.sp.keep
        self.decided = True
        self.end_piece(after if keep == "end" else at)
        self.piece_start = at if keep == "start" else after
        self.scan_pos = after
        self.start_counting(self.piece_start)

    def end_piece(self, end: int) -> None:
        if self.delegating:
            self.next_level.advance(end, True)
            self.delegating = False
        elif end > self.piece_start:
            self.take_piece(end)

    def take_piece(self, end: int) -> None:
        """A whole piece: merge it if short (or if long pieces are merged), else
        split it with the next separators (none left: keep it as it is)."""
        sp = self.sp
        length = self.piece_length(end)
        if length < sp.chunk_size or sp.merge_long:
            self.merge(self.piece_start, end, length)
            return
        self.flush()
        if self.child is None:
            sp.emit(self.piece_start, end, False)
        else:
            self.delegate(end, True)

    def grow_piece(self, known_end: int) -> None:
        """The piece in hand reaches at least ``known_end``: delegate it once it must be long."""
        sp = self.sp
        if self.delegating:
            self.next_level.advance(known_end, False)
        elif (self.child is not None and known_end > self.piece_start
              and self.surely_long(known_end)):
            self.flush()
            self.delegating = True
            self.delegate(known_end, False)

    def piece_length(self, end: int) -> int:
        """The exact length of the complete piece ``piece_start`` to ``end``: its
        settled prefix's count plus the count of the rest."""
        sp = self.sp
        if sp.chars:
            return end - self.piece_start
        if end == self.counted_pos:
            return self.counted
        return self.counted + sp.length(sp.text(self.counted_pos, end))

    def surely_long(self, known_end: int) -> bool:
        """Whether the piece in hand, which reaches at least ``known_end``, will be
        long however it ends: its settled count plus the unit's bound on the rest."""
        sp = self.sp
        if sp.chars:
            return known_end - self.piece_start >= sp.chunk_size
        unit = sp.unit
        if known_end - self.counted_pos >= 2 * self.unsettled:
            rest = sp.text(self.counted_pos, known_end)
            end, count = unit.settled(rest)
            if not (0 <= end <= len(rest) and count >= 0):
                raise ValueError(f"the length unit {unit.name} settled {(end, count)} "
                                 f"of a text of {len(rest)} code points")
            self.counted_pos += end
            self.counted += count
            self.unsettled = known_end - self.counted_pos
        bound = self.counted
        if unit.max_chars:
            bound += (known_end - self.counted_pos) // unit.max_chars
        return bound >= sp.chunk_size

    def end_scope(self, limit: int) -> None:
        """The scope ends at ``limit``: the last piece has no separator after it."""
        if self.delegating:
            self.next_level.advance(limit, True)
            self.delegating = False
        elif limit > self.piece_start:
            if not self.decided and self.child is not None:
                self.flush()  # the separator never occurred: LangChain skips it
                self.delegate(limit, True)
            else:
                self.take_piece(limit)
        self.flush()
        self.piece_start = self.scan_pos = limit

    def delegate(self, end: int, final: bool) -> None:
        self.next_level.reset(self.piece_start)
        self.next_level.advance(end, final)

    def advance_code_points(self, limit: int, final: bool) -> None:
        """The "" separator: every code point is a piece."""
        sp = self.sp
        for pos in range(self.piece_start, limit):
            length = 1 if sp.chars else sp.length(sp.text(pos, pos + 1))
            if length < sp.chunk_size or sp.merge_long:
                self.merge(pos, pos + 1, length)
            else:
                self.flush()
                sp.emit(pos, pos + 1, False)  # kept unstripped, as in LangChain
        self.piece_start = limit
        if final:
            self.flush()

    def merge(self, start: int, end: int, length: int) -> None:
        """LangChain's ``_merge_splits``, one piece at a time, term for term."""
        sp, join = self.sp, self.join_length
        if self.run and self.total + length + join > sp.chunk_size:
            self.emit_run()
            while self.run and (self.total > sp.chunk_overlap or (
                    self.total + length + join > sp.chunk_size and self.total > 0)):
                self.total -= self.run[0][2] + (join if len(self.run) > 1 else 0)
                del self.run[0]
        self.run.append((start, end, length))
        self.total += length + (join if len(self.run) > 1 else 0)

    def emit_run(self) -> None:
        if self.sp.keep is False:
            self.sp.emit_joined([(start, end) for start, end, _ in self.run], self.join)
        else:
            self.sp.emit(self.run[0][0], self.run[-1][1], self.sp.strip)

    def flush(self) -> None:
        """End the merger's run: emit the chunk in progress."""
        if self.run:
            self.emit_run()
        self.run, self.total = [], 0
