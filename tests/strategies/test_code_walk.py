"""The code strategy's compiled walk (``chunkd.kernel._code``) against its twin and oracle, the
Python ``CodeDocument`` of chunkd.strategies.code: every field of every record equal, on
the standard library, npm's JavaScript, every grammar's sources and hypothesis-made
code; a grammar of an ABI version the vendored runtime does not read falls back to the
Python path. The walk is taken from ``chunkd.kernel._code`` itself, so that these run on
either core (``CHUNKD_PUREPYTHON=1`` makes the product use the twin alone)."""

from __future__ import annotations

import ctypes
import functools
import importlib
import random
import struct
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from chunkd.kernel import _code
from chunkd.strategies import code
from code_checks import stdlib_sources
from test_code import SOURCES, code_chunks, python_blocks

NPM = Path("/usr/lib/node_modules/npm")
#: A file name for each grammar (Python's and the languages test_code writes).
NAMES = {"python": "x.py", **{grammar: name for grammar, (_, name) in SOURCES.items()}}
SAMPLES = Path(__file__).parent.parent / "languages"


def language_of(grammar: code.Grammar) -> object:
    return getattr(importlib.import_module(grammar.module), grammar.function)()


@functools.lru_cache(maxsize=None)
def walk_of(grammar: code.Grammar) -> _code.CodeWalk:
    walk = code.compiled_walk(_code.CodeWalk, grammar, language_of(grammar))
    assert walk is not None, grammar.name
    return walk


def both(text: str, size: int, name: str, **options) -> tuple[list, list]:
    """The records of the compiled walk and of the Python path, the compiled walk
    having run (asked for a grammar whose document is not blank)."""
    walked = []

    def compiled(grammar: code.Grammar) -> _code.CodeWalk:
        walked.append(grammar)
        return walk_of(grammar)

    with mock.patch.object(code, "code_walk", compiled):
        fast = code_chunks(text, size, name=name, **options)
    with mock.patch.object(code, "code_walk", lambda grammar: None):
        twin = code_chunks(text, size, name=name, **options)
    assert walked or not text.strip(), "the compiled walk did not run"
    return fast, twin


def check_same(text: str, sizes, name: str, **options) -> int:
    """Equal records at each size; returns how many records were compared."""
    compared = 0
    for size in sizes:
        fast, twin = both(text, size, name, **options)
        assert fast == twin, (name, size)
        compared += len(fast)
    return compared


def test_stdlib_modules():
    """Every top-level module of the standard library, at three sizes, one with
    overlap."""
    compared = 0
    for path in stdlib_sources():
        text = path.read_text(encoding="utf-8")
        compared += check_same(text, (1000, 300), path.name)
        compared += check_same(text, (400,), path.name, overlap=100)
    assert compared > 20000


def test_javascript_files():
    """chunkd's own page's JavaScript at sizes from a line to many functions, and every
    JavaScript file of npm's own package where the machine has npm (a large corpus of
    real code; the page's is checked either way)."""
    page = Path(code.__file__).parents[1] / "web" / "app.js"
    compared = check_same(page.read_text(encoding="utf-8"), (1000, 300, 100, 40), "app.js")
    assert compared > 1000
    for path in sorted(NPM.rglob("*.js")) if NPM.is_dir() else []:
        if path.is_file():
            compared += check_same(path.read_text(encoding="utf-8", errors="replace"),
                                   (1000,), path.name)


@pytest.mark.parametrize("grammar", sorted(NAMES))
def test_every_grammar(grammar):
    """Each grammar on the sources test_code writes (Python's: chunkd's own package)
    and on the sample of its language in tests/languages, at sizes from a line to many
    definitions."""
    name = NAMES[grammar]
    if grammar == "python":
        texts = [path.read_text(encoding="utf-8")
                 for path in sorted(Path(code.__file__).parent.parent.rglob("*.py"))]
    else:
        rng = random.Random(grammar)
        texts = [SOURCES[grammar][0](rng) for _ in range(6)]
    extension = "." + name.rsplit(".", 1)[1]
    texts += [path.read_text(encoding="utf-8") for path in sorted(SAMPLES.iterdir())
              if path.suffix.lower() == extension]
    compared = sum(check_same(text, (40, 120, 400, 1000), name) for text in texts)
    assert compared > 100


def test_large_and_deep():
    """A generated table (a node of more children than a batch), a file of more
    top-level statements than a batch, more leading comments glued to a function (one
    piece: its level is not cut in batches), nests hundreds and thousands deep, keywords in strings
    past the tree's nodes (the outline found by visiting every node), text that does
    not parse, a long leaf, and white space that is not ASCII."""
    texts = {
        "table.py": "TABLE = [\n" + "".join(f"    {n}, 'é{n}',\n" for n in range(2500)) + "]\n",
        "flat.py": "".join(f"x{n} = {n}  # ü\n" for n in range(5000)),
        "deep.py": "".join(" " * depth + f"if x{depth}:\n" for depth in range(400))
        + " " * 400 + "pass\n",
        "deep.js": "function f() {\n" + "{" * 3000 + "x();" + "}" * 3000 + "\n}\n",
        "keywords.py": '"""' + "class def " * 5000 + '"""\n\n'
        "class A:\n    def f(self):\n        return 'def class'\n",
        "broken.py": "def broken(:\n    return ((\n\nclass Fine:\n    x = 1\n" * 20 + "}}}\n",
        "leaf.py": "X = '''" + "wörd " * 2000 + "'''\n\ndef f():\n    return X\n",
        "spaces.py": "def f():\u3000\n\u00a0 x = 1\x1c\n\u2028\n\tclass A:\x0c\n  pass\n" * 50,
        "empty.go": "package main\n",
        "comments.js": "// ü\n" * 5000 + "function f() {\n  return 1;\n}\n",
    }
    for name, text in texts.items():
        assert check_same(text, (1, 7, 80, 1000), name) > 0, name


