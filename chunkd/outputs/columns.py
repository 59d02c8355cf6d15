"""Chunks as Arrow columns: the types of a table of chunks' columns and the arrays made
from chunk records, shared by ``chunkd.arrow`` (tables for Ray, Spark, Dask) and the
Parquet writer (``chunkd.outputs.parquet``)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import cast

from chunkd.model.chunk import INPUT_MAY_NAME, NULL, OPTIONAL_FIELDS, RECORD_FIELDS, Chunk, Parent

try:
    import pyarrow as pa
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError("chunkd's Arrow and Parquet output needs pyarrow: pip install 'pyarrow>=16'",
                      name=error.name) from None

#: Output column names that the input's carried columns may not use.
RESERVED = ("doc", "index", "start", "end", "length",
            *(name for name in OPTIONAL_FIELDS if name not in INPUT_MAY_NAME), "text")

_INT, _STRING = pa.int64(), pa.string()
#: The Arrow type of each chunk field (``chunkd.model.chunk.Chunk``) in a table of chunks:
#: the optional ones as ``chunkd.model.chunk.RECORD_FIELDS`` declares them.
FIELD_TYPES: dict[str, pa.DataType] = {
    "index": _INT, "start": _INT, "end": _INT, "length": _INT, "text": _STRING,
    **{field.name: field.arrow_type(pa) for field in RECORD_FIELDS},
}


def is_text_type(kind: pa.DataType) -> bool:
    """Whether a column of this type can hold documents: strings, or bytes decoded
    as UTF-8 (dictionary-encoded or not)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind) or is_bytes_type(kind))


def is_bytes_type(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
            or pa.types.is_binary_view(kind))


@dataclass(frozen=True)
class Columns:
    """The roles of an input's columns: the text, the id (None: the chunks have no
    ``doc``) and the carried ones, in their order."""

    text: str
    id: str | None
    carried: tuple[str, ...]

    @classmethod
    def of(cls, schema: pa.Schema, text_column: str, id_column: str | None,
           id_required: bool = False) -> Columns:
        """The roles in ``schema``; a missing text column (or, with ``id_required``,
        id column), a text column that holds no text, or a carried column named like
        an output column is a ``ValueError`` saying so in one line."""
        names = schema.names
        if len(set(names)) != len(names):
            twice = next(name for name in names if names.count(name) > 1)
            raise ValueError(f"two columns are named {twice!r}")
        if text_column not in names:
            raise ValueError(f"no text column {text_column!r} (columns: {', '.join(names)})")
        kind = schema.field(text_column).type
        if not is_text_type(kind):
            raise ValueError(f"the text column {text_column!r} holds {kind}, not strings")
        if id_column is not None and id_column not in names:
            if id_required:
                raise ValueError(f"no id column {id_column!r} (columns: {', '.join(names)})")
            id_column = None
        if id_column == text_column:
            raise ValueError(f"the column {text_column!r} cannot be both the text and the id")
        carried = tuple(name for name in names if name not in (text_column, id_column))
        clashing = [name for name in carried if name in RESERVED]
        if clashing:
            raise ValueError(f"column {clashing[0]!r} is reserved for chunk records; rename it")
        return cls(text_column, id_column, carried)

    def header(self, schema: pa.Schema) -> pa.Schema:
        """The columns that come before the chunk's own: ``doc`` (the id's type), then
        the carried ones, with their types."""
        fields = [schema.field(self.id).with_name("doc")] if self.id is not None else []
        return pa.schema(fields + [schema.field(name) for name in self.carried])


def chunk_schema(header: pa.Schema, fields: tuple[str, ...],
                 dimension: int | None = None) -> pa.Schema:
    """A table of chunks' schema: ``header``, the chunk's fields and the optional
    ``fields`` that the settings' records carry (``Settings.record_fields()``); a
    ``vector`` holds ``dimension`` float32s."""
    return pa.schema([*header, *(pa.field(name, field_type(name, dimension))
                                 for name in _chunk_columns(fields))])


def field_type(name: str, dimension: int | None = None) -> pa.DataType:
    """A chunk field's Arrow type: a vector is a fixed-size list of ``dimension``
    float32s where the model's dimension is known."""
    if name == "vector" and dimension is not None:
        return pa.list_(pa.float32(), dimension)
    return FIELD_TYPES[name]


def chunk_arrays(chunks: list[Chunk], fields: tuple[str, ...],
                 dimension: int | None = None) -> list[pa.Array]:
    """The columns of ``chunk_schema`` after the header, for these chunks."""
    values = list(zip(*chunks)) if chunks else [()] * len(Chunk._fields)
    columns: dict[str, Sequence[object]] = {
        name: values[Chunk._fields.index(name)] for name in _chunk_columns(fields)}
    if "parent" in columns:  # a record's parent is its number and span, as in NDJSON
        parents = cast("Sequence[Parent | None]", columns["parent"])
        columns["parent"] = [None if parent is None else parent[:3] for parent in parents]
    for name in ("context", "title", "summary"):  # what the LLM did not give: null
        if name in columns:                        # (None is null here)
            columns[name] = [None if value is NULL else value for value in columns[name]]
    return [vector_array(column, dimension) if name == "vector" else
            to_arrow(column, FIELD_TYPES[name]) for name, column in columns.items()]


def vector_array(vectors: Sequence[object], dimension: int | None) -> pa.Array:
    """Vectors (float32 arrays of one length) as a list array laid from one buffer:
    of fixed size where ``dimension`` is given (the model's)."""
    import numpy

    if not vectors:
        return pa.array([], field_type("vector", dimension))
    flat = numpy.stack(cast("Sequence[numpy.ndarray]", vectors)).astype(numpy.float32)
    values = pa.array(flat.ravel())
    if dimension is None:
        offsets = numpy.arange(0, flat.size + 1, flat.shape[1], dtype=numpy.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), values)
    return pa.FixedSizeListArray.from_arrays(values, dimension)


def _chunk_columns(fields: tuple[str, ...]) -> tuple[str, ...]:
    """A record's chunk fields, in order: the optional ones before the text."""
    return ("index", "start", "end", "length", *fields, "text")


def to_arrow(values: Sequence, kind: pa.DataType) -> pa.Array:
    """``values`` as an Arrow array of type ``kind``. Strings and 64-bit integers without
    nulls are laid into buffers directly: four times faster than ``pa.array`` for
    strings, and ``pa.array`` imports pandas where it is installed (50 MB)."""
    if kind == _INT and None not in values:
        return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(array("q", values))])
    if kind == _STRING and None not in values:
        encoded = [text.encode() for text in values]
        data = b"".join(encoded)
        if len(data) < 1 << 31:  # beyond, 32-bit offsets overflow
            offsets = array("i", accumulate(map(len, encoded), initial=0))
            return pa.StringArray.from_buffers(len(encoded), pa.py_buffer(offsets),
                                               pa.py_buffer(data))
    return pa.array(values, kind)


def with_pages(fields: tuple[str, ...]) -> tuple[str, ...]:
    """The optional chunk fields ``fields`` and ``pages``, in the records' order: the
    columns of chunks whose documents may be PDFs."""
    return tuple(name for name in OPTIONAL_FIELDS if name in fields or name == "pages")
