"""``chunkd watch``'s results say what changed, the results of inputs that left are
removed, and ``--journal`` tells every change: through the installed command, real
folders, kill -9 at random moments. The journal replayed must equal the results; each
result's ``changes`` must equal the difference from the result it replaced."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from command import HANG, chunkd_command
from watching import Watcher, results

pytestmark = pytest.mark.slow

OPTIONS = ("--chars", "60", "--overlap", "0", "--settle", "0.2", "--rescan", "1")
SENTENCES = [f"Sentence number {n} says something." for n in range(40)]


def text(seed: int) -> str:
    generator = random.Random(seed)
    return "\n\n".join(" ".join(generator.choices(SENTENCES, k=3)) for _ in range(6))


def journal_lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n")
    return [orjson.loads(line) for line in data.splitlines()]


def replay(lines: list[dict]) -> dict[str, set[str]]:
    """Each source's ids, from the journal's lines applied in order."""
    state: dict[str, set[str]] = {}
    for line in lines:
        ids = state.get(line["source"], set()) - set(line["removed"]) | set(line["added"])
        state[line["source"]] = ids
        if line["event"] == "removed":
            assert not ids, line
    return {source: ids for source, ids in state.items() if ids}


def result_ids(inbox: Path) -> dict[str, set[str]]:
    return {name: {c["chunk_id"] for c in result["chunks"]}
            for name, result in results(inbox).items() if result["chunks"]}


def up_to_date(inbox: Path, journal: Path) -> bool:
    """Every input has its current result, no result is left without its input, and the
    journal replayed gives exactly the results' ids."""
    inputs = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in inbox.glob("*.md")}
    try:
        made = {name: result["sha256"] for name, result in results(inbox).items()}
        for path in inbox.glob("*.error.json"):
            made[path.name.removesuffix(".error.json")] = orjson.loads(path.read_bytes())["sha256"]
        return made == inputs and replay(journal_lines(journal)) == result_ids(inbox)
    except (OSError, ValueError):  # a result replaced while it was read
        return False


def check_sequence(lines: list[dict]) -> None:
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))


def test_changes_deletions_renames_and_the_journal_step_by_step(inbox, tmp_path, watch):
    journal = tmp_path / "journal.ndjson"
    watcher = watch(inbox, *OPTIONS, "--journal", str(journal))
    seen: dict[str, set[str]] = {}      # each source's ids in its last result
    checked: dict[str, str] = {}        # and the input's sha256 it was made from

    def settle(what: str) -> None:
        watcher.wait_for(lambda: up_to_date(inbox, journal), what=what)

    def check_changes() -> None:
        """Each result made since the last check against the one it replaced."""
        for name, result in results(inbox).items():
            if checked.get(name) == result["sha256"]:
                continue
            checked[name] = result["sha256"]
            ids = [c["chunk_id"] for c in result["chunks"]]
            before = seen.get(name, set())
            changes = result["changes"]
            assert changes["added"] == [i for i in ids if i not in before], name
            assert set(changes["removed"]) == before - set(ids), name
            assert changes["kept"] == len(set(ids) & before), name
            seen[name] = set(ids)

    (inbox / "a.md").write_text(text(1), encoding="utf-8")
    (inbox / "b.md").write_text(text(2), encoding="utf-8")
    settle("the first results")
    check_changes()
    assert all(not r["changes"]["removed"] and r["changes"]["kept"] == 0
               for r in results(inbox).values())
    # One sentence inserted at the top: every chunk after it keeps its id.
    (inbox / "a.md").write_text("A new first sentence.\n\n" + text(1), encoding="utf-8")
    settle("a edited")
    changes = results(inbox)["a.md"]["changes"]
    assert len(changes["added"]) == 1 and changes["kept"] == len(seen["a.md"])
    check_changes()
    (inbox / "b.md").rename(inbox / "c.md")              # renamed: b leaves, c arrives
    settle("b renamed to c")
    assert "b.md" not in results(inbox) and not (inbox / "b.md.chunks.json").exists()
    seen.pop("b.md")
    check_changes()
    (inbox / "a.md").unlink()                            # deleted
    settle("a deleted")
    seen.pop("a.md")
    (inbox / "c.md").write_bytes(b"invalid \xff UTF-8")  # an error result replaces it
    watcher.wait_for(lambda: (inbox / "c.md.error.json").exists(), what="the error")
    settle("c's error")
    error = orjson.loads((inbox / "c.md.error.json").read_bytes())
    assert set(error["changes"]["removed"]) == seen["c.md"] and error["changes"]["added"] == []
    lines = journal_lines(journal)
    check_sequence(lines)
    events = [(line["event"], line["source"]) for line in lines]
    assert sorted(events[:2]) == [("chunked", "a.md"), ("chunked", "b.md")]
    assert events[2] == ("chunked", "a.md")
    assert sorted(events[3:5]) == [("chunked", "c.md"), ("removed", "b.md")]
    assert events[5:] == [("removed", "a.md"), ("error", "c.md")]
    assert replay(lines) == {}
    assert watcher.stop() == 0


