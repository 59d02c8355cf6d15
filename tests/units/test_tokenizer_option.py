"""``--tokenizer SPEC`` through the installed ``chunkd``: sizes, parents and token
counts in a real tokenizer's tokens, as LangChain counts them with the same tokenizer;
results name the tokenizer by its identity; a model folder's limit; and every bad
tokenizer refused in one line, exit 2, before any input is read."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

import orjson
import pytest

from command import HANG, chunkd_command, ndjson, run_chunkd
from oracle import corpus_documents
from tokenizer_files import (MINILM_IDENTITY, O200K_FILE, O200K_SHA256, cased_wordpiece,
                             huggingface_langchain, minilm_count, minilm_folder,
                             minilm_tokenizer, o200k_count, o200k_langchain)

#: An English document and a Chinese one (CJK, full-width punctuation).
DOCUMENTS = [next(path for path in corpus_documents() if path.parent.name == name)
             for name in ("en-rustbook", "zh-vuedocs")]


def json_documents(*args: str) -> list[dict]:
    result = run_chunkd("--format", "json", *args)
    assert result.returncode == 0, result.stderr
    return ndjson(result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("spec, count, langchain, identity", [
    (str(O200K_FILE), o200k_count, o200k_langchain, "o200k_base"),
    (str(minilm_folder()), minilm_count,
     lambda size, overlap: huggingface_langchain(minilm_folder(), size, overlap),
     MINILM_IDENTITY),
], ids=["o200k_base", "all-MiniLM-L6-v2"])
def test_the_filter_counts_in_the_tokenizer(spec, count, langchain, identity):
    """--tokens and --count-tokens count in SPEC's tokens: LangChain's chunks with the
    same tokenizer, each record's length and tokens the tokenizer's count; the JSON
    document names the tokenizer by its identity, never by a path."""
    documents = json_documents("--tokenizer", spec, "--tokens", "120", "--overlap", "12",
                               "--count-tokens", *map(str, DOCUMENTS))
    splitter = langchain(120, 12)
    for path, document in zip(DOCUMENTS, documents):
        text = path.read_text(encoding="utf-8")
        assert document["tokenizer"] == identity
        chunks = document["chunks"]
        assert [chunk["text"] for chunk in chunks] == splitter.split_text(text)
        for chunk in chunks:
            assert text[chunk["start"]:chunk["end"]] == chunk["text"]
            assert chunk["length"] == chunk["tokens"] == count(chunk["text"])


@pytest.mark.slow
def test_parents_count_in_the_tokenizer():
    """--parent-tokens: the parents are LangChain's chunks at the parent size, the
    children LangChain's chunks of each parent, all counted in o200k_base."""
    text = DOCUMENTS[0].read_text(encoding="utf-8")
    [document] = json_documents("--tokenizer", str(O200K_FILE), "--tokens", "60",
                                "--overlap", "0", "--parent-tokens", "300",
                                "--parent-overlap", "0", str(DOCUMENTS[0]))
    parents = document["parents"]
    assert [parent["text"] for parent in parents] == o200k_langchain(300, 0).split_text(text)
    children = o200k_langchain(60, 0)
    for parent in parents:
        mine = [chunk for chunk in document["chunks"] if chunk["parent"]["index"] == parent["index"]]
        assert [chunk["text"] for chunk in mine] == children.split_text(parent["text"])
        assert all(chunk["length"] == o200k_count(chunk["text"]) for chunk in mine)


def test_the_default_tokenizer_is_not_recorded():
    """cl100k_base, given or not, writes what chunkd wrote before --tokenizer existed:
    no tokenizer in the JSON document."""
    args = ("--format", "json", "--tokens", "80", "--count-tokens", str(DOCUMENTS[0]))
    default, named = run_chunkd(*args), run_chunkd("--tokenizer", "cl100k_base", *args)
    assert default.returncode == named.returncode == 0
    assert default.stdout == named.stdout
    assert "tokenizer" not in orjson.loads(default.stdout)


@pytest.mark.slow
def test_a_tokenizer_makes_tokens_the_default_unit(tmp_path):
    """With a tokenizer and no size, the recursive strategy counts in its tokens (1000,
    its default size); --chars still counts code points, and the tokens field the
    tokenizer's."""
    text = DOCUMENTS[0].read_text(encoding="utf-8")
    [document] = json_documents("--tokenizer", str(O200K_FILE), str(DOCUMENTS[0]))
    assert ([chunk["text"] for chunk in document["chunks"]]
            == o200k_langchain(1000, 100).split_text(text))
    [document] = json_documents("--tokenizer", str(O200K_FILE), "--chars", "500",
                                "--count-tokens", str(DOCUMENTS[0]))
    for chunk in document["chunks"]:
        assert chunk["length"] == len(chunk["text"]) <= 500
        assert chunk["tokens"] == o200k_count(chunk["text"])


