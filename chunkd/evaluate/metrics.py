"""Span metrics of a retrieval, on exact code-point ranges.

The metrics of the public chunking evaluation (brandonstarxel/chunking_evaluation,
"Evaluating Chunking Strategies for Retrieval"), for one question whose reference
excerpts R lie in one document, and the k chunks C_1..C_k a retriever returned for
it, best first, from any document:

* hits H = the union of C_i ∩ R over the retrieved chunks of the question's document;
* recall = |H| / |R|;
* precision = |H| / Σ|C_i| (every retrieved chunk costs its length, whatever its
  document, and overlapping chunks cost their shared text twice);
* IoU = |H| / (Σ|C_i| + |R \\ H|);
* recall@k = 1 if every reference is found, else 0: every code point of R that is
  not white space lies in H (chunkers that strip white space, as LangChain's and so
  the recursive strategy do, put the spaces between two chunks in neither, and a
  reference spanning them would otherwise never count as found);
* reciprocal rank = 1 / i for the first C_i that shares a code point with R, else 0;
* nDCG@k = DCG / IDCG (0 where IDCG is 0), with binary relevance: C_i is relevant
  (rel_i = 1, else 0) if it is of the question's document and shares a code point
  with R, as for the reciprocal rank (white space is not set aside: recall@k's
  exception is for text that is in no chunk, and a chunk that shares R's white space
  holds it); DCG = Σ rel_i / log2(i + 1) over the k retrieved chunks; IDCG is the DCG
  of min(k, n) relevant chunks at the top, n the number of the setting's chunks of the
  question's document (retrieved or not) that share a code point with R.

A chunk is the code points it stands for: one range, its own, for every strategy but
propositions, whose chunk stands for the union of its propositions' source ranges
(its text is the LLM's statements, and its own range only bounds them). |C_i| is the
size of that union, and C_i ∩ R its common part with R.

Lengths are in code points. R is the union of the references: when the references of
a question do not overlap (as in the published data), |R| is the sum of their lengths,
as the published code computes it.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Sequence
from typing import NamedTuple

#: A half-open range of code points, ``(start, end)``.
Span = tuple[int, int]


class Retrieved(NamedTuple):
    """A retrieved chunk as a question sees it: the ranges it stands for (its own
    range, but for propositions), and whether it lies in the question's document (a
    chunk of another one costs its length, finds nothing)."""

    spans: Sequence[Span]
    here: bool


class Scores(NamedTuple):
    """One question's metrics."""

    recall: float
    precision: float
    iou: float
    recall_at_k: float
    mrr: float
    ndcg: float


#: The metrics' names, in the order of ``Scores``.
METRICS = Scores._fields


def union(spans: Iterable[Span]) -> list[Span]:
    """The union of ``spans`` as sorted, disjoint, non-empty ranges (touching ranges
    are merged)."""
    merged: list[Span] = []
    for start, end in sorted(span for span in spans if span[0] < span[1]):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def size(spans: Iterable[Span]) -> int:
    """The code points the ranges cover, counted once each if they are a union."""
    return sum(end - start for start, end in spans)


def intersection(first: Sequence[Span], second: Sequence[Span]) -> list[Span]:
    """The common part of two unions (as ``union`` returns them)."""
    common: list[Span] = []
    i = j = 0
    while i < len(first) and j < len(second):
        start = max(first[i][0], second[j][0])
        end = min(first[i][1], second[j][1])
        if start < end:
            common.append((start, end))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return common


def difference(first: Sequence[Span], second: Sequence[Span]) -> list[Span]:
    """The part of one union (``first``) outside another (``second``)."""
    rest: list[Span] = []
    j = 0
    for start, end in first:
        while j < len(second) and second[j][1] <= start:
            j += 1
        k = j
        while k < len(second) and second[k][0] < end:
            if second[k][0] > start:
                rest.append((start, second[k][0]))
            start = max(start, second[k][1])
            k += 1
        if start < end:
            rest.append((start, end))
    return rest


