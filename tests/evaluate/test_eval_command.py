"""``chunkd eval`` end to end, through the installed command, on the shared questions
(../shared/eval: 132 questions over two documents)."""

from __future__ import annotations

import csv
import html.parser
import json
import os
import pathlib
import pty
import re
import shlex
import statistics
import subprocess
import types
import xml.etree.ElementTree as ElementTree

import orjson
import pytest

from command import HANG, chunkd_command, install_command, ndjson, run_chunkd
from span_metrics import plain_ndcg, plain_scores

EVAL = pathlib.Path(__file__).resolve().parent.parent.parent.parent / "shared" / "eval"
DOCS = [str(EVAL / "docs" / "state_of_the_union.md"), str(EVAL / "docs" / "chatlogs.md")]
QUESTIONS = str(EVAL / "questions.jsonl")
METRICS = ("recall", "precision", "iou", "recall_at_k", "mrr", "ndcg")


def evaluate(*options: str, questions: str = QUESTIONS, docs: list[str] = DOCS):
    return run_chunkd("eval", *docs, "--questions", questions, *options)


def records(*options: str, **where) -> list[dict]:
    result = evaluate(*options, "--format", "ndjson", **where)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stderr == b""
    return ndjson(result.stdout)


def shared_questions() -> list[dict]:
    return [json.loads(line) for line in open(QUESTIONS, encoding="utf-8")]


def texts() -> dict[str, str]:
    return {os.path.basename(path): open(path, encoding="utf-8").read() for path in DOCS}


def test_grid_records_are_sane_ranked_and_identical_between_runs():
    options = ("--chars", "300,1000", "--tokens", "128", "--overlap", "0,15%", "--format",
               "ndjson", "-k", "5")
    first, second = evaluate(*options), evaluate(*options)
    assert first.returncode == 0, first.stderr.decode()
    assert first.stdout == second.stdout
    found = ndjson(first.stdout)
    assert len(found) == 6
    assert {(r["unit"], r["size"], r["overlap"]) for r in found} == {
        ("chars", 300, 0), ("chars", 300, 45), ("chars", 1000, 0), ("chars", 1000, 150),
        ("tokens", 128, 0), ("tokens", 128, 19)}
    assert [r["iou"] for r in found] == sorted((r["iou"] for r in found), reverse=True)
    for record in found:
        assert record["strategy"] == "recursive" and record["k"] == 5
        assert record["questions"] == 132
        for metric in METRICS:
            assert 0 <= record[metric] <= 1 and record[f"{metric}_std"] >= 0
            # the sample standard deviation over the root of the count: pstdev / √(n - 1)
            assert record[f"{metric}_se"] == pytest.approx(record[f"{metric}_std"] / 131 ** 0.5)
        assert record["chunks"] > 0 and record["tokens"] > 0
        documents = record["documents"]
        assert [d["doc"] for d in documents] == DOCS
        assert [d["questions"] for d in documents] == [76, 56]
        assert sum(d["chunks"] for d in documents) == record["chunks"]
        assert sum(d["tokens"] for d in documents) == record["tokens"]
        for metric in METRICS:  # the overall mean weighs each document by its questions
            assert record[metric] == pytest.approx(
                sum(d[metric] * d["questions"] for d in documents) / 132)


def filter_chunks(*options: str) -> dict[str, list[tuple[int, int]]]:
    """Each document's chunk ranges, as the filter (``chunkd``) cuts them."""
    result = run_chunkd(*options, *DOCS)
    assert result.returncode == 0
    chunks: dict[str, list[tuple[int, int]]] = {}
    for record in ndjson(result.stdout):
        chunks.setdefault(os.path.basename(record["doc"]), []).append(
            (record["start"], record["end"]))
    return chunks