# --- the model's limit ------------------------------------------------------------------

@pytest.mark.slow
def test_a_model_folders_limit_is_the_default_size():
    """all-MiniLM-L6-v2 takes 256 tokens, two of them [CLS] and [SEP]: with no size,
    chunks of at most 254 tokens (LangChain's at 254, overlap 10 %)."""
    assert json.loads((minilm_folder() / "sentence_bert_config.json").read_text())[
        "max_seq_length"] == 256
    text = DOCUMENTS[0].read_text(encoding="utf-8")
    [document] = json_documents("--tokenizer", str(minilm_folder()), str(DOCUMENTS[0]))
    chunks = [chunk["text"] for chunk in document["chunks"]]
    assert chunks == huggingface_langchain(minilm_folder(), 254, 25).split_text(text)
    tokenizer = minilm_tokenizer()
    longest = max(len(tokenizer(chunk)["input_ids"]) for chunk in chunks)  # as embedded
    assert 200 < longest <= 256


def test_a_size_above_the_models_limit_is_a_usage_error():
    folder = str(minilm_folder())
    result = run_chunkd("--tokenizer", folder, "--tokens", "255", str(DOCUMENTS[0]))
    assert (result.returncode, result.stdout) == (2, b"")
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(f"chunkd: error: the size (255 tokens) is more than the model of "
                           f"--tokenizer {folder} takes: 254 tokens a chunk (its window, less "
                           f"the special tokens it adds to every input)")
    fits = run_chunkd("--tokenizer", folder, "--tokens", "254", str(DOCUMENTS[0]))
    assert fits.returncode == 0, fits.stderr
    # Parents are not embedded: their size may pass the limit.
    parents = run_chunkd("--tokenizer", folder, "--tokens", "200", "--parent-tokens", "1000",
                         str(DOCUMENTS[0]))
    assert parents.returncode == 0, parents.stderr
    assert max(record["length"] for record in ndjson(parents.stdout)) <= 200


# --- bad tokenizers -----------------------------------------------------------------------

def bad_tokenizers(folder) -> dict[str, tuple[str, str]]:
    """Each bad tokenizer input: its spec and what the one line says of it."""
    empty = folder / "empty-model"
    empty.mkdir()
    malformed = folder / "malformed"
    malformed.mkdir()
    (malformed / "tokenizer.json").write_text('{"model": ', encoding="utf-8")
    not_tokenizer = folder / "tokenizer.json"
    not_tokenizer.write_text('{"hello": "world"}', encoding="utf-8")
    altered = folder / "o200k_base.tiktoken"
    data = O200K_FILE.read_bytes()
    altered.write_bytes(data[:-20] + b"\n")
    actual = hashlib.sha256(altered.read_bytes()).hexdigest()
    return {
        "missing": (str(folder / "no-such-model"), "no such file or folder"),
        "no tokenizer.json": (str(empty), "no tokenizer.json in this model folder"),
        "malformed JSON": (str(malformed), f"{malformed}/tokenizer.json: not a Hugging Face "
                                          "tokenizer file: "),
        "not a tokenizer": (str(not_tokenizer), "not a Hugging Face tokenizer file: "),
        "wrong hash": (str(altered), f"not tiktoken's o200k_base file (its SHA-256 is {actual}, "
                                     f"tiktoken's is {O200K_SHA256})"),
        "unknown name": ("o300k_base", "unknown tokenizer 'o300k_base'"),
    }


#: Every front end, reading FILE: a FIFO that nobody writes to, so that a command that
#: read its input before refusing the tokenizer would hang (and time out).
FRONT_ENDS = {
    "filter": lambda fifo, spec: ["--tokenizer", spec, fifo],
    "preview": lambda fifo, spec: ["preview", fifo, "--tokenizer", spec],
    "eval": lambda fifo, spec: ["eval", fifo, "--questions", fifo, "--tokenizer", spec],
    "watch": lambda fifo, spec: ["watch", os.path.dirname(fifo), "--tokenizer", spec],
    "serve": lambda fifo, spec: ["serve", "--port", "0", "--tokenizer", spec],
}


@pytest.mark.parametrize("front_end", [
    "filter", *(pytest.param(name, marks=pytest.mark.slow) for name in sorted(FRONT_ENDS)
                if name != "filter")])
