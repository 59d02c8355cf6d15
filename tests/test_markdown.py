"""The markdown strategy (issue 9): for each section in order (the section rule of the
window strategies, from the plain reference in tests/windows_reference.py), the chunks
equal LangChain's RecursiveCharacterTextSplitter on that section's text alone, with
exact document offsets and the section's heading path."""

from __future__ import annotations

import itertools
import random

import orjson
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkd
import windows_reference as reference
from command import copied, ndjson, records_with_jobs, run_chunkd
from oracle import corpus_documents, langchain_chunks, random_cuts, token_length
from test_memory import STREAM_BYTES, stream_through_chunkd
from test_windows import HealthCheck, cut, documents
from watching import filter_documents, results


def section_texts(text: str, strip_headings: bool) -> list[tuple[str, tuple[str, ...], int, int]]:
    """(split text, headings, start, end) of each section, as the contract says."""
    sections = []
    for start, end, headings in reference.section_units(text):
        if strip_headings and headings:
            newline = text.find("\n", start, end)
            start = end if newline < 0 else newline + 1
        sections.append((text[start:end], headings, start, end))
    return sections


def expected_chunks(text: str, unit: str, size: int, overlap: int,
                    strip_headings: bool) -> list[tuple[str, tuple[str, ...], int, int]]:
    """(text, headings, section start, section end) of each chunk, as the contract says."""
    return [(chunk, headings, start, end)
            for section, headings, start, end in section_texts(text, strip_headings)
            for chunk in langchain_chunks(section, size, overlap, unit)]


def unit_length(unit: str):
    return len if unit == "chars" else token_length


def contract_prefix(headings: tuple[str, ...], unit: str, size: int) -> str | None:
    """The embed_text prefix of a section, where the contract fixes it: the path with
    its outermost headings dropped until it takes at most half the size; in code
    points, the innermost cut to its longest start of whole graphemes that fits with
    "…" (nothing if no code point of it does). None: a cut in tokens (any that fits)."""
    length = unit_length(unit)
    for first in range(len(headings)):
        prefix = " > ".join(headings[first:]) + "\n\n"
        if 2 * length(prefix) <= size:
            return prefix
    if not headings:
        return ""
    if unit == "tokens":
        return None
    kept = ""
    for cluster in regex.findall(r"\X", headings[-1]):
        if len(kept + cluster) + len("…\n\n") > size // 2:
            break
        kept += cluster
    return kept + "…\n\n" if kept else ""


def check_cut_prefix(prefix: str, headings: tuple[str, ...], size: int) -> None:
    """A prefix cut in tokens: the innermost heading's start at a grapheme boundary
    and "…", that takes at most half the size (or none at all)."""
    if prefix:
        kept = prefix.removesuffix("…\n\n")
        assert prefix == kept + "…\n\n" and kept
        assert headings[-1].startswith(kept) and kept in regex_starts(headings[-1])
        assert 2 * token_length(prefix) <= size


def regex_starts(heading: str) -> set[str]:
    """The heading's starts that end at a grapheme boundary."""
    ends = [m.end() for m in regex.finditer(r"\X", heading)]
    return {heading[:end] for end in ends}


def check_embedded(text: str, chunks: list[chunkd.Chunk], unit: str, size: int,
                   overlap: int, strip_headings: bool) -> None:
    """With embed_text: each section's chunks are LangChain's split of its text at the
    size less its prefix, each embed_text is the prefix then the text, within the size
    (a text longer than its room, as LangChain's chunks can be, gets a shorter prefix
    that fits with it, or none)."""
    length = unit_length(unit)
    rest = list(chunks)
    for section, headings, start, end in section_texts(text, strip_headings):
        prefix = contract_prefix(headings, unit, size)
        if prefix is None:       # any cut that fits: the one used (the longest, as a
            mine = [c.embed_text.removesuffix(c.text)
                    for c in itertools.takewhile(lambda c: c.start < end, rest)]
            if not mine:         # chunk whose text is longer than its room has a shorter)
                continue
            prefix = max(mine, key=len)
            check_cut_prefix(prefix, headings, size)
        room = size - length(prefix)
        for expected in langchain_chunks(section, room, min(overlap, room - 1), unit):
            chunk = rest.pop(0)
            assert (chunk.text, chunk.headings) == (expected, headings)
            assert start <= chunk.start and chunk.end <= end
            if length(chunk.text) <= room:
                assert chunk.embed_text == prefix + chunk.text
                assert length(chunk.embed_text) <= size
            else:       # longer than its room, as LangChain's chunks can be in tokens:
                shorter = chunk.embed_text.removesuffix(chunk.text)   # a shorter prefix
                assert chunk.embed_text == shorter + chunk.text and len(shorter) <= len(prefix)
                assert length(chunk.embed_text) <= size or shorter == ""
    assert rest == []


def check_markdown(text: str, pieces: list[str], unit: str, size: int, overlap: int,
                   strip_headings: bool = False) -> None:
    for embed_text in (False, True):
        splitter = chunkd.Splitter(size, overlap, unit=unit, strategy="markdown",
                                   strip_headings=strip_headings, embed_text=embed_text)
        chunks = [c for piece in pieces for c in splitter.feed(piece)] + splitter.finish()
        for index, chunk in enumerate(chunks):
            assert chunk.index == index
            assert text[chunk.start:chunk.end] == chunk.text
        if embed_text:
            check_embedded(text, chunks, unit, size, overlap, strip_headings)
            continue
        expected = expected_chunks(text, unit, size, overlap, strip_headings)
        assert [(c.text, c.headings) for c in chunks] == [(t, h) for t, h, _, _ in expected]
        for chunk, (_, headings, start, end) in zip(chunks, expected, strict=True):
            assert start <= chunk.start and chunk.end <= end       # never across a section
            assert chunk.embed_text is None


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


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
     "--embed-text needs headings: write --strategy markdown or sections (--strategy words "
     "gives none)"),
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
