"""Input that the filter and the subcommands must take, or refuse in one line: help
text, separators that are not Unicode text."""

from __future__ import annotations

import pytest

from command import run_chunkd

# --- help ---------------------------------------------------------------------------

def test_help_shows_each_example_on_a_line_of_its_own():
    result = run_chunkd("--help")
    assert result.returncode == 0
    lines = [line.strip() for line in result.stdout.decode().splitlines()]
    for example in ("cat doc.txt | chunkd --tokens 300",
                    "chunkd --strategy sentences --size 8 *.md",
                    "chunkd --input ndjson < docs.ndjson"):
        assert example in lines


@pytest.mark.parametrize("command", ["", "watch", "serve", "preview", "eval"])
def test_every_help_starts_its_exit_status_on_a_line_of_its_own(command):
    result = run_chunkd(*filter(None, [command]), "--help")
    assert result.returncode == 0
    assert any(line.startswith("Exit status:") for line in result.stdout.decode().splitlines())


# --- separators -------------------------------------------------------------------------

LONE_SURROGATE = '["\\ud800", " "]'  # valid JSON: what JavaScript's JSON.stringify writes


def _commands(tmp_path) -> dict[str, list[str]]:
    """Each command with the arguments it needs to run. Each is made to stop after
    reading its options whatever happens (serve: a port out of range; watch: a folder
    that does not exist), so that none starts a service when the separators pass."""
    document = tmp_path / "a.txt"
    document.write_text("hello world\n")
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "hello?", "doc": "a", "references": [{"text": "hello"}]}\n')
    return {"filter": [str(document)],
            "preview": [str(document)],
            "serve": ["--port", "-1", str(document)],
            "watch": [str(tmp_path / "no-such-folder")],
            "eval": ["--format", "json", "--questions", str(questions), str(document)]}


@pytest.mark.parametrize("command", ["filter", "preview", "serve", "watch", "eval"])
def test_separators_with_a_lone_surrogate_are_a_usage_error_for_every_command(tmp_path,
                                                                              command):
    arguments = _commands(tmp_path)[command]
    prefix = [] if command == "filter" else [command]
    result = run_chunkd(*prefix, "--separators", LONE_SURROGATE, *arguments)
    assert result.returncode == 2
    message = result.stderr.decode()
    assert message.count("\n") == 1 and "Traceback" not in message
    assert "--separators" in message and "lone surrogate (U+D800)" in message
    assert result.stdout == b""


def test_the_python_api_refuses_separators_with_a_lone_surrogate():
    from chunkd import split_text
    from chunkd.settings import SettingsError

    with pytest.raises(SettingsError, match="lone surrogate"):
        split_text("a b", separators=["\udc80"])
