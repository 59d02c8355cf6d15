"""Type stubs for the code strategy's compiled walk (chunkd/kernel/_code.pyx)."""

from collections.abc import Callable
from typing import TypeAlias

from chunkd.model.chunk import Chunk

#: The fields of an Outline (chunkd.strategies.code): starts, ends, code ends, parents,
#: symbols, qualified symbols, chains and chain ends.
Fields: TypeAlias = tuple[list[int], list[int], list[int], list[int], list[str], list[str],
                          list[tuple[str, ...]], list[int]]

#: The ABI versions of grammar the vendored tree-sitter runtime reads.
ABI_VERSIONS: range

class CodeWalk:
    LEADING: int
    CONTAINER: int
    DEFINITION: int

    def __init__(self, language: object, kinds: bytes, wrapping: tuple[int, ...],
                 keywords: tuple[bytes, ...], most_children: int, keyword_nodes: int) -> None: ...
    def records(self, text: str, cuts: list[int], fields: Fields, template: Chunk,
                at_symbols: int, at_defines: int) -> list[Chunk]: ...
    def cut(self, text: str, data: bytes, size: int,
            leaf_starts: Callable[[int, int, int], list[int]],
            symbol: Callable[[str, bool], str]) -> tuple[list[int], Fields]: ...
