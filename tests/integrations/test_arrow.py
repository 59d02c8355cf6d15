"""chunkd.arrow: tables of documents to tables of chunks, checked against LangChain,
tiktoken and the filter's records; schemas stable across batches."""

from __future__ import annotations

import datetime
import pickle
import re
import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

import chunkd.pipeline
from chunkd.arrow import Chunker, chunk_table
from chunkd.outputs.columns import to_arrow
from chunkd.model.chunk import Chunk, Parent
from chunkd.settings import SettingsError
from chunkd.strategies import REGISTRY, Strategy
from command import install_command
from oracle import langchain_chunks, token_length
from tables import corpus_rows, corpus_table, filter_records

CHUNK_COLUMNS = ["index", "start", "end", "length", "text"]


def by_document(rows: list[dict]) -> dict[str, list[dict]]:
    documents: dict[str, list[dict]] = {}
    for row in rows:
        documents.setdefault(row["doc"], []).append(row)
    return documents


def test_chunks_equal_langchain_with_exact_offsets_and_carried_columns():
    table = corpus_table()
    chunks = chunk_table(table, chunk_size=300, chunk_overlap=30)
    documents = by_document(chunks.to_pylist())
    assert len(documents) == table.num_rows
    for source in corpus_rows():
        rows = documents[source["id"]]
        text = source["text"]
        assert [row["text"] for row in rows] == langchain_chunks(text, 300, 30, "chars")
        assert [row["index"] for row in rows] == list(range(len(rows)))
        assert all(text[row["start"]:row["end"]] == row["text"] for row in rows)
        assert all(row["length"] == len(row["text"]) for row in rows)
        assert all((row["folder"], row["number"]) == (source["folder"], source["number"])
                   for row in rows)


def test_rows_equal_the_filters_records():
    chunks = chunk_table(corpus_table(), chunk_size=200, unit="tokens", count_tokens=True)
    assert chunks.to_pylist() == filter_records("--tokens", "200", "--count-tokens")


@pytest.mark.parametrize("keywords,options", [
    ({"chunk_size": 200, "parent_size": 1000}, ["--chars", "200", "--parent-chars", "1000"]),
    ({"chunk_size": 100, "unit": "tokens", "strategy": "markdown", "embed_text": True},
     ["--strategy", "markdown", "--tokens", "100", "--embed-text"]),
    ({"chunk_size": 3, "strategy": "sentences"}, ["--strategy", "sentences", "--size", "3"]),
])
def test_every_strategys_fields_equal_the_filters_records(keywords, options):
    """Parents (their number and span), headings, embed_text, estimated tokens."""
    chunks = chunk_table(corpus_table(), **keywords)
    assert chunks.to_pylist() == filter_records(*options)


def test_count_tokens_adds_exact_cl100k_counts():
    table = corpus_table().slice(0, 20)
    chunks = chunk_table(table, chunk_size=500, count_tokens=True)
    assert chunks.column_names == ["doc", "folder", "number", *CHUNK_COLUMNS[:4], "tokens", "text"]
    assert chunks.schema.field("tokens").type == pa.int64()
    assert all(row["tokens"] == token_length(row["text"]) for row in chunks.to_pylist())


def test_schema_is_the_same_for_every_batch_an_empty_one_included():
    chunker = Chunker(chunk_size=100, count_tokens=True)
    table = corpus_table()
    nulls = table.set_column(1, "text", pa.array([None] * table.num_rows, pa.string()))
    batches = {
        "table": table.slice(0, 5),
        "record batch": table.slice(5, 3).to_batches()[0],
        "several chunks": pa.concat_tables([table.slice(0, 2), table.slice(9, 2)]),
        "empty": table.slice(0, 0),
        "empty texts": table.set_column(1, "text", pa.array([""] * table.num_rows)).slice(0, 4),
        "null texts": nulls.slice(0, 4),
    }
    results = {name: chunker(batch) for name, batch in batches.items()}
    expected = chunker.schema(table.schema)
    for name, result in results.items():
        assert result.schema == expected, name
    assert results["table"].num_rows > 5
    for name in ("empty", "empty texts", "null texts"):
        assert results[name].num_rows == 0, name
    assert expected.field("number").type == pa.int32()


