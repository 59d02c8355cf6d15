"""Findings of an attack on the hardened daemon and filter.

Each test reproduces one finding and failed on the code it was written against; the
README promise it holds the code to is quoted in its docstring. Every daemon is stopped by the ``watch`` fixture; every large file is
sparse (no disk used) and every memory-hungry child runs under a limit.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import threading
import time
from pathlib import Path

import orjson
import pytest

from command import HANG, chunkd_command, ndjson, run_chunkd
from watching import results

pytestmark = pytest.mark.slow

MiB = 1 << 20


# --- helpers -----------------------------------------------------------------------------

def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (the daemon's workers and helpers)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def status_kib(pid: int, key: str) -> int:
    """A ``/proc/PID/status`` value in KiB (VmHWM: the peak resident size), 0 if gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def holder_of(pids: list[int], path: Path) -> int | None:
    """The first of ``pids`` that has ``path`` open."""
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    return pid
            except OSError:
                continue
    return None


def wait_until_a_worker_opens(watcher, path: Path, timeout: float = HANG) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = holder_of(descendants(watcher.process.pid), path)
        if pid is not None:
            return pid
        time.sleep(0.001)
    raise AssertionError(f"no worker opened {path}; log tail: {watcher.log()[-5:]}")


def drop(path: Path, data: bytes) -> None:
    """The producer contract: write under a hidden name, rename into place."""
    part = path.with_name(f".{path.name}.part")
    part.write_bytes(data)
    part.rename(path)


