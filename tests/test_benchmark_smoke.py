"""The benchmark script runs (quick mode); speed itself is measured in benchmarks/, not here."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


def test_quick_benchmark_runs_and_chunkd_equals_langchain(tmp_path):
    report = tmp_path / "report.md"
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--output", str(report)],
                            capture_output=True, timeout=600, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    text = report.read_text(encoding="utf-8")
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| ")]
    chunkd_rows = [row for row in rows if row[3].strip() == "chunkd" and len(row) > 7]
    assert len(chunkd_rows) == 12  # six inputs, two units
    assert all(row[7].strip() == "yes" for row in chunkd_rows)
    for heading in ("## End to end", "## Memory", "## Many documents", "## chunkd eval",
                    "## Other tokenizers"):
        assert heading in text
    # --tokenizer: chunkd's chunks are LangChain's with each tokenizer.
    tokenizer_rows = [row for row in rows if row[1].strip() in ("all-MiniLM-L6-v2", "o200k_base")
                      and row[2].strip() == "chunkd"]
    assert [row[6].strip() for row in tokenizer_rows] == ["yes", "yes"]
