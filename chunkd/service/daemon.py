"""``chunkd watch DIR``: chunk every file dropped into an inbox folder.

The main process schedules; worker processes chunk. watchdog's inotify observer (a
thread) only queues the paths it sees. The scheduler notes each path, waits for the
file to settle (its size, mtime and ctime unchanged for --settle seconds), hands it to
a pool of worker processes, and records the outcome; it rescans the folder
periodically (inotify drops events under bursts, and polling is a rescan), pings
systemd's watchdog while the observer runs and no worker is stuck, and handles
signals. Each file goes through ``Inbox.process`` (``chunkd.service.inbox``), which reuses the
filter's readers, strategies and record format. Every change of the results (a result
or an error result written, results removed) passes through ``Daemon.changed`` once it
is on disk, which appends it to the ``--journal`` (``chunkd.service.journal``); at start,
``Daemon.reconcile`` makes the journal tell the results as they are.

Workers are processes, not threads, so one daemon uses every core it is given (the
kernel holds the GIL), and a worker that crashes cannot take the daemon with it.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import heapq
import logging
import math
import multiprocessing
import os
import queue
import signal
import stat
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from chunkd.service.changes import Changes
from chunkd.inputs import add_document_options, check_limits, labels
from chunkd.embeddings.selection import EMBED_CACHE, takes_model
from chunkd.embeddings.cache import default_folder
from chunkd.service.inbox import (DEFAULT_INCLUDE, ERROR_SUFFIX, FolderChanged, Inbox, InboxOptions,
                          Outcome, Signature, signature)
from chunkd.service.journal import Journal, JournalError
from chunkd.service.notify import Notifier
from chunkd.inputs.readers import display_name
from chunkd.model.chunk import name_value
from chunkd.processes.signals import Requests, die_with_parent
from chunkd.processes.stdio import bug_line, raised_through
from chunkd.model.errors import SettingsError
from chunkd.settings import (CommandParser, Settings, add_settings_options, given_flags,
                             settings_from_flags)
from chunkd.stores import URL_VARIABLE
from chunkd.strategies import strategy_class
from chunkd.service.sync import add_sink_options

if TYPE_CHECKING:
    import ctypes

    from chunkd.service.metrics import Metrics
    from chunkd.service.store_follower import Follower

    from watchdog.observers.api import BaseObserver

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2
log = logging.getLogger("chunkd")

#: Back-off after a failure of the environment (a full disk...): doubling, capped.
RETRY_FIRST, RETRY_MOST = 5.0, 300.0
#: A file found changed while read this many times in a row is backed off like a failure
#: (a file that changes whenever it is read, such as a link to /proc, must not loop).
CHANGES_TO_BACK_OFF = 3
#: Seconds a stop waits for the workers to leave their files before it kills them (a
#: worker held in a call that does not return, an endpoint that hangs, must not hold
#: up the stop).
STOP_GRACE = 3.0
#: The one-daemon lock: a file in the inbox (and output folder) that only the daemon's
#: user can open, so that no producer can take it (a lock on the shared folder itself
#: could be taken by any member of its group, and keep the service from starting).
LOCK_NAME = ".chunkd-lock"


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="chunkd watch",
        description="Chunk every file dropped into DIR and write NAME.chunks.json beside it "
                    "(or NAME.error.json saying why not). Producers should write elsewhere "
                    "(or under a hidden name) and rename into DIR.",
        epilog="Exit status: 0 stopped by SIGTERM/SIGINT, 1 unexpected failure, "
               "2 bad options, an unusable DIR, or another chunkd watch on it. "
               "SIGHUP rescans DIR.")
    parser.add_argument("dir", type=Path, metavar="DIR", help="the inbox folder")
    add_settings_options(parser)
    parser.add_argument("--format", choices=("json", "msgpack"), default="json",
                        help="result format: NAME.chunks.json (default) or NAME.chunks.msgpack")
    parser.add_argument("--output-dir", type=Path, metavar="OUT",
                        help="write results under OUT (same relative names) instead of beside inputs")
    parser.add_argument("--include", action="append", metavar="GLOB",
                        help="file names to take; repeatable (default: "
                             f"{' '.join(DEFAULT_INCLUDE)}; with --strategy code, also the "
                             "source files of its languages). Hidden files, *.tmp, *.part, "
                             "*.crdownload, *.swp, *~ and chunkd's outputs are never taken")
    parser.add_argument("--recursive", action="store_true", help="also watch subfolders")
    parser.add_argument("--settle", type=float, default=2.0, metavar="SECONDS",
                        help="take a file once its size and times have not changed for "
                             "SECONDS (default: 2)")
    parser.add_argument("--poll", type=float, metavar="SECONDS",
                        help="rescan the folder every SECONDS instead of using inotify "
                             "(for NFS and SMB mounts, where inotify sees nothing)")
    parser.add_argument("--rescan", type=float, default=60.0, metavar="SECONDS",
                        help="rescan the whole folder every SECONDS, to catch what events "
                             "missed (default: 60)")
    add_document_options(parser, max_bytes="larger files get an error result, and so does "
                                            f"a {labels()} file whose text is larger")
    parser.add_argument("--workers", type=int, default=2, metavar="N",
                        help="files chunked at once, each by a process (default: 2)")
    parser.add_argument("--follow-symlinks", action="store_true",
                        help="take symbolic links to files too (off by default: an inbox "
                             "must not be a way to read files outside it)")
    parser.add_argument("--move-done", type=Path, metavar="DONE",
                        help="after success, move the input to DONE (same filesystem); "
                             "its result stays")
    parser.add_argument("--journal", type=Path, metavar="FILE",
                        help="append one JSON line to FILE per change of the results (a "
                             "source chunked, failed or removed: the ids added and removed), "
                             "for consumers that keep a store in step (docs/daemon.md)")
    parser.add_argument("--keep-results", action="store_true",
                        help="keep the results of an input deleted or renamed away (by "
                             "default they are removed, and the journal says so)")
    add_sink_options(parser, "DIR", "watching")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true", help="log only problems")
    verbosity.add_argument("-v", "--verbose", action="store_true", help="log every step")
    return parser


class JournalFormatter(logging.Formatter):
    """One line an event; with the syslog priority prefix journald understands when
    stderr goes to the journal."""

    PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3}

    def __init__(self) -> None:
        super().__init__("%(message)s")
        self.journal = _stderr_is_journal()

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record).replace("\n", " ")
        if self.journal:
            return f"<{self.PRIORITY.get(record.levelno, 6)}>{line}"
        return line


def _stderr_is_journal() -> bool:
    device, _, inode = os.environ.get("JOURNAL_STREAM", "").partition(":")
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return device.isdigit() and inode.isdigit() and (st.st_dev, st.st_ino) == (int(device), int(inode))


# --- the worker processes --------------------------------------------------------------

_worker: dict = {}


def _worker_start(options: InboxOptions, stopping, beats, slots, parent: int) -> None:
    """A worker process opens the daemon's folders itself and checks that they are the
    same ones; signals are the main process's (``parent``) to handle (systemd signals
    them all)."""
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    die_with_parent(parent)
    with slots.get_lock():
        slot = slots.value
        slots.value += 1
    inbox = Inbox(options, check_identity=True)
    inbox.pipeline()  # the tokenizer loads now, not on a first file
    _worker.update(inbox=inbox, stopping=stopping, beats=beats, slot=slot % len(beats))


def _ready() -> None:
    """A task that only makes the pool start a worker."""


def _work(relative: str) -> Outcome:
    """Chunk one file in a worker; its heartbeat slot shows progress while it runs."""
    inbox, stopping, beats, slot = (_worker[k] for k in ("inbox", "stopping", "beats", "slot"))

    def beat() -> None:
        beats[slot] = time.monotonic()

    beat()
    try:
        return inbox.process(relative, stopping.is_set, beat)
    finally:
        beats[slot] = 0.0


# --- the scheduler ---------------------------------------------------------------------

class Daemon:
    """The scheduler: settles, dispatches, rescans, watches its own health."""

    def __init__(self, inbox: Inbox, args: argparse.Namespace, notifier: Notifier,
                 requests: Requests) -> None:
        self.inbox = inbox
        self.args = args
        self.notifier = notifier
        self.requests = requests
        #: Results of an input that left stay: asked, or it was moved to --move-done.
        self.keep_results = args.keep_results or args.move_done is not None
        self.journal: Journal | None = None
        #: The store the results are applied to (``--sink``), and the metrics served.
        self.follower: Follower | None = None
        self.metrics: Metrics | None = None
        self.events: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        requests.wake = self.events
        self.options = replace(inbox.options, identities=inbox.identities())
        #: Files waiting to settle: the signature last seen and when it is next due.
        self.waiting: dict[str, tuple[Signature | None, float]] = {}
        self.due: list[tuple[float, str]] = []       # a heap of (due time, path)
        self.running: dict[str, tuple[Future, int]] = {}  # and the pool it went to
        self.known: dict[str, Signature] = {}        # files whose result is current
        self.reported: dict[str, tuple] = {}         # what was last logged of a file
        self.backoff: dict[str, float] = {}          # the delay after a failure
        self.changes: dict[str, int] = {}            # "changed while read", in a row
        #: Files in hand when a worker died: each is tried again alone, and one that
        #: kills a worker alone gets an error result.
        self.suspects: set[str] = set()
        self.dirty: set[str] = set()                 # events while the file was in hand
        self.deaths_in_a_row = 0                     # worker deaths with no outcome since
        self.counts = {"processed": 0, "error": 0}
        self.observer: BaseObserver | None = None
        self.polling = args.poll is not None
        #: Seconds between polls when polling (``--poll``, or 2 once the watcher fails):
        #: the daemon's own state, not the options'.
        self.poll: float | None = args.poll
        self.pool: ProcessPoolExecutor | None = None
        self.generation = 0                          # pools started so far
        #: Per worker, when its file last made progress (0.0: it has none in hand).
        self.beats: ctypes.Array[ctypes.c_double] | None = None

    # --- workers ---------------------------------------------------------------------

    def start_pool(self) -> None:
        context = multiprocessing.get_context("spawn")  # a clean process: no inherited threads
        self.stopping = context.Event()
        self.beats = context.Array("d", self.args.workers, lock=False)
        self.pool = ProcessPoolExecutor(
            self.args.workers, mp_context=context, initializer=_worker_start,
            initargs=(self.options, self.stopping, self.beats, context.Value("i", 0),
                      os.getpid()))
        self.generation += 1
        # Start them all now and wait until they run (the tokenizer loaded): a worker
        # that cannot start fails the daemon's start, not its first files.
        for started in [self.pool.submit(_ready) for _ in range(self.args.workers)]:
            started.result()

    def submit(self, relative: str) -> None:
        assert self.pool is not None, "run() starts the pool before it dispatches"
        try:
            future = self.pool.submit(_work, relative)
        except BrokenProcessPool:
            # A worker died a moment ago and the failures of the files it had in hand
            # are not in yet (they come from the pool's own thread): this file was not
            # one of them; it goes to a new pool, and theirs, when they come, are of
            # the old one.
            self.replace_pool()
            future = self.pool.submit(_work, relative)
        self.running[relative] = (future, self.generation)
        future.add_done_callback(lambda _: self.events.put(("done", relative)))

    # --- watching --------------------------------------------------------------------

    def start_observer(self) -> None:
        if self.polling:
            return
        from watchdog.events import (DirCreatedEvent, DirMovedEvent, FileClosedEvent,
                                     FileCreatedEvent, FileDeletedEvent, FileMovedEvent,
                                     FileSystemEventHandler)
        from watchdog.observers import Observer

        events, relative = self.events, self.inbox.relative

        class QueuePaths(FileSystemEventHandler):
            # Only queue: nothing here may fail, or the observer thread would die.
            def on_any_event(self, event) -> None:
                for path in (event.src_path, getattr(event, "dest_path", "")):
                    name = relative(os.fsdecode(path)) if path else None
                    if name is not None:
                        events.put(("seen", name))

        try:
            observer = Observer()
            # Only what can make a file new, complete or gone: creations, renames,
            # closes after writing and deletions. Opens, reads and attribute changes (the
            # daemon's own reading among them) would only cost time; the rescans catch
            # what this leaves out (a `touch`, a chmod, a folder deleted).
            observer.schedule(QueuePaths(), self.inbox.options.root,
                              recursive=self.args.recursive, follow_symlink=False,
                              event_filter=[FileCreatedEvent, FileMovedEvent, FileClosedEvent,
                                            FileDeletedEvent, DirCreatedEvent, DirMovedEvent])
            observer.start()
            self.observer = observer
        except OSError as error:
            log.error("cannot watch %s with inotify (%s): raise the sysctls "
                      "fs.inotify.max_user_watches / max_user_instances, or use --poll; "
                      "polling every 2 s meanwhile", self.inbox.options.root, error)
            self.polling, self.poll = True, 2.0

    def check_observer(self) -> None:
        if self.observer is not None and not self.observer.is_alive():
            log.error("the file watcher stopped; polling every %s s instead", self.poll or 2.0)
            self.observer = None
            self.polling, self.poll = True, self.poll or 2.0

    # --- scheduling ------------------------------------------------------------------

    def rescan(self, why: str) -> None:
        started, queued, present = time.monotonic(), 0, set()
        for relative, st in self.inbox.scan():
            present.add(relative)
            queued += self.consider(relative, st)
        # Forget files that are gone (moved out, deleted): a long run must not grow.
        gone: set[str] = set()
        for memory in (self.known, self.reported, self.backoff, self.changes):
            for relative in [p for p in memory if p not in present]:
                del memory[relative]
                gone.add(relative)
        for relative in sorted(gone - self.waiting.keys() - self.running.keys()):
            self.gone(relative)
        log.debug("rescanned (%s): %s queued in %.3f s", why, _count(queued, "file"),
                  time.monotonic() - started)

    def note(self, relative: str) -> None:
        """A path an event named: a file that may be new or changed, or a folder moved
        in (whose files are looked at now)."""
        if relative in self.running:
            self.dirty.add(relative)      # looked at again once its outcome is in
            return
        if relative in self.waiting:
            return
        if not self.inbox.wants(relative):
            for path, found in self.inbox.scan_folder(relative):  # a folder moved in
                self.consider(path, found)
            return
        st = self.inbox.stat(relative)
        if st is not None:
            self.consider(relative, st)
        else:                             # deleted or renamed away
            for memory in (self.known, self.reported, self.backoff, self.changes):
                memory.pop(relative, None)
            self.gone(relative)

    def consider(self, relative: str, st: os.stat_result) -> bool:
        """Queue a file to settle unless its result is known current; True if queued."""
        if relative in self.waiting or relative in self.running:
            return False
        now_signature = signature(st)
        known = self.known.get(relative)
        if known == now_signature:
            return False
        unchunkable = self.inbox.unchunkable(st, relative)
        if unchunkable is not None:       # skipped here: never logged as chunked, nor queued
            self.record(relative, Outcome("skipped", unchunkable, now_signature))
            return False
        if known is not None:             # it changed: its new result will replace this one
            del self.known[relative]
        elif self.inbox.current(relative, st):
            self.known[relative] = now_signature
            return False
        # A file untouched for longer than --settle (by its mtime) is due at once.
        due = time.monotonic() + (0 if time.time() - st.st_mtime >= self.args.settle
                                  else self.args.settle)
        self.wait(relative, now_signature, due)
        return True

    def wait(self, relative: str, seen: Signature | None, due: float) -> None:
        self.waiting[relative] = (seen, due)
        heapq.heappush(self.due, (due, relative))
        if self.metrics:
            self.metrics.queue.add(relative)

    def unwait(self, relative: str) -> None:
        del self.waiting[relative]
        if self.metrics:
            self.metrics.queue.done(relative)

    def room(self) -> bool:
        """Whether another file may be handed to the pool (a few per worker are queued,
        so that a worker never waits for the scheduler; a suspect runs alone)."""
        if self.suspects and not self.suspects.isdisjoint(self.running):
            return False
        return len(self.running) < 16 * self.args.workers

    def dispatch_due(self) -> None:
        now = time.monotonic()
        while self.due and self.due[0][0] <= now and self.room():
            due, relative = heapq.heappop(self.due)
            seen, expected = self.waiting.get(relative, (None, None))
            if expected != due:
                continue                  # a stale entry: the file was rescheduled
            st = self.inbox.stat(relative)
            if st is None:
                self.unwait(relative)  # gone before it settled
                self.gone(relative)
                continue
            if signature(st) != seen:
                self.wait(relative, signature(st), now + self.args.settle)
                continue
            if relative in self.suspects and self.running:
                self.wait(relative, seen, now)  # it runs alone: once the others are done
                return
            del self.waiting[relative]  # still queued (metrics) until its outcome is in
            log.debug("chunking %s (%d bytes)", display_name(relative), st.st_size)
            self.submit(relative)

    def finished(self, relative: str) -> None:
        future, generation = self.running.pop(relative, (None, 0))
        if future is None:
            return
        if self.metrics:
            self.metrics.queue.done(relative)
        try:
            outcome = future.result()
        except BrokenProcessPool:
            self.worker_died(relative, generation)
            return
        except Exception as error:  # a bug in chunkd: the file gets an error result
            self.record(relative, self.bug(relative, error))
            return
        self.record(relative, outcome)
        if relative in self.dirty:        # events came while it was in hand
            self.dirty.discard(relative)
            self.note(relative)

    def bug(self, relative: str, error: Exception) -> Outcome:
        """The outcome of a file whose chunking raised what chunkd never expects: an
        error result that says so (``bug_line``), so that the file is not tried again
        at every rescan, only once it changes (or chunkd does); ``--verbose`` logs the
        frames it was raised through."""
        log.debug("unexpected %s chunking %s, raised through: %s", type(error).__name__,
                  display_name(relative), "; ".join(
                      f"{path}:{line} in {function}"
                      for path, line, function in raised_through(error)))
        st = self.inbox.stat(relative)
        if st is None:
            return Outcome("gone", "vanished")
        return self.inbox.fail(relative, st, bug_line(error))

    def worker_died(self, relative: str, generation: int) -> None:
        """A worker process died (killed, out of memory, a crash), failing every file
        handed to its pool: each is tried again alone (a suspect), so that the file
        that kills a worker alone is known and gets an error result, and the others,
        which were only queued or unlucky, are not blamed."""
        if generation == self.generation and not self.requests.stop.is_set():
            self.replace_pool()
        st = self.inbox.stat(relative)
        if st is None:
            self.suspects.discard(relative)
            return
        if relative in self.suspects:     # it ran alone: it is the one
            self.suspects.discard(relative)
            self.record(relative, self.inbox.fail(
                relative, st, "chunking it made a worker process die (twice, the second "
                              "time alone)"))
        else:
            self.suspects.add(relative)
            self.wait(relative, signature(st), time.monotonic())

    def replace_pool(self) -> None:
        """A worker of the pool died: count the death and start a new pool."""
        self.deaths_in_a_row += 1
        if self.deaths_in_a_row > 3:  # they cannot even start (see their stderr)
            raise BrokenProcessPool("worker processes keep dying before finishing any file")
        log.error("a worker process died; starting new ones")
        assert self.pool is not None, "a worker died: the pool was started"
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.start_pool()

    def record(self, relative: str, outcome: Outcome) -> None:
        name = display_name(relative)
        kind = outcome.kind
        if kind == "abandoned":
            return
        self.suspects.discard(relative)
        self.deaths_in_a_row = 0
        if kind == "changed":
            self.changes[relative] = self.changes.get(relative, 0) + 1
            if self.changes[relative] < CHANGES_TO_BACK_OFF:
                log.debug("changed %s: %s; waiting for it to settle", name, outcome.message)
                self.wait(relative, outcome.signature, time.monotonic() + self.args.settle)
                return
            kind, outcome = "failed", Outcome("failed", f"{outcome.message}, "
                                                        f"{self.changes[relative]} times in a row")
        else:
            self.changes.pop(relative, None)
        if kind == "failed":              # the environment's fault: back off, log once
            if self.metrics:
                self.metrics.files_failed.inc()
            delay = min(2 * self.backoff.get(relative, RETRY_FIRST / 2), RETRY_MOST)
            self.backoff[relative] = delay
            self.report(relative, logging.ERROR, f"failed {name}: {outcome.message}; "
                                                 f"trying again in {delay:.0f} s", outcome)
            st = self.inbox.stat(relative)
            if st is not None:
                self.wait(relative, signature(st), time.monotonic() + delay)
            return
        self.backoff.pop(relative, None)
        if outcome.changes is not None:   # a result or an error result was written
            self.published(relative, outcome)
        if kind == "gone" or outcome.moved:
            self.known.pop(relative, None)
        elif outcome.signature is not None:
            self.known[relative] = outcome.signature
        if kind == "gone" and self.inbox.stat(relative) is None:
            self.gone(relative)
        elif kind == "skipped":           # what is there now is not taken: no result holds
            self.remove(relative, outcome.message)
        if kind in ("processed", "error"):
            self.counts[kind] += 1
            if self.metrics:
                (self.metrics.files_chunked if kind == "processed"
                 else self.metrics.files_failed).inc()
                if outcome.embedded is not None:
                    sent, vectors = outcome.embedded
                    self.metrics.texts_embedded.inc(sent)
                    self.metrics.cache_hits.inc(max(0, vectors - sent))
        if kind == "processed":
            log.info("processed %s: %s", name, outcome.message)
            self.reported.pop(relative, None)
        elif kind == "current":
            log.debug("current %s: %s", name, outcome.message)
        else:
            level = {"gone": logging.INFO, "error": logging.ERROR}.get(kind, logging.WARNING)
            self.report(relative, level, f"{kind} {name}: {outcome.message}", outcome)

    # --- what changed in the results -------------------------------------------------

    def published(self, relative: str, outcome: Outcome) -> None:
        """A worker wrote a result (or an error result) for ``relative``: say so."""
        assert outcome.changes is not None and outcome.result is not None, "a result was written"
        fields: dict[str, object] = {"result": name_value(outcome.result),
                                     "sha256": outcome.sha256}
        if outcome.kind == "error":
            fields["error"] = outcome.message
        self.changed("chunked" if outcome.kind == "processed" else "error", relative,
                     outcome.changes, outcome.result, fields)

    def gone(self, relative: str) -> None:
        """The input left (deleted, renamed away): its results go too, unless kept."""
        if not self.keep_results:
            self.remove(relative, "its input is gone")

    def remove(self, relative: str, why: str) -> None:
        """Remove an input's results (if it has any) and say which ids left."""
        changes = self.inbox.remove_results(relative)
        if changes is not None:
            log.info("removed the results of %s: %s", display_name(relative), why)
            self.changed("removed", relative, changes, None, {})

    def changed(self, event: str, relative: str, changes: Changes, result: str | None,
                fields: dict[str, object]) -> None:
        """The one place where a change of the results, made and durable on disk, is
        handed on: to the journal, and to whatever else must follow the results (a
        store's sink goes here, after the journal's line); ``event`` is chunked, error
        or removed; ``result`` the result file's path in the output folder (None when
        removed)."""
        if self.journal is not None:
            if result is not None:
                fields["result_stat"] = self.inbox.result_stat(result)
            self.journal.append(event, relative, changes, **fields)
        if self.follower is not None:
            self.follower.changed(relative)

    def reconcile(self) -> None:
        """At start, before any file is chunked: remove the results of inputs that are
        no longer there or no longer taken (unless kept), and append to the journal
        what it lacks to tell the results as they are (a daemon killed between a
        result and its line)."""
        journal = self.journal
        seen: set[str] = set()
        present: set[str] = set()
        for relative, suffix in self.inbox.results():
            if relative in seen:
                continue
            seen.add(relative)
            if not self.keep_results and not self.takes(relative):
                # Said below with the ids the journal has: the result may be newer
                # than its last line.
                if self.inbox.remove_results(relative) is not None:
                    log.info("removed the results of %s: its input is gone or no longer "
                             "taken", display_name(relative))
                continue
            present.add(relative)
            if journal is not None:
                self.reconcile_one(journal, relative, suffix)
        if journal is not None:
            for replayed in list(journal.state.values()):
                if replayed.relative not in present:
                    self.changed("removed", replayed.relative,
                                 Changes(removed=b"".join(replayed.ids)), None, {})
            journal.forget()

    def reconcile_one(self, journal: Journal, relative: str, suffix: str) -> None:
        """Append a line for a result the journal does not describe."""
        result = relative + suffix
        replayed = journal.replayed(relative)
        if replayed is not None and replayed.result_stat == self.inbox.result_stat(result):
            return
        current = b"".join(self.inbox.previous_ids(relative))
        changes = Changes.between(dict(replayed.ids) if replayed else {}, current)
        recorded = self.inbox.recorded(relative, suffix) or {}
        fields: dict[str, object] = {"result": name_value(result),
                                     "sha256": recorded.get("sha256")}
        if suffix == ERROR_SUFFIX:
            fields["error"] = recorded.get("error")
        self.changed("error" if suffix == ERROR_SUFFIX else "chunked", relative, changes,
                     result, fields)

    def takes(self, relative: str) -> bool:
        """Whether the input at ``relative`` is there and one the daemon takes."""
        if not self.inbox.wants(relative):
            return False
        st = self.inbox.stat(relative)
        return st is not None and self.inbox.unchunkable(st, relative) is None

    def report(self, relative: str, level: int, line: str, outcome: Outcome) -> None:
        """Log a problem once per file state and message, however often it recurs."""
        key = (outcome.kind, outcome.message.split(";")[0], outcome.signature)
        if self.reported.get(relative) != key:
            self.reported[relative] = key
            log.log(level, "%s", line)

    # --- health and status -----------------------------------------------------------

    def healthy(self) -> bool:
        """The observer runs (or the daemon polls) and no worker has been silent in the
        middle of a file for a whole watchdog period."""
        if not self.polling and (self.observer is None or not self.observer.is_alive()):
            return False
        limit = 2 * (self.notifier.watchdog_interval or 30.0)
        now = time.monotonic()
        return all(beat == 0.0 or now - beat < limit for beat in list(self.beats or ()))

    def status(self) -> str:
        how = f"polling every {self.poll:g} s" if self.polling else "inotify"
        return (f"watching {self.inbox.options.root} ({how}): {self.counts['processed']} "
                f"processed, {_count(self.counts['error'], 'error')}, {len(self.waiting)} "
                f"waiting, {len(self.running)} in progress")

    # --- the loop --------------------------------------------------------------------

    def run(self) -> int:
        removed, stranded = self.inbox.remove_stale_temporaries()
        if removed:
            log.info("removed %d temporary files left by an interrupted run", removed)
        for path in stranded:
            log.warning("an input left under a hidden name by a run stopped while moving it "
                        "to --move-done: %s; give it its name back", display_name(path))
        self.start_pool()
        self.start_observer()
        self.rescan("start")
        # After the start's rescan (which only queues: nothing is chunked yet), so that an
        # input deleted once reconcile() has looked at it is one the daemon knows of, and
        # its results go when the next event or rescan misses it.
        self.reconcile()
        if self.follower is not None:
            self.follower.start()  # it reconciles the store with the results first
        log.info("%s; %s to catch up", self.status(), _count(len(self.waiting), "file"))
        self.notifier.ready(self.status())
        period = min(self.args.rescan, self.poll or self.args.rescan)
        next_rescan = time.monotonic() + period
        next_ping = next_status = 0.0
        while not self.requests.stop.is_set():
            now = time.monotonic()
            # Wake for the next due file only when it can be dispatched: with the pool
            # full, a finished file is what to wait for (spinning would starve the
            # executor's threads of the GIL).
            timeout = min(next_rescan, now + 0.5)
            if self.due and self.room():
                timeout = min(timeout, self.due[0][0])
            try:
                self.handle(self.events.get(timeout=max(0.0, timeout - now)))
                while True:
                    self.handle(self.events.get_nowait())
            except queue.Empty:
                pass
            now = time.monotonic()
            self.check_observer()
            if self.requests.rescan.is_set() or now >= next_rescan:
                self.requests.rescan.clear()
                self.rescan("periodic" if now >= next_rescan else "requested")
                period = min(self.args.rescan, self.poll or self.args.rescan)
                next_rescan = now + period
            self.dispatch_due()
            if self.notifier.watchdog_interval and now >= next_ping and self.healthy():
                self.notifier.watchdog()
                next_ping = now + self.notifier.watchdog_interval
            if now >= next_status:
                self.notifier.status(self.status())
                next_status = now + 1.0
        return self.shutdown()

    def handle(self, event: tuple[str, str]) -> None:
        kind, relative = event
        if kind == "seen":
            self.note(relative)
        elif kind == "done":
            self.finished(relative)

    def shutdown(self) -> int:
        self.notifier.stopping()
        log.info("stopping: %s", self.status())
        if self.observer is not None:
            self.observer.stop()
        # Workers see ``stopping`` between blocks and abandon their file (no output);
        # those still busy after the grace are killed (a result is written whole or not
        # at all, and a temporary file left is removed at the next start).
        self.stopping.set()
        assert self.pool is not None, "run() starts the pool before it shuts down"
        workers = list((self.pool._processes or {}).values())

        def kill() -> None:
            log.info("workers still busy %g s after the stop: killed", STOP_GRACE)
            for worker in workers:
                worker.kill()

        killer = threading.Timer(STOP_GRACE, kill)
        killer.start()
        self.pool.shutdown(wait=True, cancel_futures=True)
        killer.cancel()
        if self.observer is not None:
            self.observer.join(timeout=5)
        if self.follower is not None:
            self.follower.stop(STOP_GRACE)
        log.info("stopped")
        return EXIT_OK


