"""Running ``chunkd watch`` in tests: the installed command, real folders, real observers."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import orjson

from command import HANG, chunkd_command, ndjson, run_chunkd, with_faults

SETTLE = "0.5"
class Watcher:
    """A running ``chunkd watch`` with its log in a file; ``prefix``: the command that
    runs it (``unshare ...``), if any."""

    def __init__(self, inbox: Path, *options: str, env: dict | None = None,
                 faults: dict | None = None, preexec_fn=None, settle: str = SETTLE,
                 prefix: tuple[str, ...] = ()) -> None:
        self.inbox = inbox
        self.log_path = inbox.parent / f"watch-{secrets.token_hex(3)}.log"
        self.log_file = open(self.log_path, "wb")
        env = with_faults(faults, env) if faults else dict(env or os.environ)
        self.process = subprocess.Popen(
            [*prefix, chunkd_command(), "watch", str(inbox), "--settle", settle, *options],
            stdout=self.log_file, stderr=subprocess.STDOUT, env=env, preexec_fn=preexec_fn)

    def log(self) -> list[str]:
        return self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()

    def lines(self, start: str) -> list[str]:
        return [line for line in self.log() if line.startswith(start)]

    def processed(self) -> list[str]:
        return [line.split()[1].rstrip(":") for line in self.lines("processed ")]

    def wait_for(self, condition, timeout: float = 60, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            assert self.process.poll() is None, "chunkd watch exited:\n" + "\n".join(self.log()[-40:])
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; log tail: {self.log()[-5:]}")

    def started(self) -> None:
        self.wait_for(lambda: any("to catch up" in line for line in self.log()),
                      what="start")

    def rescans_pass(self, count: int = 2) -> None:
        """Wait until ``count`` more periodic rescans have run (needs --verbose)."""
        seen = len(self.lines("rescanned (periodic)"))
        self.wait_for(lambda: len(self.lines("rescanned (periodic)")) >= seen + count,
                      what=f"{count} rescans")

    def stop(self, timeout: float = HANG) -> int:
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(timeout=timeout)
        self.log_file.close()
        return status

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log_file.close()


def results(folder: Path, pattern: str = "*.chunks.json") -> dict[str, dict]:
    """The results under ``folder``, by their input's relative path."""
    return {p.relative_to(folder).as_posix().removesuffix(".chunks.json"): orjson.loads(p.read_bytes())
            for p in folder.rglob(pattern)}


def filter_documents(*paths: Path, options: tuple[str, ...] = ()) -> list[dict]:
    """What the filter makes of the same files (--format json), with ids, named as
    the daemon names them (from its inbox, the folder that holds its lock): the daemon
    must agree, ids included."""
    inbox = next((folder for folder in paths[0].parents if (folder / ".chunkd-lock").exists()),
                 paths[0].parent)
    names = [path.relative_to(inbox).as_posix() for path in paths]
    result = run_chunkd("--format", "json", "--jobs", "2", "--ids", *options, *names, cwd=inbox)
    assert result.returncode == 0, result.stderr
    return ndjson(result.stdout)


def filter_chunks(path: Path, *options: str) -> list[dict]:
    return filter_documents(path, options=options)[0]["chunks"]


def notify_socket() -> tuple[socket.socket, str]:
    name = f"@chunkd-test-{secrets.token_hex(4)}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind("\0" + name[1:])
    return listener, name
