"""The code strategy against oracles it did not write: Python's ``ast`` over the
standard library, tree-sitter's own node ranges for the other languages, hypothesis-made
nesting; offsets with multi-byte text, CRLF and tabs; the language from the option, the
name or a shebang; embed_text within the size."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

import chunkd
from code_checks import (check_cut, check_python_defines, check_python_symbols,
                         python_definitions, signatures_alone, stdlib_sources,
                         tree_sitter_definitions)
from oracle import random_cuts, token_length

COUNTS = {"chars": len, "tokens": token_length}


def code_chunks(text: str, size: int, unit: str = "chars", name: str | None = "x.py",
                pieces: list[str] | None = None, **options) -> list[chunkd.Chunk]:
    splitter = chunkd.Splitter(size, options.pop("overlap", 0), strategy="code", unit=unit,
                               **options)
    splitter.begin(name)
    chunks = []
    for piece in pieces if pieces is not None else [text]:
        chunks += splitter.feed(piece)
    return chunks + splitter.finish()


def check_stdlib(paths, sizes) -> int:
    fitting = 0
    for path in paths:
        text = path.read_text(encoding="utf-8")
        definitions = python_definitions(text)
        for unit, size in sizes:
            chunks = code_chunks(text, size, unit)
            fitting += check_cut(text, chunks, size, COUNTS[unit], definitions)
            check_python_symbols(text, chunks)
            check_python_defines(text, chunks)
            assert signatures_alone(text, chunks, size, COUNTS[unit]) == 0, path
    return fitting


def test_package_signatures_never_alone():
    """chunkd's own package: no chunk is a signature alone (``class Chunk(NamedTuple):``
    with its body in the next chunk), at sizes where most definitions are cut;
    ``defines`` and ``symbols`` as ``ast`` says."""
    paths = sorted(Path(chunkd.__file__).parent.rglob("*.py"))
    assert len(paths) > 50
    assert check_stdlib(paths, [("chars", 300), ("chars", 1000), ("tokens", 100)]) > 1000


LONG_SIGNATURE = (
    "def configure(first_setting_of_the_thing: dict[str, int] | None = None,\n"
    "              second_setting_of_the_thing: dict[str, int] | None = None,\n"
    "              third_setting: int = 3) -> None:\n"
    '    """Configure the thing from its settings, each a dict or None."""\n'
    + "".join(f"    total{k} = first_setting_of_the_thing or second_setting_of_the_thing\n"
              for k in range(4)))


def test_long_signature_begins_its_body():
    """A signature over the size is cut inside its parameters; its last piece is
    still signature, not body: it begins the chunk of the body's first line (they fit
    together), never a chunk alone."""
    lines = LONG_SIGNATURE.splitlines(keepends=True)
    size = 150
    assert len("".join(lines[:3])) > size >= len(lines[2]) + len(lines[3])
    chunks = code_chunks(LONG_SIGNATURE, size, "chars")
    assert "".join(chunk.text for chunk in chunks) == LONG_SIGNATURE
    assert [chunk.text for chunk in chunks][:2] == ["".join(lines[:2]), "".join(lines[2:4])]


def test_stdlib_sample_definitions_whole():
    """Every definition ``ast`` finds that fits the size lies in one chunk; chunks tile
    the file and none is longer than the size; the symbols are those ``ast`` says
    enclose each chunk's start: a sample of the standard library."""
    assert check_stdlib(stdlib_sources()[::16], [("chars", 400), ("tokens", 150)]) > 300


@pytest.mark.slow
def test_stdlib_definitions_whole():
    """The same over every top-level module of the standard library, at three sizes."""
    assert check_stdlib(stdlib_sources(), [("chars", 400), ("chars", 1500),
                                           ("tokens", 200)]) > 10000


# --- other languages: tree-sitter's node ranges on files written here ------------------

