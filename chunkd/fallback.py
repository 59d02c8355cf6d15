"""The streaming recursive splitter in plain Python: the reference for the kernel.

``chunkd._kernel.RecursiveSplitter`` is this algorithm compiled; the tests compare the
two on every setting, whole and in random pieces, and both with LangChain. This one
also takes any length function (the kernel counts code points and cl100k_base tokens
only): ``chunkd.langchain`` runs it for the other length functions.

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
* Tokens: "the piece in hand is long" must be decided on a count that cannot fall
  back under the size as the piece grows. A BPE count is not strictly monotone as
  text is appended (the last pre-tokens can re-merge). The kernel counts only the
  pre-tokens followed by two more (they stay pre-tokens of any longer text), plus
  one token per 128 code points of the rest (no cl100k token is longer). Here the
  bound is a parameter (``lower_bound``); the tests give the plainest one, one
  token per 128 code points, which delegates later but gives the same chunks.
  Complete pieces are judged on their exact count.
* Any other length function: no bound is known, so a piece is judged only once it
  is complete. The chunks are the same; memory holds the longest piece.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from chunkd.chunk import Chunk

#: chunkd's separators, coarsest first; "" splits into code points (``chunkd.SEPARATORS``).
SEPARATORS = ("\n\n", "\n", "。", "！", "？", ". ", "! ", "? ", "；", "; ", "，", ", ", " ", "")

#: A length function, as LangChain types its ``length_function``.
Length = Callable[[str], int]


class RecursiveSplitter:
    """The kernel's ``RecursiveSplitter`` (same arguments and results), with any
    ``length_function`` instead of the kernel's token counter.

    ``lower_bound(prefix)``: a length that any text beginning with ``prefix`` has at
    least, never decreasing as ``prefix`` grows; it lets a piece be handed down
    before it ends. By default ``len`` for ``len``, else none (pieces are judged
    when complete)."""

    def __init__(self, chunk_size: int, chunk_overlap: int, *,
                 separators: Iterable[str | re.Pattern] = SEPARATORS,
                 keep_separator: bool | str = "end", strip_whitespace: bool = True,
                 merge_long: bool = False, join: str | None = None,
                 length_function: Length = len,
                 lower_bound: Length | None = None) -> None:
        self.keep, used = checked_arguments(chunk_size, chunk_overlap, separators,
                                            keep_separator, merge_long)
        self.chunk_size, self.chunk_overlap = chunk_size, chunk_overlap
        self.strip, self.merge_long = strip_whitespace, merge_long
        self.length = length_function
        self.lower_bound = len if lower_bound is None and length_function is len else lower_bound
        level = None
        for separator in reversed(used):
            level = _Level(self, separator, level, join)
        assert level is not None, "checked_arguments gives at least one separator"
        self.top: _Level = level
        self._start_document()

    def _start_document(self) -> None:
        self.buf, self.base = "", 0  # the text still needed, from document offset base
        self.pending: list[str] = []
        self.next_index = 0
        self.out: list[Chunk] = []
        self.top.reset(0)

    def feed(self, text: str) -> list[Chunk]:
        """Take the next piece of the document; return the chunks now final."""
        self.pending.append(text)
        # Join rarely while the levels hold much text (see the kernel's feed).
        if sum(map(len, self.pending)) < self.base + len(self.buf) - self.top.needed_from():
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
            self._append(*made[:3])

    def _append(self, start: int, end: int, text: str) -> None:
        self.out.append(Chunk(self.next_index, start, end, self.length(text), text))
        self.next_index += 1


def checked_arguments(chunk_size: int, chunk_overlap: int,
                      separators: Iterable[str | re.Pattern], keep_separator: bool | str,
                      merge_long: bool) -> tuple[str | bool, list[str | re.Pattern]]:
    """Check the arguments both splitters take; return where the separator goes
    ("start", "end" or False) and the separators LangChain would use (none past "")."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    if not 0 <= chunk_overlap <= chunk_size:
        raise ValueError(f"chunk_overlap must be at least 0 and at most chunk_size "
                         f"({chunk_size}), got {chunk_overlap}")
    keep: str | bool
    if keep_separator is True or keep_separator == "start":
        keep = "start"
    elif keep_separator == "end" or keep_separator is False:
        keep = keep_separator
    else:
        raise ValueError(f"keep_separator must be True, 'start', 'end' or False, "
                         f"got {keep_separator!r}")
    used = []
    for separator in separators:
        if not isinstance(separator, (str, re.Pattern)) or not isinstance(_source(separator), str):
            raise TypeError(f"a separator is a str or a compiled str pattern, not {separator!r}")
        if isinstance(separator, re.Pattern) and separator.groups:
            raise ValueError(f"the separator pattern {separator.pattern!r} has capturing "
                             "groups: LangChain's split would repeat their text; write (?:...)")
        used.append(separator)
        if _source(separator) == "":
            break  # LangChain never looks past ""
    if not used:
        raise ValueError("give at least one separator")
    if merge_long and len(used) != 1:
        raise ValueError("merge_long splits with one separator only")
    return keep, used


