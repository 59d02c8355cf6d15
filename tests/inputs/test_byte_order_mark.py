"""A byte-order mark before the first heading: the text keeps it (offsets count the
U+FEFF, as the decoded bytes have it), but it does not hide the heading line it
begins; only a U+FEFF at the document's very start is skipped so."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import chunkd
import windows_reference as reference
from chunkd.kernel._windows import SectionScanner
from command import ndjson, run_chunkd
from markdown_checks import check_markdown
from window_checks import SETTINGS, check, cut, documents

BOM = "\ufeff"
DOCUMENT = f"{BOM}# Title\n\ntext\n\n## Sub\n\nmore\n"


@pytest.mark.parametrize("strategy", ["markdown", "sections"])
def test_the_first_heading_after_a_byte_order_mark_through_the_command(strategy):
    result = run_chunkd("--strategy", strategy, input=DOCUMENT.encode())
    assert result.returncode == 0, result.stderr
    records = ndjson(result.stdout)
    assert [r["headings"] for r in records] == [["Title"], ["Title", "Sub"]]
    assert (records[0]["start"], records[0]["text"]) == (0, f"{BOM}# Title\n\ntext")
    assert all(DOCUMENT[r["start"]:r["end"]] == r["text"] for r in records)


@pytest.mark.parametrize("pieces", [
    [DOCUMENT], [BOM, DOCUMENT[1:]], ["", BOM, "", DOCUMENT[1:3], DOCUMENT[3:]], list(DOCUMENT)],
    ids=["whole", "the mark alone first", "empty pieces", "a code point a piece"])
def test_fed_in_pieces(pieces):
    check(DOCUMENT, pieces, "sections", 1, 0)
    check_markdown(DOCUMENT, pieces, "chars", 12, 2)
    check_markdown(DOCUMENT, pieces, "chars", 12, 2, strip_headings=True)


@pytest.mark.parametrize("text,headings", [
    (f"{BOM}# A\nx", [("A",)]),
    (f"{BOM}   ## A\nx", [("A",)]),                    # the indent comes after the mark
    (f"{BOM}\n# A\nx", [(), ("A",)]),                  # the mark is text before the heading
    (f"{BOM}```\n# A\n```\n# B", [(), ("B",)]),        # a fence after the mark
    (f"{BOM}text\n# A", [(), ("A",)]),
    (f"x\n{BOM}# A", [()]),                            # elsewhere it is a character
    (f"{BOM}{BOM}# A", [()]),                          # only one mark is skipped
    (f"{BOM}", [()]),                                  # nothing is lost, not even the mark
])
def test_only_a_mark_at_the_very_start_is_skipped(text, headings):
    assert [c.headings for c in chunkd.split_text(text, strategy="sections")] == headings
    assert [w["headings"] for w in reference.windows(text, "sections", 1, 0)] == headings


marked_documents = documents.map(lambda text: BOM + text)


@SETTINGS
@given(cut(marked_documents))
def test_the_scanner_after_a_mark_equals_the_reference(doc):
    text, pieces = doc
    scanner = SectionScanner()
    reported = [start for piece in pieces for start in scanner.feed(piece)] + scanner.finish()
    assert reported == [(start, headings) for start, _, headings in reference.section_units(text)]
    check(text, pieces, "sections", 2, 1)


@SETTINGS
@given(cut(marked_documents), st.integers(1, 40), st.sampled_from(["chars", "tokens"]),
       st.booleans())
def test_markdown_after_a_mark_equals_the_reference(doc, size, unit, strip_headings):
    text, pieces = doc
    check_markdown(text, pieces, unit, size, size // 3, strip_headings)
