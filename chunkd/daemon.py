"""``chunkd watch DIR``: chunk every file dropped into an inbox folder.

Threads: watchdog's observer only queues paths; the main thread (the scheduler) waits
for each file to settle, hands it to a bounded pool of workers, rescans the folder
periodically (inotify drops events under bursts), pings systemd's watchdog while the
observer and workers are healthy, and handles signals. Each file goes through
``Inbox.process`` (see ``chunkd.inbox``), which reuses the filter's reader, kernel and
record format.
"""

from __future__ import annotations

import argparse
import logging
import os
import queue
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from chunkd.cli import add_size_options, settings_from
from chunkd.inbox import DEFAULT_INCLUDE, Abandoned, Inbox, Outcome, Signature, signature
from chunkd.notify import Notifier

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2
log = logging.getLogger("chunkd")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chunkd watch",
        description="Chunk every file dropped into DIR and write NAME.chunks.json beside it "
                    "(or NAME.error.json saying why not). Producers should write elsewhere "
                    "(or under a hidden name) and rename into DIR.",
        epilog="Exit status: 0 stopped by SIGTERM/SIGINT, 1 unexpected failure, "
               "2 bad options or an unusable DIR. SIGHUP rescans DIR.")
    parser.add_argument("dir", type=Path, metavar="DIR", help="the inbox folder")
    add_size_options(parser)
    parser.add_argument("--format", choices=("json", "msgpack"), default="json",
                        help="result format: NAME.chunks.json (default) or NAME.chunks.msgpack")
    parser.add_argument("--output-dir", type=Path, metavar="OUT",
                        help="write results under OUT (same relative names) instead of beside inputs")
    parser.add_argument("--include", action="append", metavar="GLOB",
                        help="file names to take; repeatable (default: "
                             f"{' '.join(DEFAULT_INCLUDE)}). Hidden files, *.tmp, *.part, "
                             "*.crdownload, *.swp, *~ and chunkd's outputs are never taken")
    parser.add_argument("--recursive", action="store_true", help="also watch subfolders")
    parser.add_argument("--settle", type=float, default=2.0, metavar="SECONDS",
                        help="take a file once its size and mtime have not changed for "
                             "SECONDS (default: 2)")
    parser.add_argument("--poll", type=float, metavar="SECONDS",
                        help="poll the folder every SECONDS instead of using inotify "
                             "(for NFS and SMB mounts, where inotify sees nothing)")
    parser.add_argument("--rescan", type=float, default=60.0, metavar="SECONDS",
                        help="rescan the whole folder every SECONDS, to catch what events "
                             "missed (default: 60)")
    parser.add_argument("--max-bytes", type=int, default=64 * 2**20, metavar="N",
                        help="larger files get an error result (default: 67108864, 64 MiB)")
    parser.add_argument("--workers", type=int, default=2, metavar="N",
                        help="files chunked at once (default: 2)")
    parser.add_argument("--errors", choices=("strict", "replace"), default="strict",
                        help="invalid UTF-8: an error result (default) or U+FFFD")
    parser.add_argument("--follow-symlinks", action="store_true",
                        help="take symbolic links too (off by default: an inbox must not be "
                             "a way to read files outside it)")
    parser.add_argument("--move-done", type=Path, metavar="DONE",
                        help="after success, move the input to DONE (same filesystem)")
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


