"""The filter and the kernel under hostile input: odd names, deep JSON, big
numbers, invalid UTF-8 inside JSON, full and closed outputs, huge sizes, half-built
objects. One line on stderr, the documented exit status, never a traceback, and the
other documents still chunked. Each test failed before its fix."""

from __future__ import annotations

import base64
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgpack
import orjson
import pytest

from command import (FIRST_PROCESS, HANG, chunkd_command, first_process_of, ndjson, run_chunkd,
                     with_faults)
from oracle import corpus_documents


def no_traceback(result: subprocess.CompletedProcess) -> None:
    assert b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_file_names_that_are_not_utf8_are_chunked_and_written_losslessly(tmp_path, jobs):
    raw = b"caf\xe9.txt"
    bad = os.path.join(os.fsencode(tmp_path), raw)
    with open(bad, "wb") as stream:
        stream.write(b"Latin-1 in the name, UTF-8 inside.")
    good = tmp_path / "good.txt"
    good.write_text("A plain name after it.", encoding="utf-8")
    missing = os.path.join(os.fsencode(tmp_path), b"gone\xff.txt")
    result = subprocess.run([chunkd_command(), "--jobs", jobs, bad, good, missing],
                            capture_output=True, timeout=HANG)
    no_traceback(result)
    assert result.returncode == 1
    assert result.stderr.decode() == f"chunkd: {tmp_path}/gone\\xff.txt: No such file or directory\n"
    records = ndjson(result.stdout)
    assert [(r["doc"], r["text"]) for r in records] == [
        ({"bytes": base64.b64encode(bad).decode()}, "Latin-1 in the name, UTF-8 inside."),
        (str(good), "A plain name after it.")]
    packed = subprocess.run([chunkd_command(), "--format", "msgpack", bad], capture_output=True)
    assert [r["doc"] for r in msgpack.Unpacker(__import__("io").BytesIO(packed.stdout))] == [bad]


@pytest.mark.parametrize("depth", [300, 1100])
def test_an_ndjson_line_nested_too_deep_is_one_error_and_the_others_are_chunked(depth):
    deep = b'{"text": "abc", "x": ' + b"[" * depth + b"]" * depth + b"}"
    data = b'{"text": "before"}\n' + deep + b'\n{"text": "after"}\n'
    for jobs in ("1", "2"):
        result = run_chunkd("--input", "ndjson", "--jobs", jobs, input=data)
        no_traceback(result)
        assert result.returncode == 1
        [line] = result.stderr.decode().splitlines()
        assert line.startswith("chunkd: stdin: line 2: ")
        assert [r["text"] for r in ndjson(result.stdout)] == ["before", "after"]


def test_invalid_utf8_inside_an_ndjson_line_names_its_byte_offset():
    data = b'{"text": "good"}\n{"text": "bad \xff here"}\n{"text": "also good"}\n'
    result = run_chunkd("--input", "ndjson", input=data)
    no_traceback(result)
    assert result.returncode == 1
    offset = len(b'{"text": "good"}\n{"text": "bad ')
    assert result.stderr.decode() == (f"chunkd: stdin: line 2: invalid UTF-8 at byte {offset} "
                                      "of the input (use --errors replace to substitute U+FFFD)\n")
    assert [r["text"] for r in ndjson(result.stdout)] == ["good", "also good"]
    replaced = run_chunkd("--input", "ndjson", "--errors", "replace", input=data)
    assert replaced.returncode == 0
    assert [r["text"] for r in ndjson(replaced.stdout)] == ["good", "bad \ufffd here", "also good"]


def test_integers_are_kept_exact_up_to_64_bits_and_refused_beyond():
    data = (b'{"id": 18446744073709551615, "text": "largest unsigned 64-bit id"}\n'
            b'{"id": -9223372036854775808, "text": "smallest signed"}\n'
            b'{"id": 18446744073709551616, "text": "one too many"}\n'
            b'{"id": 7, "text": "mentions 12345678901234567890123 in its text"}\n')
    result = run_chunkd("--input", "ndjson", input=data)
    no_traceback(result)
    assert result.returncode == 1
    assert result.stderr.decode() == (
        "chunkd: stdin: line 3: integer 18446744073709551616 is beyond 64 bits, which JSON "
        "tools read inexactly; write it as a string\n")
    assert b'"doc":18446744073709551615,' in result.stdout
    assert b'"doc":-9223372036854775808,' in result.stdout
    assert [r["doc"] for r in ndjson(result.stdout)] == [2**64 - 1, -2**63, 7]