def test_carried_columns_keep_their_types_and_values():
    moment = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.timezone.utc)
    table = pa.table({
        "text": ["one two three four five six", "seven eight"],
        "id": pa.array([10, 20], pa.int16()),
        "when": pa.array([moment, None], pa.timestamp("us", tz="UTC")),
        "tags": pa.array([["a", "b"], []], pa.list_(pa.string())),
        "meta": pa.array([{"k": 1}, {"k": None}], pa.struct([("k", pa.int8())])),
        "kind": pa.array(["x", "y"]).dictionary_encode(),
    })
    chunks = chunk_table(table, chunk_size=12, chunk_overlap=0)
    assert chunks.schema.names == ["doc", "when", "tags", "meta", "kind", *CHUNK_COLUMNS]
    for name in ("when", "tags", "meta", "kind"):
        assert chunks.schema.field(name).type == table.schema.field(name).type
    assert chunks.schema.field("doc").type == pa.int16()
    rows = chunks.to_pylist()
    assert [row["text"] for row in rows] == ["one two", "three four", "five six", "seven eight"]
    assert [row["doc"] for row in rows] == [10, 10, 10, 20]
    assert rows[0]["when"] == moment and rows[3]["when"] is None
    assert rows[2]["tags"] == ["a", "b"] and rows[3]["meta"] == {"k": None}
    assert [row["kind"] for row in rows] == ["x", "x", "x", "y"]


def test_without_an_id_column_chunks_have_no_doc():
    table = pa.table({"text": ["alpha beta"], "url": ["https://x"]})
    for chunks in (chunk_table(table, chunk_size=50), chunk_table(table, id_column=None,
                                                                    chunk_size=50)):
        assert chunks.column_names == ["url", *CHUNK_COLUMNS]
    only_text = chunk_table(pa.table({"body": ["alpha beta"]}), text_column="body")
    assert only_text.to_pylist() == [{"index": 0, "start": 0, "end": 10, "length": 10,
                                      "text": "alpha beta"}]


def test_bytes_are_decoded_as_utf8_as_errors_says():
    table = pa.table({"text": pa.array(["héllo wörld".encode(), b"ab\xffcd"], pa.binary())})
    with pytest.raises(ValueError, match="row 1 of the batch: invalid UTF-8 at byte 2"):
        chunk_table(table)
    rows = chunk_table(table, errors="replace").to_pylist()
    assert [row["text"] for row in rows] == ["héllo wörld", "ab\ufffdcd"]


