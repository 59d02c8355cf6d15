"""Type stubs for the compiled kernel (chunkd/_kernel.pyx)."""

from collections.abc import Callable

from chunkd.chunk import Chunk

SEPARATORS: tuple[str, ...]

class TokenCounter:
    max_token_chars: int
    def __init__(self, encode: Callable[[str], list[int]], classes: bytes,
                 max_token_bytes: int, cache_entries: int = ...) -> None: ...
    def count(self, text: str) -> int: ...
    def pretokens(self, text: str) -> list[str]: ...

class RecursiveSplitter:
    chunk_size: int
    chunk_overlap: int
    counter: TokenCounter | None
    def __init__(self, chunk_size: int, chunk_overlap: int, *,
                 counter: TokenCounter | None = None) -> None: ...
    def feed(self, text: str) -> list[Chunk]: ...
    def finish(self) -> list[Chunk]: ...
