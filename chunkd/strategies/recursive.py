"""The recursive strategy: LangChain's RecursiveCharacterTextSplitter, compiled and
streaming (``chunkd._kernel``), in code points or cl100k_base tokens."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chunkd.strategies import Chunker, Strategy, register
from chunkd.units import length_counter

if TYPE_CHECKING:
    from chunkd.settings import Settings


@register
class Recursive(Strategy):
    """Blank lines, then lines, sentence ends, clauses, spaces, characters; short
    pieces merged greedily up to the size (LangChain's ``_merge_splits``)."""

    name = "recursive"
    units = ("chars", "tokens")
    default_size = 1000
    parents = True

    @classmethod
    def default_overlap(cls, size: int) -> int:
        return size // 10

    @classmethod
    def splitter(cls, settings: Settings) -> Chunker:
        from chunkd._kernel import RecursiveSplitter

        return RecursiveSplitter(settings.size, settings.overlap,
                                 counter=length_counter(settings.unit))
