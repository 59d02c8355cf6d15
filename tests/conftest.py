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
