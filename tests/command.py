"""Running the installed ``chunkd`` command as a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import orjson


def chunkd_command() -> str:
    """The installed console script (beside this Python, or on PATH)."""
    beside = os.path.join(os.path.dirname(sys.executable), "chunkd")
    found = beside if os.path.exists(beside) else shutil.which("chunkd")
    assert found, "the chunkd command is not installed (pip install -e .)"
    return found


def run_chunkd(*args: str, input: bytes = b"", cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([chunkd_command(), *args], input=input, capture_output=True,
                          timeout=300, cwd=cwd)


def ndjson(stdout: bytes) -> list[dict]:
    return [orjson.loads(line) for line in stdout.splitlines()]
