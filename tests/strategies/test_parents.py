"""Parent/child chunking against LangChain's ParentDocumentRetriever contract:
parents are LangChain's recursive split of the document at the parent settings, and the
children of each parent are LangChain's split of that parent's text at the child
settings; every offset is exact."""

from __future__ import annotations

import random

import msgpack
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

import chunkd
from command import copied, ndjson, records_with_jobs, run_chunkd
from oracle import (corpus_documents, generated_documents, langchain_chunks, random_cuts,
                    token_length)
from watching import filter_documents, results

CASES = [("chars", 200, 20, 1000, 100), ("tokens", 64, 8, 300, 30)]


def children_by_langchain(text: str, unit: str, size: int, overlap: int, parent_size: int,
                          parent_overlap: int) -> list[tuple[str, list[str]]]:
    """[(parent text, [its children's texts])] as LangChain makes them."""
    return [(parent, langchain_chunks(parent, size, overlap, unit))
            for parent in langchain_chunks(text, parent_size, parent_overlap, unit)]


def check_parents(text: str, pieces: list[str], unit: str, size: int, overlap: int,
                  parent_size: int, parent_overlap: int) -> None:
    splitter = chunkd.Splitter(size, overlap, unit=unit, parent_size=parent_size,
                               parent_overlap=parent_overlap)
    chunks = [c for piece in pieces for c in splitter.feed(piece)] + splitter.finish()
    expected = children_by_langchain(text, unit, size, overlap, parent_size, parent_overlap)
    got: dict[int, list] = {}
    for chunk in chunks:
        got.setdefault(chunk.parent.index, []).append(chunk)
    assert [p for p, _ in expected] == [got[i][0].parent.text for i in sorted(got)]
    assert [kids for _, kids in expected] == [[c.text for c in got[i]] for i in sorted(got)]
    length = len if unit == "chars" else token_length
    for index, chunk in enumerate(chunks):
        parent = chunk.parent
        assert chunk.index == index
        assert text[chunk.start:chunk.end] == chunk.text
        assert text[parent.start:parent.end] == parent.text
        assert parent.start <= chunk.start and chunk.end <= parent.end
        assert parent.length == length(parent.text) and chunk.length == length(chunk.text)


@pytest.mark.parametrize("unit,size,overlap,parent_size,parent_overlap", CASES)
@pytest.mark.parametrize("path", corpus_documents()[::3], ids=lambda p: p.name[:40])
def test_corpus_whole_and_in_pieces(path, unit, size, overlap, parent_size, parent_overlap):
    text = path.read_text(encoding="utf-8")
    rng = random.Random(f"{path.name}-{unit}")
    for pieces in ([text], random_cuts(text, rng, max_piece=rng.choice([7, 300, 4000]))):
        check_parents(text, pieces, unit, size, overlap, parent_size, parent_overlap)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated_documents, st.integers(1, 30), st.data(), st.sampled_from(["chars", "tokens"]))
def test_generated_text(text, size, data, unit):
    overlap = data.draw(st.integers(0, size - 1))
    parent_size = data.draw(st.integers(size + 1, 4 * size + 10))
    parent_overlap = data.draw(st.integers(0, parent_size - 1))
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    check_parents(text, pieces, unit, size, overlap, parent_size, parent_overlap)


def test_records_in_every_format_and_with_jobs(tmp_path):
    paths = copied(corpus_documents()[:6], tmp_path)
    options = ["--tokens", "64", "--overlap", "8", "--parent-tokens", "300", "--parent-overlap", "10%"]
    records = records_with_jobs(*options, *paths)
    for path in paths:
        text = open(path, encoding="utf-8").read()
        mine = [r for r in records if r["doc"] == path]
        expected = children_by_langchain(text, "tokens", 64, 8, 300, 30)
        assert [r["text"] for r in mine] == [kid for _, kids in expected for kid in kids]
        for record in mine:
            assert set(record["parent"]) == {"index", "start", "end"}
            assert text[record["start"]:record["end"]] == record["text"]
    as_json = ndjson(run_chunkd(*options, "--format", "json", *paths).stdout)
    for document in as_json:
        text = open(document["doc"], encoding="utf-8").read()
        assert [p["index"] for p in document["parents"]] == list(range(len(document["parents"])))
        assert all(text[p["start"]:p["end"]] == p["text"] for p in document["parents"])
        assert [r for r in records if r["doc"] == document["doc"]] == \
            [{"doc": document["doc"], **c} for c in document["chunks"]]
    packed = list(msgpack.Unpacker(__import__("io").BytesIO(
        run_chunkd(*options, "--format", "msgpack", *paths).stdout)))
    assert packed == records


def test_ndjson_input_with_parents():
    lines = [{"id": n, "text": p.read_text(encoding="utf-8")} for n, p in enumerate(corpus_documents()[:3])]
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    result = run_chunkd("--input", "ndjson", "--chars", "300", "--parent-chars", "1500", input=data)
    assert result.returncode == 0
    records = ndjson(result.stdout)
    for line in lines:
        expected = children_by_langchain(line["text"], "chars", 300, 30, 1500, 150)
        assert [r["text"] for r in records if r["doc"] == line["id"]] == \
            [kid for _, kids in expected for kid in kids]


@pytest.mark.parametrize("args,message", [
    (["--chars", "100", "--parent-chars", "100"], "the parent size (100) must be larger than the size (100)"),
    (["--tokens", "100", "--parent-chars", "500"],
     "parents are counted in the children's unit: with --tokens write --parent-tokens N"),
    (["--chars", "100", "--parent-chars", "500", "--parent-overlap", "500"],
     "the parent overlap (500) must be smaller than the parent size (500)"),
    (["--parent-overlap", "5"], "--parent-overlap needs --parent-chars or --parent-tokens"),
    (["--parent-chars", "5000", "--parent-tokens", "5000"], "--parent-chars and --parent-tokens exclude each other"),
])
def test_bad_parent_options_are_usage_errors(args, message):
    result = run_chunkd(*args)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines()[-1] == f"chunkd: error: {message}"


def test_the_daemon_records_parent_settings_and_rechunks_when_they_change(inbox, watch):
    source = corpus_documents()[10]
    (inbox / "a.md").write_bytes(source.read_bytes())
    options = ("--chars", "200", "--parent-chars", "800")
    watcher = watch(inbox, *options)
    watcher.wait_for(lambda: "a.md" in results(inbox), what="the result")
    [expected] = filter_documents(inbox / "a.md", options=options)
    result = results(inbox)["a.md"]
    assert result["settings"]["parent_size"] == 800 and result["settings"]["parent_overlap"] == 80
    assert (result["parents"], result["chunks"]) == (expected["parents"], expected["chunks"])
    assert watcher.stop() == 0
    watcher = watch(inbox, "--chars", "200", "--parent-chars", "1200")
    # The stale result is removed before the file is chunked again: wait for the new one.
    watcher.wait_for(lambda: results(inbox).get("a.md", {}).get("settings", {})
                     .get("parent_size") == 1200, what="the result for the new parent size")
    [expected] = filter_documents(inbox / "a.md", options=("--chars", "200", "--parent-chars", "1200"))
    assert results(inbox)["a.md"]["chunks"] == expected["chunks"]
    assert watcher.stop() == 0
