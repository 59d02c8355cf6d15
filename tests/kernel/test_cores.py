"""The splitting cores and builds: the pure-Python twin gives the compiled core's
records; the tests that exercise the compiled modules directly (the kernel-level
tests) run again on the debug build of the compiled core, which checks bounds and
asserts the core's invariants (setup.py, ``CHUNKD_DEBUG_BUILD``)."""

from __future__ import annotations

import hashlib
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

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent

#: The tests that drive the compiled modules directly, on generated text and the corpus.
KERNEL_TESTS = [str(ROOT / "tests" / name) for name in (
    "kernel/test_windows.py", "kernel/test_properties.py", "strategies/test_markdown.py", "inputs/test_byte_order_mark.py",
    "strategies/test_heading_bounds.py", "integrations/test_dropin.py",
    # the code walk, with tree-sitter's runtime's own assertions on
    "strategies/test_code_walk.py")]

#: The fast-tier tests that run again on the twin: those whose outcome goes through the
#: splitting core (``chunkd.kernel.chosen`` picks it for the strategies, the units, the readers
#: and the record writers), in process or through the filter. Not the daemon, web,
#: store, endpoint, evaluation or CLI-hardening tests (the core they reach is the same;
#: what they check is not), nor those that take both cores or ``chunkd.kernel._code`` directly
#: (test_pure_windows.py, test_cores.py, test_code_walk.py, test_tiktoken_encodings.py: one
#: run covers both). Nor test_corpus.py: the twin gives the kernel's chunks on the same
#: corpus, whole and in random pieces, in every unit (the tests above and
#: test_the_twin_gives_the_compiled_records_on_the_corpus), and the kernel LangChain's.
#: Nor the tests of the filter's handling of a strategy or a format in a subprocess
#: (test_code_command.py, test_windows_command.py, test_parquet.py, test_arrow.py):
#: what the core gives them is the records, which the filter writes byte for byte alike
#: on both cores (that same test, for the recursive, Markdown and window strategies in
#: each unit; the code strategy's twin against tree-sitter's ranges in test_code.py, here).
TWIN_TESTS = [str(ROOT / "tests" / name) for name in (
    # the strategies against LangChain and their own oracles
    "strategies/test_markdown.py", "strategies/test_parents.py", "integrations/test_dropin.py",
    "kernel/test_windows.py", "strategies/test_heading_bounds.py",
    "strategies/test_separator_options.py", "inputs/test_byte_order_mark.py", "kernel/test_properties.py",
    "strategies/test_code.py", "strategies/test_tables.py", "strategies/test_semantic.py",
    "units/test_model_window.py",
    # the units
    "units/test_huggingface_units.py", "units/test_tokenizer_equivalence.py",
    "units/test_tokenizer_front_ends.py", "units/test_tokenizer_option.py",
    # the records: offsets, ids, fields, writers, readers
    "model/test_chunk_ids.py", "strategies/test_child_offsets.py", "model/test_record_fields.py", "outputs/test_json_lines.py",
    "inputs/test_utf8_decoding.py", "strategies/test_embed_prefix.py",
    "inputs/test_document_source.py",
    # the filter and the integrations built on the splitters
    "cli/test_cli.py", "cli/test_version.py", "embeddings/test_langchain_embeddings.py", "integrations/test_llamaindex.py",
    "integrations/test_haystack.py")]

#: The share of each property test's examples the twin and debug-build tiers try.
TIER_EXAMPLES = 0.25
#: The variables a test process of pytest-xdist carries, which a child pytest must not.
XDIST_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID",
                   "PYTEST_CURRENT_TEST")


def run_tests(env: dict[str, str], cwd: pathlib.Path, tmp_path: pathlib.Path,
              *arguments: str) -> dict:
    """Run pytest on ``arguments`` in a child with ``env``, from ``cwd`` (first on its
    path), on both cores (pytest-xdist) with its own temporary folders; return which core
    it ran on (conftest.py writes it down in every process that ran tests, all of which
    must agree), after checking that every test passed."""
    records = tmp_path / "cores"
    records.mkdir()
    env = {name: value for name, value in env.items() if name not in XDIST_VARIABLES}
    env["CHUNKD_TEST_CORE_RECORD"] = str(records)
    # The properties were met on the compiled core at their full count: here a quarter
    # of their examples (tests/property_examples.py).
    env["CHUNKD_TEST_EXAMPLES_SCALE"] = str(TIER_EXAMPLES)
    # The timeout bounds a hang, not the time it takes on a busy machine.
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                             "-n", "2", "--basetemp", str(tmp_path / "basetemp"),
                             "--rootdir", str(ROOT), *arguments], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=3600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    ran = [json.loads(path.read_text(encoding="utf-8")) for path in sorted(records.iterdir())]
    assert len(ran) == 2, ran   # one a worker
    assert all(facts == ran[0] for facts in ran), ran
    return ran[0]


