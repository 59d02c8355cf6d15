"""LangChain's own unit tests of its character splitters, run on chunkd's drop-in.

The tests come from the source distribution of the installed langchain-text-splitters
on PyPI, downloaded into a temporary folder (never copied into the project); every
test function that uses RecursiveCharacterTextSplitter or CharacterTextSplitter runs
in a pytest subprocess where chunkd's classes replace LangChain's at import
(``langchain_substitution.py``). All must pass: none may fail, error or skip."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import pathlib
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ElementTree

import pytest

pytestmark = pytest.mark.network

SUITE = "tests/unit_tests/test_text_splitters.py"
CLASSES = {"RecursiveCharacterTextSplitter", "CharacterTextSplitter"}
HERE = pathlib.Path(__file__).resolve().parent.parent


def download_suite(folder: pathlib.Path) -> pathlib.Path:
    """LangChain's test module (and its conftest), from the sdist of the installed version."""
    version = importlib.metadata.version("langchain-text-splitters")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--no-binary", ":all:", f"langchain-text-splitters=={version}",
                    "--dest", str(folder)], check=True, timeout=600)
    (archive,) = folder.glob("langchain_text_splitters-*.tar.gz")
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            for wanted in (SUITE, "tests/unit_tests/conftest.py"):
                if member.name.endswith("/" + wanted):  # read, not extracted: no paths trusted
                    (folder / pathlib.Path(wanted).name).write_bytes(
                        tar.extractfile(member).read())
    return folder / pathlib.Path(SUITE).name


def functions_using_the_classes(source: str) -> list[str]:
    """The test functions that name either class, in their body, their decorators
    (parametrized splitters) or a module-level helper they call."""
    functions = {node.name: node for node in ast.parse(source).body
                 if isinstance(node, ast.FunctionDef)}

    def names(node: ast.AST) -> set[str]:
        return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
                if isinstance(n, (ast.Name, ast.Attribute))}

    using = {name for name, node in functions.items() if names(node) & CLASSES}
    return [name for name, node in functions.items() if name.startswith("test")
            and (name in using or names(node) & (using - {name}))]


def test_langchain_unit_tests_pass_on_the_drop_in(tmp_path):
    module = download_suite(tmp_path)
    selected = functions_using_the_classes(module.read_text(encoding="utf-8"))
    assert len(selected) >= 50, f"only {len(selected)} tests found: {selected}"
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not LangChain's (pytest-asyncio)
    report = tmp_path / "report.xml"
    env = dict(os.environ, PYTHONPATH=str(HERE))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "langchain_substitution",
         "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"), "--rootdir",
         str(tmp_path), f"--junitxml={report}", *[f"{module.name}::{name}" for name in selected]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    suite = ElementTree.parse(report).getroot().find("testsuite")
    counts = {key: int(suite.get(key)) for key in ("tests", "failures", "errors", "skipped")}
    assert result.returncode == 0 and counts["failures"] == counts["errors"] == 0, \
        result.stdout[-4000:] + result.stderr[-2000:]
    assert counts["skipped"] == 0, result.stdout[-4000:]
    ran = {case.get("name").split("[")[0] for case in suite.iter("testcase")}
    assert ran == set(selected)
    print(f"LangChain's suite on chunkd: {len(selected)} test functions, "
          f"{counts['tests']} tests, all passed")
