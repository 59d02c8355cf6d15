"""``chunkd watch``: the installed command as a subprocess, real observers, real folders.

Every daemon is started through the ``watch`` fixture, which stops it whatever happens;
waits are on conditions (a log line, a result, a number of periodic rescans) with
generous limits; results are compared whole with what the filter makes of the file.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

import msgpack
import orjson
import pytest

from command import HANG, chunkd_command
from oracle import corpus_documents
from watching import filter_chunks, filter_documents, notify_socket, results

pytestmark = pytest.mark.slow


def test_in_place_renamed_in_and_slow_writes_each_give_one_complete_result(inbox, tmp_path, watch):
    texts = [p.read_text(encoding="utf-8") for p in corpus_documents()[:3]]
    watcher = watch(inbox, "--settle", "1.5", "--rescan", "1", "-v")
    watcher.started()
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
    watcher.rescans_pass(2)  # a (wrong) second processing would show up by now
    assert sorted(watcher.processed()) == sorted(names)
    for name, result in results(inbox).items():
        path = inbox / name
        assert result["source"] == name
        assert result["size"] == path.stat().st_size
        assert result["chunks"] == filter_chunks(path)
    assert watcher.stop() == 0


def make_burst(inbox, count: int) -> dict[str, str]:
    texts = {f"doc-{n:04}.txt": f"Document {n}. " + "Some words here. " * (n % 40 + 1)
             for n in range(count)}
    for name, text in texts.items():
        (inbox / name).write_text(text, encoding="utf-8")
    return texts


def assert_results_equal_the_filter(inbox, names, *options: str) -> None:
    expected = filter_documents(*(inbox / name for name in sorted(names)), options=options)
    found = results(inbox)
    assert sorted(found) == sorted(names)
    for document in expected:
        name = os.path.basename(document["doc"])
        assert found[name]["chunks"] == document["chunks"], name


def test_a_burst_of_1000_files_is_processed_once_each(inbox, watch):
    watcher = watch(inbox, "--chars", "200", "--rescan", "1", "-v")
    texts = make_burst(inbox, 1000)
    watcher.wait_for(lambda: len(results(inbox)) == 1000, timeout=HANG, what="1000 results")
    watcher.rescans_pass(2)
    assert sorted(watcher.processed()) == sorted(texts)
    assert_results_equal_the_filter(inbox, texts, "--chars", "200")
    assert watcher.stop() == 0


def test_kill_9_mid_burst_then_restart_loses_nothing_and_redoes_nothing(inbox, watch):
    first = watch(inbox, "--chars", "200")
    texts = make_burst(inbox, 1000)
    first.wait_for(lambda: len(results(inbox)) >= 100, timeout=HANG, what="100 results")
    first.kill()
    done_before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
                   for p in inbox.glob("*.chunks.json")}
    second = watch(inbox, "--chars", "200", "--rescan", "1", "-v")
    second.wait_for(lambda: len(results(inbox)) == 1000, timeout=HANG, what="all results")
    second.rescans_pass(1)
    assert not [p for p in inbox.iterdir() if p.name.endswith(".chunkd-tmp")]
    redone = set(second.processed())
    assert not redone & {name.removesuffix(".chunks.json") for name in done_before}
    assert len(redone) + len(done_before) == 1000
    for name, (inode, mtime) in done_before.items():
        st = (inbox / name).stat()
        assert (st.st_ino, st.st_mtime_ns) == (inode, mtime)
    for name, result in results(inbox).items():
        assert result["sha256"] == hashlib.sha256((inbox / name).read_bytes()).hexdigest()
    assert_results_equal_the_filter(inbox, texts, "--chars", "200")
    assert second.stop() == 0


def test_bad_files_get_an_error_or_a_log_line_and_the_next_file_is_processed(inbox, tmp_path, watch):
    (inbox / "bad-utf8.txt").write_bytes(b"fine so far \xff\xfe broken")
    (inbox / "too-big.txt").write_bytes(b"x" * 5000)
    os.mkfifo(inbox / "pipe.txt")
    (inbox / "folder.txt").mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the inbox", encoding="utf-8")
    (inbox / "link.txt").symlink_to(secret)
    watcher = watch(inbox, "--max-bytes", "4096", "--chars", "100")
    watcher.wait_for(lambda: (inbox / "too-big.txt.error.json").exists(), what="errors")
    (inbox / "vanishing.txt").write_text("here and gone", encoding="utf-8")
    (inbox / "vanishing.txt").unlink()
    (inbox / "good.txt").write_text("A good file after the bad ones.", encoding="utf-8")
    watcher.wait_for(lambda: "good.txt" in results(inbox), what="the good file")
    error = orjson.loads((inbox / "bad-utf8.txt.error.json").read_bytes())
    assert error["error"] == ("invalid UTF-8 at byte 12 "
                              "(use --errors replace to substitute U+FFFD)")
    assert error["source"] == "bad-utf8.txt" and error["size"] == 21
    assert error["sha256"] == hashlib.sha256((inbox / "bad-utf8.txt").read_bytes()).hexdigest()
    too_big = orjson.loads((inbox / "too-big.txt.error.json").read_bytes())
    assert too_big["error"] == "file is 5000 bytes, over --max-bytes 4096; raise the limit to chunk it"
    log = "\n".join(watcher.log())
    assert "skipped pipe.txt: FIFO" in log
    assert "skipped folder.txt: directory" in log
    assert "skipped link.txt: symbolic link (not followed" in log
    assert not (inbox / "link.txt.chunks.json").exists()
    assert set(results(inbox)) == {"good.txt"}
    assert results(inbox)["good.txt"]["chunks"] == filter_chunks(inbox / "good.txt", "--chars", "100")
    assert watcher.stop() == 0


def test_catch_up_at_start_and_only_changed_files_are_redone(inbox, watch):
    (inbox / "a.md").write_text("First version of a.", encoding="utf-8")
    (inbox / "b.md").write_text("Stays as it is.", encoding="utf-8")
    watcher = watch(inbox)
    watcher.wait_for(lambda: len(results(inbox)) == 2, what="catch-up")
    assert watcher.stop() == 0
    (inbox / "a.md").write_text("Second version of a, longer.", encoding="utf-8")
    watcher = watch(inbox, "--rescan", "1", "-v")
    watcher.wait_for(lambda: watcher.processed() == ["a.md"], what="a redone")
    watcher.rescans_pass(2)
    assert watcher.processed() == ["a.md"]
    assert results(inbox)["a.md"]["chunks"] == filter_chunks(inbox / "a.md")
    assert watcher.stop() == 0


def test_polling_mode_and_sighup_rescan(inbox, watch):
    watcher = watch(inbox, "--poll", "3600", "--rescan", "3600")  # events never come
    watcher.wait_for(lambda: any("polling every 3600 s" in line for line in watcher.log()),
                     what="start")
    (inbox / "seen-after-hup.txt").write_text("Only a rescan finds me.", encoding="utf-8")
    time.sleep(1.5)  # the absence of a result is what is checked: no condition to wait on
    assert not results(inbox)
    watcher.process.send_signal(signal.SIGHUP)
    watcher.wait_for(lambda: "seen-after-hup.txt" in results(inbox), what="the rescan")
    assert watcher.stop() == 0


def test_output_dir_msgpack_and_recursive(inbox, tmp_path, watch):
    (inbox / "sub").mkdir()
    (inbox / "sub" / "deep.md").write_text("In a subfolder.", encoding="utf-8")
    (inbox / ".hidden.md").write_text("never taken", encoding="utf-8")
    out = tmp_path / "out"
    watcher = watch(inbox, "--recursive", "--output-dir", str(out), "--format", "msgpack")
    target = out / "sub" / "deep.md.chunks.msgpack"
    watcher.wait_for(target.exists, what="the msgpack result")
    result = msgpack.unpackb(target.read_bytes())
    assert result["source"] == "sub/deep.md"
    assert result["chunks"] == filter_chunks(inbox / "sub" / "deep.md")
    assert not list(inbox.rglob("*.chunks.*"))
    assert watcher.stop() == 0
    assert not (out / ".hidden.md.chunks.msgpack").exists()


def test_sigterm_abandons_the_file_in_hand_and_exits_0_promptly(inbox, watch):
    (inbox / "big.md").write_bytes(b"Words of a long file. " * 200_000)  # 17 blocks
    # Each block read 3 s late: the file is still in hand 50 s after it starts.
    watcher = watch(inbox, "--tokens", "16", "--verbose", faults={"slow_blocks": 3})
    watcher.wait_for(lambda: watcher.lines("chunking big.md"), what="work on the big file")
    time.sleep(0.5)
    assert not (inbox / "big.md.chunks.json").exists()
    started = time.monotonic()
    assert watcher.stop(timeout=HANG) == 0
    # Well before the file could have been finished, with room for a loaded machine.
    assert time.monotonic() - started < 30
    assert [p.name for p in inbox.iterdir() if p.name != ".chunkd-lock"] == ["big.md"]


def test_unusable_inbox_fails_fast_with_a_clear_message(tmp_path):
    result = subprocess.run([chunkd_command(), "watch", str(tmp_path / "nope")],
                            capture_output=True, timeout=HANG)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == \
        f"chunkd watch: inbox {tmp_path / 'nope'} does not exist or is not a folder"


def test_sd_notify_ready_status_watchdog_stopping_on_an_abstract_socket(inbox, watch):
    listener, name = notify_socket()
    listener.settimeout(30)
    env = os.environ | {"NOTIFY_SOCKET": name, "WATCHDOG_USEC": "1000000"}
    watcher = watch(inbox, env=env)
    try:
        messages = []
        while not (any("WATCHDOG=1" in m for m in messages)
                   and any(m.startswith("STATUS=") for m in messages)):
            messages.append(listener.recv(4096).decode())
        assert "READY=1" in messages[0] and "STATUS=watching" in messages[0]
        watcher.process.send_signal(signal.SIGTERM)
        while not any("STOPPING=1" in m for m in messages):
            messages.append(listener.recv(4096).decode())
        assert watcher.process.wait(timeout=HANG) == 0
    finally:
        listener.close()


def test_runs_with_memory_deny_write_execute(inbox, watch):
    """systemd's MemoryDenyWriteExecute, through the kernel's own switch (PR_SET_MDWE,
    inherited across exec): Python, tiktoken, watchdog and the workers must still work."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def deny_write_execute() -> None:
        if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN
            raise OSError(ctypes.get_errno(), "PR_SET_MDWE")

    writable_code = "import mmap; mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)"
    check = subprocess.run([sys.executable, "-c", writable_code], preexec_fn=deny_write_execute,
                           capture_output=True)
    assert check.returncode != 0 and b"PermissionError" in check.stderr  # it is in force
    (inbox / "a.md").write_text("Tokens are counted under MDWE. " * 50, encoding="utf-8")
    watcher = watch(inbox, "--tokens", "50", preexec_fn=deny_write_execute)
    watcher.wait_for(lambda: "a.md" in results(inbox), what="a result under MDWE")
    assert results(inbox)["a.md"]["chunks"] == filter_chunks(inbox / "a.md", "--tokens", "50")
    assert watcher.stop() == 0


