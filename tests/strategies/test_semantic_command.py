"""The semantic strategy through the installed ``chunkd``: the filter (files,
``--jobs``), ``chunkd serve``, ``chunkd watch`` (the model's identity in its record of settings), and the
one-line refusals. Each command that chunks loads the real model (seconds), so those
tests are slow; the refusals load nothing."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import orjson

import pytest
from browser import Serve, request
from command import records_with_jobs, run_chunkd
from embedding import model_folder
from watching import results

CORPUS = Path(__file__).resolve().parent.parent.parent.parent / "shared" / "corpus"


@pytest.mark.parametrize("options, message", [
    (("--strategy", "semantic"), "--strategy semantic needs a model: --embed MODEL"),
    (("--strategy", "semantic", "--embed", "no/such-model"),
     "--embed no/such-model: no such model folder, and no model of that name in the "
     "Hugging Face cache"),
    (("--embed", "x"), "--embed is for --strategy semantic or --vectors, not --strategy recursive"),
    (("--strategy", "semantic", "--embed", "x", "--overlap", "5"),
     "the semantic strategy's chunks do not overlap"),
    (("--strategy", "semantic", "--tokens", "100", "--min-chars", "5"),
     "the minimum is counted in the size's unit (tokens): write --min-tokens N"),
    (("--strategy", "semantic", "--breakpoint", "gradient", "--breakpoint-amount", "120"),
     "--breakpoint-amount is a percentile with --breakpoint gradient: from 0 to 100"),
    (("--strategy", "semantic", "--tokens", "100", "--min-tokens", "101"),
     "the minimum (101) must not be larger than the size (100)"),
    (("--strategy", "semantic", "--embed-url", "http://h"),
     "--embed-url and --embed-model go together"),
    (("--strategy", "semantic", "--embed-model", "m"),
     "--embed-url and --embed-model go together"),
    (("--strategy", "semantic", "--embed", "x", "--embed-url", "http://h", "--embed-model",
      "m"),
     "--embed and --embed-url exclude each other"),
    (("--strategy", "semantic", "--embed-url", "ftp://h", "--embed-model", "m"),
     "--embed-url ftp://h: not an http:// or https:// URL"),
    (("--embed-url", "http://h", "--embed-model", "m"),
     "--embed-url is for --strategy semantic or --vectors, not --strategy recursive"),
])
def test_bad_settings_are_one_line_and_status_2(options, message):
    result = run_chunkd(*options, input=b"Some text.")
    assert result.returncode == 2 and result.stdout == b""
    [line] = result.stderr.decode().splitlines()
    assert line.startswith("chunkd: error: ") and message in line


def corpus_files(tmp_path, count=3, limit=2500):
    """Short copies of corpus documents (the model embeds every sentence)."""
    paths = []
    for source in sorted((CORPUS / "en-policy").glob("Policies_*.md"))[:count]:
        path = tmp_path / source.name[-40:]
        path.write_text(source.read_text(encoding="utf-8")[:limit], encoding="utf-8")
        paths.append(path)
    return paths


@pytest.mark.slow
def test_the_filter_with_jobs_gives_identical_records(tmp_path):
    paths = corpus_files(tmp_path)
    options = ("--strategy", "semantic", "--embed", model_folder(), "--tokens", "100")
    records = records_with_jobs(*options, *map(str, paths))
    texts = {str(path): path.read_text(encoding="utf-8") for path in paths}
    assert {record["doc"] for record in records} == set(texts)
    for record in records:
        assert texts[record["doc"]][record["start"]:record["end"]] == record["text"]
        assert record["length"] <= 100
    assert any("distance" in record for record in records)


@pytest.mark.slow
def test_watch_records_the_models_identity_and_redoes_files_when_it_changes(
        inbox, tmp_path, watch):
    """The daemon's record of settings holds the model's identity: the same folder with
    other files is another model, and a restarted daemon chunks the file again."""
    model = tmp_path / "model"
    for path in Path(model_folder()).rglob("*"):
        target = model / path.relative_to(model_folder())
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    [document] = corpus_files(inbox, count=1, limit=1500)
    options = ("--strategy", "semantic", "--embed", str(model), "--tokens", "80")

    def run_until_current() -> dict:
        watcher = watch(inbox, *options)
        watcher.started()
        watcher.wait_for(lambda: results(inbox) and re.fullmatch(
            r"model@sha256:[0-9a-f]{64}", results(inbox)[document.name]["settings"]["embed"])
            and results(inbox)[document.name]["settings"]["embed"] != seen, what="a result")
        assert watcher.stop() == 0
        return results(inbox)[document.name]

    seen = None
    first = run_until_current()
    seen = first["settings"]["embed"]
    assert first["chunks"] and all(chunk["length"] <= 80 for chunk in first["chunks"])
    (model / "1_Pooling" / "config.json").unlink()
    (model / "1_Pooling" / "config.json").write_text(
        '{"word_embedding_dimension": 384, "pooling_mode_cls_token": true}')
    second = run_until_current()
    assert second["settings"]["embed"] != first["settings"]["embed"]


@pytest.mark.slow
def test_serve_with_a_model_serves_semantic_chunks_and_the_other_strategies(tmp_path):
    """A server started with --strategy semantic --embed splits with the model, and a
    request for another strategy gets it (the model is the server's, not the request's)."""
    [path] = corpus_files(tmp_path, count=1, limit=1500)
    body = path.read_bytes()
    with Serve("--strategy", "semantic", "--embed", model_folder()) as server:
        def split(**params) -> dict:
            status, _, data = request(server, "POST", f"/api/split?{urlencode(params)}", body,
                                      host=f"127.0.0.1:{server.port}")
            assert status == 200, data
            return orjson.loads(data)

        semantic = split(strategy="semantic", tokens=80)
        recursive = split(strategy="recursive", tokens=80)
    assert semantic["settings"]["embed"].startswith("model@sha256:")
    assert "distance" in semantic["fields"] and "embed" not in recursive["settings"]
    filtered = run_chunkd("--strategy", "semantic", "--embed", model_folder(), "--tokens", "80",
                          "--count-tokens", input=body)
    assert filtered.stdout.decode() == semantic["jsonl"]
