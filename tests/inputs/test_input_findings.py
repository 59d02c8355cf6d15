"""Input that the filter and the subcommands must take, or refuse in one line: NDJSON
from a live pipe, lone surrogates, separators that are not Unicode text; and help."""

from __future__ import annotations

import os
import random
import select
import subprocess
import threading
import time

import orjson
import pytest

from command import HANG, chunkd_command, ndjson, run_chunkd
from memory import peak_of

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


# --- NDJSON lines with lone surrogates ----------------------------------------------------

#: Valid JSON that JavaScript's JSON.stringify writes for strings holding half of a pair;
#: a whole pair (line 4) is one character, U+1F600.
SURROGATE_LINES = (b'{"text": "a\\ud800b"}\n'
                   b'{"text": "ok"}\n'
                   b'{"id": "\\udc00x", "text": "fine", "tags": [{"\\udfff": "\\ud800"}]}\n'
                   b'{"text": "pair \\ud83d\\ude00 ok"}\n')


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_lone_surrogate_is_named_with_its_column_and_the_other_lines_are_chunked(jobs):
    result = run_chunkd("--input", "ndjson", "--jobs", jobs, input=SURROGATE_LINES)
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        "chunkd: stdin: line 1: a lone surrogate \\ud800 at column 12: valid JSON, but not "
        "Unicode text (use --errors replace to substitute U+FFFD)",
        "chunkd: stdin: line 3: a lone surrogate \\udc00 at column 9: valid JSON, but not "
        "Unicode text (use --errors replace to substitute U+FFFD)"]
    assert [(r["doc"], r["text"]) for r in ndjson(result.stdout)] == [(2, "ok"),
                                                                      (4, "pair \U0001F600 ok")]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_errors_replace_makes_lone_surrogates_u_fffd_in_the_text_and_every_field(jobs):
    result = run_chunkd("--input", "ndjson", "--errors", "replace", "--jobs", jobs,
                        input=SURROGATE_LINES)
    assert result.returncode == 0, result.stderr
    assert [{key: r[key] for key in r if key in ("doc", "text", "tags")}
            for r in ndjson(result.stdout)] == [
        {"doc": 1, "text": "a\ufffdb"}, {"doc": 2, "text": "ok"},
        {"doc": "\ufffdx", "text": "fine", "tags": [{"\ufffd": "\ufffd"}]},
        {"doc": 4, "text": "pair \U0001F600 ok"}]


def test_a_line_with_a_lone_surrogate_is_still_checked_as_json():
    """Parsing such a line again must not take what JSON does not allow (NaN), nor
    integers beyond 64 bits."""
    lines = (b'{"text": "\\ud800", "n": NaN}\n'
             b'{"text": "\\ud800", "n": 123456789012345678901}\n'
             b'{"text": "\\ud800", "n": 12345678901234567890}\n')
    result = run_chunkd("--input", "ndjson", "--errors", "replace", "--jobs", "1", input=lines)
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        "chunkd: stdin: line 1: malformed JSON: NaN is not a JSON value",
        "chunkd: stdin: line 2: integer 123456789012345678901 is beyond 64 bits, which JSON "
        "tools read inexactly; write it as a string"]
    assert [(r["doc"], r["n"], r["text"]) for r in ndjson(result.stdout)] == [
        (3, 12345678901234567890, "\ufffd")]


# --- NDJSON from a live pipe --------------------------------------------------------------

def _read_records(process: subprocess.Popen, seen: bytearray, count: int,
                  deadline: float = 10.0) -> list[dict]:
    """Read the process's stdout as it comes until ``count`` records are complete (or
    the deadline passes); ``seen`` keeps what was read, across calls."""
    end = time.monotonic() + deadline
    while seen.count(b"\n") < count and (left := end - time.monotonic()) > 0:
        if select.select([process.stdout], [], [], left)[0]:
            data = os.read(process.stdout.fileno(), 65536)
            if not data:
                break
            seen += data
    return ndjson(bytes(seen[:seen.rfind(b"\n") + 1]))


def _line(number: int) -> bytes:
    return orjson.dumps({"id": number, "text": f"Line {number} says something. " * 3}) + b"\n"


