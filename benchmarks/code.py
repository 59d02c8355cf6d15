"""The code strategy against its peers' code splitters, at the same size in characters.

    python benchmarks/code.py                 # writes benchmarks/CODE_RESULTS.md
    python benchmarks/code.py --quick         # a few files, one run

Corpora: the standard library's top-level Python modules, the JavaScript of npm's own
package (/usr/lib/node_modules/npm, when installed) and Go's own sources of the packages
net, go and crypto (Debian's ``golang-src``, /usr/share/go-*/src, when installed; tests
and test data left out). Each chunker cuts every file of a corpus at 1000 characters,
without overlap, each with one splitter made once; reported: MB/s (UTF-8 bytes of input
a second of CPU time, the best of --runs rounds, in each of which every chunker takes
its turn, so that a change in the load of a shared machine falls on all of them), the
ratio of chunkd's MB/s to each peer's, the chunks, and how many definitions that fit
the size were split (no chunk holds them whole). Definitions come from Python's ``ast``
and, for JavaScript and Go, tree-sitter's functions, classes, methods and types. Peers
that give no offsets (LlamaIndex strips its chunks) are placed by searching each chunk's
text from the end of the one before; a peer that cannot run is reported with its error.
Below each table, two bounds timed in the same rounds: tree-sitter's parse alone (the
least any of these splitters costs) and the parse with a query for every definition.
"""

from __future__ import annotations

import argparse
import ast
import functools
import pathlib
import platform
import re
import sys
import sysconfig
import time
from collections.abc import Callable

import chunkd

SIZE = 1000
#: Rounds stop past this many seconds of measured time in all (after one at least).
BUDGET_SECONDS = 30
NPM = pathlib.Path("/usr/lib/node_modules/npm")
#: Debian's golang-src: Go's own sources; these packages are about as large as the others.
GO_PACKAGES = ("net", "go", "crypto")
#: tree-sitter's definitions, by language.
TREE_SITTER_DEFINITIONS = {
    "javascript": {"function_declaration", "class_declaration", "method_definition",
                   "generator_function_declaration"},
    "go": {"function_declaration", "method_declaration", "type_declaration"},
}

#: A chunker: (text, language) -> the chunks as (start, end) code point offsets, or texts.
Chunker = Callable[[str, str], list]


@functools.lru_cache(maxsize=None)
def chunkd_splitter(language: str) -> chunkd.Splitter:
    option = {"python": "python", "javascript": "js", "go": "go"}[language]
    return chunkd.Splitter(SIZE, 0, strategy="code", language=option)


def chunkd_code(text: str, language: str) -> list:
    splitter = chunkd_splitter(language)
    return [(chunk.start, chunk.end) for chunk in splitter.feed(text) + splitter.finish()]


def _grammar(language: str):
    import importlib

    return importlib.import_module(f"tree_sitter_{language}").language()


@functools.lru_cache(maxsize=None)
def semantic_text_splitter(language: str):
    from semantic_text_splitter import CodeSplitter

    return CodeSplitter(_grammar(language), SIZE)


def semantic_text_splitter_code(text: str, language: str) -> list:
    return [(start, start + len(chunk))
            for start, chunk in semantic_text_splitter(language).chunk_indices(text)]


@functools.lru_cache(maxsize=None)
def llamaindex_splitter(language: str):
    import tree_sitter
    from llama_index.core.node_parser import CodeSplitter

    parser = tree_sitter.Parser(tree_sitter.Language(_grammar(language)))
    return CodeSplitter(language=language, max_chars=SIZE, parser=parser)


def llamaindex_code(text: str, language: str) -> list:
    return llamaindex_splitter(language).split_text(text)


def chonkie_code(text: str, language: str) -> list:
    from chonkie import CodeChunker

    chunker = CodeChunker(language=language, tokenizer="character", chunk_size=SIZE)
    return [(chunk.start_index, chunk.end_index) for chunk in chunker.chunk(text)]


