"""``chunkd watch INBOX --sink URL``: the installed daemon on real folders keeps a real
PostgreSQL with pgvector and a real LanceDB folder equal to its results, as readers
chunkd did not write (langchain-postgres's PGVector, LanceDB's client) and ``chunkd
sync --check`` see it: through edits, renames, deletions, kill -9 and a store that was
down."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import time
import urllib.request

import pytest

from command import HANG, chunkd_command
from store_servers import (CHUNKING, assert_store_holds, collection_name, embedded_texts,
                    expected_chunks, lance_rows, paragraphs, pgvector_rows, sync)
from test_sync import socket_port
from watching import Watcher

from chunkd.stores.base import BACKOFF_FIRST

pytestmark = pytest.mark.slow

#: Short settle and rescan times (tests/service/test_daemon_journal.py's), one worker.
OPTIONS = ("--rescan", "0.5", "--workers", "1", "-v")


def watch_sink(watch, inbox, url, endpoint, collection, *options, env=None) -> Watcher:
    watcher = watch(inbox, "--sink", url, "--collection", collection, *CHUNKING,
                    "--embed-url", endpoint.url, "--embed-model", "hashed", *OPTIONS,
                    *options, env=env)
    watcher.started()
    return watcher


def wait_for_store(watcher: Watcher, rows, collection: str, inbox, timeout: float = HANG) -> None:
    """Wait until the store holds exactly the chunks of the inbox's files (by id), then
    check their sources, texts and vectors."""
    expected = expected_chunks(inbox, *CHUNKING[:2])
    deadline = time.monotonic() + timeout
    while set(rows(collection)) != set(expected):
        assert time.monotonic() < deadline, (
            f"the store never held the inbox's chunks; log tail: {watcher.log()[-8:]}")
        assert watcher.process.poll() is None, f"chunkd watch exited: {watcher.log()[-8:]}"
        time.sleep(0.2)
    assert_store_holds(rows(collection), expected)


def assert_checked(inbox, url, endpoint, collection) -> None:
    """``chunkd sync INBOX --check`` with the daemon's options finds no difference."""
    checked = sync(inbox, url, endpoint, "--check", "--collection", collection)
    assert (checked.returncode, checked.stdout) == (0, b""), checked.stdout + checked.stderr


def test_follows_adds_edits_renames_and_deletions(watch, inbox, store, endpoint, request):
    kind, url, rows = store
    collection = collection_name(request)
    (inbox / "sub").mkdir()
    (inbox / "a.md").write_text(paragraphs(1, 4))
    (inbox / "b.txt").write_text(paragraphs(2, 5))
    watcher = watch_sink(watch, inbox, url, endpoint, collection)
    (inbox / "sub" / "c.md").write_text(paragraphs(3, 3))  # added while it runs
    wait_for_store(watcher, rows, collection, inbox)

    with open(inbox / "b.txt", "a") as stream:  # an edit
        stream.write("\n" + paragraphs(4, 2))
    wait_for_store(watcher, rows, collection, inbox)
    (inbox / "a.md").rename(inbox / "a2.md")   # a rename
    (inbox / "sub" / "c.md").unlink()           # a deletion
    wait_for_store(watcher, rows, collection, inbox)
    assert {metadata["source"] for _, _, metadata in rows(collection).values()} \
        == {"a2.md", "b.txt"}
    assert_checked(inbox, url, endpoint, collection)
    assert watcher.stop() == 0


def sources_held(rows: dict) -> dict[str, set[str]]:
    held: dict[str, set[str]] = {}
    for chunk_id, (_, _, metadata) in rows.items():
        held.setdefault(metadata["source"], set()).add(chunk_id)
    return held


