"""Oracles for the code strategy that chunkd did not write: Python's ``ast`` (every
definition's lines, decorators included) and tree-sitter's own node ranges for the
other languages, with the properties every cut must have."""

from __future__ import annotations

import ast
import bisect
import importlib
import sysconfig
from collections.abc import Callable
from pathlib import Path

import tree_sitter

from chunkd import Chunk

#: Definitions by tree-sitter node type, per grammar, written from the grammars'
#: node types (not from chunkd's table).
TREE_SITTER_DEFINITIONS = {
    "javascript": {"function_declaration", "class_declaration", "method_definition"},
    "typescript": {"function_declaration", "class_declaration", "method_definition",
                   "interface_declaration", "enum_declaration"},
    "tsx": {"function_declaration", "class_declaration", "method_definition"},
    "go": {"function_declaration", "method_declaration", "type_declaration"},
    "rust": {"function_item", "struct_item", "enum_item", "impl_item", "trait_item",
             "mod_item"},
    "java": {"class_declaration", "method_declaration", "constructor_declaration",
             "interface_declaration"},
    "c": {"function_definition"},
    "cpp": {"function_definition", "class_specifier", "namespace_definition"},
}
#: Grammar -> (module, function) of its package.
TREE_SITTER_LANGUAGES = {
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"), "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"), "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
}


def stdlib_sources() -> list[Path]:
    """The standard library's own Python files (top level), sorted."""
    paths = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    assert len(paths) > 100, "the standard library's sources are not installed"
    return paths


def _line_starts(text: str) -> list[int]:
    starts = [0]
    at = text.find("\n")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


def python_definitions(text: str) -> list[tuple[int, int]]:
    """Every function and class in ``text`` (at any depth) as code point offsets: from
    the start of its first line (its first decorator's) to its end, as ``ast`` says."""
    starts = _line_starts(text)

    def offset(line: int, column: int) -> int:  # ast's columns are UTF-8 bytes
        start = starts[line - 1]
        end = starts[line] if line < len(starts) else len(text)
        return start + len(text[start:end].encode()[:column].decode())

    spans = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            assert node.end_lineno is not None and node.end_col_offset is not None
            spans.append((starts[first - 1], offset(node.end_lineno, node.end_col_offset)))
    return spans


def python_symbols(text: str) -> list[tuple[int, int, str]]:
    """Every function and class as (start, end, symbol): from its keyword (``def``,
    ``async``, ``class``) to its end, and how it reads up to its name."""
    starts = _line_starts(text)

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + len(text[starts[line - 1]:].encode()[:column].decode())

    symbols = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            keyword = {ast.FunctionDef: "def", ast.AsyncFunctionDef: "async def",
                       ast.ClassDef: "class"}[type(node)]
            assert node.end_lineno is not None and node.end_col_offset is not None
            symbols.append((offset(node.lineno, node.col_offset),
                            offset(node.end_lineno, node.end_col_offset),
                            f"{keyword} {node.name}"))
    return symbols


def check_python_symbols(text: str, chunks: list[Chunk]) -> None:
    """Each chunk's symbols are the functions and classes that ``ast`` says enclose its
    first code point that is not white space (strictly after their keyword), outermost
    first."""
    symbols = sorted(python_symbols(text))
    for chunk in chunks:
        first = chunk.start + len(chunk.text) - len(chunk.text.lstrip())
        assert chunk.symbols == tuple(symbol for start, end, symbol in symbols
                                      if start < first < end), chunk


def tree_sitter_definitions(text: str, grammar: str) -> list[tuple[int, int]]:
    """The definitions tree-sitter finds in ``text`` (``TREE_SITTER_DEFINITIONS``), from
    the start of their first line to their end, as code point offsets."""
    module, function = TREE_SITTER_LANGUAGES[grammar]
    language = tree_sitter.Language(getattr(importlib.import_module(module), function)())
    data = text.encode()
    root = tree_sitter.Parser(language).parse(data).root_node
    spans, pending = [], [root]
    while pending:
        node = pending.pop()
        pending += node.children
        if node.type in TREE_SITTER_DEFINITIONS[grammar]:
            start = len(data[:node.start_byte].decode())
            spans.append((text.rfind("\n", 0, start) + 1, len(data[:node.end_byte].decode())))
    return spans


