"""The pure-Python twin of the window strategies (chunkd.kernel.twin.windows) against the
compiled module (chunkd.kernel._windows) and the plain reference (tests/windows_reference.py):
records equal field for field, whole and in pieces of any size (one code point at a
time on some), on the shared corpus and on generated text; the section scanner's
reports and ``settled`` offsets equal piece by piece; memory bounded on a stream."""

from __future__ import annotations

import random
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chunkd.kernel.twin.windows as twin
import chunkd.kernel._windows as compiled
import windows_reference as reference
from chunkd.strategies.windows import grapheme_properties
from oracle import corpus_documents, random_cuts
from window_checks import SETTINGS, TEXT_FRAGMENTS, cut, grapheme_text, size_and_overlap

STRATEGIES = ("graphemes", "words", "sentences", "sections")
CLASSES = {"graphemes": "GraphemeWindows", "words": "WordWindows",
           "sentences": "SentenceWindows", "sections": "SectionWindows"}


def splitter(module, strategy: str, size: int, overlap: int):
    make = getattr(module, CLASSES[strategy])
    if strategy == "graphemes":
        return make(size, overlap, grapheme_properties())
    return make(size, overlap)


def chunks_of(module, strategy: str, pieces: list[str], size: int, overlap: int) -> list:
    windows = splitter(module, strategy, size, overlap)
    chunks = []
    for piece in pieces:
        chunks += windows.feed(piece)
    return chunks + windows.finish()


def as_reference(chunks: list, strategy: str) -> list[dict]:
    """Records as the reference gives them."""
    return [{"index": c.index, "start": c.start, "end": c.end, "length": c.length,
             "text": c.text, "estimated_tokens": c.estimated_tokens,
             **({"headings": c.headings} if strategy == "sections" else {})}
            for c in chunks]


def check(text: str, pieces: list[str], strategy: str, size: int, overlap: int) -> None:
    """The twin, fed in ``pieces``, equals the compiled module fed whole (every field
    of the record) and the reference."""
    expected = chunks_of(compiled, strategy, [text], size, overlap)
    assert chunks_of(twin, strategy, pieces, size, overlap) == expected
    assert as_reference(expected, strategy) == reference.windows(text, strategy, size, overlap)


# --- the shared corpus ------------------------------------------------------------------

CORPUS_SETTINGS = {"graphemes": [(1, 0), (7, 3), (1000, 0)], "words": [(5, 2), (200, 0)],
                   "sentences": [(3, 1), (8, 0)], "sections": [(2, 1), (1, 0)]}
CASES = [(strategy, size, overlap) for strategy, pairs in CORPUS_SETTINGS.items()
         for size, overlap in pairs]


@pytest.mark.slow
@pytest.mark.parametrize("strategy,size,overlap", CASES)
def test_corpus_whole_in_random_pieces_and_a_code_point_at_a_time(strategy, size, overlap):
    for number, path in enumerate(corpus_documents()):
        text = path.read_text(encoding="utf-8")
        rng = random.Random(f"{path.name}-{strategy}-{size}")
        cuttings = [[text], random_cuts(text, rng, max_piece=rng.choice([7, 300, 5000]))]
        if number % 10 == 0:
            cuttings.append(list(text))
        expected = chunks_of(compiled, strategy, [text], size, overlap)
        assert as_reference(expected, strategy) == \
            reference.windows(text, strategy, size, overlap), path.name
        for pieces in cuttings:
            assert chunks_of(twin, strategy, pieces, size, overlap) == expected, path.name


# --- generated text ---------------------------------------------------------------------

#: Beyond the window tests' fragments: line and paragraph separators, a byte-order mark,
#: lone Indic linkers, white space that is no ASCII, and headings longer than the bound
#: (cut inside a cluster, ending with a closing run, after long white space).
MORE_FRAGMENTS = [
    "\u2028", "\u2029", "\x85", "\ufeff", "\u094d", "\xa0", "！", "．", "｡", "\u201d",
    "# a # b #", "#\xa0#", "# #", "\n# " + "x" * 254 + "e\u0301" * 30 + "\n",
    "# " + "h" * 300, "## " + "#" * 300 + " ##\n", "# " + "y" * 255 + " " + "#" * 60 + "\n",
    "# " + " " * 280 + "z #\n", "# " + "w" * 250 + "👩\u200d👩\u200d👧" * 4 + " #" * 10 + "\n",
]
texts = st.lists(st.one_of(st.sampled_from(TEXT_FRAGMENTS + MORE_FRAGMENTS), grapheme_text,
                           st.text(max_size=4)), max_size=40).map("".join)


@SETTINGS
@given(cut(texts), st.sampled_from(STRATEGIES), size_and_overlap())
def test_twin_equals_the_compiled_module_and_the_reference(doc, strategy, sizes):
    text, pieces = doc
    check(text, pieces, strategy, *sizes)