def test_a_crash_between_a_change_and_its_line_is_repaired_at_start(inbox, tmp_path, watch):
    journal = tmp_path / "journal.ndjson"
    (inbox / "a.md").write_text(text(3), encoding="utf-8")
    watcher = watch(inbox, *OPTIONS, "--journal", str(journal))
    watcher.wait_for(lambda: up_to_date(inbox, journal), what="a")
    assert watcher.stop() == 0
    for event, change in (("chunked", lambda: (inbox / "a.md").write_text(
            "Inserted.\n\n" + text(3), encoding="utf-8")),
                          ("removed", lambda: (inbox / "a.md").unlink())):
        watcher = watch(inbox, *OPTIONS, "--journal", str(journal),
                        faults={"kill_before_journal": event})
        watcher.started()
        change()
        watcher.process.wait(timeout=HANG)   # killed before its line: the journal lags
        assert watcher.process.returncode == -9
        watcher.kill()
        assert not up_to_date(inbox, journal)
        watcher = watch(inbox, *OPTIONS, "--journal", str(journal))
        watcher.wait_for(lambda: up_to_date(inbox, journal), what=f"the {event} line")
        assert watcher.stop() == 0
    lines = journal_lines(journal)
    check_sequence(lines)
    assert [line["event"] for line in lines] == ["chunked", "chunked", "removed"]
    assert replay(lines) == {} and not list(inbox.glob("*.chunks.json"))


def test_an_input_deleted_as_the_daemon_starts_loses_its_results(inbox, tmp_path, watch):
    """Deleted just after the start's reconciliation looked at it: its results go, and
    the journal says so."""
    journal = tmp_path / "journal.ndjson"
    (inbox / "a.md").write_text(text(4), encoding="utf-8")
    (inbox / "b.md").write_text(text(5), encoding="utf-8")
    watcher = watch(inbox, *OPTIONS, "--journal", str(journal))
    watcher.wait_for(lambda: up_to_date(inbox, journal), what="a and b")
    assert watcher.stop() == 0
    watcher = watch(inbox, *OPTIONS, "--journal", str(journal),
                    faults={"delete_after_reconcile": str(inbox / "a.md")})
    watcher.wait_for(lambda: not (inbox / "a.md").exists() and up_to_date(inbox, journal),
                     what="a's results removed")
    assert set(results(inbox)) == {"b.md"}
    assert [line["event"] for line in journal_lines(journal)][-1] == "removed"
    assert watcher.stop() == 0


def test_random_adds_edits_renames_deletions_and_kill_9_lose_nothing(inbox, tmp_path):
    journal = tmp_path / "journal.ndjson"
    generator = random.Random(20261204)
    names = [f"doc{n}.md" for n in range(6)]
    watchers: list[Watcher] = []

    def start() -> Watcher:
        watcher = Watcher(inbox, *OPTIONS, "--journal", str(journal), settle="0.2")
        watchers.append(watcher)
        return watcher

    try:
        watcher = start()
        for step in range(60):
            name = generator.choice(names)
            path = inbox / name
            action = generator.choice(["write", "write", "edit", "rename", "delete"])
            if action == "write" or not path.exists():
                path.write_text(text(generator.randrange(1000)), encoding="utf-8")
            elif action == "edit":
                paragraphs = path.read_text(encoding="utf-8").split("\n\n")
                paragraphs.insert(generator.randrange(len(paragraphs) + 1),
                                  generator.choice(SENTENCES))
                path.write_text("\n\n".join(paragraphs), encoding="utf-8")
            elif action == "rename":
                path.rename(inbox / generator.choice(names))
            else:
                path.unlink()
            time.sleep(generator.uniform(0, 0.3))
            if step % 8 == 7:                                   # kill -9, then restart
                watcher.kill()
                watcher = start()
        watcher.wait_for(lambda: up_to_date(inbox, journal), timeout=HANG, what="the end state")
        lines = journal_lines(journal)
        check_sequence(lines)
        for result in results(inbox).values():
            ids = [c["chunk_id"] for c in result["chunks"]]
            changes = result["changes"]
            assert set(changes["added"]) <= set(ids)
            assert not set(changes["removed"]) & set(ids)
            assert changes["kept"] + len(changes["added"]) == len(ids)
        assert watcher.stop() == 0
    finally:
        for watcher in watchers:
            watcher.kill()


