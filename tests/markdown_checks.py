"""The markdown strategy's contract, checked: each section's chunks are LangChain's
split of that section's text alone (the section rule from tests/windows_reference.py),
with exact offsets, heading paths and, with embed_text, prefixes within the size."""

from __future__ import annotations

import itertools

import regex

import chunkd
import windows_reference as reference
from oracle import langchain_chunks, token_length


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
