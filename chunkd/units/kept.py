"""Counts kept by piece: for a unit whose count of a text is the sum of its pieces'
counts (cut where the tokenizer always cuts), each piece is counted once and kept, so
that the splitter's many counts of the same text, in growing pieces and chunks, cost a
lookup a piece."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from chunkd.kernel.chosen import IMPLEMENTATION

#: The most code points of pieces whose counts are kept (then it starts afresh).
CACHE_POINTS = 1 << 22
#: The CJK ideographs that ``ideographs`` makes cuts.
IDEOGRAPHS = "\u4e00-\u9fff"


def pieces(marks: str = "", ideographs: bool = False) -> re.Pattern[str]:
    """The pieces: the runs between spaces, tabs, CR, LF and the cuts, and each cut;
    the cuts are the ASCII ``marks``, and the CJK ideographs where ``ideographs``."""
    cuts = re.escape(marks) + (IDEOGRAPHS if ideographs else "")
    return re.compile(f"[^ \\t\\n\\r{cuts}]+|[{cuts}]" if cuts else r"[^ \t\n\r]+")


#: Groups: the runs between spaces, tabs, CR and LF.
GROUPS = pieces()


class KeptCounts:
    """``count(text)`` as the sum of ``count(piece)`` over ``text``'s ``pieces(marks,
    ideographs)``, each piece's count kept, at most ``CACHE_POINTS`` code points of
    pieces in all. ``count`` may be another ``KeptCounts`` with finer pieces, which
    then counts only the pieces this one has not seen."""

    def __init__(self, count: Callable[[str], int], marks: str = "",
                 ideographs: bool = False) -> None:
        if not marks.isascii():
            raise ValueError(f"cuts are ASCII marks, not {marks!r}")
        self.count = count
        self.pieces = pieces(marks, ideographs).findall
        self.summed: Callable[[KeptCounts, str, int], int] = (
            functools.partial(piece_sum, marks=marks, ideographs=ideographs)
            if piece_sum is not None else pieces_sum)
        self.counts: dict[str, int] = {}
        self.points = 0  # the code points of the pieces in ``counts``

    def __call__(self, text: str) -> int:
        # A text that is a kept piece is its own count (the kernel counts many
        # single characters): ``pieces`` gives ``[piece]`` for each piece.
        known = self.counts.get(text)
        if known is not None:
            return known
        total = self.summed(self, text, CACHE_POINTS)
        if total < 0:  # too many pieces kept: start afresh with this text's
            self.counts.clear()
            self.points = 0
            total = self.summed(self, text, CACHE_POINTS)
        # A text whose new pieces alone pass the bound is counted whole.
        return total if total >= 0 else self.count(text)


def pieces_sum(kept: KeptCounts, text: str, limit: int) -> int:
    """The sum of the counts of ``text``'s pieces in ``kept``, each piece not kept yet
    counted by ``kept.count`` and kept; -1 when one more would pass ``limit`` code
    points kept (those counted before it stay kept). ``chunkd.kernel._kept.piece_sum`` is
    this compiled, used where the core is."""
    pieces = kept.pieces(text)
    counts = kept.counts
    try:  # most texts the splitter counts are made of pieces it has counted
        return sum(map(counts.__getitem__, pieces))
    except KeyError:
        pass
    total = 0
    for piece in pieces:
        known = counts.get(piece)
        if known is None:
            if kept.points + len(piece) > limit:
                return -1
            known = counts[piece] = kept.count(piece)
            kept.points += len(piece)
        total += known
    return total


piece_sum: Callable[..., int] | None = None
if IMPLEMENTATION == "compiled":  # the compiled core's choice, and so the twin's
    try:
        from chunkd.kernel._kept import piece_sum
    except ImportError:  # built before it had this module: its twin, the same sums
        pass