@pytest.mark.parametrize("where", ["full", "closed"])
def test_output_that_cannot_be_written_is_one_line_and_exit_1(where, tmp_path):
    document = tmp_path / "a.txt"
    document.write_text("Some words to chunk. " * 10_000, encoding="utf-8")
    redirect = "> /dev/full" if where == "full" else ">&-"
    result = subprocess.run(f"'{chunkd_command()}' '{document}' {redirect}", shell=True,
                            capture_output=True, timeout=HANG)
    no_traceback(result)
    assert result.returncode == 1
    expected = ("chunkd: stdout: No space left on device\n" if where == "full"
                else "chunkd: stdout: not open (Bad file descriptor)\n")
    assert result.stderr.decode() == expected


@pytest.mark.parametrize("args,message", [
    (["--chars", str(2**63)], "the size must be at most 1000000000000, got 9223372036854775808"),
    (["--tokens", "99999999999999999999999"], "the size must be at most 1000000000000"),
    (["--chars", "100", "--overlap", str(2**64)], "--overlap 18446744073709551616 is not smaller "
                                                   "than the size (100 chars); write --overlap 99"),
    (["--chars", str(2**64), "--overlap", str(2**63)], "the size must be at most 1000000000000"),
    (["--jobs", "0"], "--jobs must be from 1 to 1024, got 0"),
    (["--size", "10"], "--size is for the window strategies; with --strategy recursive "
                       "write --chars N or --tokens N"),
    (["--strategy", "nope"], "--strategy nope: unknown; choose one of recursive, graphemes, "
                             "words, sentences, sections"),
])
def test_impossible_settings_are_usage_errors(args, message):
    result = run_chunkd(*args)
    no_traceback(result)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines()[-1].startswith(f"chunkd: error: {message}")


KERNEL_ABUSE = """
import chunkd.kernel._kernel as k
outcomes = []
for attempt in (
    lambda: k.RecursiveSplitter.__new__(k.RecursiveSplitter).feed("x"),
    lambda: k.TokenCounter.__new__(k.TokenCounter).count("x"),
    lambda: k.TokenCounter(len, bytes(0x110000), 0),
    lambda: k.TokenCounter(len, bytes(0x110000), 4, cache_entries=0),
    lambda: k.TokenCounter(len, b"short", 4),
    lambda: k.TokenCounter(None, bytes(0x110000), 4),
    lambda: k.RecursiveSplitter(10, 11),
    lambda: k.RecursiveSplitter(0, 0),
    lambda: k.RecursiveSplitter(10, 2).feed(None),
    lambda: k.RecursiveSplitter(10, 2, unit="tokens"),
    lambda: k.TokenCounter(lambda s: [], bytes(0x110000), 4).count("abc"),
):
    try:
        attempt()
        outcomes.append("no error")
    except (TypeError, ValueError) as error:
        outcomes.append(type(error).__name__)
print(outcomes)
"""


def test_the_kernel_refuses_misuse_without_crashing_the_interpreter():
    result = subprocess.run([sys.executable, "-c", KERNEL_ABUSE], capture_output=True,
                            text=True, timeout=HANG)
    assert result.returncode == 0, (result.returncode, result.stderr)  # no SIGSEGV, SIGFPE
    assert eval(result.stdout) == ["TypeError", "TypeError", "ValueError", "ValueError",
                                   "ValueError", "TypeError", "ValueError", "ValueError",
                                   "TypeError", "TypeError", "ValueError"]


def test_a_failed_document_leaves_no_state_behind_for_the_next(tmp_path):
    """A document that fails midway (invalid UTF-8 after the first block) must not
    leak its unfinished chunk into the next document's chunks."""
    bad = tmp_path / "bad.txt"
    bad.write_bytes(("x" * 300_000).encode() + b"\xff")   # fails after a first block
    good = tmp_path / "good.txt"
    good.write_text("The next document.", encoding="utf-8")
    result = run_chunkd("--chars", "1000000", "--jobs", "1", str(bad), str(good))
    assert result.returncode == 1
    assert [r["text"] for r in ndjson(result.stdout) if r["doc"] == str(good)] == \
        ["The next document."]


def test_a_closed_reader_midway_through_jobs_output_ends_quietly(tmp_path):
    paths = []
    for n in range(40):
        path = tmp_path / f"{n}.txt"
        path.write_text(f"Document {n}. " * 5000, encoding="utf-8")
        paths.append(f"'{path}'")
    pipeline = subprocess.run(f"set -o pipefail; '{chunkd_command()}' --jobs 2 --chars 100 "
                              f"{' '.join(paths)} | head -1", shell=True, capture_output=True,
                              timeout=HANG, executable="/bin/bash")
    assert (pipeline.returncode, pipeline.stderr) == (0, b"")
    assert orjson.loads(pipeline.stdout)["index"] == 0


