"""The one path from decoded text to chunks, shared by the filter and the daemon."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass

from chunkd._kernel import Splitter
from chunkd.chunk import Chunk

STRATEGIES = ("recursive",)


@dataclass(frozen=True)
class Settings:
    """How to chunk: strategy, unit ("chars" or "tokens"), size and overlap."""

    unit: str = "chars"
    size: int = 1000
    overlap: int = 100
    strategy: str = "recursive"

    def splitter(self) -> Splitter:
        return Splitter(self.size, self.overlap, unit=self.unit)

    def as_dict(self) -> dict:
        return asdict(self)


def chunk_blocks(settings: Settings, blocks: Iterable[str]) -> Iterator[list[Chunk]]:
    """Chunk one document given as text blocks; yields the chunks that each block
    makes final, then the last ones."""
    splitter = settings.splitter()
    for block in blocks:
        chunks = splitter.feed(block)
        if chunks:
            yield chunks
    yield splitter.finish()