def test_keep_results_keeps_the_results_of_a_deleted_input(inbox, watch):
    (inbox / "a.md").write_text(text(4), encoding="utf-8")
    watcher = watch(inbox, *OPTIONS, "--keep-results", "-v")
    watcher.wait_for(lambda: "a.md" in results(inbox), what="a")
    (inbox / "a.md").unlink()
    watcher.rescans_pass(2)
    assert "a.md" in results(inbox)
    assert watcher.stop() == 0


def test_the_example_consumer_in_the_docs_keeps_a_store_in_step(inbox, tmp_path, watch):
    docs = (Path(__file__).resolve().parents[2] / "docs" / "daemon.md").read_text(encoding="utf-8")
    consumer = re.search(r"<!-- consumer -->\n```python\n(.*?)```", docs, re.S).group(1)
    assert len(consumer.splitlines()) <= 25
    (tmp_path / "consumer.py").write_text(consumer, encoding="utf-8")
    journal, store = tmp_path / "journal.ndjson", tmp_path / "store.json"

    def consume() -> dict[str, set[str]]:
        run = subprocess.run([sys.executable, str(tmp_path / "consumer.py"), str(journal),
                              str(store)], capture_output=True, timeout=HANG)
        assert run.returncode == 0, run.stderr
        return {json.loads(source): set(ids)
                for source, ids in orjson.loads(store.read_bytes())["ids"].items() if ids}

    watcher = watch(inbox, *OPTIONS, "--journal", str(journal))
    (inbox / "a.md").write_text(text(5), encoding="utf-8")
    (inbox / "b.md").write_text(text(6), encoding="utf-8")
    watcher.wait_for(lambda: up_to_date(inbox, journal) and len(results(inbox)) == 2,
                     what="two results")
    assert consume() == result_ids(inbox)
    (inbox / "a.md").write_text("New start.\n\n" + text(5), encoding="utf-8")
    (inbox / "b.md").unlink()
    watcher.wait_for(lambda: up_to_date(inbox, journal) and len(results(inbox)) == 1,
                     what="a edited, b deleted")
    assert consume() == result_ids(inbox)   # from its cursor on
    assert consume() == result_ids(inbox)   # again: nothing new, nothing changes
    assert watcher.stop() == 0


def test_an_error_of_the_environment_is_retried_at_start(inbox, watch):
    (inbox / "page.html").write_text("<p>Hello from a page.</p>", encoding="utf-8")
    watcher = watch(inbox, *OPTIONS, faults={"missing_modules": ["selectolax"]})
    watcher.wait_for(lambda: (inbox / "page.html.error.json").exists(), what="the error")
    error = orjson.loads((inbox / "page.html.error.json").read_bytes())
    assert "documents extra" in error["error"] and error["cause"] == "environment"
    assert watcher.stop() == 0
    watcher = watch(inbox, *OPTIONS)                  # the extra is installed now
    watcher.wait_for(lambda: "page.html" in results(inbox), what="the result")
    assert not (inbox / "page.html.error.json").exists()
    assert watcher.stop() == 0


def test_msgpack_results_say_what_changed_too(inbox, watch):
    import msgpack

    def result() -> dict:
        return msgpack.unpackb((inbox / "a.md.chunks.msgpack").read_bytes())

    def made_from(text: str) -> bool:
        try:
            return result()["sha256"] == hashlib.sha256(text.encode()).hexdigest()
        except (OSError, ValueError):
            return False

    first = text(7)
    (inbox / "a.md").write_text(first, encoding="utf-8")
    watcher = watch(inbox, *OPTIONS, "--format", "msgpack")
    watcher.wait_for(lambda: made_from(first), what="the first result")
    before = [c["chunk_id"] for c in result()["chunks"]]
    assert result()["changes"] == {"added": before, "removed": [], "kept": 0}
    second = "\n\n".join(first.split("\n\n")[1:]) + "\n\nA new last paragraph."
    (inbox / "a.md").write_text(second, encoding="utf-8")
    watcher.wait_for(lambda: made_from(second), what="the second result")
    after = [c["chunk_id"] for c in result()["chunks"]]
    changes = result()["changes"]
    assert changes["added"] == [i for i in after if i not in before] != []
    assert changes["removed"] == [i for i in before if i not in after] != []
    assert changes["kept"] == len(set(before) & set(after)) > 0
    assert watcher.stop() == 0


# --- a file chunkd did not write, and numbers it cannot go on from ---------------------

#: A line as chunkd writes it, for journals made by hand below.
LINE = (b'{"seq":1,"time":"2026-12-04T18:30:02Z","event":"chunked","source":"a.md",'
        b'"result":"a.md.chunks.json","sha256":"' + b"0" * 64 + b'","result_stat":[1,2,3],'
        b'"added":["0190a1b2-c3d4-8e5f-8a6b-7c8d9e0f1a2b"],"removed":[],"kept":0}\n')


