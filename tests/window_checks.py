"""The window strategies checked against the plain reference (tests/windows_reference.py):
records compared field for field, the section scanner's reports piece by piece, and the
generated documents and cuttings the property tests draw."""

from __future__ import annotations

import random

import regex
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from property_examples import examples

import chunkd
import windows_reference as reference
from chunkd.kernel._windows import SectionScanner


def chunk_dicts(chunks: list[chunkd.Chunk], strategy: str) -> list[dict]:
    """The records as the reference gives them (its fields, no others filled)."""
    out = []
    for chunk in chunks:
        record = {"index": chunk.index, "start": chunk.start, "end": chunk.end,
                  "length": chunk.length, "text": chunk.text,
                  "estimated_tokens": chunk.estimated_tokens}
        assert chunk.tokens is None and chunk.parent is None
        if strategy == "sections":
            record["headings"] = chunk.headings
        else:
            assert chunk.headings is None
        out.append(record)
    return out


def compiled(pieces: list[str], strategy: str, size: int, overlap: int) -> list[dict]:
    splitter = chunkd.Splitter(size, overlap, strategy=strategy)
    chunks = []
    for piece in pieces:
        chunks += splitter.feed(piece)
    return chunk_dicts(chunks + splitter.finish(), strategy)


def check(text: str, pieces: list[str], strategy: str, size: int, overlap: int) -> None:
    assert compiled(pieces, strategy, size, overlap) == \
        reference.windows(text, strategy, size, overlap)


CJK_EDGES = [chr(c) for first, last in reference.CJK_RANGES for c in (first, last)] + [
    "\u10ff", "\u1200", "\u2e7f", "\u3000", "\u4dc0", "\u4dff", "\ua95f", "\ua980",
    "\uabff", "\ud7ff", "\uf8ff", "\ufb00", "\ufe2f", "\ufe50", "\ufeff", "\ufff0",
    "\U0001ffff", "\U00040000"]
WHITE = [chr(c) for c in range(0x110000) if chr(c).isspace()]
TEXT_FRAGMENTS = CJK_EDGES + WHITE + list(reference.TERMINAL_MARKS + reference.CLOSING_MARKS) + [
    "中文", "日本語のテキスト", "한국어", "word", "Word", "3.14", "file.txt", "e.g.", "...",
    "?!", "!)", ".\"", "。」", "Hi.", "\n", "\n\n", "\r\n", "#", "# ", "## Title ##",
    "# C#", "### T ###  ", "#\t", "#######", "#x", "   # indented", "    # code",
    "```", "````", "~~~", "~~~~~", "``", "  ```py", "```  ", "\\#", "- item", "> quote",
    "Title\n===", "Sub\n---", "👩\u200d👩\u200d👧", "e\u0301", "\x00",
]
documents = st.lists(st.one_of(st.sampled_from(TEXT_FRAGMENTS), st.text(max_size=5)),
                     max_size=100).map("".join)


def property_characters(*names: str) -> list[str]:
    """A few code points of each named property, found by ``regex`` (not chunkd)."""
    rng = random.Random(0)
    everything = "".join(map(chr, range(0x110000)))
    out = []
    for name in names:
        found = regex.findall(rf"\p{{{name}}}", everything)
        out += rng.sample(found, min(len(found), 12))
    return out


GRAPHEME_PROPERTY_CHARACTERS = property_characters(
    *(f"Grapheme_Cluster_Break={value}" for value in (
        "CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator", "Prepend",
        "SpacingMark", "L", "V", "T", "LV", "LVT", "Other")),
    "InCB=Consonant", "InCB=Extend", "InCB=Linker", "Extended_Pictographic")
GRAPHEME_FRAGMENTS = [
    "🇫🇷", "🇺🇸🇬", "\U0001F1E6", "👩\u200d👩\u200d👧", "👨\u200d💻", "🏳\ufe0f\u200d🌈",
    "👍🏽", "\u200d", "e\u0301", "a\u0308\u0301\u0323", "\u0301", "\u1100\u1161\u11a8",
    "\u1100\u1100\u1161", "\uac00\u11a8", "\uac01\u11a8", "\u1161\u11a8", "한국어",
    "\u0915\u094d\u0937", "\u0915\u094d\u200d\u0937", "\u0995\u09cd\u09b7",
    "\u0915\u093c\u094d\u0937", "a\u094d\u0937", "\u0600a", "\u093e", "\r\n", "\r", "\n",
    "\x00", "\x7f", "\ud800", "\udc00", " ", "\t", "\u3000", "x", "中文", "word",
]
grapheme_text = st.lists(st.one_of(st.sampled_from(GRAPHEME_FRAGMENTS),
                                   st.sampled_from(GRAPHEME_PROPERTY_CHARACTERS),
                                   st.text(max_size=3)), max_size=80).map("".join)


@st.composite
def cut(draw, texts):
    """A text and a cutting of it into pieces: at random, or one code point a piece."""
    text = draw(texts)
    if draw(st.booleans()) and len(text) < 200:
        return text, list(text)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in zip(bounds, bounds[1:])]


@st.composite
def size_and_overlap(draw, largest: int = 6):
    size = draw(st.integers(1, largest))
    return size, draw(st.integers(0, size - 1))


SETTINGS = settings(max_examples=examples(300), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def check_scanner(text: str, pieces: list[str]) -> None:
    """The scanner's reports, piece by piece, against the plain reference."""
    expected = [(start, headings) for start, _, headings in reference.section_units(text)]
    scanner = SectionScanner()
    reported, read = [], 0
    for piece in pieces:
        reported += scanner.feed(piece)
        read += len(piece)
        assert reported == expected[:len(reported)]
        assert scanner.settled <= scanner.position == read
        assert all(s in reported for s in expected if s[0] < scanner.settled and s != (0, ()))
    reported += scanner.finish()
    assert reported == expected
    assert scanner.feed("# Next document") == [] and scanner.finish() == [(0, ("Next document",))]