def test_kill_9_at_random_points_and_restart_catch_up(watch, inbox, store, endpoint, request):
    kind, url, rows = store
    collection = collection_name(request)
    chance = random.Random(request.node.name)
    versions: dict[str, list[set[str]]] = {}  # every version of each file so far

    def note_versions() -> None:
        now: dict[str, set[str]] = {}
        for chunk_id, (source, _) in expected_chunks(inbox, *CHUNKING[:2]).items():
            now.setdefault(source, set()).add(chunk_id)
        for source, ids in now.items():
            versions.setdefault(source, []).append(ids)

    for number in range(12):
        (inbox / f"{number:02}.md").write_text(paragraphs(100 + number, 3))
    note_versions()
    for round in range(3):
        watcher = watch_sink(watch, inbox, url, endpoint, collection)
        # Killed once the store has taken a few files (of this round's changes, or the
        # catch-up of the round before), at a random moment after.
        stored = len(watcher.lines("stored "))
        watcher.wait_for(lambda: len(watcher.lines("stored ")) > stored, what="a file stored")
        time.sleep(chance.uniform(0, 0.5))
        watcher.process.send_signal(signal.SIGKILL)
        watcher.process.wait()
        # Each source the store holds is one whole version of its file, never a mix.
        for source, ids in sources_held(rows(collection)).items():
            assert ids in versions[source], source
        # Changes while it is down: edits, deletions, an addition.
        for path in chance.sample(sorted(inbox.glob("*.md")), 4):
            if chance.random() < 0.3:
                path.unlink()
            else:
                path.write_text(paragraphs(chance.randint(0, 10**6), chance.randint(1, 4)))
        (inbox / f"new{round}.md").write_text(paragraphs(chance.randint(0, 10**6), 3))
        note_versions()
    watcher = watch_sink(watch, inbox, url, endpoint, collection)
    wait_for_store(watcher, rows, collection, inbox)
    assert_checked(inbox, url, endpoint, collection)
    assert watcher.stop() == 0


def test_a_store_down_then_back(watch, inbox, postgres, endpoint):
    rows = lambda collection: pgvector_rows(postgres.url, collection)  # noqa: E731
    (inbox / "a.md").write_text(paragraphs(300, 3))
    watcher = watch_sink(watch, inbox, postgres.url, endpoint, "down")
    wait_for_store(watcher, rows, "down", inbox)
    postgres.stop()
    try:
        started = time.monotonic()
        (inbox / "b.md").write_text(paragraphs(301, 3))
        (inbox / "a.md").write_text(paragraphs(302, 2))
        # Results are still written while the store is down.
        watcher.wait_for(lambda: {"a.md", "b.md"} <= set(watcher.processed()[1:]),
                         what="the results written while the store is down")
        watcher.wait_for(lambda: watcher.lines("store down: trying again"),
                         what="a try that found the store down")
        time.sleep(3.0)  # an outage of a few seconds: the tries back off meanwhile
        tries = len(watcher.lines("store down: trying again"))
        down_for = time.monotonic() - started
    finally:
        postgres.start()
    # Back-off from 0.5 s, doubling: waits of 0.5 + 1 + ... + 0.5 * 2**(n-1) s, so n
    # waits take 0.5 * (2**n - 1) s; one more try may be under way.
    assert 1 <= tries <= 2 + math.log2(down_for / BACKOFF_FIRST + 1), (tries, down_for)
    assert len([line for line in watcher.log() if "results are still written" in line]) == 1
    wait_for_store(watcher, rows, "down", inbox)
    assert any(line.startswith("the store is back") for line in watcher.log())
    assert_checked(inbox, postgres.url, endpoint, "down")

    # Down again, a change, and a stop: the daemon stops within seconds; the restart
    # catches up once the store is back.
    postgres.stop()
    try:
        (inbox / "c.md").write_text(paragraphs(303, 3))
        watcher.wait_for(lambda: "c.md" in watcher.processed(), what="c.md's result")
        watcher.wait_for(lambda: len(watcher.lines("store down: trying again")) > tries,
                         what="a try that found the store down again")
        stopping = time.monotonic()
        assert watcher.stop() == 0
        assert time.monotonic() - stopping < 20  # not a back-off (up to 30 s) waited out
    finally:
        postgres.start()
    watcher = watch_sink(watch, inbox, postgres.url, endpoint, "down")
    wait_for_store(watcher, rows, "down", inbox)
    assert_checked(inbox, postgres.url, endpoint, "down")
    assert watcher.stop() == 0