class Daemon:
    """The scheduler: settles, dispatches, rescans, watches its own health."""

    def __init__(self, inbox: Inbox, args: argparse.Namespace, notifier: Notifier) -> None:
        self.inbox = inbox
        self.args = args
        self.notifier = notifier
        self.events: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.stopping = threading.Event()
        self.rescan_requested = threading.Event()
        self.pending: dict[Path, tuple[Signature | None, float]] = {}
        self.running: dict[Path, Future] = {}
        self.beats: dict[Path, float] = {}
        self.known: dict[Path, Signature] = {}   # files whose result is current
        self.reported: dict[Path, Signature | None] = {}  # skip/error lines already logged
        self.counts = {"processed": 0, "error": 0}
        self.pool = ThreadPoolExecutor(args.workers, thread_name_prefix="chunkd-worker")
        self.observer = None
        self.polling = args.poll is not None

    # --- watching --------------------------------------------------------------------

    def start_observer(self) -> None:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        events = self.events

        class QueuePaths(FileSystemEventHandler):
            # Only queue: nothing here may fail, or the observer thread would die.
            def on_any_event(self, event) -> None:
                for path in (event.src_path, getattr(event, "dest_path", "")):
                    if path:
                        events.put(os.fsdecode(path))

        if not self.polling:
            try:
                observer = Observer()
                observer.schedule(QueuePaths(), str(self.inbox.root), recursive=self.args.recursive)
                observer.start()
                self.observer = observer
                return
            except OSError as error:
                log.error("cannot watch %s with inotify (%s): raise the sysctls "
                          "fs.inotify.max_user_watches / max_user_instances, or use --poll; "
                          "polling every 2 s meanwhile", self.inbox.root, error)
                self.polling, self.args.poll = True, 2.0
        observer = PollingObserver(timeout=self.args.poll)
        observer.schedule(QueuePaths(), str(self.inbox.root), recursive=self.args.recursive)
        observer.start()
        self.observer = observer

    def check_observer(self) -> None:
        if self.observer is not None and not self.observer.is_alive():
            log.error("the file watcher stopped; falling back to polling every %s s "
                      "and rescanning", self.args.poll or 2.0)
            self.polling, self.args.poll = True, self.args.poll or 2.0
            self.start_observer()
            self.rescan_requested.set()

    # --- scheduling ------------------------------------------------------------------

    def rescan(self, why: str) -> None:
        started, queued, present = time.monotonic(), 0, set()
        for path in self.inbox.scan():
            present.add(path)
            if self.note(path):
                queued += 1
        # Forget files that are gone (moved out, deleted): a long run must not grow.
        for memory in (self.known, self.reported):
            for path in [p for p in memory if p not in present]:
                del memory[path]
        log.debug("rescanned (%s): %d files queued in %.3f s", why, queued,
                  time.monotonic() - started)

    def note(self, path: Path) -> bool:
        """Consider a path that may be new or changed; True if it now waits to settle."""
        if path in self.pending or path in self.running or not self.inbox.wants(path):
            return False
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if self.known.get(path) == signature(st):
            return False
        # A file untouched for longer than --settle (by its mtime) is due at once.
        self.pending[path] = (None, min(time.time(), st.st_mtime))
        return True

    def dispatch_settled(self) -> None:
        now = time.time()
        for path, (seen, since) in list(self.pending.items()):
            if len(self.running) >= 2 * self.args.workers:
                return
            try:
                current = signature(os.lstat(path))
            except OSError:
                del self.pending[path]  # gone before it settled: nothing to do
                continue
            if current != seen:
                self.pending[path] = (current, since if seen is None else now)
            elif now - since >= self.args.settle:
                del self.pending[path]
                log.debug("chunking %s (%d bytes)", self.inbox.relative(path), current[1])
                self.beats[path] = time.monotonic()
                self.running[path] = self.pool.submit(self.work, path)

    def work(self, path: Path) -> Outcome:
        def beat() -> None:
            self.beats[path] = time.monotonic()
        return self.inbox.process(path, self.stopping, beat)

    def collect_finished(self) -> None:
        for path, future in list(self.running.items()):
            if not future.done():
                continue
            del self.running[path]
            self.beats.pop(path, None)
            try:
                outcome = future.result()
            except Abandoned:
                continue
            except Exception:  # a bug, not the file's fault: log it, keep running
                log.exception("failed %s: unexpected error", self.inbox.relative(path))
                self.counts["error"] += 1
                continue
            self.record(path, outcome)

    def record(self, path: Path, outcome: Outcome) -> None:
        name = self.inbox.relative(path)
        if outcome.kind == "changed":
            log.debug("changed %s: %s; waiting for it to settle", name, outcome.message)
            self.pending[path] = (outcome.signature, time.time())
            return
        if outcome.signature is not None:
            self.known[path] = outcome.signature
        if outcome.kind in ("processed", "error"):
            self.counts[outcome.kind] += 1
        if outcome.kind == "processed":
            log.info("processed %s: %s", name, outcome.message)
            self.reported.pop(path, None)
        elif outcome.kind == "current":
            log.debug("current %s: %s", name, outcome.message)
        elif self.reported.get(path, ()) != outcome.signature:  # once per file state
            self.reported[path] = outcome.signature
            level = logging.INFO if outcome.kind == "gone" else (
                logging.ERROR if outcome.kind == "error" else logging.WARNING)
            log.log(level, "%s %s: %s", outcome.kind, name, outcome.message)

    # --- health and status -----------------------------------------------------------

    def healthy(self) -> bool:
        """The observer runs and no worker has been silent for a whole watchdog period."""
        if self.observer is None or not self.observer.is_alive():
            return False
        limit = 2 * (self.notifier.watchdog_interval or 30.0)
        now = time.monotonic()
        return all(now - beat < limit for beat in list(self.beats.values()))

    def status(self) -> str:
        how = f"polling every {self.args.poll:g} s" if self.polling else "inotify"
        return (f"watching {self.inbox.root} ({how}): {self.counts['processed']} processed, "
                f"{self.counts['error']} errors, {len(self.pending)} waiting, "
                f"{len(self.running)} in progress")

    # --- the loop --------------------------------------------------------------------

    def run(self) -> int:
        removed = self.inbox.remove_stale_temporaries()
        if removed:
            log.info("removed %d temporary files left by an interrupted run", removed)
        self.start_observer()
        self.rescan("start")
        log.info("%s; %d files to catch up", self.status(), len(self.pending))
        self.notifier.ready(self.status())
        next_rescan = time.monotonic() + self.args.rescan
        next_ping = next_status = 0.0
        while not self.stopping.is_set():
            try:
                self.note(Path(self.events.get(timeout=0.1)))
                while True:
                    self.note(Path(self.events.get_nowait()))
            except queue.Empty:
                pass
            now = time.monotonic()
            if self.rescan_requested.is_set() or now >= next_rescan:
                self.rescan_requested.clear()
                self.rescan("periodic" if now >= next_rescan else "requested")
                next_rescan = now + self.args.rescan
            self.dispatch_settled()
            self.collect_finished()
            self.check_observer()
            if self.notifier.watchdog_interval and now >= next_ping and self.healthy():
                self.notifier.watchdog()
                next_ping = now + self.notifier.watchdog_interval
            if now >= next_status:
                self.notifier.status(self.status())
                next_status = now + 1.0
        return self.shutdown()

    def shutdown(self) -> int:
        self.notifier.stopping()
        log.info("stopping: %s", self.status())
        if self.observer is not None:
            self.observer.stop()
        # Workers see ``stopping`` between blocks and abandon their file (no output).
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.collect_finished()
        if self.observer is not None:
            self.observer.join(timeout=5)
        log.info("stopped")
        return EXIT_OK