def test_retrieving_every_chunk_finds_every_reference():
    """With k the number of chunks, the union holds every reference but the white
    space that the chunker strips between two chunks: recall@k is 1, and recall and
    precision are what the filter's chunks give, computed here on sets of code points."""
    chunks = filter_chunks("--chars", "500", "--overlap", "0")
    every = sum(map(len, chunks.values()))
    [record] = records("--chars", "500", "--overlap", "0", "-k", str(every))
    assert record["chunks"] == every
    documents, cost = texts(), sum(end - start for ranges in chunks.values()
                                   for start, end in ranges)
    recalls, precisions = [], []
    for question in shared_questions():
        wanted = {point for ref in question["references"]
                  for point in range(ref["start"], ref["end"])}
        held = {point for start, end in chunks[question["doc"]] for point in range(start, end)}
        assert all(documents[question["doc"]][point].isspace() for point in wanted - held)
        recalls.append(len(wanted & held) / len(wanted))
        precisions.append(len(wanted & held) / cost)
    assert record["recall_at_k"] == 1 and record["recall_at_k_std"] == 0
    assert record["recall"] == pytest.approx(statistics.fmean(recalls), abs=1e-12)
    assert record["recall"] > 0.999
    assert record["precision"] == pytest.approx(statistics.fmean(precisions), abs=1e-12)


def test_ndcg_ranks_settings_and_counts_relevant_chunks_not_retrieved():
    """nDCG@5 of BM25's ranking of the filter's chunks, computed here from its
    definition (the ideal counts every chunk of the question's document that touches a
    reference, retrieved or not), per document and overall; --rank ndcg ranks by it.
    The span metrics stay those of each chunk's own range."""
    from chunkd.evaluate.retrieval import BM25

    found = records("--chars", "300,800", "--overlap", "0", "-k", "5", "--rank", "ndcg")
    assert [r["ndcg"] for r in found] == sorted((r["ndcg"] for r in found), reverse=True)
    assert found[1]["vs_best"] == pytest.approx(found[0]["ndcg"] - found[1]["ndcg"])
    for record in found:
        result = run_chunkd("--chars", str(record["size"]), "--overlap", "0", *DOCS)
        chunks = [(os.path.basename(chunk["doc"]), types.SimpleNamespace(**chunk))
                  for chunk in ndjson(result.stdout)]
        questions = shared_questions()
        ranked = BM25([chunk.text for _, chunk in chunks]).search(
            [question["question"] for question in questions], 5)
        assert (record["recall"], record["precision"], record["iou"]) == pytest.approx(
            tuple(plain_scores(questions, chunks, ranked)), abs=1e-12)
        each = plain_ndcg(questions, chunks, ranked)
        assert record["ndcg"] == pytest.approx(statistics.fmean(each), abs=1e-12)
        for document in record["documents"]:
            mine = [value for value, question in zip(each, questions)
                    if question["doc"] == os.path.basename(document["doc"])]
            assert document["ndcg"] == pytest.approx(statistics.fmean(mine), abs=1e-12)
    table = evaluate("--chars", "300,800", "--overlap", "0", "-k", "5", "--rank", "ndcg")
    lines = table.stdout.decode().splitlines()
    assert "ranked by nDCG@k" in lines[0]
    header = lines[2].split()
    assert header[header.index("MRR") + 1] == "nDCG@5" and header[-1] == "(nDCG@5)"
    assert lines[-1].startswith(f"best by nDCG@k: --strategy recursive --chars "
                                f"{found[0]['size']} ")


def test_whole_document_chunks_have_recall_1_and_low_precision():
    [record] = records("--chars", "1000000", "--overlap", "0", "-k", "5")
    assert record["chunks"] == 2
    assert record["recall"] == 1 and record["recall_at_k"] == 1 and record["recall_std"] == 0
    both = sum(len(text.strip()) for text in texts().values())  # k = 5 takes both
    expected = statistics.fmean(sum(ref["end"] - ref["start"] for ref in q["references"]) / both
                                for q in shared_questions())
    assert record["precision"] == pytest.approx(expected, abs=1e-12)
    assert record["precision"] < 0.01


def test_table_ranks_by_the_chosen_metric_and_names_the_best_setting():
    result = evaluate("--chars", "200,800", "--overlap", "0", "--rank", "recall", "-k", "5")
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert lines[0].startswith("132 questions over 2 documents, BM25 top 5, ranked by recall "
                               "(mean ±standard error over the questions")
    rows = [line.split() for line in lines if line.split()[1:2] == ["recursive"]]
    assert [row[3] for row in rows] == ["800", "200"]
    assert lines[-1].startswith("best by recall: --strategy recursive --chars 800 --overlap 0")
    by_iou = evaluate("--chars", "200,800", "--overlap", "0", "-k", "5").stdout.decode()
    assert by_iou.splitlines()[-1].startswith("best by IoU: --strategy recursive --chars 200")