class DocumentChunks:
    """A setting's chunks of one document, each as the ranges it stands for, indexed
    by where their ranges start so that counting those a question's references touch
    (nDCG's ideal) looks only at ranges near the references, not at every chunk."""

    def __init__(self, chunks: Iterable[Iterable[Span]]) -> None:
        #: Every non-empty range of every chunk, ``(start, end, chunk's number)``, by start.
        self.pieces = sorted((start, end, number) for number, spans in enumerate(chunks)
                             for start, end in spans if start < end)
        self.starts = [start for start, _, _ in self.pieces]
        self.longest = max((end - start for start, end, _ in self.pieces), default=0)

    def sharing(self, wanted: Sequence[Span]) -> int:
        """How many chunks share a code point with ``wanted``: a range that ends after
        ``start`` starts after ``start - longest``."""
        found: set[int] = set()
        for start, end in wanted:
            first = bisect.bisect_right(self.starts, start - self.longest)
            found.update(number for _, piece_end, number
                         in self.pieces[first:bisect.bisect_left(self.starts, end)]
                         if piece_end > start)
        return len(found)


def scores(references: Sequence[Span], retrieved: Sequence[Retrieved], text: str,
           document: DocumentChunks) -> Scores:
    """The metrics of one question: ``references`` (non-empty ranges) in ``text``, its
    document; ``retrieved`` the chunks the retriever returned, best first; ``document``
    all the setting's chunks of that document, retrieved or not (nDCG's ideal)."""
    wanted = union(references)
    stands = [union(chunk.spans) for chunk in retrieved]
    hits = intersection(wanted, union(span for chunk, spans in zip(retrieved, stands)
                                      if chunk.here for span in spans))
    found = size(hits)
    cost = sum(map(size, stands))
    missed = difference(wanted, hits)
    relevant = [chunk.here and bool(intersection(wanted, spans))
                for chunk, spans in zip(retrieved, stands)]
    first = next((rank for rank, hit in enumerate(relevant, start=1) if hit), None)
    ideal = sum(map(gain, range(1, min(len(retrieved), document.sharing(wanted)) + 1)))
    gained = sum(gain(rank) for rank, hit in enumerate(relevant, start=1) if hit)
    return Scores(recall=found / size(wanted),
                  precision=found / cost if cost else 0.0,
                  iou=found / (cost + size(missed)),
                  recall_at_k=float(all(text[start:end].isspace() for start, end in missed)),
                  mrr=1 / first if first else 0.0,
                  ndcg=gained / ideal if ideal else 0.0)


def gain(rank: int) -> float:
    """What a relevant chunk at ``rank`` (from 1) adds to the DCG."""
    return 1 / math.log2(rank + 1)


class Summary(NamedTuple):
    """Each metric's mean, (population) standard deviation and standard error of the
    mean over questions."""

    questions: int
    means: Scores
    deviations: Scores
    errors: Scores


def standard_error(values: Sequence[float]) -> float:
    """The standard error of the mean of ``values``: their sample standard deviation
    over the square root of their number (0 for fewer than two)."""
    return statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0


def summarize(per_question: Sequence[Scores]) -> Summary:
    """Each metric's mean, standard deviation and standard error (zeros for no
    question)."""
    if not per_question:
        zeros = Scores(*(0.0,) * len(METRICS))
        return Summary(0, zeros, zeros, zeros)
    columns = list(zip(*per_question))
    return Summary(len(per_question), Scores(*map(statistics.fmean, columns)),
                   Scores(*map(statistics.pstdev, columns)),
                   Scores(*map(standard_error, columns)))


#: How many standard errors of a paired difference make it more than noise: the
#: two-sided 95 % point of the normal distribution.
NOISE_ERRORS = 1.96


class Difference(NamedTuple):
    """How much a setting scored below another on the same questions: the mean of the
    per-question differences, its standard error, and whether it is within the noise
    (no more than ``NOISE_ERRORS`` standard errors)."""

    mean: float
    error: float
    within_noise: bool


def paired_difference(first: Sequence[float], second: Sequence[float]) -> Difference:
    """``first`` less ``second``, question by question (a paired comparison: both were
    scored on the same questions, so what the questions share cancels)."""
    differences = [a - b for a, b in zip(first, second, strict=True)]
    mean = statistics.fmean(differences) if differences else 0.0
    error = standard_error(differences)
    return Difference(mean, error, abs(mean) <= NOISE_ERRORS * error)