def check_folder(path: Path, what: str, create: bool = False) -> str | None:
    """Why ``path`` cannot serve as a folder chunkd reads and writes, or None."""
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return f"cannot create {what} {path}: {error.strerror}"
    if not path.is_dir():
        return f"{what} {path} does not exist or is not a folder"
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        return f"{what} {path} is not readable and writable by this user (uid {os.getuid()})"
    return None


def main(argv: list[str]) -> int:
    """``chunkd watch``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = settings_from(args, parser)
    if args.workers < 1 or args.max_bytes < 1 or args.settle < 0 or args.rescan <= 0 \
            or (args.poll is not None and args.poll <= 0):
        parser.error("--workers, --max-bytes, --rescan and --poll must be positive, "
                     "--settle not negative")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JournalFormatter())
    log.addHandler(handler)
    log.setLevel(logging.WARNING if args.quiet else logging.DEBUG if args.verbose else logging.INFO)
    logging.getLogger("watchdog").setLevel(logging.WARNING)
    root = args.dir.resolve()
    problems = [check_folder(root, "inbox")]
    if args.output_dir is not None:
        problems.append(check_folder(args.output_dir.resolve(), "output folder", create=True))
    if args.move_done is not None:
        problems.append(check_folder(args.move_done.resolve(), "--move-done folder", create=True))
    for problem in filter(None, problems):
        log.error("chunkd watch: %s", problem)
        return EXIT_CONFIG
    inbox = Inbox(root, settings, format=args.format,
                  output_dir=args.output_dir.resolve() if args.output_dir else None,
                  include=tuple(args.include or DEFAULT_INCLUDE), recursive=args.recursive,
                  max_bytes=args.max_bytes, errors=args.errors,
                  follow_symlinks=args.follow_symlinks,
                  move_done=args.move_done.resolve() if args.move_done else None)
    settings.splitter()  # load the tokenizer now: fail here, not on the first file
    daemon = Daemon(inbox, args, Notifier())
    signal.signal(signal.SIGTERM, lambda *_: daemon.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: daemon.stopping.set())
    signal.signal(signal.SIGHUP, lambda *_: daemon.rescan_requested.set())
    try:
        return daemon.run()
    except Exception:
        log.exception("chunkd watch: unexpected failure")
        return EXIT_FAILURE