def _javascript(rng: random.Random) -> str:
    parts = ["'use strict';\nconst fs = require('fs');\n\n"]
    for number in range(rng.randint(3, 8)):
        body = "".join(f"    const v{k} = compute('é{k}', {k});\n"
                       for k in range(rng.randint(1, 30)))
        parts.append(f"// Does thing {number}.\nfunction thing{number}(a, b) {{\n{body}"
                     "    return a + b;\n}\n\n")
    methods = "".join(f"  /** m{k} */\n  method{k}(x) {{\n" + "    x += 1;\n" * rng.randint(1, 20)
                      + "    return x;\n  }\n\n" for k in range(rng.randint(2, 6)))
    parts.append(f"class Ünïcode extends Base {{\n  constructor() {{ super(); }}\n\n{methods}}}\n")
    return "".join(parts)


def _typescript(rng: random.Random) -> str:
    parts = ["import { X } from './x';\n\n"]
    for number in range(rng.randint(2, 6)):
        fields = "".join(f"  f{k}: string;\n" for k in range(rng.randint(1, 15)))
        parts.append(f"export interface Shape{number} {{\n{fields}}}\n\n")
        body = "    let n = 0;\n" * rng.randint(1, 25)
        parts.append(f"export function area{number}(s: Shape{number}): number {{\n{body}"
                     "    return 1;\n}\n\n")
    parts.append("enum Colour { Red = 'ré', Green = 'grün' }\n")
    return "".join(parts)


def _tsx(rng: random.Random) -> str:
    items = "".join(f"      <li key=\"{k}\">{{item{k}}} ✓</li>\n" for k in range(rng.randint(1, 30)))
    return (f"import React from 'react';\n\nexport function List(props: Props) {{\n"
            f"  return (\n    <ul>\n{items}    </ul>\n  );\n}}\n\n"
            "function Small() { return <b>hi</b>; }\n")


def _go(rng: random.Random) -> str:
    # "type" and "func" also as words in comments and strings, and a function literal
    parts = ["package main\n\nimport \"fmt\"\n\n// Reader reads, a type with funcs.\n"
             "type Reader struct {\n\tname string\n}\n\n"
             "var describe = func() string { return \"a type, a func\" }\n\n"]
    for number in range(rng.randint(3, 8)):
        body = "".join(f"\tfmt.Println(\"línea {k}\")\n" for k in range(rng.randint(1, 30)))
        parts.append(f"// Read{number} reads.\nfunc (r *Reader) Read{number}() int {{\n{body}"
                     "\treturn 0\n}\n\n")
    return "".join(parts)


def _rust(rng: random.Random) -> str:
    parts = ["use std::fmt;\n\n#[derive(Debug, Clone)]\npub struct Point {\n    x: f64,\n}\n\n"]
    methods = "".join(f"    /// Method {k}.\n    pub fn m{k}(&self) -> f64 {{\n"
                      + "        let a = \"ünï\".len() as f64;\n" * rng.randint(1, 20)
                      + "        self.x\n    }\n\n" for k in range(rng.randint(2, 7)))
    parts.append(f"impl Point {{\n{methods}}}\n\n")
    parts.append("mod tests {\n    #[test]\n    fn works() {\n        assert!(true);\n    }\n}\n")
    return "".join(parts)


def _java(rng: random.Random) -> str:
    methods = "".join(f"    /** Método {k}. */\n    @Override\n    public int m{k}(int x) {{\n"
                      + "        x = x + 1;\n" * rng.randint(1, 25) + "        return x;\n    }\n\n"
                      for k in range(rng.randint(2, 8)))
    return (f"package p;\n\nimport java.util.List;\n\npublic class Main extends Base {{\n"
            f"    private int count;\n\n    public Main() {{ count = 0; }}\n\n{methods}}}\n")


def _c(rng: random.Random) -> str:
    parts = ["#include <stdio.h>\n\nstruct point { int x; int y; };\n\n"]
    for number in range(rng.randint(3, 8)):
        body = "".join(f"    printf(\"%d ü\\n\", {k});\n" for k in range(rng.randint(1, 30)))
        parts.append(f"/* f{number} prints. */\nstatic int f{number}(int a) {{\n{body}"
                     "    return a;\n}\n\n")
    return "".join(parts)


