"""Type stubs for the compiled NDJSON writer (chunkd/kernel/_records.pyx)."""

from collections.abc import Callable, Iterable

from chunkd.model.chunk import Chunk

def write_json_lines(write: Callable[[bytes], object], chunks: Iterable[Chunk], opening: bytes,
                     record: Callable[[Chunk], bytes], batch_bytes: int) -> None: ...
