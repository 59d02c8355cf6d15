"""``--ids``: every chunk's stable UUID, checked against the formula as the docs state
it (written here again from that text, not taken from chunkd), in every format and front
end, the daemon's results and Arrow tables; and the promise it makes: a chunk whose
text is unchanged keeps its id whatever changed elsewhere (hypothesis, random edits)."""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from collections import Counter

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings, strategies as st
from property_examples import examples

import chunkd
from command import ndjson, run_chunkd
from oracle import corpus_documents
from watching import results


def reference_ids(doc: object, records: list[dict], parents: dict[int, str] | None = None
                  ) -> list[str]:
    """The ids of one document's records (in order) as docs/cli.md defines them: the
    SHA-256 of DOC (compact JSON, sorted keys), N (earlier chunks with the same content)
    and the content's SHA-256 in hex, one a line; its first 16 bytes as a version-8
    UUID. A child's content is its parent text's SHA-256 in hex, a newline, its text."""
    document = json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    seen: Counter = Counter()
    ids = []
    for record in records:
        content = record["text"]
        if parents is not None:
            parent = parents[record["parent"]["index"]]
            content = hashlib.sha256(parent.encode()).hexdigest() + "\n" + content
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        key = f"{document}\n{seen[digest]}\n{digest}"
        seen[digest] += 1
        raw = bytearray(hashlib.sha256(key.encode("utf-8")).digest()[:16])
        raw[6] = raw[6] & 0x0F | 0x80   # version 8
        raw[8] = raw[8] & 0x3F | 0x80   # the RFC 9562 variant
        ids.append(str(uuid.UUID(bytes=bytes(raw))))
    return ids


def by_document(records: list[dict]) -> dict[str, list[dict]]:
    documents: dict[str, list[dict]] = {}
    for record in records:
        documents.setdefault(json.dumps(record.get("doc"), sort_keys=True), []).append(record)
    return documents


def test_a_known_chunk_keeps_its_id_across_versions(tmp_path):
    # The formula is a promise: a vector store filled by this chunkd must get the same
    # ids from a later one. This value was computed once from the formula.
    assert reference_ids("a.md", [{"text": "hello"}]) == ["82e21106-d275-835e-bb95-0aaffae7229a"]
    (tmp_path / "a.md").write_bytes(b"hello")
    result = run_chunkd("--ids", "--chars", "5", "--overlap", "0", "a.md", cwd=tmp_path)
    assert ndjson(result.stdout)[0]["chunk_id"] == "82e21106-d275-835e-bb95-0aaffae7229a"


def test_every_record_of_the_corpus_has_the_documented_id_and_ids_are_unique():
    paths = [str(p) for p in corpus_documents()[:12]]
    result = run_chunkd("--ids", "--tokens", "100", "--jobs", "2", *paths)
    assert result.returncode == 0, result.stderr
    documents = by_document(ndjson(result.stdout))
    assert len(documents) == 12
    for records in documents.values():
        assert [r["chunk_id"] for r in records] == reference_ids(records[0]["doc"], records)
        assert len({r["chunk_id"] for r in records}) == len(records)
    assert run_chunkd("--ids", "--tokens", "100", "--jobs", "1", *paths).stdout == result.stdout


def test_stdin_ndjson_ids_repeated_texts_and_a_changed_text_or_document_changes_the_id():
    text = "Same words. " * 6 + "Other words."
    stdin = ndjson(run_chunkd("--ids", "--chars", "12", "--overlap", "0", input=text.encode()).stdout)
    assert [r["text"] for r in stdin].count("Same words.") == 6  # a text that repeats
    assert [r["chunk_id"] for r in stdin] == reference_ids(None, stdin)
    assert len({r["chunk_id"] for r in stdin}) == len(stdin)
    lines = b'{"id": {"b": 1, "a": [2]}, "text": "Same text"}\n{"id": 7, "text": "Same text"}\n' \
            b'{"id": 7, "text": "Same text!"}\n'
    records = ndjson(run_chunkd("--ids", "--input", "ndjson", input=lines).stdout)
    assert records[0]["chunk_id"] == reference_ids({"a": [2], "b": 1}, records[:1])[0]
    assert len({record["chunk_id"] for record in records}) == 3


def test_children_of_overlapping_parents_get_distinct_ids():
    text = " ".join(f"w{i % 40}" for i in range(400)).encode()
    result = run_chunkd("--ids", "--chars", "12", "--overlap", "0", "--parent-chars", "60",
                        "--parent-overlap", "30", "--format", "json", input=text)
    [document] = ndjson(result.stdout)
    records = document["chunks"]
    parents = {parent["index"]: parent["text"] for parent in document["parents"]}
    texts = [r["text"] for r in records]
    assert len(set(texts)) < len(texts)  # the same child text, under several parents
    assert [r["chunk_id"] for r in records] == reference_ids(None, records, parents)
    assert len({r["chunk_id"] for r in records}) == len(records)


