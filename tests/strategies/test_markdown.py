"""The markdown strategy: for each section in order (the section rule of the
window strategies, from the plain reference in tests/windows_reference.py), the chunks
equal LangChain's RecursiveCharacterTextSplitter on that section's text alone, with
exact document offsets and the section's heading path."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

import chunkd
from command import copied, ndjson, records_with_jobs, run_chunkd
from markdown_checks import check_embedded, check_markdown, expected_chunks
from memory import STREAM_BYTES, stream_through_chunkd
from oracle import corpus_documents, random_cuts, token_length
from window_checks import cut, documents
from watching import filter_documents, results


CASES = [("chars", 500, 50), ("tokens", 100, 10)]


@pytest.mark.parametrize("unit,size,overlap", CASES)
@pytest.mark.parametrize("path", corpus_documents(), ids=lambda p: f"{p.parent.name}/{p.name[:40]}")
def test_corpus_whole_and_in_pieces(path, unit, size, overlap):
    text = path.read_text(encoding="utf-8")
    rng = random.Random(f"{path.name}-{unit}")
    check_markdown(text, [text], unit, size, overlap)
    check_markdown(text, random_cuts(text, rng, max_piece=rng.choice([5, 200, 3000])), unit,
                   size, overlap, strip_headings=True)


def test_one_code_point_at_a_time():
    for path in corpus_documents()[::40]:
        text = path.read_text(encoding="utf-8")[:20_000]
        check_markdown(text, list(text), "chars", 300, 30)
        check_markdown(text, list(text), "chars", 300, 30, strip_headings=True)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut(documents), st.integers(1, 40), st.data(), st.sampled_from(["chars", "tokens"]),
       st.booleans())
def test_generated_markdown(doc, size, data, unit, strip_headings):
    text, pieces = doc
    check_markdown(text, pieces, unit, size, data.draw(st.integers(0, size - 1)), strip_headings)


def test_a_gigantic_section_streams_in_bounded_memory():
    """One section of 210 MB (the text before a first heading that never comes)."""
    paragraph = ("No heading here, only text. " * 30 + "\n\n").encode()
    status, lines, peak_mb = stream_through_chunkd(["--strategy", "markdown", "--chars", "1000"],
                                                   paragraph * 1000)
    assert status == 0 and lines > STREAM_BYTES // 1100
    assert peak_mb < 64, f"peak RSS {peak_mb} MB"


def test_the_filter_with_every_format_and_jobs(tmp_path):
    paths = copied(corpus_documents()[::50], tmp_path)
    options = ["--strategy", "markdown", "--tokens", "128", "--embed-text", "--count-tokens"]
    records = records_with_jobs(*options, *paths)
    for path in paths:
        text = open(path, encoding="utf-8").read()
        mine = [r for r in records if r["doc"] == path]
        check_embedded(text, [chunkd.Chunk(r["index"], r["start"], r["end"], r["length"], r["text"],
                                           headings=tuple(r["headings"]), embed_text=r["embed_text"])
                              for r in mine], "tokens", 128, 12, False)
        assert all(r["tokens"] == r["length"] == token_length(r["text"]) for r in mine)
        assert all(list(r) == ["doc", "index", "start", "end", "length", "tokens", "headings",
                               "embed_text", "text"] for r in mine)
    as_json = ndjson(run_chunkd(*options, "--format", "json", *paths).stdout)
    assert [{"doc": d["doc"], **c} for d in as_json for c in d["chunks"]] == records


@pytest.mark.parametrize("args,message", [
    (["--strip-headings"], "--strip-headings is for --strategy markdown, not recursive"),
    (["--strategy", "words", "--embed-text"],
     "--embed-text needs headings: write --strategy markdown, sections or code "
     "(--strategy words gives none)"),
    (["--strategy", "markdown", "--size", "3"],
     "--size is for the window strategies; with --strategy markdown write --chars N or --tokens N"),
    (["--strategy", "markdown", "--chars", "100", "--parent-chars", "500"],
     "the markdown strategy has no parent/child mode"),
])
def test_bad_combinations_are_usage_errors(args, message):
    result = run_chunkd(*args)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [f"chunkd: error: {message}"]


def test_ndjson_input_and_the_daemon(inbox, watch):
    source = next(p for p in corpus_documents() if p.parent.name == "zh-vuedocs")
    text = source.read_text(encoding="utf-8")
    result = run_chunkd("--input", "ndjson", "--strategy", "markdown", "--chars", "300",
                        input=orjson.dumps({"id": "zh", "text": text}) + b"\n")
    expected = expected_chunks(text, "chars", 300, 30, False)
    assert [r["text"] for r in ndjson(result.stdout)] == [t for t, _, _, _ in expected]
    (inbox / "zh.md").write_text(text, encoding="utf-8")
    options = ("--strategy", "markdown", "--chars", "300", "--strip-headings")
    watcher = watch(inbox, *options)
    watcher.wait_for(lambda: "zh.md" in results(inbox), what="the result")
    [document] = filter_documents(inbox / "zh.md", options=options)
    assert results(inbox)["zh.md"]["chunks"] == document["chunks"]
    assert results(inbox)["zh.md"]["settings"]["strip_headings"] is True
    assert watcher.stop() == 0