def test_by_default_settings_compete_within_a_budget_and_the_noise_is_said():
    """Recall within 1,000 tokens by default; a setting that scores the same as the best
    on every question is marked within the noise, and the best line says the questions
    do not settle the choice; one far behind is not."""
    lines = evaluate("--chars", "1000000,2000000", "--overlap", "0").stdout.decode().splitlines()
    assert lines[0].startswith("132 questions over 2 documents, BM25 the best chunks within "
                               "1,000 tokens, ranked by recall (mean ±standard error over "
                               "the questions; ≈: within 1.96 standard errors of the best")
    rows = [line.split() for line in lines if line.split()[1:2] == ["recursive"]]
    assert rows[0][-1] == "best" and rows[1][-3:] == ["≈", "+0.000", "±0.000"]
    assert "within the noise of 1 other setting (≈), so these questions do not settle the " \
           "choice" in lines[-1]
    [best, whole] = records("--chars", "300,1000000", "--overlap", "0")
    assert (best["size"], best["budget"], best["vs_best"], best["within_noise"]) == (
        300, 1000, 0, True)
    # Whole documents do not fit the budget: nothing is retrieved.
    assert whole["recall"] == 0 and not whole["within_noise"]
    assert whole["vs_best"] == pytest.approx(best["recall"])
    assert whole["vs_best_se"] == pytest.approx(best["recall_std"] / 131 ** 0.5)
    table = evaluate("--chars", "300,1000000", "--overlap", "0").stdout.decode()
    assert table.splitlines()[-1].endswith("; ahead of every other setting by more than the noise")


