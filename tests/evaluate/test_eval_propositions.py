"""``chunkd eval --strategy propositions``, against a chat server scripted to answer each
passage's sentences verbatim, alternate ones grouped together (so a chunk's sources are
exact, and apart): each chunk is scored by its propositions' spans, not by its extent,
computed here on sets of code points from the filter's records; what the LLM calls
cost is said after the scores."""

from __future__ import annotations

import json
import math
import re
import statistics

import pytest
from chat_server import serving
from command import ndjson, run_chunkd
from test_propositions import answer

from chunkd.evaluate.retrieval import BM25

#: Paragraphs of four sentences, each a passage at --chars 200.
PARAGRAPHS = [
    "Otters hold hands while they sleep. Their fur is the densest of any animal. "
    "Sea otters use stones to crack shells. A group of otters is called a raft.",
    "Volcanoes form where plates pull apart. Basalt cools from runny lava. "
    "Ash clouds can ground aircraft for days. Pumice is light enough to float.",
    "Bread rises because yeast makes gas. Salt slows the yeast down. "
    "A hot oven sets the crust quickly. Sourdough keeps a starter alive.",
]
DOCUMENT = "\n\n".join(PARAGRAPHS) + "\n"
#: Each question and the sentence that answers it.
QUESTIONS = {
    "What do sea otters crack shells with?": "Sea otters use stones to crack shells.",
    "Which animal has the densest fur?": "Their fur is the densest of any animal.",
    "Why can ash clouds ground aircraft?": "Ash clouds can ground aircraft for days.",
    "Does pumice float?": "Pumice is light enough to float.",
    "What does salt do to yeast in bread?": "Salt slows the yeast down.",
    "How does sourdough keep its starter?": "Sourdough keeps a starter alive.",
}
K = 2


def alternate(body: dict, prompt: str) -> str:
    """The passage's sentences as propositions: the 1st and 3rd in one group, the 2nd and
    4th in another."""
    sentences = re.findall(r"[^.\s][^.]*\.", prompt.partition("Content:\n")[2])
    return answer(("odd", sentences[0::2]), ("even", sentences[1::2]))


def stands_for(record: dict) -> set[int]:
    return {point for item in record["propositions"] if item["start"] is not None
            for point in range(item["start"], item["end"])}


def extent(record: dict) -> set[int]:
    return set(range(record["start"], record["end"]))


def plain(wanted: set[int], retrieved: list[dict], chunks: list[dict],
          covers) -> tuple[float, ...]:
    """recall, precision, IoU, recall@k, MRR and nDCG@k (one document: every chunk is of
    it), a chunk being the code points ``covers`` gives."""
    found = wanted & set().union(*map(covers, retrieved))
    cost = sum(len(covers(record)) for record in retrieved)
    relevant = [bool(covers(record) & wanted) for record in retrieved]
    first = relevant.index(True) + 1 if any(relevant) else None
    dcg = sum(1 / math.log2(rank + 1) for rank, hit in enumerate(relevant, 1) if hit)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(
        len(retrieved), sum(1 for chunk in chunks if covers(chunk) & wanted)) + 1))
    return (len(found) / len(wanted), len(found) / cost,
            len(found) / (cost + len(wanted - found)),
            float(all(DOCUMENT[point].isspace() for point in wanted - found)),
            1 / first if first else 0.0, dcg / ideal if ideal else 0.0)


def test_propositions_are_scored_by_their_spans_and_their_cost_is_said(tmp_path):
    (tmp_path / "notes.md").write_text(DOCUMENT, encoding="utf-8")
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"question": question, "doc": "notes.md",
                                             "references": [{"text": text}]}) + "\n"
                                 for question, text in QUESTIONS.items()), encoding="utf-8")
    with serving(alternate) as model:
        llm = ("--strategy", "propositions", "--chars", "200", "--llm-url", model.url,
               "--llm-model", "toy-llm")
        done = run_chunkd("eval", str(tmp_path / "notes.md"), "--questions", str(questions),
                          "-k", str(K), "--format", "ndjson", *llm)
        assert done.returncode == 0, done.stderr
        asked = len(model.requests)
        chunked = run_chunkd(*llm, str(tmp_path / "notes.md"))
    assert asked == len(PARAGRAPHS)
    [said] = done.stderr.decode().splitlines()  # after the scores, the calls' cost
    assert re.fullmatch(rf"chunkd eval: --strategy propositions: {asked} LLM calls to "
                        rf"{re.escape(model.url)}/v1/chat/completions, [1-9][\d,]* prompt "
                        r"tokens \(\d+ cached\), [1-9][\d,]* completion tokens, \d+\.\d s",
                        said), said
    [record] = ndjson(done.stdout)
    chunks = ndjson(chunked.stdout)
    assert record["strategy"] == "propositions" and record["chunks"] == len(chunks) == 6
    assert all(item["match"] == "exact" for chunk in chunks for item in chunk["propositions"])
    ranked = BM25([chunk["text"] for chunk in chunks]).search(list(QUESTIONS), K)
    by_spans, by_extent = [], []
    for text, numbers in zip(QUESTIONS.values(), ranked):
        start = DOCUMENT.index(text)
        wanted = set(range(start, start + len(text)))
        retrieved = [chunks[number] for number in numbers]
        by_spans.append(plain(wanted, retrieved, chunks, stands_for))
        by_extent.append(plain(wanted, retrieved, chunks, extent))
    assert [record[key] for key in ("recall", "precision", "iou", "recall_at_k", "mrr",
                                    "ndcg")] == pytest.approx(
        [statistics.fmean(column) for column in zip(*by_spans)], abs=1e-12)
    # A statement's span ends at its last word: a sentence's full stop is in none.
    assert record["recall_at_k"] == 0 and 0.9 < record["recall"] < 1
    # A group's extent holds the sentence between its two: scored by it, precision would
    # be lower.
    assert statistics.fmean(scores[1] for scores in by_extent) < record["precision"] - 0.05
