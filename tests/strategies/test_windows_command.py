"""The window strategies through the installed ``chunkd``: the filter with each strategy,
every output format, ``--input ndjson``, ``--jobs``, ``--count-tokens``, bad option
combinations, and ``chunkd watch``."""

from __future__ import annotations

import msgpack
import orjson
import pytest

from command import ndjson, run_chunkd
from oracle import corpus_documents, token_length
from watching import filter_chunks, results
import windows_reference as reference

MARKDOWN = next(p for p in corpus_documents() if p.parent.name == "zh-vuedocs")
SETTINGS = {"graphemes": ("300", "30"), "words": ("50", "10"), "sentences": ("4", "1"),
            "sections": ("2", "1")}


def expected_records(text: str, strategy: str, size: int, overlap: int, doc=None) -> list[dict]:
    """The reference's chunks as records: ``doc``, the fields, the optional fields in
    the documented order, then ``text``."""
    records = []
    for chunk in reference.windows(text, strategy, size, overlap):
        record = {} if doc is None else {"doc": doc}
        record.update((key, chunk[key]) for key in ("index", "start", "end", "length",
                                                    "estimated_tokens"))
        if strategy == "sections":
            record["headings"] = list(chunk["headings"])
        record["text"] = chunk["text"]
        records.append(record)
    return records


@pytest.mark.parametrize("strategy", SETTINGS)
def test_each_strategy_on_a_file(strategy):
    size, overlap = SETTINGS[strategy]
    result = run_chunkd("--strategy", strategy, "--size", size, "--overlap", overlap,
                        str(MARKDOWN))
    assert (result.returncode, result.stderr) == (0, b"")
    records = ndjson(result.stdout)
    text = MARKDOWN.read_text(encoding="utf-8")
    expected = expected_records(text, strategy, int(size), int(overlap), str(MARKDOWN))
    assert records == expected
    assert [list(r) for r in records] == [list(r) for r in expected]   # key order


def test_window_strategies_default_to_no_overlap_and_their_own_size():
    text = " ".join(f"w{n}" for n in range(450))
    records = ndjson(run_chunkd("--strategy", "words", input=text.encode()).stdout)
    assert [r["length"] for r in records] == [200, 200, 50]
    assert records[1]["text"].startswith("w200 ")
    records = ndjson(run_chunkd("--strategy", "words", "--size", "3", input=b"a b c d e f g").stdout)
    assert [r["text"] for r in records] == ["a b c", "d e f", "g"]


def test_json_and_msgpack_formats_and_stdin():
    text = MARKDOWN.read_text(encoding="utf-8")
    expected = expected_records(text, "sections", 1, 0)
    as_json = run_chunkd("--strategy", "sections", "--format", "json", input=text.encode())
    assert ndjson(as_json.stdout) == [{"doc": None, "chunks": expected}]
    as_msgpack = run_chunkd("--strategy", "sections", "--format", "msgpack", input=text.encode())
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(as_msgpack.stdout)
    assert list(unpacker) == expected


def test_ndjson_input_with_jobs_keeps_order_and_fields():
    lines = [{"id": n, "text": f"Sentence {n}. " * (n % 9 + 1) + "中文。句子！", "lang": "mixed"}
             for n in range(300)]
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    one = run_chunkd("--input", "ndjson", "--strategy", "sentences", "--size", "3",
                     "--jobs", "1", input=data)
    two = run_chunkd("--input", "ndjson", "--strategy", "sentences", "--size", "3",
                     "--jobs", "2", input=data)
    assert (one.returncode, one.stderr) == (0, b"")
    assert one.stdout == two.stdout
    records = ndjson(two.stdout)
    for line in lines[:20]:
        mine = [r for r in records if r["doc"] == line["id"]]
        assert [r["text"] for r in mine] == [
            c["text"] for c in reference.windows(line["text"], "sentences", 3, 0)]
        assert all(r["lang"] == "mixed" for r in mine)


def test_count_tokens_adds_the_exact_count_before_the_estimate():
    text = MARKDOWN.read_text(encoding="utf-8")
    result = run_chunkd("--strategy", "words", "--size", "40", "--count-tokens",
                        input=text.encode())
    records = ndjson(result.stdout)
    assert records and all(r["tokens"] == token_length(r["text"]) for r in records)
    assert list(records[0]) == ["index", "start", "end", "length", "tokens",
                                "estimated_tokens", "text"]


@pytest.mark.parametrize("args,says", [
    (["--strategy", "words", "--chars", "100"], "with --strategy words write --size N"),
    (["--strategy", "sentences", "--tokens", "100"], "with --strategy sentences write --size N"),
    (["--size", "10"], "with --strategy recursive write --chars N or --tokens N"),
    (["--strategy", "sections", "--size", "3", "--overlap", "3"], "write --overlap 2 or less"),
    (["--strategy", "graphemes", "--overlap", "1000"],
     "the default of --strategy graphemes); write --overlap 999 or less"),
    (["--strategy", "words", "--size", "0"], "the size must be at least 1"),
    (["--strategy", "paragraphs"], "choose one of recursive, graphemes, words, sentences, sections"),
    (["watch", "/nonexistent", "--strategy", "words", "--chars", "5"], "write --size N"),
])
def test_bad_combinations_exit_2_with_one_line_saying_what_to_write(args, says):
    result = run_chunkd(*args)
    assert result.returncode == 2
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chunkd") and says in lines[0], lines


def test_the_daemon_records_the_strategy_and_equals_the_filter(inbox, watch):
    options = ("--strategy", "sections", "--size", "2", "--overlap", "1")
    (inbox / "doc.md").write_bytes(MARKDOWN.read_bytes())
    watcher = watch(inbox, *options)
    watcher.wait_for(lambda: "doc.md" in results(inbox), what="the result")
    result = results(inbox)["doc.md"]
    assert result["settings"] == {"strategy": "sections", "unit": "sections", "size": 2,
                                  "overlap": 1, "errors": "strict", "ids": True}
    assert result["chunks"] == filter_chunks(inbox / "doc.md", *options)
    assert result["chunks"][0]["headings"] is not None
    assert watcher.stop() == 0
