"""Each chunk's vector (``--vectors``): the embedding of its ``embed_text`` where it has
one, else of its text, by the settings' model (``chunkd.embeddings.selection``), as ``vector``.

Chunks are embedded in batches filled across documents, never one call per document:
the filter's ``VectorWriter`` holds the records of consecutive documents until a
batch's worth of chunks is ready (or the input pauses, or ends), embeds them in one
call and writes them on, in order; ``with_vectors`` does the same for one stream of
chunk lists (a daemon's result); Arrow embeds each table's chunks at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from chunkd.model.chunk import Chunk
from chunkd.model.errors import EmbedError

if TYPE_CHECKING:
    from chunkd.inputs import Extracted
    from chunkd.embeddings.models import Embedder
    from chunkd.outputs.parquet import ParquetWriter
    from chunkd.outputs.writers import Writer


def embedded(chunks: list[Chunk], model: Embedder) -> list[Chunk]:
    """The chunks with their vectors, from one call to the model."""
    if not chunks:
        return chunks
    vectors = model.embed([chunk.embed_text or chunk.text for chunk in chunks])
    return [chunk._replace(vector=vector) for chunk, vector in zip(chunks, vectors)]


def with_vectors(batches: Iterable[list[Chunk]], model: Embedder,
                 batch: int) -> Iterator[list[Chunk]]:
    """The chunks of ``batches`` (one document's, as a strategy gives them) with their
    vectors, in order, regrouped so that the model is called with ``batch`` chunks at a
    time (the last call with the rest)."""
    held: list[Chunk] = []
    for chunks in batches:
        held += chunks
        while len(held) >= batch:
            yield embedded(held[:batch], model)
            del held[:batch]
    if held:
        yield embedded(held, model)


class VectorWriter:
    """A writer (NDJSON, JSON, msgpack, Parquet) whose records get their vectors: the
    calls for consecutive documents are held until ``batch`` chunks are (or ``flush``),
    then the chunks of whole batches are embedded in one call and their calls made, in
    order (the rest wait for the next). At most ``batch`` chunks are held, plus one
    call's chunks. When the model fails, the held
    documents are not written and ``failed`` is told each one's name and the error."""

    def __init__(self, inner: Writer | ParquetWriter, model: Embedder, batch: int,
                 failed: Callable[[object, EmbedError], None]) -> None:
        self.inner = inner
        self.model = model
        self.batch = batch
        self.failed = failed
        #: The calls held: ("begin", (doc, fields, extracted)), ("write", chunks), ("end",).
        self.held: list[tuple[str, Any]] = []
        self.count = 0  # chunks held
        #: The document begun on ``inner`` and not ended (a batch ended inside it).
        self.open: object = None
        self.is_open = False
        #: Whether the current document failed: its further calls go nowhere.
        self.skipping = False

    def begin(self, doc: object, fields: dict, extracted: Extracted | None = None) -> None:
        self.skipping = False
        self.held.append(("begin", (doc, fields, extracted)))

    def write(self, chunks: list[Chunk]) -> None:
        if chunks and not self.skipping:
            self.held.append(("write", chunks))
            self.count += len(chunks)
            if self.count >= self.batch:
                self.flush(whole_batches=True)

    def end(self) -> None:
        if self.skipping:
            self.skipping = False
        else:
            self.held.append(("end", None))

    def flush(self, whole_batches: bool = False) -> None:
        """Embed the chunks held and make the calls held; with ``whole_batches``, only
        as many chunks as fill whole batches (the rest stay held, to fill the next)."""
        take = self.count - self.count % self.batch if whole_batches else self.count
        held, self.held = self._split(take)
        self.count -= take
        try:
            made = iter(embedded([chunk for call, value in held if call == "write"
                                  for chunk in value], self.model))
        except EmbedError as error:
            self._drop(held + self.held, error)
            self.held, self.count = [], 0
            return
        for call, value in held:
            if call == "begin":
                self.open, self.is_open = value[0], True
                self.inner.begin(*value)
            elif call == "write":
                self.inner.write([next(made) for _ in value])
            else:
                self.is_open = False
                self.inner.end()

    def _split(self, take: int) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        """The calls held up to the ``take``-th chunk (a write cut there if need be),
        and the rest."""
        first: list[tuple[str, Any]] = []
        count = 0
        for number, (call, value) in enumerate(self.held):
            if call == "write" and count + len(value) > take:
                cut = take - count
                if cut:
                    first.append(("write", value[:cut]))
                return first, [("write", value[cut:]), *self.held[number + 1:]]
            first.append((call, value))
            count += len(value) if call == "write" else 0
        return first, []

    def _drop(self, held: list[tuple[str, Any]], error: EmbedError) -> None:
        """The documents with calls held are not written (one begun already, a batch
        having ended inside it, stays unended, as a document that fails while it is
        written), each told as failed; the rest of the last one, if it has not ended,
        is skipped."""
        names: list[object] = [self.open] if self.is_open else []
        is_open = self.is_open
        for call, value in held:
            if call == "begin":
                names.append(value[0])
            is_open = call == "begin" or (is_open and call != "end")
        self.is_open, self.skipping = False, is_open
        for name in names:
            self.failed(name, error)

    def close(self, failed: bool = False) -> None:
        self.flush()
        self.inner.close(failed=failed)