def test_default_grid():
    found = records()
    assert sorted((r["size"], r["overlap"]) for r in found) == sorted(
        [(size, 0) for size in (64, 128, 256, 512, 1024, 2048)]
        + [(size, size * 15 // 100) for size in (64, 128, 256, 512, 1024, 2048)])
    assert {r["unit"] for r in found} == {"tokens"}


def test_csv_layout_and_text_references_give_the_same_results(tmp_path):
    """The public evaluation's CSV (corpus_id is the file name without suffix), and
    references given by their text alone, are read to the same questions."""
    questions = shared_questions()
    public = tmp_path / "questions_df.csv"
    with open(public, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["question", "references", "corpus_id"])
        for q in questions:
            writer.writerow([q["question"], json.dumps(
                [{"content": r["text"], "start_index": r["start"], "end_index": r["end"]}
                 for r in q["references"]]), q["doc"].removesuffix(".md")])
    by_text = tmp_path / "by_text.jsonl"
    unique = [q for q in questions  # a text found twice is refused: leave those out here
              if all(texts()[q["doc"]].count(r["text"]) == 1 for r in q["references"])]
    assert len(unique) > 120
    by_text.write_text("".join(json.dumps({**q, "references": [{"text": r["text"]} for r in
                                                               q["references"]]}) + "\n"
                               for q in unique), encoding="utf-8")
    offsets = tmp_path / "offsets.jsonl"
    offsets.write_text("".join(json.dumps(q) + "\n" for q in unique), encoding="utf-8")
    options = ("--chars", "400", "--overlap", "0,20%")
    assert records(*options, questions=str(public)) == records(*options)
    assert records(*options, questions=str(by_text)) == records(*options,
                                                                questions=str(offsets))


def test_ndjson_documents(tmp_path):
    lines = tmp_path / "docs.ndjson"
    lines.write_bytes(b"".join(orjson.dumps({"id": name, "text": text}) + b"\n"
                               for name, text in texts().items()))
    from_lines = records("--input", "ndjson", "--chars", "600", docs=[str(lines)])
    from_files = records("--chars", "600")
    for record in from_lines + from_files:
        record["documents"] = [{**d, "doc": os.path.basename(d["doc"])}
                               for d in record["documents"]]
    assert from_lines == from_files


BAD_LINES = {
    '{"question": "Where?", "doc": "missing.md", "references": [{"start": 0, "end": 5}]}':
        "unknown document 'missing.md'",
    '{"question": "Out?", "doc": "chatlogs.md", "references": [{"start": 39990, "end": 40010}]}':
        "reference 1: offsets 39990..40010 out of range: ",
    '{"question": "Empty?", "doc": "chatlogs.md", "references": [{"start": 10, "end": 10}]}':
        "reference 1: offsets 10..10 out of range",
    '{"question": "Absent?", "doc": "state_of_the_union", "references": [{"text": "no such"}]}':
        "reference 1: text not found in ",
    '{"question": "Twice?", "doc": "state_of_the_union.md", "references": [{"text": "Good "}]}':
        "reference 1: text found more than once in ",
    '{"question": "Odd?", "doc": "chatlogs", "references": [{"start": 0, "end": 3, "text": "a"}]}':
        "reference 1: the text at 0..3 in ",
    '{"question": "broken", "doc": ':
        "malformed JSON at column ",
    '[1, 2]':
        "expected a JSON object",
    '{"question": "None?", "doc": "chatlogs.md"}':
        "expected a 'references' field holding a non-empty list",
    '{"question": "Half?", "doc": "chatlogs.md", "references": [{"start": 3}]}':
        "reference 1: 'start' and 'end' must both be whole numbers",
}


def test_bad_questions_are_reported_one_line_each_and_the_rest_evaluated(tmp_path):
    good = shared_questions()[:3] + shared_questions()[-2:]
    lines = [json.dumps(good[0]), *BAD_LINES, *map(json.dumps, good[1:])]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = evaluate("--chars", "500", "--overlap", "0", "--format", "ndjson",
                      questions=str(path))
    assert result.returncode == 1
    errors = result.stderr.decode().splitlines()
    assert len(errors) == len(BAD_LINES)
    for number, (error, expected) in enumerate(zip(errors, BAD_LINES.values()), start=2):
        assert error.startswith(f"chunkd eval: {path}: line {number}"), error
        assert expected in error, error
    [record] = ndjson(result.stdout)
    assert record["questions"] == len(good)
    [alone] = records("--chars", "500", "--overlap", "0",
                      questions=str(_write(tmp_path / "good.jsonl", good)))
    assert record == alone


def _write(path: pathlib.Path, questions: list[dict]) -> pathlib.Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    return path


def test_unreadable_document_and_questions_file(tmp_path):
    result = evaluate("--chars", "500", "--overlap", "0", "--format", "ndjson",
                      docs=[DOCS[0], str(tmp_path / "chatlogs.md")])
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        f"chunkd eval: {tmp_path / 'chatlogs.md'}: No such file or directory",
        f"chunkd eval: {tmp_path / 'chatlogs.md'}: 56 questions left out "
        "(the document could not be read)"]
    [record] = ndjson(result.stdout)
    assert record["questions"] == 76
    result = evaluate("--chars", "500", questions=str(tmp_path / "none.jsonl"))
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.decode().splitlines() == [
        f"chunkd eval: {tmp_path / 'none.jsonl'}: No such file or directory",
        "chunkd eval: no question to evaluate"]


def test_grid_combinations_that_cannot_work_are_left_out():
    result = evaluate("--chars", "100,1000", "--overlap", "0,500", "--format", "ndjson")
    assert result.returncode == 1
    assert result.stderr.decode() == (
        "chunkd eval: left out --strategy recursive --chars 100 --overlap 500: "
        "--overlap 500 is not smaller than the size (100 chars); write --overlap 99 or less, "
        "or a larger --chars\n")
    assert sorted((r["size"], r["overlap"]) for r in ndjson(result.stdout)) == [
        (100, 0), (1000, 0), (1000, 500)]
    assert len(records("--chars", "1000", "--overlap", "0,0%")) == 1  # the same setting


@pytest.mark.parametrize("options", [("--language", "markdown"), ("--separators", '["\\n", ""]'),
                                     ("--keep-separator", "start"), ("--no-strip",)])
def test_the_other_settings_options_apply_to_every_setting(options):
    """Options that are not grid dimensions shape every setting's chunks, as in the
    filter, and the best line gives them back."""
    evaluated = records("--chars", "300,500", "--overlap", "0", *options)
    for record in evaluated:
        chunks = filter_chunks("--chars", str(record["size"]), "--overlap", "0", *options)
        assert record["chunks"] == sum(len(ranges) for ranges in chunks.values())
    table = evaluate("--chars", "300,500", "--overlap", "0", *options)
    best = table.stdout.decode().splitlines()[-1]
    assert best.startswith("best by recall: --strategy recursive --chars ")
    assert best.split(" (recall")[0].endswith(" --overlap 0 " + shlex.join(options))


@pytest.mark.parametrize("options, message", [
    (("--strategy", "nosuch"), "unknown strategy 'nosuch'"),
    (("--size", "5"), "--size is for the window strategies"),
    (("--chars", "100", "--overlap", "100"), "no setting of the grid can work"),
    (("--chars", "x"), "not a whole number"),
    (("--chart", "chart.txt"), "--chart chart.txt: name a .png, .svg, .html file"),
    (("-k", "0"), "-k must be at least 1"),
    (("--parent-tokens", "1024"), "does not evaluate parent/child chunking"),
])
def test_usage_errors(options, message):
    result = evaluate(*options)
    assert result.returncode == 2
    assert message in result.stderr.decode()
    assert b"Traceback" not in result.stderr and result.stdout == b""


def test_documents_must_be_named_once():
    result = run_chunkd("eval", "--questions", QUESTIONS, input=b"text")
    assert result.returncode == 2
    assert "give the documents as FILEs" in result.stderr.decode()
    result = evaluate(docs=[DOCS[0], DOCS[1], DOCS[0]])
    assert result.returncode == 2
    assert f"{DOCS[0]} is given twice" in result.stderr.decode()


class Page(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.links += [value for name, value in attrs if name in ("src", "href") and value]


@pytest.mark.slow
def test_charts(tmp_path):
    options = ("--chars", "300,600", "--tokens", "100", "--overlap", "0,15%")
    drawn = {}
    for suffix in ("png", "svg", "html"):
        path = tmp_path / f"chart.{suffix}"
        result = evaluate(*options, "--chart", str(path))
        assert result.returncode == 0, result.stderr.decode()
        drawn[suffix] = path.read_bytes()
    assert drawn["png"].startswith(b"\x89PNG\r\n\x1a\n")
    svg = ElementTree.fromstring(drawn["svg"])
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    text = "".join(svg.itertext())
    assert "recursive, overlap 15%" in text and "size (tokens)" in text
    page_text = drawn["html"].decode("utf-8")  # the same chart, drawn by another run
    svg_text = drawn["svg"].decode("utf-8")
    assert svg_text[svg_text.index("<svg"):] in page_text
    page = Page()
    page.feed(page_text)
    assert "svg" in page.tags and "script" not in page.tags
    assert all(link.startswith("#") for link in page.links)  # self-contained
    assert page.tags.count("tr") == 1 + 6 + 1 + 6 * 2  # table, then per document
    assert "best by recall: --strategy recursive" in page_text  # at the default budget


def test_missing_extra_is_named_with_its_install_command(tmp_path):
    (tmp_path / "bm25s.py").write_text('raise ImportError("No module named \'bm25s\'")\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = subprocess.run([chunkd_command(), "eval", *DOCS, "--questions", QUESTIONS],
                            capture_output=True, env=env, timeout=HANG)
    assert result.returncode == 2
    assert result.stderr.decode() == ("chunkd eval: needs the eval extra (bm25s is not "
                                      f"installed): {install_command('eval')}\n")
    helped = subprocess.run([chunkd_command(), "eval", "--help"], capture_output=True,
                            env=env, timeout=HANG)
    assert helped.returncode == 0
    assert install_command("eval").encode() in b" ".join(helped.stdout.split())
    assert b"--overlap 0,15%." in b" ".join(helped.stdout.split())  # no "%%"
    assert b"chunkd eval:" in run_chunkd("--help").stdout  # listed among the commands


def test_progress_bar_only_on_a_terminal():
    command = [chunkd_command(), "eval", *DOCS, "--questions", QUESTIONS,
               "--chars", "500,1000", "--overlap", "0", "--format", "ndjson"]
    pid, terminal = pty.fork()
    if pid == 0:  # the child: stdout and stderr are the terminal
        os.execv(command[0], command)
    seen = b""
    while True:
        try:
            data = os.read(terminal, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        seen += data
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"chunkd eval: [" in seen and b"1/2 --strategy recursive --chars 1000" in seen
    assert b"\r\x1b[K" in seen  # erased before the results
    assert evaluate("--chars", "500,1000", "--overlap", "0").stderr == b""


def test_stdout_that_cannot_be_written():
    with open("/dev/full", "wb") as full:
        result = subprocess.run([chunkd_command(), "eval", *DOCS, "--questions", QUESTIONS,
                                 "--chars", "1000"], stdout=full, stderr=subprocess.PIPE,
                                timeout=HANG)
    assert result.returncode == 1
    assert result.stderr == b"chunkd eval: stdout: No space left on device\n"


# --- strategies from elsewhere: a window strategy registered here, as a branch would ----

class WordWindows:
    """Windows of ``size`` words, ``overlap`` shared: a stand-in window strategy."""

    def __init__(self, size: int, overlap: int) -> None:
        self.size, self.overlap, self.text = size, overlap, ""

    def feed(self, text: str) -> list:
        self.text += text
        return []

    def finish(self) -> list:
        from chunkd.model.chunk import Chunk

        words = [match.span() for match in re.finditer(r"\S+", self.text)]
        chunks = []
        for first in range(0, len(words), self.size - self.overlap):
            window = words[first:first + self.size]
            start, end = window[0][0], window[-1][1]
            chunks.append(Chunk(len(chunks), start, end, len(window), self.text[start:end]))
            if first + self.size >= len(words):
                break
        self.text = ""
        return chunks


def test_a_window_strategy_from_the_registry_joins_the_grid(monkeypatch, capsysbinary, tmp_path):
    from chunkd.evaluate.command import main
    from chunkd.strategies import REGISTRY, Strategy

    class Words(Strategy):
        name, units, default_size, window = "test-words", ("words",), 50, True

        @classmethod
        def splitter(cls, settings):
            return WordWindows(settings.size, settings.overlap)

    monkeypatch.setitem(REGISTRY, "test-words", Words)
    chart = tmp_path / "chart.svg"
    status = main([*DOCS, "--questions", QUESTIONS, "--strategy", "recursive,test-words",
                   "--chars", "800", "--size", "100,200", "--overlap", "0,10%",
                   "--format", "ndjson", "--chart", str(chart), "-q"])
    assert status == 0
    found = ndjson(capsysbinary.readouterr().out)
    assert sorted((r["strategy"], r["unit"], r["size"], r["overlap"]) for r in found) == [
        ("recursive", "chars", 800, 0), ("recursive", "chars", 800, 80),
        ("test-words", "words", 100, 0), ("test-words", "words", 100, 10),
        ("test-words", "words", 200, 0), ("test-words", "words", 200, 20)]
    assert all(0 < r["recall"] <= 1 for r in found)
    assert "size (words)" in "".join(ElementTree.parse(chart).getroot().itertext())
    assert main([*DOCS, "--questions", QUESTIONS, "--strategy", "test-words", "-q",
                 "--format", "ndjson"]) == 0  # the strategy's default size
    assert {(r["size"], r["overlap"]) for r in ndjson(capsysbinary.readouterr().out)} == {
        (50, 0), (50, 7)}
    with pytest.raises(SystemExit) as usage:
        main([*DOCS, "--questions", QUESTIONS, "--strategy", "test-words", "--chars", "500"])
    assert usage.value.code == 2
    assert b"--chars is for the recursive strategies" in capsysbinary.readouterr().err


def test_the_readme_example_prints_what_docs_eval_shows():
    """The README's eval command prints the table docs/eval.md opens with."""
    root = pathlib.Path(__file__).resolve().parent.parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Measuring retrieval: `chunkd eval`"):]
    command = re.findall(r"```\n(.*?)```", section, re.S)[0]
    manual = (root / "docs" / "eval.md").read_text(encoding="utf-8")
    shown = re.findall(r"```\n(.*?)```", manual, re.S)[0]
    env = {**os.environ, "PATH": os.path.dirname(chunkd_command()) + os.pathsep
           + os.environ["PATH"]}
    result = subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True,
                            timeout=HANG)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode("utf-8") == shown


def test_json_and_csv_hold_the_ndjson_records():
    options = ("--chars", "400,800", "--overlap", "0")
    lines = records(*options)
    as_json = evaluate(*options, "--format", "json")
    assert json.loads(as_json.stdout) == lines
    as_csv = evaluate(*options, "--format", "csv")
    rows = list(csv.DictReader(as_csv.stdout.decode().splitlines()))
    assert len(rows) == len(lines) * 3
    for number, record in enumerate(lines):
        setting, *documents = rows[3 * number: 3 * number + 3]
        parts = [(setting, {**record, "doc": ""})] + [
            (row, {**record, **document}) for row, document in zip(documents,
                                                                     record["documents"])]
        for row, expected in parts:
            assert row["doc"] == expected["doc"]
            for key, value in expected.items():
                if key not in ("documents", "doc"):
                    assert row[key] == str(value), key
