"""``--tokenizer`` in every front end but the filter, through the installed ``chunkd``:
``watch`` (its record of settings, so that another tokenizer re-chunks), ``serve``
(the server's tokenizer; a request cannot name one), ``preview`` and ``eval``."""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import urlencode

import orjson
import pytest

from browser import Serve, request
from command import ndjson, run_chunkd
from oracle import CORPUS, corpus_documents
from tokenizer_files import (MINILM_IDENTITY, O200K_FILE, byte_level_bpe, cased_wordpiece,
                             huggingface_langchain, minilm_folder, o200k_count)
from watching import results

pytestmark = pytest.mark.slow

DOCUMENT = next(path for path in corpus_documents() if path.parent.name == "en-policy")
EVAL = CORPUS.parent / "eval"


def split(server: Serve, body: bytes, **params) -> tuple[int, dict]:
    status, _, data = request(server, "POST", f"/api/split?{urlencode(params)}", body,
                              host=f"127.0.0.1:{server.port}")
    return status, orjson.loads(data)


def test_serve_counts_in_the_servers_tokenizer_and_no_request_names_one():
    text = DOCUMENT.read_bytes()
    folder = str(minilm_folder())
    with Serve("--tokenizer", folder) as server:
        status, _, data = request(server, "GET", "/api/config", host=f"127.0.0.1:{server.port}")
        config = orjson.loads(data)
        assert status == 200 and config["tokenizer"] == MINILM_IDENTITY
        assert config["initial"]["tokens"] == 254  # the model's limit: the page's first size
        status, report = split(server, text, strategy="recursive", tokens="100", overlap="0")
        assert status == 200
        assert report["tokenizer"] == report["settings"]["tokenizer"] == MINILM_IDENTITY
        filtered = run_chunkd("--tokenizer", folder, "--tokens", "100", "--overlap", "0",
                              "--count-tokens", input=text)
        assert filtered.returncode == 0 and report["jsonl"] == filtered.stdout.decode()
        status, answer = split(server, text, tokens="100", tokenizer=str(O200K_FILE))
        assert status == 400 and "unknown parameter 'tokenizer'" in answer["error"]
        status, answer = split(server, text, tokens="300")
        assert status == 400
        assert "is more than the model of --tokenizer" in answer["error"]
        assert "254 tokens a chunk" in answer["error"]


def test_preview_counts_in_the_tokenizer(tmp_path):
    page = tmp_path / "page.html"
    options = ("--tokenizer", str(O200K_FILE), "--tokens", "60", "--overlap", "6")
    result = run_chunkd("preview", str(DOCUMENT), *options, "-o", str(page))
    assert result.returncode == 0, result.stderr
    [data] = re.findall(r'<script id="report" type="application/json">(.*?)</script>',
                        page.read_text(encoding="utf-8"), re.S)
    report = json.loads(data)
    assert report["tokenizer"] == report["settings"]["tokenizer"] == "o200k_base"
    filtered = run_chunkd(*options, "--count-tokens", str(DOCUMENT))
    assert report["jsonl"] == filtered.stdout.decode()
    assert all(record["tokens"] == o200k_count(record["text"])
               for record in ndjson(filtered.stdout))


def test_eval_counts_and_records_the_tokenizer():
    documents = sorted(map(str, (EVAL / "docs").glob("*.md")))
    questions = str(EVAL / "questions.jsonl")
    options = ("--tokenizer", str(O200K_FILE), "--tokens", "128", "--overlap", "0")
    result = run_chunkd("eval", *documents, "--questions", questions, *options,
                        "--format", "json", "-q")
    assert result.returncode == 0, result.stderr
    [record] = orjson.loads(result.stdout)
    assert record["tokenizer"] == "o200k_base"
    chunks = run_chunkd(*options, *documents)
    assert record["tokens"] == sum(o200k_count(chunk["text"]) for chunk in ndjson(chunks.stdout))
    table = run_chunkd("eval", *documents, "--questions", questions, *options, "-q")
    assert table.stdout.decode().splitlines()[0].endswith("; tokens of o200k_base")
    # A model folder's limit: the default sizes that fit, and the largest that fits.
    grid = run_chunkd("eval", *documents, "--questions", questions, "--tokenizer",
                      str(minilm_folder()), "--overlap", "0", "--format", "json", "-q")
    assert grid.returncode == 0, grid.stderr
    assert sorted(record["size"] for record in orjson.loads(grid.stdout)) == [64, 128, 254]


def test_watch_records_the_tokenizer_and_rechunks_when_it_changes(inbox, tmp_path, watch):
    """The default leaves no trace in the record; another tokenizer, or the same file
    with another content, makes the result stale: chunked again at start. An unchanged
    tokenizer redoes nothing."""
    text = DOCUMENT.read_text(encoding="utf-8")
    (inbox / "doc.md").write_text(text, encoding="utf-8")
    tokenizer = tmp_path / "tokenizer.json"
    byte_level_bpe().save(str(tokenizer))

    def run(*options: str, redone: bool) -> dict:
        watcher = watch(inbox, "--tokens", "40", "--overlap", "0", "--rescan", "1", "-v",
                        *options)
        if redone:
            watcher.wait_for(lambda: "doc.md" in watcher.processed(), what="the re-chunk")
        else:
            watcher.rescans_pass(1)
        assert watcher.stop() == 0
        assert ("doc.md" in watcher.processed()) == redone
        return results(inbox)["doc.md"]

    assert "tokenizer" not in run(redone=True)["settings"]
    for trained in (None, cased_wordpiece):
        if trained is not None:
            trained().save(str(tokenizer))
        result = run("--tokenizer", str(tokenizer), redone=True)
        digest = hashlib.sha256(tokenizer.read_bytes()).hexdigest()
        assert result["settings"]["tokenizer"] == f"tokenizer.json@sha256:{digest}"
        assert ([chunk["text"] for chunk in result["chunks"]]
                == huggingface_langchain(tokenizer, 40, 0).split_text(text))
        assert run("--tokenizer", str(tokenizer), redone=False) == result