def limited(megabytes: int):
    """A preexec_fn capping the child's address space: a runaway child fails, the
    shared machine does not."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (megabytes * MiB, megabytes * MiB))
    return limit


# --- the daemon: denial of service by any producer -------------------------------------

def test_a_fifo_at_a_result_name_neither_hangs_the_daemon_nor_blocks_sigterm(inbox, watch):
    """README: 'FIFOs ... are skipped with one log line each'; 'SIGTERM ... exits 0
    within seconds'; 'chunks every eligible file'. A producer's `mkfifo
    a.txt.chunks.json` makes the main process block in open() while it checks whether
    a.txt's result is current (at the start-up catch-up, or on the event), so nothing
    else is ever chunked and SIGTERM is ignored (under systemd: watchdog restarts into
    the same hang)."""
    (inbox / "a.txt").write_text("a producer's file", encoding="utf-8")
    os.mkfifo(inbox / "a.txt.chunks.json")
    (inbox / "b.txt").write_text("someone else's file", encoding="utf-8")
    watcher = watch(inbox, "--rescan", "1")
    watcher.wait_for((inbox / "b.txt.chunks.json").exists, timeout=HANG,
                     what="b.txt's result (the daemon hangs opening the FIFO)")
    assert watcher.stop(timeout=HANG) == 0


def test_max_bytes_bounds_what_a_worker_reads_even_if_the_file_grows(inbox, watch):
    """README: '--max-bytes N: larger files get an error result (a file is chunked in
    memory)'. The size is checked once, on stat; a file extended while a worker reads
    it (`truncate -s`, sparse: no disk used) is read and chunked to its end in memory.
    With --max-bytes 16 MiB, a file grown to 384 MiB made a worker peak near 600 MB
    (1 GiB: 1.6 GB, 36 s); a 100 GiB sparse file exhausts the host's memory."""
    target = inbox / "a.txt"
    watcher = watch(inbox, "--max-bytes", str(16 * MiB), "-v")
    watcher.started()
    drop(target, (b"word " * 200 + b"\n\n") * (15 * MiB // 1002))
    worker = wait_until_a_worker_opens(watcher, target)
    os.truncate(target, 384 * MiB)
    error = inbox / "a.txt.error.json"
    watcher.wait_for(error.exists, timeout=HANG, what="the error result of the grown file")
    peak = status_kib(worker, "VmHWM") // 1024
    assert peak < 200, f"a worker read far beyond --max-bytes: peak {peak} MB"
    assert watcher.stop() == 0


def test_a_large_file_at_a_result_name_is_not_read_into_memory(inbox, watch):
    """The daemon decides whether a result is current from its head, but a file at the
    result's name without the `,"chunks":` marker is read whole
    (`head + stream.read()`), in the main process: a producer's 512 MiB sparse
    `a.txt.chunks.json` (no disk used) costs the daemon 1 GB and stalls its start-up
    for many seconds (1 GiB: 2 GB, 25 s)."""
    (inbox / "a.txt").write_text("a producer's file", encoding="utf-8")
    with open(inbox / "a.txt.chunks.json", "wb") as planted:
        planted.truncate(512 * MiB)
    watcher = watch(inbox)
    watcher.started()
    peak = status_kib(watcher.process.pid, "VmHWM") // 1024
    assert peak < 200, f"the daemon read the planted result into memory: peak {peak} MB"
    assert watcher.stop() == 0


def test_files_merely_queued_when_a_worker_dies_are_not_blamed_for_it(inbox, watch):
    """README: 'A worker process that dies ... is replaced; the files it had in hand are
    tried again, and a file in hand at two deaths gets an error result' and 'A file at
    fault gets its error result once ... and is not tried again until it changes'.
    Every file queued to the pool (16 per worker) counts as 'in hand': one poison
    file (here a fault; for an attacker, a file grown past memory, see above) gives
    about half of 30 other users' files a permanent error result."""
    for number in range(30):
        (inbox / f"innocent{number:02}.txt").write_text(
            f"Someone else's document {number}. " * 2000, encoding="utf-8")
    (inbox / "a-poison-crash.txt").write_text("Kills the worker that reads it.", encoding="utf-8")
    watcher = watch(inbox, "--workers", "1", "-v", faults={"crash_suffix": "crash.txt"})
    watcher.wait_for((inbox / "a-poison-crash.txt.error.json").exists, timeout=HANG,
                     what="the poison file's error result")
    watcher.wait_for(lambda: len(results(inbox)) + len(list(inbox.glob("innocent*.error.json")))
                     >= 30, timeout=HANG, what="an outcome for every innocent file")
    blamed = sorted(p.name for p in inbox.glob("innocent*.error.json"))
    assert blamed == [], f"{len(blamed)} innocent files got an error result: {blamed[:3]}"
    assert watcher.stop() == 0


def test_a_file_handed_on_just_after_a_worker_died_goes_to_a_new_pool(inbox, watch):
    """A worker dies (the poison file), and before the pool's own thread has handed on
    the failure of the file it had (held back 3 s here, as a busy machine can), another
    file is due: the daemon gives it to a new pool and keeps running (it exited, its
    pool's submit raising BrokenProcessPool: seen in CI), and the poison file still
    gets its error result."""
    (inbox / "a-poison-crash.txt").write_text("Kills the worker that reads it.", encoding="utf-8")
    watcher = watch(inbox, "--workers", "1", "-v",
                    faults={"crash_suffix": "crash.txt", "late_failures": 3})
    watcher.wait_for(lambda: watcher.lines("chunking a-poison-crash.txt"),
                     what="the poison file handed to a worker")
    (inbox / "after.txt").write_text("Written just after the worker died.", encoding="utf-8")
    watcher.wait_for((inbox / "after.txt.chunks.json").exists, timeout=HANG,
                     what="the later file's result")
    watcher.wait_for((inbox / "a-poison-crash.txt.error.json").exists, timeout=HANG,
                     what="the poison file's error result")
    assert watcher.stop() == 0


# --- the daemon: outside its folders, results that do not belong -------------------------

def test_a_producer_holding_a_lock_on_the_inbox_cannot_keep_the_daemon_down(inbox, watch):
    """README: 'One daemon per inbox: a second one ... exits 2 (an exclusive lock)' and
    (systemd) 'Restart=on-failure, except for exit status 2 (a configuration error)'.
    The lock is a flock on the shared inbox folder itself, which every producer can
    open: `flock -n /srv/chunkd/inbox sleep infinity` makes the next start (a reboot,
    an upgrade, a watchdog restart) exit 2, and systemd then leaves the service down."""
    import fcntl

    held = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)      # a producer's lock
        (inbox / "a.txt").write_text("a file", encoding="utf-8")
        watcher = watch(inbox)
        watcher.wait_for((inbox / "a.txt.chunks.json").exists, timeout=HANG,
                         what="a result despite a producer's lock on the folder")
        assert watcher.stop() == 0
    finally:
        os.close(held)


def test_a_subfolder_moved_out_of_the_inbox_mid_read_is_neither_resulted_nor_moved(tmp_path, watch):
    """README: 'Nothing outside its folders' and 'no result is written for a file
    deleted, replaced or written to while it was read'. The worker keeps the
    subfolder's descriptor: after `mv inbox/sub private/sub` mid-read it re-creates
    inbox/sub for a result of a file no longer in the inbox and, with --move-done,
    unlinks private/sub/a.txt (outside the inbox) to move it into DONE."""
    inbox, private, done = tmp_path / "in", tmp_path / "private", tmp_path / "done"
    (inbox / "sub").mkdir(parents=True)
    private.mkdir()
    watcher = watch(inbox, "--recursive", "--move-done", str(done), "-v")
    watcher.started()
    target = inbox / "sub" / "a.txt"
    drop(target, (b"some words " * 100 + b"\n\n") * 40000)       # 44 MB: a read of ~1 s
    wait_until_a_worker_opens(watcher, target)
    (inbox / "sub").rename(private / "sub")
    watcher.wait_for(lambda: watcher.lines("processed ") or watcher.lines("gone ")
                     or watcher.lines("changed ") or watcher.lines("skipped "),
                     timeout=HANG, what="the outcome")
    time.sleep(1)
    assert (private / "sub" / "a.txt").exists(), "a file outside the inbox was moved away"
    assert not list(done.rglob("a.txt"))
    assert not (inbox / "sub").exists(), "the daemon re-created the moved folder for a result"
    assert watcher.stop() == 0


def test_a_file_replaced_while_its_old_result_is_written_gets_its_own_result(inbox, watch):
    """README: 'A result always belongs to the file now at its name' and 'A file
    modified later gets a new result (at once when it is rewritten and closed ...)'.
    Events for a file in progress are dropped (`note` returns while it is running), and
    the outcome records the old version as current, so a version renamed in while the
    old result is being written keeps the old result until the next full rescan
    (--rescan, 60 s by default)."""
    target = inbox / "a.txt"
    paused, go = inbox.parent / "paused", inbox.parent / "go"
    watcher = watch(inbox, "--rescan", "600", "-v", faults={"pause_writing": {
        "suffix": "a.txt.chunks.json", "paused": str(paused), "go": str(go)}})
    watcher.started()
    drop(target, b"version one\n")
    watcher.wait_for(paused.exists, what="the old version's result about to be written")
    new = b"version two, longer\n"
    drop(target, new)
    go.touch()

    def current() -> bool:
        try:
            return orjson.loads((inbox / "a.txt.chunks.json").read_bytes())["size"] == len(new)
        except (OSError, ValueError):
            return False
    watcher.wait_for(current, timeout=HANG, what="the new version's result (the old one stays)")
    assert watcher.stop() == 0


def test_move_done_moves_only_the_file_that_was_chunked(tmp_path, watch):
    """README: '--move-done DIR: move each input there after success' and 'A result
    always belongs to the file now at its name'. The input is moved by name after its
    result is written: a new version renamed in meanwhile is the one moved, unchunked
    (DONE is not watched), and the old version's result stays in the inbox, so the
    new version is silently never chunked."""
    inbox, done = tmp_path / "in", tmp_path / "done"
    inbox.mkdir()
    target = inbox / "a.txt"
    paused, go = tmp_path / "paused", tmp_path / "go"
    watcher = watch(inbox, "--move-done", str(done), "-v", faults={"pause_writing": {
        "suffix": "a.txt.chunks.json", "paused": str(paused), "go": str(go)}})
    watcher.started()
    drop(target, b"version one\n")
    watcher.wait_for(paused.exists, what="the old version's result about to be written")
    new = b"version two, longer\n"
    drop(target, new)
    go.touch()

    def new_version_chunked_then_moved() -> bool:
        try:
            result = orjson.loads((inbox / "a.txt.chunks.json").read_bytes())
            return result["size"] == len(new) and (done / "a.txt").read_bytes() == new
        except (OSError, ValueError):
            return False
    watcher.wait_for(new_version_chunked_then_moved, timeout=HANG,
                     what="the new version's result, then the new version moved")
    assert not target.exists()
    assert watcher.stop() == 0


def test_changing_format_leaves_no_stale_result_of_the_other_format(inbox, watch):
    """README: 'a stale result is removed before the file is chunked again, when the
    file changes'. Only the current --format's result is removed: after a restart with
    --format msgpack, a.txt.chunks.json of the first version stays beside the new
    version for good."""
    (inbox / "a.txt").write_text("first version", encoding="utf-8")
    watcher = watch(inbox)
    watcher.wait_for((inbox / "a.txt.chunks.json").exists, what="the JSON result")
    assert watcher.stop() == 0
    watcher = watch(inbox, "--format", "msgpack", "-v")
    watcher.wait_for((inbox / "a.txt.chunks.msgpack").exists, what="the msgpack result")
    drop(inbox / "a.txt", b"second version, quite different")
    watcher.wait_for(lambda: len(watcher.lines("processed a.txt")) >= 2, what="the new version")
    assert not (inbox / "a.txt.chunks.json").exists(), \
        "a result of the old version is still at a.txt.chunks.json"
    assert watcher.stop() == 0


def test_folders_made_for_results_let_the_group_remove_them(tmp_path, watch):
    """README (systemd): 'results are written with UMask=0027, readable by the group;
    consumers remove results through the group-writable folder'. The folders the
    daemon creates under --output-dir (and --move-done) are 0750 under that umask, so
    consumers cannot remove the results inside them."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    (inbox / "sub").mkdir(parents=True)
    out.mkdir()
    out.chmod(0o2770)
    (inbox / "sub" / "a.txt").write_text("a file in a subfolder", encoding="utf-8")
    watcher = watch(inbox, "--recursive", "--output-dir", str(out),
                    preexec_fn=lambda: os.umask(0o027))
    watcher.wait_for((out / "sub" / "a.txt.chunks.json").exists, what="the result")
    mode = (out / "sub").stat().st_mode
    assert mode & 0o070 == 0o070, f"out/sub is {oct(mode & 0o7777)}: the group cannot remove results"
    assert watcher.stop() == 0


def test_naming_the_inbox_as_output_dir_is_not_taken_for_another_daemon(inbox, watch):
    """README: 'a second one on the same inbox or output folder exits 2 (an exclusive
    lock)'. With --output-dir naming the inbox itself the daemon locks the folder twice
    through two descriptors and refused to start, blaming 'another chunkd watch'. It
    starts, chunks, and stops cleanly."""
    (inbox / "a.txt").write_text("a file to chunk", encoding="utf-8")
    watcher = watch(inbox, "--output-dir", str(inbox))
    watcher.wait_for((inbox / "a.txt.chunks.json").exists, what="the result")
    assert watcher.stop() == 0
    assert not any("another chunkd watch" in line for line in watcher.log())


def test_durations_that_are_not_finite_are_usage_errors(inbox):
    """README: exit 2 for 'bad options ... (checked at start)'. `--settle nan` (or inf)
    is accepted and no file is ever taken; `--rescan nan` spins a core."""
    for option in (["--settle", "nan"], ["--settle", "inf"], ["--rescan", "nan"], ["--poll", "nan"]):
        process = subprocess.Popen([chunkd_command(), "watch", str(inbox), *option],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            status = process.wait(timeout=HANG)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=HANG)
            status = None
        assert status == 2, f"{' '.join(option)} was accepted"


def test_only_chunkds_own_temporary_files_are_removed_at_start(inbox, watch):
    """README: 'At start it removes temporary files a killed run left' - named
    `.XXXXXXXXXXXXXXXX.chunkd-tmp`. It removes every hidden `*.chunkd-tmp`, a
    producer's `.backup.chunkd-tmp` included."""
    (inbox / ".backup.chunkd-tmp").write_text("not chunkd's", encoding="utf-8")
    watcher = watch(inbox)
    watcher.started()
    assert (inbox / ".backup.chunkd-tmp").exists()
    assert watcher.stop() == 0


