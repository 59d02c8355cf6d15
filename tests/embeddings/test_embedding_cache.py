"""The embedding cache on disk trusts no folder another user can write, and a working
cache on a read-only or full filesystem is all misses, never set aside.

Through the installed ``chunkd`` (the filter with ``--embed-cache`` and ``chunkd watch``
with its default cache in the inbox), against a loopback endpoint that keeps every text
it is sent (``tests/embedding.py``). Planted entries are made exactly as an attacker
would: the key the SHA-256 of the model's identity, a zero byte and the text, the
checksum a BLAKE2b-128 of key and vector, the schema the cache's own.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import numpy
import pytest
from command import HANG, chunkd_command, ndjson, run_chunkd
from embedding import CountingEndpoint, hashed_vectors
from watching import Watcher, results

from chunkd.embeddings.cache import DATABASE

#: A user that is not the test's: a producer of the inbox.
PRODUCER = 65534
#: The vector an attacker plants: no model's.
PLANTED = numpy.full(8, 0.25, dtype="<f4")
TEXT = "Planted text about a harbour."


def identity(endpoint: CountingEndpoint) -> str:
    return f"hashed@{endpoint.url}/v1/embeddings"


def plant(database: Path, endpoint: CountingEndpoint, text: str = TEXT) -> None:
    """A ``vectors.sqlite`` with one entry for ``text``, as the attacker computes it."""
    key = hashlib.sha256(identity(endpoint).encode() + b"\0" + text.encode()).digest()
    vector = PLANTED.tobytes()
    with sqlite3.connect(database) as connection:
        connection.executescript(
            "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL, "
            "checksum BLOB NOT NULL, used INTEGER NOT NULL) WITHOUT ROWID;")
        connection.execute("INSERT INTO vectors VALUES (?, ?, ?, 0)", (
            key, vector, hashlib.blake2b(key + vector, digest_size=16).digest()))
    connection.close()


def options(endpoint: CountingEndpoint, cache: Path) -> list[str]:
    return ["--chars", "200", "--vectors", "--embed-url", endpoint.url,
            "--embed-model", "hashed", "--embed-cache", str(cache)]


def assert_the_models(records: list[dict]) -> None:
    assert records
    for record in records:
        assert record["vector"] == pytest.approx(hashed_vectors([record["text"]])[0])


def planted_by_a_producer(folder: Path, endpoint: CountingEndpoint) -> None:
    folder.mkdir()
    plant(folder / DATABASE, endpoint)
    os.chown(folder / DATABASE, PRODUCER, PRODUCER)
    os.chown(folder, PRODUCER, PRODUCER)


def planted_in_a_group_writable_folder(folder: Path, endpoint: CountingEndpoint) -> None:
    folder.mkdir()
    plant(folder / DATABASE, endpoint)
    folder.chmod(0o2770)


#: A cache folder another user could have filled, and what the refusal says.
UNTRUSTED = {
    "another user's folder": (planted_by_a_producer,
                              f"belongs to another user (uid {PRODUCER}), not trusted"),
    "a folder its group can write": (planted_in_a_group_writable_folder,
                                     "writable by others than its owner (mode 2770), not "
                                     "trusted"),
}


def vectors_of(inbox: Path, name: str) -> list[dict]:
    return [{"text": chunk["text"], "vector": chunk["vector"]}
            for chunk in results(inbox)[name]["chunks"]]


@pytest.mark.slow
@pytest.mark.parametrize("untrusted", UNTRUSTED)
def test_a_cache_folder_planted_in_the_inbox_serves_nothing(tmp_path: Path,
                                                            untrusted: str) -> None:
    """The inbox is group-writable: a producer can put a folder of its own in place of
    the daemon's default cache, with an entry for a text it then drops. The daemon does
    not trust it, nor stop for it: it says so in one line at start and runs without the
    cache; the entry is never served, the text goes to the model."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    make, says = UNTRUSTED[untrusted]
    with CountingEndpoint() as server:
        make(inbox / ".embedding-cache", server)
        (inbox / "k.md").write_text(TEXT, encoding="utf-8")
        watcher = Watcher(inbox, "--chars", "200", "--vectors", "--embed-url", server.url,
                          "--embed-model", "hashed")
        try:
            watcher.wait_for(lambda: "k.md" in watcher.processed(), what="k.md's result")
            assert watcher.stop() == 0
        finally:
            watcher.kill()
        assert server.texts == [TEXT]
    assert watcher.lines("chunkd watch: --embed-cache") == [
        f"chunkd watch: --embed-cache {inbox / '.embedding-cache'}: {says}: remove it, or "
        "give a folder of this user's own; running without the embedding cache: every text "
        "goes to the model"]
    assert_the_models(vectors_of(inbox, "k.md"))


