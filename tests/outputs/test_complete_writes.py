"""Every write is complete or an error, and no writer holds a whole output at once.

A raw stdout (``python -u``, ``PYTHONUNBUFFERED=1``) may write only part of what it is
given: at most 2 GiB - 4 KiB at once on Linux, less when a signal or a file size limit
cuts the write short. Writers hand it at most about a MiB at a time, and what is not
written is written again until it is, or the output fails with one line on stderr.
"""

from __future__ import annotations

import io
import itertools
import os
import resource
import subprocess
import sys
import time

import msgpack
import orjson
import pytest

from command import HANG, chunkd_command, ndjson, run_chunkd
from chunkd.processes.stdio import Output, OutputError
from chunkd.settings import CommandParser, add_settings_options, parse_with_settings
from chunkd.strategies import build
from chunkd.outputs.writers import BATCH_BYTES, make_writer

FORMATS = ["ndjson", "json", "msgpack"]


class ShortWrites(io.RawIOBase):
    """A raw stream that writes a few bytes at a time, and sometimes none (returning 0,
    or None as a non-blocking stream does); it keeps what it was given."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.counts = itertools.cycle([3, 0, 1, None, 7, 2])

    def writable(self) -> bool:
        return True

    def write(self, data) -> int | None:
        count = next(self.counts)
        if count is None:
            return None
        self.data += bytes(data[:count])
        return min(count, len(data))


class Recording(io.RawIOBase):
    """A raw stream that writes everything and records the size of each write."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.sizes: list[int] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.data += data
        self.sizes.append(len(data))
        return len(data)


def chunks_of(text: str, *options: str) -> list:
    parser = CommandParser(prog="chunkd")
    add_settings_options(parser)
    _, settings = parse_with_settings(parser, list(options))
    chunker = build(settings)
    return chunker.feed(text) + chunker.finish()


def written(format: str, stream, chunks: list) -> None:
    """One document of ``chunks`` written in ``format`` to ``stream``, in one call."""
    writer = make_writer(format, stream, named=True)
    writer.begin("doc.md", {})
    writer.write(chunks)
    writer.end()
    writer.close()


def decoded(format: str, data: bytes) -> list:
    if format == "msgpack":
        return list(msgpack.Unpacker(io.BytesIO(data)))
    return ndjson(data)


@pytest.mark.parametrize("format", FORMATS)
def test_a_stream_that_writes_short_still_gets_every_byte(format):
    chunks = chunks_of("Some words, a sentence. " * 400, "--chars", "60", "--parent-chars", "300")
    whole = io.BytesIO()
    written(format, whole, chunks)
    short = ShortWrites()
    written(format, Output(short), chunks)
    assert bytes(short.data) == whole.getvalue()
    assert len(decoded(format, bytes(short.data))) == (1 if format == "json" else len(chunks))


def test_a_stream_that_never_takes_a_byte_is_an_output_error_not_a_hang():
    class Stuck(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data) -> int:
            return 0

    with pytest.raises(OutputError, match="^stdout: writes make no progress$"):
        Output(Stuck()).write(b"some bytes")


@pytest.mark.parametrize("format", FORMATS)
def test_no_write_is_much_larger_than_a_batch(format):
    """A write call of 100,000 chunks (about 8 MB of records) reaches the stream a
    batch at a time, whatever the format."""
    chunks = chunks_of("word " * 400_000, "--chars", "20", "--overlap", "0")
    stream = Recording()
    written(format, stream, chunks)
    assert sum(stream.sizes) > 6 * BATCH_BYTES
    assert max(stream.sizes) <= BATCH_BYTES + 200  # a batch and the record that filled it
    assert len(decoded(format, bytes(stream.data))) == (1 if format == "json" else len(chunks))