def test_inotify_limit_reached_falls_back_to_polling_with_an_actionable_message(inbox, watch):
    """The observer is made to fail as inotify does at its instance limit (an injected
    fault: the host's sysctls are never touched)."""
    (inbox / "a.txt").write_text("Found by polling.", encoding="utf-8")
    watcher = watch(inbox, faults={"inotify": True})
    watcher.wait_for(lambda: "a.txt" in results(inbox), what="a result by polling")
    (inbox / "b.txt").write_text("Found by polling too, after start.", encoding="utf-8")
    watcher.wait_for(lambda: "b.txt" in results(inbox), what="a later file by polling")
    log = "\n".join(watcher.log())
    assert "inotify instance limit reached" in log
    assert "fs.inotify.max_user_watches / max_user_instances, or use --poll" in log
    assert "(polling every 2 s)" in log
    assert watcher.stop() == 0


def test_move_done_moves_each_input_after_its_result(inbox, tmp_path, watch):
    done = tmp_path / "done"
    done.mkdir()
    (done / "m0.txt").write_text("An earlier file of the same name.", encoding="utf-8")
    watcher = watch(inbox, "--move-done", str(done), "--rescan", "1", "-v")
    texts = {f"m{n}.txt": f"Moved away after chunking, {n}." for n in range(5)}
    for name, text in texts.items():
        (inbox / name).write_text(text, encoding="utf-8")
    watcher.wait_for(lambda: len(watcher.processed()) == 5, what="five results")
    watcher.rescans_pass(2)  # nothing is taken twice, nothing is lost
    assert sorted(p.name for p in done.glob("*.txt")) == sorted(texts)
    assert (done / "m0.txt").read_text(encoding="utf-8") == "An earlier file of the same name."
    assert [p.name for p in inbox.glob("*.txt")] == ["m0.txt"]  # not moved over it
    assert "m0.txt: 1 chunks" in "\n".join(watcher.log())
    assert "not moved: a file of that name is already in --move-done" in "\n".join(watcher.log())
    for name, text in texts.items():
        assert [c["text"] for c in results(inbox)[name]["chunks"]] == [text]
    assert sorted(watcher.processed()) == sorted(texts)
    assert watcher.stop() == 0


def test_recursive_scan_enters_subfolders_whatever_the_include_globs(inbox, watch):
    (inbox / "sub").mkdir()
    (inbox / "sub" / "notes.md").write_text("Found in a subfolder at start.", encoding="utf-8")
    watcher = watch(inbox, "--recursive", "--include", "*.md")
    target = inbox / "sub" / "notes.md.chunks.json"
    watcher.wait_for(target.exists, what="the catch-up result in the subfolder")
    assert watcher.stop() == 0
