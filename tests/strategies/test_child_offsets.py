"""Children's offsets in every keep-separator mode: a child is cut from its parent's
text, which with ``--keep-separator none`` may be no slice of the document (pieces
joined by the dropped separator where the document has it twice), so its offsets must
be mapped to the document code point by code point, not by adding the parent's start.

The truth is the plain reference (tests/reference.py), which carries every code
point's document offset through LangChain's splitting, parents and then children."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

import chunkd
from command import ndjson, run_chunkd
from oracle import SEPARATORS, token_length
from reference import Splitter as Reference
from reference import document

#: --keep-separator -> the reference's (LangChain's) keep_separator.
KEEP = {"end": "end", "start": "start", "none": False}

#: Words, and separators alone and repeated: where the document has a dropped
#: separator twice, the joined text is shorter than the stretch it comes from.
FRAGMENTS = ["a", "word", "Two words", "中文", "e\u0301", "42", *[s for s in SEPARATORS if s],
             "  ", "   ", "\n\n\n", "\n\n\n\n", "\n \n", ". . ", "。。", ", , ", "\u3000"]
documents = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)),
                     max_size=60).map("".join)


def reference_children(text: str, unit: str, keep: str, size: int, overlap: int,
                       parent_size: int, parent_overlap: int) -> list[tuple[int, int, str]]:
    """(start, end, text) of every child: each parent's chunks, whose code points
    keep the document offsets they have in the parent."""
    length = len if unit == "chars" else token_length

    def splitter(chunk_size: int, chunk_overlap: int) -> Reference:
        return Reference(SEPARATORS, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                         keep_separator=KEEP[keep], is_separator_regex=False,
                         length_function=length)

    parents, children = splitter(parent_size, parent_overlap), splitter(size, overlap)
    return [(child.offsets[0], child.offsets[-1] + 1, child.text)
            for parent in parents.split(document(text), SEPARATORS)
            for child in children.split(parent, SEPARATORS)]


def check_offsets(text: str, keep: str, children: list[tuple[int, int, str]]) -> None:
    """What docs/cli.md (Output schema) and docs/strategies.md (Parent/child) promise
    of ``start`` and ``end`` in each mode."""
    for start, end, chunk in children:
        if keep == "none":
            # The stretch the text comes from: its first and last code points (the
            # separators are literal, so a joining one is in the document too).
            assert text[start] == chunk[0] and text[end - 1] == chunk[-1]
            assert len(chunk) <= end - start
        else:
            assert text[start:end] == chunk


@pytest.mark.parametrize("keep", sorted(KEEP))
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.integers(1, 20), st.data(), st.sampled_from(["chars", "tokens"]))
def test_children_offsets_in_every_mode(keep, text, size, data, unit):
    overlap = data.draw(st.integers(0, size - 1))
    parent_size = data.draw(st.integers(size + 1, 3 * size + 6))
    parent_overlap = data.draw(st.integers(0, parent_size - 1))
    chunks = chunkd.split_text(text, size, overlap, unit=unit, keep_separator=keep,
                               parent_size=parent_size, parent_overlap=parent_overlap)
    got = [(c.start, c.end, c.text) for c in chunks]
    assert got == reference_children(text, unit, keep, size, overlap, parent_size,
                                     parent_overlap)
    check_offsets(text, keep, got)


def test_a_repeated_dropped_separator_through_the_command():
    """'a  a' at one character, parents of three: the parent is "a a" (the two spaces
    joined as one), from the whole document; its second child is the last "a"."""
    result = run_chunkd("--chars", "1", "--overlap", "0", "--parent-chars", "3",
                        "--parent-overlap", "0", "--keep-separator", "none", input=b"a  a")
    assert result.returncode == 0, result.stderr
    assert [(r["start"], r["end"], r["text"], r["parent"]) for r in ndjson(result.stdout)] == [
        (0, 1, "a", {"index": 0, "start": 0, "end": 4}),
        (3, 4, "a", {"index": 0, "start": 0, "end": 4})]


def test_children_of_joined_parents_through_the_command():
    """Paragraphs and lines separated twice over, every child placed as the reference
    places it."""
    text = "One two  three.\n\n\n\nFour  five six\n\nseven\n\n\n\n  eight nine ten  eleven"
    options = ["--chars", "6", "--overlap", "2", "--parent-chars", "20", "--parent-overlap", "4",
               "--keep-separator", "none"]
    result = run_chunkd(*options, input=text.encode())
    assert result.returncode == 0, result.stderr
    got = [(r["start"], r["end"], r["text"]) for r in ndjson(result.stdout)]
    assert got == reference_children(text, "chars", "none", 6, 2, 20, 4)
    check_offsets(text, "none", got)


#: Regular expressions whose source is longer or shorter than what they match.
PATTERNS = ["\\s+", "\\d+", "[.,]", ""]
pattern_documents = st.lists(st.sampled_from(["a", "word", "1", "42", " ", "  ", ".", ",",
                                              "中", "\n"]), max_size=40).map("".join)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern_documents, st.integers(1, 12), st.data(), st.booleans())
def test_offsets_of_chunks_joined_by_a_pattern_stay_in_the_document(text, size, data, parents):
    """A dropped regular expression joins pieces with its source (``\\s+``), which
    can be longer than the match it stands for: the offsets still name code points of
    the stretch the chunk comes from, never past it or the document."""
    overlap = data.draw(st.integers(0, size - 1))
    options: dict = {"keep_separator": "none", "separators": PATTERNS, "separator_regex": True}
    if parents:
        options |= {"parent_size": data.draw(st.integers(size + 1, 3 * size + 6)),
                    "parent_overlap": 0}
    chunks = chunkd.split_text(text, size, overlap, **options)

    def reference(chunk_size: int, chunk_overlap: int) -> Reference:
        return Reference(PATTERNS, chunk_size=chunk_size, chunk_overlap=chunk_overlap,
                         keep_separator=False, is_separator_regex=True, length_function=len)

    if parents:
        expected = [(child.offsets[0], child.offsets[-1] + 1, child.text)
                    for parent in reference(options["parent_size"], 0).split(document(text), PATTERNS)
                    for child in reference(size, overlap).split(parent, PATTERNS)]
    else:
        expected = reference(size, overlap).chunks(text)
    assert [(c.start, c.end, c.text) for c in chunks] == expected
    for chunk in chunks:
        assert 0 <= chunk.start < chunk.end <= len(text)
        if chunk.parent is not None:
            assert chunk.parent.start <= chunk.start < chunk.end <= chunk.parent.end


def test_a_pattern_longer_than_its_match_through_the_command():
    result = run_chunkd("--chars", "5", "--overlap", "0", "--keep-separator", "none",
                        "--separator-regex", "--separators", '["\\\\d+", ""]', input=b"a1 ")
    assert result.returncode == 0, result.stderr
    assert [(r["start"], r["end"], r["text"]) for r in ndjson(result.stdout)] == [(0, 2, "a\\d+")]
