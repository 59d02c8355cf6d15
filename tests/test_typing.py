"""The package type-checks: mypy, as pyproject.toml configures it (``[tool.mypy]``),
passes on ``chunkd``."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mypy_passes_on_the_package(tmp_path):
    # Its cache in a folder of the test's: nothing left in the checkout, nothing
    # reused from an earlier run.
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout
