"""Window strategies stream 200+ MB through the installed chunkd in bounded memory."""

from __future__ import annotations

import pytest

from memory import STREAM_BYTES, corpus_text, stream_through_chunkd

pytestmark = pytest.mark.slow

#: The target for a 1 GiB stream (the benchmark measures that one).
PEAK_LIMIT_MB = 64


@pytest.mark.parametrize("strategy", ["words", "sentences"])
def test_peak_memory_stays_under_64_mb(strategy):
    status, lines, peak_mb = stream_through_chunkd(["--strategy", strategy],
                                                   corpus_text(keep_blank_lines=True))
    assert status == 0
    assert lines > STREAM_BYTES // 10_000   # it did chunk everything, not stop early
    assert peak_mb < PEAK_LIMIT_MB, f"peak RSS {peak_mb} MB"
