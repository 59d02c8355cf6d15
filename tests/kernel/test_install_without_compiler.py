"""chunkd installs where its compiled modules cannot be built: a wheel built with the C
compiler and linker disabled (``CC`` and ``LDSHARED`` set to ``/bin/false``) holds no
compiled module, says so in one line while it builds, and installs into a fresh
virtual environment whose ``chunkd`` runs the pure-Python twin and gives the records
the compiled chunkd gives.

pip fetches the build requirements (setuptools, Cython) from the package index, as a
user's ``pip install .`` does: hence ``network``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from command import HANG

# One worker runs the module's tests one after another: its build, a module fixture,
# is made once (tests of a module spread over workers would each build it again).
pytestmark = [pytest.mark.network, pytest.mark.xdist_group("no-compiler")]

ROOT = Path(__file__).resolve().parent.parent.parent
#: What a source distribution of chunkd holds: the package and its build files.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in", "LICENSE", "examples",
           "chunkd")
NOTICE = "not compiled"


@pytest.fixture(scope="module")
def no_compiler_build(tmp_path_factory) -> tuple[str, Path]:
    """The build log and the wheel of chunkd built without a compiler, from a copy of
    the sources (so that no build file lands in the checkout)."""
    work = tmp_path_factory.mktemp("no-compiler")
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns(
                "*.so", "_*.c", "__pycache__", "_pretoken_classes.zlib"))
        else:
            shutil.copy(ROOT / name, source / name)
    env = {**os.environ, "CC": "/bin/false", "LDSHARED": "/bin/false"}
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v",
                            "--wheel-dir", str(work / "wheel"), str(source)],
                           capture_output=True, text=True, env=env, timeout=HANG)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    [wheel] = (work / "wheel").glob("chunkd-*.whl")
    return build.stdout + build.stderr, wheel


def test_the_build_says_once_that_it_compiled_nothing(no_compiler_build):
    log, wheel = no_compiler_build
    notices = [line.strip() for line in log.splitlines() if NOTICE in line]
    assert notices == ["chunkd: chunkd.kernel._core, chunkd.kernel._kernel, chunkd.kernel._windows, chunkd.kernel._kept, "
                       "chunkd.kernel._records, chunkd.kernel._utf8, chunkd.kernel._code not "
                       "compiled (CompileError); chunkd runs its pure-Python twin, slower"]


def test_the_wheel_holds_the_twin_and_no_compiled_module(no_compiler_build):
    _, wheel = no_compiler_build
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert not [name for name in names if name.endswith((".so", ".pyd"))]
    # The pre-tokenizer's table needs no compiler: it is built all the same.
    assert {"chunkd/kernel/twin/windows.py", "chunkd/kernel/_pretoken_classes.zlib"} <= set(names)
