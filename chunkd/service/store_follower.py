"""``chunkd watch --sink URL``: keep a vector store equal to the daemon's results.

The results on disk are the truth; the store follows them. One thread (``Follower``)
applies, per source, the chunks and vectors of its current result (the workers embed:
``--sink`` implies ``--vectors``), or a removal when the input has no result or an
error result, each source whole in one transaction with chunkd's bookkeeping
(``chunkd.stores``). ``Daemon.changed`` wakes it with the input that changed; at start,
and whenever the store comes back after an outage, it reconciles the store's
bookkeeping with the results on disk (never with memory), so that a daemon killed
anywhere, or a store that was down, is caught up. The bookkeeping is the one
``chunkd sync`` keeps (the same names, SHA-256 and fingerprint), so ``chunkd sync
INBOX --sink URL --check`` with the same options proves the store equals the inbox.

While the store is down the daemon keeps chunking; the follower tries again with
back-off (``chunkd.stores.retrying``), says so once per outage, and never holds up the
daemon's stop.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy

from chunkd.service.changes import texts
from chunkd.service.inbox import CHUNKER, ERROR_SUFFIX, Inbox
from chunkd.stores import Change, Sink, StoreDown, StoreRefused, removal, retrying
from chunkd.service.sync import GROUP_FILES, GROUP_RECORDS, store_name

if TYPE_CHECKING:
    from chunkd.service.metrics import Metrics

log = logging.getLogger("chunkd")
#: Seconds before a store that refuses to be used at all (its tables are not usable),
#: or an unexpected failure, is tried again.
AGAIN_SECONDS = 30.0


class Stopped(Exception):
    """The daemon stops: the follower leaves what it was doing (the store keeps whole
    sources; the next start reconciles)."""


class Follower:
    """The thread that applies the results' changes to the store (see the module)."""

    def __init__(self, inbox: Inbox, sink: Sink, fingerprint: str,
                 metrics: Metrics | None) -> None:
        self.inbox, self.sink, self.fingerprint, self.metrics = inbox, sink, fingerprint, metrics
        #: Sources to apply: the store's name to the input's relative path (None for a
        #: source only the store knows: it has no result, so it is removed).
        self.pending: dict[str, str | None] = {}
        #: Whether the store's bookkeeping must be compared with the results on disk
        #: (at start, and after the store was down).
        self.reconciling = True
        self.wake = threading.Condition()
        self.stopping = threading.Event()
        self.down = False
        #: The last refusal of the whole store logged (its tables unusable), if any.
        self.refused: str | None = None
        self.thread = threading.Thread(target=self.run, name="chunkd-sink", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, seconds: float) -> None:
        """Stop, waiting at most ``seconds`` for a store call in flight (each is bounded
        in time; the thread is a daemon's: it never holds up the exit)."""
        self.stopping.set()
        with self.wake:
            self.wake.notify()
        self.thread.join(seconds)
        if self.thread.is_alive():
            log.info("the store's call in flight did not end within %g s: left to the "
                     "store to roll back", seconds)
        else:
            self.sink.close()

    def changed(self, relative: str) -> None:
        """The results of ``relative`` changed on disk (from the daemon's thread)."""
        name = store_name(relative)
        if self.metrics:
            self.metrics.sink_waiting.add(name)
        with self.wake:
            self.pending[name] = relative
            self.wake.notify()

    # --- the thread ----------------------------------------------------------------

    def run(self) -> None:
        while not self.stopping.is_set():
            with self.wake:
                while not (self.pending or self.reconciling or self.stopping.is_set()):
                    self.wake.wait()
            try:
                retrying(self.catch_up, sys.maxsize, self.waiting, self.pause)
                self.refused = None
                continue
            except Stopped:
                return
            except StoreRefused as error:  # its tables are not usable: said once
                if str(error) != self.refused:
                    self.refused = str(error)
                    log.error("chunkd: %s; the store's changes wait, trying again every "
                              "%g s", error, AGAIN_SECONDS)
            except Exception:  # a bug, not the store's fault: said, and tried again later
                log.exception("chunkd: %s: unexpected failure; trying again in %g s",
                              self.sink.where, AGAIN_SECONDS)
            self.reconciling = True
            if self.stopping.wait(AGAIN_SECONDS):
                return

    def waiting(self, error: StoreDown, seconds: float) -> None:
        """The store is down: said once per outage; each try only with --verbose."""
        if self.metrics:
            self.metrics.sink_failures.labels("down").inc()
        if not self.down:
            self.down = True
            log.warning("chunkd: %s; results are still written, and the store is caught "
                        "up once it is back (trying again with back-off)", error)
        log.debug("store down: trying again in %.1f s", seconds)

    def pause(self, seconds: float) -> None:
        if self.stopping.wait(seconds):
            raise Stopped()

    def catch_up(self) -> None:
        """Reconcile if due, then apply what is pending, a group at a time, until
        nothing is; ``StoreDown`` leaves it all to be reconciled on the next try."""
        try:
            if self.reconciling:
                self.reconcile()
                self.reconciling = False
            while not self.stopping.is_set():
                with self.wake:
                    group = self.take()
                if not group:
                    self.sink.settle()  # caught up
                    break
                changes = [self.change(name, relative) for name, relative in group]
                self.commit([change for change in changes if change is not None])
        except StoreDown:
            self.reconciling = True  # what it held in hand is found again there
            raise
        if self.down:
            self.down = False
            log.info("the store is back: %s is up to date", self.sink.where)

    def take(self) -> list[tuple[str, str | None]]:
        """The next pending sources, a transaction's worth (their results' sizes are
        not known yet: a group is at most ``GROUP_FILES`` sources)."""
        group = list(self.pending.items())[:GROUP_FILES]
        for name, _ in group:
            del self.pending[name]
        return group

    def reconcile(self) -> None:
        """Queue every source whose store state is not its current result's: a result
        the store lacks or holds otherwise, a source whose result is gone or an error."""
        stored, rows = self.sink.sources(), self.sink.rows()
        found: dict[str, str | None] = {}
        results = list(self.inbox.results())
        for relative, suffix in results:
            name = store_name(relative)
            if suffix == ERROR_SUFFIX:
                if name in stored or name in rows:
                    found.setdefault(name, relative)
                continue
            known = stored.get(name)
            header = self.inbox.recorded(relative, suffix)
            if known is None or header is None or known.sha256 != header.get("sha256") \
                    or known.altered or known.fingerprint != self.fingerprint \
                    or not (known.ids == rows.get(name, set())
                            == set(texts(b"".join(self.inbox.previous_ids(relative))))):
                found[name] = relative
            else:
                found.pop(name, None)  # the store holds it as it is
        named = {store_name(relative) for relative, _ in results}
        for name in (stored.keys() | rows.keys()) - named:
            found[name] = None
        if found:
            log.info("reconciled %s with the results: %d sources to apply",
                     self.sink.where, len(found))
        with self.wake:
            for name, source in found.items():
                self.pending.setdefault(name, source)
                if self.metrics:
                    self.metrics.sink_waiting.add(name)
            if self.metrics:  # changes the store was found to hold already
                waiting = self.metrics.sink_waiting
                for name in list(waiting.since):
                    if name not in self.pending:
                        waiting.done(name)

    def change(self, name: str, relative: str | None) -> Change | None:
        """The source's change: its current result's chunks and vectors, or a removal
        when it has none (an error result, no result); None for a result of other
        settings (the daemon chunks its input again, and then it comes back)."""
        result = None if relative is None else self.inbox.read_result(relative)
        if result is None:
            return removal(name)
        if result.get("chunker") != CHUNKER \
                or result.get("settings") != self.inbox.recorded_settings:
            return None
        records = result.get("chunks") or []
        for record in records:
            if isinstance(record.get("vector"), bytes):  # msgpack: little-endian float32s
                record["vector"] = numpy.frombuffer(record["vector"], "<f4")
        return Change(name, result["sha256"], self.fingerprint, records)

    def commit(self, group: Sequence[Change]) -> None:
        """Apply a group in one transaction; a group the store refuses is applied a
        source at a time, so that only the source at fault is left out (said, and left
        as the store holds it until its input changes again)."""
        if not group:
            return
        if sum(len(change.records) for change in group) > GROUP_RECORDS and len(group) > 1:
            middle = len(group) // 2
            self.commit(group[:middle])
            self.commit(group[middle:])
            return
        try:
            self.sink.apply(group)
        except StoreRefused as error:
            if len(group) > 1:
                for change in group:
                    self.commit([change])
                return
            if self.metrics:
                self.metrics.sink_failures.labels("refused").inc()
                self.metrics.files_failed.inc()  # as sync counts a source the store refuses
                self.metrics.sink_waiting.done(group[0].source)
            log.error("chunkd: %s; the store keeps its previous state of %s", error,
                      group[0].source)
            return
        if self.metrics:
            kind = "remove" if all(change.sha256 is None for change in group) else "apply"
            self.metrics.sink_transactions.labels(kind).inc()
        for change in group:
            if self.metrics:
                self.metrics.sink_waiting.done(change.source)
            if change.sha256 is None:
                log.info("stored %s: removed", change.source)
            else:
                log.info("stored %s: %d chunks", change.source, len(change.records))

