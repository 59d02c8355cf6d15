"""The semantic strategy where memory may not be made executable (systemd's
``MemoryDenyWriteExecute=yes``, through the kernel's own switch, ``PR_SET_MDWE``,
inherited across exec): PyTorch's CPU kernels cannot run there, and the installed
``chunkd`` says so in one line, exit 2, before any input is read (the filter and the
daemon); ``systemd/embed.conf`` is the drop-in that lets the model run
(``tests/service/test_systemd.py`` checks it)."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import subprocess

import pytest

from command import HANG, chunkd_command
from embedding import model_folder

PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1


def deny_write_execute() -> None:
    """In the child, before exec: refuse memory that is writable and executable."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_MDWE")


@pytest.fixture(scope="module")
def mdwe():
    """Skips only where the kernel lacks PR_SET_MDWE (Linux before 6.3)."""
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        refused = libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0
        os._exit(ctypes.get_errno() if refused else 0)
    _, status = os.waitpid(pid, 0)
    if os.WEXITSTATUS(status) == errno.EINVAL:
        pytest.skip("this kernel lacks PR_SET_MDWE")
    assert os.WEXITSTATUS(status) == 0


@pytest.mark.slow
@pytest.mark.parametrize("command", [[], ["watch", "INBOX"]], ids=["filter", "watch"])
def test_a_model_that_cannot_run_is_one_line_and_exit_2(mdwe, tmp_path, command):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    fifo = inbox / "document.md"
    os.mkfifo(fifo)  # nobody writes to it: a command that read its input would hang
    args = [str(inbox) if arg == "INBOX" else arg for arg in command]
    result = subprocess.run([chunkd_command(), *args, "--strategy", "semantic", "--embed",
                             model_folder(), *([] if command else [str(fifo)])],
                            capture_output=True, timeout=HANG, preexec_fn=deny_write_execute,
                            stdin=subprocess.DEVNULL)
    assert (result.returncode, result.stdout) == (2, b""), result.stderr.decode()[-2000:]
    [line] = result.stderr.decode().splitlines()
    prog = "chunkd watch" if command else "chunkd"
    assert line.startswith(f"{prog}: error: --embed {model_folder()}: the model cannot run: ")
    assert "MemoryDenyWriteExecute=yes" in line and "systemd/embed.conf" in line
    assert not (inbox / "document.md.chunks.json").exists()


@pytest.mark.slow
def test_without_the_switch_the_same_command_chunks():
    """What fails above is the switch alone."""
    result = subprocess.run([chunkd_command(), "--strategy", "semantic", "--embed",
                             model_folder()], input=b"One sentence here. Another one.",
                            capture_output=True, timeout=HANG)
    assert (result.returncode, result.stderr) == (0, b"")
    [record] = [json.loads(line) for line in result.stdout.splitlines()]
    assert record["text"] == "One sentence here. Another one."
