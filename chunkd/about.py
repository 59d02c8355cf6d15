"""What ``chunkd --version`` says: the version, the core in use and the optional parts
installed. Imported only when asked (``chunkd --version`` answers without loading the
filter), and by the commands' parsers for their own ``--version``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

#: The optional parts ``chunkd --version`` looks for, by what they serve: the names of
#: their distributions, as pip installs them (the extras in pyproject.toml).
OPTIONAL_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tokenizers", ("tiktoken", "tokenizers")),
    ("models", ("sentence-transformers", "torch")),
    ("code", ("tree-sitter", "tree-sitter-python", "tree-sitter-javascript",
              "tree-sitter-typescript", "tree-sitter-go", "tree-sitter-rust",
              "tree-sitter-java", "tree-sitter-c", "tree-sitter-cpp")),
    ("documents", ("pypdfium2", "selectolax", "python-docx", "tesserocr")),
    ("stores", ("psycopg", "lancedb")),
    ("tables", ("pyarrow", "ray")),
    ("integrations", ("langchain-text-splitters", "llama-index-core", "haystack-ai")),
    ("metrics", ("prometheus-client",)),
)


def version_report() -> str:
    """What ``chunkd --version`` says: the version on the first line (``chunkd X.Y.Z``,
    as scripts read it), then the core in use and the optional parts installed. The
    parts are looked up in the installed packages' metadata, never imported (a model
    library takes seconds to): a part listed is installed, not proven to load."""
    from importlib import metadata

    from chunkd.model.version import __version__

    def found(distribution: str) -> str | None:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            return None

    lines = [f"chunkd {__version__}", f"core: {core_in_use()}",
             f"python: {sys.implementation.name} {'.'.join(map(str, sys.version_info[:3]))}"]
    missing = []
    for group, distributions in OPTIONAL_PARTS:
        present = []
        for distribution in distributions:
            version = found(distribution)
            if version is None:
                missing.append(distribution)
            else:
                present.append(f"{distribution} {version}")
        lines.append(f"{group}: {', '.join(present) or 'none'}")
    if missing:
        lines.append(f"not installed: {', '.join(missing)}")
    return "\n".join(lines) + "\n"


def core_in_use() -> str:
    """``compiled`` or ``pure Python``, as chunkd.kernel.chosen picks, with why the twin runs,
    and the compiled modules, if any, that fall back to theirs: each is imported, as a
    run would, so that a module built but unloadable (a shared library missing) shows."""
    if os.environ.get("CHUNKD_PUREPYTHON") == "1":
        return "pure Python (CHUNKD_PUREPYTHON=1)"
    try:  # what chunkd.kernel.chosen imports to pick the compiled core, without its notice on stderr
        from chunkd.kernel import _core, _kernel
    except ImportError as error:
        return f"pure Python (the compiled core does not load: {error})"
    unloadable = []
    for name in ("_windows", "_code", "_kept", "_records", "_utf8"):
        try:
            importlib.import_module(f"chunkd.kernel.{name}")
        except ImportError:
            unloadable.append(f"chunkd.kernel.{name}")
    build = " (debug build)" if _core.DEBUG_BUILD else ""
    if unloadable:
        return f"compiled{build}; in Python: {', '.join(unloadable)}"
    return f"compiled{build}"


class ReportVersion(argparse.Action):
    """A parser's ``--version``: the report on stdout, then exit 0 (argparse's own
    version action would fold the report's lines into one paragraph)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS,
                 help: str = "the version, the core in use (compiled or pure Python) "
                             "and the optional parts installed") -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(version_report())
        parser.exit()