def limit_file_size(size: int):
    """For ``preexec_fn``: files the process writes stop at ``size`` bytes (a write
    past it writes up to it; the next one fails with EFBIG, Python ignoring SIGXFSZ)."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def run_unbuffered(path, out, *args: str, preexec_fn=None) -> subprocess.CompletedProcess:
    """The installed chunkd with a raw stdout, as in container images, into ``out``."""
    with open(out, "wb") as stdout:
        return subprocess.run([chunkd_command(), *args, str(path)], stdout=stdout,
                              stderr=subprocess.PIPE, timeout=HANG, preexec_fn=preexec_fn,
                              env=dict(os.environ, PYTHONUNBUFFERED="1"))


@pytest.mark.parametrize("format", FORMATS)
def test_a_write_cut_short_is_written_on_or_fails_never_lost(tmp_path, format):
    """A file size limit cuts stdout's one write (about 300 KB of records) short: the
    rest is written again, which fails, and chunkd says so (exit 1), not exit 0 with
    the records cut."""
    path = tmp_path / "doc.md"
    path.write_text("# Title\n\n" + "word " * 40_000 + "\n", encoding="utf-8")
    complete = run_unbuffered(path, tmp_path / "complete", "--chars", "200", "--format", format)
    assert complete.returncode == 0, complete.stderr
    assert (tmp_path / "complete").stat().st_size > 200_000
    cut = run_unbuffered(path, tmp_path / "cut", "--chars", "200", "--format", format,
                         preexec_fn=limit_file_size(100_000))
    assert (cut.returncode, cut.stderr) == (1, b"chunkd: stdout: File too large\n")


def test_unbuffered_stdout_gets_every_record(tmp_path):
    """Many documents through a raw stdout, with --jobs and without: every record is
    whole, and the output is what a buffered stdout gets."""
    paths = []
    for number in range(6):
        path = tmp_path / f"{number}.md"
        path.write_text(f"# Part {number}\n\n" + "Some words here. " * (3000 * number + 1),
                        encoding="utf-8")
        paths.append(str(path))
    buffered = run_chunkd("--chars", "100", *paths)
    assert buffered.returncode == 0, buffered.stderr
    for jobs in ("1", "2"):
        with open(tmp_path / "out", "wb") as stdout:
            raw = subprocess.run([chunkd_command(), "--chars", "100", "--jobs", jobs, *paths],
                                 stdout=stdout, stderr=subprocess.PIPE, timeout=HANG,
                                 env=dict(os.environ, PYTHONUNBUFFERED="1"))
        assert (raw.returncode, raw.stderr) == (0, b"")
        output = (tmp_path / "out").read_bytes()
        assert output == buffered.stdout
        assert len(ndjson(output)) == len(ndjson(buffered.stdout))


MEASURE = """import resource, subprocess, sys
status = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(status)"""


def test_format_json_writes_a_large_document_in_bounded_memory(tmp_path):
    """8 MiB in 20-character chunks: about 47 MB of --format json, one document, which
    is spooled as it is made rather than held (the records would take 300 MB)."""
    path = tmp_path / "big.txt"
    line = b"alpha beta gamma delta epsilon zeta eta theta iota kappa. " * 1000 + b"\n\n"
    with open(path, "wb") as stream:
        for _ in range(8 * 2**20 // len(line)):
            stream.write(line)
    result = subprocess.run([sys.executable, "-c", MEASURE, chunkd_command(), "--format",
                             "json", "--chars", "20", "--overlap", "0", "-q", str(path)],
                            capture_output=True, timeout=HANG)
    assert result.returncode == 0, result.stderr[-2000:]
    peak_mb = int(result.stderr.split()[-1])
    assert peak_mb < 100, f"peak RSS {peak_mb} MB"


def test_format_json_documents_are_the_records_of_ndjson(tmp_path):
    """Spooled or not, --format json holds the NDJSON records, parents first."""
    path = tmp_path / "doc.md"
    path.write_text("Some words, a sentence. " * 60_000, encoding="utf-8")
    args = ("--chars", "40", "--parent-chars", "400", str(path))
    document, = ndjson(run_chunkd("--format", "json", *args).stdout)
    records = ndjson(run_chunkd(*args).stdout)
    assert [{"doc": str(path), **chunk} for chunk in document["chunks"]] == records
    assert [parent["index"] for parent in document["parents"]] == sorted(
        {record["parent"]["index"] for record in records})
    assert orjson.dumps(document).startswith(b'{"doc":')


def random_words(count: int) -> str:
    """Words that compress badly, so that a Parquet file of them is large."""
    import random
    chooser = random.Random(7)
    return " ".join("".join(chooser.choices("abcdefghijklmnopqrstuvwxyz", k=chooser.randint(2, 9)))
                    for _ in range(count))


def test_a_parquet_output_cut_short_is_an_error_and_leaves_nothing(tmp_path):
    """Arrow writes a Parquet file on until each write is whole: past a file size
    limit, the run fails with one line and leaves no file, hidden or not."""
    path = tmp_path / "doc.md"
    path.write_text(random_words(80_000), encoding="utf-8")
    out = tmp_path / "out" / "chunks.parquet"
    out.parent.mkdir()
    result = subprocess.run([chunkd_command(), "--format", "parquet", "--output", str(out),
                             "--chars", "100", str(path)], capture_output=True, timeout=HANG,
                            preexec_fn=limit_file_size(100_000))
    assert (result.returncode, result.stderr) == (1, f"chunkd: {out}: File too large\n".encode())
    assert os.listdir(out.parent) == []


@pytest.mark.parametrize("words,reason", [
    (50_000, "File too large"),  # about 800 KB of records with ids: the result file fails
    (300_000, "the temporary file of a document's records: File too large"),  # 3 MB
])
def test_a_daemon_result_cut_short_is_a_failure_and_no_partial_result(inbox, watch, words,
                                                                      reason):
    """A result, or the spool of its records, that the file size limit cuts short is
    written on, fails as the environment's fault, and is tried again later: no result,
    partial or whole, and no temporary file is left."""
    (inbox / "doc.md").write_text(random_words(words), encoding="utf-8")
    watcher = watch(inbox, "--chars", "100", preexec_fn=limit_file_size(200_000))
    watcher.wait_for(lambda: watcher.lines("failed doc.md"), what="the failure")
    assert watcher.lines("failed doc.md")[0] == (
        f"failed doc.md: cannot write its result: {reason}; trying again in 5 s")
    assert sorted(os.listdir(inbox)) == [".chunkd-lock", "doc.md"]
    assert watcher.stop() == 0


def test_format_json_whose_spool_fails_is_one_line_and_exit_1(tmp_path):
    """--format json spools a large document's records in TMPDIR: when that file
    cannot be written, the run says so in one line and exits 1."""
    path = tmp_path / "doc.md"
    path.write_text(random_words(300_000), encoding="utf-8")
    spool = tmp_path / "spool"
    spool.mkdir()
    result = subprocess.run([chunkd_command(), "--format", "json", "--chars", "100",
                             str(path)], capture_output=True, timeout=HANG,
                            preexec_fn=limit_file_size(200_000),
                            env=dict(os.environ, TMPDIR=str(spool)))
    assert (result.returncode, result.stderr) == (
        1, b"chunkd: the temporary file of a document's records: File too large\n")
    assert os.listdir(spool) == []


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_a_non_blocking_stdout_that_fills_up_is_waited_for(tmp_path, unbuffered):
    """Another process may make a shared pipe non-blocking (node and ssh do): when it
    is full, chunkd waits until it can write again, and loses nothing."""
    import fcntl
    import termios

    path = tmp_path / "doc.md"
    path.write_text("Some words here. " * 20_000, encoding="utf-8")
    expected = run_chunkd("--chars", "200", str(path)).stdout
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    capacity = fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ)
    assert len(expected) > 2 * capacity
    env = dict(os.environ, **({"PYTHONUNBUFFERED": "1"} if unbuffered else {}))
    process = subprocess.Popen([chunkd_command(), "--chars", "200", str(path)],
                               stdout=write_end, stderr=subprocess.PIPE, env=env)
    os.close(write_end)
    try:
        # Only once the pipe is full (the next write cannot go through) is it read.
        deadline = time.monotonic() + HANG
        pending = bytearray(4)
        while process.poll() is None:
            fcntl.ioctl(read_end, termios.FIONREAD, pending)
            if int.from_bytes(pending, sys.byteorder) >= capacity:
                break
            assert time.monotonic() < deadline, "the pipe never filled"
            time.sleep(0.01)
        with open(read_end, "rb") as pipe:
            output = pipe.read()
        assert (process.wait(timeout=HANG), process.stderr.read()) == (0, b"")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert output == expected