def _count(number: int, noun: str) -> str:
    """``1 file``, ``2 files``: a count and its noun, in the right number."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


class OverflowRescans(logging.Handler):
    """watchdog says only in its log that inotify's queue overflowed (events were lost,
    as in a burst of thousands of files): then the folder is rescanned at once, rather
    than at the next periodic rescan."""

    def __init__(self, requests: Requests) -> None:
        super().__init__(logging.WARNING)
        self.requests = requests

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Inotify queue overflowed"):
            self.requests.rescan_soon()


# --- start-up --------------------------------------------------------------------------

def check_folder(path: Path, what: str, create: bool = False) -> str | None:
    """Why ``path`` cannot serve as a folder chunkd reads and writes, or None."""
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return f"cannot create {what} {display_name(str(path))}: {error.strerror}"
    if not path.is_dir():
        return f"{what} {display_name(str(path))} does not exist or is not a folder"
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        return (f"{what} {display_name(str(path))} is not readable and writable by this "
                f"user (uid {os.getuid()})")
    return None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


#: The lock files' descriptors: held, and so locked, for the daemon's life.
_locks: list[int] = []


def lock(inbox: Inbox) -> str | None:
    """Take the inbox (and the output folder, if another) for this daemon alone: an
    exclusive lock on ``LOCK_NAME`` in each; why not, or None."""
    folders: dict[tuple[int, int], tuple[int, str]] = {}
    for fd, what in ((inbox.root, "inbox"), (inbox.output, "output folder")):
        st = os.fstat(fd)
        folders.setdefault((st.st_dev, st.st_ino), (fd, what))
    for fd, what in folders.values():
        problem = _lock_in(fd, what)
        if problem:
            return problem
    return None


def _lock_in(folder: int, what: str) -> str | None:
    """Lock ``LOCK_NAME`` in ``folder``: a regular file of this user's, mode 0600 (one
    that is not, a producer's, is replaced: a producer must not hold the lock)."""
    for _ in range(3):
        try:
            fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC, 0o600, dir_fd=folder)
        except OSError as error:
            if error.errno != errno.ELOOP:
                return f"cannot create the lock file {LOCK_NAME} in the {what}: {error.strerror}"
            fd = None
        if fd is not None:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() \
                    and not st.st_mode & 0o077:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    return (f"another chunkd watch is already using this {what}; "
                            "stop it first (one daemon per inbox)")
                _locks.append(fd)
                return None
            os.close(fd)
        try:  # not chunkd's: remove it and make ours
            os.unlink(LOCK_NAME, dir_fd=folder)
        except OSError as error:
            return (f"cannot replace {LOCK_NAME} in the {what}, which is not this user's: "
                    f"{error.strerror}")
    return f"cannot take the lock file {LOCK_NAME} in the {what}: it keeps being replaced"