def test_a_full_disk_under_lancedb_then_room_again(watch, inbox, tmp_path, endpoint):
    """LanceDB's commits fail with ENOSPC (injected) while files change: the results
    are written, the store is said down once and tried with back-off, and once there is
    room it is caught up and checked equal."""
    path, full = str(tmp_path / "lance"), tmp_path / "disk-full"
    rows = lambda collection: lance_rows(path, collection)  # noqa: E731
    (inbox / "a.md").write_text(paragraphs(310, 3))
    watcher = watch(inbox, "--sink", path, "--collection", "full", *CHUNKING, "--embed-url",
                    endpoint.url, "--embed-model", "hashed", *OPTIONS,
                    faults={"lance_enospc_while": str(full)})
    watcher.started()
    wait_for_store(watcher, rows, "full", inbox)
    full.touch()
    (inbox / "b.md").write_text(paragraphs(311, 3))
    watcher.wait_for(lambda: "b.md" in watcher.processed(), what="b.md's result")
    watcher.wait_for(lambda: watcher.lines("store down: trying again"),
                     what="a try that found the disk full")
    assert "b.md" not in {metadata["source"] for _, _, metadata in rows("full").values()}
    full.unlink()
    wait_for_store(watcher, rows, "full", inbox)
    assert len([line for line in watcher.log() if "results are still written" in line]) == 1
    assert any("No space left on device" in line for line in watcher.log())
    assert_checked(inbox, path, endpoint, "full")
    assert watcher.stop() == 0


def test_the_daemon_hears_what_the_stores_say(watch, inbox, tmp_path, endpoint):
    """The stores log through a logger of their own (``chunkd.stores``), which the
    daemon hears: a commit waiting for another writer's lock on the LanceDB table says
    so in its log, then goes on once the lock is free."""
    import fcntl

    lance = tmp_path / "lance"
    lance.mkdir()
    rows = lambda collection: lance_rows(str(lance), collection)  # noqa: E731
    with open(lance / ".heard.chunkd-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        watcher = watch_sink(watch, inbox, str(lance), endpoint, "heard")
        (inbox / "a.md").write_text(paragraphs(312, 3))
        watcher.wait_for(lambda: any("waiting for another writer to finish its commit"
                                     in line for line in watcher.log()),
                         what="the sink's line in the daemon's log")
        assert rows("heard") == {}
    wait_for_store(watcher, rows, "heard", inbox)
    assert watcher.stop() == 0


def test_the_password_never_appears_and_the_metrics_move(watch, inbox, endpoint):
    from prometheus_client.parser import text_string_to_metric_families

    env = dict(os.environ, CHUNKD_SINK_URL="postgresql://chunkd:S3cret-Pass@127.0.0.1:1/db")
    with socket_port() as port:
        watcher = watch(inbox, *CHUNKING, "--embed-url", endpoint.url, "--embed-model",
                        "hashed", *OPTIONS, "--metrics", f"127.0.0.1:{port}", env=env)
        watcher.started()
        (inbox / "a.md").write_text(paragraphs(400, 3))
        watcher.wait_for(lambda: "a.md" in watcher.processed(), what="a.md's result")
        watcher.wait_for(lambda: len(watcher.lines("store down: trying again")) >= 2,
                         what="two tries of the store")

        def values() -> dict[tuple[str, str], float]:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=HANG).read()
            return {(sample.name, ",".join(sample.labels.values())): sample.value
                    for family in text_string_to_metric_families(text.decode())
                    for sample in family.samples}

        found = values()
    assert found[("chunkd_files_chunked_total", "")] == 1
    assert found[("chunkd_files_failed_total", "")] == 0
    assert found[("chunkd_queue_depth", "")] == 0
    assert found[("chunkd_sink_failures_total", "down")] >= 2
    assert found[("chunkd_sink_transactions_total", "apply")] == 0
    assert found[("chunkd_sink_pending", "")] >= 1
    assert found[("chunkd_sink_lag_seconds", "")] > 0
    stopping = time.monotonic()
    assert watcher.stop() == 0
    assert time.monotonic() - stopping < 20  # not a back-off (up to 30 s) waited out
    log = watcher.log_path.read_bytes()
    assert b"S3cret-Pass" not in log
    assert b"chunkd: postgresql://chunkd@127.0.0.1:1/db collection chunkd:" in log
    assert log.count(b"results are still written") == 1