@pytest.mark.parametrize("command, module", [
    ([], "chunkd.cli.filter"),                       # the filter's own modules
    ([], "chunkd.kernel.chosen"),                         # the splitting core, imported by them
    (["preview", "-"], "chunkd.web.preview"),        # a subcommand's
    (["eval", "-", "--questions", "-"], "chunkd.evaluate.command"),
])
def test_ctrl_c_during_start_up_is_status_130_without_a_traceback(command, module):
    """A Ctrl-C that arrives while the command is still importing its modules (a fault
    injected into the chunkd process) ends it as a Ctrl-C later would."""
    env = with_faults({"interrupt_importing": module})
    result = subprocess.run([chunkd_command(), *command], input=b"Some text.",
                            capture_output=True, env=env, timeout=HANG)
    assert (result.returncode, result.stderr, result.stdout) == (130, b"", b"")


def test_a_bug_is_one_line_with_status_70_and_never_its_message(tmp_path):
    """An exception chunkd never expects (injected): one line naming its type and where
    it was raised, status 70, no traceback and not the message, which may hold a secret."""
    (tmp_path / "a-bug.txt").write_text("Meets a bug.", encoding="utf-8")
    env = with_faults({"bug_suffix": "bug.txt"})
    result = subprocess.run([chunkd_command(), "a-bug.txt"], cwd=tmp_path,
                            capture_output=True, env=env, timeout=HANG)
    assert result.returncode == 70
    line = result.stderr.decode()
    assert re.fullmatch(r"chunkd: a bug in chunkd \(ZeroDivisionError at chunkd/[\w/]+\.py:"
                        r"\d+\); please report it\n", line), line


@pytest.mark.parametrize("argv", [
    ["--bogus"], ["--separators", '["a", 1]'], ["--format", "parquet"],
    ["--input", "parquet"], ["--chars", "10", "--tokens", "10"],
    ["watch"], ["watch", "--bogus", "."], ["eval", "--bogus"], ["serve", "--port", "x"],
    ["preview", "--bogus"],
])
def test_a_usage_error_is_one_line(argv):
    result = subprocess.run([chunkd_command(), *argv], input=b"Some text.",
                            capture_output=True, timeout=HANG)
    assert result.returncode == 2
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chunkd"), lines


@pytest.mark.parametrize("command", [[], ["extract"], ["eval"], ["preview"], ["serve"],
                                     ["watch", "."], ["sync", ".", "--sink", "store"]])
@pytest.mark.parametrize("value", ["0", str(2**64), "1e6"])
def test_max_bytes_out_of_range_is_a_usage_error(command, value):
    """Every command's --max-bytes takes 1 to 10^12 bytes: 2^64 made a traceback out of
    the extraction's JSON (a 64-bit number), in every command."""
    result = subprocess.run([chunkd_command(), *command, "--max-bytes", value], input=b"Text.",
                            capture_output=True, timeout=HANG)
    assert result.returncode == 2
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and "argument --max-bytes: " in lines[0], lines


# --- a --jobs worker that dies ------------------------------------------------------