def test_a_bad_tokenizer_is_one_line_and_exit_2_before_any_input(tmp_path, front_end):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    fifo = inputs / "document.md"
    os.mkfifo(fifo)
    prog = "chunkd" if front_end == "filter" else f"chunkd {front_end}"
    for case, (spec, says) in bad_tokenizers(tmp_path).items():
        result = subprocess.run([chunkd_command(), *FRONT_ENDS[front_end](str(fifo), spec)],
                                capture_output=True, timeout=HANG, stdin=subprocess.DEVNULL)
        assert (result.returncode, result.stdout) == (2, b""), (case, result.stderr)
        [line] = result.stderr.decode().splitlines()
        assert line.startswith(f"{prog}: error: --tokenizer {spec}: "), (case, line)
        assert says in line, (case, line)


@pytest.mark.slow
def test_a_tokenizer_file_is_read_whatever_its_name(tmp_path):
    """A Hugging Face tokenizer.json under another name, trained here (cased
    WordPiece), is counted as transformers counts it, and named by its file's name and
    SHA-256."""
    path = tmp_path / "cased.json"
    cased_wordpiece().save(str(path))
    text = DOCUMENTS[0].read_text(encoding="utf-8")
    [document] = json_documents("--tokenizer", str(path), "--tokens", "90",
                                str(DOCUMENTS[0]))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert document["tokenizer"] == f"cased.json@sha256:{digest}"
    assert ([chunk["text"] for chunk in document["chunks"]]
            == huggingface_langchain(path, 90, 9).split_text(text))
    assert str(tmp_path) not in json.dumps(document)


def test_the_python_api_takes_the_tokenizer():
    import chunkd

    text = DOCUMENTS[1].read_text(encoding="utf-8")
    chunks = chunkd.split_text(text, 80, 8, unit="tokens", tokenizer=str(O200K_FILE),
                               count_tokens=True)
    assert [chunk.text for chunk in chunks] == o200k_langchain(80, 8).split_text(text)
    assert all(chunk.tokens == chunk.length == o200k_count(chunk.text) for chunk in chunks)
    with pytest.raises(chunkd.SettingsError, match="tokenizer .*no-such: no such file"):
        chunkd.Settings(tokenizer="/no-such")


@pytest.mark.slow
def test_arrow_takes_the_tokenizer():
    import pyarrow as pa

    from chunkd.arrow import chunk_table

    texts = [path.read_text(encoding="utf-8") for path in DOCUMENTS]
    table = chunk_table(pa.table({"id": ["a", "b"], "text": texts}), chunk_size=100,
                        chunk_overlap=0, unit="tokens", tokenizer=str(minilm_folder()),
                        count_tokens=True)
    splitter = huggingface_langchain(minilm_folder(), 100, 0)
    expected = [chunk for text in texts for chunk in splitter.split_text(text)]
    assert table.column("text").to_pylist() == expected
    assert table.column("tokens").to_pylist() == [minilm_count(chunk) for chunk in expected]


@pytest.mark.slow
def test_copied_model_folder_has_the_same_identity(tmp_path):
    """The identity is the tokenizer file's name in its folder and its hash, not where
    the folder is: a copy elsewhere is the same tokenizer."""
    copy = tmp_path / "model"
    shutil.copytree(minilm_folder(), copy)
    [document] = json_documents("--tokenizer", str(copy), "--tokens", "50",
                                str(DOCUMENTS[0]))
    assert document["tokenizer"] == MINILM_IDENTITY


@pytest.mark.slow
@pytest.mark.parametrize("spec, options, langchain", [
    (str(O200K_FILE), ("--tokens", "200", "--overlap", "30"), lambda: o200k_langchain(200, 30)),
    (str(minilm_folder()), (), lambda: huggingface_langchain(minilm_folder(), 254, 25)),
], ids=["o200k_base", "all-MiniLM-L6-v2"])
def test_every_corpus_document_through_the_filter(spec, options, langchain):
    """The whole shared corpus in one run of the filter (its workers too): every
    document's chunks are LangChain's with the same tokenizer (all-MiniLM-L6-v2 at
    the size that fits it, its default), with exact offsets."""
    paths = corpus_documents()
    result = run_chunkd("--format", "json", "--jobs", "2", "--tokenizer", spec, *options,
                        *map(str, paths))
    assert result.returncode == 0, result.stderr
    documents = ndjson(result.stdout)
    assert [document["doc"] for document in documents] == list(map(str, paths))
    splitter = langchain()
    for path, document in zip(paths, documents):
        text = path.read_text(encoding="utf-8")
        assert [chunk["text"] for chunk in document["chunks"]] == splitter.split_text(text), path
        assert all(text[chunk["start"]:chunk["end"]] == chunk["text"]
                   for chunk in document["chunks"])