#: Lines that may be anything: comments, long and multi-byte strings, what does not
#: parse, white space Python's str.isspace calls white space (beyond ASCII's).
_ODD_LINES = st.sampled_from([
    "# comment ✓", "s = '" + "ünïcödé 😀 " * 30 + "'", "x = ((", "def (:", "}", "'''",
    "\u3000", "\x1c", "\u2028 y = 2", "z = 'a\u00a0b'", "", "@decorator", "class:",
    "return [\n1,\n2]", "    ", "\t# tab", "q = 1 \\",
])


@st.composite
def odd_python(draw) -> str:
    lines = draw(python_blocks())
    for _ in range(draw(st.integers(0, 8))):
        lines.insert(draw(st.integers(0, len(lines))),
                     draw(st.sampled_from(["", "    ", "        "])) + draw(_ODD_LINES))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join(lines) + draw(st.sampled_from(["", newline]))


@settings(max_examples=examples(150), deadline=None)
@given(odd_python(), st.sampled_from([1, 3, 10, 30, 80, 200, 1000, 100000]))
def test_hypothesis_python(text, size):
    """Hypothesis-made Python: nesting, comments, decorators, long and multi-byte
    strings, syntax errors, odd white space, sizes from one code point to more than
    the text."""
    check_same(text, (size,), "x.py")


@st.composite
def braces(draw, depth: int = 0) -> list[str]:
    """Lines of a block of a language with braces: statements, comments, long strings,
    what does not parse, and functions and classes nested."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["lines", "function", "class"] if depth < 4 else ["lines"]))
        if kind == "lines":
            lines += [draw(st.sampled_from([
                "let x = 1;", "call('ünï ✓ 😀', b);", "// note", "/* block\n comment */",
                "if (a) { b(); }", "s = \"" + "long ✓ " * 40 + "\";", "x = ((;", "}", "{",
                "int f(int a);", "struct S { int a; };", "\u3000", ""]))
                for _ in range(draw(st.integers(1, 5)))]
            continue
        if draw(st.booleans()):
            lines.append("/** Leading comment. */")
        body = draw(braces(depth + 1))
        name = draw(st.sampled_from(["f", "g", "ü", "h2"]))
        if kind == "function":
            header = draw(st.sampled_from([f"function {name}(a, b) {{", f"int {name}(int a) {{",
                                           f"func {name}(a int) {{", f"fn {name}(a: i32) {{"]))
            lines += [header] + ["  " + line for line in body] + ["}"]
        else:
            lines += [f"class {name} {{", "  m(a) {"] + ["    " + line for line in body] \
                + ["  }", "}"]
    return lines


@settings(max_examples=examples(120), deadline=None)
@given(braces(), st.sampled_from(["x.js", "x.ts", "x.tsx", "x.go", "x.rs", "X.java", "x.c",
                                  "x.cpp"]),
       st.sampled_from([1, 5, 20, 60, 150, 400, 1000]), st.sampled_from(["\n", "\r\n"]))
def test_hypothesis_braces(lines, name, size, newline):
    """Hypothesis-made code in every grammar with braces (each parses what it can of
    the same lines), sizes from one code point up."""
    check_same(newline.join(lines) + newline, (size,), name)


# --- a grammar the runtime cannot read ----------------------------------------------------

def fake_grammar(version: int) -> tuple[object, ctypes.Array]:
    """A capsule named as grammar packages name theirs, holding a language whose ABI
    version (its first field) is ``version``; and the memory it points at, to keep."""
    memory = ctypes.create_string_buffer(4096)
    struct.pack_into("=I", memory, 0, version)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    return new(ctypes.addressof(memory), FAKE_NAME, None), memory


FAKE_NAME = b"tree_sitter.Language"   # kept alive: the capsule holds its address


@pytest.mark.parametrize("version", [_code.ABI_VERSIONS.start - 1, _code.ABI_VERSIONS.stop,
                                     1000])
def test_other_abi_version_falls_back(version, monkeypatch):
    """A grammar package of an ABI version outside the runtime's range: no walk (the
    real grammar has one), and the document is cut by the Python path, as the twin
    cuts it."""
    python = code.GRAMMARS["python"]
    assert code.compiled_walk(_code.CodeWalk, python, language_of(python)) is not None
    capsule, memory = fake_grammar(version)
    assert code.compiled_walk(_code.CodeWalk, python, capsule) is None
    with pytest.raises(ValueError, match=f"ABI version {version}"):
        _code.CodeWalk(capsule, bytes(1 << 16), (), (), 1, 1)

    module = importlib.import_module(python.module)
    monkeypatch.setattr(module, python.function, lambda: capsule)
    monkeypatch.setattr(code.chosen, "CodeWalk", _code.CodeWalk)
    code.code_walk.cache_clear()
    try:
        assert code.code_walk(python) is None
        text = Path(code.__file__).read_text(encoding="utf-8")
        fell_back = code_chunks(text, 500)
        with mock.patch.object(code, "code_walk", lambda grammar: None):
            assert fell_back == code_chunks(text, 500)
        assert len(fell_back) > 20
    finally:
        code.code_walk.cache_clear()


def test_not_a_capsule():
    with pytest.raises(ValueError, match="capsule"):
        _code.CodeWalk(object(), bytes(1 << 16), (), (), 1, 1)
