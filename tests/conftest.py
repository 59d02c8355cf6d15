"""Hypothesis explores new examples on every local run; in CI (CI=true) it replays a
fixed set, so that a landing is not decided by the luck of the draw."""

import os
import pathlib
import sys

from hypothesis import settings

# Test modules take helpers from one another by module name (test_embed_url's endpoint,
# test_page's page), across the folders that mirror the package: every folder is on
# the path, whichever tests run, as pytest puts only the collected ones' there.
for folder in sorted(pathlib.Path(__file__).parent.iterdir()):
    if folder.is_dir() and any(folder.glob("test_*.py")):
        sys.path.append(str(folder))

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


import pytest  # noqa: E402

#: Markers that make a test slow as well: ``pytest -m "not slow"`` is the fast tier.
SLOW_KINDS = ("browser", "systemd", "network")


def pytest_configure(config):
    """The tests' children get the signals' default actions, however pytest was started:
    a shell starts a background job with SIGINT ignored and ``nohup`` ignores SIGHUP,
    and an ignored signal stays ignored across exec, so that a chunkd a test interrupts
    would not stop. A handled one is reset to its default at exec: here SIGINT raises
    KeyboardInterrupt as usual, and SIGHUP, when pytest ignored it, is still ignored by
    pytest itself."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, lambda number, frame: None)
    if not hasattr(config, "workerinput"):  # once, before pytest-xdist starts its workers
        compile_chunkd()


def compile_chunkd() -> None:
    """Compile the chunkd the tests run to bytecode, as pip does for a package it
    installs (an editable install is not): where Python is told never to write bytecode
    (``PYTHONDONTWRITEBYTECODE``, set on CI's machines), each of the suite's thousands of
    ``chunkd`` processes would compile it from source again (0.76 s against 0.29 s for
    the filter on a short document). It only reads the files compiled here."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("chunkd")
    if spec is not None and spec.origin is not None:
        compileall.compile_dir(os.path.dirname(spec.origin), quiet=1)


#: pytest-xdist groups (``--dist loadgroup``, pyproject.toml): a group's tests run on one
#: worker, one at a time. The browser tests share that worker's one Chromium.
GROUPS = {"browser": "browser"}


#: The longest tests (a minute or more on 2 busy cores), longest first: they are run
#: first, so that with ``-n`` no worker is left with a long one at the end while the
#: other idles. (module, function): the module by its path in tests/, every parameter of it.
LONGEST = [("kernel/test_cores.py", "test_the_fast_tier_passes_on_the_pure_python_core"),
           ("kernel/test_cores.py", "test_the_kernel_level_tests_pass_on_the_debug_build"),
           ("test_typing.py", "test_mypy_passes_on_the_package"),
           ("test_benchmark_smoke.py", "test_quick_benchmark_runs_and_chunkd_equals_langchain"),
           ("service/test_sync.py", "test_a_sync_with_nothing_to_embed_never_loads_the_model"),
           ("strategies/test_semantic_command.py",
            "test_watch_records_the_models_identity_and_redoes_files_when_it_changes"),
           ("test_wheel.py", "test_the_build_warns_of_nothing_in_the_packaging"),
           ("strategies/test_tables.py", "test_a_gigantic_table_streams_in_bounded_memory"),
           ("units/test_tiktoken_encodings.py", "test_every_code_point_is_cut_as_tiktoken_cuts"),
           ("service/test_watch_sink.py", "test_a_model_folder_counts_in_its_tokens_and_sync_checks_it"),
           ("integrations/test_ray.py",
            "test_semantic_through_ray_equals_the_filter_and_loads_the_model_once_a_worker")]


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    rank = {name: place for place, name in enumerate(LONGEST)}
    tests = pathlib.Path(__file__).parent
    items.sort(key=lambda item: rank.get((item.path.relative_to(tests).as_posix(),
                                          getattr(item, "originalname", "")), len(LONGEST)))
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)
        for marker, group in GROUPS.items():
            if item.get_closest_marker(marker) and not item.get_closest_marker("xdist_group"):
                item.add_marker(pytest.mark.xdist_group(group))
        if getattr(config.option, "loadgroup", False):  # a pytest-xdist worker, loadgroup
            name_group(item)


