"""Prometheus metrics (``--metrics HOST:PORT``), served with ``prometheus-client``.

One ``Metrics`` a process, on its own registry (not the library's global one, so that
tests and embedders can make several). What it counts:

* ``chunkd_files_chunked_total``, ``chunkd_files_failed_total``: files chunked, and
  files that could not be (their own fault or the environment's);
* ``chunkd_queue_depth``, ``chunkd_queue_oldest_seconds``: files waiting to be chunked
  and how long the oldest has waited;
* ``chunkd_texts_embedded_total``, ``chunkd_embed_cache_hits_total``: texts given to the
  model, and texts whose vector was already known (in the store, or a cache);
* ``chunkd_sink_transactions_total{kind="apply"|"remove"}``,
  ``chunkd_sink_failures_total{reason="down"|"refused"}``: the store's commits and the
  calls that failed (each try counts);
* ``chunkd_sink_pending``, ``chunkd_sink_lag_seconds``: sources whose change the store
  does not hold yet, and how long ago the oldest of those changes was made (0 when the
  store is up to date).

The page is served by a ``chunkd.net.server.BoundedServer``: at most 64 connections
at once (one more is answered 503 at once), each closed after ``IDLE_TIMEOUT`` seconds
without a byte or when its request is not in by then. ``:PORT`` (no host) listens on
every address; ``127.0.0.1:PORT`` on this machine only.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

EXTRA = "pip install 'prometheus-client>=0.20'"
#: Seconds a connection to ``--metrics`` may stay without a byte, and the time its
#: request's line and headers have to arrive: a scraper sends its request at once.
IDLE_TIMEOUT = 10.0


class Waiting:
    """Things waiting since a time (wall clock, seconds): how many, and the oldest's age."""

    def __init__(self) -> None:
        self.since: dict[str, float] = {}
        self.lock = threading.Lock()

    def add(self, name: str, since: float | None = None) -> None:
        with self.lock:
            self.since.setdefault(name, time.time() if since is None else since)

    def done(self, name: str) -> None:
        with self.lock:
            self.since.pop(name, None)

    def count(self) -> int:
        return len(self.since)

    def oldest(self) -> float:
        with self.lock:
            return max(0.0, time.time() - min(self.since.values())) if self.since else 0.0


class Metrics:
    """The counters and gauges of one chunkd process."""

    def __init__(self) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge
        except ImportError:
            from chunkd.model.errors import SettingsError
            raise SettingsError(f"--metrics needs prometheus-client: {EXTRA}") from None
        self.registry: CollectorRegistry = CollectorRegistry()
        registry = self.registry
        self.files_chunked = Counter("chunkd_files_chunked", "Files chunked",
                                     registry=registry)
        self.files_failed = Counter("chunkd_files_failed", "Files that could not be chunked",
                                    registry=registry)
        self.queue = Waiting()
        Gauge("chunkd_queue_depth", "Files waiting to be chunked",
              registry=registry).set_function(self.queue.count)
        Gauge("chunkd_queue_oldest_seconds", "How long the oldest file waiting has waited",
              registry=registry).set_function(self.queue.oldest)
        self.texts_embedded = Counter("chunkd_texts_embedded", "Texts given to the model",
                                      registry=registry)
        self.cache_hits = Counter("chunkd_embed_cache_hits",
                                  "Texts whose vector was already known", registry=registry)
        self.sink_transactions = Counter("chunkd_sink_transactions",
                                         "Transactions committed in the store", ["kind"],
                                         registry=registry)
        self.sink_failures = Counter("chunkd_sink_failures", "Store calls that failed",
                                     ["reason"], registry=registry)
        self.sink_waiting = Waiting()
        Gauge("chunkd_sink_pending", "Sources whose change the store does not hold yet",
              registry=registry).set_function(self.sink_waiting.count)
        Gauge("chunkd_sink_lag_seconds", "Age of the oldest change the store does not hold "
              "yet", registry=registry).set_function(self.sink_waiting.oldest)
        for kind in ("apply", "remove"):
            self.sink_transactions.labels(kind)
        for reason in ("down", "refused"):
            self.sink_failures.labels(reason)

    def serve(self, address: str) -> None:
        """Serve ``/metrics`` at ``HOST:PORT`` from a thread, with the bounds of
        ``chunkd.net.server`` (``MAX_CONNECTIONS`` connections, ``IDLE_TIMEOUT``);
        ``OSError`` if it cannot."""
        from prometheus_client.exposition import MetricsHandler

        from chunkd.net.server import BoundedHandler, BoundedServer

        class Handler(BoundedHandler, MetricsHandler):
            registry = self.registry

        host, port = parse_address(address)
        self.server = BoundedServer(host, port, Handler, IDLE_TIMEOUT)
        self.server.serve_in_thread("metrics")


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9464`` for IPv6) as a host and a port; ``ValueError``
    saying what is wrong."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{address}: give HOST:PORT, as 127.0.0.1:9464")
    return host.strip("[]") or "0.0.0.0", int(port)
