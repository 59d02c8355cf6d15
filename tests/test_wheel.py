"""The release path (docs/developers.md, "Wheels"): ``python -m build`` makes a source
distribution and, from it, a wheel; ``auditwheel repair`` makes the wheel a manylinux
one; installed in a fresh virtual environment whose PATH holds no compiler, its
``chunkd`` runs the compiled core and gives the records the checkout's chunkd gives.

The build compiles the kernel once for the module (about a minute on 2 cores; it runs
with this environment's setuptools and Cython, ``--no-isolation``); the fresh
environment's pip fetches chunkd's dependencies as a user's ``pip install`` does: hence
``network``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from command import chunkd_command

# One worker runs the module's tests one after another: its build, a module fixture,
# is made once (tests of a module spread over workers would each build it again).
pytestmark = [pytest.mark.network, pytest.mark.xdist_group("wheel")]

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = "examples/sample.md"


def run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(arg) for arg in args], capture_output=True, text=True,
                            timeout=600, **kwargs)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """The source distribution, the wheel built from it and the repaired wheel, from a
    copy of the working tree's files as git sees them (tracked, and new ones it does
    not ignore: no build output of the checkout)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    names = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                cwd=ROOT).stdout.split("\0")
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    build = run(sys.executable, "-m", "build", "--no-isolation", "--outdir", work / "dist",
                source)
    [sdist] = (work / "dist").glob("chunkd-*.tar.gz")
    [wheel] = (work / "dist").glob("chunkd-*.whl")
    run(sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", work / "repaired", wheel,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    [repaired] = (work / "repaired").glob("chunkd-*.whl")
    return {"work": work, "sdist": sdist, "wheel": wheel, "repaired": repaired,
            "log": build.stdout + build.stderr}


@pytest.fixture(scope="module")
def installed(built) -> Path:
    """A fresh virtual environment with the repaired wheel installed: its bin folder."""
    venv = built["work"] / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", built["repaired"])
    return venv / "bin"


def without_compiler(folder: Path, bin_folder: Path) -> dict[str, str]:
    """An environment whose PATH has only a folder holding ``python``, and CC pointing
    nowhere: no C compiler can be found."""
    folder.mkdir(exist_ok=True)
    (folder / "python").symlink_to(bin_folder / "python")
    env = {"PATH": str(folder), "CC": "/nonexistent", "HOME": str(folder),
           "LANG": "C.UTF-8"}
    for compiler in ("cc", "gcc", "clang", "c99"):
        assert shutil.which(compiler, path=env["PATH"]) is None
    return env


def test_the_build_warns_of_nothing_in_the_packaging(built):
    """setuptools' notices of a configuration it will stop accepting (a license table,
    a license file missing) and of a MANIFEST.in line matching nothing."""
    for notice in ("deprecated", "did not match any files", "no files found matching"):
        assert notice not in built["log"]


def test_the_repaired_wheel_is_manylinux(built):
    """auditwheel gives the lowest tag the symbols allow (manylinux_2_17 from this
    Debian 12 machine: the code uses no newer glibc symbol)."""
    platform = built["repaired"].name.removesuffix(".whl").split("-")[-1]
    assert all(tag.startswith("manylinux") for tag in platform.split("."))
    assert "linux_x86_64" not in platform.split(".")
    shown = run(sys.executable, "-m", "auditwheel", "show", built["repaired"]).stdout
    assert "manylinux" in shown


def test_the_installed_wheel_runs_the_compiled_core_without_a_compiler(built, installed):
    env = without_compiler(built["work"] / "path", installed)
    chunkd = installed / "chunkd"
    report = run(chunkd, "--version", env=env).stdout.splitlines()
    assert report[1] == "core: compiled"
    # Run away from the checkout, whose chunkd folder a current directory would put
    # first on Python's path.
    away = built["work"] / "away"
    (away / "examples").mkdir(parents=True)
    shutil.copy(ROOT / SAMPLE, away / SAMPLE)
    ours = run(chunkd, "--tokens", "120", SAMPLE, cwd=away, env=env)
    checkout = run(chunkd_command(), "--tokens", "120", SAMPLE, cwd=away)
    assert ours.stdout and ours.stdout == checkout.stdout
    assert ours.stderr == ""
    where = run(installed / "python", "-c", "import chunkd.kernel._kernel as k; print(k.__file__)",
                cwd=away, env=env).stdout
    assert where.startswith(str(installed.parent / "lib"))


def test_the_wheel_holds_the_compiled_modules_and_the_licenses(built):
    names = set(zipfile.ZipFile(built["repaired"]).namelist())
    for module in ("_core", "_kernel", "_windows", "_kept", "_records", "_utf8", "_code"):
        assert [name for name in names if name.startswith(f"chunkd/kernel/{module}.cpython-")]
    licenses = "chunkd-0.4.0.dist-info/licenses/"
    assert {f"{licenses}LICENSE", f"{licenses}chunkd/kernel/_vendor/tree_sitter/LICENSE",
            f"{licenses}chunkd/kernel/_vendor/tree_sitter/src/unicode/LICENSE"} <= names
    # The vendored C sources are the source distribution's alone.
    assert not [name for name in names if name.endswith((".c", ".h"))]


def test_the_metadata_is_complete_for_an_index(built):
    with zipfile.ZipFile(built["repaired"]) as wheel:
        text = wheel.read("chunkd-0.4.0.dist-info/METADATA").decode()
    fields = Parser().parsestr(text)
    assert fields["License-Expression"] == "MIT AND Unicode-DFS-2016"
    assert fields["Requires-Python"] == ">=3.10"
    classifiers = fields.get_all("Classifier")
    assert "Programming Language :: Python :: 3.13" in classifiers
    assert "Operating System :: POSIX :: Linux" in classifiers
    extras = set(fields.get_all("Provides-Extra"))
    assert {"arrow", "documents", "code", "pgvector", "lancedb", "semantic", "test"} <= extras


def test_the_source_distribution_holds_what_the_build_needs(built):
    with tarfile.open(built["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"setup.py", "pyproject.toml", "MANIFEST.in", "LICENSE", "README.md", SAMPLE,
            "chunkd/kernel/_core.pxd", "chunkd/kernel/_kernel.pyx", "chunkd/kernel/pretoken_classes.py",
            "chunkd/o200k_base.ranks.zlib", "chunkd/cl100k_base.ranks.zlib",
            "chunkd/kernel/_vendor/tree_sitter/src/lib.c",
            "chunkd/kernel/_vendor/tree_sitter/include/tree_sitter/api.h",
            "chunkd/kernel/_vendor/tree_sitter/src/unicode/LICENSE"} <= names
    # The wheel was built from it: nothing the build needs is missing. The tests are
    # not in it (they run from a checkout, beside the shared corpus).
    assert not [name for name in names if name.startswith("tests/")]