def jobs_files(folder) -> list[str]:
    """Eight files of about 300 KB: batches of three or four, several in flight at once
    with --jobs 2."""
    english = next(path for path in corpus_documents() if path.parent.name == "en-policy")
    text = english.read_text(encoding="utf-8")
    names = [f"{number}{'x' if number in (1, 6) else ''}.txt" for number in range(8)]
    for number, name in enumerate(names):
        (folder / name).write_text(f"File {number}.\n\n" + text * (300_000 // len(text)),
                                   encoding="utf-8")
    return names


def with_jobs_crash(folder, names, suffix: str, once: str | None) -> subprocess.CompletedProcess:
    env = with_faults({"jobs_crash": {"suffix": suffix, "once": once}})
    return subprocess.run([chunkd_command(), "--jobs", "2", "--ids", *names], cwd=folder,
                          capture_output=True, timeout=HANG, env=env)


@pytest.mark.parametrize("suffix", ["3.txt", "x.txt"])
def test_a_document_whose_jobs_worker_is_killed_once_is_chunked_again(tmp_path, suffix):
    """A --jobs worker killed once (the OOM killer) while it holds a batch: each of the
    batch's documents is chunked again alone in a fresh pool, and the batches in flight
    go to it: the output is one process's, whole and in order."""
    names = jobs_files(tmp_path)
    alone = run_chunkd("--ids", *names, cwd=tmp_path)
    killed = with_jobs_crash(tmp_path, names, suffix, str(tmp_path / "killed"))
    assert (tmp_path / "killed").exists()
    assert (killed.returncode, killed.stderr) == (0, b"")
    assert killed.stdout == alone.stdout


@pytest.mark.parametrize("suffix, dying", [("3.txt", ["3.txt"]), ("x.txt", ["1x.txt", "6x.txt"])])
def test_a_document_that_kills_its_jobs_worker_each_time_is_one_error(tmp_path, suffix, dying):
    """A document whose worker dies each time it is given, in whatever batch: one line
    names it, status 1, and every other document is chunked, in order."""
    names = jobs_files(tmp_path)
    others = run_chunkd("--ids", *(name for name in names if name not in dying), cwd=tmp_path)
    killed = with_jobs_crash(tmp_path, names, suffix, None)
    no_traceback(killed)
    assert killed.returncode == 1
    assert killed.stderr.decode().splitlines() == [
        f"chunkd: {name}: its --jobs worker process ended abruptly (killed, or out of "
        "memory), also with the document alone: not chunked" for name in dying]
    assert killed.stdout == others.stdout


# --- a container's first process ------------------------------------------------------

@pytest.mark.parametrize("output", [(), ("--format", "parquet", "--output", "out.parquet")],
                         ids=["ndjson", "parquet"])
def test_sigterm_ends_the_filter_as_a_containers_first_process(tmp_path, output):
    """The kernel ignores, in PID 1, a signal it has no handler for: ``docker stop``'s
    SIGTERM ended the filter only with the SIGKILL that follows. It now ends at once,
    with the status a shell gives a process SIGTERM kills (Parquet's hidden file
    removed first)."""
    starter = subprocess.Popen([*FIRST_PROCESS, chunkd_command(), *output], cwd=tmp_path,
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    filter_process = first_process_of(starter)
    starter.stdin.write(b"some text to chunk. " * 1000)
    starter.stdin.flush()  # stdin stays open: the run is in the middle of its input
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline and output and not list(tmp_path.glob(".out.parquet.*")):
        time.sleep(0.05)
    assert not output or list(tmp_path.glob(".out.parquet.*")), "no hidden output file"
    time.sleep(0.5)  # past the start, into the input
    os.kill(filter_process, signal.SIGTERM)
    assert starter.wait(timeout=HANG) == 128 + signal.SIGTERM
    starter.stdin.close()
    assert starter.stderr.read() == b""
    assert list(tmp_path.iterdir()) == []


def on_a_terminal(command: list[str], typed: list[bytes]) -> tuple[int, bytes]:
    """``command`` run on a terminal of its own (``docker run -it``), in its foreground
    process group, fed ``typed`` (each part once the command is reading): its exit
    status and all it wrote there."""
    import pty

    pid, terminal = pty.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    written = bytearray()
    try:
        for part in typed:
            deadline = time.monotonic() + HANG
            while not reading_the_terminal(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            os.write(terminal, part)
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            ended, status = os.waitpid(pid, os.WNOHANG)
            if select.select([terminal], [], [], 0.05)[0]:
                try:
                    written += os.read(terminal, 65536)
                except OSError:  # EIO: the terminal's last user ended
                    pass
            if ended:
                return os.waitstatus_to_exitcode(status), bytes(written)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError(f"still running after 30 s: {bytes(written)!r}")
    finally:
        os.close(terminal)


def reading_the_terminal(pid: int) -> bool:
    """Whether a process under ``pid`` waits in a terminal's read."""
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            if open(f"/proc/{current}/wchan").read() in ("n_tty_read", "wait_woken"):
                return True
            pids += map(int, open(f"/proc/{current}/task/{current}/children").read().split())
        except OSError:
            pass
    return False


def test_the_filter_reads_its_terminal_as_a_containers_first_process():
    """``docker run -it``: the command, in a child of PID 1, reads what is typed (in a
    process group of its own, it must be the terminal's foreground one, or reading
    would stop it), and Ctrl-D ends the input."""
    status, written = on_a_terminal([*FIRST_PROCESS, chunkd_command(), "--chars", "100"],
                                    [b"Typed text.\n", b"\x04"])
    assert status == 0, written
    assert b'"text":"Typed text."' in written and b"Traceback" not in written


def test_ctrl_c_on_the_terminal_ends_the_filter_as_a_containers_first_process():
    """Ctrl-C on the terminal ends the command: status 130, no traceback."""
    status, written = on_a_terminal([*FIRST_PROCESS, chunkd_command(), "--chars", "100"],
                                    [b"Typed text.\n", b"\x03"])
    assert status == 130, written
    assert b"Traceback" not in written


def test_a_jobs_worker_killed_while_the_pool_is_idle_costs_nothing(tmp_path):
    """A worker killed while the input pauses (NDJSON on a pipe): the next batch is
    handed to a pool already broken, which refused it with a traceback, and the rest of
    the input was lost; it now goes to a fresh pool, and the output is one process's."""
    text = next(path for path in corpus_documents() if path.parent.name == "en-policy") \
        .read_text(encoding="utf-8")
    lines = [orjson.dumps({"id": f"x{number}", "text": f"{number}. {text}"}) + b"\n"
             for number in range(6)]
    alone = run_chunkd("--input", "ndjson", input=b"".join(lines))
    process = subprocess.Popen([chunkd_command(), "--jobs", "2", "--input", "ndjson"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    output = bytearray()
    reader = threading.Thread(target=read_into, args=(process.stdout, output))
    reader.start()
    process.stdin.write(b"".join(lines[:3]))
    process.stdin.flush()
    deadline = time.monotonic() + HANG
    while b'"doc":"x2"' not in output and time.monotonic() < deadline:
        time.sleep(0.05)  # the first three are written: the pool is idle, waiting
    workers = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    assert b'"doc":"x2"' in output and len(workers) == 2
    os.kill(int(workers[0]), signal.SIGKILL)
    time.sleep(0.5)  # the pool's own thread finds it broken
    process.stdin.write(b"".join(lines[3:]))
    process.stdin.close()
    assert process.wait(timeout=HANG) == 0, process.stderr.read()
    reader.join()
    assert process.stderr.read() == b""
    assert bytes(output) == alone.stdout


def read_into(stream, output: bytearray) -> None:
    """Append what ``stream`` gives to ``output`` as it comes, until its end."""
    for block in iter(lambda: stream.read1(1 << 16), b""):
        output.extend(block)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_signal_that_ends_a_jobs_run_leaves_no_temporary_folder(tmp_path, number):
    """The workers' answers go through a folder in TMPDIR: a signal that ends the run
    removes it before the process ends, as it ends (killed by that signal)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    names = jobs_files(tmp_path)
    process = subprocess.Popen([chunkd_command(), "--jobs", "2", *names * 20], cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env=dict(os.environ, TMPDIR=str(temporary)))
    deadline = time.monotonic() + HANG
    while not list(temporary.glob("chunkd-jobs-*/*")) and time.monotonic() < deadline:
        time.sleep(0.01)  # an answer is waiting to be read: the run is under way
    assert list(temporary.glob("chunkd-jobs-*/*")), "no answer was ever written"
    process.send_signal(number)
    assert process.wait(timeout=HANG) == -number
    assert process.stderr.read() == b""
    assert list(temporary.iterdir()) == []


def test_a_full_tmpdir_costs_a_jobs_run_nothing(tmp_path):
    """The workers' answers go through files in TMPDIR; on a TMPDIR full (a 64 KiB
    filesystem of the test's own, in a mount namespace of its own), through the pool's
    pipe: the output is whole and in order, where it was a traceback."""
    names = jobs_files(tmp_path)
    alone = run_chunkd("--ids", *names, cwd=tmp_path)
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    full = subprocess.run(
        ["unshare", "--mount", "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$0" && '
         'TMPDIR="$0" exec "$@"', str(tiny), chunkd_command(), "--jobs", "2", "--ids", *names],
        cwd=tmp_path, capture_output=True, timeout=HANG)
    assert (full.returncode, full.stderr) == (0, b"")
    assert full.stdout == alone.stdout


def test_a_jobs_run_needs_no_temporary_folder(tmp_path):
    """Where no temporary folder can be made (TMPDIR, /tmp, /var/tmp and the working
    folder read-only, in a mount namespace of the test's own), the workers' answers come
    through the pool's pipe: the output is whole and in order, where it was a
    traceback before any document was read."""
    import tempfile

    names = jobs_files(tmp_path)
    alone = run_chunkd("--ids", *names, cwd=tmp_path)
    folders = {tempfile.gettempdir(), "/tmp", "/var/tmp", str(tmp_path)}
    read_only = subprocess.run(
        ["unshare", "--mount", "sh", "-c",
         'while [ "$1" != -- ]; do mount --bind "$1" "$1" && '
         'mount -o remount,bind,ro "$1" || exit 99; shift; done; shift; exec "$@"',
         "sh", *sorted(folder for folder in folders if os.path.isdir(folder)), "--",
         chunkd_command(), "--jobs", "2", "--ids", *names],
        cwd=tmp_path, capture_output=True, timeout=HANG)
    assert (read_only.returncode, read_only.stderr) == (0, b"")
    assert read_only.stdout == alone.stdout
