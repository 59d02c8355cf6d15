"""The progress line: the fraction done and the time left for inputs of known size,
bytes and rate otherwise; drawn only on a terminal (a real pseudo-terminal below)."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess

from chunkd.outputs.progress import Progress
from command import HANG, chunkd_command


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def drawn(steps: list[tuple[float, int]], total: int | None) -> list[str]:
    """The lines a progress of ``total`` bytes draws for (time, bytes) steps."""
    now = [0.0]
    terminal = Terminal()
    progress = Progress(terminal, clock=lambda: now[0])
    progress.expect(total)
    for at, count in steps:
        now[0] = at
        progress.advance(count)
    return [line.removesuffix("\x1b[K") for line in terminal.getvalue().split("\r") if line]


def test_known_total_shows_fraction_rate_and_time_left():
    assert drawn([(0.0, 100), (0.1, 100), (1.0, 300), (1.1, 1)], 1000) == [
        "chunkd: 10% of 1.0 kB",                       # at once, no rate yet
        "chunkd: 50% of 1.0 kB, 500 B/s, 1 s left",    # 0.1 s: too soon to redraw
    ]
    assert drawn([(0.0, 10), (100.0, 1_000_000)], 130_000_000)[-1] == \
        "chunkd: 0% of 130.0 MB, 10.0 kB/s, 3:35:00 left"


def test_unknown_total_shows_bytes_and_rate():
    assert drawn([(0.0, 500), (2.0, 1500)], None) == ["chunkd: 500 B read",
                                                      "chunkd: 2.0 kB read, 1.0 kB/s"]


def test_more_than_expected_stays_at_100_percent():
    assert drawn([(0.0, 10), (1.0, 20)], 15)[-1] == "chunkd: 100% of 15 B, 30 B/s, 0 s left"


def on_terminal(*args: str, stdin=None) -> str:
    """What the installed chunkd draws on a pseudo-terminal as its stderr."""
    master, slave = pty.openpty()
    with open(os.devnull, "wb") as devnull:
        process = subprocess.Popen([chunkd_command(), *args], stdin=stdin, stdout=devnull,
                                   stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        seen += data
    os.close(master)
    assert process.wait(timeout=HANG) == 0, seen
    return seen.decode()


def test_a_file_and_stdin_from_a_file_show_the_fraction_of_their_size(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("Some words in a sentence. " * 120_000)  # 3.1 MB, several blocks
    for seen in (on_terminal("--chars", "500", str(path)),
                 on_terminal("--chars", "500", stdin=open(path, "rb"))):
        assert re.search(r"chunkd: \d+% of 3\.1 MB", seen), seen
        assert seen.endswith("\r\x1b[K")  # erased at the end


def test_files_chunked_by_workers_count_as_their_output_is_written(tmp_path):
    paths = []
    for number in range(3):
        paths.append(tmp_path / f"{number}.txt")
        paths[-1].write_text("Words. " * 1000)
    seen = on_terminal("--jobs", "2", *map(str, paths))
    assert re.search(r"chunkd: \d+% of 21\.0 kB", seen), seen


def test_a_pipe_shows_bytes_read():
    reading, writing = os.pipe()
    os.write(writing, b"Text through a pipe.")
    os.close(writing)
    seen = on_terminal("--chars", "5", stdin=reading)
    assert "chunkd: 20 B read" in seen, seen
