"""``chunkd watch``: the installed command as a subprocess, real observers, real folders."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from command import chunkd_command, ndjson, run_chunkd
from oracle import corpus_documents

SETTLE = "0.5"


class Watcher:
    """A running ``chunkd watch`` with its log in a file."""

    def __init__(self, inbox: Path, *options: str, env: dict | None = None,
                 preexec_fn=None) -> None:
        self.inbox = inbox
        self.log_path = inbox.parent / f"watch-{secrets.token_hex(3)}.log"
        self.log_file = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [chunkd_command(), "watch", str(inbox), "--settle", SETTLE, *options],
            stdout=self.log_file, stderr=subprocess.STDOUT, env=env or os.environ.copy(),
            preexec_fn=preexec_fn)

    def log(self) -> list[str]:
        return self.log_path.read_text(encoding="utf-8").splitlines()

    def processed(self) -> list[str]:
        return [line.split()[1].rstrip(":") for line in self.log() if line.startswith("processed ")]

    def wait_for(self, condition, timeout: float = 60, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            assert self.process.poll() is None, f"chunkd watch exited: {self.log()[-5:]}"
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; log tail: {self.log()[-5:]}")

    def stop(self, timeout: float = 10) -> int:
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(timeout=timeout)
        self.log_file.close()
        return status

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.log_file.close()


@pytest.fixture
def inbox(tmp_path) -> Path:
    folder = tmp_path / "inbox"
    folder.mkdir()
    return folder


def results(inbox: Path) -> dict[str, dict]:
    return {p.name.removesuffix(".chunks.json"): orjson.loads(p.read_bytes())
            for p in inbox.glob("*.chunks.json")}


def filter_chunks(path: Path, *options: str) -> list[dict]:
    """What the filter makes of the same file: the daemon must agree."""
    result = run_chunkd("--format", "json", *options, str(path))
    assert result.returncode == 0, result.stderr
    return ndjson(result.stdout)[0]["chunks"]


def test_in_place_renamed_in_and_slow_writes_each_give_one_complete_result(inbox, tmp_path):
    texts = [p.read_text(encoding="utf-8") for p in corpus_documents()[:3]]
    watcher = Watcher(inbox, "--settle", "1.5")
    try:
        watcher.wait_for(lambda: any("files to catch up" in line for line in watcher.log()),
                         what="start")
        (inbox / "in-place.md").write_text(texts[0], encoding="utf-8")
        hidden = inbox / ".renamed.md.part"           # the Maildir way
        hidden.write_text(texts[1], encoding="utf-8")
        hidden.rename(inbox / "renamed.md")
        outside = tmp_path / "moved.md"                # written elsewhere, moved in
        outside.write_text(texts[2], encoding="utf-8")
        outside.rename(inbox / "moved.md")
        data = texts[0].encode()
        with open(inbox / "slow.md", "wb") as slow:    # over three seconds, in pieces
            for at in range(0, len(data), len(data) // 6 + 1):
                slow.write(data[at:at + len(data) // 6 + 1])
                slow.flush()
                time.sleep(0.5)
        names = {"in-place.md", "renamed.md", "moved.md", "slow.md"}
        watcher.wait_for(lambda: set(results(inbox)) == names, what="four results")
        time.sleep(2)  # time for a (wrong) second processing to show up
        assert sorted(watcher.processed()) == sorted(names)
        for name, result in results(inbox).items():
            path = inbox / name
            assert result["source"] == name
            assert result["size"] == path.stat().st_size
            assert result["chunks"] == filter_chunks(path)
        assert watcher.stop() == 0
    finally:
        if watcher.process.poll() is None:
            watcher.kill()


def make_burst(inbox: Path, count: int) -> dict[str, str]:
    texts = {f"doc-{n:04}.txt": f"Document {n}. " + "Some words here. " * (n % 40 + 1)
             for n in range(count)}
    for name, text in texts.items():
        (inbox / name).write_text(text, encoding="utf-8")
    return texts


def test_a_burst_of_1000_files_is_processed_once_each(inbox):
    watcher = Watcher(inbox, "--chars", "200", "--rescan", "2")
    try:
        texts = make_burst(inbox, 1000)
        watcher.wait_for(lambda: len(results(inbox)) == 1000, timeout=180, what="1000 results")
        time.sleep(2.5)  # a periodic rescan passes: nothing is redone
        processed = watcher.processed()
        assert sorted(processed) == sorted(texts)
        for name, result in results(inbox).items():
            assert "".join(c["text"] for c in result["chunks"][:1]) in texts[name]
        assert watcher.stop() == 0
    finally:
        if watcher.process.poll() is None:
            watcher.kill()


def test_kill_9_mid_burst_then_restart_loses_nothing_and_redoes_nothing(inbox):
    first = Watcher(inbox, "--chars", "200")
    texts = make_burst(inbox, 1000)
    first.wait_for(lambda: len(results(inbox)) >= 100, timeout=120, what="100 results")
    first.kill()
    done_before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
                   for p in inbox.glob("*.chunks.json")}
    second = Watcher(inbox, "--chars", "200")
    try:
        second.wait_for(lambda: len(results(inbox)) == 1000, timeout=180, what="all results")
        time.sleep(1)
        assert not [p for p in inbox.iterdir() if p.name.endswith(".chunkd-tmp")]
        redone = set(second.processed())
        assert not redone & {name.removesuffix(".chunks.json") for name in done_before}
        assert len(redone) + len(done_before) == 1000
        for name, (inode, mtime) in done_before.items():
            st = (inbox / name).stat()
            assert (st.st_ino, st.st_mtime_ns) == (inode, mtime)
        import hashlib
        for name, result in results(inbox).items():
            data = (inbox / name).read_bytes()
            assert result["sha256"] == hashlib.sha256(data).hexdigest()
            assert result["chunks"][-1]["end"] <= len(texts[name])
        assert second.stop() == 0
    finally:
        if second.process.poll() is None:
            second.kill()


def test_bad_files_get_an_error_or_a_log_line_and_the_next_file_is_processed(inbox, tmp_path):
    (inbox / "bad-utf8.txt").write_bytes(b"fine so far \xff\xfe broken")
    (inbox / "too-big.txt").write_bytes(b"x" * 5000)
    os.mkfifo(inbox / "pipe.txt")
    (inbox / "folder.txt").mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the inbox", encoding="utf-8")
    (inbox / "link.txt").symlink_to(secret)
    watcher = Watcher(inbox, "--max-bytes", "4096", "--chars", "100")
    try:
        watcher.wait_for(lambda: (inbox / "too-big.txt.error.json").exists(), what="errors")
        (inbox / "vanishing.txt").write_text("here and gone", encoding="utf-8")
        (inbox / "vanishing.txt").unlink()
        (inbox / "good.txt").write_text("A good file after the bad ones.", encoding="utf-8")
        watcher.wait_for(lambda: "good.txt" in results(inbox), what="the good file")
        error = orjson.loads((inbox / "bad-utf8.txt.error.json").read_bytes())
        assert error["error"].startswith("invalid UTF-8 at byte 12")
        assert error["source"] == "bad-utf8.txt" and error["size"] == 21
        too_big = orjson.loads((inbox / "too-big.txt.error.json").read_bytes())
        assert "over --max-bytes 4096" in too_big["error"]
        log = "\n".join(watcher.log())
        assert "skipped pipe.txt: FIFO" in log
        assert "skipped folder.txt: directory" in log
        assert "skipped link.txt: symbolic link (not followed" in log
        assert not (inbox / "link.txt.chunks.json").exists()
        assert set(results(inbox)) == {"good.txt"}
        assert watcher.stop() == 0
    finally:
        if watcher.process.poll() is None:
            watcher.kill()


def test_catch_up_at_start_and_only_changed_files_are_redone(inbox):
    (inbox / "a.md").write_text("First version of a.", encoding="utf-8")
    (inbox / "b.md").write_text("Stays as it is.", encoding="utf-8")
    watcher = Watcher(inbox)
    watcher.wait_for(lambda: len(results(inbox)) == 2, what="catch-up")
    assert watcher.stop() == 0
    (inbox / "a.md").write_text("Second version of a, longer.", encoding="utf-8")
    watcher = Watcher(inbox)
    try:
        watcher.wait_for(lambda: "Second" in results(inbox)["a.md"]["chunks"][0]["text"]
                         if "a.md" in results(inbox) else False, what="a redone")
        time.sleep(1)
        assert watcher.processed() == ["a.md"]
        assert watcher.stop() == 0
    finally:
        if watcher.process.poll() is None:
            watcher.kill()


def test_polling_mode_and_sighup_rescan(inbox):
    watcher = Watcher(inbox, "--poll", "3600", "--rescan", "3600")  # events never come
    try:
        watcher.wait_for(lambda: any("polling every 3600 s" in line for line in watcher.log()),
                         what="start")
        (inbox / "seen-after-hup.txt").write_text("Only a rescan finds me.", encoding="utf-8")
        time.sleep(1.5)
        assert not results(inbox)
        watcher.process.send_signal(signal.SIGHUP)
        watcher.wait_for(lambda: "seen-after-hup.txt" in results(inbox), what="the rescan")
        assert watcher.stop() == 0
    finally:
        if watcher.process.poll() is None:
            watcher.kill()


def test_output_dir_msgpack_and_recursive(inbox, tmp_path):
    import msgpack

    (inbox / "sub").mkdir()
    (inbox / "sub" / "deep.md").write_text("In a subfolder.", encoding="utf-8")
    (inbox / ".hidden.md").write_text("never taken", encoding="utf-8")
    out = tmp_path / "out"
    watcher = Watcher(inbox, "--recursive", "--output-dir", str(out), "--format", "msgpack")
    try:
        target = out / "sub" / "deep.md.chunks.msgpack"
        watcher.wait_for(target.exists, what="the msgpack result")
        result = msgpack.unpackb(target.read_bytes())
        assert result["source"] == "sub/deep.md"
        assert result["chunks"] == filter_chunks(inbox / "sub" / "deep.md")
        assert not list(inbox.rglob("*.chunks.*"))
        assert watcher.stop() == 0
        assert not (out / ".hidden.md.chunks.msgpack").exists()
    finally:
        if watcher.process.poll() is None:
            watcher.kill()


def test_sigterm_abandons_the_file_in_hand_and_exits_0_promptly(inbox):
    big = "".join(p.read_text(encoding="utf-8") for p in corpus_documents()) * 30  # ~85 MB
    (inbox / "big.md").write_text(big, encoding="utf-8")
    watcher = Watcher(inbox, "--tokens", "16", "--max-bytes", "100000000", "--verbose")
    watcher.wait_for(lambda: any(line.startswith("chunking big.md") for line in watcher.log()),
                     what="work on the big file")
    time.sleep(0.5)
    assert not (inbox / "big.md.chunks.json").exists()  # still at work: seconds of it
    started = time.monotonic()
    assert watcher.stop(timeout=10) == 0
    assert time.monotonic() - started < 5
    assert not (inbox / "big.md.chunks.json").exists()
    assert [p.name for p in inbox.iterdir()] == ["big.md"]


def test_unusable_inbox_fails_fast_with_a_clear_message(tmp_path):
    result = subprocess.run([chunkd_command(), "watch", str(tmp_path / "nope")],
                            capture_output=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == \
        f"chunkd watch: inbox {tmp_path / 'nope'} does not exist or is not a folder"


def test_sd_notify_ready_status_watchdog_stopping_on_an_abstract_socket(inbox):
    name = f"@chunkd-test-{secrets.token_hex(4)}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind("\0" + name[1:])
    listener.settimeout(30)
    env = os.environ | {"NOTIFY_SOCKET": name, "WATCHDOG_USEC": "1000000"}
    watcher = Watcher(inbox, env=env)
    try:
        messages = []
        while not (any("WATCHDOG=1" in m for m in messages)
                   and any(m.startswith("STATUS=") for m in messages)):
            messages.append(listener.recv(4096).decode())
        assert "READY=1" in messages[0] and "STATUS=watching" in messages[0]
        watcher.process.send_signal(signal.SIGTERM)
        while not any("STOPPING=1" in m for m in messages):
            messages.append(listener.recv(4096).decode())
        assert watcher.process.wait(timeout=10) == 0
    finally:
        listener.close()
        if watcher.process.poll() is None:
            watcher.kill()


def test_runs_with_memory_deny_write_execute(inbox):
    """systemd's MemoryDenyWriteExecute, through the kernel's own switch (PR_SET_MDWE,
    inherited across exec): Python, tiktoken and watchdog must still work."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def deny_write_execute() -> None:
        if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN
            raise OSError(ctypes.get_errno(), "PR_SET_MDWE")

    import sys

    writable_code = "import mmap; mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)"
    check = subprocess.run([sys.executable, "-c", writable_code], preexec_fn=deny_write_execute,
                           capture_output=True)
    assert check.returncode != 0 and b"PermissionError" in check.stderr  # it is in force
    (inbox / "a.md").write_text("Tokens are counted under MDWE. " * 50, encoding="utf-8")
    watcher = Watcher(inbox, "--tokens", "50", preexec_fn=deny_write_execute)
    try:
        watcher.wait_for(lambda: "a.md" in results(inbox), what="a result under MDWE")
        assert watcher.stop() == 0
    finally:
        if watcher.process.poll() is None:
            watcher.kill()


