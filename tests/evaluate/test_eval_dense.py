"""``chunkd eval --retriever dense|hybrid``, the prefixes and ``--budget``, against a
plain re-implementation written here from the contract: the real model's vectors
(sentence-transformers called directly), cosine similarity, the top k (or the best
chunks that fit the budget), reciprocal rank fusion with a plain BM25, and the span
metrics and nDCG over sets of code points."""

from __future__ import annotations

import json
import pathlib

import numpy
import orjson
import pytest

import chunkd
from span_metrics import plain_ndcg, plain_scores
from chunkd.evaluate.retrieval import Hybrid
from chunkd.embeddings.models import Cached, FunctionEmbedder

EVAL = pathlib.Path(__file__).resolve().parent.parent.parent.parent / "shared" / "eval"
DOCS = [EVAL / "docs" / "state_of_the_union.md", EVAL / "docs" / "chatlogs.md"]
QUESTIONS = EVAL / "questions.jsonl"


def in_process_eval(capsysbinary, docs, questions, *options):
    from chunkd.evaluate.command import main

    status = main([*map(str, docs), "--questions", str(questions), "--format", "ndjson", "-q",
                   *options])
    assert status == 0
    return [orjson.loads(line) for line in capsysbinary.readouterr().out.splitlines()]


@pytest.fixture(scope="module")
def plain_dense(minilm):
    """The shared questions on one document, its chunks (chunkd's recursive, 200 of the
    model's tokens, which it reads whole), and the cosine similarity of each question to
    each chunk, computed here."""
    folder, model = minilm
    questions = [question for question in map(json.loads, QUESTIONS.read_text().splitlines())
                 if question["doc"] == DOCS[0].name]
    chunks = [(DOCS[0].name, chunk) for chunk in chunkd.split_text(
        DOCS[0].read_text(encoding="utf-8"), 200, 0, unit="tokens", tokenizer=folder,
        count_tokens=True)]
    encode = model.inner.model.encode
    vectors = encode([chunk.text for _, chunk in chunks])
    asked = encode(["Q: " + question["question"] for question in questions])
    vectors = vectors / numpy.linalg.norm(vectors, axis=1, keepdims=True)
    asked = asked / numpy.linalg.norm(asked, axis=1, keepdims=True)
    return questions, chunks, asked @ vectors.T


@pytest.mark.slow
@pytest.mark.parametrize("depth", [("-k", "5"), ("--budget", "600")])
def test_dense_equals_a_plain_reimplementation(minilm, plain_dense, tmp_path, capsysbinary,
                                               depth):
    folder, _ = minilm
    questions, chunks, similarity = plain_dense
    asked = tmp_path / "questions.jsonl"
    asked.write_text("".join(json.dumps(question) + "\n" for question in questions))
    [record] = in_process_eval(capsysbinary, DOCS[:1], asked, "--retriever", "dense",
                               "--embed", folder, "--tokens", "200", "--overlap", "0",
                               "--query-prefix", "Q: ", *depth)
    ranked = []
    for row in similarity:
        order = sorted(range(len(chunks)), key=lambda n: -row[n])
        if depth[0] == "-k":
            ranked.append(order[:5])
            continue
        kept, spent = [], 0
        for number in order:
            if spent + chunks[number][1].tokens > 600:
                break
            kept.append(number)
            spent += chunks[number][1].tokens
        ranked.append(kept)
    recall, precision, iou = plain_scores(questions, chunks, ranked)
    assert record["retriever"] == "dense" and record["retriever_model"].startswith("model@")
    assert (record["recall"], record["precision"], record["iou"]) == pytest.approx(
        (recall, precision, iou), abs=1e-9)
    assert record["ndcg"] == pytest.approx(numpy.mean(plain_ndcg(questions, chunks, ranked)),
                                           abs=1e-9)
    assert record.get("budget") == (600 if depth[0] == "--budget" else None)


def test_hybrid_fuses_bm25_and_dense_by_reciprocal_rank():
    """On chunks where BM25 and a known embedding disagree, the fused order is the
    plain reciprocal-rank sum over both full rankings."""
    chunks = ["apples and pears", "pears pears pears", "bananas", "apples apples",
              "cherries and apples"]
    directions = {"apples and pears": [1, 0], "pears pears pears": [0, 1], "bananas": [1, 1],
                  "apples apples": [-1, 0], "cherries and apples": [1, 0.2],
                  "apples": [0.6, 0.8]}
    model = Cached(FunctionEmbedder(lambda texts: [directions[t] for t in texts], name="toy"))
    [fused] = Hybrid(chunks, model).search(["apples"], 5)
    bm25 = [3, 0, 4, 1, 2]       # "apples" twice in the shortest chunk first
    vector = numpy.array([0.6, 0.8])
    cosine = [numpy.dot(vector, d) / numpy.linalg.norm(d) for d in
              (numpy.array(directions[text], dtype=float) for text in chunks)]
    dense = sorted(range(5), key=lambda n: -cosine[n])
    score = {n: 1 / (60 + bm25.index(n) + 1) + 1 / (60 + dense.index(n) + 1) for n in range(5)}
    assert fused == sorted(range(5), key=lambda n: -score[n])


def test_dense_needs_a_model_and_bm25_takes_no_prefix(capsysbinary):
    from chunkd.evaluate.command import main

    for options, message in ((("--retriever", "dense"), b"--retriever dense needs a model"),
                             (("--query-prefix", "q: "), b"are for --retriever dense or hybrid"),
                             (("--retriever", "hybrid", "--embed", "no/such"),
                              b"--embed no/such: no such model folder")):
        with pytest.raises(SystemExit) as usage:
            main([*map(str, DOCS), "--questions", str(QUESTIONS), *options])
        assert usage.value.code == 2 and message in capsysbinary.readouterr().err
