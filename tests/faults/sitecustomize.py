"""Faults injected into the chunkd processes a test starts, never into the host.

A test puts this folder on PYTHONPATH and describes the faults in the environment
variable CHUNKD_FAULTS (JSON); Python imports this module at start-up in the daemon
and in each of its worker processes. Faults:

- "inotify": the inotify observer cannot start, as when the instance limit is reached;
- "enospc_while": a path; while it exists, writing a result fails with ENOSPC;
- "eacces_suffix": opening an input whose name ends so fails with EACCES;
- "crash_suffix": a worker chunking an input whose name ends so dies (SIGKILL);
- "bug_suffix": chunking a document whose name ends so raises an unexpected error (a
  bug in chunkd), whose message holds the text "secret-in-the-message";
- "lose_events": inotify's events are lost, and watchdog's logger says its queue
  overflowed, as watchdog does when the kernel drops events;
- "interrupt_importing": a module name; importing it raises KeyboardInterrupt, as a
  Ctrl-C during start-up does;
- "pause_writing": ``{"suffix": ..., "paused": PATH, "go": PATH}``; the first result
  whose name ends so is held before it is written: PATH "paused" is created, and the
  write goes on once PATH "go" exists (or after 60 s), so that a test can act at
  exactly that moment;
- "missing_modules": module names that cannot be imported, as when their package is
  not installed (a tree-sitter grammar);
- "slow_blocks": seconds; each block of an input the daemon chunks is read that much
  later, so that a file takes a known least time whatever the machine's speed;
- "kill_before_journal": an event (chunked, error, removed); the daemon is killed
  (SIGKILL) just before it appends its first journal line of that event, after the
  change itself was made: the crash the journal's reconciliation at start repairs.
- "lance_enospc_while": a path; while it exists, LanceDB's commits (``merge_insert``)
  fail with ENOSPC, as on a full disk;
- "delete_after_reconcile": a path; deleted just after the daemon's reconciliation at
  start has looked at the results, as a user's deletion at that moment would be.
- "text_past_memory": an HTML document's text, once extracted, cannot be encoded
  (MemoryError), as a text that fits the extraction's memory bound but not twice over;
- "late_failures": seconds; a future that fails because its process pool broke (a
  worker died) tells those waiting on it that much later, as the pool's own thread may
  when busy, so that the daemon can hand a file to the broken pool first.
- "jobs_crash": ``{"suffix": ..., "once": PATH or null}``; a filter's ``--jobs`` worker
  dies (SIGKILL) when it is given a document whose name ends so, as when the OOM killer
  picks it; with "once", only while PATH does not exist (it is created then).
- "index_rows": a number; pgvector's HNSW index is built once the table holds that
  many rows (``INDEX_ROWS``, 10,000), so that a test's few rows get it;
- "retry_first": seconds; the daemon's first wait before it tries a failed file again
  (``RETRY_FIRST``, 5 s), doubling as ever: the same sequence of tries, sooner.
"""

import errno
import json
import os
import signal

faults = json.loads(os.environ.get("CHUNKD_FAULTS", "{}"))

if faults.get("inotify"):
    import watchdog.observers

    class LimitedObserver(watchdog.observers.Observer):
        def schedule(self, *args, **kwargs):
            raise OSError(errno.EMFILE, "inotify instance limit reached")

    watchdog.observers.Observer = LimitedObserver

if faults.get("enospc_while"):
    import chunkd.service.inbox

    real_write = chunkd.service.inbox.write_atomically

    def full_disk_write(folder, name, data):
        if os.path.exists(faults["enospc_while"]):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(folder, name, data)

    chunkd.service.inbox.write_atomically = full_disk_write

if faults.get("pause_writing"):
    import time

    import chunkd.service.inbox

    pause = faults["pause_writing"]
    real_atomic_write = chunkd.service.inbox.write_atomically

    def paused_write(folder, name, compose):
        if name.endswith(pause["suffix"]) and not os.path.exists(pause["paused"]):
            open(pause["paused"], "x").close()
            deadline = time.monotonic() + 60
            while not os.path.exists(pause["go"]) and time.monotonic() < deadline:
                time.sleep(0.01)
        return real_atomic_write(folder, name, compose)

    chunkd.service.inbox.write_atomically = paused_write

if faults.get("slow_blocks"):
    import time

    import chunkd.service.inbox

    real_read_blocks = chunkd.service.inbox.read_blocks

    def slow_read_blocks(stream, on_bytes=None, *args, **kwargs):
        for block in real_read_blocks(stream, on_bytes, *args, **kwargs):
            time.sleep(faults["slow_blocks"])
            yield block

    chunkd.service.inbox.read_blocks = slow_read_blocks

