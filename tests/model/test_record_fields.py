"""A chunk's optional fields are declared once (``chunkd.model.chunk.RECORD_FIELDS``): the
``Chunk`` attributes, every writer's keys and the Arrow columns follow the declaration."""

from __future__ import annotations

import io

import msgpack
import numpy
import orjson
import pyarrow as pa

from chunkd.outputs.columns import FIELD_TYPES, chunk_arrays
from chunkd.model.chunk import NULL, OPTIONAL_FIELDS, RECORD_FIELDS, Chunk, Parent
from chunkd.outputs.writers import make_writer

#: A value of each declared field, by its Arrow type.
SAMPLES = {"tokens": 3, "estimated_tokens": 4, "headings": ("A", "B"),
           "parent": Parent(0, 0, 9, 9, "some text"), "embed_text": "A > B\n\nsome",
           "chunk_id": "0f8fad5b-d9cb-469f-a165-70867728950e", "pages": (2, 3),
           "symbols": ("class Splitter", "def feed"),
           "defines": ("class Splitter > def feed",), "language": "python",
           "distance": 0.25, "context": "From the guide's part on feeding.",
           "title": "Feeding", "summary": "How a splitter is fed.",
           "propositions": ({"text": "A splitter is fed.", "start": 0, "end": 4,
                             "match": "approximate", "score": 0.5},),
           "vector": numpy.array([0.5, -0.25], dtype=numpy.float32)}


def test_the_chunk_has_an_attribute_for_each_declared_field_in_order():
    assert Chunk._fields == ("index", "start", "end", "length", "text", *OPTIONAL_FIELDS)
    assert [field.name for field in RECORD_FIELDS] == list(SAMPLES)


def test_every_writer_writes_every_declared_field_before_the_text():
    chunk = Chunk(0, 0, 4, 4, "some", **SAMPLES)
    for format, decode in (("ndjson", lambda data: [orjson.loads(data)]),
                           ("json", lambda data: orjson.loads(data)["chunks"]),
                           ("msgpack", lambda data: list(msgpack.Unpacker(io.BytesIO(data))))):
        out = io.BytesIO()
        writer = make_writer(format, out, named=False)
        writer.begin(None, {})
        writer.write([chunk])
        writer.end()
        [record] = decode(out.getvalue())
        keys = [key for key in record if key in OPTIONAL_FIELDS or key == "text"]
        assert keys == [*OPTIONAL_FIELDS, "text"], format


def test_arrow_columns_have_the_declared_types():
    chunk = Chunk(0, 0, 4, 4, "some", **SAMPLES)
    arrays = chunk_arrays([chunk], OPTIONAL_FIELDS)
    optional = arrays[4:-1]  # after index, start, end, length; before text
    assert len(optional) == len(RECORD_FIELDS)
    for field, array in zip(RECORD_FIELDS, optional):
        assert FIELD_TYPES[field.name] == field.arrow_type(pa) == array.type


def test_a_context_the_llm_did_not_give_is_null_in_every_format():
    """``NULL``, unlike None, is written: the record says it has no context."""
    chunk = Chunk(0, 0, 4, 4, "some", context=NULL)
    for format, decode in (("ndjson", lambda data: list(map(orjson.loads, data.splitlines()))),
                           ("json", lambda data: orjson.loads(data)["chunks"]),
                           ("msgpack", lambda data: list(msgpack.Unpacker(io.BytesIO(data))))):
        out = io.BytesIO()
        writer = make_writer(format, out, named=False)
        writer.begin(None, {})
        writer.write([chunk, chunk._replace(context="A context.")])
        writer.end()
        assert [record["context"] for record in decode(out.getvalue())] == [None, "A context."]
    [column] = chunk_arrays([chunk, chunk._replace(context="A context.")], ("context",))[4:-1]
    assert column.to_pylist() == [None, "A context."]
