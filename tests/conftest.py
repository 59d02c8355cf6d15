"""Hypothesis explores new examples on every local run; in CI (CI=true) it replays a
fixed set, so that a landing is not decided by the luck of the draw."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
