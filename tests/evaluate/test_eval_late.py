"""``chunkd eval --retriever dense --late``: every setting once with plain vectors and
once with late chunking's, of the same chunks; the late one ranks the chunks by the
cosine of the question's embedding with each chunk's late vector within its document
(``chunkd.embeddings.late``, tested in tests/embeddings/test_late.py), scored here with
the plain span metrics. BM25 has no vectors to make late, and a document prefix is no
part of a document: refused in one line, before the model loads."""

from __future__ import annotations

import json

import numpy
import pytest

import chunkd
from command import run_chunkd
from span_metrics import plain_scores
from test_eval_dense import DOCS, QUESTIONS, in_process_eval

from chunkd.embeddings.late import late_vectors, loaded_late_model


@pytest.mark.slow  # the whole document through the model, and the eval
def test_late_ranks_by_the_late_vectors_of_the_same_chunks(minilm, tmp_path, capsysbinary):
    folder, model = minilm
    text = DOCS[0].read_text(encoding="utf-8")[:6_000]  # its start: seconds, not minutes
    document = tmp_path / DOCS[0].name
    document.write_text(text, encoding="utf-8")
    questions = [question for question in map(json.loads, QUESTIONS.read_text().splitlines())
                 if question["doc"] == DOCS[0].name
                 and all(reference["end"] <= len(text) for reference in question["references"])]
    assert len(questions) >= 5
    asked = tmp_path / "questions.jsonl"
    asked.write_text("".join(json.dumps(question) + "\n" for question in questions))
    records = in_process_eval(capsysbinary, [document], asked, "--retriever", "dense",
                              "--embed", folder, "--late", "--tokens", "200", "--overlap",
                              "0", "-k", "5")
    [late] = [record for record in records if record.get("late")]
    [plain] = [record for record in records if not record.get("late")]
    assert late["chunks"] == plain["chunks"] and late["tokens"] == plain["tokens"]
    chunks = [(DOCS[0].name, chunk) for chunk in chunkd.split_text(
        text, 200, 0, unit="tokens", tokenizer=folder)]
    assert len(chunks) == late["chunks"]
    vectors = late_vectors(loaded_late_model(model), text,
                           [(chunk.start, chunk.end) for _, chunk in chunks])
    questioned = model.embed([question["question"] for question in questions])
    questioned /= numpy.linalg.norm(questioned, axis=1, keepdims=True)
    similarity = questioned @ vectors.T
    ranked = [sorted(range(len(chunks)), key=lambda n: -row[n])[:5] for row in similarity]
    assert (late["recall"], late["precision"], late["iou"]) == pytest.approx(
        plain_scores(questions, chunks, ranked), abs=1e-9)
    assert (late["mrr"], late["recall"]) != (plain["mrr"], plain["recall"])


@pytest.mark.parametrize("options, message", [
    ((), "--late is for --retriever dense or hybrid: it makes the chunks' vectors, which "
         "BM25 has none of"),
    (("--retriever", "dense", "--embed", "model", "--document-prefix", "passage: "),
     "--late embeds each chunk within its document's text, which --document-prefix's "
     "prefix is not part of: give one")])
def test_what_late_vectors_cannot_be_is_refused(options, message):
    made = run_chunkd("eval", "--questions", str(QUESTIONS), "--late", *options,
                      *map(str, DOCS))
    assert made.returncode == 2
    assert made.stderr.decode().splitlines() == [f"chunkd eval: error: {message}"]
