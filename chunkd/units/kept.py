"""Counts kept by piece: for a unit whose count of a text is the sum of its pieces'
counts (cut where the tokenizer always cuts), each piece is counted once and kept, so
that the splitter's many counts of the same text, in growing pieces and chunks, cost a
lookup a piece."""

from __future__ import annotations

import re
from collections.abc import Callable

from chunkd.core import IMPLEMENTATION

#: The most code points of pieces whose counts are kept (then it starts afresh).
CACHE_POINTS = 1 << 22
#: Groups: the runs between spaces, tabs, CR and LF.
GROUPS = re.compile(r"[^ \t\n\r]+")


class KeptCounts:
    """``count(text)`` as the sum of ``count(piece)`` over ``pieces(text)``, each
    piece's count kept, at most ``CACHE_POINTS`` code points of pieces in all.

    ``pieces`` must give ``[piece]`` for each piece it makes (a regular expression's
    ``findall`` of runs and single characters does): so a text that is a kept piece is
    its own count. ``count`` may be another ``KeptCounts`` with finer pieces, which
    then counts only the pieces this one has not seen. ``summed``: how the sum is
    made (``pieces_sum``, or ``group_sum`` for ``GROUPS``, compiled)."""

    def __init__(self, pieces: Callable[[str], list[str]], count: Callable[[str], int],
                 summed: Callable[[KeptCounts, str, int], int] | None = None) -> None:
        self.pieces = pieces
        self.count = count
        self.summed = summed or pieces_sum
        self.counts: dict[str, int] = {}
        self.points = 0  # the code points of the pieces in ``counts``

    def __call__(self, text: str) -> int:
        known = self.counts.get(text)
        if known is not None:  # the kernel counts many single pieces (characters)
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
    points kept (those counted before it stay kept)."""
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


#: ``pieces_sum`` for a ``KeptCounts`` whose pieces are ``GROUPS``: compiled
#: (``chunkd._kept``) where the core is, without a list of the groups.
group_sum = pieces_sum
if IMPLEMENTATION == "compiled":  # the compiled core's choice, and so the twin's
    try:
        from chunkd._kept import group_sum
    except ImportError:  # built before it had this module: its twin, the same sums
        pass