# --- the filter ----------------------------------------------------------------------------

def test_an_ndjson_line_nested_1000_deep_with_a_long_number_is_one_error():
    """README: 'fields nested more than 254 levels deep are refused. A bad line is
    reported and the other lines are chunked'; 'never a traceback'. A line that orjson
    accepts (up to 1024 levels) and that holds 19 digits after ':', '[' or ',' (even
    inside a string) is parsed again with json.loads, which raises RecursionError
    from about 990 levels: a traceback, and the whole batch's output is lost."""
    deep = "[" * 1000 + "]" * 1000
    lines = ['{"text":"first"}', '{"text":"x:1234567890123456789","x":' + deep + "}",
             '{"text":"after"}']
    result = run_chunkd("--input", "ndjson", input=("\n".join(lines) + "\n").encode())
    assert b"Traceback" not in result.stderr, result.stderr[-300:]
    assert [r["text"] for r in ndjson(result.stdout)] == ["first", "after"]
    assert result.returncode == 1


def test_jobs_stream_an_input_of_unknown_size_instead_of_rendering_it_in_a_worker(tmp_path):
    """README: '--jobs hands documents of up to 4 MiB to worker processes ... a larger
    document is chunked by the main process, in its turn, streaming. So memory stays
    bounded whatever the mix of inputs'. A pipe, `<(...)`, /dev/stdin or a device has
    size 0 when stat-ed, so it goes to a worker, which renders its whole output in
    memory: `chunkd /dev/zero a.txt` (default --jobs, 2 here) prints nothing and ends
    in a MemoryError traceback; with --jobs 1 it streams at once."""
    (tmp_path / "a.txt").write_text("a", encoding="utf-8")
    process = subprocess.Popen([chunkd_command(), "--jobs", "2", "/dev/zero", "a.txt"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=limited(1536))
    got = bytearray()

    def read() -> None:
        while len(got) < 4096 and (data := process.stdout.read1(4096)):
            got.extend(data)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=HANG)
    workers = descendants(process.pid)
    process.kill()  # as the OOM killer would: its workers must not outlive it
    process.wait()
    assert got.startswith(b'{"doc":"/dev/zero","index":0'), \
        f"no streamed output within 30 s: {bytes(got[:80])!r} {process.stderr.read()[-200:]!r}"
    assert workers
    deadline = time.monotonic() + HANG
    while any(os.path.exists(f"/proc/{pid}") and status_kib(pid, "VmRSS") for pid in workers):
        assert time.monotonic() < deadline, f"workers {workers} outlived the filter"
        time.sleep(0.05)