def _cpp(rng: random.Random) -> str:
    methods = "".join(f"    int m{k}(int x) {{\n" + "        x += 1;\n" * rng.randint(1, 20)
                      + "        return x;\n    }\n" for k in range(rng.randint(2, 6)))
    return (f"#include <vector>\n\nnamespace geo {{\n\nclass Shape {{\npublic:\n{methods}}};\n\n"
            "int Shape::area() const {\n    return 0;\n}\n\n}  // namespace geo\n")


SOURCES = {"javascript": (_javascript, "a.js"), "typescript": (_typescript, "a.ts"),
           "tsx": (_tsx, "a.tsx"), "go": (_go, "a.go"), "rust": (_rust, "a.rs"),
           "java": (_java, "A.java"), "c": (_c, "a.c"), "cpp": (_cpp, "a.cpp")}


@pytest.mark.parametrize("grammar", sorted(SOURCES))
def test_languages_definitions_whole(grammar):
    """For each language, on source written here: every definition tree-sitter finds
    that fits lies in one chunk, the chunks tile the file, none over the size, and the
    records name the language; whole or fed in random pieces alike."""
    make, name = SOURCES[grammar]
    rng = random.Random(grammar)
    fitting = 0
    for _ in range(6):
        text = make(rng)
        definitions = tree_sitter_definitions(text, grammar)
        for unit, size in (("chars", rng.randint(120, 900)), ("tokens", rng.randint(40, 250))):
            chunks = code_chunks(text, size, unit, name)
            fitting += check_cut(text, chunks, size, COUNTS[unit], definitions)
            assert {chunk.language for chunk in chunks} == {grammar}
            assert code_chunks(text, size, unit, name, pieces=random_cuts(text, rng)) == chunks
    assert fitting > 10


def test_go_defines_every_definition():
    """Go's definitions are found at their keywords ("func", "type", here also words in
    comments and strings, and a function literal's): ``defines`` names each one that a
    walk over every node of tree-sitter's tree finds, once."""
    rng = random.Random("go defines")
    for _ in range(6):
        text = _go(rng)
        definitions = tree_sitter_definitions(text, "go")
        for size in (120, 400, 900):
            chunks = code_chunks(text, size, "chars", "a.go")
            assert sum(len(chunk.defines) for chunk in chunks) == len(definitions) > 3


def test_keywords_in_strings():
    """More keywords in a string than the tree has nodes (its definitions are then
    found by the query, not at their keywords): ``defines`` and ``symbols`` as ``ast``
    says."""
    text = ('"""' + "class def " * 5000 + '"""\n\n'
            "class A:\n    def f(self):\n        return 'def class'\n")
    for size in (100, 1000):
        chunks = code_chunks(text, size)
        check_python_defines(text, chunks)
        check_python_symbols(text, chunks)
    assert [name for chunk in code_chunks(text, 1000) for name in chunk.defines] == \
        ["class A", "class A > def f"]


# --- hypothesis-made nesting -------------------------------------------------------------

_NAMES = st.text(alphabet="abcxyzéßπ_", min_size=1, max_size=8).map(lambda s: "n" + s)
_LINES = st.lists(st.sampled_from([
    "x = 1", "value = 'ünïcödé ✓ 😀'", "# a comment", "call(a, b, c)", "pass",
    "items = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", "return None"]), min_size=1, max_size=6)


