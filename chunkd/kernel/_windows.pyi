"""Type stubs for the compiled window strategies (chunkd/kernel/_windows.pyx)."""

from chunkd.model.chunk import Chunk

GRAPHEME_BREAK_VALUES: tuple[str, ...]
CONJUNCT_BREAK_VALUES: tuple[str, ...]
PICTOGRAPHIC_BIT: int
HEADING_LIMIT: int
ELLIPSIS: str

def cut_heading(text: str, keep: int) -> str: ...

class _Windows:
    size: int
    overlap: int
    def feed(self, text: str) -> list[Chunk]: ...
    def finish(self) -> list[Chunk]: ...

class GraphemeWindows(_Windows):
    def __init__(self, size: int, overlap: int, properties: bytes) -> None: ...

class WordWindows(_Windows):
    def __init__(self, size: int, overlap: int) -> None: ...

class SentenceWindows(_Windows):
    def __init__(self, size: int, overlap: int) -> None: ...

class SectionWindows(_Windows):
    def __init__(self, size: int, overlap: int) -> None: ...

class SectionScanner:
    position: int
    settled: int
    def __init__(self) -> None: ...
    def feed(self, text: str) -> list[tuple[int, tuple[str, ...]]]: ...
    def finish(self) -> list[tuple[int, tuple[str, ...]]]: ...
