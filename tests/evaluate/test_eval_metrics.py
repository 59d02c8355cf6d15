"""chunkd eval's metrics: hand-checked cases, and a plain re-implementation of the
published formulas (brandonstarxel/chunking_evaluation's base_evaluation.py, as its
paper defines them) and of nDCG@k, from its definition, compared on random ranges."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from chunkd.evaluate.metrics import (DocumentChunks, Retrieved, Scores, difference,
                                     intersection, scores, summarize, union)

TEXT = "x" * 200  # no white space: every missed code point counts for recall@k


def here(start: int, end: int) -> Retrieved:
    return Retrieved(((start, end),), True)


def elsewhere(start: int, end: int) -> Retrieved:
    return Retrieved(((start, end),), False)


def score(references, retrieved, text=TEXT, document=None):
    """The scores where the document's chunks are the retrieved ones of it, unless
    ``document`` (each chunk's ranges) says."""
    if document is None:
        document = [chunk.spans for chunk in retrieved if chunk.here]
    return scores(references, retrieved, text, DocumentChunks(document))


# --- hand-checked cases -------------------------------------------------------------------

@pytest.mark.parametrize("references, retrieved, expected", [
    # disjoint: nothing found; IoU's denominator is the chunk plus the missed reference
    ([(10, 20)], [here(30, 40)], Scores(0, 0, 0, 0, 0, 0)),
    # a chunk holding the reference
    ([(10, 20)], [here(0, 100)], Scores(1, 10 / 100, 10 / 100, 1, 1, 1)),
    # a reference holding the chunk
    ([(0, 100)], [here(10, 20)], Scores(10 / 100, 1, 10 / (10 + 90), 0, 1, 1)),
    # overlapping by 10
    ([(10, 30)], [here(20, 40)], Scores(10 / 20, 10 / 20, 10 / (20 + 10), 0, 1, 1)),
    # touching: they share no code point
    ([(10, 20)], [here(20, 30)], Scores(0, 0, 0, 0, 0, 0)),
    ([(10, 20)], [here(0, 10)], Scores(0, 0, 0, 0, 0, 0)),
    # two references, two chunks each finding half of one
    ([(10, 20), (50, 60)], [here(0, 15), here(55, 70)],
     Scores(10 / 20, 10 / 30, 10 / (30 + 10), 0, 1, 1)),
    # overlapping chunks: the common text is found once and paid twice
    ([(25, 35)], [here(0, 30), here(20, 50)], Scores(1, 10 / 60, 10 / 60, 1, 1, 1)),
    # a chunk of another document at the same offsets finds nothing and costs its length;
    # nDCG: the one relevant chunk at rank 2, DCG 1 / log2(3), ideal 1
    ([(10, 20)], [elsewhere(0, 100), here(10, 20)],
     Scores(1, 10 / 110, 10 / 110, 1, 1 / 2, 1 / math.log2(3))),
    # the first chunk touching a reference is third; nDCG: relevant at ranks 3 and 4,
    # DCG 1/2 + 1/log2(5), ideal (2 relevant chunks) 1 + 1/log2(3)
    ([(10, 20)], [here(30, 40), here(50, 60), here(15, 25), here(0, 12)],
     Scores(7 / 10, 7 / 42, 7 / (42 + 3), 0, 1 / 3,
            (1 / 2 + 1 / math.log2(5)) / (1 + 1 / math.log2(3)))),
    # nothing retrieved
    ([(10, 20)], [], Scores(0, 0, 0, 0, 0, 0)),
    # the same reference twice counts once
    ([(10, 20), (10, 20)], [here(10, 15)], Scores(5 / 10, 1, 5 / 10, 0, 1, 1)),
    # a chunk that stands for two ranges (propositions) costs their union's size, not
    # its extent's (0..40), and finds what they share with R
    ([(5, 35)], [Retrieved(((0, 10), (30, 40), (32, 38)), True)],
     Scores(10 / 30, 10 / 20, 10 / (20 + 20), 0, 1, 1)),
    # its ranges miss R, which lies between them: found nothing, no rank
    ([(12, 28)], [Retrieved(((0, 10), (30, 40)), True)], Scores(0, 0, 0, 0, 0, 0)),
    # a chunk that stands for nothing (no proposition had a source) costs nothing
    ([(10, 20)], [Retrieved((), True), here(10, 20)], Scores(1, 1, 1, 1, 1 / 2,
                                                            1 / math.log2(3))),
])
def test_hand_checked_cases(references, retrieved, expected):
    assert tuple(score(references, retrieved)) == pytest.approx(tuple(expected))


@pytest.mark.parametrize("retrieved, document, expected", [
    # every retrieved chunk relevant, as many as there are: 1
    ([here(0, 15), here(15, 30)], [(0, 15), (15, 30), (40, 50)], 1),
    # only k = 1 retrieved, the best of 3 relevant ones: the ideal has 1 too, so 1
    ([here(15, 30)], [(0, 15), (15, 30), (20, 25)], 1),
    # relevant chunks exist but none is retrieved: 0
    ([here(40, 50), elsewhere(10, 20)], [(0, 15), (40, 50)], 0),
    # no chunk of the document touches R: the ideal is 0, and so is nDCG
    ([here(40, 50)], [(40, 50), (60, 70)], 0),
    # the only relevant chunk third of k = 3: DCG 1 / log2(4) = 1/2, ideal 1
    ([here(40, 50), elsewhere(10, 20), here(15, 30)], [(40, 50), (15, 30)], 1 / 2),
    # relevant at rank 1 only, k = 3, and 3 relevant in the document (two not retrieved):
    # DCG 1, ideal 1 + 1/log2(3) + 1/log2(4) = 1.5 + 0.6309... = 2.1309...: 0.4692...
    ([here(10, 18), here(40, 50), here(60, 70)],
     [(0, 11), (10, 18), (17, 30), (40, 50), (60, 70)], 1 / (1.5 + 1 / math.log2(3))),
])
def test_ndcg_hand_checked(retrieved, document, expected):
    """R is 10..20 of the question's document; ``document``: all its chunks' ranges."""
    found = score([(10, 20)], retrieved, document=[[span] for span in document])
    assert found.ndcg == pytest.approx(expected)


def test_recall_at_k_leaves_out_only_white_space_between_chunks():
    text = "aaaa bbbb\n\ncccc"
    split = [here(0, 4), here(5, 9), here(11, 15)]  # the gaps are white space
    result = score([(0, 15)], split, text)
    assert result.recall == pytest.approx(12 / 15)
    assert result.recall_at_k == 1
    text = "aaaa-bbbb"
    assert score([(0, 9)], [here(0, 4), here(5, 9)], text).recall_at_k == 0


def test_summary_is_the_mean_and_population_deviation():
    per_question = [Scores(1, 0.5, 0.25, 1, 1, 0.75), Scores(0, 0.1, 0.05, 0, 0.5, 0.25)]
    summary = summarize(per_question)
    assert summary.questions == 2
    assert tuple(summary.means) == pytest.approx((0.5, 0.3, 0.15, 0.5, 0.75, 0.5))
    assert tuple(summary.deviations) == pytest.approx((0.5, 0.2, 0.1, 0.5, 0.25, 0.25))
    assert summarize([]).questions == 0


# --- the published formulas, re-implemented plainly -----------------------------------------

def published(references, retrieved):
    """recall, precision and IoU as the published evaluation computes them for one
    question: ``references`` as (start, end), ``retrieved`` as (start, end, same doc)."""
    def merge(ranges):
        merged = []
        for start, end in sorted(ranges):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged

    def subtract(ranges, cut):
        kept = []
        for start, end in ranges:
            if end < cut[0] or start > cut[1]:
                kept.append((start, end))
                continue
            if start < cut[0]:
                kept.append((start, cut[0]))
            if end > cut[1]:
                kept.append((cut[1], end))
        return kept

    found, unused = [], list(references)
    for start, end, same in retrieved:
        if not same:
            continue
        for ref_start, ref_end in references:
            common = (max(start, ref_start), min(end, ref_end))
            if common[0] <= common[1]:
                unused = subtract(unused, common)
                found = merge([common] + found)
    numerator = sum(end - start for start, end in found)
    recall_denominator = sum(end - start for start, end in references)
    precision_denominator = sum(end - start for start, end, _ in retrieved)
    iou_denominator = precision_denominator + sum(end - start for start, end in unused)
    return (numerator / recall_denominator,
            numerator / precision_denominator if precision_denominator else 0,
            numerator / iou_denominator if iou_denominator else 0)


def code_points(ranges):
    return {point for start, end in ranges for point in range(start, end)}


def plain_recall_at_k_and_mrr(references, retrieved, text):
    wanted = code_points(references)
    hits = [code_points(chunk.spans) if chunk.here else set() for chunk in retrieved]
    missed = wanted - set().union(*hits)
    first = next((rank for rank, hit in enumerate(hits, 1) if hit & wanted), None)
    return float(all(text[point].isspace() for point in missed)), 1 / first if first else 0.0


span = st.tuples(st.integers(0, 120), st.integers(1, 60)).map(lambda p: (p[0], p[0] + p[1]))


@st.composite
def disjoint_references(draw):
    """Non-overlapping references, as in the published data (a gap may be empty)."""
    cuts = sorted(draw(st.lists(st.integers(0, 180), min_size=2, max_size=8, unique=True)))
    pairs = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    return draw(st.permutations(pairs))


def plain_ndcg(references, retrieved, document):
    """nDCG@k from its definition: binary relevance, a chunk of the question's document
    sharing a code point with R; the ideal, min(k, the document's relevant chunks)
    relevant chunks first."""
    wanted = code_points(references)
    relevant = [chunk.here and bool(code_points(chunk.spans) & wanted) for chunk in retrieved]
    dcg = sum(1 / math.log2(rank + 1) for rank, hit in enumerate(relevant, 1) if hit)
    count = sum(1 for spans in document if code_points(spans) & wanted)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(len(retrieved), count) + 1))
    return dcg / ideal if ideal else 0.0


