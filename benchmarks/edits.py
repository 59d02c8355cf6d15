"""Ids that survive edits, and the daemon's time from an edit to its journal line.

    python benchmarks/edits.py                 # the shared corpus, 40 documents timed
    python benchmarks/edits.py --timed 10      # fewer documents through the daemon
    python benchmarks/edits.py --memory        # also what ids cost in memory (minutes)

Every document of the shared corpus (../shared/corpus) is edited three ways at once:
one sentence inserted at the start of a paragraph in its first third, one paragraph
of its middle third deleted, one paragraph of its last third rewritten (a word added).
Both versions are chunked with ids (``chunkd.Splitter``, the document named by its
path); the share of ids kept (old ids found again) must equal the share of chunk texts
kept (the old chunk texts found again, counted with their repeats), and is printed
beside what the offset-based id of chunkd 0.3.0 kept. Then ``chunkd watch --journal``
runs on a folder of corpus documents (--settle 0, so that the figure is the daemon's
own time; the default --settle 2 adds two seconds), each document is edited the same
way (written elsewhere, renamed in), and the time until the journal has the line for
it is measured, one document at a time. ``--memory``: the bytes an id costs (the
occurrence count per distinct chunk text, the set of a replaced result's ids), and the
peak memory of the daemon and its worker for an 8 MiB file in 20-character chunks, its
first result and its replacement after an edit.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import re
import signal
import tempfile
import time
import tracemalloc
from collections import Counter

import orjson

import chunkd

CORPUS = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
SETTINGS = {"1000 chars, 10 % overlap (the default)": {},
            "300 tokens, 30 overlap": {"unit": "tokens", "chunk_size": 300, "chunk_overlap": 30}}


def edit(text: str) -> str:
    """The three edits: a sentence inserted, a paragraph deleted, one rewritten."""
    paragraphs = text.split("\n\n")
    count = len(paragraphs)
    if count < 3:
        return "A sentence inserted for the benchmark. " + text
    third = max(1, count // 3)
    paragraphs[third // 2] = "A sentence inserted for the benchmark. " + paragraphs[third // 2]
    last = min(count - 1, 2 * third + third // 2)
    paragraphs[last] = paragraphs[last] + " (edited)"
    del paragraphs[third + third // 2]
    return "\n\n".join(paragraphs)


def offset_id(doc: str, chunk) -> bytes:
    """chunkd 0.3.0's id, for comparison: the document, the offsets and the text."""
    return hashlib.sha256(f"{doc}\n{chunk.start}\n{chunk.end}\n{chunk.text}".encode()).digest()


def shares(documents: list[pathlib.Path], options: dict) -> tuple[float, float, float, int]:
    """Ids kept, chunk texts kept, offset ids kept (shares of the old chunks), chunks."""
    splitter = chunkd.Splitter(ids=True, **options)
    ids_kept = texts_kept = offsets_kept = total = 0
    for path in documents:
        name = path.relative_to(CORPUS).as_posix()
        text = path.read_text(encoding="utf-8")
        made = []
        for version in (text, edit(text)):
            splitter.begin(name)
            made.append(splitter.feed(version) + splitter.finish())
        old, new = made
        total += len(old)
        ids_kept += len({c.chunk_id for c in old} & {c.chunk_id for c in new})
        texts_kept += sum((Counter(c.text for c in old) & Counter(c.text for c in new)).values())
        offsets_kept += len({offset_id(name, c) for c in old} & {offset_id(name, c) for c in new})
    return ids_kept / total, texts_kept / total, offsets_kept / total, total


def daemon_latency(documents: list[pathlib.Path]) -> list[float]:
    """Seconds from each edit (its rename into the inbox) to its journal line."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="chunkd-edits-"))
    inbox, journal, staging = folder / "inbox", folder / "journal.ndjson", folder / "staging"
    inbox.mkdir()
    staging.mkdir()
    names = [f"{n:03}.md" for n in range(len(documents))]
    for name, path in zip(names, documents):
        shutil.copy(path, inbox / name)
    chunkd_command = shutil.which("chunkd") or "chunkd"
    process = subprocess.Popen([chunkd_command, "watch", str(inbox), "--settle", "0",
                                "--journal", str(journal), "-q"])

    def lines() -> list[dict]:
        data = journal.read_bytes() if journal.exists() else b""
        return [orjson.loads(line) for line in data.splitlines()]

    def wait(condition, limit: float = 120) -> None:
        deadline = time.monotonic() + limit
        while not condition():
            if time.monotonic() > deadline:
                raise SystemExit("benchmarks/edits.py: the daemon did not answer in time")
            time.sleep(0.002)

    try:
        wait(lambda: len(lines()) >= len(names))
        took = []
        for name, path in zip(names, documents):
            seen = len(lines())
            (staging / name).write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
            started = time.monotonic()
            os.rename(staging / name, inbox / name)
            wait(lambda: any(line["source"] == name for line in lines()[seen:]))
            took.append(time.monotonic() - started)
        return took
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(folder)


def bytes_per_id(count: int = 500_000) -> tuple[float, float]:
    """Bytes per distinct chunk text in ``ChunkIds``' count, and per id in the set of a
    replaced result's ids (``Inbox.previous_ids``), as tracemalloc counts them."""
    from chunkd.model.chunk import Chunk
    from chunkd.model.ids import ChunkIds

    tracemalloc.start()
    identify = ChunkIds("a.md")
    for number in range(count):
        identify.identify(Chunk(number, 0, 0, 0, f"text number {number} here"))
    counting = tracemalloc.get_traced_memory()[0] / count
    del identify
    base = tracemalloc.get_traced_memory()[0]
    previous = dict.fromkeys(os.urandom(16) for _ in range(count))
    held = (tracemalloc.get_traced_memory()[0] - base) / count
    del previous
    tracemalloc.stop()
    return counting, held


