"""chunkd eval's metrics: hand-checked cases, and a plain re-implementation of the
published formulas (brandonstarxel/chunking_evaluation's base_evaluation.py, as its
paper defines them) compared on random ranges."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from chunkd.evaluate.metrics import (Retrieved, Scores, difference, intersection, scores,
                                     summarize, union)

TEXT = "x" * 200  # no white space: every missed code point counts for recall@k


def here(start: int, end: int) -> Retrieved:
    return Retrieved(start, end, True)


def elsewhere(start: int, end: int) -> Retrieved:
    return Retrieved(start, end, False)


# --- hand-checked cases -------------------------------------------------------------------

@pytest.mark.parametrize("references, retrieved, expected", [
    # disjoint: nothing found; IoU's denominator is the chunk plus the missed reference
    ([(10, 20)], [here(30, 40)], Scores(0, 0, 0, 0, 0)),
    # a chunk holding the reference
    ([(10, 20)], [here(0, 100)], Scores(1, 10 / 100, 10 / 100, 1, 1)),
    # a reference holding the chunk
    ([(0, 100)], [here(10, 20)], Scores(10 / 100, 1, 10 / (10 + 90), 0, 1)),
    # overlapping by 10
    ([(10, 30)], [here(20, 40)], Scores(10 / 20, 10 / 20, 10 / (20 + 10), 0, 1)),
    # touching: they share no code point
    ([(10, 20)], [here(20, 30)], Scores(0, 0, 0, 0, 0)),
    ([(10, 20)], [here(0, 10)], Scores(0, 0, 0, 0, 0)),
    # two references, two chunks each finding half of one
    ([(10, 20), (50, 60)], [here(0, 15), here(55, 70)],
     Scores(10 / 20, 10 / 30, 10 / (30 + 10), 0, 1)),
    # overlapping chunks: the common text is found once and paid twice
    ([(25, 35)], [here(0, 30), here(20, 50)], Scores(1, 10 / 60, 10 / 60, 1, 1)),
    # a chunk of another document at the same offsets finds nothing and costs its length
    ([(10, 20)], [elsewhere(0, 100), here(10, 20)], Scores(1, 10 / 110, 10 / 110, 1, 1 / 2)),
    # the first chunk touching a reference is third
    ([(10, 20)], [here(30, 40), here(50, 60), here(15, 25), here(0, 12)],
     Scores(7 / 10, 7 / 42, 7 / (42 + 3), 0, 1 / 3)),
    # nothing retrieved
    ([(10, 20)], [], Scores(0, 0, 0, 0, 0)),
    # the same reference twice counts once
    ([(10, 20), (10, 20)], [here(10, 15)], Scores(5 / 10, 1, 5 / 10, 0, 1)),
])
def test_hand_checked_cases(references, retrieved, expected):
    assert tuple(scores(references, retrieved, TEXT)) == pytest.approx(tuple(expected))


def test_recall_at_k_leaves_out_only_white_space_between_chunks():
    text = "aaaa bbbb\n\ncccc"
    split = [here(0, 4), here(5, 9), here(11, 15)]  # the gaps are white space
    result = scores([(0, 15)], split, text)
    assert result.recall == pytest.approx(12 / 15)
    assert result.recall_at_k == 1
    text = "aaaa-bbbb"
    assert scores([(0, 9)], [here(0, 4), here(5, 9)], text).recall_at_k == 0


def test_summary_is_the_mean_and_population_deviation():
    per_question = [Scores(1, 0.5, 0.25, 1, 1), Scores(0, 0.1, 0.05, 0, 0.5)]
    summary = summarize(per_question)
    assert summary.questions == 2
    assert tuple(summary.means) == pytest.approx((0.5, 0.3, 0.15, 0.5, 0.75))
    assert tuple(summary.deviations) == pytest.approx((0.5, 0.2, 0.1, 0.5, 0.25))
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
    hits = [code_points([(start, end)]) if same else set() for start, end, same in retrieved]
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


retrieved_chunks = st.lists(st.tuples(span, st.booleans()).map(
    lambda pair: Retrieved(*pair[0], pair[1])), max_size=6)
texts = st.text(alphabet="ab \n", min_size=200, max_size=200)


@settings(max_examples=examples(300))
@given(disjoint_references(), retrieved_chunks, texts)
def test_equals_the_published_formulas(references, retrieved, text):
    result = scores(references, retrieved, text)
    assert tuple(result[:3]) == pytest.approx(published(references, retrieved))
    assert tuple(result[3:]) == pytest.approx(
        plain_recall_at_k_and_mrr(references, retrieved, text))


@settings(max_examples=examples(300))
@given(st.lists(span, min_size=1, max_size=5), retrieved_chunks, texts)
def test_overlapping_references_count_once(references, retrieved, text):
    """Where references overlap, |R| is their union's size (the published code sums
    them, so its recall could never reach 1): the metrics on code-point sets."""
    wanted = code_points(references)
    found = wanted & code_points([(c.start, c.end) for c in retrieved if c.here])
    cost = sum(c.end - c.start for c in retrieved)
    result = scores(references, retrieved, text)
    assert result.recall == pytest.approx(len(found) / len(wanted))
    assert result.precision == pytest.approx(len(found) / cost if cost else 0)
    assert result.iou == pytest.approx(len(found) / (cost + len(wanted - found)))
    assert tuple(result[3:]) == pytest.approx(
        plain_recall_at_k_and_mrr(references, retrieved, text))


@settings(max_examples=examples(300))
@given(st.lists(span, max_size=6), st.lists(span, max_size=6))
def test_range_operations_equal_sets_of_code_points(first, second):
    a, b = union(first), union(second)
    assert code_points(a) == code_points(first)
    assert all(start < end for start, end in a)
    assert all(x[1] < y[0] for x, y in zip(a, a[1:]))  # sorted, apart (touching merged)
    assert code_points(intersection(a, b)) == code_points(first) & code_points(second)
    assert code_points(difference(a, b)) == code_points(first) - code_points(second)

