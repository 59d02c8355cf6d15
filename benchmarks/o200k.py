"""o200k_base on text seen once: chunkd against one pass of tiktoken and LangChain.

    python benchmarks/o200k.py [--rounds N] [--tokens SIZE OVERLAP] [--before DIR] [FILE]

FILE (default: the shared corpus once, en-rustbook, zh-vuedocs and en-policy joined as
``run.py`` joins them) is split in tokens of o200k_base, each contestant in a fresh
process (so that no cache has seen the text), the rounds interleaved so that a busy
machine slows them alike; printed: the median and the fastest of each, and ratios.
In process, after loading and a warm-up on other text: one ``encode_ordinary`` pass
of tiktoken (its ``Encoding`` built from chunkd's copy of the ranks before the clock
starts), ``chunkd.split_text``, and LangChain's ``from_tiktoken_encoder`` with chunkd's
separators (one round: it is slow); then the whole ``chunkd --tokenizer o200k_base
--tokens SIZE --overlap OVERLAP FILE`` command, and the same on empty input (start-up
and loading), with an empty tiktoken cache. ``--before DIR``: the chunkd package of
an older checkout (built in place) runs too, as "chunkd before".
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

#: One measurement, in a fresh process: argv is MODE FILE SIZE OVERLAP; prints the
#: seconds and what was made (a token count, or the chunks' number and hash).
MEASURE = r"""
import hashlib, os, sys, time
mode, path, size, overlap = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = open(path, encoding="utf-8").read()
if mode == "tiktoken":
    from chunkd.units import tiktoken_encodings
    encoding = tiktoken_encodings.encoding_of(tiktoken_encodings._definition("o200k_base", None))
    encoding.encode_ordinary("Warm up. " * 50)
    start = time.perf_counter()
    made = len(encoding.encode_ordinary(text))
elif mode == "chunkd":
    import chunkd
    split = lambda text: [chunk.text for chunk in chunkd.split_text(
        text, size, overlap, unit="tokens", tokenizer="o200k_base")]
    split("Warm up. " * 50)
    start = time.perf_counter()
    made = split(text)
else:
    import run
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from chunkd.kernel.splitting import SEPARATORS
    run.o200k_encoding()  # in tiktoken's registry, from the shared file
    splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="o200k_base", chunk_size=size, chunk_overlap=overlap,
        disallowed_special=(), separators=list(SEPARATORS), keep_separator="end")
    splitter.split_text("Warm up. " * 50)
    start = time.perf_counter()
    made = splitter.split_text(text)
seconds = time.perf_counter() - start
if isinstance(made, list):
    made = f"{len(made)} chunks {hashlib.sha1(chr(0).join(made).encode()).hexdigest()[:8]}"
print(seconds, made)
"""


def contestants(before: pathlib.Path | None) -> dict[str, tuple[str, pathlib.Path]]:
    """Name -> (mode, the folder whose chunkd package runs)."""
    named = {"tiktoken, one pass": ("tiktoken", ROOT), "chunkd": ("chunkd", ROOT)}
    if before is not None:
        named["chunkd before"] = ("chunkd", before)
    named["langchain"] = ("langchain", ROOT)
    return named


def measured(mode: str, source: pathlib.Path, path: pathlib.Path, size: int,
             overlap: int, environment: dict[str, str]) -> tuple[float, str]:
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, mode, str(path), str(size), str(overlap)],
        env={**environment, "PYTHONPATH": os.pathsep.join([str(source), str(ROOT / "benchmarks")])},
        cwd=source, capture_output=True, text=True, check=True)  # cwd: first on the path
    seconds, made = result.stdout.split(" ", 1)
    return float(seconds), made.strip()


def command_seconds(source: pathlib.Path, arguments: list[str], stdin: int | None,
                    environment: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sys, chunkd.cli; sys.exit(chunkd.cli.main())",
                    *arguments], stdin=stdin, stdout=subprocess.DEVNULL, check=True,
                   env={**environment, "PYTHONPATH": str(source)}, cwd=source)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=pathlib.Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, nargs=2, default=(254, 25),
                        metavar=("SIZE", "OVERLAP"))
    parser.add_argument("--before", type=pathlib.Path)
    args = parser.parse_args()
    size, overlap = args.tokens
    with tempfile.TemporaryDirectory() as folder:
        path = args.file
        if path is None:
            import run
            path = pathlib.Path(folder) / "corpus.txt"
            path.write_text("\n\n".join(run.corpus_folder(name) for name in (
                "en-rustbook", "zh-vuedocs", "en-policy")), encoding="utf-8")
        cache = pathlib.Path(folder) / "tiktoken-cache"
        cache.mkdir()
        environment = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)}
        named = contestants(args.before)
        seconds: dict[str, list[float]] = {name: [] for name in named}
        made: dict[str, str] = {}
        sources = {"command": ROOT, **({"command before": args.before} if args.before else {})}
        for name in sources:
            seconds[name], seconds[name + ", empty input"] = [], []
        options = ["--tokenizer", "o200k_base", "--tokens", str(size), "--overlap", str(overlap)]
        for round_ in range(args.rounds):
            for name, (mode, source) in named.items():
                if mode != "langchain" or round_ == 0:
                    taken, made[name] = measured(mode, source, path, size, overlap, environment)
                    seconds[name].append(taken)
            for name, source in sources.items():
                seconds[name].append(command_seconds(source, options + [str(path)], None,
                                                     environment))
                seconds[name + ", empty input"].append(command_seconds(
                    source, options, subprocess.DEVNULL, environment))
        assert not any(cache.iterdir()), "nothing is written to tiktoken's cache"
        mb = path.stat().st_size / 1e6
    median = {name: statistics.median(times) for name, times in seconds.items()}
    fastest = {name: min(times) for name, times in seconds.items()}
    print(f"{args.file or 'the shared corpus once'} ({mb:.2f} MB), {size}/{overlap} tokens of "
          f"o200k_base, {args.rounds} rounds (LangChain 1): seconds, median (fastest)")
    one_pass = "tiktoken, one pass"
    for name in seconds:
        ratio = (f"; {median[one_pass] / median[name]:.2f} "
                 f"({fastest[one_pass] / fastest[name]:.2f}) x one tiktoken pass, "
                 f"{median['langchain'] / median[name]:.2f} x LangChain" if name in named else "")
        print(f"  {name}: {median[name]:.3f} ({fastest[name]:.3f}){ratio}"
              f"{'; ' + made[name] if name in made else ''}")


if __name__ == "__main__":
    main()