#: Runs a command and prints the peak RSS of it and its children once it exits.
MEASURE = """import resource, signal, subprocess, sys
process = subprocess.Popen(sys.argv[1:])
signal.signal(signal.SIGTERM, lambda *_: process.terminate())
status = process.wait()
print("peak", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(status)"""


def daemon_peaks(size: int = 8 * 2**20) -> list[str]:
    """The daemon's peak RSS (MB) for a file of ``size`` bytes in 20-character chunks:
    its first result, then the result that replaces it after an edit."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="chunkd-edits-"))
    inbox, source = folder / "inbox", folder / "big.txt"
    inbox.mkdir()
    line = b"alpha beta gamma delta epsilon zeta eta theta iota kappa. " * 1000 + b"\n\n"
    source.write_bytes(line * (size // len(line)))
    found = []

    def run(change, label: str) -> None:
        log = folder / f"{label}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-c", MEASURE, shutil.which("chunkd") or "chunkd", "watch",
                 str(inbox), "--settle", "0", "--chars", "20", "--overlap", "0",
                 "--max-bytes", str(2 * size), "--workers", "1"],
                stdout=out, stderr=subprocess.STDOUT)
        while "to catch up" not in log.read_text():
            time.sleep(0.1)
        change()
        while "processed big.txt" not in log.read_text():
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        process.wait()
        text = log.read_text()
        chunks = re.search(r"processed big.txt: (\d+) chunks", text).group(1)
        peak = re.search(r"peak (\d+)", text).group(1)
        found.append(f"{label}: {chunks} chunks, peak {peak} MB")

    def edit() -> None:
        with open(inbox / "big.txt", "r+b") as stream:
            stream.seek(size // 2)
            stream.write(b"EDITED")

    try:
        run(lambda: source.rename(inbox / "big.txt"), "first result")
        run(edit, "its replacement")
    finally:
        shutil.rmtree(folder)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timed", type=int, default=40, metavar="N",
                        help="documents edited under the daemon (default: 40)")
    parser.add_argument("--memory", action="store_true",
                        help="also measure what ids cost in memory (a few minutes)")
    args = parser.parse_args()
    documents = sorted(CORPUS.rglob("*.md"))
    print(f"{len(documents)} documents of {CORPUS}; each edited three ways at once\n")
    print("| settings | chunks | ids kept | chunk texts kept | offset ids kept (0.3.0) |")
    print("| --- | --- | --- | --- | --- |")
    for label, options in SETTINGS.items():
        ids, texts, offsets, total = shares(documents, options)
        assert ids == texts, (ids, texts)  # the promise: an id for every text kept
        print(f"| {label} | {total} | {ids:.1%} | {texts:.1%} | {offsets:.1%} |")
    took = daemon_latency(documents[::max(1, len(documents) // args.timed)][:args.timed])
    took.sort()
    print(f"\nchunkd watch --settle 0 --journal: edit to journal line over {len(took)} "
          f"documents: median {statistics.median(took) * 1000:.0f} ms, "
          f"90th percentile {took[int(0.9 * (len(took) - 1))] * 1000:.0f} ms, "
          f"max {took[-1] * 1000:.0f} ms ({sys.platform}, {os.cpu_count()} cores)")
    if args.memory:
        counting, held = bytes_per_id()
        print(f"\nids in memory: {counting:.0f} bytes per distinct chunk text counted, "
              f"{held:.0f} bytes per id of a replaced result")
        print("chunkd watch, 8 MiB in 20-character chunks: " + "; ".join(daemon_peaks()))


if __name__ == "__main__":
    main()
