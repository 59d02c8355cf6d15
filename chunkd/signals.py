"""What signals asked the daemon for, recorded from the first moment of start-up.

Kept apart and light (no imports beyond the standard library's signal, threading and
queue) so that ``chunkd watch`` installs its handlers before it imports the rest: a
SIGHUP (``systemctl reload``) or SIGTERM during a slow start must not kill it.
"""

from __future__ import annotations

import queue
import signal
import threading


class Requests:
    """What signals asked for; installed before anything else at start-up, so that an
    early SIGHUP (``systemctl reload``) cannot kill the daemon."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.rescan = threading.Event()
        self.wake: queue.SimpleQueue | None = None  # the scheduler's, once it runs

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        signal.signal(signal.SIGHUP, self._rescan)

    def _stop(self, *_) -> None:
        self.stop.set()
        if self.wake is not None:
            self.wake.put(("wake", ""))

    def _rescan(self, *_) -> None:
        self.rescan.set()
        if self.wake is not None:
            self.wake.put(("wake", ""))
