"""``chunkd watch``'s memory for a file is bounded by the file and the settings, not
by its result: a result's records are spooled as they are made and written from the
spool, never held whole (``--max-bytes`` stays a real memory guard)."""

from __future__ import annotations

import hashlib
import re
import signal
import subprocess
import sys
import time

import msgpack
import orjson
import pytest

from command import HANG, chunkd_command

pytestmark = pytest.mark.slow

# The daemon is started from a small Python that reports the peak RSS of it and its
# workers once it exits (Linux counts a child's memory from before its exec, so the
# test process, large, must not be its parent); SIGTERM is passed on to the daemon.
MEASURE = """import resource, signal, subprocess, sys
process = subprocess.Popen(sys.argv[1:])
signal.signal(signal.SIGTERM, lambda *_: process.terminate())
status = process.wait()
print("peak", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(status)"""

SIZE = 8 * 2**20


def wait_for(condition, what: str, timeout: float = HANG) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("format", ["json", "msgpack"])
def test_a_file_near_max_bytes_in_small_chunks_is_chunked_in_bounded_memory(tmp_path, format):
    """8 MiB in 20-character chunks: a result of about 45 MB (whose records would take
    about 250 MB as Python objects), made by a daemon that stays under 100 MB."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    source = tmp_path / "big.txt"
    line = b"alpha beta gamma delta epsilon zeta eta theta iota kappa. " * 1000 + b"\n\n"
    with open(source, "wb") as stream:
        for _ in range(SIZE // len(line)):
            stream.write(line)
    log_path = tmp_path / "watch.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", MEASURE, chunkd_command(), "watch", str(inbox), "--settle",
             "0", "--chars", "20", "--overlap", "0", "--max-bytes", str(SIZE), "--workers",
             "1", "--format", format], stdout=log, stderr=subprocess.STDOUT)
    try:
        def logged(start: str) -> list[str]:
            assert process.poll() is None, log_path.read_text()
            return [line for line in log_path.read_text().splitlines() if start in line]

        wait_for(lambda: logged("to catch up"), "the daemon to start")
        source.rename(inbox / "big.txt")
        wait_for(lambda: logged("processed big.txt"), "the file to be processed")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=HANG) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = log_path.read_text()
    peak_mb = int(re.search(r"^peak (\d+)$", log, re.MULTILINE).group(1))
    assert peak_mb < 100, f"peak RSS {peak_mb} MB"
    count = int(re.search(r"processed big.txt: (\d+) chunks", log).group(1))
    data = (inbox / f"big.txt.chunks.{format}").read_bytes()
    if format == "json":
        assert data.count(b'{"index":') == count
        changes = orjson.loads(data[data.rindex(b'],"changes":') + len(b'],"changes":'):-1])
        assert len(changes["added"]) == count and changes["kept"] == 0  # a first result
        header = orjson.loads(data[:data.index(b',"chunks":')] + b"}")
    else:
        unpacker = msgpack.Unpacker()
        unpacker.feed(data)
        result = unpacker.unpack()
        assert len(result["chunks"]) == count
        assert result["chunks"][-1]["index"] == count - 1
        assert len(result["changes"]["added"]) == count
        header = result
    assert header["sha256"] == hashlib.sha256((inbox / "big.txt").read_bytes()).hexdigest()
