"""Type stubs for the compiled kernel (chunkd/kernel/_kernel.pyx)."""

import re
from collections.abc import Callable, Iterable
from typing import Any, Literal

from chunkd.model.chunk import Chunk
from chunkd.kernel.splitting import Joined
from chunkd.model.length import LengthUnit

def unpack_ranks(packed: bytes) -> dict[bytes, int]: ...

class TokenCounter:
    name: str
    max_chars: int | None
    max_size: int | None
    pattern: str
    @property
    def encoding(self) -> Any: ...
    def __init__(self, encode: Callable[[str], list[int]], classes: bytes,
                 max_token_bytes: int, cache_entries: int = ...,
                 name: str = ..., pattern: str = ...,
                 ranks: dict[bytes, int] | bytes | None = None) -> None: ...
    def count(self, text: str) -> int: ...
    def settled(self, text: str) -> tuple[int, int]: ...
    def pretokens(self, text: str) -> list[str]: ...
    def tokens(self, text: str) -> list[int]: ...

class RecursiveSplitter:
    chunk_size: int
    chunk_overlap: int
    unit: LengthUnit
    measure_chunks: bool
    merge_long: bool
    joined: list[tuple[int, Joined]] | None
    def __init__(self, chunk_size: int, chunk_overlap: int, *,
                 separators: Iterable[str | re.Pattern[str]] = ...,
                 keep_separator: bool | Literal["start", "end"] = ...,
                 strip_whitespace: bool = ..., merge_long: bool = ...,
                 join: str | None = ..., unit: LengthUnit | None = None,
                 measure_chunks: bool = True) -> None: ...
    def resize(self, chunk_size: int, chunk_overlap: int) -> None: ...
    def feed(self, text: str) -> list[Chunk]: ...
    def finish(self) -> list[Chunk]: ...
