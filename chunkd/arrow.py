"""Chunk Arrow tables and record batches: a batch of documents in, a table of chunks out.

    from chunkd.arrow import Chunker, chunk_table
    chunks = chunk_table(documents, chunk_size=300, unit="tokens")   # a pyarrow.Table
    chunker = Chunker(chunk_size=300, unit="tokens")   # builds its splitter once
    for batch in batches: chunks = chunker(batch)

This is the piece every engine takes: Ray Data's ``map_batches(..., batch_format=
"pyarrow")`` (see ``chunkd.ray``), Spark's ``mapInArrow``, Dask and Daft. The settings
are ``chunkd.split_text``'s keywords (``chunk_size``, ``chunk_overlap``, ``unit``,
``strategy``, ``count_tokens``, ...).

A table of chunks has one row per chunk, with the columns of the filter's records, in
their order: ``doc`` (the id column's values), the other columns of the input (every
column but the text and the id, repeated on each chunk of their document), ``index``,
``start``, ``end``, ``length``, the optional fields the settings' records carry
(``Settings.record_fields()``, typed as ``chunkd.model.chunk.RECORD_FIELDS`` declares them),
and ``text``. Its schema depends only on the input's schema and the settings, so it is the same for every batch, an empty one included. A null text, like
an empty one, has no chunks.

With ``documents=True`` a binary text column holds files: each value is a PDF, HTML or
DOCX document as its content (then the id's extension) says, extracted as the filter
extracts it (``chunkd.inputs``), or else UTF-8 text; the table then has a ``pages``
column (a PDF's chunks' first and last page, null for the others).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from chunkd.model.chunk import Chunk
from chunkd.embeddings.selection import VECTORS, embedder
from chunkd.settings import Settings
from chunkd.inputs import extract_source
from chunkd.inputs.readers import InputError
from chunkd.model.chunker import Source
from chunkd.outputs.columns import (Columns, chunk_arrays, chunk_schema, is_bytes_type, to_arrow,
                                    with_pages)
from chunkd.outputs.vectors import embedded
from chunkd.pipeline import DocumentText, Pipeline

try:
    import pyarrow as pa
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError("chunkd.arrow needs pyarrow: pip install 'pyarrow>=16'",
                      name=error.name) from None

class Chunker:
    """A callable that chunks a table or record batch of documents (see the module's
    docstring); its splitter is built once, when it is made or unpickled, so one
    instance serves every batch of a worker. It pickles as its arguments.

    ``text_column`` holds the documents (strings, or UTF-8 bytes decoded as
    ``errors`` says); ``id_column`` names them, as ``doc``: None, or a name the input
    lacks, gives chunks without ``doc``. The other keywords are ``split_text``'s."""

    def __init__(self, text_column: str = "text", id_column: str | None = "id", *,
                 chunk_size: int | None = None, chunk_overlap: int | None = None,
                 documents: bool = False, **settings) -> None:
        if not isinstance(text_column, str) or not isinstance(id_column, (str, type(None))):
            raise TypeError("text_column and id_column are column names (the settings are "
                            "keywords: chunk_size=..., chunk_overlap=...)")
        self.__setstate__({"text_column": text_column, "id_column": id_column,
                           "settings": Settings.from_keywords(chunk_size, chunk_overlap,
                                                              **settings),
                           "documents": documents})

    def __getstate__(self) -> dict:
        return {"text_column": self.text_column, "id_column": self.id_column,
                "settings": self.settings, "documents": self.documents}

    def __setstate__(self, state: dict) -> None:
        self.text_column, self.id_column = state["text_column"], state["id_column"]
        self.settings: Settings = state["settings"]
        self.documents: bool = state["documents"]
        fields = self.settings.record_fields()
        self.fields = with_pages(fields) if self.documents else fields
        self._pipeline = Pipeline(self.settings)
        self._model = embedder(self.settings) if self.settings[VECTORS] else None
        self._dimension: int | None = None

    def columns(self, schema: pa.Schema) -> Columns:
        return Columns.of(schema, self.text_column, self.id_column)

    def schema(self, input_schema: pa.Schema) -> pa.Schema:
        """The schema of the tables this returns for inputs of ``input_schema`` (for an
        engine that wants it up front, such as Spark's ``mapInArrow``)."""
        return chunk_schema(self.columns(input_schema).header(input_schema), self.fields,
                            self.dimension())

    def dimension(self) -> int | None:
        """The numbers of a vector (None without ``vectors``): the model's, asked once
        (through its caches) if no chunk has given it yet."""
        if self._model is not None and self._dimension is None:
            self._dimension = int(self._model.embed(["dimension"]).shape[1])
        return self._dimension

    def __call__(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """The chunks of every document in ``batch``, in order."""
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        columns = self.columns(table.schema)
        chunks: list[Chunk] = []
        owners: list[int] = []  # the row of each chunk's document
        docs = table.column(columns.id).to_pylist() if columns.id else None
        for row, text in enumerate(self._texts(table.column(columns.text))):
            name = docs[row] if docs is not None else None
            source = Source(name)
            if isinstance(text, bytes):  # a file (documents=True)
                text, source = self._document(text, name, row)
            if text:
                found = [chunk for made in self._pipeline.chunks(DocumentText(source, [text]))
                         for chunk in made]
                chunks += found
                owners += [row] * len(found)
        if self._model is not None and chunks:  # the whole batch's in one call
            chunks = embedded(chunks, self._model)
            self._dimension = len(cast("Sequence[float]", chunks[0].vector))
        header = table.select([name for name in (columns.id, *columns.carried)
                               if name is not None]).take(to_arrow(owners, pa.int64()))
        schema = chunk_schema(columns.header(table.schema), self.fields, self.dimension())
        return pa.Table.from_arrays([*header.columns, *chunk_arrays(chunks, self.fields,
                                                                    self.dimension())],
                                    schema=schema)

    def _document(self, data: bytes, name: object, row: int) -> tuple[str, Source]:
        """A file's text and what is known of it (``documents=True``)."""
        try:
            document = extract_source(data, name, f"row {row} of the batch",
                                      self._pipeline.limits)
        except InputError as error:
            raise ValueError(str(error)) from None
        if document is None:
            return self._text_of(data, row), Source(name)
        source, extracted = document
        return extracted.text, source

    def _texts(self, column: pa.ChunkedArray) -> list[str | bytes | None]:
        values = column.to_pylist()
        if not is_bytes_type(column.type):
            return values
        if self.documents:  # files: each is told and read in __call__
            return values
        return [None if value is None else self._text_of(value, row)
                for row, value in enumerate(values)]

    def _text_of(self, value: bytes, row: int) -> str:
        try:
            return utf8_text(value, self.settings.errors)
        except ValueError as error:
            raise ValueError(f"row {row} of the batch: {error} "
                             "(errors='replace' substitutes U+FFFD)") from None


def utf8_text(value: bytes, errors: str) -> str:
    """A document given as bytes; invalid UTF-8 is a ``ValueError`` naming the byte
    (``errors="strict"``) or becomes U+FFFD (``"replace"``)."""
    try:
        return value.decode("utf-8", errors)
    except UnicodeDecodeError as error:
        raise ValueError(f"invalid UTF-8 at byte {error.start} of its text") from None


def chunk_table(batch: pa.Table | pa.RecordBatch, text_column: str = "text",
                id_column: str | None = "id", **settings) -> pa.Table:
    """The chunks of every document in ``batch`` (see ``Chunker``; to chunk many
    batches, make one ``Chunker`` and call it on each)."""
    return Chunker(text_column, id_column, **settings)(batch)
