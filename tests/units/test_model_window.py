"""The model's window: with ``--embed MODEL`` (or ``--embed-window N``), sizes count in
the model's own tokens, the default size fits the window, and a size that could pass it
is a usage error in one line. The oracle for "fits" is the model's tokenizer as the
model itself runs it (transformers' ``AutoTokenizer``, special tokens included, against
the model's ``max_seq_length``), not chunkd's count."""

from __future__ import annotations

import json
import pathlib

import pytest
from command import ndjson, run_chunkd

import chunkd
from chunkd.settings import Settings, SettingsError

CORPUS = pathlib.Path(__file__).resolve().parent.parent.parent.parent / "shared" / "corpus"
EVAL = pathlib.Path(__file__).resolve().parent.parent.parent.parent / "shared" / "eval"


def minilm_folder() -> str:
    from embedding import model_folder

    return model_folder()


def model_tokens(folder: str):
    """How many tokens the model reads of a text, as transformers encodes it for the
    model (with [CLS] and [SEP]), and the most it reads."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    limit = json.loads((pathlib.Path(folder) / "sentence_bert_config.json").read_text())[
        "max_seq_length"]
    return (lambda text: len(tokenizer(text, truncation=False)["input_ids"])), limit


def a_document() -> str:
    return next(path for path in sorted(CORPUS.rglob("*.md"))
                if path.stat().st_size > 20_000).read_text(encoding="utf-8")[:12_000]


def letters(texts):
    return [[1.0] + [text.count(letter) for letter in "aeioustrn"] for text in texts]


# --- settings, without loading the model ------------------------------------------------

def test_the_embed_models_tokenizer_and_window_are_the_defaults():
    folder = minilm_folder()
    settings = Settings(strategy="semantic", embed=folder)
    assert (settings.unit, settings.size) == ("tokens", 254)  # 256 less [CLS] and [SEP]
    assert settings.measure.name.startswith("model/tokenizer.json@sha256:")
    smaller = Settings(strategy="semantic", embed=folder, size=100, unit="tokens")
    assert smaller.size == 100 and smaller.measure is settings.measure


def test_a_tokenizer_given_is_kept():
    settings = Settings(strategy="semantic", embed=minilm_folder(), tokenizer="cl100k_base")
    assert (settings.measure.name, settings.size) == ("cl100k_base", 512)


def test_a_function_model_has_no_window_unless_one_is_given():
    assert Settings(strategy="semantic", embed=letters).size == 512
    windowed = Settings(strategy="semantic", embed=letters, embed_window=200)
    assert (windowed.unit, windowed.size) == ("tokens", 200)
    with pytest.raises(SettingsError, match=r"the size \(300 tokens\) is more than the model "
                                            r"\(embed_window 200\) takes: 200 tokens"):
        Settings(strategy="semantic", embed=letters, embed_window=200, size=300, unit="tokens")


@pytest.mark.parametrize("arguments,message", [
    (("--tokens", "255"), "chunkd: error: the size (255 tokens) is more than the model of "
                          "--embed {folder} takes: 254 tokens a chunk"),
    (("--chars", "200"), "chunkd: error: the model of --embed {folder} reads 254 tokens a "
                         "chunk, and a size in code points (200 chars) cannot promise to fit "
                         "it (a code point can be several tokens): count in its tokens, "
                         "--tokens 254 or less"),
    (("--embed-window", "100", "--tokens", "101"), "chunkd: error: the size (101 tokens) is "
                                                   "more than the model (--embed-window 100) "
                                                   "takes: 100 tokens a chunk; give a size of "
                                                   "100 or less"),
])
def test_a_size_that_could_pass_the_window_is_a_usage_error(arguments, message):
    folder = minilm_folder()
    result = run_chunkd("--strategy", "semantic", "--embed", folder, *arguments,
                        input=b"One. Two.")
    assert (result.returncode, result.stdout) == (2, b"")
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(message.format(folder=folder))


def test_the_window_bounds_every_strategy_that_counts_tokens():
    document = a_document()
    result = run_chunkd("--embed-window", "120", "--count-tokens", input=document.encode())
    assert result.returncode == 0, result.stderr
    records = ndjson(result.stdout)
    count = chunkd.units.resolve("cl100k_base").count
    assert {record["length"] for record in records} <= set(range(121))
    assert max(count(record["text"]) for record in records) > 100  # the window is the size
    # --embed-prefix counts within the window, as within the size
    prefixed = ndjson(run_chunkd("--embed-window", "120", "--embed-prefix", "passage: ",
                                 input=document.encode()).stdout)
    assert max(count(record["embed_text"]) for record in prefixed) <= 120
    for arguments in (("--tokens", "121"), ("--chars", "100"),
                      ("--strategy", "markdown", "--tokens", "200")):
        refused = run_chunkd("--embed-window", "120", *arguments, input=b"text")
        assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
    windows = run_chunkd("--strategy", "sentences", "--embed-window", "120", input=b"text")
    assert windows.returncode == 2 and b"--embed-window bounds a size in tokens" in windows.stderr


def test_langchains_mode_keeps_no_maximum():
    settings = Settings(strategy="semantic", embed=minilm_folder(), sentence_split="langchain",
                        unit="chars", size=10**12)
    assert settings.measure.name == "chars"


# --- with the real model ----------------------------------------------------------------

@pytest.mark.slow
def test_no_semantic_chunk_passes_the_models_window_by_default(minilm):
    """The filter, the API and Arrow, all with their defaults: every chunk is read whole
    by the model."""
    folder, _ = minilm
    tokens, limit = model_tokens(folder)
    document = a_document()
    filtered = run_chunkd("--strategy", "semantic", "--embed", folder, input=document.encode())
    assert filtered.returncode == 0, filtered.stderr
    records = ndjson(filtered.stdout)
    api = chunkd.split_text(document, strategy="semantic", embed=folder)
    assert [record["text"] for record in records] == [chunk.text for chunk in api]
    assert max(tokens(chunk.text) for chunk in api) <= limit
    assert max(chunk.length for chunk in api) > 200  # the window is used, not a smaller size
    pyarrow = pytest.importorskip("pyarrow")
    from chunkd.arrow import chunk_table

    table = chunk_table(pyarrow.table({"id": ["a"], "text": [document]}),
                        strategy="semantic", embed=folder)
    assert table.column("text").to_pylist() == [chunk.text for chunk in api]


@pytest.mark.slow
def test_eval_counts_in_the_models_tokens_and_leaves_out_sizes_over_its_window(
        minilm, tmp_path, capsysbinary):
    from chunkd.evaluate.command import main

    folder, _ = minilm
    tokens, limit = model_tokens(folder)
    document = EVAL / "docs" / "state_of_the_union.md"
    questions = tmp_path / "questions.jsonl"
    asked = [line for line in (EVAL / "questions.jsonl").read_text().splitlines()
             if json.loads(line)["doc"] == document.name][:8]
    questions.write_text("\n".join(asked) + "\n")
    status = main([str(document), "--questions", str(questions), "--format", "ndjson", "-q",
                   "--retriever", "dense", "--embed", folder, "--tokens", "200,300",
                   "--overlap", "0"])
    output = capsysbinary.readouterr()
    assert status == 1  # a setting was left out, and said
    [line] = output.err.decode().splitlines()
    assert line.startswith("chunkd eval: left out --strategy recursive --tokens 300 --overlap 0: "
                           "the size (300 tokens) is more than the model of --tokenizer")
    [record] = [json.loads(line) for line in output.out.splitlines()]
    assert record["size"] == 200 and record["tokenizer"].startswith("model/tokenizer.json@")
    chunks = chunkd.split_text(document.read_text(encoding="utf-8"), 200, 0, unit="tokens",
                               tokenizer=folder)
    assert record["chunks"] == len(chunks) and max(map(tokens, (c.text for c in chunks))) <= limit


@pytest.mark.slow
def test_serve_keeps_every_request_within_the_servers_window():
    from urllib.parse import urlencode

    import orjson
    from browser import Serve, request

    with Serve("--embed-window", "100") as server:
        where = f"127.0.0.1:{server.port}"
        status, _, data = request(server, "GET", "/api/config", host=where)
        assert status == 200 and orjson.loads(data)["initial"]["tokens"] == 100
        text = a_document().encode()
        for params, expected in (({"tokens": "100"}, 200), ({"tokens": "101"}, 400),
                                 ({"chars": "80"}, 400)):
            status, _, data = request(server, "POST", f"/api/split?{urlencode(params)}", text,
                                      host=where)
            assert status == expected, data
        status, _, data = request(server, "POST", "/api/split?tokens=101", text, host=where)
        assert "is more than the model (--embed-window 100) takes" in orjson.loads(data)["error"]