@st.composite
def python_blocks(draw, depth: int = 0) -> list[str]:
    """Lines of a Python block: statements, and functions and classes nested in it."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["lines", "def", "class"] if depth < 3 else ["lines"]))
        if kind == "lines":
            lines += [line for line in draw(_LINES) if line != "return None"]
            continue
        if draw(st.booleans()):
            lines.append("# Leading comment.")
        if draw(st.booleans()):
            lines.append("@decorator")
        header = f"def {draw(_NAMES)}(a, b):" if kind == "def" else f"class {draw(_NAMES)}:"
        body = draw(python_blocks(depth + 1))
        lines += [header, "    '''Docstring.'''"] + ["    " + line for line in body] + [""]
    return lines


@settings(max_examples=examples(60), deadline=None)
@given(python_blocks(), st.integers(20, 400), st.sampled_from(["\n", "\r\n"]),
       st.sampled_from(["    ", "\t"]), st.randoms(use_true_random=False))
def test_nesting(lines, size, newline, indent, rng):
    """Nested definitions: the ``ast`` oracle's properties, with CRLF, tabs and
    multi-byte text, whole or in random pieces."""
    text = newline.join(line.replace("    ", indent) for line in lines) + newline
    chunks = code_chunks(text, size)
    check_cut(text, chunks, size, len, python_definitions(text))
    check_python_symbols(text, chunks)
    assert code_chunks(text, size, pieces=random_cuts(text, rng, 50)) == chunks


@st.composite
def javascript_blocks(draw, depth: int = 0) -> list[str]:
    """Lines of a JavaScript block: statements, and functions and classes (with
    methods) nested in it."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["lines", "function", "class"] if depth < 3 else ["lines"]))
        if kind == "lines":
            lines += [draw(st.sampled_from(["let x = 1;", "call('ünï ✓ 😀', b);", "// note",
                                            "if (a) { b(); }"]))
                      for _ in range(draw(st.integers(1, 5)))]
            continue
        if draw(st.booleans()):
            lines.append("/** Leading comment. */")
        name = draw(_NAMES)
        body = draw(javascript_blocks(depth + 1))
        if kind == "function":
            lines += [f"function {name}(a, b) {{"] + ["  " + line for line in body] + ["}"]
        else:
            lines += [f"class {name} {{", f"  m{name}(a) {{"] + ["    " + line for line in body] \
                + ["  }", "}"]
    return lines


@settings(max_examples=examples(40), deadline=None)
@given(javascript_blocks(), st.integers(20, 300), st.sampled_from(["\n", "\r\n"]),
       st.randoms(use_true_random=False))
def test_javascript_nesting(lines, size, newline, rng):
    """Nested JavaScript: tree-sitter's definitions that fit stay whole, chunks tile and
    fit, whole or in random pieces."""
    text = newline.join(lines) + newline
    chunks = code_chunks(text, size, name="x.js")
    check_cut(text, chunks, size, len, tree_sitter_definitions(text, "javascript"))
    assert code_chunks(text, size, name="x.js", pieces=random_cuts(text, rng, 50)) == chunks


# --- symbols, language, overlap, embed_text ---------------------------------------------

SPLITTER = '''\
import re


class Splitter:
    """Cuts text."""

    def __init__(self, size):
        self.size = size

    def feed(self, text):
        pieces = []
        for line in text.splitlines():
            pieces.append(line)
            pieces.append(line.upper())
            pieces.append(line.lower())
        return pieces


def main():
    return Splitter(10)
'''


def test_symbols():
    """A chunk's symbols are the definitions around its first code point, outermost
    first, each as it reads up to its name."""
    chunks = code_chunks(SPLITTER, 60)
    by_line = {chunk.text.split("\n", 1)[0].strip(): chunk.symbols for chunk in chunks}
    assert by_line["for line in text.splitlines():"] == ("class Splitter", "def feed")
    assert by_line["import re"] == ()


