"""The window strategies against the plain reference (tests/windows_reference.py) and
the ``regex`` module's ``\\X``: every shared-corpus document whole and in random pieces,
generated text (hypothesis), the contract's properties, and the compiled classes'
argument checks."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chunkd
from chunkd.kernel._windows import (GraphemeWindows, SectionScanner, SectionWindows,
                             SentenceWindows, WordWindows, _Windows)
from oracle import corpus_documents, random_cuts
import windows_reference as reference
from window_checks import (SETTINGS, check, check_scanner, compiled, cut, documents,
                           grapheme_text, size_and_overlap)

STRATEGIES = ("graphemes", "words", "sentences", "sections")
#: (size, overlap) per strategy for the corpus: a small window with overlap, and the
#: default (and single graphemes: every cluster of \X but the all-white ones).
CORPUS_SETTINGS = {"graphemes": [(1, 0), (7, 3), (1000, 0)], "words": [(5, 2), (200, 0)],
                   "sentences": [(3, 1), (8, 0)], "sections": [(2, 1), (1, 0)]}
DOCUMENTS = corpus_documents()


# --- the shared corpus ------------------------------------------------------------------

CASES = [(strategy, size, overlap) for strategy, pairs in CORPUS_SETTINGS.items()
         for size, overlap in pairs]


@pytest.mark.slow
@pytest.mark.parametrize("strategy,size,overlap", CASES)
def test_corpus_whole_and_in_random_pieces(strategy, size, overlap):
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        expected = reference.windows(text, strategy, size, overlap)
        assert compiled([text], strategy, size, overlap) == expected, path.name
        rng = random.Random(f"{path.name}-{strategy}-{size}")
        pieces = random_cuts(text, rng, max_piece=rng.choice([1, 7, 300, 5000]))
        assert compiled(pieces, strategy, size, overlap) == expected, path.name


# --- generated text ---------------------------------------------------------------------

@SETTINGS
@given(cut(grapheme_text), size_and_overlap())
def test_graphemes_equal_regex_clusters(doc, sizes):
    text, pieces = doc
    check(text, pieces, "graphemes", *sizes)


@SETTINGS
@given(cut(documents), size_and_overlap(), st.sampled_from(["words", "sentences", "sections"]))
def test_words_sentences_sections_equal_the_reference(doc, sizes, strategy):
    text, pieces = doc
    check(text, pieces, strategy, *sizes)


def test_every_code_point_is_classified_as_the_contract_says():
    """White space (str.isspace), CJK (the contract's ranges) and the rest, for every
    code point: each between two letters, then a space."""
    for block in range(0, 0x110000, 0x10000):
        text = "".join(f"x{chr(c)}x " for c in range(block, block + 0x10000))
        chunks = chunkd.split_text(text, 1, 0, strategy="words")
        assert [(c.start, c.end) for c in chunks] == reference.word_units(text)
        assert [c.estimated_tokens for c in chunks] == [reference.estimated_tokens(c.text)
                                                        for c in chunks]


def test_every_terminal_and_closing_mark():
    """Each terminal mark, alone or with each closing mark, before white space, a
    letter, another mark and the line's or the text's end."""
    for mark in reference.TERMINAL_MARKS:
        for closing in ["", *reference.CLOSING_MARKS, ")”"]:
            for after in [" ", "x", "\n", "", "。", "\u3000", "."]:
                text = f"Say{mark}{closing}{after}next{mark}{closing}"
                check(text, [text], "sentences", 1, 0)
                check(text, list(text), "sentences", 2, 1)


# --- the contract's properties ----------------------------------------------------------

def units_of(text: str, strategy: str) -> list[tuple[int, int]]:
    """The compiled units, as windows of one unit (each holds a non-white code point
    in these texts)."""
    return [(c.start, c.end) for c in chunkd.split_text(text, 1, 0, strategy=strategy)]


@SETTINGS
@given(st.sampled_from(STRATEGIES), documents, grapheme_text, size_and_overlap(8))
def test_properties(strategy, document, graphemes, sizes):
    size, overlap = sizes
    text = graphemes if strategy == "graphemes" else document
    chunks = chunkd.split_text(text, size, overlap, strategy=strategy)
    covered = set()
    for number, chunk in enumerate(chunks):
        assert chunk.index == number
        assert text[chunk.start:chunk.end] == chunk.text
        assert chunk.text and chunk.text == chunk.text.strip()   # trimmed of white only
        assert 1 <= chunk.length <= size
        covered.update(range(chunk.start, chunk.end))
    assert all(char.isspace() for at, char in enumerate(text) if at not in covered)


@SETTINGS
@given(st.sampled_from(STRATEGIES), documents, grapheme_text, size_and_overlap(8))
def test_neighbours_share_exactly_the_overlap(strategy, document, graphemes, sizes):
    """Windows hold ``size`` units (the last one may hold fewer), and each starts
    ``size - overlap`` units after the previous one. Graphemes: text without white
    space, so that no window is trimmed."""
    size, overlap = sizes
    if strategy == "graphemes":
        text = "".join(char for char in graphemes if not char.isspace())
    else:
        text = document
    units = units_of(text, strategy)
    chunks = chunkd.split_text(text, size, overlap, strategy=strategy)
    held = [[n for n, (start, end) in enumerate(units) if start < c.end and end > c.start]
            for c in chunks]
    assert [len(h) for h in held] == [c.length for c in chunks]
    for previous, window in zip(held, held[1:]):
        assert len(previous) == size
        assert window[0] == previous[0] + size - overlap
        assert len(set(previous) & set(window)) == overlap
    if held:
        assert held[0][0] == 0 and held[-1][-1] == len(units) - 1
        assert len(held[-1]) > (overlap if len(held) > 1 else 0)


# --- Markdown sections: the scanner alone -----------------------------------------------

@SETTINGS
@given(cut(documents))
def test_section_scanner_reports_each_start_once_as_soon_as_settled(doc):
    """Section starts and heading paths as the text streams in: in order, each once,
    every heading's section before ``settled`` already (the text before the first
    heading is reported when it shows a non-white code point, and before any other)."""
    check_scanner(*doc)


@pytest.mark.parametrize("line,title", [
    ("# Title", "Title"), ("## Title ##", "Title"), ("# C#", "C#"), ("### ###", ""),
    ("#", ""), ("#\t\tTabbed\t#\t", "Tabbed"), ("  ## Two spaces #####  ", "Two spaces"),
    ("# Ends with #hash", "Ends with #hash"), ("# a # b #", "a # b"), ("#\r", None),
    ("#\r\n", ""), ("# Title\r\n", "Title"), ("####### Seven", None), ("#5", None),
    ("    # Four spaces", None), ("\t# Tab", None), ("# \\#", "\\#"), ("> # Quote", None),
])
def test_heading_lines(line, title):
    chunks = chunkd.split_text("intro\n" + line, strategy="sections")
    if title is None:
        assert [c.headings for c in chunks] == [()]
    else:
        assert [c.headings for c in chunks] == [(), (title,)]


def test_heading_paths_fences_and_setext():
    text = ("preamble\n# A\n## B\n```\n# not a heading\n````\n### C\n~~~~\n~~~\n"
            "# still code\n~~~~~ \n# D\nSetext\n======\n##### E\n")
    assert [c.headings for c in chunkd.split_text(text, strategy="sections")] == [
        (), ("A",), ("A", "B"), ("A", "B", "C"), ("D",), ("D", "E")]


@pytest.mark.parametrize("opening,line,closes", [
    ("```", "```", True), ("```", "````", True), ("```", "```  \t\r", True),
    ("```", "   ```", True), ("```", "    ```", False), ("```", "``", False),
    ("```", "```py", False), ("```", "``` x", False), ("```", "~~~", False),
    ("~~~~", "~~~", False), ("~~~~", "~~~~~", True), ("~~~~", "\t~~~~", False),
    ("  ```js", "```", True), ("````", "```", False), ("```", "```\u3000", True),
])
def test_fence_closing_lines(opening, line, closes):
    text = f"# A\n{opening}\n# in code\n{line}\n# B\n"
    headings = [c.headings for c in chunkd.split_text(text, strategy="sections")]
    assert headings == ([("A",), ("B",)] if closes else [("A",)])
    assert headings == [c["headings"] for c in reference.windows(text, "sections", 1, 0)]


def test_an_open_fence_runs_to_the_end():
    text = "# A\n```\n# B\n~~~\n# C\n"
    assert [c.headings for c in chunkd.split_text(text, strategy="sections")] == [("A",)]


def test_white_preamble_is_no_section():
    assert [c.text for c in chunkd.split_text(" \n\t\n# A\nx", strategy="sections")] == ["# A\nx"]
    assert [c.text for c in chunkd.split_text(" \n\t\n  x\n# A", strategy="sections")] == [
        "x", "# A"]


# --- a few fixed cases from the contract ---------------------------------------------

def test_contract_examples():
    assert [c.text for c in chunkd.split_text("中文。hello world", 1, strategy="words")] == [
        "中", "文", "。", "hello", "world"]
    assert [c.text for c in chunkd.split_text(
        "Pi is 3.14 and file.txt is here. Next!\n中文。好！# Heading\n- item", 1,
        strategy="sentences")] == [
        "Pi is 3.14 and file.txt is here.", "Next!", "中文。", "好！", "# Heading", "- item"]
    flag_family = "🇫🇷👩\u200d👩\u200d👧e\u0301"
    assert [c.text for c in chunkd.split_text(flag_family, 1, strategy="graphemes")] == [
        "🇫🇷", "👩\u200d👩\u200d👧", "e\u0301"]
    assert chunkd.split_text("中文 abcd", strategy="words")[0].estimated_tokens == \
        (105 * 2 + 25 * 5 + 99) // 100


def test_the_last_window_ends_at_the_last_unit():
    text = "a b c d e f g"
    chunks = chunkd.split_text(text, 4, 2, strategy="words")
    assert [c.text for c in chunks] == ["a b c d", "c d e f", "e f g"]
    chunks = chunkd.split_text("a b c d e f", 4, 2, strategy="words")
    assert [c.text for c in chunks] == ["a b c d", "c d e f"]


def test_count_tokens_adds_exact_counts():
    from oracle import token_length

    text = "Some words to count. 中文也算。\n# A heading\nmore"
    for strategy in STRATEGIES:
        for chunk in chunkd.split_text(text, 3, strategy=strategy, count_tokens=True):
            assert chunk.tokens == token_length(chunk.text)
            assert chunk.estimated_tokens is not None


# --- the compiled classes refuse what they cannot do ------------------------------------

@pytest.mark.parametrize("make", [WordWindows, SentenceWindows, SectionWindows,
                                  lambda s, o: GraphemeWindows(s, o, bytes(0x110000))])
def test_sizes_are_checked(make):
    for size, overlap in [(0, 0), (-1, 0), (3, 3), (3, -1), (3, 4)]:
        with pytest.raises(ValueError):
            make(size, overlap)
    with pytest.raises(OverflowError):
        make(2**70, 0)
    with pytest.raises(TypeError):
        make(3, 1).feed(None)
    with pytest.raises(TypeError):
        make(3, 1).feed(b"bytes")


def test_bad_construction_is_an_error_not_a_crash():
    with pytest.raises(ValueError):
        GraphemeWindows(3, 1, b"too short")
    with pytest.raises(TypeError):
        GraphemeWindows(3, 1, None)
    with pytest.raises(TypeError):
        WordWindows.__new__(WordWindows)
    with pytest.raises(NotImplementedError):
        _Windows(3, 1).feed("text")
    with pytest.raises(TypeError):
        SectionScanner().feed(None)


def test_settings_refuse_other_units_and_keep_window_defaults():
    with pytest.raises(chunkd.SettingsError, match="counts in words"):
        chunkd.Splitter(10, strategy="words", unit="chars")
    for strategy, size in [("graphemes", 1000), ("words", 200), ("sentences", 8),
                           ("sections", 1)]:
        assert chunkd.Splitter(strategy=strategy).settings.as_dict() == {
            "strategy": strategy, "unit": strategy, "size": size, "overlap": 0,
            "errors": "strict"}


def test_a_splitter_is_ready_for_the_next_document():
    for strategy in STRATEGIES:
        splitter = chunkd.Splitter(2, 1, strategy=strategy)
        first = splitter.feed("# A\nOne two. Three") + splitter.finish()
        again = splitter.feed("# A\nOne two. Three") + splitter.finish()
        assert first == again and first[0].index == 0
