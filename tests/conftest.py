"""Hypothesis explores new examples on every local run; in CI (CI=true) it replays a
fixed set, so that a landing is not decided by the luck of the draw."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


import pytest  # noqa: E402

#: Markers that make a test slow as well: ``pytest -m "not slow"`` is the fast tier.
SLOW_KINDS = ("browser", "systemd", "network")


def pytest_collection_modifyitems(items):
    for item in items:
        if any(item.get_closest_marker(kind) for kind in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)


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
    """With CHUNKD_TEST_CORE_RECORD set, write down which core the tests ran on (the
    tests that run the suite again on another core or build read it: proof that the
    twin, or the debug build, was really what ran)."""
    record = os.environ.get("CHUNKD_TEST_CORE_RECORD")
    if record is None:
        return
    import json

    import chunkd
    import chunkd.core

    facts = {"implementation": chunkd.core.IMPLEMENTATION,
             "package": os.path.dirname(os.path.abspath(chunkd.__file__))}
    if chunkd.core.IMPLEMENTATION == "compiled":
        import chunkd._core

        facts["debug_build"] = chunkd._core.DEBUG_BUILD
    with open(record, "w", encoding="utf-8") as stream:
        json.dump(facts, stream)


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 (``tests/embedding.py``), loaded once a test process
    through chunkd (which keeps one copy a process): its folder and the loaded model."""
    from embedding import model_folder

    import chunkd.embeddings

    folder = model_folder()
    return folder, chunkd.embeddings.model(folder)


# --- the sink tests' stores (tests/stores.py) ---------------------------------------

@pytest.fixture(scope="module")
def postgres():
    """A real PostgreSQL with pgvector, one a test module."""
    from stores import Postgres

    server = Postgres()
    yield server
    server.close()


@pytest.fixture
def endpoint():
    """The loopback embedding endpoint (hashed vectors)."""
    from stores import start_endpoint, stop_endpoint

    server = start_endpoint()
    yield server
    stop_endpoint(server)


@pytest.fixture(params=["pgvector", "lancedb"])
def store(request, tmp_path):
    """(kind, URL, reader of a collection's rows): the PostgreSQL server, or a LanceDB
    folder of the test's own."""
    from stores import lance_rows, pgvector_rows

    if request.param == "pgvector":
        server = request.getfixturevalue("postgres")
        return "pgvector", server.url, lambda collection: pgvector_rows(server.url, collection)
    path = str(tmp_path / "lance")
    return "lancedb", path, lambda collection: lance_rows(path, collection)