@pytest.mark.parametrize(("name", "options", "head", "language"), [
    ("a.py", {}, "", "python"), ("a.mjs", {}, "", "javascript"), ("a.tsx", {}, "", "tsx"),
    ("a.ts", {"language": "ts"}, "", "typescript"), ("a.tsx", {"language": "ts"}, "", "tsx"),
    ("noext", {"language": "go"}, "", "go"), ("a.h", {}, "", "c"), ("a.hpp", {}, "", "cpp"),
    ("tool", {}, "#!/usr/bin/env python3\n", "python"),
    ("tool", {}, "#!/usr/bin/node\n", "javascript"), (None, {}, "#! /usr/bin/python3.11\n",
                                                      "python"),
    ("notes.txt", {}, "", None), (None, {}, "", None), (7, {}, "", None),
])
def test_language_chosen(name, options, head, language):
    """The language from --language (the extension refining TypeScript to TSX), else the
    name's extension, else a shebang; else the text is cut as text (no language)."""
    text = head + "x = 1\n\nprint(x)\n"
    chunks = code_chunks(text, 100, name=name, **options)
    assert [chunk.language for chunk in chunks] == [language]
    assert chunks[0].text == text


def test_overlap_whole_lines():
    """With an overlap, each chunk also takes whole lines from the end of the one
    before, at most the overlap, and stays within the size."""
    text = SPLITTER * 3
    chunks = code_chunks(text, 120, overlap=40)
    check_cut(text, chunks, 120, len, [], overlap=40)
    assert any(before.end > after.start for before, after in zip(chunks, chunks[1:]))
    for before, after in zip(chunks, chunks[1:]):
        assert after.start == 0 or text[after.start - 1] == "\n"


@pytest.mark.parametrize(("unit", "size"), [("chars", 60), ("chars", 200), ("tokens", 20),
                                          ("tokens", 60)])
def test_embed_text_within_size(unit, size):
    """--embed-text: the path and the symbol path, then the text, within the size (the
    path takes at most half of it: its outer parts are dropped first)."""
    text = SPLITTER * 2
    chunks = code_chunks(text, size, unit, name="src/split.py", embed_text=True)
    assert "".join(chunk.text for chunk in chunks) == text
    for chunk in chunks:
        assert COUNTS[unit](chunk.embed_text) <= size
        assert chunk.embed_text.endswith(chunk.text)
        prefix = chunk.embed_text[:len(chunk.embed_text) - len(chunk.text)]
        parts = ["src/split.py", *chunk.symbols]
        whole = " > ".join(parts) + "\n\n"
        assert prefix in {"", *(" > ".join(parts[k:]) + "\n\n" for k in range(len(parts)))} \
            or prefix.endswith("…\n\n")
        if size == 200:
            assert prefix == whole


def test_source_that_does_not_parse():
    """Source with syntax errors still chunks (tree-sitter recovers): tiled, sized."""
    text = "def broken(:\n    return ((\n\nclass Fine:\n    x = 1\n" * 20 + "}}}\n"
    chunks = code_chunks(text, 150)
    check_cut(text, chunks, 150, len, [])


def test_long_leaf_cut_by_separators():
    """A leaf longer than the size (a long string) is cut by the recursive splitter with
    the language's separators, within the size; the chunks still tile."""
    text = "X = '''" + "word " * 400 + "'''\n\ndef f():\n    return X\n"
    chunks = code_chunks(text, 200)
    check_cut(text, chunks, 200, len, python_definitions(text))
    assert chunks[-1].text.startswith("'''\n\ndef f()") or "def f():" in chunks[-1].text


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(["a", " ", "\n", "é", "€", "𝄞", "\ud800", "x" * 700]),
                max_size=120))
def test_offsets_convert_as_encoding_does(parts):
    """Byte -> code point offsets (checkpoints, ASCII blocks converted by a shift) are
    what encoding each prefix gives, at every character boundary, lone surrogates
    included."""
    from chunkd.strategies.code import Offsets, _encoded

    text = "".join(parts)
    offsets = Offsets(text, _encoded(text))
    boundaries = [len(_encoded(text[:point])) for point in range(len(text) + 1)]
    assert [offsets.point(byte) for byte in boundaries] == list(range(len(text) + 1))
    assert offsets.points(boundaries) == list(range(len(text) + 1))
