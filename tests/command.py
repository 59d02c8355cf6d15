"""Running the installed ``chunkd`` command as a user would."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import orjson

#: Seconds that bound a hang in a test: a child process, a wait for a daemon's result, a
#: request. Reached only by something stuck, however loaded the machine: never a claim
#: of speed (a test that claims one says so with its own bound, well past load's noise).
HANG = 600


def chunkd_command() -> str:
    """The installed console script (beside this Python, or on PATH)."""
    beside = os.path.join(os.path.dirname(sys.executable), "chunkd")
    found = beside if os.path.exists(beside) else shutil.which("chunkd")
    assert found, "the chunkd command is not installed (pip install -e .)"
    return found


def install_command(extra: str) -> str:
    """How a message must say to add an extra's packages: ``pip install`` and the
    extra's requirements, as pyproject.toml lists them (chunkd is not on PyPI, so
    ``pip install 'chunkd[extra]'`` would fail)."""
    pyproject = os.path.join(os.path.dirname(__file__), os.pardir, "pyproject.toml")
    with open(pyproject, "rb") as stream:
        extras = tomllib.load(stream)["project"]["optional-dependencies"]
    return "pip install " + " ".join(f"'{requirement}'" for requirement in extras[extra])


#: The faults a test may inject into the chunkd processes it starts (faults/sitecustomize.py).
FAULTS = Path(__file__).resolve().parent / "faults"


def with_faults(faults: dict, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment (``env``, else this process's) of a chunkd process with
    ``faults`` injected (``FAULTS``: Python imports its sitecustomize at start-up)."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FAULTS), env.get("PYTHONPATH")]))
    env["CHUNKD_FAULTS"] = orjson.dumps(faults).decode()
    return env


def run_chunkd(*args: str, input: bytes = b"", cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([chunkd_command(), *args], input=input, capture_output=True,
                          timeout=HANG, cwd=cwd)


def ndjson(stdout: bytes) -> list[dict]:
    return [orjson.loads(line) for line in stdout.splitlines()]


def records_with_jobs(*args: str) -> list[dict]:
    """The installed chunkd's NDJSON records for ``args``; with --jobs 1 and 2 alike."""
    one = run_chunkd(*args, "--jobs", "1")
    two = run_chunkd(*args, "--jobs", "2")
    assert one.returncode == two.returncode == 0, one.stderr
    assert one.stdout == two.stdout
    return ndjson(one.stdout)


def copied(documents, folder) -> list[str]:
    """Copies of ``documents`` in ``folder`` (short names), as paths."""
    paths = []
    for number, source in enumerate(documents):
        path = folder / f"{number}{source.suffix}"
        path.write_bytes(source.read_bytes())
        paths.append(str(path))
    return paths


#: What makes a command PID 1 of a PID namespace of its own, as ``docker run`` without
#: ``--init`` (or a Kubernetes container) starts its entry point.
FIRST_PROCESS = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child")


def first_process_of(starter: subprocess.Popen) -> int:
    """The host's id of the process ``unshare`` started, PID 1 in its namespace."""
    children = Path(f"/proc/{starter.pid}/task/{starter.pid}/children")
    deadline = time.monotonic() + HANG
    while not children.read_text().split():
        assert time.monotonic() < deadline, "unshare started nothing"
        time.sleep(0.05)
    pid = int(children.read_text().split()[0])
    status = Path(f"/proc/{pid}/status").read_text()
    assert re.search(r"^NSpid:\s+\d+\s+1$", status, re.MULTILINE), status
    return pid
