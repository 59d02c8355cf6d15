"""The package's shape: no module imports, at run time, a module that imports it back.

Every import statement of every module is read (lazy imports inside functions too);
imports under ``if TYPE_CHECKING:`` are left out, as they never run, except where a
layer must not even name the one above it for types."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "chunkd"


def module_names() -> dict[str, pathlib.Path]:
    names = {}
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyx")]:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imported(name: str, path: pathlib.Path, modules: dict[str, pathlib.Path],
             typing: bool = False) -> set[str]:
    """The package's modules that ``name`` imports when it runs (``typing``: and those
    it imports for types only)."""
    found: set[str] = set()
    if path.suffix == ".pyx":  # Cython: its Python-level imports are whole lines
        for line in path.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if len(words) > 1 and words[0] in ("from", "import") and "cimport" not in words:
                found.add(words[1])
        return found & set(modules)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (not typing and isinstance(node, ast.If)
                and "TYPE_CHECKING" in ast.unparse(node.test)):
            node.body = []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = {f"{base}.{alias.name}" for alias in node.names}
            found |= names
            if not names <= set(modules):  # a name from the module, not a submodule
                found.add(base)
    return (found & set(modules)) - {name}


def test_no_import_cycles():
    modules = module_names()
    graph = {name: imported(name, path, modules) for name, path in modules.items()}
    assert "chunkd.settings" in graph and graph["chunkd.cli.filter"], "the scan reads the package"
    cycles = []

    def visit(name: str, trail: list[str]) -> None:
        for target in sorted(graph[name]):
            if target in trail:
                cycles.append(trail[trail.index(target):] + [target])
            elif target not in done:
                visit(target, trail + [target])
        done.add(name)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name])
    assert cycles == []


def test_the_strategies_sit_below_the_settings():
    """``chunkd.settings`` imports the strategies (their registry, their options); no
    strategy imports ``chunkd.settings``, not even for types (what a strategy reads
    of its settings is ``chunkd.strategies.base``'s protocol)."""
    modules = module_names()
    strategies = {name for name in modules if name.split(".")[:2] == ["chunkd", "strategies"]}
    assert len(strategies) > 5, "the scan reads the strategies"
    upward = {name for name in strategies
              if "chunkd.settings" in imported(name, modules[name], modules, typing=True)}
    assert upward == set()
    assert "chunkd.strategies" in imported("chunkd.settings", modules["chunkd.settings"], modules)
