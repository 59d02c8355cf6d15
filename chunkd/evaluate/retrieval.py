"""Retrievers: which chunks answer a question best.

A retriever is built once per setting from the texts of all its chunks (of every
document) and returns, for each question, the numbers of the best ``k`` chunks, best
first. BM25 is the only one so far; an embedding retriever would be one more entry in
``RETRIEVERS`` (it must run offline: no model is downloaded at run time).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol


class Retriever(Protocol):
    """An index over one setting's chunks."""

    def search(self, questions: Sequence[str], k: int) -> list[list[int]]:
        """For each question, the numbers of its ``k`` best chunks, best first."""
        ...


#: Scripts written without spaces between words: Hiragana, Katakana, CJK ideographs
#: (extension A, the unified block, compatibility ideographs, the supplementary
#: planes) and Hangul syllables.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0003134f"
_TOKEN = re.compile(f"([{_CJK}]+)|[^\\W_{_CJK}]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased words (letters and digits), with a run of CJK characters cut into
    overlapping character bigrams (a lone character stays a unigram), as Lucene's
    CJKAnalyzer does: Chinese and Japanese put no spaces between words, so a run taken
    whole would be one useless token."""
    tokens: list[str] = []
    for match in _TOKEN.finditer(text.lower()):
        run = match.group()
        if match.group(1) and len(run) > 1:
            tokens.extend(run[i:i + 2] for i in range(len(run) - 1))
        else:
            tokens.append(run)
    return tokens


class BM25:
    """Okapi BM25 (Lucene's variant, k1 = 1.5, b = 0.75) with ``bm25s``, every word
    kept (leaving English stop words out made no clear difference on the shared
    questions, and would favour one language). Deterministic: equal scores keep the
    chunks' order, so a question none of whose words a chunk has (every chunk scores 0)
    gets the first ``k`` chunks; so does every question when no chunk has a word at
    all (only punctuation or emoji: there is nothing to index)."""

    def __init__(self, chunks: Sequence[str]) -> None:
        import bm25s

        words = [tokenize(text) for text in chunks]
        self.index = None
        if any(words):  # bm25s cannot index an empty vocabulary
            self.index = bm25s.BM25()
            self.index.index(words, show_progress=False)
        self.count = len(chunks)

    def search(self, questions: Sequence[str], k: int) -> list[list[int]]:
        import numpy

        best = []
        for question in questions:
            ids = (self.index.get_tokens_ids(tokenize(question))  # words no chunk has: none
                   if self.index is not None else [])
            scores = (self.index.get_scores_from_ids(ids) if self.index is not None and ids
                      else numpy.zeros(self.count, dtype=numpy.float32))
            best.append(numpy.argsort(-scores, kind="stable")[:k].tolist())
        return best


#: Retriever name -> factory from the chunk texts.
RETRIEVERS: dict[str, Callable[[Sequence[str]], Retriever]] = {"bm25": BM25}