@pytest.mark.parametrize("table,arguments,message", [
    (pa.table({"body": ["x"]}), {}, "no text column 'text' (columns: body)"),
    (pa.table({"text": [1]}), {}, "the text column 'text' holds int64, not strings"),
    (pa.table({"text": ["x"], "index": [1]}), {}, "column 'index' is reserved"),
    (pa.table({"text": ["x"], "doc": ["d"]}), {}, "column 'doc' is reserved"),
    (pa.table({"text": ["x"]}), {"id_column": "text"}, "both the text and the id"),
    (pa.Table.from_arrays([pa.array(["x"]), pa.array(["y"])], names=["text", "text"]), {},
     "two columns are named 'text'"),
])
def test_unusable_columns_are_named(table, arguments, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        chunk_table(table, **arguments)


def test_bad_settings_fail_when_the_chunker_is_made():
    with pytest.raises(SettingsError, match="overlap"):
        Chunker(chunk_size=10, chunk_overlap=10)
    with pytest.raises(TypeError, match="chunk_sise"):
        Chunker(chunk_sise=10)


def test_the_splitter_is_built_once_and_a_chunker_pickles_as_its_arguments(monkeypatch):
    built = []
    real_build = chunkd.pipeline.build
    monkeypatch.setattr(chunkd.pipeline, "build", lambda s: built.append(s) or real_build(s))
    chunker = Chunker(chunk_size=80, unit="tokens")
    table = corpus_table().slice(0, 6)
    first = [chunker(table.slice(i, 1)) for i in range(6)]
    assert len(built) == 1
    copy = pickle.loads(pickle.dumps(chunker))
    assert len(built) == 2 and copy.settings == chunker.settings
    assert pa.concat_tables(first).equals(copy(table))


# --- optional fields of other strategies: a stand-in strategy that fills them --------

class LinesSplitter:
    """A chunk per line, with the optional fields filled (None for the first line's
    parent and headings, to cover nulls)."""

    def __init__(self) -> None:
        self.text = ""

    def feed(self, text: str) -> list[Chunk]:
        self.text += text
        return []

    def finish(self) -> list[Chunk]:
        chunks, start = [], 0
        for index, line in enumerate(self.text.split("\n")):
            end = start + len(line)
            first = index == 0
            chunks.append(Chunk(index, start, end, 1, line, None, len(line),
                                None if first else ("Title", f"line {index}"),
                                None if first else Parent(0, 0, len(self.text), 1, self.text)))
            start = end + 1
        self.text = ""
        return chunks


class Lines(Strategy):
    name, units, default_size, window = "lines", ("lines",), 1, True
    fields = ("estimated_tokens", "headings", "parent")

    @classmethod
    def splitter(cls, settings):
        return LinesSplitter()


def test_optional_fields_of_any_strategy_get_their_types(monkeypatch):
    monkeypatch.setitem(REGISTRY, "lines", Lines)
    table = pa.table({"id": ["a"], "text": ["first\nsecond line"]})
    chunks = chunk_table(table, strategy="lines")
    assert chunks.schema.names == ["doc", "index", "start", "end", "length",
                                   "estimated_tokens", "headings", "parent", "text"]
    assert chunks.schema.field("headings").type == pa.list_(pa.string())
    assert chunks.schema.field("parent").type == pa.struct(
        [("index", pa.int64()), ("start", pa.int64()), ("end", pa.int64())])
    assert chunks.to_pylist() == [
        {"doc": "a", "index": 0, "start": 0, "end": 5, "length": 1, "estimated_tokens": 5,
         "headings": None, "parent": None, "text": "first"},
        {"doc": "a", "index": 1, "start": 6, "end": 17, "length": 1, "estimated_tokens": 11,
         "headings": ["Title", "line 1"], "parent": {"index": 0, "start": 0, "end": 17},
         "text": "second line"},
    ]
    assert chunk_table(table.slice(0, 0), strategy="lines").schema == chunks.schema


# --- the column builder ----------------------------------------------------------------

unicode_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(unicode_text, max_size=40),
       st.lists(st.integers(-2**63, 2**63 - 1), max_size=40))
def test_to_arrow_equals_pyarrows_own_conversion(texts, numbers):
    assert to_arrow(texts, pa.string()).equals(pa.array(texts, pa.string()))
    assert to_arrow(numbers, pa.int64()).equals(pa.array(numbers, pa.int64()))
    with_null = [*texts, None]
    assert to_arrow(with_null, pa.string()).equals(pa.array(with_null, pa.string()))


@pytest.mark.parametrize("module,extra", [("chunkd.arrow", "arrow"), ("chunkd.ray", "ray")])
def test_a_missing_optional_dependency_says_which_extra_to_install(module, extra):
    blocked = "pyarrow" if extra == "arrow" else "ray"
    code = f"import sys; sys.modules[{blocked!r}] = None; import {module}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].endswith(install_command(extra))


def test_settings_are_keywords():
    table = pa.table({"text": ["some text"]})
    with pytest.raises(TypeError, match="the settings are keywords"):
        chunk_table(table, 300)
    with pytest.raises(TypeError):
        Chunker("text", "id", 300)
