"""``chunkd watch`` under attack and faults: links, odd names, races, full
disks, dead workers, a notify socket nobody reads. Each test failed before its fix."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import time

import orjson
import pytest

import chunkd

from command import FIRST_PROCESS, HANG, chunkd_command, first_process_of
from oracle import corpus_documents
from watching import filter_chunks, notify_socket, results

pytestmark = pytest.mark.slow


def everything_under(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*") if p.is_file()}


# --- nothing outside the folders, whatever the links -------------------------------

def test_a_subfolder_swapped_for_a_link_while_a_file_settles_is_not_followed(tmp_path, watch):
    inbox, outside = tmp_path / "in", tmp_path / "outside"
    (inbox / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "a.txt").write_text("secret", encoding="utf-8")
    watcher = watch(inbox, "--recursive", "--rescan", "1", "-v", settle="2")
    watcher.started()
    (inbox / "sub" / "a.txt").write_text("decoy", encoding="utf-8")
    watcher.wait_for(lambda: (inbox / "sub" / "a.txt").exists())
    time.sleep(0.5)                                   # the decoy is settling now
    (inbox / "sub").rename(inbox / ".old")
    (inbox / "sub").symlink_to(outside)
    watcher.rescans_pass(4)                            # it would have been taken by now
    assert everything_under(outside) == {"a.txt": b"secret"}
    assert not list(tmp_path.rglob("*.chunks.json"))
    assert watcher.stop() == 0


def test_polling_never_descends_into_a_linked_subfolder(tmp_path, watch):
    inbox, outside = tmp_path / "in", tmp_path / "outside"
    inbox.mkdir()
    outside.mkdir()
    (outside / "b.txt").write_text("secret", encoding="utf-8")
    (inbox / "sub").symlink_to(outside)
    (inbox / "real").mkdir()
    (inbox / "real" / "c.txt").write_text("taken", encoding="utf-8")
    watcher = watch(inbox, "--recursive", "--poll", "0.2", "-v")
    watcher.wait_for(lambda: "real/c.txt" in results(inbox), what="the real subfolder's file")
    watcher.rescans_pass(3)
    assert everything_under(outside) == {"b.txt": b"secret"}
    assert set(results(inbox)) == {"real/c.txt"}
    assert watcher.stop() == 0


def test_a_link_inside_the_output_folder_is_not_written_through(tmp_path, watch):
    inbox, out, elsewhere = tmp_path / "in", tmp_path / "out", tmp_path / "elsewhere"
    (inbox / "sub").mkdir(parents=True)
    out.mkdir()
    elsewhere.mkdir()
    (out / "sub").symlink_to(elsewhere)
    (inbox / "sub" / "a.txt").write_text("hello", encoding="utf-8")
    (inbox / "top.txt").write_text("the top file is fine", encoding="utf-8")
    watcher = watch(inbox, "--recursive", "--output-dir", str(out), "--rescan", "1", "-v")
    watcher.wait_for(lambda: (out / "top.txt.chunks.json").exists(), what="the top file")
    watcher.wait_for(lambda: watcher.lines("failed sub/a.txt"), what="the refusal")
    watcher.rescans_pass(3)
    assert everything_under(elsewhere) == {}
    failures = watcher.lines("failed sub/a.txt")
    assert failures == ["failed sub/a.txt: cannot write its result: a symbolic link or a file "
                        "is on its output path, where a folder should be; trying again in 5 s"]
    assert watcher.stop() == 0


def test_move_done_inside_a_recursive_inbox_is_refused_at_start(inbox):
    result = subprocess.run([chunkd_command(), "watch", str(inbox), "--recursive",
                             "--move-done", str(inbox / "done")], capture_output=True, timeout=HANG)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == (
        "chunkd watch: --move-done folder is inside the inbox, which --recursive watches: "
        "files would be taken again; put it outside")


def test_a_second_daemon_on_the_same_inbox_exits_2(inbox, watch):
    first = watch(inbox)
    first.started()
    second = subprocess.run([chunkd_command(), "watch", str(inbox)], capture_output=True,
                            timeout=HANG)
    assert second.returncode == 2
    assert second.stderr.decode().strip() == ("chunkd watch: another chunkd watch is already "
                                              "using this inbox; stop it first (one daemon per inbox)")
    assert first.process.poll() is None
    assert first.stop() == 0


# --- a container's first process ---------------------------------------------------

def test_the_daemon_runs_as_a_containers_first_process(inbox, watch):
    """As PID 1, the daemon starts (a worker once took PID 1 for its parent's death,
    and the daemon failed at start), chunks as the filter does, and SIGTERM, which PID
    1 passes on to it, stops it, status 0."""
    watcher = watch(inbox, prefix=FIRST_PROCESS)
    watcher.started()
    daemon = first_process_of(watcher.process)
    path = inbox / "a.md"
    path.write_text(corpus_documents()[0].read_text(encoding="utf-8"), encoding="utf-8")
    watcher.wait_for(lambda: "a.md" in results(inbox), what="a result")
    assert results(inbox)["a.md"]["chunks"] == filter_chunks(path)
    os.kill(daemon, signal.SIGTERM)
    assert watcher.process.wait(timeout=HANG) == 0
    assert watcher.lines("stopped")


def children(pid: int) -> list[int]:
    return [int(child) for child in
            open(f"/proc/{pid}/task/{pid}/children").read().split()]


def deepest(pid: int, depth: int) -> list[tuple[int, int, int]]:
    """(depth, parent, process) for each process under ``pid``."""
    return [entry for child in children(pid)
            for entry in [(depth + 1, pid, child), *deepest(child, depth + 1)]]


def test_a_containers_first_process_reaps_what_a_killed_worker_leaves(inbox, watch):
    """A worker killed (the OOM killer) leaves its extraction process to PID 1, which
    the kernel makes its parent: it is reaped, not left a zombie for good, and the
    daemon goes on."""
    watcher = watch(inbox, "--workers", "1", prefix=FIRST_PROCESS)
    watcher.started()
    first = first_process_of(watcher.process)
    (inbox / "a.html").write_text("<html><body><p>Some text.</p></body></html>")
    watcher.wait_for(lambda: "a.html" in results(inbox), what="a result")
    # The extraction process (kept running) is the deepest, the worker its parent.
    worker, extraction = max(deepest(first, 0))[1:]
    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + HANG
    while os.path.exists(f"/proc/{extraction}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{extraction}"), \
        open(f"/proc/{extraction}/status").read()[:300]
    (inbox / "b.md").write_text("More text.")
    watcher.wait_for(lambda: "b.md" in results(inbox), what="the next result")
    os.kill(first, signal.SIGTERM)
    assert watcher.process.wait(timeout=HANG) == 0


def test_the_filters_jobs_run_under_a_containers_first_process(tmp_path):
    """The filter as PID 1 with --jobs 2: its workers start and give the records that
    one process gives."""
    paths = [str(path) for path in corpus_documents()[:4]]
    alone = subprocess.run([chunkd_command(), "--ids", *paths], capture_output=True,
                           timeout=HANG)
    first = subprocess.run([*FIRST_PROCESS, chunkd_command(), "--jobs", "2", "--ids", *paths],
                           capture_output=True, timeout=HANG)
    assert (first.returncode, first.stderr) == (0, b"")
    assert first.stdout == alone.stdout != b""


# --- names are bytes ---------------------------------------------------------------

def test_a_name_that_is_not_utf8_gets_its_result_and_is_not_redone(inbox, watch):
    raw = b"caf\xe9 \n.txt"                      # Latin-1, and a newline, in a name
    path = os.path.join(os.fsencode(inbox), raw)
    with open(path, "wb") as stream:
        stream.write(b"A name is bytes on Linux.")
    watcher = watch(inbox, "--rescan", "1", "-v")
    result_path = path + b".chunks.json"
    watcher.wait_for(lambda: os.path.exists(result_path), what="the result")
    watcher.rescans_pass(2)
    result = orjson.loads(open(result_path, "rb").read())
    assert result["source"] == {"bytes": base64.b64encode(raw).decode()}
    assert [c["text"] for c in result["chunks"]] == ["A name is bytes on Linux."]
    [line] = watcher.lines("processed ")
    assert line.startswith("processed caf\\xe9 \\x0a.txt: 1 chunks, 25 bytes, ")
    assert not [line for line in watcher.log()
                if "Traceback" in line or line.startswith(("error ", "failed "))]
    assert watcher.stop() == 0


def test_long_names_fit_their_temporary_files_and_too_long_ones_are_skipped_once(inbox, watch):
    fits = "f" * 236 + ".txt"                    # 240 bytes: its result name is 252
    too_long = "t" * 246 + ".txt"                # 250 bytes: no result name fits in 255
    (inbox / fits).write_text("A long name.", encoding="utf-8")
    (inbox / too_long).write_text("A name too long.", encoding="utf-8")
    watcher = watch(inbox, "--rescan", "1", "-v")
    watcher.wait_for(lambda: fits in results(inbox), what="the long name's result")
    watcher.wait_for(lambda: watcher.lines(f"skipped {too_long}"), what="the skip")
    watcher.rescans_pass(3)
    assert watcher.lines(f"skipped {too_long}") == [
        f"skipped {too_long}: name too long for its result name (over 255 bytes with the "
        "suffix); rename it"]
    assert not watcher.lines(f"chunking {too_long}")  # skipped when seen, never tried
    assert watcher.stop() == 0


# --- never loops, never stalls, never a stale result --------------------------------

def test_a_notify_socket_nobody_reads_never_blocks_the_daemon(inbox, watch):
    listener, name = notify_socket()                 # bound, never read: it fills up
    try:
        env = os.environ | {"NOTIFY_SOCKET": name, "WATCHDOG_USEC": "20000"}
        watcher = watch(inbox, env=env)
        names = [f"n{n}.txt" for n in range(20)]
        for number, file_name in enumerate(names):
            (inbox / file_name).write_text(f"File number {number}.", encoding="utf-8")
        watcher.wait_for(lambda: len(results(inbox)) == 20, what="all files")
        started = time.monotonic()
        assert watcher.stop(timeout=HANG) == 0
        assert time.monotonic() - started < 30  # a blocked send would never return
    finally:
        listener.close()


def test_the_watchdog_is_pinged_while_a_long_file_blocks_the_queue(inbox, watch):
    """A file waiting behind a long one is not a stuck worker: pings go on."""
    (inbox / "big.md").write_bytes(b"Words of a long file. " * 200_000)  # 17 blocks
    listener, name = notify_socket()
    listener.settimeout(0.5)
    env = os.environ | {"NOTIFY_SOCKET": name, "WATCHDOG_USEC": "1000000"}
    try:
        # Each block read 0.3 s late: the big file takes at least 5 s on any machine.
        watcher = watch(inbox, "--tokens", "16", "--workers", "1", "-v", env=env,
                        faults={"slow_blocks": 0.3})
        watcher.wait_for(lambda: watcher.lines("chunking big.md"), what="the big file")
        (inbox / "small.txt").write_text("Waits for the big one.", encoding="utf-8")
        pings, started = [], time.monotonic()
        while time.monotonic() - started < 4 and not (inbox / "big.md.chunks.json").exists():
            try:
                if b"WATCHDOG=1" in listener.recv(4096):
                    pings.append(time.monotonic())
            except TimeoutError:
                pass
        assert time.monotonic() - started >= 4
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        # Pinged every 0.5 s; a queued file would have read as stuck after 2 s.
        assert len(pings) >= 6 and max(gaps) < 1.5, (len(pings), gaps)
    finally:
        listener.close()


def test_changing_errors_rechunks_a_bad_file(inbox, watch):
    (inbox / "bad.txt").write_bytes(b"almost \xff fine")
    watcher = watch(inbox)
    watcher.wait_for(lambda: (inbox / "bad.txt.error.json").exists(), what="the error")
    assert watcher.stop() == 0
    watcher = watch(inbox, "--errors", "replace")
    watcher.wait_for(lambda: "bad.txt" in results(inbox), what="the result with U+FFFD")
    assert [c["text"] for c in results(inbox)["bad.txt"]["chunks"]] == ["almost \ufffd fine"]
    assert results(inbox)["bad.txt"]["settings"]["errors"] == "replace"
    assert not (inbox / "bad.txt.error.json").exists()
    assert watcher.stop() == 0


def test_a_result_never_outlives_the_file_it_belongs_to(inbox, tmp_path, watch):
    watcher = watch(inbox, "--rescan", "1", "-v")
    (inbox / "turns-bad.txt").write_text("Good at first.", encoding="utf-8")
    (inbox / "becomes-link.txt").write_text("A file, then a link.", encoding="utf-8")
    watcher.wait_for(lambda: len(results(inbox)) == 2, what="two results")
    (inbox / "turns-bad.txt").write_bytes(b"Bad \xff now.")
    (tmp_path / "target.txt").write_text("elsewhere", encoding="utf-8")
    (inbox / "becomes-link.txt").unlink()
    (inbox / "becomes-link.txt").symlink_to(tmp_path / "target.txt")
    watcher.wait_for(lambda: (inbox / "turns-bad.txt.error.json").exists(), what="the error")
    watcher.wait_for(lambda: watcher.lines("skipped becomes-link.txt"), what="the skip")
    assert not (inbox / "turns-bad.txt.chunks.json").exists()
    assert not (inbox / "becomes-link.txt.chunks.json").exists()
    assert watcher.stop() == 0


def test_no_result_for_a_file_deleted_while_it_is_chunked(inbox, watch):
    (inbox / "big.md").write_bytes(b"Words of a long file. " * 200_000)  # 17 blocks
    # Each block read 0.3 s late: the worker is still reading when the file goes.
    watcher = watch(inbox, "--tokens", "16", "-v", faults={"slow_blocks": 0.3})
    watcher.wait_for(lambda: watcher.lines("chunking big.md"), what="work on the big file")
    time.sleep(0.5)
    (inbox / "big.md").unlink()
    watcher.wait_for(lambda: watcher.lines("gone big.md"), timeout=HANG, what="the outcome")
    assert watcher.lines("gone big.md") == ["gone big.md: deleted while it was read"]
    assert [p.name for p in inbox.iterdir()] == [".chunkd-lock"]
    assert watcher.stop() == 0


def test_a_full_disk_is_retried_with_back_off_and_logged_once(inbox, tmp_path, watch):
    full = tmp_path / "disk-is-full"
    full.touch()
    (inbox / "a.txt").write_text("Waits for room.", encoding="utf-8")
    # The daemon's back-off from 1 s, not 5 s: the same tries, sooner.
    watcher = watch(inbox, faults={"enospc_while": str(full), "retry_first": 1})
    watcher.wait_for(lambda: watcher.lines("failed a.txt"), what="the failure")
    time.sleep(2)                                     # the first retry (after 1 s) fails too
    assert watcher.lines("failed a.txt") == ["failed a.txt: cannot write its result: "
                                             "No space left on device; trying again in 1 s"]
    full.unlink()
    watcher.wait_for(lambda: "a.txt" in results(inbox), timeout=HANG, what="the result")
    assert results(inbox)["a.txt"]["chunks"] == filter_chunks(inbox / "a.txt")
    assert not [p for p in inbox.iterdir() if p.name.endswith(".chunkd-tmp")]
    assert watcher.stop() == 0


def test_an_unreadable_file_gets_one_complete_error_result_and_is_not_retried(inbox, watch):
    (inbox / "locked-unreadable.txt").write_text("No one may read me.", encoding="utf-8")
    watcher = watch(inbox, "--rescan", "1", "-v", faults={"eacces_suffix": "unreadable.txt"})
    target = inbox / "locked-unreadable.txt.error.json"
    watcher.wait_for(target.exists, what="the error result")
    watcher.rescans_pass(3)
    error = orjson.loads(target.read_bytes())
    assert error["error"] == "cannot open: Permission denied"
    assert error["size"] == 19 and error["sha256"] is None
    assert error["stat"]["inode"] == (inbox / "locked-unreadable.txt").stat().st_ino
    assert len(watcher.lines("error locked-unreadable.txt")) == 1
    assert len(watcher.lines("chunking locked-unreadable.txt")) == 1
    assert watcher.stop() == 0


def test_a_file_that_kills_its_worker_gets_an_error_and_the_rest_goes_on(inbox, watch):
    (inbox / "poison-crash.txt").write_text("Kills the worker that reads it.", encoding="utf-8")
    watcher = watch(inbox, "--rescan", "1", "-v", faults={"crash_suffix": "crash.txt"})
    target = inbox / "poison-crash.txt.error.json"
    watcher.wait_for(target.exists, timeout=HANG, what="the error result")
    assert orjson.loads(target.read_bytes())["error"] == \
        "chunking it made a worker process die (twice, the second time alone)"
    (inbox / "after.txt").write_text("Chunked by the new workers.", encoding="utf-8")
    watcher.wait_for(lambda: "after.txt" in results(inbox), what="the next file")
    watcher.rescans_pass(2)
    assert len(watcher.lines("a worker process died")) == 2
    assert watcher.stop() == 0


def test_a_bug_gives_the_file_an_error_result_once_and_keeps_its_message_out(inbox, watch):
    """An exception chunkd never expects is a bug: the file gets an error result naming
    it, is not tried again at every rescan, and the exception's message (which may hold
    what an endpoint said) is neither in the result nor in the log."""
    (inbox / "odd-bug.txt").write_text("Meets a bug.", encoding="utf-8")
    (inbox / "fine.txt").write_text("Chunked as ever.", encoding="utf-8")
    watcher = watch(inbox, "--rescan", "1", "-v", faults={"bug_suffix": "bug.txt"})
    target = inbox / "odd-bug.txt.error.json"
    watcher.wait_for(target.exists, timeout=HANG, what="the error result")
    error = orjson.loads(target.read_bytes())["error"]
    assert error.startswith("a bug in chunkd (ZeroDivisionError at chunkd/"), error
    assert "please report it" in error
    watcher.wait_for(lambda: "fine.txt" in results(inbox), what="the other file")
    watcher.rescans_pass(3)
    assert watcher.stop() == 0
    assert len(watcher.lines("chunking odd-bug.txt")) == 1
    assert len(watcher.lines("error odd-bug.txt")) == 1
    assert len(watcher.lines("unexpected ZeroDivisionError chunking odd-bug.txt")) == 1
    log = "\n".join(watcher.log())
    assert "secret-in-the-message" not in log and "Traceback" not in log


def test_followed_links_are_not_requeued_at_every_rescan(inbox, tmp_path, watch):
    (tmp_path / "target.txt").write_text("Reached through a link.", encoding="utf-8")
    (inbox / "link.txt").symlink_to(tmp_path / "target.txt")
    watcher = watch(inbox, "--follow-symlinks", "--rescan", "1", "-v")
    watcher.wait_for(lambda: "link.txt" in results(inbox), what="the link's result")
    watcher.rescans_pass(3)
    assert len(watcher.lines("chunking link.txt")) == 1
    assert watcher.stop() == 0


def caught(pid: int, number: int) -> bool:
    """Whether process ``pid`` has a handler for signal ``number`` (its SigCgt mask)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            mask = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    except FileNotFoundError:
        return False
    return bool(int(mask, 16) >> (number - 1) & 1)


