"""Fingerprint what every front end writes on the shared corpus, to prove a change that
should not change output (a move of modules, a refactor) changed none.

    python benchmarks/records_digest.py > before.json     # on the old tree
    python benchmarks/records_digest.py > after.json      # on the new one
    diff before.json after.json                           # no line may differ

Each entry is the SHA-256 of the bytes one run of the installed ``chunkd`` (the filter
in every strategy and format, ``watch``, ``sync`` into LanceDB) or of ``chunkd.arrow``
gives on the same inputs: the Markdown corpus, the code samples of the tests, and
HTML made from the corpus. Nothing in it depends on time or on the machine.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
O200K = ROOT.parent / "shared" / "tokenizers" / "o200k_base.tiktoken"
CODE = ROOT / "tests" / "languages"

FILTER_RUNS = {
    "recursive chars": ["--chars", "800", "--overlap", "80"],
    "recursive tokens": ["--tokens", "200", "--overlap", "20"],
    "recursive o200k": ["--tokens", "200", "--tokenizer", str(O200K)],
    "graphemes": ["--strategy", "graphemes", "--size", "500", "--overlap", "50"],
    "words": ["--strategy", "words"],
    "sentences": ["--strategy", "sentences", "--size", "5", "--overlap", "1"],
    "sections": ["--strategy", "sections"],
    "markdown": ["--strategy", "markdown", "--tokens", "300"],
    "markdown strip": ["--strategy", "markdown", "--chars", "1200", "--strip-headings"],
    "auto": ["--strategy", "auto"],
    "parents": ["--chars", "400", "--parent-chars", "2000"],
    "embed text": ["--strategy", "markdown", "--embed-text", "--embed-prefix", "passage: "],
    "ids and counts": ["--ids", "--count-tokens"],
    "json": ["--format", "json", "--ids"],
    "msgpack": ["--format", "msgpack"],
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chunkd(*arguments: str, stdin: bytes | None = None, cwd: Path | None = None) -> bytes:
    result = subprocess.run(["chunkd", *arguments, "-q"], input=stdin, capture_output=True,
                            timeout=600, check=False, cwd=cwd)
    if result.returncode != 0:
        sys.exit(f"chunkd {' '.join(arguments)}: exit {result.returncode}: "
                 f"{result.stderr.decode(errors='replace')[-400:]}")
    return result.stdout


def html_of(markdown: str) -> str:
    """A plain HTML page of a Markdown file: headings as h1-h3, the rest as paragraphs."""
    lines = []
    for block in markdown.split("\n\n"):
        level = len(block) - len(block.lstrip("#"))
        text = block.lstrip("#").strip().replace("&", "&amp;").replace("<", "&lt;")
        lines.append(f"<h{level}>{text}</h{level}>" if 0 < level <= 3 else f"<p>{text}</p>")
    return "<!doctype html><html><body>\n" + "\n".join(lines) + "\n</body></html>\n"


class Vectors(http.server.BaseHTTPRequestHandler):
    """``/v1/embeddings``: a text's vector is made from its SHA-256, so it is the same
    on every run and differs between texts."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = asked["input"] if isinstance(asked["input"], list) else [asked["input"]]
        data = [{"index": i, "embedding": [b / 255 for b in hashlib.sha256(t.encode()).digest()[:8]]}
                for i, t in enumerate(texts)]
        body = json.dumps({"data": data, "model": asked.get("model")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def watched(inputs: list[Path], work: Path) -> str:
    """Run ``chunkd watch`` on a folder of the inputs until each has its result."""
    inbox, out = work / "inbox", work / "out"
    inbox.mkdir(parents=True)
    out.mkdir()
    for path in inputs:
        shutil.copyfile(path, inbox / path.name)
    daemon = subprocess.Popen(["chunkd", "watch", str(inbox), "--output-dir", str(out),
                               "--ids", "--chars", "600", "--settle", "0.2", "-q"])
    try:
        deadline = time.monotonic() + 300
        while len(list(out.glob("*.chunks.json"))) < len(inputs):
            if time.monotonic() > deadline or daemon.poll() is not None:
                sys.exit("chunkd watch did not write every result")
            time.sleep(0.2)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    results = []
    for path in sorted(out.glob("*.chunks.json")):
        result = json.loads(path.read_bytes())
        del result["stat"]  # the input's inode and times
        results.append(json.dumps(result, sort_keys=True))
    return sha("\n".join(results).encode())


def synced(inputs: list[Path], work: Path) -> str:
    """``chunkd sync`` of the inputs into LanceDB; the rows as LanceDB's client reads them."""
    import lancedb

    folder = work / "synced"
    folder.mkdir()
    for path in inputs:
        shutil.copyfile(path, folder / path.name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Vectors)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        chunkd("sync", "synced", "--sink", "lance", "--chars", "700",
               "--embed-url", f"http://127.0.0.1:{server.server_address[1]}",
               "--embed-model", "digest", "--origin", "digest", cwd=work)
    finally:
        server.shutdown()
    table = lancedb.connect(str(work / "lance")).open_table("chunkd").to_arrow()
    rows = []
    for row in table.to_pylist():
        # The settings' fingerprint names the endpoint's URL, whose port changes each run.
        del row["metadata"]["fingerprint"]
        row["chunkd_digest"] = row["chunkd_digest"].split(":")[1]
        row["vector"] = struct.pack(f"{len(row['vector'])}f", *row["vector"]).hex()
        rows.append(json.dumps(row, sort_keys=True))
    rows.sort()
    return sha("\n".join(rows).encode())


def arrow_tables(texts: list[tuple[str, str]]) -> dict[str, str]:
    import pyarrow as pa

    from chunkd.arrow import chunk_table

    documents = pa.table({"id": [name for name, _ in texts], "text": [t for _, t in texts]})
    runs = {"arrow chars": {"chunk_size": 700}, "arrow tokens": {"chunk_size": 150, "unit": "tokens"},
            "arrow markdown": {"strategy": "markdown", "chunk_size": 1000},
            "arrow ids": {"chunk_size": 500, "ids": True, "count_tokens": True}}
    digests = {}
    for name, options in runs.items():
        table = chunk_table(documents, id_column="id", **options)  # type: ignore[arg-type]
        digests[name] = sha(json.dumps(table.to_pylist(), default=str).encode())
    return digests


def main() -> None:
    markdown = sorted(CORPUS.rglob("*.md"))
    code = sorted(p for p in CODE.iterdir() if p.is_file())
    digests: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        html = []
        for path in markdown[::10]:
            page = work / "pages" / (path.stem + ".html")
            page.parent.mkdir(exist_ok=True)
            page.write_text(html_of(path.read_text(encoding="utf-8")), encoding="utf-8")
            html.append(page)
        for name, options in FILTER_RUNS.items():
            digests[f"filter {name}"] = sha(chunkd(*options, *map(str, markdown)))
        digests["filter stdin"] = sha(chunkd("--tokens", "100", stdin=markdown[0].read_bytes()))
        ndjson = b"".join(json.dumps({"id": p.name, "text": p.read_text(encoding="utf-8"),
                                      "lang": p.parent.name}).encode() + b"\n" for p in markdown)
        digests["filter ndjson"] = sha(chunkd("--input", "ndjson", "--chars", "500", stdin=ndjson))
        digests["filter html"] = sha(chunkd("--chars", "600", *(f"pages/{p.name}" for p in html),
                                            cwd=work))
        names = [p.name for p in code]  # records name their file as it was given
        digests["filter code"] = sha(chunkd("--strategy", "code", "--chars", "600", *names, cwd=CODE))
        digests["filter auto code"] = sha(chunkd("--strategy", "auto", *names, cwd=CODE))
        parquet = work / "chunks.parquet"
        chunkd("--format", "parquet", "--output", str(parquet), "--ids", *map(str, markdown[:40]))
        import pyarrow.parquet as pq

        digests["filter parquet"] = sha(json.dumps(pq.read_table(parquet).to_pylist()).encode())
        digests.update(arrow_tables([(p.name, p.read_text(encoding="utf-8")) for p in markdown]))
        digests["watch"] = watched(markdown[:60] + html[:5], work / "watch")
        digests["sync lancedb"] = synced(markdown[:80], work)
    json.dump(digests, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    os.environ.pop("CHUNKD_PUREPYTHON", None)
    main()
