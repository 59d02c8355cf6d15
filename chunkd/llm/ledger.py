"""What the strategies that ask an LLM have to say: lines about each document, which a
front end says after it, and lines about the run (what the questions cost, what fell
back), which it says at the end. Each strategy keeps a ``Ledger``, registered when
made, so that a front end says them all without knowing which strategy asked. A front
end's run begins with ``start_run``: what the ledgers of this process hold then is an
earlier run's (in process: a Python caller's, a test's), not this one's."""

from __future__ import annotations

import itertools
import weakref
from collections import deque
from collections.abc import Iterator

#: The lines about documents kept for a front end that does not say them (a daemon's).
NOTES_KEPT = 64

_ledgers: weakref.WeakValueDictionary[int, Ledger] = weakref.WeakValueDictionary()
_made = itertools.count()


class Ledger:
    """A strategy's lines: ``notes`` about documents, oldest first (a front end pops
    them), and ``lines()`` about the run."""

    def __init__(self) -> None:
        self.notes: deque[str] = deque(maxlen=NOTES_KEPT)
        _ledgers[next(_made)] = self

    def lines(self) -> list[str]:
        """What is said at the end of the run (nothing, unless a strategy says)."""
        return []

    def clear(self) -> None:
        """Forget what was asked before: an earlier run's."""
        self.notes.clear()


def start_run() -> None:
    """A front end's run begins: every ledger forgets what earlier runs asked."""
    for ledger in list(_ledgers.values()):
        ledger.clear()


def document_lines() -> Iterator[str]:
    """The lines about the document just chunked, taken from every ledger."""
    for ledger in list(_ledgers.values()):
        while ledger.notes:
            yield ledger.notes.popleft()


def run_lines() -> list[str]:
    """The lines about the run, from every ledger, in the order they were made."""
    return [line for ledger in list(_ledgers.values()) for line in ledger.lines()]