if faults.get("eacces_suffix"):
    real_open = os.open

    def refusing_open(path, flags, mode=0o777, *, dir_fd=None):
        if isinstance(path, str) and path.endswith(faults["eacces_suffix"]) \
                and not flags & os.O_DIRECTORY:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    os.open = refusing_open

if faults.get("crash_suffix"):
    import chunkd.service.inbox

    real_chunk = chunkd.service.inbox.Inbox.chunk_file

    def crashing_chunk(self, folder, relative, *args, **kwargs):
        if relative.endswith(faults["crash_suffix"]):
            os.kill(os.getpid(), signal.SIGKILL)
        return real_chunk(self, folder, relative, *args, **kwargs)

    chunkd.service.inbox.Inbox.chunk_file = crashing_chunk

if faults.get("bug_suffix"):
    import chunkd.pipeline

    real_chunks = chunkd.pipeline.Pipeline.chunks

    def buggy_chunks(self, document, *args, **kwargs):
        if str(document.source.name).endswith(faults["bug_suffix"]):
            raise ZeroDivisionError("secret-in-the-message")
        return real_chunks(self, document, *args, **kwargs)

    chunkd.pipeline.Pipeline.chunks = buggy_chunks

if faults.get("lose_events"):
    import logging

    import watchdog.observers.api

    def lose(self, event):
        logging.getLogger("watchdog.observers.inotify_c").warning(
            "Inotify queue overflowed; filesystem events were lost")

    watchdog.observers.api.EventEmitter.queue_event = lose

if faults.get("interrupt_importing"):
    import sys

    class Interrupter:
        """A Ctrl-C that arrives exactly while the module is being imported."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == faults["interrupt_importing"]:
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, Interrupter)

if faults.get("missing_modules"):
    import sys

    class Uninstalled:
        """Modules that are not there, whatever is installed."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            if name in faults["missing_modules"]:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Uninstalled)

if faults.get("kill_before_journal"):
    import chunkd.service.journal

    real_append = chunkd.service.journal.Journal.append

    def killed_append(self, event, *args, **kwargs):
        if event == faults["kill_before_journal"]:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_append(self, event, *args, **kwargs)

    chunkd.service.journal.Journal.append = killed_append

if faults.get("delete_after_reconcile"):
    import chunkd.service.daemon

    real_reconcile = chunkd.service.daemon.Daemon.reconcile

    def reconcile_then_delete(self):
        real_reconcile(self)
        os.unlink(faults["delete_after_reconcile"])

    chunkd.service.daemon.Daemon.reconcile = reconcile_then_delete

if faults.get("lance_enospc_while"):
    import lancedb.merge

    real_execute = lancedb.merge.LanceMergeInsertBuilder.execute

    def full_disk_execute(self, *args, **kwargs):
        if os.path.exists(faults["lance_enospc_while"]):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_execute(self, *args, **kwargs)

    lancedb.merge.LanceMergeInsertBuilder.execute = full_disk_execute

if faults.get("text_past_memory"):
    from chunkd.inputs import FORMATS

    class Unencodable(str):
        def encode(self, *args, **kwargs):
            raise MemoryError

    html = FORMATS["html"]

    def unencodable_parse(data, limits):
        extracted = html.parse(data, limits)
        return extracted._replace(text=Unencodable(extracted.text))

    FORMATS["html"] = html._replace(parse=unencodable_parse)

if faults.get("late_failures"):
    import time
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    real_add_done_callback = Future.add_done_callback

    def late_add_done_callback(self, fn):
        def late(future):
            if not future.cancelled() and isinstance(future.exception(), BrokenProcessPool):
                time.sleep(faults["late_failures"])
            fn(future)

        return real_add_done_callback(self, late)

    Future.add_done_callback = late_add_done_callback

if faults.get("jobs_crash"):
    import chunkd.cli.filter

    crash = faults["jobs_crash"]
    real_render = chunkd.cli.filter.render_batch

    def crashing_render(batch, *args):
        if any(str(getattr(document, "name", "")).endswith(crash["suffix"])
               for document in batch) and not (crash["once"] and os.path.exists(crash["once"])):
            if crash["once"]:
                open(crash["once"], "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return real_render(batch, *args)

    chunkd.cli.filter.render_batch = crashing_render

if faults.get("retry_first"):
    import chunkd.service.daemon

    chunkd.service.daemon.RETRY_FIRST = float(faults["retry_first"])

if faults.get("index_rows"):
    import chunkd.stores.pgvector

    chunkd.stores.pgvector.INDEX_ROWS = int(faults["index_rows"])
