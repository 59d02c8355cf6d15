"""Real parts for the page tests: Debian's Chromium driven by Playwright, and
``chunkd serve`` run as a user runs it."""

from __future__ import annotations

import http.client
import os
import re
import select
import signal
import subprocess
import tempfile

from command import HANG, chunkd_command

#: Debian's Chromium (``apt-get install chromium``; ``.ci/run`` installs it).
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def launch(playwright):
    """Chromium from Debian's package, never a browser Playwright would download."""
    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: apt-get install chromium"
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Serve:
    """``chunkd serve --port 0 ARGS`` in a subprocess; ``url`` is the address it prints."""

    def __init__(self, *args: str) -> None:
        # Its log goes to a file: a pipe nobody reads would fill and stop the server.
        self.log = tempfile.TemporaryFile()
        # PYTHONFAULTHANDLER: a server that does not stop dumps every thread's stack
        # when aborted (see ``stop``), so that the test says where it hung.
        # Ctrl-C as at a terminal, even when the tests run as a background job, whose
        # children a shell starts with SIGINT ignored.
        self.process = subprocess.Popen([chunkd_command(), "serve", "--port", "0", *args],
                                        stdout=subprocess.PIPE, stderr=self.log,
                                        env=os.environ | {"PYTHONFAULTHANDLER": "1"},
                                        preexec_fn=_interruptible)
        ready, _, _ = select.select([self.process.stdout], [], [], HANG)
        assert ready, f"chunkd serve printed no address within {HANG} s"
        self.banner = self.process.stdout.readline().decode()
        found = re.search(r"http://(\S+?):(\d+)/", self.banner)
        assert found, f"no address in {self.banner!r}: {self.stderr()}"
        self.url = found.group(0)
        self.host, self.port = found.group(1).strip("[]"), int(found.group(2))

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        """Stop it with ``signum``; its exit status and what it wrote on stderr."""
        self.process.send_signal(signum)
        try:
            self.process.communicate(timeout=HANG)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            try:
                self.process.wait(timeout=HANG)
            finally:
                self.process.kill()
            raise AssertionError(f"chunkd serve did not stop within 30 s of signal "
                                 f"{signum}; its threads: {self.stderr()[-6000:]}") from None
        return self.process.returncode, self.stderr()

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode()

    def __enter__(self) -> Serve:
        return self

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            status, stderr = self.stop()
            assert status == 0, f"chunkd serve exited {status} on SIGTERM: {stderr}"


def request(server: Serve, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None, host: str | None = None) -> tuple[int, dict, bytes]:
    connection = http.client.HTTPConnection(server.host, server.port, timeout=HANG)
    try:
        connection.putrequest(method, path, skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()