def test_every_output_format_and_front_end_carries_the_same_ids(tmp_path):
    path = tmp_path / "doc.md"
    text = corpus_documents()[0].read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    ndjson_records = ndjson(run_chunkd("--ids", "--chars", "300", "doc.md", cwd=tmp_path).stdout)
    expected = [r["chunk_id"] for r in ndjson_records]
    assert expected == reference_ids("doc.md", ndjson_records)
    document = ndjson(run_chunkd("--ids", "--chars", "300", "--format", "json", "doc.md",
                                 cwd=tmp_path).stdout)[0]
    assert [chunk["chunk_id"] for chunk in document["chunks"]] == expected
    packed = msgpack.Unpacker(io.BytesIO(
        run_chunkd("--ids", "--chars", "300", "--format", "msgpack", "doc.md", cwd=tmp_path).stdout))
    assert [record["chunk_id"] for record in packed] == expected
    output = tmp_path / "chunks.parquet"
    assert run_chunkd("--ids", "--chars", "300", "--format", "parquet", "--output",
                      str(output), "doc.md", cwd=tmp_path).returncode == 0
    assert pq.read_table(output).column("chunk_id").to_pylist() == expected
    # Python: the whole text at once, and fed in pieces to a Splitter that names it.
    assert [c.chunk_id for c in chunkd.split_text(text, 300, ids=True)] == \
        reference_ids(None, ndjson_records)
    splitter = chunkd.Splitter(300, ids=True)
    for name in ("doc.md", "doc.md"):   # twice: the second document counts afresh
        splitter.begin(name)
        pieces = [text[at:at + 777] for at in range(0, len(text), 777)]
        chunks = [c for piece in pieces for c in splitter.feed(piece)] + splitter.finish()
        assert [c.chunk_id for c in chunks] == expected
    from chunkd.arrow import chunk_table

    table = chunk_table(pa.table({"id": ["doc.md"], "text": [text]}), chunk_size=300, ids=True)
    assert table.column("chunk_id").to_pylist() == expected


def test_daemon_results_carry_ids_by_default_keyed_by_the_source(inbox, watch):
    (inbox / "note.md").write_text("A first sentence. A second one, longer. A first sentence.",
                                   encoding="utf-8")
    watcher = watch(inbox, "--chars", "20", "--overlap", "0")
    watcher.wait_for(lambda: "note.md" in results(inbox), what="the result")
    chunks = results(inbox)["note.md"]["chunks"]
    assert [c["chunk_id"] for c in chunks] == reference_ids("note.md", chunks)
    assert results(inbox)["note.md"]["settings"]["ids"] is True
    assert watcher.stop() == 0


def test_arrow_tables_carry_ids_from_their_id_column():
    from chunkd.arrow import chunk_table

    table = pa.table({"id": ["x", "y"], "text": ["One two three four.", "Five six."]})
    chunks = chunk_table(table, chunk_size=10, chunk_overlap=0, ids=True)
    assert chunks.schema.field("chunk_id").type == pa.string()
    rows = chunks.to_pylist()
    for doc in ("x", "y"):
        mine = [row for row in rows if row["doc"] == doc]
        assert [row["chunk_id"] for row in mine] == reference_ids(doc, mine)


# --- the promise: an unchanged text keeps its id --------------------------------------

#: Few sentences, so that random documents repeat chunk texts.
SENTENCES = ["The cat sat.", "A dog ran far away.", "Rain fell all night long.",
             "Stocks rose.", "She read the whole book twice.", "Go.", "Why not?"]
sentence = st.sampled_from(SENTENCES)
paragraph = st.lists(sentence, min_size=1, max_size=6).map(" ".join)
document = st.lists(paragraph, min_size=1, max_size=12)


@st.composite
def edited(draw) -> tuple[str, str]:
    """A document and the same document after a few random edits: a sentence inserted,
    a paragraph deleted, a paragraph rewritten, anywhere."""
    paragraphs = draw(document)
    before = "\n\n".join(paragraphs)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["insert", "delete", "rewrite"]))
        at = draw(st.integers(0, len(paragraphs) - 1))
        if kind == "insert":
            paragraphs[at] = draw(sentence) + " " + paragraphs[at]
        elif kind == "delete" and len(paragraphs) > 1:
            del paragraphs[at]
        else:
            paragraphs[at] = draw(paragraph)
    return before, "\n\n".join(paragraphs)


def occurrences(chunks: list) -> dict[tuple, list[str]]:
    """Each content's ids, in document order."""
    found: dict[tuple, list[str]] = {}
    for chunk in chunks:
        parent = chunk.parent.text if chunk.parent is not None else None
        found.setdefault((parent, chunk.text), []).append(chunk.chunk_id)
    return found


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited(), st.sampled_from([{}, {"parent_size": 90, "parent_overlap": 0}]),
       st.integers(1, 200))
def test_an_unchanged_text_keeps_its_id_whatever_changed_elsewhere(pair, parents, cut):
    before, after = pair
    splitter = chunkd.Splitter(40, 0, ids=True, **parents)

    def chunk(text: str) -> list:
        splitter.begin("doc.md")
        pieces = [text[at:at + cut] for at in range(0, len(text), cut)]
        return [c for piece in pieces for c in splitter.feed(piece)] + splitter.finish()

    old, new = chunk(before), chunk(after)
    for chunks in (old, new):
        assert len({c.chunk_id for c in chunks}) == len(chunks)  # unique in a document
    old_ids, new_ids = occurrences(old), occurrences(new)
    kept = 0
    for content, ids in old_ids.items():
        again = new_ids.get(content, [])
        # A content found k times before and m times after keeps the ids of its first
        # min(k, m) occurrences, in order.
        shared = min(len(ids), len(again))
        assert again[:shared] == ids[:shared]
        kept += shared
    # ... and no other id survives: the ids kept are exactly the texts kept.
    assert len({c.chunk_id for c in old} & {c.chunk_id for c in new}) == kept
