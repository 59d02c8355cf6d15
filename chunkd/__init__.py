"""chunkd: recursive text chunking for RAG, identical to LangChain's, on a stream."""

from __future__ import annotations

from chunkd._kernel import SEPARATORS, Splitter, TokenCounter
from chunkd.chunk import Chunk

__version__ = "0.1.0"
__all__ = ["Chunk", "SEPARATORS", "Splitter", "TokenCounter", "split_text", "__version__"]


#: split_text feeds the kernel in blocks of this many code points: a block of ASCII is a
#: one-byte string that the kernel scans with memchr, even when the document is not.
_BLOCK = 1 << 16


def split_text(text: str, chunk_size: int = 1000, chunk_overlap: int = 0, *,
               unit: str = "chars") -> list[Chunk]:
    """Split one whole document; sizes in ``unit`` ("chars" or "tokens")."""
    splitter = Splitter(chunk_size, chunk_overlap, unit=unit)
    chunks = []
    for start in range(0, len(text), _BLOCK):
        chunks += splitter.feed(text[start:start + _BLOCK])
    return chunks + splitter.finish()
