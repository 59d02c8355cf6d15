"""Measuring the installed chunkd's memory: streams piped through it and the peak RSS
the OS accounts to it."""

from __future__ import annotations

import subprocess
import sys
import threading

from command import chunkd_command
from oracle import corpus_documents

STREAM_BYTES = 210 * 1024 * 1024


def corpus_text(keep_blank_lines: bool) -> bytes:
    text = "\n".join(p.read_text(encoding="utf-8") for p in corpus_documents())
    if not keep_blank_lines:  # one endless paragraph: the top separator never occurs
        text = "\n".join(line for line in text.splitlines() if line.strip())
    return text.encode()


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


def peak_of(args: list[str]) -> int:
    """Run the installed chunkd on files; its peak RSS in MB (output discarded)."""
    measure = MEASURE.replace("subprocess.call(sys.argv[1:])",
                              "subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)")
    result = subprocess.run([sys.executable, "-c", measure, chunkd_command(), *args],
                            capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return int(result.stderr.split()[-1])