def compile_sources(root: pathlib.Path) -> str:
    """The SHA-256 of what a build of the compiled modules reads: setup.py and every
    source under ``chunkd/`` that is not Python, generated C or a built module, with
    the Python and Cython that build them."""
    import Cython

    digest = hashlib.sha256(f"{sys.version}\n{Cython.__version__}\n".encode())
    paths = [root / "setup.py"] + sorted(
        path for path in (root / "chunkd").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
        and path.suffix not in (".py", ".pyc", ".pyi", ".so")
        and not (path.suffix == ".c" and path.with_suffix(".pyx").exists()))
    for path in paths:
        digest.update(f"{path.relative_to(root)}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


#: Where the debug build is kept, by the hash of its sources: built once for them.
DEBUG_CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") \
    / "chunkd" / "debug-build"


def debug_modules(copy: pathlib.Path) -> None:
    """Put the debug build's compiled modules into ``copy`` (a copy of the sources):
    from the cache when these sources were built before, else built there (and kept)."""
    cached = DEBUG_CACHE / compile_sources(copy)
    if not cached.is_dir():
        build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-j", "2"],
                               cwd=copy, env=dict(os.environ, CHUNKD_DEBUG_BUILD="1"),
                               capture_output=True, text=True, timeout=3600)
        assert build.returncode == 0, build.stderr[-4000:]
        staging = DEBUG_CACHE / f"{cached.name}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        for module in (copy / "chunkd").rglob("*.so"):
            target = staging / module.relative_to(copy)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(module, target)
        try:
            staging.rename(cached)
        except OSError:  # another run kept the same build first
            shutil.rmtree(staging, ignore_errors=True)
        return
    for module in cached.rglob("*.so"):
        shutil.copy2(module, copy / module.relative_to(cached))


@pytest.mark.slow
@pytest.mark.xdist_group("cores")
def test_the_kernel_level_tests_pass_on_the_debug_build(tmp_path):
    copy = tmp_path / "debug"
    shutil.copytree(ROOT / "chunkd", copy / "chunkd",
                    ignore=shutil.ignore_patterns("*.so", "_*.c", "__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    debug_modules(copy)
    # Run from the copy: ``python -m`` puts it first on the path, before the project.
    env = {name: value for name, value in os.environ.items() if name != "CHUNKD_PUREPYTHON"}
    ran = run_tests(env, copy, tmp_path, "-m", "not slow", *KERNEL_TESTS)
    assert ran == {"implementation": "compiled", "debug_build": True,
                   "package": str(copy / "chunkd")}


def test_the_debug_builds_cache_is_keyed_by_every_compiled_source(tmp_path):
    """A change to any source the build compiles (a .pyx, the vendored runtime's C,
    setup.py) is a new key; the Python modules, generated C and built modules are not."""
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "chunkd", copy / "chunkd",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(ROOT / "setup.py", copy / "setup.py")
    key = compile_sources(copy)
    assert key == compile_sources(copy)
    pyx = min((copy / "chunkd").rglob("*.pyx"))
    for changed in (pyx.with_suffix(".py"), pyx.with_suffix(".c"),
                    pyx.with_name(pyx.stem + ".cpython-x.so")):
        changed.write_text("# not a build input\n")
        assert compile_sources(copy) == key, changed
    for changed in [copy / "setup.py", pyx, min((copy / "chunkd").rglob("*.pxd")),
                    min((copy / "chunkd").rglob("_vendor/**/*.c"))]:
        before = changed.read_bytes()
        changed.write_bytes(before + b"\n")
        assert compile_sources(copy) != key, changed
        changed.write_bytes(before)
    assert compile_sources(copy) == key


@pytest.mark.parametrize("unit,size,overlap", [("chars", 1000, 100), ("chars", 200, 0),
                                               ("chars", 50, 10), ("tokens", 256, 25),
                                               ("tokens", 16, 4)])
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

CORE_OF = "import chunkd.kernel.chosen; print(chunkd.kernel.chosen.IMPLEMENTATION)"


def test_a_missing_compiled_core_is_said_once_and_the_twin_runs():
    """As on a machine without a C compiler: the compiled modules cannot be imported."""
    hide = "import sys; sys.modules['chunkd.kernel._kernel'] = None; "
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
    hide = "import sys; sys.modules['chunkd.kernel._windows'] = None; "
    used = ("import chunkd.kernel.chosen as core; "
            "print(core.IMPLEMENTATION, core.SectionScanner.__module__, "
            "core.cut_heading.__module__, core.RecursiveSplitter.__module__)")
    missing = subprocess.run([sys.executable, "-c", hide + used], capture_output=True,
                             text=True, timeout=60, env={
                                 k: v for k, v in os.environ.items() if k != "CHUNKD_PUREPYTHON"})
    assert missing.stdout == "compiled chunkd.kernel.twin.windows chunkd.kernel.twin.windows chunkd.kernel._kernel\n"
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
@pytest.mark.xdist_group("cores")
def test_the_fast_tier_passes_on_the_pure_python_core(tmp_path):
    """The fast tier's tests that go through the splitting core (``TWIN_TESTS``), again
    with ``CHUNKD_PUREPYTHON=1``."""
    ran = run_tests(dict(os.environ, CHUNKD_PUREPYTHON="1"), ROOT, tmp_path,
                    "-m", "not slow", *TWIN_TESTS)
    assert ran == {"implementation": "python", "package": str(ROOT / "chunkd")}


def test_the_twins_tier_names_test_modules_that_exist():
    """A module moved or renamed is not left out of the twin's tier unnoticed."""
    for path in {*TWIN_TESTS, *KERNEL_TESTS}:
        assert pathlib.Path(path).is_file(), path
