"""Differential tests: every shared-corpus document, both units, against LangChain."""

from __future__ import annotations

import random

import pytest

from oracle import check_against_langchain, corpus_documents, langchain_chunks, random_cuts

SETTINGS = {
    "chars": [(1000, 100), (300, 0), (50, 10)],
    "tokens": [(300, 30), (100, 0), (16, 4)],
}
CASES = [(unit, size, overlap) for unit, pairs in SETTINGS.items() for size, overlap in pairs]
DOCUMENTS = corpus_documents()


@pytest.mark.parametrize("unit,size,overlap", CASES)
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: f"{p.parent.name}/{p.name[:40]}")
def test_whole_and_in_random_pieces(path, unit, size, overlap):
    """Fed whole, then in random pieces (a few code points to thousands at a time): the
    same chunks as LangChain's, split once."""
    text = path.read_text(encoding="utf-8")
    expected = langchain_chunks(text, size, overlap, unit)
    check_against_langchain(text, [text], size, overlap, unit, expected)
    rng = random.Random(f"{path.name}-{unit}-{size}")
    check_against_langchain(text, random_cuts(text, rng, max_piece=rng.choice([3, 50, 5000])),
                            size, overlap, unit, expected)