class Joined(NamedTuple):
    """Where the code points of a chunk of pieces joined with a dropped separator come
    from: the pieces' offsets in the text they were cut from, the joining text's
    length, and the white space stripped from the joined text's start."""

    spans: tuple[tuple[int, int], ...]
    join_length: int
    lead: int

    def offset(self, at: int, place: Callable[[int], int] | None = None) -> int:
        """The offset of the chunk's code point ``at``: a piece's code point where it
        is; a joining separator's code point in the text between its piece and the
        next, its k-th code point at the k-th of that text, or at the last one where the
        text there is shorter than the join (a regular expression's source joins pieces
        cut at its matches, of any length) or at the piece's last code point where there
        is none: always a code point of the text, never before the previous one.
        ``place``: the document offset of each offset of the text the pieces were cut
        from (a parent's text, for its children); by default they are document offsets."""
        at += self.lead
        spans = self.spans
        for number, (start, end) in enumerate(spans):
            if at < end - start:
                local = start + at
            elif at - (end - start) < self.join_length:
                following = spans[number + 1][0]
                local = min(end + at - (end - start), max(following, end) - 1)
            else:
                at -= end - start + self.join_length
                continue
            return local if place is None else place(local)
        raise AssertionError("offset past the joined text")


def joined_chunk(buffer: str, base: int, spans: list[tuple[int, int]], join: str,
                 strip: bool) -> tuple[int, int, str, Joined] | None:
    """LangChain's chunk of the document pieces ``spans`` joined with ``join`` (the
    dropped separator) and stripped if ``strip``, with the document offsets of its
    first code point and after its last, and where its code points come from; None if
    it is empty. ``buffer`` holds the document from offset ``base``."""
    texts = [buffer[start - base:end - base] for start, end in spans]
    joined = join.join(texts)
    text = joined.strip() if strip else joined
    if not text:
        return None
    placed = Joined(tuple(spans), len(join),
                    len(joined) - len(joined.lstrip()) if strip else 0)
    return placed.offset(0), placed.offset(len(text) - 1) + 1, text, placed


def _source(separator: str | re.Pattern) -> str:
    """A separator's text: the literal, or the pattern's source."""
    return separator if isinstance(separator, str) else separator.pattern


class _Level:
    """One separator's pass over its scope: cutting pieces, merging, delegating."""

    def __init__(self, sp: RecursiveSplitter, separator: str | re.Pattern,
                 child: _Level | None, join: str | None) -> None:
        self.sp, self.child = sp, child
        source = _source(separator)
        self.by_code_point = source == ""
        self.literal = separator if isinstance(separator, str) else None
        self.pattern = (separator if isinstance(separator, re.Pattern) and not self.by_code_point
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
        self.run: list[tuple[int, int, int]] = []  # the merger's pieces
        self.total = 0

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
        length = sp.length(sp.text(self.piece_start, end))
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
        elif (self.child is not None and sp.lower_bound is not None
              and known_end > self.piece_start
              and sp.lower_bound(sp.text(self.piece_start, known_end)) >= sp.chunk_size):
            self.flush()
            self.delegating = True
            self.delegate(known_end, False)

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
            length = sp.length(sp.text(pos, pos + 1))
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