def name_group(item) -> None:
    """Name ``item`` ``NODEID@GROUP`` for its xdist_group, as pytest-xdist does: the
    scheduler reads the group from the name. pytest-xdist 3.8 sets ``item._nodeid``,
    which pytest 9.2 no longer reads (its node ids are ``item._id``): without this,
    ``--dist loadgroup`` would spread a group's tests over the workers."""
    groups = sorted({str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
                     for marker in item.iter_markers("xdist_group")})
    if not groups or "@" in item.nodeid or not hasattr(item, "_id"):
        return
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


@pytest.fixture
def watch():
    """Start ``chunkd watch`` (a ``watching.Watcher``); every daemon a test starts is
    stopped when the test ends, whatever happened."""
    from watching import Watcher

    started = []

    def start(inbox, *options, **kwargs):
        watcher = Watcher(inbox, *options, **kwargs)
        started.append(watcher)
        return watcher

    yield start
    for watcher in started:
        watcher.kill()


@pytest.fixture
def inbox(tmp_path):
    folder = tmp_path / "inbox"
    folder.mkdir()
    return folder


def pytest_sessionfinish(session):
    """With CHUNKD_TEST_CORE_RECORD set (a folder), write down which core the tests ran
    on, one file a process that ran tests (each pytest-xdist worker, or pytest alone;
    not the controller, which runs none): the tests that run the suite again on another
    core or build read them, proof that the twin, or the debug build, was really what
    ran."""
    record = os.environ.get("CHUNKD_TEST_CORE_RECORD")
    if record is None or session.config.pluginmanager.hasplugin("dsession"):
        return
    import json

    import chunkd
    import chunkd.kernel.chosen

    facts = {"implementation": chunkd.kernel.chosen.IMPLEMENTATION,
             "package": os.path.dirname(os.path.abspath(chunkd.__file__))}
    if chunkd.kernel.chosen.IMPLEMENTATION == "compiled":
        import chunkd.kernel._core

        facts["debug_build"] = chunkd.kernel._core.DEBUG_BUILD
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(record, f"{name}.json"), "w", encoding="utf-8") as stream:
        json.dump(facts, stream)


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 (``tests/embedding.py``), loaded once a test process
    through chunkd (which keeps one copy a process): its folder and the loaded model."""
    from embedding import model_folder

    import chunkd.embeddings.models

    folder = model_folder()
    return folder, chunkd.embeddings.models.model(folder)


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium (``tests/browser.py``), one a test process: launching it costs
    seconds, a fresh context a test (the ``page`` fixture of test_page.py) does not."""
    from playwright.sync_api import sync_playwright

    from browser import launch

    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


# --- the sink tests' stores (tests/store_servers.py) ---------------------------------------

@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL with pgvector, one a test process (starting it costs seconds)."""
    from store_servers import Postgres

    server = Postgres()
    yield server
    server.close()


@pytest.fixture(scope="module")
def postgres(postgres_server):
    """The session's PostgreSQL, emptied for each test module: what a server of the
    module's own was (``url``, ``connect``, ``stop``, ``start``)."""
    return postgres_server.empty()


@pytest.fixture
def endpoint():
    """The loopback embedding endpoint (hashed vectors)."""
    from store_servers import start_endpoint, stop_endpoint

    server = start_endpoint()
    yield server
    stop_endpoint(server)


@pytest.fixture(params=["pgvector", "lancedb"])
def store(request, tmp_path):
    """(kind, URL, reader of a collection's rows): the PostgreSQL server, or a LanceDB
    folder of the test's own."""
    from store_servers import lance_rows, pgvector_rows

    if request.param == "pgvector":
        server = request.getfixturevalue("postgres")
        return "pgvector", server.url, lambda collection: pgvector_rows(server.url, collection)
    path = str(tmp_path / "lance")
    return "lancedb", path, lambda collection: lance_rows(path, collection)
