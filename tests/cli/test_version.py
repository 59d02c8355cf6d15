"""``chunkd --version``: the version on its first line, then the core in use (compiled
or pure Python, and why) and the optional parts installed, found without importing
them, so that it answers at once."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import chunkd
from chunkd import about
from command import HANG, chunkd_command, run_chunkd

ROOT = Path(__file__).resolve().parent.parent.parent
#: Packages that take long to import; ``--version`` must load none of them.
HEAVY = ("torch", "sentence_transformers", "transformers", "pyarrow", "lancedb", "psycopg",
         "tree_sitter", "tokenizers", "tiktoken", "pypdfium2", "ray", "chunkd.cli.filter")
#: The children's environment: the compiled core unless a test asks for the twin (the
#: twin's tier runs this module with ``CHUNKD_PUREPYTHON=1`` set for every test).
CORE_UNFORCED = {name: value for name, value in os.environ.items()
                 if name != "CHUNKD_PUREPYTHON"}


def version(*args: str, env: dict[str, str] | None = None) -> list[str]:
    result = subprocess.run([chunkd_command(), *args], capture_output=True, timeout=HANG,
                            env={**CORE_UNFORCED, **(env or {})})
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    return result.stdout.decode().splitlines()


def test_the_first_line_is_the_version_and_the_compiled_core_is_named():
    lines = version("--version")
    assert lines[0] == f"chunkd {chunkd.__version__}"
    assert lines[1] == "core: compiled"


def test_the_twin_is_named_where_it_runs():
    lines = version("--version", env={"CHUNKD_PUREPYTHON": "1"})
    assert lines[:2] == [f"chunkd {chunkd.__version__}", "core: pure Python (CHUNKD_PUREPYTHON=1)"]


def test_the_optional_parts_installed_are_named_with_their_versions():
    groups = dict(line.split(": ", 1) for line in version("--version")[2:])
    assert f"tiktoken {metadata.version('tiktoken')}" in groups["tokenizers"]
    assert f"tokenizers {metadata.version('tokenizers')}" in groups["tokenizers"]
    assert f"sentence-transformers {metadata.version('sentence-transformers')}" in groups["models"]
    assert f"tree-sitter {metadata.version('tree-sitter')}" in groups["code"]
    assert f"psycopg {metadata.version('psycopg')}" in groups["stores"]
    assert f"lancedb {metadata.version('lancedb')}" in groups["stores"]
    assert f"pyarrow {metadata.version('pyarrow')}" in groups["tables"]
    assert f"pypdfium2 {metadata.version('pypdfium2')}" in groups["documents"]


def test_a_part_not_installed_is_said_so(monkeypatch):
    monkeypatch.setattr(about, "OPTIONAL_PARTS", (("stores", ("psycopg", "no-such-store")),
                                                  ("models", ("no-such-model",))))
    lines = about.version_report().splitlines()
    assert lines[-3:] == [f"stores: psycopg {metadata.version('psycopg')}", "models: none",
                          "not installed: no-such-store, no-such-model"]


def test_every_parser_gives_the_same_report():
    """The fast path (``chunkd --version`` alone) and the parsers' option (the filter's,
    after other options, an abbreviation of it; eval's) say the same."""
    report = version("--version")
    assert len(report) > 3  # several lines, not argparse's one folded paragraph
    assert version("--chars", "100", "--version") == report
    assert version("--vers") == report
    assert version("eval", "--version") == report


def test_it_imports_no_heavy_package():
    """What keeps it fast (some 70 ms, most of it Python's own start): the parts are
    looked up in the installed metadata, and the filter is not loaded."""
    probe = ("import sys; from chunkd.cli import main; main(['--version']); "
             f"print(sorted(name for name in {HEAVY!r} if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=HANG)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


#: Run before chunkd in the child: the named compiled modules fail to import, as a
#: module built but missing a shared library would.
BLOCK = """
import sys
from importlib.abc import MetaPathFinder
class Block(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in {blocked!r}:
            raise ImportError(f"{{name}}: libmissing.so: cannot open shared object file")
sys.meta_path.insert(0, Block())
from chunkd.cli import main
sys.exit(main(["--version"]))
"""


def blocked_core(*modules: str) -> str:
    result = subprocess.run([sys.executable, "-c", BLOCK.format(blocked=set(modules))],
                            capture_output=True, text=True, timeout=HANG, env=CORE_UNFORCED)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout.splitlines()[1]


def test_a_compiled_core_that_does_not_load_is_said_so():
    assert blocked_core("chunkd.kernel._kernel") == (
        "core: pure Python (the compiled core does not load: chunkd.kernel._kernel: libmissing.so: "
        "cannot open shared object file)")


def test_a_compiled_module_that_does_not_load_is_named():
    assert blocked_core("chunkd.kernel._code", "chunkd.kernel._utf8") == (
        "core: compiled; in Python: chunkd.kernel._code, chunkd.kernel._utf8")


def test_the_code_parts_are_the_grammars_chunkd_reads():
    from chunkd.strategies.code import GRAMMARS

    [code] = [parts for group, parts in about.OPTIONAL_PARTS if group == "code"]
    with open(ROOT / "pyproject.toml", "rb") as stream:
        extra = tomllib.load(stream)["project"]["optional-dependencies"]["code"]
    assert {grammar.package for grammar in GRAMMARS.values()} | {"tree-sitter"} == set(code)
    assert {requirement.split(">")[0].split("<")[0].strip() for requirement in extra} == set(code)


def test_help_describes_the_report():
    assert b"the core in use" in run_chunkd("--help").stdout