OPTIONS = ("--input", "ndjson", "--chars", "40", "--overlap", "0")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ndjson_records_follow_their_lines_while_the_pipe_stays_open(jobs):
    """Ten lines, then a pause with stdin still open: all their records come, in order,
    before any more input (with --jobs 2 too, which batches lines), and again after
    five more lines and half of one; the output is --jobs 1's."""
    process = subprocess.Popen([chunkd_command(), *OPTIONS, "--jobs", jobs, "-q"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    complete, seen = b"", bytearray()
    with process:
        for numbers, tail in ((range(10), b""), (range(10, 15), _line(15)[:20])):
            lines = b"".join(map(_line, numbers))
            process.stdin.write(lines + tail)
            process.stdin.flush()
            complete += lines
            expected = run_chunkd(*OPTIONS, "--jobs", "1", input=complete).stdout
            records = _read_records(process, seen, expected.count(b"\n"))
            assert records == ndjson(expected)
        process.stdin.write(_line(15)[20:])
        process.stdin.close()
        rest = process.stdout.read()
        assert process.wait(timeout=HANG) == 0
    alone = run_chunkd(*OPTIONS, "--jobs", "1", input=complete + _line(15))
    assert bytes(seen) + rest == alone.stdout


def test_ndjson_from_a_pipe_cut_anywhere_gives_the_records_of_one_process():
    """Pieces cut at random places (in a line, between lines, one line longer than a
    read), each followed by a pause until the records of its complete lines are out:
    every pause sends the lines read so far, and a line is parsed only when whole."""
    rng = random.Random(7)
    lines = [_line(n) for n in range(40)]
    lines[12] = b"{broken\n"
    lines[20] = orjson.dumps({"id": 20, "text": "A sentence that goes on. " * 12_000}) + b"\n"
    data = b"".join(lines)
    cuts = sorted(rng.sample(range(1, len(data)), 12)) + [len(data)]
    process = subprocess.Popen([chunkd_command(), *OPTIONS, "--jobs", "2", "-q"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    seen, at = bytearray(), 0
    with process:
        for cut in cuts:
            process.stdin.write(data[at:cut])
            process.stdin.flush()
            at = cut
            complete = data[:data.rfind(b"\n", 0, cut) + 1]
            expected = run_chunkd(*OPTIONS, "--jobs", "1", input=complete).stdout
            assert _read_records(process, seen, expected.count(b"\n")) == ndjson(expected)
        process.stdin.close()
        rest = process.stdout.read()
        assert process.wait(timeout=HANG) == 1  # the broken line
    assert rest == b""
    assert bytes(seen) == run_chunkd(*OPTIONS, "--jobs", "1", input=data).stdout


def test_a_long_ndjson_line_from_a_pipe_costs_what_it_costs_from_a_file(tmp_path):
    """Read from a pipe (here a named one) with --jobs, a line is gathered from many
    reads; the reads must be let go once joined, so that the peak grows as for a file
    (under 3.5 times the line's growth: test_memory's bound)."""
    paragraph = "A sentence of plain ASCII text, repeated. " * 20 + "\n\n"
    peaks = {}
    for megabytes in (10, 40):
        line = (b'{"id": "long", "text": '
                + orjson.dumps(paragraph * (megabytes * 1_000_000 // len(paragraph))) + b'}\n')
        fifo = tmp_path / f"line{megabytes}"
        os.mkfifo(fifo)

        def write(path=fifo, data=line) -> None:
            with open(path, "wb") as stream:
                stream.write(data)

        writer = threading.Thread(target=write)
        writer.start()
        peaks[megabytes] = peak_of(["--input", "ndjson", "--jobs", "2", str(fifo)])
        writer.join(timeout=HANG)
        del line
    assert peaks[40] - peaks[10] < 3.5 * 30, peaks


def test_separators_nested_too_deeply_are_a_usage_error_in_every_command(tmp_path):
    nested = "[" * 2000 + "]" * 2000
    for command in ([], ["watch", str(tmp_path)], ["serve", "--port", "0"]):
        result = run_chunkd(*command, "--separators", nested, input=b"hi")
        assert result.returncode == 2, result.stderr[-300:]
        [line] = result.stderr.decode().splitlines()
        assert line.endswith("error: argument --separators: JSON nested too deeply: '"
                             + "[" * 80 + "'... (4000 code points)")
