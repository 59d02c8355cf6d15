"""Malformed model folders through the installed ``chunkd``: a JSON file of the folder
that is not what a model's is (the wrong type at the top, nested 100,000 deep, a list
of modules that is not one, a tokenizer file of the wrong types) is the usage error,
exit 2, in one line naming the option and the folder, before any input is read, with
``--tokenizer`` and ``--embed``, in the filter, ``serve`` and ``eval``; never a
traceback."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from command import chunkd_command
from tokenizer_files import minilm_folder

#: Deep enough for Python's JSON decoder to give up (its recursion limit).
DEEP = 100_000


def _case(folder, files: dict[str, str | None]):
    """The real all-MiniLM-L6-v2 folder (its files linked) with ``files`` changed
    (None: left out)."""
    folder.mkdir()
    source = minilm_folder()
    for entry in source.iterdir():
        if entry.name not in files:
            (folder / entry.name).symlink_to(entry)
    for name, text in files.items():
        if text is not None:
            (folder / name).write_text(text, encoding="utf-8")
    return folder


#: Each malformed folder: what is changed, the front ends that read that file
#: (``--tokenizer`` reads modules.json only without a top-level tokenizer.json, and
#: tokenizer_config.json only without a limit in sentence_bert_config.json; it never
#: reads config.json), and what the line says.
CASES = {
    "sentence_bert_config.json [1]": (
        {"sentence_bert_config.json": "[1]"}, ("tokenizer", "embed"),
        "sentence_bert_config.json: not a JSON object"),
    "sentence_bert_config.json nested": (
        {"sentence_bert_config.json": "[" * DEEP + "]" * DEEP}, ("tokenizer", "embed"),
        "sentence_bert_config.json: nested too deeply to read"),
    "modules.json 5": (
        {"modules.json": "5", "tokenizer.json": None}, ("tokenizer", "embed"),
        "modules.json: not a JSON array"),
    "modules.json of wrong types": (
        {"modules.json": json.dumps([{"idx": 0, "name": "0", "path": 5, "type": ["x"]}])},
        ("embed",), "modules.json: not a list of modules"),
    "tokenizer_config.json [1]": (
        {"tokenizer_config.json": "[1]", "sentence_bert_config.json": None},
        ("tokenizer", "embed"), "tokenizer_config.json: not a JSON object"),
    "tokenizer_config.json nested": (
        {"tokenizer_config.json": '{"a":' * DEEP + "1" + "}" * DEEP,
         "sentence_bert_config.json": None},
        ("tokenizer", "embed"), "tokenizer_config.json: nested too deeply to read"),
    "config.json [1]": ({"config.json": "[1]"}, ("embed",), "config.json: not a JSON object"),
    "config.json nested": ({"config.json": '{"hidden_size":' + "[" * DEEP + "]" * DEEP + "}"},
                           ("embed",), "config.json: nested too deeply to read"),
    "config.json of wrong types": (
        {"config.json": json.dumps({"architectures": 5, "model_type": ["bert"],
                                    "hidden_size": "x"})},
        ("embed",), "cannot load the model: "),
    "tokenizer.json of wrong types": (
        {"tokenizer.json": json.dumps({"model": [1], "normalizer": 5, "pre_tokenizer": "x",
                                       "added_tokens": {"a": 1}})},
        ("tokenizer",), "tokenizer.json: not a Hugging Face tokenizer file: "),
}

#: Every front end, with the option, reading FIFO: a FIFO nobody writes to, so that a
#: command that read its input before refusing the model would hang (and time out).
FRONT_ENDS = {
    "filter": lambda fifo, option, spec: [*option_args(option, spec), fifo],
    "serve": lambda fifo, option, spec: ["serve", "--port", "0", *option_args(option, spec)],
    "eval": lambda fifo, option, spec: ["eval", fifo, "--questions", fifo,
                                        *option_args(option, spec)],
}


def option_args(option: str, spec: str) -> list[str]:
    if option == "tokenizer":
        return ["--tokenizer", spec, "--tokens", "100"]
    return ["--strategy", "semantic", "--embed", spec]


def eval_args(args: list[str]) -> list[str]:
    """eval embeds with the dense retriever: a model every setting of its grid needs."""
    return [arg if arg != "semantic" else "recursive" for arg in args] + (
        ["--retriever", "dense"] if "--embed" in args else [])


@pytest.mark.parametrize("front_end", [
    "filter", *(pytest.param(name, marks=pytest.mark.slow) for name in ("serve", "eval"))])
@pytest.mark.parametrize("option", ["tokenizer", "embed"])
def test_a_malformed_model_folder_is_one_line_and_exit_2(tmp_path, front_end, option):
    fifo = tmp_path / "document.md"
    os.mkfifo(fifo)
    prog = "chunkd" if front_end == "filter" else f"chunkd {front_end}"
    checked = 0
    for number, (case, (files, options, says)) in enumerate(CASES.items()):
        if option not in options:
            continue
        folder = _case(tmp_path / f"model-{number}", files)
        args = FRONT_ENDS[front_end](str(fifo), option, str(folder))
        if front_end == "eval":
            args = eval_args(args)
        result = subprocess.run([chunkd_command(), *args], capture_output=True, timeout=120,
                                stdin=subprocess.DEVNULL)
        assert (result.returncode, result.stdout) == (2, b""), (case, result.stderr)
        [line] = result.stderr.decode().splitlines()
        assert line.startswith(f"{prog}: error: --{option} {folder}: "), (case, line)
        assert says in line, (case, line)
        checked += 1
    assert checked >= 5


def test_the_unbroken_folder_loads(tmp_path):
    """The cases' folder, with nothing changed, is a model and a tokenizer: what fails
    above is the change alone."""
    folder = _case(tmp_path / "model", {})
    for args in (["--tokenizer", str(folder), "--tokens", "100"],
                 ["--strategy", "semantic", "--embed", str(folder)]):
        result = subprocess.run([chunkd_command(), *args], input=b"One sentence. Another.",
                                capture_output=True, timeout=300)
        assert (result.returncode, result.stderr) == (0, b""), args
        assert json.loads(result.stdout.splitlines()[0])["text"].startswith("One sentence.")
