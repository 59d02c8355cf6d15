"""The splitting cores and builds: the pure-Python twin gives the compiled core's
records; the tests that exercise the compiled modules directly (the kernel-level
tests) run again on the debug build of the compiled core, which checks bounds and
asserts the core's invariants (setup.py, ``CHUNKD_DEBUG_BUILD``)."""

from __future__ import annotations

import json
import os
import pathlib
import random
import shutil
import subprocess
import sys

import pytest

from command import chunkd_command
from cores import Kernel, Twin, chunks_of, kernel_unit, twin_unit
from oracle import corpus_documents, random_cuts
from tokenizer_files import O200K_FILE

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: The tests that drive the compiled modules directly, on generated text and the corpus.
KERNEL_TESTS = [str(ROOT / "tests" / name) for name in (
    "test_windows.py", "test_properties.py", "test_markdown.py", "test_byte_order_mark.py",
    "test_heading_bounds.py", "test_dropin.py",
    # the code walk, with tree-sitter's runtime's own assertions on
    "test_code_walk.py")]


def run_tests(env: dict[str, str], cwd: pathlib.Path, record: pathlib.Path,
              *arguments: str) -> dict:
    """Run pytest on ``arguments`` in a child with ``env``, from ``cwd`` (first on its
    path); return which core it ran on (conftest.py writes it down), after checking
    that every test passed."""
    env = dict(env, CHUNKD_TEST_CORE_RECORD=str(record))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                             "--rootdir", str(ROOT), *arguments], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return json.loads(record.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_the_kernel_level_tests_pass_on_the_debug_build(tmp_path):
    copy = tmp_path / "debug"
    shutil.copytree(ROOT / "chunkd", copy / "chunkd",
                    ignore=shutil.ignore_patterns("*.so", "_*.c", "__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-j", "2"],
                           cwd=copy, env=dict(os.environ, CHUNKD_DEBUG_BUILD="1"),
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-4000:]
    # Run from the copy: ``python -m`` puts it first on the path, before the project.
    env = {name: value for name, value in os.environ.items() if name != "CHUNKD_PUREPYTHON"}
    ran = run_tests(env, copy, tmp_path / "core.json", "-m", "not slow", *KERNEL_TESTS)
    assert ran == {"implementation": "compiled", "debug_build": True,
                   "package": str(copy / "chunkd")}


@pytest.mark.parametrize("unit,size,overlap", [("chars", 1000, 100), ("chars", 200, 0),
                                               ("tokens", 256, 25)])
def test_the_twin_splits_the_corpus_as_the_kernel_does(unit, size, overlap):
    """Every shared-corpus document: the twin fed in random pieces, the kernel whole,
    records equal field for field (offsets, lengths in the unit, texts)."""
    rng = random.Random(f"{unit}-{size}")
    for path in corpus_documents():
        text = path.read_text(encoding="utf-8")
        compiled = chunks_of(Kernel(size, overlap, unit=kernel_unit(unit)), [text])
        twin = chunks_of(Twin(size, overlap, unit=twin_unit(unit)),
                         random_cuts(text, rng, rng.choice([50, 4000])))
        assert twin == compiled, path.name


def test_the_twin_splits_the_corpus_as_the_kernel_does_in_o200k_tokens():
    """As above, in o200k_base tokens: each core with its own o200k_base counter (the
    kernel runs its compiled pre-tokenizer directly)."""
    from test_tiktoken_encodings import compiled_counter, twin_counter

    rng = random.Random("o200k")
    for path in corpus_documents():
        text = path.read_text(encoding="utf-8")
        compiled = chunks_of(Kernel(256, 25, unit=compiled_counter()), [text])
        twin = chunks_of(Twin(256, 25, unit=twin_counter()),
                         random_cuts(text, rng, rng.choice([50, 4000])))
        assert twin == compiled, path.name


# --- the pure-Python core ---------------------------------------------------------------

CORE_OF = "import chunkd.core; print(chunkd.core.IMPLEMENTATION)"


def test_a_missing_compiled_core_is_said_once_and_the_twin_runs():
    """As on a machine without a C compiler: the compiled modules cannot be imported."""
    hide = "import sys; sys.modules['chunkd._kernel'] = None; "
    missing = subprocess.run([sys.executable, "-c", hide + CORE_OF], capture_output=True,
                             text=True, timeout=60, env={
                                 k: v for k, v in os.environ.items() if k != "CHUNKD_PUREPYTHON"})
    assert missing.stdout == "python\n"
    assert missing.stderr.startswith("chunkd: the compiled core is not built (")
    assert missing.stderr.endswith("); running the pure-Python core, slower\n")
    assert missing.stderr.count("\n") == 1
    asked = subprocess.run([sys.executable, "-c", CORE_OF], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, CHUNKD_PUREPYTHON="1"))
    assert (asked.stdout, asked.stderr) == ("python\n", "")