def refused_at_start(inbox: Path, journal: Path) -> str:
    """``chunkd watch --journal`` exits 2 at start with one line on stderr, having
    written no result and left the journal's bytes as they were; that line."""
    (inbox / "a.md").write_text(text(8), encoding="utf-8")
    before = journal.read_bytes()
    process = subprocess.Popen([chunkd_command(), "watch", str(inbox), *OPTIONS,
                                "--journal", str(journal)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = process.communicate(timeout=HANG)
    finally:
        process.kill()
        process.wait()
    message = stderr.decode()
    assert process.returncode == 2, message
    assert len(message.splitlines()) == 1 and "Traceback" not in message, message
    assert message.startswith("chunkd watch: ") and str(journal) in message, message
    assert journal.read_bytes() == before
    assert not list(inbox.glob("*.chunks.json"))
    return message


@pytest.mark.parametrize("content", [
    b"sk-live-9f8e7d6c5b4a3f2e1d0c",                     # a token, no newline
    b"token=sk-live-9f8e7d6c5b4a3f2e1d0c\nanother line",  # lines, the last partial
    b'{"kind": "not chunkd"}\n',                           # JSON, not an entry
    b'{"seq"',                                             # less than a line's start
    b"\n",
])
def test_a_file_chunkd_did_not_write_is_refused_and_left_as_it_is(inbox, tmp_path, content):
    journal = tmp_path / "secrets.env"
    journal.write_bytes(content)
    message = refused_at_start(inbox, journal)
    assert "not a chunkd watch journal" in message
    assert b"sk-live" not in message.encode()


@pytest.mark.parametrize("seq, why", [
    (b"18446744073709551615", b"seq must be an integer"),   # past what orjson writes + 1
    (b"1e300", b"seq must be an integer"),
    (b"-5", b"seq must be an integer"),
    (b'"7"', b"seq must be an integer"),
    (b"true", b"seq must be an integer"),
    (b"1", b"seq must be an integer above 1"),              # the same twice: not increasing
    (b"9223372036854775807", b"sequence numbers are used up"),
])
def test_a_journal_chunkd_cannot_go_on_from_is_refused_at_start(inbox, tmp_path, seq, why):
    """Refused at start (systemd does not restart on 2), never met by the first append
    (a traceback, exit 1, at every restart)."""
    journal = tmp_path / "journal.ndjson"
    journal.write_bytes(LINE + LINE.replace(b'"seq":1,', b'"seq":' + seq + b","))
    assert why.decode() in refused_at_start(inbox, journal)


@pytest.mark.parametrize("field, value, why", [
    (b'"event":"chunked"', b'"event":"renamed"', "event must be one of"),
    (b'"source":"a.md"', b'"source":7', "source must be a name"),
    (b'"removed":[]', b'"removed":"all"', "removed must be a list of chunk ids"),
    (b'"result_stat":[1,2,3]', b'"result_stat":[1,2]', "result_stat must be three integers"),
])
def test_an_entry_of_the_wrong_kind_is_refused_at_start(inbox, tmp_path, field, value, why):
    journal = tmp_path / "journal.ndjson"
    journal.write_bytes(LINE.replace(field, value))
    assert f"line 1 is not a chunkd watch journal entry: {why}" \
        in refused_at_start(inbox, journal)


def test_only_a_partial_line_after_an_entry_is_cut(inbox, tmp_path, watch):
    """A crash's tail (after a complete entry) is cut off and the journal goes on from
    its last seq; the bytes before it are kept."""
    journal = tmp_path / "journal.ndjson"
    journal.write_bytes(LINE + LINE[:28])
    (inbox / "b.md").write_text(text(9), encoding="utf-8")
    watcher = watch(inbox, *OPTIONS, "--journal", str(journal))
    watcher.wait_for(lambda: "b.md" in results(inbox) and len(journal_lines(journal)) >= 2,
                     what="b's line")
    assert any("cut a partial last line (28 bytes)" in line for line in watcher.log())
    assert journal.read_bytes().startswith(LINE)
    lines = journal_lines(journal)
    check_sequence(lines)
    assert watcher.stop() == 0


def test_a_journal_that_is_not_a_regular_file_is_refused(inbox, tmp_path):
    """A FIFO would hang the start's read for ever (the daemon holds its writing end)."""
    journal = tmp_path / "journal.fifo"
    os.mkfifo(journal)
    run = subprocess.run([chunkd_command(), "watch", str(inbox), *OPTIONS, "--journal",
                          str(journal)], capture_output=True, timeout=HANG)
    assert run.returncode == 2, run.stderr
    assert run.stderr.decode().splitlines() == [
        f"chunkd watch: the journal {journal} is not a regular file; name another"]
