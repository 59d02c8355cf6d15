"""``chunkd eval`` on unusual input, through the installed command: a corpus with no
word to index, question CSV files with long fields or an unbalanced quote."""

from __future__ import annotations

import csv
import io
import json

import orjson

from command import run_chunkd

MARKS = "!!! ??? ... 🎉🎉 ;;;"  # no letter or digit: not one word for BM25


def evaluate(tmp_path, document: str, questions: str, name: str, *options: str):
    """``chunkd eval`` of the document ``marks.txt`` on the questions file ``name``."""
    (tmp_path / "marks.txt").write_text(document, encoding="utf-8")
    (tmp_path / name).write_text(questions, encoding="utf-8", newline="")
    return run_chunkd("eval", str(tmp_path / "marks.txt"), "--questions",
                      str(tmp_path / name), "--chars", "3", "--overlap", "0", "-k", "1",
                      "--format", "json", *options)


def test_a_corpus_without_words_retrieves_the_first_chunks_as_ties(tmp_path):
    """BM25 has no word to index: every chunk scores 0 for every question, and equal
    scores keep the chunks' order (as for a question whose words no chunk has), so
    with -k 1 each question gets the first chunk."""
    questions = "".join(json.dumps({"question": question, "doc": "marks",
                                    "references": [{"text": text}]}) + "\n"
                        for question, text in (("Bangs?", "!!!"), ("Why?", "???")))
    result = evaluate(tmp_path, MARKS, questions, "q.jsonl")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stderr == b""
    [record] = orjson.loads(result.stdout)
    assert (record["chunks"], record["recall"], record["recall_at_k"], record["mrr"]) == (
        5, 0.5, 0.5, 0.5)


def _csv(rows: list[list[str]]) -> str:
    """The public layout's CSV of ``rows``, with its header."""
    out = io.StringIO()
    csv.writer(out).writerows([["question", "references", "corpus_id"], *rows])
    return out.getvalue()


def _references(*texts: str) -> str:
    return json.dumps([{"content": text} for text in texts])


def test_a_csv_field_longer_than_128_kib_is_read(tmp_path):
    """Python's csv stops at 128 KiB a field by default; the file is in memory anyway."""
    long = "word " * 40_000  # 200 kB
    questions = _csv([["Where are the words?", _references(long.strip()), "marks"]])
    result = evaluate(tmp_path, MARKS + "\n" + long, questions, "q.csv")
    assert result.returncode == 0, result.stderr.decode()
    [record] = orjson.loads(result.stdout)
    assert record["questions"] == 1


def test_an_unbalanced_quote_in_a_csv_is_one_line_naming_where_its_row_starts(tmp_path):
    """The question before it is evaluated; the quote would take the rest of the file
    (here more than 128 KiB) into one field."""
    questions = (_csv([["Bangs?", _references("!!!"), "marks"], []])
                 + '"Why?,"[]",marks\n' + "x" * (140 * 1024) + "\n"
                 + _csv([["Dots?", _references("..."), "marks"]]).split("\r\n", 1)[1])
    result = evaluate(tmp_path, MARKS, questions, "q.csv")
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        f"chunkd eval: {tmp_path / 'q.csv'}: line 4: malformed CSV (',' expected after "
        "'\"'): is a quote unbalanced? The lines after it were not read"]
    [record] = orjson.loads(result.stdout)
    assert record["questions"] == 1


def test_a_quote_never_closed_in_a_csv_is_one_line(tmp_path):
    questions = _csv([["Bangs?", _references("!!!"), "marks"]]) + '"Why?,[],marks\n' + "x" * 10
    result = evaluate(tmp_path, MARKS, questions, "q.csv")
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        f"chunkd eval: {tmp_path / 'q.csv'}: line 3: malformed CSV (unexpected end of "
        "data): is a quote unbalanced? The lines after it were not read"]
    [record] = orjson.loads(result.stdout)
    assert record["questions"] == 1
