"""``--ids``: every chunk's stable UUID, checked against the formula as the docs state
it (written here again from that text, not taken from chunkd), in every format, the
daemon's results and Arrow tables."""

from __future__ import annotations

import hashlib
import io
import json
import uuid

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq

from command import ndjson, run_chunkd
from oracle import corpus_documents
from watching import results


def reference_id(doc: object, start: int, end: int, text: str,
                 parent: tuple[int, int] | None = None) -> str:
    """The id as the docs define it: SHA-256 of DOC (compact JSON, sorted keys), the
    offsets (and a child's parent's offsets) and the text, one a line; its first 16
    bytes as a version-8 UUID."""
    document = json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    parts = [document, str(start), str(end), *map(str, parent or ()), text]
    raw = bytearray(hashlib.sha256("\n".join(parts).encode("utf-8")).digest()[:16])
    raw[6] = raw[6] & 0x0F | 0x80   # version 8
    raw[8] = raw[8] & 0x3F | 0x80   # the RFC 9562 variant
    return str(uuid.UUID(bytes=bytes(raw)))


def test_a_known_chunk_keeps_its_id_across_versions(tmp_path):
    # The formula is a promise: a vector store filled by an earlier chunkd must get
    # the same ids from a later one. This value was computed once from the formula.
    assert reference_id("a.md", 0, 5, "hello") == "8566d5fc-1487-82b4-8194-479a495db5ba"
    (tmp_path / "a.md").write_bytes(b"hello")
    result = run_chunkd("--ids", "--chars", "5", "--overlap", "0", "a.md", cwd=tmp_path)
    assert ndjson(result.stdout)[0]["chunk_id"] == "8566d5fc-1487-82b4-8194-479a495db5ba"


def test_every_record_of_the_corpus_has_the_documented_id_and_ids_are_unique():
    paths = [str(p) for p in corpus_documents()[:12]]
    result = run_chunkd("--ids", "--tokens", "100", "--jobs", "2", *paths)
    assert result.returncode == 0, result.stderr
    records = ndjson(result.stdout)
    for record in records:
        assert record["chunk_id"] == reference_id(record["doc"], record["start"], record["end"],
                                            record["text"])
    assert len({record["chunk_id"] for record in records}) == len(records)
    assert run_chunkd("--ids", "--tokens", "100", "--jobs", "1", *paths).stdout == result.stdout


def test_stdin_ndjson_ids_and_a_changed_text_or_document_changes_the_id():
    stdin = ndjson(run_chunkd("--ids", "--chars", "20", input="Some words, then more.".encode()).stdout)
    assert stdin[0]["chunk_id"] == reference_id(None, stdin[0]["start"], stdin[0]["end"], stdin[0]["text"])
    lines = b'{"id": {"b": 1, "a": [2]}, "text": "Same text"}\n{"id": 7, "text": "Same text"}\n' \
            b'{"id": 7, "text": "Same text!"}\n'
    records = ndjson(run_chunkd("--ids", "--input", "ndjson", input=lines).stdout)
    assert records[0]["chunk_id"] == reference_id({"a": [2], "b": 1}, 0, 9, "Same text")
    assert len({record["chunk_id"] for record in records}) == 3


def test_children_of_overlapping_parents_get_distinct_ids():
    text = " ".join(f"w{i}" for i in range(200)).encode()
    result = run_chunkd("--ids", "--chars", "12", "--overlap", "0", "--parent-chars", "60",
                        "--parent-overlap", "30", input=text)
    records = ndjson(result.stdout)
    spans = [(r["start"], r["end"]) for r in records]
    assert len(set(spans)) < len(spans)  # the same child span under two parents
    for record in records:
        parent = (record["parent"]["start"], record["parent"]["end"])
        assert record["chunk_id"] == reference_id(None, record["start"], record["end"],
                                            record["text"], parent)
    assert len({record["chunk_id"] for record in records}) == len(records)


def test_every_output_format_carries_the_same_ids(tmp_path):
    path = tmp_path / "doc.md"
    path.write_bytes(corpus_documents()[0].read_bytes())
    expected = [r["chunk_id"] for r in ndjson(run_chunkd("--ids", "--chars", "300", str(path)).stdout)]
    document = ndjson(run_chunkd("--ids", "--chars", "300", "--format", "json", str(path)).stdout)[0]
    assert [chunk["chunk_id"] for chunk in document["chunks"]] == expected
    packed = msgpack.Unpacker(io.BytesIO(
        run_chunkd("--ids", "--chars", "300", "--format", "msgpack", str(path)).stdout))
    assert [record["chunk_id"] for record in packed] == expected
    output = tmp_path / "chunks.parquet"
    assert run_chunkd("--ids", "--chars", "300", "--format", "parquet", "--output",
                      str(output), str(path)).returncode == 0
    assert pq.read_table(output).column("chunk_id").to_pylist() == expected


def test_daemon_results_carry_ids_keyed_by_the_source_and_a_switch_rechunks(inbox, watch):
    (inbox / "note.md").write_text("A first sentence. A second one, longer.", encoding="utf-8")
    watcher = watch(inbox, "--chars", "20", "--ids")
    watcher.wait_for(lambda: "note.md" in results(inbox), what="the result")
    chunks = results(inbox)["note.md"]["chunks"]
    assert [c["chunk_id"] for c in chunks] == [reference_id("note.md", c["start"], c["end"], c["text"])
                                         for c in chunks]
    assert results(inbox)["note.md"]["settings"]["ids"] is True
    assert watcher.stop() == 0
    watcher = watch(inbox, "--chars", "20")
    # The stale result is removed before the file is chunked again: wait for the new one.
    watcher.wait_for(lambda: "chunk_id" not in results(inbox).get(
        "note.md", {"chunks": [{"chunk_id": None}]})["chunks"][0], what="the result without ids")
    assert watcher.stop() == 0


def test_arrow_tables_carry_ids_from_their_id_column():
    from chunkd.arrow import chunk_table

    table = pa.table({"id": ["x", "y"], "text": ["One two three four.", "Five six."]})
    chunks = chunk_table(table, chunk_size=10, chunk_overlap=0, ids=True)
    assert chunks.schema.field("chunk_id").type == pa.string()
    for row in chunks.to_pylist():
        assert row["chunk_id"] == reference_id(row["doc"], row["start"], row["end"], row["text"])