def follower(url: str, args: argparse.Namespace, root: Path, inbox: Inbox,
             settings: Settings, metrics: Metrics | None) -> Follower:
    """The thread that keeps the store at ``url`` equal to the results, recording the
    fingerprint ``chunkd sync`` gives the same options (so that its ``--check`` holds)."""
    from chunkd.embeddings.selection import embedder
    from chunkd.stores import open_sink
    from chunkd.service.sync import chunk_settings, store_fingerprint
    from chunkd.service.store_follower import Follower

    fingerprint = store_fingerprint(chunk_settings(args), embedder(settings).name)
    sink = open_sink(url, args.collection, args.origin or str(root), settings.record_fields())
    return Follower(inbox, sink, fingerprint, metrics)


def main(argv: list[str], requests: Requests | None = None) -> int:
    """``chunkd watch``; returns the exit status. ``requests``: signal handlers the
    caller installed before importing this module (``chunkd.cli`` does)."""
    if requests is None:
        requests = Requests()
        requests.install()
    parser = build_parser()
    args = parser.parse_args(argv)
    url = args.sink or os.environ.get(URL_VARIABLE) or None
    if url is not None:
        if args.embed is None and args.embed_url is None:
            parser.error("--sink needs the model that embeds the chunks: --embed MODEL or "
                         "--embed-url URL --embed-model NAME")
        args.vectors = True  # the workers embed: each result carries the store's vectors
    try:
        settings = settings_from_flags(given_flags(args))
    except SettingsError as error:
        parser.error(str(error))
    settings = settings.replace(ids=True)  # results always carry ids: changes are told by them
    durations = [args.settle, args.rescan] + ([] if args.poll is None else [args.poll])
    if not all(math.isfinite(seconds) for seconds in durations) or args.settle < 0 \
            or args.rescan <= 0 or (args.poll is not None and args.poll <= 0):
        parser.error("--settle must be a number of seconds, 0 or more; --rescan and --poll "
                     "more than 0")
    if not 1 <= args.workers <= 1024:
        parser.error("--workers must be from 1 to 1024")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JournalFormatter())
    log.addHandler(handler)
    log.setLevel(logging.WARNING if args.quiet else logging.DEBUG if args.verbose else logging.INFO)
    logging.getLogger("watchdog").setLevel(logging.WARNING)
    logging.getLogger("watchdog").addHandler(OverflowRescans(requests))
    root = args.dir.resolve()
    output = args.output_dir.resolve() if args.output_dir else None
    done = args.move_done.resolve() if args.move_done else None
    problems = [check_folder(root, "inbox")]
    if output is not None:
        problems.append(check_folder(output, "output folder", create=True))
    if done is not None:
        problems.append(check_folder(done, "--move-done folder", create=True))
        if done == root:
            problems.append("--move-done folder is the inbox itself; name another folder")
        elif _inside(done, root) and args.recursive:
            problems.append("--move-done folder is inside the inbox, which --recursive "
                            "watches: files would be taken again; put it outside")
    for problem in filter(None, problems):
        log.error("chunkd watch: %s", problem)
        return EXIT_CONFIG
    if takes_model(settings._values) and settings[EMBED_CACHE] is None:
        # Vectors paid for are kept with the results, so that an edited file's unchanged
        # chunks, and a restart, cost no calls to the model (the inbox never takes it).
        # A producer can write that folder (the inbox's): one it made its own, a link or
        # a file in its place costs calls to the model, never the service.
        try:
            settings = settings.replace(embed_cache=default_folder(str(output or root)))
        except SettingsError as error:
            log.warning("chunkd watch: %s; running without the embedding cache: every "
                        "text goes to the model", error)
    limits = check_limits(parser, args.max_bytes, args.extract_timeout, args.ocr)
    options = InboxOptions(
        str(root), settings, format=args.format,
        output_dir=str(output) if output else None,
        include=tuple(args.include or DEFAULT_INCLUDE + strategy_class(settings.strategy).include),
        recursive=args.recursive,
        max_bytes=args.max_bytes, follow_symlinks=args.follow_symlinks,
        move_done=str(done) if done else None,
        extract_seconds=limits.seconds, ocr=limits.ocr)
    try:
        inbox = Inbox(options)
    except (OSError, FolderChanged) as error:
        log.error("chunkd watch: cannot open the folders: %s", error)
        return EXIT_CONFIG
    refused = lock(inbox)
    if refused:
        log.error("chunkd watch: %s", refused)
        return EXIT_CONFIG
    daemon = Daemon(inbox, args, Notifier(), requests)
    try:
        if args.metrics:
            from chunkd.service.metrics import Metrics

            daemon.metrics = Metrics()
            daemon.metrics.serve(args.metrics)
        if url is not None:
            daemon.follower = follower(url, args, root, inbox, settings, daemon.metrics)
    except SettingsError as error:
        parser.error(str(error))
    except (OSError, ValueError) as error:
        parser.error(f"--metrics {args.metrics}: {getattr(error, 'strerror', None) or error}")
    if args.journal is not None:
        journal_path = args.journal.resolve()
        inside = inbox.relative(str(journal_path))
        if inside is not None and inbox.wants(inside):
            log.error("chunkd watch: the journal %s is a name the inbox takes; put it "
                      "elsewhere or name it so that --include does not match it",
                      display_name(str(journal_path)))
            return EXIT_CONFIG
        try:
            daemon.journal = Journal(str(journal_path))
        except JournalError as error:
            log.error("chunkd watch: %s", error)
            return EXIT_CONFIG
        if daemon.journal.cut:
            log.warning("cut a partial last line (%d bytes) off the journal: a crash in "
                        "the middle of writing it", daemon.journal.cut)
    try:
        return daemon.run()
    except JournalError as error:
        log.error("chunkd watch: %s; stopping (a restart appends what the journal lacks)",
                  error)
        return EXIT_FAILURE
    except BrokenProcessPool:
        log.error("chunkd watch: the worker processes could not start or keep running "
                  "(their error, if any, is above)")
        return EXIT_FAILURE
    except Exception:
        log.exception("chunkd watch: unexpected failure")
        return EXIT_FAILURE