def test_sighup_during_start_up_does_not_kill_the_daemon(inbox, tmp_path):
    """The handlers are installed before the slow part of start-up (imports, folders,
    workers and their tokenizer, catch-up); signals sent then are not fatal."""
    (inbox / "a.txt").write_text("Chunked after an early reload.", encoding="utf-8")
    log = tmp_path / "log"
    with open(log, "wb") as stderr:
        process = subprocess.Popen([chunkd_command(), "watch", str(inbox), "--settle", "0.2",
                                    "--tokens", "100"], stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + HANG
        while not caught(process.pid, signal.SIGHUP):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.002)
        for _ in range(5):
            process.send_signal(signal.SIGHUP)
            time.sleep(0.01)
        assert "to catch up" not in log.read_text()  # it was still starting
        deadline = time.monotonic() + HANG
        while not (inbox / "a.txt.chunks.json").exists() and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            time.sleep(0.05)
        assert (inbox / "a.txt.chunks.json").exists()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=HANG) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_restart_confirms_current_results_without_reading_the_inputs(inbox, watch):
    texts = {f"c{n:03}.md": p.read_text(encoding="utf-8")
             for n, p in enumerate(corpus_documents()[:200])}
    for name, text in texts.items():
        (inbox / name).write_text(text, encoding="utf-8")
    watcher = watch(inbox)
    watcher.wait_for(lambda: len(results(inbox)) == 200, timeout=HANG, what="200 results")
    assert watcher.stop() == 0
    watcher = watch(inbox, "--rescan", "1", "-v", faults={"eacces_suffix": ".md"})
    watcher.rescans_pass(2)               # an input read now would fail with EACCES
    assert watcher.lines("chunking ") == [] and watcher.lines("error ") == []
    assert len(results(inbox)) == 200
    assert watcher.stop() == 0