def test_a_missing_window_module_alone_is_said_once_and_the_twins_windows_run():
    """The window strategies' module is imported when first used: where it alone cannot
    be, the twin's windows run, said once, and the rest of the core stays compiled."""
    hide = "import sys; sys.modules['chunkd._windows'] = None; "
    used = ("import chunkd.core as core; "
            "print(core.IMPLEMENTATION, core.SectionScanner.__module__, "
            "core.cut_heading.__module__, core.RecursiveSplitter.__module__)")
    missing = subprocess.run([sys.executable, "-c", hide + used], capture_output=True,
                             text=True, timeout=60, env={
                                 k: v for k, v in os.environ.items() if k != "CHUNKD_PUREPYTHON"})
    assert missing.stdout == "compiled chunkd._pure.windows chunkd._pure.windows chunkd._kernel\n"
    assert missing.stderr.startswith("chunkd: the window strategies' compiled module is not "
                                     "built (")
    assert missing.stderr.count("\n") == 1


#: Every strategy with each of its units, at a small size so that records are many;
#: tokens are cl100k_base's, and o200k_base's (from its file) for the recursive strategy.
STRATEGY_SETTINGS = [("recursive", "--chars", "300"), ("recursive", "--tokens", "80"),
                     ("markdown", "--chars", "300"), ("markdown", "--tokens", "80"),
                     ("markdown", "--tokens", "80", "--embed-text"),
                     ("graphemes", "--size", "200"), ("words", "--size", "40"),
                     ("sentences", "--size", "3"), ("sections", "--size", "1"),
                     ("recursive", "--tokens", "80", "--tokenizer", str(O200K_FILE))]


@pytest.mark.slow
@pytest.mark.parametrize("options", STRATEGY_SETTINGS,
                         ids=lambda options: " ".join(pathlib.Path(o).name for o in options))
def test_the_twin_gives_the_compiled_records_on_the_corpus(options):
    """The installed chunkd on every shared-corpus document, on each core: the same
    bytes out (every field of every record)."""
    paths = [str(path) for path in corpus_documents()]
    strategy, *unit = options
    arguments = [chunkd_command(), "--strategy", strategy, *unit, "--count-tokens",
                 "--jobs", "1", *paths]
    outputs = {}
    for core, flag in (("compiled", "0"), ("python", "1")):
        result = subprocess.run(arguments, capture_output=True, timeout=1200,
                                env=dict(os.environ, CHUNKD_PUREPYTHON=flag))
        assert result.returncode == 0, result.stderr
        outputs[core] = result.stdout
    assert outputs["python"] == outputs["compiled"]
    assert outputs["compiled"].count(b"\n") > len(paths)


@pytest.mark.slow
def test_the_fast_tier_passes_on_the_pure_python_core(tmp_path):
    ran = run_tests(dict(os.environ, CHUNKD_PUREPYTHON="1"), ROOT, tmp_path / "core.json",
                    "-m", "not slow")
    assert ran == {"implementation": "python", "package": str(ROOT / "chunkd")}