PEERS: dict[str, Chunker] = {
    "chunkd --strategy code": chunkd_code,
    "semantic-text-splitter CodeSplitter": semantic_text_splitter_code,
    "LlamaIndex CodeSplitter": llamaindex_code,
    "chonkie CodeChunker": chonkie_code,
}


@functools.lru_cache(maxsize=None)
def tree_sitter_parser(language: str):
    import tree_sitter

    return tree_sitter.Parser(tree_sitter.Language(_grammar(language)))


def parse_alone(text: str, language: str) -> list:
    tree_sitter_parser(language).parse(text.encode())
    return []


def parse_and_query(text: str, language: str) -> list:
    from tree_sitter import QueryCursor

    from chunkd.strategies.code import GRAMMARS, definition_query

    root = tree_sitter_parser(language).parse(text.encode()).root_node
    QueryCursor(definition_query(GRAMMARS[language])).captures(root)
    return []


#: Not chunkers: the least a splitter that parses with tree-sitter costs, and that with a
#: tree-sitter query for every definition (as chunkd finds them in the grammars whose
#: definitions have no keyword of their own), timed in the same rounds.
BOUNDS: dict[str, Chunker] = {
    "tree-sitter's parse alone": parse_alone,
    "the parse and a query for every definition": parse_and_query,
}


def python_definitions(text: str) -> list[tuple[int, int]]:
    """Functions and classes, from their first decorator's line to their end."""
    starts = [0] + [at + 1 for at, character in enumerate(text) if character == "\n"]

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + len(text[starts[line - 1]:].encode()[:column].decode())

    spans = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            line = min([node.lineno] + [d.lineno for d in node.decorator_list])
            first = node.decorator_list[0] if node.decorator_list else node
            column = first.col_offset - (1 if node.decorator_list else 0)  # the "@"
            spans.append((offset(line, column), offset(node.end_lineno, node.end_col_offset)))
    return spans


def tree_sitter_definitions(text: str, language: str) -> list[tuple[int, int]]:
    import tree_sitter

    data = text.encode()
    root = tree_sitter.Parser(tree_sitter.Language(_grammar(language))).parse(data).root_node
    spans, pending = [], [root]
    while pending:
        node = pending.pop()
        pending += node.children
        if node.type in TREE_SITTER_DEFINITIONS[language]:
            spans.append((len(data[:node.start_byte].decode()), len(data[:node.end_byte].decode())))
    return spans


def placed(text: str, chunks: list) -> list[tuple[int, int]]:
    """Chunks as offsets: given, or found by their text from the end of the one before."""
    spans, cursor = [], 0
    for chunk in chunks:
        if isinstance(chunk, tuple):
            spans.append(chunk)
            continue
        start = text.find(chunk, cursor)
        if start < 0:
            start = text.find(chunk)
        if start >= 0:
            spans.append((start, start + len(chunk)))
            cursor = start + 1
    return spans


def split_definitions(text: str, spans: list[tuple[int, int]],
                      definitions: list[tuple[int, int]]) -> int:
    """How many definitions of at most SIZE code points no chunk holds whole (their
    white space aside: a stripped chunk still holds a definition it strips around)."""
    split = 0
    for start, end in definitions:
        core = text[start:end]
        start += len(core) - len(core.lstrip())
        end -= len(core) - len(core.rstrip())
        if end - start <= SIZE and not any(a <= start and end <= b for a, b in spans):
            split += 1
    return split


def corpora(quick: bool) -> dict[str, tuple[str, list[str]]]:
    python = sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    found = {"Python standard library": ("python", python)}
    javascript = sorted(NPM.rglob("*.js")) if NPM.is_dir() else []
    if javascript:
        found[f"npm {NPM}"] = ("javascript", javascript)
    go = sorted(pathlib.Path("/usr/share").glob("go-*/src"))
    if go:
        sources = [path for package in GO_PACKAGES
                   for path in sorted((go[-1] / package).rglob("*.go"))
                   if not path.name.endswith("_test.go") and "testdata" not in path.parts
                   and "vendor" not in path.parts]
        found[f"Go {go[-1]} ({', '.join(GO_PACKAGES)})"] = ("go", sources)
    texts = {}
    for name, (language, paths) in found.items():
        files = []
        for path in paths[:8] if quick else paths:
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if "\r" not in text:
                files.append(text)
        texts[name] = (language, files)
    return texts