def python_defines(text: str) -> list[tuple[int, str]]:
    """Every function and class as (where its keyword starts, its qualified symbol:
    the symbols of the definitions enclosing it, then its own, joined by " > ")."""
    starts = _line_starts(text)

    def offset(line: int, column: int) -> int:
        return starts[line - 1] + len(text[starts[line - 1]:].encode()[:column].decode())

    found = []
    pending: list[tuple[ast.AST, str]] = [(ast.parse(text), "")]
    while pending:
        node, path = pending.pop()
        for child in ast.iter_child_nodes(node):
            inner = path
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                keyword = {ast.FunctionDef: "def", ast.AsyncFunctionDef: "async def",
                           ast.ClassDef: "class"}[type(child)]
                inner = f"{path} > {keyword} {child.name}" if path else f"{keyword} {child.name}"
                found.append((offset(child.lineno, child.col_offset), inner))
            pending.append((child, inner))
    return sorted(found)


def check_python_defines(text: str, chunks: list[Chunk]) -> None:
    """Each chunk's ``defines`` are the definitions ``ast`` finds whose keyword is in
    the chunk, in order, qualified."""
    defines = python_defines(text)
    for chunk in chunks:
        assert chunk.defines == tuple(name for at, name in defines
                                      if chunk.start <= at < chunk.end), chunk


def python_signatures(text: str) -> list[tuple[int, int]]:
    """Every function's and class's signature as ``ast`` gives it: from the start of
    its first line (its first decorator's) to the start of its body's first
    statement's line (a docstring is body)."""
    starts = _line_starts(text)
    spans = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            body = node.body[0].lineno
            if body > node.lineno:   # a body on the signature's line has none alone
                spans.append((starts[first - 1], starts[body - 1]))
    return spans


def signatures_alone(text: str, chunks: list[Chunk], size: int,
                     count: Callable[[str], int]) -> int:
    """How many chunks hold nothing but a signature (and comments and white space
    around it: their code lies within one signature of ``python_signatures``) though
    they could have held the first line of its body too."""
    spans = sorted(python_signatures(text))
    alone = 0
    for chunk in chunks:
        code = [index for index, line in zip(
            _line_starts(chunk.text), chunk.text.splitlines(keepends=True))
            if line.strip() and not line.lstrip().startswith("#")]
        if code and code[0] == 0 and "#" in text[text.rfind("\n", 0, chunk.start) + 1:chunk.start]:
            code.pop(0)   # the rest of a comment begun in the chunk before
        if not code:
            continue
        first = chunk.start + code[0] + (len(chunk.text[code[0]:]) -
                                         len(chunk.text[code[0]:].lstrip()))
        last = chunk.start + len(chunk.text.rstrip()) - 1
        at = bisect.bisect_right(spans, (first, len(text))) - 1
        if any(start <= first and last < end and count(
                text[chunk.start:text.find("\n", end) + 1 or len(text)]) <= size
               for start, end in spans[max(at - 50, 0):at + 1]):
            alone += 1
    return alone


def check_cut(text: str, chunks: list[Chunk], size: int, count: Callable[[str], int],
              definitions: list[tuple[int, int]], overlap: int = 0) -> int:
    """The properties of a cut: each chunk is its slice of the document; the chunks
    tile it (with an overlap, each starts at or after the start of the one before and
    no later than its end); none is longer than the size; every definition that fits
    lies wholly in one chunk, unless the signature of a definition around it, over
    the size, begins the chunk where it starts and they do not fit together (a
    signature is never a chunk of its own). Returns how many definitions fit."""
    assert chunks or not text.strip()
    for index, chunk in enumerate(chunks):
        assert chunk.index == index
        assert text[chunk.start:chunk.end] == chunk.text
        assert count(chunk.text) <= size, (chunk.start, chunk.end, count(chunk.text))
        assert chunk.length == count(chunk.text)
    if chunks:
        assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for before, after in zip(chunks, chunks[1:]):
        if overlap:
            assert before.start < after.start <= before.end < after.end
            assert count(text[after.start:before.end]) <= overlap
        else:
            assert after.start == before.end
    starts = [chunk.start for chunk in chunks]
    fitting = 0
    for start, end in definitions:
        if count(text[start:end]) > size:
            continue
        fitting += 1
        at = bisect.bisect_right(starts, start) - 1
        holders = [chunk for chunk in chunks[max(at - 2, 0):at + 1]
                   if chunk.start <= start and end <= chunk.end]
        first = chunks[at]
        assert holders or count(text[first.start:end]) > size and any(
            outer_start < start and end <= outer_end and first.start <= outer_start
            and count(text[outer_start:outer_end]) > size
            for outer_start, outer_end in definitions), f"the definition at {start}..{end} fits but is split: " \
                        f"{text[start:end][:80]!r}"
    return fitting
