"""Retrievers: which chunks answer a question best.

A retriever is built once per setting from the texts of all its chunks (of every
document) and returns, for each question, the numbers of the best ``k`` chunks, best
first: BM25 over words; dense, the cosine similarity of a model's embeddings
(``chunkd.embeddings.models``: offline, each distinct text embedded once a process); hybrid,
the two rankings fused by reciprocal rank.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy

    from chunkd.embeddings.models import Embedder


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

    def scores(self, questions: Sequence[str]) -> numpy.ndarray:
        """Each question's score for each chunk (a row a question)."""
        import numpy

        rows = numpy.zeros((len(questions), self.count), dtype=numpy.float32)
        for row, question in zip(rows, questions):
            ids = (self.index.get_tokens_ids(tokenize(question))  # words no chunk has: none
                   if self.index is not None else [])
            if self.index is not None and ids:
                row[:] = self.index.get_scores_from_ids(ids)
        return rows

    def search(self, questions: Sequence[str], k: int) -> list[list[int]]:
        return best_first(self.scores(questions), k)


def best_first(scores: numpy.ndarray, k: int) -> list[list[int]]:
    """For each row of scores, the numbers of its ``k`` highest, equal scores in chunk
    order."""
    import numpy

    return [numpy.argsort(-row, kind="stable")[:k].tolist() for row in scores]


class Dense:
    """The chunks whose embeddings are nearest a question's, by cosine similarity; the
    prefixes go before every question and every chunk (E5's "query: " and "passage: ",
    BGE's instruction). The chunks' ``vectors``, where given (late chunking's), are
    taken instead of their texts' embeddings."""

    def __init__(self, chunks: Sequence[str], model: Embedder, query_prefix: str = "",
                 document_prefix: str = "", vectors: numpy.ndarray | None = None) -> None:
        self.model = model
        self.query_prefix = query_prefix
        self.vectors = unit_rows(model.embed([document_prefix + text for text in chunks])
                                 if vectors is None else vectors)

    def scores(self, questions: Sequence[str]) -> numpy.ndarray:
        asked = unit_rows(self.model.embed([self.query_prefix + text for text in questions]))
        return asked @ self.vectors.T

    def search(self, questions: Sequence[str], k: int) -> list[list[int]]:
        return best_first(self.scores(questions), k)


def unit_rows(vectors: numpy.ndarray) -> numpy.ndarray:
    """The rows scaled to length 1, in float64 (a zero row stays zero)."""
    import numpy

    rows = vectors.astype(numpy.float64)
    norms = numpy.linalg.norm(rows, axis=1, keepdims=True)
    return rows / numpy.where(norms == 0, 1, norms)


#: Reciprocal rank fusion's constant (Cormack, Clarke and Büttcher, 2009).
FUSION_K = 60


class Hybrid:
    """BM25 and dense fused by reciprocal rank: a chunk scores 1 / (60 + its rank) in
    each of the two full rankings (ranks from 1), summed."""

    def __init__(self, chunks: Sequence[str], model: Embedder, query_prefix: str = "",
                 document_prefix: str = "", vectors: numpy.ndarray | None = None) -> None:
        self.parts = (BM25(chunks), Dense(chunks, model, query_prefix, document_prefix,
                                          vectors))
        self.count = len(chunks)

    def search(self, questions: Sequence[str], k: int) -> list[list[int]]:
        import numpy

        fused = numpy.zeros((len(questions), self.count))
        for part in self.parts:
            for row, ranking in zip(fused, best_first(part.scores(questions), self.count)):
                row[ranking] += 1.0 / (FUSION_K + numpy.arange(1, self.count + 1))
        return best_first(fused, k)


#: The retrievers, by name: "bm25" first, the default.
RETRIEVERS = ("bm25", "dense", "hybrid")
#: The retrievers that embed, with a model.
EMBEDDING = ("dense", "hybrid")


def retriever(name: str, model: Embedder | None = None, query_prefix: str = "",
              document_prefix: str = "") -> Callable[..., Retriever]:
    """The factory of the retriever ``name`` (one of ``RETRIEVERS``), from the chunk
    texts; dense and hybrid embed with ``model``, or take the chunks' ``vectors``."""
    if name == "bm25":
        return BM25
    assert model is not None, "the command asks for a model for dense and hybrid"
    return functools.partial(Dense if name == "dense" else Hybrid, model=model,
                             query_prefix=query_prefix, document_prefix=document_prefix)
