"""A progress line on stderr for long runs, only on a terminal: the fraction done and
the time left where the inputs' size is known (regular files), else bytes read and rate."""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """Counts input bytes; redraws ``chunkd: 45% of 1.2 GB, 310 MB/s, 4 s left`` (or,
    of an unknown total, ``chunkd: 1.2 GB read, 310 MB/s``) when the first bytes come,
    then at most a few times a second, while ``stream`` is a terminal; it does nothing
    otherwise."""

    INTERVAL = 0.25

    def __init__(self, stream: TextIO | None = None, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled and self.stream.isatty()
        self.clock = clock
        self.started = clock()
        self.drawn: float | None = None
        self.done = 0
        #: The bytes to read, where known (``expect``).
        self.total: int | None = None
        self.shown = False

    def expect(self, total: int | None) -> None:
        """Set how many bytes the inputs hold (None: unknown)."""
        self.total = total

    def add(self, data: bytes) -> None:
        """Count a block read."""
        self.advance(len(data))

    def advance(self, count: int) -> None:
        """Count ``count`` more bytes done."""
        self.done += count
        if not self.enabled:
            return
        now = self.clock()
        if self.drawn is None or now - self.drawn >= self.INTERVAL:
            self.drawn = now
            self.stream.write(f"\rchunkd: {self.line(now - self.started)}\x1b[K")
            self.stream.flush()
            self.shown = True

    def line(self, elapsed: float) -> str:
        """What the line says after ``elapsed`` seconds (the rate only once it means
        something: not at the very first block)."""
        rate = self.done / elapsed if elapsed >= self.INTERVAL else None
        if self.total is None or self.total == 0:
            return f"{_size(self.done)} read" + (f", {_size(rate)}/s" if rate else "")
        done = min(self.done, self.total)
        line = f"{100 * done // self.total}% of {_size(self.total)}"
        if rate:
            line += f", {_size(rate)}/s, {_duration((self.total - done) / rate)} left"
        return line

    def close(self) -> None:
        """Erase the line, so that what follows on stderr starts clean."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def input_size(paths: list[str]) -> int | None:
    """The bytes of the inputs the command line names (none or ``-``: stdin) where
    every one is a regular file, else None (a pipe's size is unknown)."""
    total = 0
    for path in paths or ["-"]:
        try:
            st = os.fstat(sys.stdin.fileno()) if path == "-" else os.stat(path)
        except (OSError, ValueError, AttributeError):  # unreadable, or stdin closed
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        total += st.st_size
    return total


def _size(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


def _duration(seconds: float) -> str:
    """``4 s``, ``2:05`` or ``1:02:05``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, seconds_left = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds_left:02d}" if hours else f"{minutes}:{seconds_left:02d}"