def test_a_file_that_changes_whenever_it_is_read_backs_off(inbox, watch):
    """A followed link to /proc: its size is 0 and it reads as more, every time."""
    (inbox / "status.txt").symlink_to("/proc/self/status")
    watcher = watch(inbox, "--follow-symlinks", "-v", settle="0.2")
    watcher.wait_for(lambda: watcher.lines("failed status.txt"), what="the back-off")
    time.sleep(3)                                     # within the 5 s back-off
    assert len(watcher.lines("chunking status.txt")) == 3
    assert watcher.lines("failed status.txt") == [
        "failed status.txt: changed while it was read, 3 times in a row; trying again in 5 s"]
    assert watcher.stop() == 0


def test_a_producers_look_alike_lock_file_does_not_keep_the_daemon_down(inbox, watch):
    (inbox / ".chunkd-lock").write_text("a producer's", encoding="utf-8")
    (inbox / ".chunkd-lock").chmod(0o666)
    holder = subprocess.Popen(["flock", str(inbox / ".chunkd-lock"), "sleep", "600"])
    try:
        time.sleep(0.3)
        (inbox / "a.txt").write_text("Chunked all the same.", encoding="utf-8")
        watcher = watch(inbox)
        watcher.wait_for(lambda: "a.txt" in results(inbox), what="the result")
        assert (inbox / ".chunkd-lock").stat().st_mode & 0o777 == 0o600
        second = subprocess.run([chunkd_command(), "watch", str(inbox)], capture_output=True,
                                timeout=HANG)
        assert second.returncode == 2 and b"another chunkd watch" in second.stderr
        assert watcher.stop() == 0
    finally:
        holder.kill()
        holder.wait()