retrieved_chunks = st.lists(st.tuples(span, st.booleans()).map(
    lambda pair: Retrieved((pair[0],), pair[1])), max_size=6)
#: Chunks that stand for several ranges, or none (propositions).
several_spans = st.lists(span, max_size=3)
retrieved_propositions = st.lists(st.builds(Retrieved, several_spans, st.booleans()),
                                  max_size=6)
texts = st.text(alphabet="ab \n", min_size=200, max_size=200)


@settings(max_examples=examples(300))
@given(disjoint_references(), retrieved_chunks, texts)
def test_equals_the_published_formulas(references, retrieved, text):
    result = score(references, retrieved, text)
    assert tuple(result[:3]) == pytest.approx(published(
        references, [(*chunk.spans[0], chunk.here) for chunk in retrieved]))
    assert tuple(result[3:5]) == pytest.approx(
        plain_recall_at_k_and_mrr(references, retrieved, text))


@settings(max_examples=examples(300))
@given(st.lists(span, min_size=1, max_size=5), st.one_of(retrieved_chunks,
                                                         retrieved_propositions), texts)
def test_overlapping_references_count_once(references, retrieved, text):
    """Where references overlap, |R| is their union's size (the published code sums
    them, so its recall could never reach 1): the metrics on code-point sets, a chunk
    being the code points it stands for (several ranges for propositions)."""
    wanted = code_points(references)
    found = wanted & code_points([span for c in retrieved if c.here for span in c.spans])
    cost = sum(len(code_points(c.spans)) for c in retrieved)
    result = score(references, retrieved, text)
    assert result.recall == pytest.approx(len(found) / len(wanted))
    assert result.precision == pytest.approx(len(found) / cost if cost else 0)
    assert result.iou == pytest.approx(len(found) / (cost + len(wanted - found)))
    assert tuple(result[3:5]) == pytest.approx(
        plain_recall_at_k_and_mrr(references, retrieved, text))