def test_inotify_limit_reached_falls_back_to_polling_with_an_actionable_message(inbox):
    """Lowers fs.inotify.max_user_instances to 0 for the duration (needs root, as CI is)."""
    limit = Path("/proc/sys/fs/inotify/max_user_instances")
    saved = limit.read_text()
    (inbox / "a.txt").write_text("Found by polling.", encoding="utf-8")
    limit.write_text("0")
    try:
        watcher = Watcher(inbox)
        watcher.wait_for(lambda: "a.txt" in results(inbox), what="a result by polling")
    finally:
        limit.write_text(saved)
    try:
        log = "\n".join(watcher.log())
        assert "inotify instance limit reached" in log
        assert "fs.inotify.max_user_watches / max_user_instances, or use --poll" in log
        assert "(polling every 2 s)" in log
        assert watcher.stop() == 0
    finally:
        if watcher.process.poll() is None:
            watcher.kill()


def test_move_done_moves_each_input_after_its_result(inbox, tmp_path):
    done = tmp_path / "done"
    watcher = Watcher(inbox, "--move-done", str(done), "--rescan", "1")
    try:
        for n in range(5):
            (inbox / f"m{n}.txt").write_text(f"Moved away after chunking, {n}.", encoding="utf-8")
        watcher.wait_for(lambda: len(list(done.glob("*.txt"))) == 5, what="five moves")
        time.sleep(1.5)  # a rescan passes: nothing is taken twice, nothing is lost
        assert sorted(p.name for p in inbox.glob("*.txt")) == []
        assert sorted(results(inbox)) == [f"m{n}.txt" for n in range(5)]
        assert sorted(watcher.processed()) == [f"m{n}.txt" for n in range(5)]
        assert watcher.stop() == 0
    finally:
        if watcher.process.poll() is None:
            watcher.kill()


def test_recursive_scan_enters_subfolders_whatever_the_include_globs(inbox):
    (inbox / "sub").mkdir()
    (inbox / "sub" / "notes.md").write_text("Found in a subfolder at start.", encoding="utf-8")
    watcher = Watcher(inbox, "--recursive", "--include", "*.md")
    try:
        target = inbox / "sub" / "notes.md.chunks.json"
        watcher.wait_for(target.exists, what="the catch-up result in the subfolder")
        assert watcher.stop() == 0
    finally:
        if watcher.process.poll() is None:
            watcher.kill()
