"""Counts kept by piece: for a unit whose count of a text is the sum of its pieces'
counts (cut where the tokenizer always cuts), each piece is counted once and kept, so
that the splitter's many counts of the same text, in growing pieces and chunks, cost a
lookup a piece."""

from __future__ import annotations

from collections.abc import Callable

#: The most code points of pieces whose counts are kept (then it starts afresh).
CACHE_POINTS = 1 << 22


class KeptCounts:
    """``count(text)`` as the sum of ``count(piece)`` over ``pieces(text)``, each
    piece's count kept, at most ``CACHE_POINTS`` code points of pieces in all."""

    def __init__(self, pieces: Callable[[str], list[str]], count: Callable[[str], int]) -> None:
        self.pieces = pieces
        self.count = count
        self.counts: dict[str, int] = {}
        self.points = 0  # the code points of the pieces in ``counts``

    def __call__(self, text: str) -> int:
        pieces = self.pieces(text)
        counts = self.counts
        distinct = set(pieces)
        missing = distinct.difference(counts)
        if missing:
            if self.points + sum(map(len, missing)) > CACHE_POINTS:
                counts.clear()  # start afresh with this text's pieces
                self.points, missing = 0, distinct
            points = sum(map(len, missing))
            if points > CACHE_POINTS:
                return self.count(text)
            for piece in missing:
                counts[piece] = self.count(piece)
            self.points += points
        return sum(map(counts.__getitem__, pieces))
