"""chunkd eval's retriever: the tokenizer, and BM25 (bm25s) against a plain BM25 written
from its formula here."""

from __future__ import annotations

import json
import math
import pathlib
from collections import Counter

import pytest

import chunkd
from chunkd.evaluate.retrieval import BM25, tokenize

EVAL = pathlib.Path(__file__).resolve().parent.parent.parent.parent / "shared" / "eval"


@pytest.mark.parametrize("text, tokens", [
    ("Hello, World! It's 2024_v2.", ["hello", "world", "it", "s", "2024", "v2"]),
    ("检索增强生成", ["检索", "索增", "增强", "强生", "生成"]),
    ("RAG（检索）与 LLM", ["rag", "检索", "与", "llm"]),
    ("東京タワー", ["東京", "京タ", "タワ", "ワー"]),
    ("한국어 문장", ["한국", "국어", "문장"]),
    ("Ünïcödé ÉTÉ", ["ünïcödé", "été"]),
    ("", []),
])
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


def test_words_are_found_and_ties_keep_chunk_order():
    chunks = ["the cat sat", "a dog barked", "the cat and the dog", "nothing here"]
    bm25 = BM25(chunks)
    assert bm25.search(["barked"], 1) == [[1]]
    assert bm25.search(["cat"], 2) == [[0, 2]]               # the shorter chunk first
    assert bm25.search(["zebra"], 3) == [[0, 1, 2]]          # no known word: chunk order
    assert bm25.search(["!!!"], 10) == [[0, 1, 2, 3]]        # k beyond the chunks
    twins = BM25(["same words", "same words", "other"])
    assert twins.search(["same"], 2) == [[0, 1]]             # equal scores: chunk order


def test_chinese_question_finds_its_chunk_through_bigrams():
    chunks = ["组件的生命周期钩子在挂载之后调用。", "路由守卫可以拦截导航。",
              "响应式数据会自动更新视图。"]
    assert BM25(chunks).search(["如何拦截路由导航？", "生命周期钩子什么时候调用"], 1) == [[1], [0]]


def plain_bm25(chunks: list[list[str]], query: list[str], k1=1.5, b=0.75) -> list[float]:
    """Okapi BM25 as Lucene scores it: idf = ln(1 + (N - df + 0.5) / (df + 0.5))."""
    count = len(chunks)
    average = sum(map(len, chunks)) / count
    frequency = Counter(token for chunk in chunks for token in set(chunk))
    scores = []
    for chunk in chunks:
        terms = Counter(chunk)
        score = 0.0
        for token in query:
            if terms[token]:
                idf = math.log(1 + (count - frequency[token] + 0.5) / (frequency[token] + 0.5))
                tf = terms[token]
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(chunk) / average))
        scores.append(score)
    return scores


def test_rankings_equal_plain_bm25_on_the_shared_questions():
    texts = [chunk.text for path in sorted((EVAL / "docs").glob("*.md"))
             for chunk in chunkd.split_text(path.read_text(encoding="utf-8"), 400, 0)]
    questions = [json.loads(line)["question"]
                 for line in (EVAL / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    found = BM25(texts).search(questions, 5)
    tokens = [tokenize(text) for text in texts]
    compared = 0
    for question, best in zip(questions, found):
        scores = plain_bm25(tokens, tokenize(question))
        expected = sorted(range(len(texts)), key=lambda number: (-scores[number], number))
        # bm25s scores in float32: where the plain scores at the cut are near-ties,
        # the order may differ legitimately; compare the rest
        cut = [scores[number] for number in expected[:6]]
        if min(a - b for a, b in zip(cut, cut[1:])) > 1e-4 * cut[0]:
            assert best == expected[:5], question
            compared += 1
    assert compared > 100