def test_metrics_count_the_store_transactions(watch, inbox, tmp_path, endpoint):
    from prometheus_client.parser import text_string_to_metric_families

    url = str(tmp_path / "lance")
    with socket_port() as port:
        watcher = watch_sink(watch, inbox, url, endpoint, "chunkd", "--metrics",
                             f"127.0.0.1:{port}")
        for number in range(3):
            (inbox / f"{number}.md").write_text(paragraphs(500 + number, 2))
        wait_for_store(watcher, lambda collection: lance_rows(url, collection), "chunkd",
                       inbox)
        with open(inbox / "1.md", "a") as stream:  # its earlier chunks' vectors are cached
            stream.write("\n" + paragraphs(510, 1))
        wait_for_store(watcher, lambda collection: lance_rows(url, collection), "chunkd",
                       inbox)
        (inbox / "0.md").unlink()
        wait_for_store(watcher, lambda collection: lance_rows(url, collection), "chunkd",
                       inbox)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=HANG).read()
    found = {(sample.name, ",".join(sample.labels.values())): sample.value
             for family in text_string_to_metric_families(text.decode())
             for sample in family.samples}
    assert found[("chunkd_files_chunked_total", "")] == 4
    # The workers' counts reach the daemon: what the endpoint was sent, and the rest.
    assert found[("chunkd_texts_embedded_total", "")] == embedded_texts(endpoint) > 0
    assert found[("chunkd_embed_cache_hits_total", "")] >= 1
    assert found[("chunkd_sink_transactions_total", "apply")] >= 1
    assert found[("chunkd_sink_transactions_total", "remove")] >= 1
    assert found[("chunkd_sink_pending", "")] == 0
    assert found[("chunkd_sink_lag_seconds", "")] == 0
    assert found[("chunkd_queue_depth", "")] == 0
    assert watcher.stop() == 0


def test_two_daemons_into_one_collection_keep_to_their_own(watch, tmp_path, store, endpoint,
                                                           request):
    kind, url, rows = store
    collection = collection_name(request)
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "a.md").write_text(paragraphs(600, 3))
    (one / "b.md").write_text(paragraphs(601, 3))
    (two / "c.md").write_text(paragraphs(602, 3))
    first = watch_sink(watch, one, url, endpoint, collection)
    second = watch_sink(watch, two, url, endpoint, collection)
    def both() -> dict[str, tuple[str, str]]:
        return expected_chunks(one, *CHUNKING[:2]) | expected_chunks(two, *CHUNKING[:2])

    expected = both()
    first.wait_for(lambda: set(rows(collection)) == set(expected), what="both inboxes stored")
    (one / "b.md").unlink()  # the first removes its own b.md; the second's rows stay
    expected = both()
    first.wait_for(lambda: set(rows(collection)) == set(expected), what="b.md removed")
    assert_store_holds(rows(collection), expected)
    assert second.process.poll() is None
    for folder in (one, two):
        assert_checked(folder, url, endpoint, collection)
    assert (first.stop(), second.stop()) == (0, 0)


@pytest.mark.parametrize("options, message", [
    (("--sink", "x"), b"--sink needs the model that embeds the chunks"),
    (("--sink", "mysql://u:pw@h/db", "--embed-url", "http://127.0.0.1:1", "--embed-model", "m"),
     b"--sink mysql://u@h/db: not a store chunkd writes"),
    (("--sink", "x", "--embed-url", "http://127.0.0.1:1", "--embed-model", "m", "--metrics",
      "nowhere"), b"--metrics nowhere: nowhere: give HOST:PORT"),
])
def test_usage_errors_are_one_line(inbox, options, message):
    env = {key: value for key, value in os.environ.items() if key != "CHUNKD_SINK_URL"}
    done = subprocess.run([chunkd_command(), "watch", str(inbox), *options],
                          capture_output=True, timeout=HANG, env=env)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert b"pw" not in done.stderr


def test_msgpack_results_in_an_output_folder_are_followed(watch, inbox, tmp_path, endpoint):
    url = str(tmp_path / "lance")
    rows = lambda collection: lance_rows(url, collection)  # noqa: E731
    (inbox / "a.md").write_text(paragraphs(700, 3))
    watcher = watch_sink(watch, inbox, url, endpoint, "chunkd", "--format", "msgpack",
                         "--output-dir", str(tmp_path / "out"))
    wait_for_store(watcher, rows, "chunkd", inbox)
    (inbox / "a.md").write_text(paragraphs(701, 2))
    wait_for_store(watcher, rows, "chunkd", inbox)
    assert (tmp_path / "out" / "a.md.chunks.msgpack").is_file()
    assert_checked(inbox, url, endpoint, "chunkd")
    assert watcher.stop() == 0


