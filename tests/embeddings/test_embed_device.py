"""``--embed-device`` is checked before any ``--jobs`` worker starts: the model is
loaded and tried on its device while the settings are checked, in the main process,
so a device it cannot use is the usage error, exit 2, in one line, before any input is
read; and a command that embeds runs no ``--jobs`` workers at all (the model, loaded
once, takes texts of many documents at once), so none is forked after CUDA starts."""

from __future__ import annotations

import os
import subprocess

import pytest

from command import HANG, chunkd_command
from embedding import model_folder


@pytest.mark.slow
def test_a_device_the_model_cannot_use_fails_before_any_worker(tmp_path):
    fifos = [tmp_path / "a.md", tmp_path / "b.md"]
    for fifo in fifos:
        os.mkfifo(fifo)  # nobody writes to them: a command that read input would hang
    # No machine has a hundredth CUDA device: refused with or without a GPU.
    result = subprocess.run([chunkd_command(), "--strategy", "semantic", "--embed",
                             model_folder(), "--embed-device", "cuda:99", "--jobs", "2",
                             *map(str, fifos)], capture_output=True, timeout=HANG,
                            stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stdout) == (2, b""), result.stderr.decode()[-2000:]
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(f"chunkd: error: --embed {model_folder()}: "), line
    assert "cuda" in line.lower(), line
