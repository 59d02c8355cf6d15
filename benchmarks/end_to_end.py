"""The ``chunkd`` command end to end against the LangChain script, interleaved.

    python benchmarks/end_to_end.py [--rounds N] [--unit chars|tokens] [--before DIR]
                                    [--python PATH]

The same measure as ``run.py``'s end-to-end section (the corpus repeated to about
40 MB on stdin from a file, NDJSON read from stdout through a pipe, process start
included), but the commands run in turn, round after round, so that a machine whose
speed swings from one second to the next slows them alike. Each chunkd runs as
``python -c`` of ``chunkd.cli.main`` from its checkout; ``--before DIR``: an older
checkout (built in place) runs too. ``--python``: the interpreter every command runs
with (this one by default), such as a virtual environment's where chunkd was installed
as a user installs it (``pip install .``): an editable install's import hook, which a
development environment has, adds some 20 ms to each start. Printed: a Markdown table
of the median and the fastest seconds, their ratios to the LangChain script, and the
median of each round's ratio (the commands of a round run seconds apart, so that a slow
spell of the machine slows both sides of that ratio).
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

import run  # noqa: E402

SIZES = {"chars": ("1000", "100"), "tokens": ("300", "30")}


def seconds(command: list[str], folder: pathlib.Path, stdin: str) -> float:
    """The wall time of ``command`` run in ``folder`` on ``stdin``, its output read."""
    start = time.perf_counter()
    with open(stdin, "rb") as source:
        process = subprocess.Popen(command, cwd=folder, stdin=source, stdout=subprocess.PIPE,
                                   env={**os.environ, "PYTHONPATH": str(folder)})
        for _ in iter(lambda: process.stdout.read(1 << 20), b""):
            pass
    if process.wait() != 0:
        raise RuntimeError(f"{command} failed")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--unit", choices=SIZES, default="chars")
    parser.add_argument("--before", type=pathlib.Path)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    size, overlap = SIZES[args.unit]
    main_command = "import sys, chunkd.cli; sys.exit(chunkd.cli.main())"
    chunkd = [args.python, "-c", main_command, f"--{args.unit}", size, "--overlap", overlap]
    commands = {"langchain script": ([args.python, "-c", run.LANGCHAIN_SCRIPT, args.unit,
                                      size, overlap], ROOT)}
    if args.before is not None:
        commands["chunkd before"] = (chunkd, args.before.resolve())
    commands["chunkd"] = (chunkd, ROOT)
    text = next(text for name, text in run.inputs(False).items() if name.startswith("corpus x"))
    with tempfile.NamedTemporaryFile(suffix=".txt") as stdin:
        stdin.write(text.encode())
        stdin.flush()
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (command, folder) in commands.items():
                times[name].append(seconds(command, folder, stdin.name))
    base = times["langchain script"]
    print(f"{len(text.encode()) / 1e6:.1f} MB, --{args.unit} {size} --overlap {overlap}, "
          f"{args.rounds} rounds\n")
    print("| command | median s | fastest s | x LangChain (median) | x LangChain (fastest) "
          "| x LangChain (median of the rounds) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, values in times.items():
        rounds = statistics.median(b / v for b, v in zip(base, values))
        print(f"| {name} | {statistics.median(values):.3f} | {min(values):.3f} | "
              f"{statistics.median(base) / statistics.median(values):.2f} | "
              f"{min(base) / min(values):.2f} | {rounds:.2f} |")


if __name__ == "__main__":
    main()