def test_events_watchdog_says_were_lost_make_a_rescan_at_once(inbox, watch):
    watcher = watch(inbox, "--rescan", "3600", faults={"lose_events": True})
    watcher.started()
    (inbox / "a.txt").write_text("Its events are lost; a rescan finds it.", encoding="utf-8")
    watcher.wait_for(lambda: "a.txt" in results(inbox), timeout=HANG, what="the result")
    assert watcher.stop() == 0


def test_an_input_stranded_by_an_interrupted_move_is_reported_at_start(inbox, tmp_path, watch):
    stranded = inbox / ".0123456789abcdef.chunkd-moving"
    stranded.write_text("An input whose move was interrupted.", encoding="utf-8")
    watcher = watch(inbox, "--move-done", str(tmp_path / "done"))
    watcher.started()
    assert watcher.lines("an input left under a hidden name") == [
        "an input left under a hidden name by a run stopped while moving it to --move-done: "
        ".0123456789abcdef.chunkd-moving; give it its name back"]
    assert stranded.exists()
    assert watcher.stop() == 0


def test_a_result_another_chunkd_version_made_is_redone(inbox, watch):
    (inbox / "a.txt").write_text("Chunked by an older chunkd.", encoding="utf-8")
    watcher = watch(inbox)
    watcher.wait_for(lambda: "a.txt" in results(inbox), what="the result")
    assert watcher.stop() == 0
    path = inbox / "a.txt.chunks.json"
    older = orjson.loads(path.read_bytes()) | {"chunker": "chunkd 0.1.0"}
    path.write_bytes(orjson.dumps(older))
    watcher = watch(inbox, "-v")
    watcher.wait_for(lambda: watcher.processed() == ["a.txt"], what="the file redone")
    assert results(inbox)["a.txt"]["chunker"] == f"chunkd {chunkd.__version__}"
    assert watcher.stop() == 0


def test_a_made_folder_that_cannot_take_its_parents_permissions_leaks_no_descriptor(
        tmp_path, monkeypatch):
    """The daemon makes its output's subfolders with ``open_subfolder(create=True)``,
    giving each its parent's permissions; where that fails (another user's folder put
    there between the mkdir and the open: EPERM), the error goes on and every
    descriptor opened on the way is closed."""
    from chunkd.inputs.readers import open_subfolder

    base = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)

    def refuse(fd: int, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    try:
        monkeypatch.setattr(os, "fchmod", refuse)
        before = sorted(os.listdir("/proc/self/fd"))
        with pytest.raises(PermissionError):
            open_subfolder(base, ["a", "b"], create=True)
        assert sorted(os.listdir("/proc/self/fd")) == before
        assert (tmp_path / "a").is_dir()
    finally:
        os.close(base)