def worker_of(daemon: int) -> int:
    """The daemon's one worker process (its other child is multiprocessing's tracker)."""
    found = [int(child) for child in
             Path(f"/proc/{daemon}/task/{daemon}/children").read_text().split()
             if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow
def test_a_folder_put_in_the_caches_place_mid_run_never_stops_the_daemon(
        tmp_path: Path) -> None:
    """While the daemon runs with its default cache, a producer moves the folder away and
    puts its own, with an entry for a text it then drops, in its place; a worker dies
    (killed). The new worker finds the cache not to be trusted: all misses, said once in
    one line naming the folder, not a worker that cannot start: the daemon goes on, the
    text goes to the model, and it stops with 0."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    folder = inbox / ".embedding-cache"
    with CountingEndpoint() as server:
        watcher = Watcher(inbox, "--chars", "200", "--vectors", "--embed-url", server.url,
                          "--embed-model", "hashed", "--workers", "1")
        try:
            watcher.started()
            (inbox / "a.md").write_text("A first text, about tides.", encoding="utf-8")
            watcher.wait_for(lambda: "a.md" in watcher.processed(), what="a.md's result")
            assert (folder / DATABASE).exists()
            folder.rename(inbox / ".moved-away")
            planted_by_a_producer(folder, server)
            os.kill(worker_of(watcher.process.pid), signal.SIGKILL)
            (inbox / "k.md").write_text(TEXT, encoding="utf-8")
            watcher.wait_for(lambda: "k.md" in watcher.processed(), what="k.md's result")
            (inbox / "l.md").write_text("Another text, about gulls.", encoding="utf-8")
            watcher.wait_for(lambda: "l.md" in watcher.processed(), what="l.md's result")
            assert watcher.stop() == 0
        finally:
            watcher.kill()
        assert server.texts == ["A first text, about tides.", TEXT,
                                "Another text, about gulls."]
    assert watcher.lines(f"chunkd: --embed-cache {folder}") == [
        f"chunkd: --embed-cache {folder}: belongs to another user (uid {PRODUCER}), not "
        "trusted: remove it, or give a folder of this user's own: texts it cannot give are "
        "embedded again"]
    assert not [line for line in watcher.log() if "Traceback" in line]
    for name in ("a.md", "k.md", "l.md"):
        assert_the_models(vectors_of(inbox, name))


@pytest.mark.parametrize("untrusted", UNTRUSTED)
def test_a_cache_folder_another_user_can_write_is_refused(tmp_path: Path,
                                                          untrusted: str) -> None:
    """The same folder given as ``--embed-cache``: exit 2, one line, nothing sent or
    written, the planted vector never in a record."""
    (tmp_path / "doc.txt").write_text(TEXT, encoding="utf-8")
    make, says = UNTRUSTED[untrusted]
    with CountingEndpoint() as server:
        make(tmp_path / "cache", server)
        run = run_chunkd(*options(server, tmp_path / "cache"), str(tmp_path / "doc.txt"))
    assert (run.returncode, run.stdout) == (2, b"")
    assert run.stderr.decode() == (f"chunkd: error: --embed-cache {tmp_path / 'cache'}: {says}: "
                                   "remove it, or give a folder of this user's own\n")
    assert server.texts == []


@pytest.mark.parametrize("name", [DATABASE, DATABASE + "-wal", DATABASE + "-shm"])
def test_a_link_inside_the_cache_folder_is_not_followed(tmp_path: Path, name: str) -> None:
    """A link among the database's files (to the attacker's database, or to a file of
    the user's that SQLite would write through) is refused in one line, exit 2: not
    read, not written."""
    (tmp_path / "doc.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "cache").mkdir(mode=0o700)
    target = tmp_path / "elsewhere.sqlite"
    with CountingEndpoint() as server:
        plant(target, server)
        before = target.read_bytes()
        (tmp_path / "cache" / name).symlink_to(target)
        run = run_chunkd(*options(server, tmp_path / "cache"), str(tmp_path / "doc.txt"))
    assert (run.returncode, run.stdout) == (2, b"")
    assert run.stderr.decode() == (f"chunkd: error: --embed-cache {tmp_path / 'cache'}: {name} is "
                                   "a symbolic link, not followed: remove it\n")
    assert target.read_bytes() == before
    assert server.texts == []


def test_a_new_cache_is_private_whatever_the_umask(tmp_path: Path) -> None:
    """Made under a loose umask (002, a user's private group), the folder and database
    are the user's alone, so that the next run trusts them and no one else can write
    them: the second run sends nothing."""
    (tmp_path / "doc.txt").write_text(TEXT, encoding="utf-8")
    cache = tmp_path / "cache"
    with CountingEndpoint() as server:
        runs = [subprocess.run(["sh", "-c", 'umask 002 && exec "$@"', "sh", chunkd_command(),
                                *options(server, cache), str(tmp_path / "doc.txt")],
                               capture_output=True, timeout=HANG) for _ in range(2)]
        assert [(run.returncode, run.stderr) for run in runs] == [(0, b"")] * 2
        assert server.texts == [TEXT]
    assert_the_models(ndjson(runs[1].stdout))
    assert cache.stat().st_mode & 0o777 == 0o700
    for path in cache.iterdir():
        assert path.stat().st_mode & 0o077 == 0, path


def in_a_mount_namespace(script: str, *arguments: str) -> subprocess.CompletedProcess:
    """``script`` (sh) in a mount namespace of the test's own: its mounts go with it."""
    return subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", *arguments],
                          capture_output=True, timeout=HANG)


def test_a_cache_on_a_read_only_filesystem_is_all_misses(tmp_path: Path) -> None:
    """A working cache whose filesystem turned read-only (a bind mount made read-only in
    a mount namespace of the test's own): the run exits 0 with the model's vectors, says
    so once, and sets nothing aside; writable again, the cache serves what it held."""
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text(TEXT, encoding="utf-8")
    second.write_text("A second text, about lighthouses.", encoding="utf-8")
    cache = tmp_path / "cache"
    with CountingEndpoint() as server:
        made = run_chunkd(*options(server, cache), str(first))
        assert (made.returncode, made.stderr) == (0, b"")
        held = sorted(path.name for path in cache.iterdir())
        server.calls.clear()
        read_only = in_a_mount_namespace(
            'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 99; shift; '
            'exec "$@"', str(cache), chunkd_command(), *options(server, cache), str(first),
            str(second))
        assert read_only.returncode == 0, read_only.stderr
        said = read_only.stderr.decode().splitlines()
        assert len(said) == 1 and said[0].startswith(f"chunkd: --embed-cache {cache}: "), said
        assert "damaged" not in said[0]
        assert_the_models(ndjson(read_only.stdout))
        assert sorted(path.name for path in cache.iterdir()) == held
        server.calls.clear()
        again = run_chunkd(*options(server, cache), str(first), str(second))
        assert (again.returncode, again.stderr) == (0, b"")
        assert server.texts == ["A second text, about lighthouses."]
    assert_the_models(ndjson(again.stdout))


def test_a_cache_that_cannot_be_made_on_a_read_only_filesystem_is_all_misses(
        tmp_path: Path) -> None:
    """A new cache folder on a read-only filesystem: the run is not a usage error but
    all misses, said once, with the model's vectors."""
    (tmp_path / "doc.txt").write_text(TEXT, encoding="utf-8")
    disk = tmp_path / "disk"
    disk.mkdir()
    with CountingEndpoint() as server:
        run = in_a_mount_namespace(
            'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 99; shift; '
            'exec "$@"', str(disk), chunkd_command(), *options(server, disk / "cache"),
            str(tmp_path / "doc.txt"))
        assert server.texts == [TEXT]
    assert run.returncode == 0, run.stderr
    said = run.stderr.decode().splitlines()
    assert said == [f"chunkd: --embed-cache {disk / 'cache'}: cannot make the folder: "
                    "Read-only file system: "
                    "texts it cannot give are embedded again"]
    assert_the_models(ndjson(run.stdout))
    assert list(disk.iterdir()) == []


def test_a_cache_on_a_full_filesystem_is_all_misses(tmp_path: Path) -> None:
    """A working cache on a filesystem that filled up (a small tmpfs in a mount namespace
    of the test's own, filled by another file): exit 0, the model's vectors, nothing set
    aside; with room again, it serves what it held and keeps the new entries."""
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text(TEXT, encoding="utf-8")
    second.write_text("A second text, about lighthouses.", encoding="utf-8")
    cache, out = tmp_path / "cache", tmp_path / "out"
    cache.mkdir(mode=0o700)
    out.mkdir()
    with CountingEndpoint() as server:
        command = [chunkd_command(), *options(server, cache)]
        run = in_a_mount_namespace(
            'cache=$1 out=$2; shift 2; '
            'mount -t tmpfs -o size=1m,mode=0700 tmpfs "$cache" || exit 99; '
            '"$@" "$out/../first.txt" > "$out/made" 2> "$out/made.err"; echo $? > "$out/made.rc"; '
            'ls "$cache" > "$out/held"; '
            'dd if=/dev/zero of="$cache/filler" bs=4k 2> /dev/null; '
            '"$@" "$out/../first.txt" "$out/../second.txt" > "$out/full" 2> "$out/full.err"; '
            'echo $? > "$out/full.rc"; ls "$cache" > "$out/after"; '
            'rm "$cache/filler"; '
            '"$@" "$out/../first.txt" "$out/../second.txt" > "$out/again" 2> "$out/again.err"; '
            'echo $? > "$out/again.rc"',
            str(cache), str(out), *command)
        assert run.returncode == 0, run.stderr
        calls = server.calls
    result = {name: (out / name).read_bytes() for name in os.listdir(out)}
    assert (result["made.rc"], result["made.err"]) == (b"0\n", b"")
    assert result["full.rc"] == b"0\n", result["full.err"]
    said = result["full.err"].decode().splitlines()
    assert len(said) == 1 and said[0].startswith(f"chunkd: --embed-cache {cache}: "), said
    assert "damaged" not in said[0]
    assert_the_models(ndjson(result["full"]))
    after = result["after"].decode().split()
    assert DATABASE in after and not [name for name in after if "damaged" in name], after
    assert (result["again.rc"], result["again.err"]) == (b"0\n", b"")
    assert_the_models(ndjson(result["again"]))
    # One call a run: the last one sends only the text the full run could not keep.
    assert len(calls) == 3 and calls[0] == [TEXT], calls
    assert calls[2] == ["A second text, about lighthouses."]


#: A ``sitecustomize`` that plays the producer at the one moment that matters: after the
#: cache's folder is checked and before SQLite opens its files (``DiskCache._opened``),
#: it moves the real folder away and puts the producer's (``$SWAP_PLANTED``) in its place,
#: then puts both back once SQLite has opened what it opened. With ``$SWAP_RESOLVED``, it
#: also makes SQLite open the producer's database whatever path it is given: SQLite
#: itself resolves a path's links to names again, so it can lose the same race.
SWAP_HOOK = """
import os, sqlite3
import chunkd.embeddings.cache as cache

real, planted = os.environ["SWAP_FOLDER"], os.environ["SWAP_PLANTED"]
moved = real + ".moved"
found = cache.DiskCache.__dict__["_opened"]
method = found.__func__ if isinstance(found, staticmethod) else found
connect = sqlite3.connect

def resolved(path, *args, **keywords):
    return connect(os.path.join(real, cache.DATABASE), *args, **keywords)

def swapped(*arguments):
    if isinstance(found, staticmethod):
        arguments = arguments[1:]
    os.rename(real, moved)
    os.rename(planted, real)
    if os.environ.get("SWAP_RESOLVED"):
        sqlite3.connect = resolved
    try:
        return method(*arguments)
    finally:
        sqlite3.connect = connect
        os.rename(real, planted)
        os.rename(moved, real)
        with open(os.environ["SWAP_LOG"], "a") as log:
            log.write("swapped\\n")

cache.DiskCache._opened = swapped
"""


@pytest.mark.parametrize("resolved", [False, True], ids=["by-descriptor", "sqlite-loses"])
def test_a_folder_swapped_in_while_the_cache_opens_serves_nothing(tmp_path: Path,
                                                                  resolved: bool) -> None:
    """A producer swaps its own folder into the cache's place between the checks and
    SQLite's open, and back after (the race of a ``renameat2`` exchange timed by
    inotify, made exact here by a hook). Its entries, checksummed as chunkd computes
    them (with the cache's own secret where there is one, which a producer could not
    even read), are never served: the folder is checked and its files opened through
    one descriptor, so its files are never opened (by-descriptor); and where SQLite
    opens them all the same (sqlite-loses: it resolves its path to a name again), an
    entry made without the secret is a miss. Each text is the endpoint's."""
    cache, planted, log = tmp_path / "cache", tmp_path / "planted", tmp_path / "swaps"
    (tmp_path / "warm.txt").write_text("A text that makes the cache.", encoding="utf-8")
    (tmp_path / "doc.txt").write_text(TEXT, encoding="utf-8")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SWAP_HOOK, encoding="utf-8")
    with CountingEndpoint() as server:
        made = run_chunkd(*options(server, cache), str(tmp_path / "warm.txt"))
        assert (made.returncode, made.stderr) == (0, b"")
        key_file = cache / "vectors.key"
        secret = key_file.read_bytes() if key_file.exists() and not resolved else b""
        planted.mkdir()
        key = hashlib.sha256(identity(server).encode() + b"\0" + TEXT.encode()).digest()
        with sqlite3.connect(planted / DATABASE) as connection:
            connection.executescript(
                "CREATE TABLE vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL, checksum "
                "BLOB NOT NULL, used INTEGER NOT NULL) WITHOUT ROWID;")
            connection.execute("INSERT INTO vectors VALUES (?, ?, ?, 0)", (
                key, PLANTED.tobytes(),
                hashlib.blake2b(key + PLANTED.tobytes(), digest_size=16, key=secret).digest()))
        connection.close()
        for path in (planted / DATABASE, planted):
            os.chown(path, PRODUCER, PRODUCER)
        before = (planted / DATABASE).read_bytes()
        server.calls.clear()
        run = subprocess.run(
            [chunkd_command(), *options(server, cache), str(tmp_path / "doc.txt")],
            capture_output=True, timeout=HANG, env=dict(
                os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
                    str(hook), os.environ.get("PYTHONPATH")])),
                SWAP_FOLDER=str(cache), SWAP_PLANTED=str(planted), SWAP_LOG=str(log),
                SWAP_RESOLVED="1" if resolved else ""))
        assert log.read_text() == "swapped\n"  # the hook ran: the race was lost
        assert (run.returncode, run.stderr) == (0, b""), run.stderr
        assert server.texts == [TEXT]
    records = ndjson(run.stdout)
    assert_the_models(records)
    assert all(PLANTED.tolist() != record["vector"] for record in records)
    if not resolved:
        # Never opened: SQLite would have made its log files and put it in WAL mode.
        assert sorted(os.listdir(planted)) == [DATABASE]
        assert (planted / DATABASE).read_bytes() == before