@settings(max_examples=examples(300))
@given(st.lists(span, min_size=1, max_size=3), st.data())
def test_ndcg_equals_its_definition(references, data):
    """A document's chunks (one range each, or several), a ranking of some of them
    with chunks of other documents among them: nDCG as the definition computes it."""
    document = data.draw(st.lists(st.one_of(st.lists(span, min_size=1, max_size=1),
                                            several_spans), max_size=10))
    chosen = data.draw(st.lists(st.integers(0, len(document) - 1), unique=True,
                                max_size=len(document)) if document else st.just([]))
    others = data.draw(st.lists(st.builds(Retrieved, several_spans, st.just(False)),
                                max_size=3))
    retrieved = data.draw(st.permutations(
        [Retrieved(tuple(document[number]), True) for number in chosen] + others))
    result = score(references, retrieved, document=document)
    assert result.ndcg == pytest.approx(plain_ndcg(references, retrieved, document))
    assert 0 <= result.ndcg <= 1 + 1e-12


@settings(max_examples=examples(300))
@given(st.lists(span, max_size=6), st.lists(span, max_size=6))
def test_range_operations_equal_sets_of_code_points(first, second):
    a, b = union(first), union(second)
    assert code_points(a) == code_points(first)
    assert all(start < end for start, end in a)
    assert all(x[1] < y[0] for x, y in zip(a, a[1:]))  # sorted, apart (touching merged)
    assert code_points(intersection(a, b)) == code_points(first) & code_points(second)
    assert code_points(difference(a, b)) == code_points(first) - code_points(second)

