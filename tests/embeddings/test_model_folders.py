"""Malformed model folders through the installed ``chunkd``: a JSON file of the folder
that is not what a model's is (the wrong type at the top, nested 100,000 deep, a list
of modules that is not one, a tokenizer file of the wrong types) is the usage error,
exit 2, in one line naming the option and the folder, before any input is read, with
``--tokenizer`` and ``--embed``, in the filter, ``serve`` and ``eval``; never a
traceback. So is a file of the folder that cannot be hashed for the model's identity
(a link to nothing, a FIFO, a device), in the filter, ``sync`` and ``watch``; never a
hang."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from command import HANG, chunkd_command
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
        result = subprocess.run([chunkd_command(), *args], capture_output=True, timeout=HANG,
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
                                capture_output=True, timeout=HANG)
        assert (result.returncode, result.stderr) == (0, b""), args
        assert json.loads(result.stdout.splitlines()[0])["text"].startswith("One sentence.")


#: A model folder with one file that cannot be hashed, made in it by each of these; the
#: part of the line that names the file and the problem.
UNHASHABLE = {
    "a link to nothing": (lambda folder: (folder / "dangling.bin").symlink_to("/nonexistent"),
                          "dangling.bin: a symbolic link to nothing"),
    "a FIFO": (lambda folder: os.mkfifo(folder / "pipe.bin"), "pipe.bin: not a regular file"),
    "a link to a device": (lambda folder: (folder / "zero.bin").symlink_to("/dev/zero"),
                           "zero.bin: not a regular file"),
    "a FIFO in a module's folder": (lambda folder: os.mkfifo(folder / "1_Pooling" / "pipe.bin"),
                                    "1_Pooling/pipe.bin: not a regular file"),
}

#: The commands that check --embed before reading anything: the filter (on a FIFO
#: nobody writes to, as above), sync and watch (an empty folder; the sink and the
#: folder's state are never reached).
EMBEDDING_COMMANDS = {
    "filter": lambda tmp_path: ["--vectors", str(tmp_path / "document.md")],
    "sync": lambda tmp_path: ["sync", str(tmp_path / "docs"), "--sink",
                              str(tmp_path / "lance")],
    "watch": lambda tmp_path: ["watch", str(tmp_path / "docs"), "--vectors"],
}


@pytest.mark.parametrize("command", EMBEDDING_COMMANDS)
@pytest.mark.parametrize("case", UNHASHABLE)
def test_a_model_folder_file_that_cannot_be_hashed_is_one_line_and_exit_2(tmp_path, case,
                                                                          command):
    """The model's identity hashes every file of its folder: a link to nothing, a FIFO
    (which would block the read for ever) or a device (/dev/zero never ends) is refused
    at once, naming the file, and not a traceback or a hang. The folder's other files
    are links to the real model's, as in a Hugging Face cache: those are followed."""
    make, says = UNHASHABLE[case]
    folder = tmp_path / "model"
    shutil.copytree(minilm_folder(), folder, symlinks=True,
                    copy_function=lambda source, target: os.symlink(source, target))
    make(folder)
    os.mkfifo(tmp_path / "document.md")
    (tmp_path / "docs").mkdir()
    prog = "chunkd" if command == "filter" else f"chunkd {command}"
    result = subprocess.run([chunkd_command(), *EMBEDDING_COMMANDS[command](tmp_path),
                             "--embed", str(folder)],
                            capture_output=True, timeout=HANG, stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stdout) == (2, b""), result.stderr
    assert result.stderr.decode().splitlines() == [
        f"{prog}: error: --embed {folder}: {says}"]
    assert not (tmp_path / "lance").exists()


def test_a_fifo_for_a_json_file_of_the_folder_is_one_line_and_exit_2(tmp_path):
    """The folder's JSON files are read as it is checked, before its identity: a FIFO
    in config.json's place is refused, not read for ever."""
    folder = _case(tmp_path / "model", {"config.json": None})
    os.mkfifo(folder / "config.json")
    result = subprocess.run([chunkd_command(), "--vectors", "--embed", str(folder)],
                            capture_output=True, timeout=HANG, stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stdout) == (2, b""), result.stderr
    assert result.stderr.decode().splitlines() == [
        f"chunkd: error: --embed {folder}: {folder}/config.json: cannot read it: "
        "not a regular file"]
