"""How many examples a property test tries: its own count, scaled down by
``CHUNKD_TEST_EXAMPLES_SCALE`` in the tiers that run tests again on another build of
the core (the pure-Python twin, the debug build: tests/kernel/test_cores.py), after
the compiled core has met the same properties at their full count. In CI, Hypothesis
replays a fixed sequence (conftest.py), so a scaled run tries the first examples of
the full one."""

import os

SCALE = float(os.environ.get("CHUNKD_TEST_EXAMPLES_SCALE", "1"))


def examples(count: int) -> int:
    """``count`` scaled, and never below 10 (nor above ``count``)."""
    return min(count, max(10, round(count * SCALE)))
