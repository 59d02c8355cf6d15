"""The package's shape: layers that import downward only, no import circle, one class
per name, a short top level. Imports are read from the source (``ast``), every one of
them: at the top, under ``TYPE_CHECKING`` and inside functions, since a circle of types
or of lazy imports is still one a reader must hold in mind."""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "chunkd"

#: From the bottom up; a module may import its own layer's and those below. Within a
#: layer, packages import each other only where LATERAL says.
LAYERS = (
    ("chunkd.model",),
    ("chunkd.options",),
    ("chunkd.kernel", "chunkd.net", "chunkd.processes"),
    ("chunkd.inputs",),
    ("chunkd.units",),
    ("chunkd.embeddings",),
    # The LLM endpoint and contexts: its cache is the embeddings' store.
    ("chunkd.llm",),
    ("chunkd.strategies",),
    ("chunkd.settings",),
    ("chunkd.outputs", "chunkd.stores"),
    ("chunkd.pipeline",),
    # What ``--version`` reports, for every front end.
    ("chunkd.about",),
    # The front ends and the public API: they call the layers below, not each other.
    ("chunkd.service", "chunkd.web", "chunkd.evaluate", "chunkd.arrow", "chunkd.ray",
     "chunkd.langchain", "chunkd.llamaindex", "chunkd.haystack", "chunkd.integration"),
    # The command line runs every front end; the package's own names come last.
    ("chunkd.cli",),
    ("chunkd",),
)
#: Imports allowed within the front ends' layer: what they share by design.
LATERAL = {("chunkd.ray", "chunkd.arrow"), ("chunkd.llamaindex", "chunkd.integration"),
           ("chunkd.haystack", "chunkd.integration")}
TOP_LEVEL_MODULES = 12


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*"):
        if "_vendor" in path.parts or path.suffix not in (".py", ".pyx"):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts).removesuffix(".__init__")] = path
    return found


def source_of(path: Path) -> str:
    """Python source for ``ast``: a Cython module's imports (its ``cimport``\\ s too)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".pyx":
        return text
    lines = [line for line in text.splitlines() if re.match(r"(from|import) chunkd", line)]
    return "\n".join(re.sub(r" cimport .*", " import _", line) for line in lines)


def imports() -> dict[str, set[str]]:
    """Each module's chunkd modules, as imported anywhere in it."""
    known = modules()

    def resolve(name: str) -> str:
        while name not in known:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in known.items():
        for node in ast.walk(ast.parse(source_of(path))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                    node.module == "chunkd" or node.module.startswith("chunkd.")):
                names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known
                         else node.module for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names if alias.name.startswith("chunkd")]
            graph[module].update(resolve(name) for name in names)
        graph[module].discard(module)
    return graph


def layer_of(module: str) -> tuple[int, str]:
    placed = [(level, group) for level, groups in enumerate(LAYERS) for group in groups
              if module == group or module.startswith(group + ".")]
    assert placed, f"{module} is in no layer: add it to LAYERS"
    return max(placed, key=lambda place: len(place[1]))


def test_every_import_goes_down_the_layers():
    wrong = []
    for module, imported in sorted(imports().items()):
        level, group = layer_of(module)
        for other in sorted(imported):
            other_level, other_group = layer_of(other)
            if other_level > level or (other_level == level and other_group != group
                                       and (group, other_group) not in LATERAL):
                wrong.append(f"{module} ({group}) imports {other} ({other_group})")
    assert wrong == []


def test_no_import_circle():
    graph = imports()
    circles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in graph[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = set()
            while not component or module not in component:
                component.add(stack.pop())
            on_stack.difference_update(component)
            if len(component) > 1:
                circles.append(sorted(component))

    for module in list(graph):
        if module not in index:
            visit(module)
    assert circles == []


def test_the_layer_test_sees_a_circle_and_an_upward_import(monkeypatch):
    """The checks above fail on a package that has what they look for."""
    graph = imports()
    graph["chunkd.model.chunk"].add("chunkd.settings")
    monkeypatch.setattr(sys.modules[__name__], "imports", lambda: graph)
    with pytest.raises(AssertionError):
        test_every_import_goes_down_the_layers()
    with pytest.raises(AssertionError):
        test_no_import_circle()


def test_no_two_classes_share_a_name():
    where: dict[str, list[str]] = defaultdict(list)
    for module, path in modules().items():
        if path.suffix == ".py":
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(module)
    assert {name: found for name, found in where.items() if len(found) > 1} == {}


def test_the_top_level_is_short():
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_MODULES, top
