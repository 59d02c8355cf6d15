"""Late vectors in the filter (``--vectors --late``): each document's chunks are held
until it ends, then embedded within its whole text in one reading
(``chunkd.embeddings.late``) and written with their vectors.

A document's text is held whole meanwhile (the model must read all of it): a text
document is read into memory before it is chunked (``whole_texts``), a PDF, HTML or
DOCX document is its extracted text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from chunkd.inputs import DocumentFile
from chunkd.inputs.readers import Document, InputError, Paused, TextBlocks
from chunkd.model.chunk import Chunk
from chunkd.model.errors import EmbedError

if TYPE_CHECKING:
    from chunkd.embeddings.late import LateModel
    from chunkd.inputs import Extracted
    from chunkd.outputs.parquet import ParquetWriter
    from chunkd.outputs.writers import Writer


class LateWriter:
    """A writer (NDJSON, JSON, msgpack, Parquet) whose records get their late vectors:
    each document's calls are held until it ends, then its chunks are embedded within
    its text (given by ``whole_texts``, or its extraction) and its calls made. When the
    model fails, the document is not written and ``failed`` is told its name and the
    error."""

    def __init__(self, inner: Writer | ParquetWriter, model: LateModel,
                 failed: Callable[[object, EmbedError], None]) -> None:
        self.inner = inner
        self.model = model
        self.failed = failed
        #: The text of the document ``whole_texts`` gave last.
        self.text = ""
        self.document: tuple[object, dict, Extracted | None] | None = None
        self.chunks: list[Chunk] = []

    def whole_texts(self, items: Iterator[Document | InputError | Paused]
                    ) -> Iterator[Document | InputError | Paused]:
        """``items`` in order, each text document's text read into memory (an error in
        it taking its place) and kept for its chunks' vectors."""
        for item in items:
            if isinstance(item, Document) and not isinstance(item.blocks, DocumentFile):
                try:
                    self.text = (item.blocks.text if isinstance(item.blocks, TextBlocks)
                                 else "".join(item.blocks))
                except InputError as error:
                    yield error
                    continue
                item = Document(item.name, TextBlocks(self.text), item.fields, item.size,
                                item.media_type)
            yield item

    def begin(self, doc: object, fields: dict, extracted: Extracted | None = None) -> None:
        self.document, self.chunks = (doc, fields, extracted), []

    def write(self, chunks: list[Chunk]) -> None:
        self.chunks += chunks

    def end(self) -> None:
        assert self.document is not None
        doc, fields, extracted = self.document
        text = self.text if extracted is None else extracted.text
        from chunkd.embeddings.late import late_vectors  # with the model, not at start

        try:
            vectors = late_vectors(self.model, text, [(chunk.start, chunk.end)
                                                      for chunk in self.chunks])
        except EmbedError as error:
            self.failed(doc, error)
            return
        self.inner.begin(doc, fields, extracted)
        self.inner.write([chunk._replace(vector=vector)
                          for chunk, vector in zip(self.chunks, vectors)])
        self.inner.end()

    def flush(self) -> None:
        """Nothing is held between documents."""

    def close(self, failed: bool = False) -> None:
        self.inner.close(failed=failed)
