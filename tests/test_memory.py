"""Streaming: 200+ MB through the installed chunkd in bounded memory (the OS's accounting)."""

from __future__ import annotations

import subprocess
import sys
import threading

import orjson
import pytest

from command import chunkd_command
from oracle import corpus_documents

pytestmark = pytest.mark.slow

STREAM_BYTES = 210 * 1024 * 1024
PEAK_LIMIT_MB = 100


def corpus_text(keep_blank_lines: bool) -> bytes:
    text = "\n".join(p.read_text(encoding="utf-8") for p in corpus_documents())
    if not keep_blank_lines:  # one endless paragraph: the top separator never occurs
        text = "\n".join(line for line in text.splitlines() if line.strip())
    return text.encode()


def no_whitespace_text() -> bytes:
    return bytes(range(33, 127)) * 10_000 + "中文标点符号没有空格".encode() * 10_000


# Linux counts a child's memory from before its exec (the forked copy of its parent)
# in its peak RSS, so chunkd is started from a small Python that reports the peak.
MEASURE = """import resource, subprocess, sys
status = subprocess.call(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(status)"""


def stream_through_chunkd(args: list[str], block: bytes) -> tuple[int, int, int]:
    """Pipe ``block`` repeated to STREAM_BYTES into chunkd; return its exit status,
    the chunk lines it wrote, and its peak RSS in MB."""
    process = subprocess.Popen([sys.executable, "-c", MEASURE, chunkd_command(), *args],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)

    def write() -> None:
        sent = 0
        while sent < STREAM_BYTES:
            process.stdin.write(block)
            sent += len(block)
        process.stdin.close()

    writer = threading.Thread(target=write)
    writer.start()
    lines = sum(chunk.count(b"\n") for chunk in iter(lambda: process.stdout.read(1 << 20), b""))
    writer.join()
    peak_mb = int(process.stderr.read().split()[-1])
    return process.wait(), lines, peak_mb


@pytest.mark.parametrize("args,text", [
    (["--chars", "1000"], "paragraphs"),
    (["--chars", "1000"], "no blank line"),
    (["--chars", "1000"], "no whitespace"),
    (["--tokens", "300"], "no blank line"),
])
def test_peak_memory_stays_bounded(args, text):
    block = {"paragraphs": lambda: corpus_text(True),
             "no blank line": lambda: corpus_text(False),
             "no whitespace": no_whitespace_text}[text]()
    status, lines, peak_mb = stream_through_chunkd(args, block)
    assert status == 0
    assert lines > STREAM_BYTES // 4000   # it did chunk everything, not stop early
    assert peak_mb < PEAK_LIMIT_MB, f"peak RSS {peak_mb} MB"


def peak_of(args: list[str]) -> int:
    """Run the installed chunkd on files; its peak RSS in MB (output discarded)."""
    measure = MEASURE.replace("subprocess.call(sys.argv[1:])",
                              "subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)")
    result = subprocess.run([sys.executable, "-c", measure, chunkd_command(), *args],
                            capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return int(result.stderr.split()[-1])


def write_repeated(path, block: bytes, megabytes: int) -> str:
    with open(path, "wb") as stream:
        for _ in range(megabytes * 1_000_000 // len(block) + 1):
            stream.write(block)
    return str(path)


def test_jobs_memory_does_not_grow_with_the_largest_document(tmp_path):
    """--jobs streams a large document in the main process: a 200 MB file among small
    ones costs no more memory than a 50 MB one (workers render only small ones)."""
    small = tmp_path / "small.txt"
    small.write_text("A small document. " * 200, encoding="utf-8")
    block = corpus_text(True)
    peaks = {}
    for megabytes in (50, 200):
        big = write_repeated(tmp_path / f"big{megabytes}.txt", block, megabytes)
        peaks[megabytes] = peak_of(["--jobs", "2", str(small), big, str(small), str(small)])
        (tmp_path / f"big{megabytes}.txt").unlink()
    assert peaks[200] - peaks[50] < 10, peaks
    assert peaks[200] < PEAK_LIMIT_MB, peaks


def test_a_long_ndjson_line_costs_about_three_times_its_size(tmp_path):
    """A JSON line must be held whole to be parsed; then its text is chunked a block at
    a time. For ASCII text the peak grows by under 3.5 times the line's growth (reading
    the line, then its bytes and its text together); before, chunks and output of the
    whole line were made at once (six times)."""
    paragraph = "A sentence of plain ASCII text, repeated. " * 20 + "\n\n"
    peaks = {}
    for megabytes in (50, 200):
        path = tmp_path / f"line{megabytes}.ndjson"
        text = paragraph * (megabytes * 1_000_000 // len(paragraph))
        path.write_bytes(b'{"id": "before", "text": "x"}\n{"id": "long", "text": '
                         + orjson.dumps(text) + b'}\n{"id": "after", "text": "y"}\n')
        del text
        peaks[megabytes] = max(peak_of(["--input", "ndjson", "--jobs", jobs, str(path)])
                               for jobs in ("1", "2"))
        path.unlink()
    assert peaks[200] - peaks[50] < 3.5 * 150, peaks
