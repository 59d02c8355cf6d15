"""Streaming: 200+ MB through the installed chunkd in bounded memory (the OS's accounting)."""

from __future__ import annotations

import orjson
import pytest

from memory import STREAM_BYTES, corpus_text, peak_of, stream_through_chunkd

pytestmark = pytest.mark.slow

PEAK_LIMIT_MB = 100


def no_whitespace_text() -> bytes:
    return bytes(range(33, 127)) * 10_000 + "中文标点符号没有空格".encode() * 10_000


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