def measure(language: str, files: list[str], runs: int) -> dict[str, tuple[float, list] | str]:
    """Each peer's best CPU time of ``runs`` rounds (fewer past BUDGET_SECONDS in all),
    every peer in turn within a round, and its chunks; or the error it failed with."""
    best: dict[str, tuple[float, list] | str] = {}
    spent = 0.0
    for turn in range(runs + 1):   # turn 0 warms up on one file: imports, splitters, caches
        for name, chunker in {**PEERS, **BOUNDS}.items():
            if isinstance(best.get(name), str):
                continue
            started = time.process_time()
            try:
                results = [chunker(text, language) for text in (files if turn else files[:1])]
            except Exception as error:  # a peer that cannot run is a result
                message = re.sub(r"\S+://\S+", "(an address)", str(error).splitlines()[0])
                best[name] = f"failed: {type(error).__name__}: {message[:100]}"
                continue
            if not turn:
                continue
            seconds = time.process_time() - started
            spent += seconds
            known = best.get(name)
            if not isinstance(known, tuple) or seconds < known[0]:
                best[name] = (seconds, results)
        if spent > BUDGET_SECONDS:
            break
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", default=str(pathlib.Path(__file__).with_name("CODE_RESULTS.md")))
    args = parser.parse_args()
    runs = 1 if args.quick else args.runs
    lines = ["# The code strategy against its peers", "",
             f"`python benchmarks/code.py` on {platform.machine()} with Python "
             f"{platform.python_version()}, chunkd {chunkd.__version__}; {SIZE} characters a "
             "chunk, no overlap, the best CPU time of "
             f"{runs} round(s) (fewer past {BUDGET_SECONDS} s), each chunker in turn within a "
             "round. \"chunkd x\": chunkd's MB/s over the peer's, in the same run. \"split\": "
             f"definitions of at most {SIZE} characters that no chunk holds whole.", ""]
    for corpus, (language, files) in corpora(args.quick).items():
        size = sum(len(text.encode()) for text in files)
        definitions = [python_definitions(text) if language == "python"
                       else tree_sitter_definitions(text, language) for text in files]
        total = sum(1 for spans, text in zip(definitions, files) for start, end in spans
                    if len(text[start:end].strip()) <= SIZE)
        lines += [f"## {corpus}", "",
                  f"{len(files)} files, {size / 1e6:.1f} MB, {total} definitions that fit.", "",
                  "| chunker | MB/s | chunkd x | chunks | split |",
                  "| --- | --- | --- | --- | --- |"]
        measured = measure(language, files, runs)
        ours = measured[next(iter(PEERS))]
        for name in PEERS:
            result = measured[name]
            if isinstance(result, str):
                lines.append(f"| {name} | {result} | | | |")
                continue
            seconds, results = result
            ratio = f"{seconds / ours[0]:.2f}" if isinstance(ours, tuple) else ""
            split = sum(split_definitions(text, placed(text, chunks), spans)
                        for text, chunks, spans in zip(files, results, definitions))
            count = sum(len(chunks) for chunks in results)
            lines.append(f"| {name} | {size / 1e6 / seconds:.2f} | {ratio} | {count} | {split} |")
            print(lines[-1], file=sys.stderr, flush=True)
        lines.append("")
        for name in BOUNDS:
            result = measured[name]
            if isinstance(result, tuple) and isinstance(ours, tuple):
                lines.append(f"- {name}: {size / 1e6 / result[0]:.2f} MB/s; chunkd's time is "
                             f"{ours[0] / result[0]:.2f} times it")
        lines.append("")
    pathlib.Path(args.output).write_text("\n".join(lines), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
