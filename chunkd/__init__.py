"""chunkd: recursive text chunking for RAG, identical to LangChain's, on a stream."""

from __future__ import annotations

from chunkd._kernel import SEPARATORS, Splitter, TokenCounter
from chunkd.chunk import Chunk

__version__ = "0.1.0"
__all__ = ["Chunk", "SEPARATORS", "Splitter", "TokenCounter", "split_text", "__version__"]


def split_text(text: str, chunk_size: int = 1000, chunk_overlap: int = 0, *,
               unit: str = "chars") -> list[Chunk]:
    """Split one whole document; sizes in ``unit`` ("chars" or "tokens")."""
    splitter = Splitter(chunk_size, chunk_overlap, unit=unit)
    return splitter.feed(text) + splitter.finish()