def test_a_refused_source_is_said_once_and_the_others_stored(watch, inbox, postgres, endpoint):
    from langchain_core.embeddings import FakeEmbeddings
    from langchain_postgres import PGVector

    rows = lambda collection: pgvector_rows(postgres.url, collection)  # noqa: E731
    (inbox / "ra.md").write_text(paragraphs(800, 3))
    (inbox / "rb.md").write_text(paragraphs(801, 3))
    taken = next(chunk_id for chunk_id, (source, _) in
                 expected_chunks(inbox, *CHUNKING[:2]).items() if source == "rb.md")
    other = PGVector(FakeEmbeddings(size=8), collection_name="holder2",
                     connection=postgres.url.replace("postgresql://", "postgresql+psycopg://"))
    other.add_texts(["holds an id chunkd wants"], ids=[taken])
    watcher = watch_sink(watch, inbox, postgres.url, endpoint, "refused")
    watcher.wait_for(lambda: any("chunk ids are held by another collection" in line
                                 for line in watcher.log()), what="the refusal")
    watcher.wait_for(lambda: watcher.lines("stored ra.md"), what="ra.md stored")
    assert {metadata["source"] for _, _, metadata in rows("refused").values()} == {"ra.md"}
    refusals = [line for line in watcher.log() if "held by another collection" in line]
    assert len(refusals) == 1 and refusals[0].startswith("chunkd: postgresql://"), refusals
    # The id freed and the file edited: it is stored whole.
    other.delete([taken])
    with open(inbox / "rb.md", "a") as stream:
        stream.write("\n" + paragraphs(802, 1))
    wait_for_store(watcher, rows, "refused", inbox)
    assert_checked(inbox, postgres.url, endpoint, "refused")
    assert watcher.stop() == 0


def test_a_model_folder_counts_in_its_tokens_and_sync_checks_it(watch, inbox, tmp_path):
    """With the real model folder: the daemon's chunks count in the model's own tokens
    (as the filter makes them with its tokenizer), their vectors are the model's,
    ``chunkd sync --check`` with the same options finds the store equal to the inbox, and
    ``chunkd sync`` into another store makes the same chunks."""
    import numpy
    from embedding import model_folder, oracle_model

    path = str(tmp_path / "lance")
    # Words the two tokenizers count differently, so that the unit decides the cuts.
    (inbox / "a.md").write_text(" ".join(["unbelievably", "蒸汽机", "naïveté", "of"] * 60))
    (inbox / "b.md").write_text(paragraphs(701, 2))
    options = ("--tokens", "60", "--embed", model_folder())
    watcher = watch(inbox, "--sink", path, *options, *OPTIONS)
    watcher.started()
    expected = expected_chunks(inbox, "--tokens", "60", "--tokenizer", model_folder())
    watcher.wait_for(lambda: os.path.isdir(path) and set(lance_rows(path, "chunkd"))
                     == set(expected), timeout=HANG, what="the inbox stored")
    rows = lance_rows(path, "chunkd")
    ids = sorted(expected)
    vectors = oracle_model().encode(
        [expected[chunk_id][1] for chunk_id in ids], show_progress_bar=False)
    for chunk_id, vector in zip(ids, vectors):
        numpy.testing.assert_allclose(rows[chunk_id][1], vector, atol=1e-5)
    checked = subprocess.run([chunkd_command(), "sync", str(inbox), "--sink", path, "--check",
                              *options], capture_output=True, timeout=HANG)
    assert (checked.returncode, checked.stdout) == (0, b""), checked.stdout + checked.stderr
    other = str(tmp_path / "synced")
    synced = subprocess.run([chunkd_command(), "sync", str(inbox), "--sink", other, *options],
                            capture_output=True, timeout=HANG)
    assert synced.returncode == 0, synced.stderr
    assert set(lance_rows(other, "chunkd")) == set(rows)
    assert watcher.stop() == 0
