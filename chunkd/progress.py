"""A progress line on stderr for long runs: bytes read and rate, only on a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts input bytes; redraws ``chunkd: 1.2 GB read, 310 MB/s`` at most a few
    times a second while ``stream`` is a terminal, and does nothing otherwise."""

    INTERVAL = 0.25

    def __init__(self, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled and self.stream.isatty()
        self.started = self.drawn = time.monotonic()
        self.total = 0
        self.shown = False

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if self.enabled and (now := time.monotonic()) - self.drawn >= self.INTERVAL:
            self.drawn = now
            rate = self.total / max(now - self.started, 1e-9)
            self.stream.write(f"\rchunkd: {_size(self.total)} read, {_size(rate)}/s\x1b[K")
            self.stream.flush()
            self.shown = True

    def close(self) -> None:
        """Erase the line, so that what follows on stderr starts clean."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def _size(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")