def test_a_closed_stderr_neither_loses_output_nor_mixes_messages_into_it(tmp_path):
    """README: 'Every problem is one line on stderr'. With stderr closed (`2>&-`),
    `echo hi | chunkd` writes nothing and exits 1 (the progress line's isatty() on
    None raises, and the traceback has nowhere to go); with -q the messages are
    printed to stdout, inside the NDJSON stream."""
    (tmp_path / "bad.txt").write_bytes(b"x\xff")
    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    plain = subprocess.run(["sh", "-c", f"echo hello | '{chunkd_command()}' 2>&-"],
                           capture_output=True, timeout=HANG)
    assert ndjson(plain.stdout) == [{"index": 0, "start": 0, "end": 5, "length": 5, "text": "hello"}]
    mixed = subprocess.run(["sh", "-c", f"'{chunkd_command()}' -q bad.txt a.txt 2>&-"],
                           capture_output=True, timeout=HANG, cwd=tmp_path)
    assert not mixed.stdout.startswith(b"chunkd:"), mixed.stdout
    assert [r["doc"] for r in ndjson(mixed.stdout)] == ["a.txt"]


def test_a_closed_stdin_is_one_line_not_a_traceback():
    """README: 'Every problem is one line on stderr, chunkd: WHERE: WHAT, never a
    traceback'. `chunkd <&-` and `chunkd --input ndjson <&-` end in AttributeError
    tracebacks (sys.stdin is None)."""
    for options in ("", "--input ndjson"):
        result = subprocess.run(["sh", "-c", f"'{chunkd_command()}' {options} <&-"],
                                capture_output=True, timeout=HANG)
        assert b"Traceback" not in result.stderr, result.stderr[-200:]
        assert result.stderr.startswith(b"chunkd: stdin"), result.stderr[-200:]
        assert result.returncode == 1


def test_a_huge_jobs_value_is_a_usage_error(tmp_path):
    """README: 'never a traceback'. `--jobs 3000000000` with several files is an
    OverflowError traceback from the process pool's semaphore; it is a usage error
    that says the range."""
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(name, encoding="utf-8")
    result = run_chunkd("--jobs", "3000000000", "a.txt", "b.txt", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-200:]
    assert result.stderr == b"chunkd: error: --jobs must be from 1 to 1024, got 3000000000\n"
    assert result.stdout == b""


def test_an_ndjson_field_named_chunks_is_not_silently_dropped_by_format_json():
    """README: 'any other fields are copied into each of its chunk records' (for
    --format json, into the document line). A field named "chunks" is not reserved, and
    --format json silently overwrites it with the chunk list: the value is lost with
    exit 0. It is reserved: the line is refused by name, and the next is chunked."""
    result = run_chunkd("--input", "ndjson", "--format", "json",
                        input=b'{"text":"ab","chunks":"keep me"}\n{"text":"cd"}\n')
    assert result.returncode == 1
    assert result.stderr == b"chunkd: stdin: line 1: field 'chunks' is reserved for chunk " \
                            b"records; rename it\n"
    assert [document["doc"] for document in ndjson(result.stdout)] == [2]