@SETTINGS
@given(cut(texts))
def test_the_section_scanner_reports_as_the_compiled_one_does(doc):
    """Reports, ``position`` and ``settled`` after every piece, as the compiled
    scanner's; the reports as the reference's sections."""
    text, pieces = doc
    ours, theirs = twin.SectionScanner(), compiled.SectionScanner()
    reported = []
    for piece in pieces:
        events = ours.feed(piece)
        assert events == theirs.feed(piece)
        assert (ours.position, ours.settled) == (theirs.position, theirs.settled)
        reported += events
    events = ours.finish()
    assert events == theirs.finish()
    reported += events
    assert reported == [(start, headings)
                        for start, _, headings in reference.section_units(text)]
    assert ours.feed("# Next") == [] and ours.finish() == [(0, ("Next",))]


@SETTINGS
@given(texts, st.integers(0, 300))
def test_cut_heading_equals_the_compiled_one(text, keep):
    assert twin.cut_heading(text, keep) == compiled.cut_heading(text, keep)


def test_crlf_split_across_pieces_is_one_cluster():
    for pieces in (["a\r", "\nb"], ["a\r", "", "\n", "b"], list("a\r\nb")):
        chunks = chunks_of(twin, "graphemes", pieces, 1, 0)
        assert [c.text for c in chunks] == ["a", "b"]
        assert chunks_of(twin, "graphemes", pieces, 3, 0)[0].length == 3


def test_clusters_and_words_longer_than_a_piece_or_a_slice():
    """A cluster of 10,000 code points, a word of 9,000, 3,000 flags in a row: whole,
    and in pieces that cut them anywhere."""
    text = ("a" + "\u0301" * 10_000 + "b" * 5000 + " " + "w" * 9000 + "🇫🇷" * 3000 + "\r\n"
            + "👩\u200d👩\u200d👧" * 2000 + "x")
    rng = random.Random(0)
    for strategy in ("graphemes", "words"):
        expected = chunks_of(compiled, strategy, [text], 3, 1)
        for pieces in ([text], random_cuts(text, rng, 3000), random_cuts(text, rng, 20)):
            assert chunks_of(twin, strategy, pieces, 3, 1) == expected


def test_a_splitter_is_ready_for_the_next_document():
    for strategy in STRATEGIES:
        windows = splitter(twin, strategy, 2, 1)
        first = windows.feed("# A\nOne two. Three") + windows.finish()
        again = windows.feed("# A\nOne two. Three") + windows.finish()
        assert first == again and first[0].index == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sizes_and_pieces_are_checked(strategy):
    for size, overlap in [(0, 0), (-1, 0), (3, 3), (3, -1), (3, 4)]:
        with pytest.raises(ValueError):
            splitter(twin, strategy, size, overlap)
    with pytest.raises(OverflowError):
        splitter(twin, strategy, 2**70, 0)
    for piece in (None, b"bytes"):
        with pytest.raises(TypeError):
            splitter(twin, strategy, 3, 1).feed(piece)
    with pytest.raises(TypeError):
        twin.SectionScanner().feed(None)


def test_the_constants_are_the_compiled_ones():
    for name in ("HEADING_LIMIT", "ELLIPSIS", "GRAPHEME_BREAK_VALUES",
                 "CONJUNCT_BREAK_VALUES", "PICTOGRAPHIC_BIT"):
        assert getattr(twin, name) == getattr(compiled, name)


# --- streaming ---------------------------------------------------------------------------

def streamed_peak(strategy: str, pieces, size: int) -> tuple[int, int]:
    """(chunks returned before ``finish``, peak memory traced while feeding)."""
    windows = splitter(twin, strategy, size, 0)
    early = 0
    tracemalloc.start()
    try:
        for piece in pieces:
            early += len(windows.feed(piece))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    windows.finish()
    return early, peak


@pytest.mark.slow
@pytest.mark.parametrize("strategy,size", [("graphemes", 1000), ("words", 200),
                                           ("sentences", 8), ("sections", 1)])
def test_a_long_document_streams_in_bounded_memory(strategy, size):
    """Two million code points (4 MB in memory) in pieces of 65,536: chunks come out
    as it is read, and memory stays within a few pieces, not the document."""
    section = "# Heading\n" + "A sentence of words, 中文 too. " * 30 + "\n\n"
    document = section * (2_000_000 // len(section))
    pieces = (document[at:at + 65536] for at in range(0, len(document), 65536))
    early, peak = streamed_peak(strategy, pieces, size)
    assert early > 500
    assert peak < 1_500_000


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["graphemes", "words", "sentences"])
def test_white_space_between_units_is_not_held(strategy):
    """A million code points of white space (2 MB in memory) after a unit, in pieces
    of 65,536: it belongs to no unit that a window keeps, so it is not held (a section
    holds it: it is part of the section)."""
    document = "A sentence. Words\n" + " \n\t\u3000" * 250_000 + "end."
    pieces = [document[at:at + 65536] for at in range(0, len(document), 65536)]
    _, peak = streamed_peak(strategy, iter(pieces), 1)
    assert peak < 600_000
    assert chunks_of(twin, strategy, pieces, 1, 0) == \
        chunks_of(compiled, strategy, [document], 1, 0)
