"""``chunkd sync FOLDER --sink URL``: make a vector store hold exactly the folder's
current chunks, once (for a batch job or a cron), and ``--check`` that it does.

The files are the ones ``chunkd watch`` takes (``chunkd.service.inbox``: the same include
globs, hidden and partial files never), chunked with the same settings, strategy and
chunk ids. What the store already holds is read from its own bookkeeping
(``chunkd.stores``), never from memory, so a sync killed anywhere, or a store that was
down, is caught up by the next one: a file whose SHA-256 and fingerprint (chunkd's
version, the settings, the model) the store records, with every id in its rows, is
current and not even chunked; any other file is chunked, the texts of its new chunk ids
embedded (a chunk whose id the store holds keeps its vector: same id, same text), and
applied in one transaction with a group of others (each file whole: a store never
holds half a file); a source no longer in the folder is removed.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import logging
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TypeVar

import orjson

from chunkd.inputs import HEAD_BYTES, Limits, add_document_options, check_limits, say_warnings
from chunkd.model.errors import EmbedError, LLMError, SettingsError
from chunkd.service.inbox import CHUNKER, DEFAULT_INCLUDE, Inbox, InboxOptions
from chunkd.inputs.readers import (FolderLink, InputError, display_name, open_regular,
                            read_blocks)
from chunkd.settings import (CommandParser, Settings, add_settings_options, given_flags,
                             settings_from_flags)
from chunkd.stores import (DEFAULT_COLLECTION, URL_VARIABLE, Change, Sink, StoreDown,
                          StoreRefused, Stored, fingerprint, metadata, open_sink, public_url,
                          removal, retrying)
from chunkd.stores.base import row_digest
from chunkd.strategies import strategy_class
from chunkd.model.chunk import name_value
from chunkd.outputs.writers import chunk_record
from chunkd.llm.ledger import document_lines, run_lines, start_run
from chunkd.pipeline import Pipeline

if TYPE_CHECKING:
    from chunkd.embeddings.models import Embedder
    from chunkd.service.metrics import Metrics

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STORE = 0, 1, 2, 3
log = logging.getLogger("chunkd.service.sync")
T = TypeVar("T")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="chunkd sync",
        description="Make a vector store hold exactly the current chunks of the files in "
                    "FOLDER (the files chunkd watch takes), with their vectors: chunk and "
                    "embed what changed, apply each file in one transaction, delete what "
                    "is no longer in FOLDER. --check only compares.",
        epilog="Exit status: 0 the store equals the folder (after syncing, or as "
               "checked), 1 some files could not be chunked, embedded or applied (the "
               "others were; the store keeps their previous state) or --check found "
               "differences, 2 bad options, 3 the store could not be reached (after "
               "--retries) or its tables are not usable.")
    parser.add_argument("folder", type=Path, metavar="FOLDER", help="the folder to mirror")
    add_sink_options(parser, "FOLDER", "syncing")
    parser.add_argument("--check", action="store_true",
                        help="change nothing: list the files missing, stale or orphaned "
                             "in the store and those whose ids differ; exit 0 only when "
                             "the store equals the folder")
    parser.add_argument("--include", action="append", metavar="GLOB",
                        help="file names to take; repeatable (default: as chunkd watch: "
                             f"{' '.join(DEFAULT_INCLUDE)}, and with --strategy code the "
                             "source files of its languages)")
    parser.add_argument("--recursive", action="store_true", help="also take subfolders")
    parser.add_argument("--follow-symlinks", action="store_true",
                        help="take symbolic links to files too")
    add_document_options(parser, max_bytes="larger files are not chunked but reported as errors")
    parser.add_argument("--retries", type=int, default=5, metavar="N",
                        help="while the store cannot be reached, try a call N more times, "
                             "waiting 0.5 s, then twice as long each time up to 30 s "
                             "(default: 5)")
    parser.add_argument("-q", "--quiet", action="store_true", help="say only what is wrong")
    add_settings_options(parser)
    return parser


def add_sink_options(parser: argparse.ArgumentParser, folder: str, doing: str) -> None:
    """The options that name the store and its collection, and ``--metrics``: declared
    once for ``chunkd sync`` and ``chunkd watch`` (``folder``: the folder's metavar;
    ``doing``: what the command does while it serves the metrics)."""
    parser.add_argument("--sink", metavar="URL",
                        help="the store: postgresql://USER@HOST/DB (pgvector, in "
                             "langchain-postgres's tables; the password from PGPASSWORD "
                             "or ~/.pgpass, never the command line) or a folder (LanceDB); "
                             f"default: ${URL_VARIABLE}")
    parser.add_argument("--collection", default=DEFAULT_COLLECTION, metavar="NAME",
                        help="the collection (pgvector) or table (LanceDB) to write "
                             f"(default: {DEFAULT_COLLECTION})")
    parser.add_argument("--origin", metavar="NAME",
                        help=f"the name this folder's files go by in the collection, so "
                             "that syncs of other folders into it keep to theirs (default: "
                             f"{folder}'s absolute path)")
    parser.add_argument("--metrics", metavar="HOST:PORT",
                        help=f"serve Prometheus metrics at http://HOST:PORT/metrics while "
                             f"{doing}")


# --- what the folder holds ------------------------------------------------------------

def store_name(relative: str) -> str:
    """A file's name as the store's ``source`` holds it: its path relative to the
    folder; as JSON, for a name that is not UTF-8, its ``{"bytes": ...}`` form, and for
    one that begins as that form does (``{"``), ``{"name": ...}``: no two files share a
    source, whatever their names."""
    value = name_value(relative)
    if isinstance(value, str) and not value.startswith('{"'):
        return value
    return orjson.dumps(value if not isinstance(value, str) else {"name": value}).decode()


@contextmanager
def regular_file(root: str, relative: str, follow_symlinks: bool) -> Iterator[BinaryIO]:
    """The regular file at ``relative`` in the folder ``root``, open (``open_regular``):
    through no symbolic link to a folder, nor to the file unless ``follow_symlinks``,
    and never blocking on a FIFO; ``InputError`` saying why not.
    What is read from it is the file checked, whatever its name is made to point to
    meanwhile."""
    where = display_name(os.path.join(root, relative))
    try:
        stream = open_regular(relative, follow_symlinks, root)
    except OSError as error:
        if error.errno == errno.ELOOP and not follow_symlinks and \
                not isinstance(error, FolderLink):
            raise InputError(f"{where}: a symbolic link (not followed)") from None
        raise InputError(f"{where}: {error.strerror or error}") from None
    with stream:   # what fails while it is read or chunked is not the open's error
        yield stream


def blocks(stream: BinaryIO, seen: Callable[[bytes], None], where: str) -> Iterator[bytes]:
    """The file's blocks (``read_blocks``), each ``seen``; a failed read an
    ``InputError``."""
    try:
        yield from read_blocks(stream, seen)
    except OSError as error:
        raise InputError(f"{where}: read failed: {error.strerror or error}") from None


class OverLimit(InputError):
    """A file over ``--max-bytes``: not chunked, so the store keeps none of it (as the
    daemon gives it an error result, which removes it)."""


def bounded(digest: Callable[[bytes], object], max_bytes: int,
            where: str) -> Callable[[bytes], None]:
    """What sees each block read: ``digest``, until more than ``max_bytes`` were read."""
    read = 0

    def seen(block: bytes) -> None:
        nonlocal read
        read += len(block)
        if read > max_bytes:
            raise OverLimit(f"{where}: over --max-bytes {max_bytes} bytes")
        digest(block)
    return seen


def file_sha256(root: str, relative: str, max_bytes: int, follow_symlinks: bool) -> str:
    """The SHA-256 of a regular file's bytes (``regular_file``); ``InputError`` saying
    why not."""
    digest = hashlib.sha256()
    where = display_name(os.path.join(root, relative))
    with regular_file(root, relative, follow_symlinks) as stream:
        for _ in blocks(stream, bounded(digest.update, max_bytes, where), where):
            pass
    return digest.hexdigest()


def chunk_file(root: str, relative: str, pipeline: Pipeline,
               follow_symlinks: bool) -> tuple[str, list[dict]]:
    """The SHA-256 of the bytes chunked and the file's records, as the daemon's result
    holds them (the chunk ids of ``relative``); ``InputError`` if it cannot be chunked,
    ``EmbedError`` if the semantic strategy's model fails (the file may chunk later).
    The file is opened once (``regular_file``) and read up to the pipeline's
    ``limits.max_bytes`` (``OverLimit`` past it)."""
    digest = hashlib.sha256()
    where = display_name(os.path.join(root, relative))
    seen = bounded(digest.update, pipeline.limits.max_bytes, where)
    with regular_file(root, relative, follow_symlinks) as stream:
        document = pipeline.read(relative, os.pread(stream.fileno(), HEAD_BYTES, 0),
                                 blocks(stream, seen, where), where)
        if document.extracted is not None:
            say_warnings(where, document.extracted)
        records = [chunk_record(chunk) for chunks in pipeline.chunks(document)
                   for chunk in chunks]
    return digest.hexdigest(), records


# --- the model ------------------------------------------------------------------------

def sync_settings(args: argparse.Namespace) -> tuple[Settings, Embedder]:
    """The chunking settings (``chunk_settings``) and the model that embeds the chunks
    (``--embed`` or ``--embed-url``): the one place ``chunkd sync`` chooses it;
    ``SettingsError`` if none is given or it is not a model. A local model is checked
    (its folder, files and identity) but loaded only when a file is first embedded: a
    sync that finds every file current never loads PyTorch, and one that cannot load
    the model fails those files as any embedding failure does."""
    from chunkd.embeddings.selection import embedder, loading_deferred, one_model

    one_model(vars(args), lambda name: "--" + name.replace("_", "-"))
    if args.embed_url is None and args.embed is None:
        raise SettingsError("chunkd sync needs the model that embeds the chunks: --embed "
                            "MODEL or --embed-url URL --embed-model NAME")
    with loading_deferred():
        settings = chunk_settings(args)
    return settings, embedder(settings)


class Background:
    """A call made on a daemon thread (a Ctrl-C never waits for it); ``result`` waits for
    it, then returns its value or raises its exception."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.call = call
        self.value: object = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="chunkd-embed-ahead", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.value = self.call()
        except BaseException as error:  # noqa: BLE001 (raised where the result is taken)
            self.error = error

    def result(self) -> object:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.value


def chunk_settings(args: argparse.Namespace) -> Settings:
    """The chunking settings the options give, with chunk ids (the rows' ids) and
    vectors: the store's chunks are embedded, so in every strategy the model's options
    are taken and sizes count within its window (``--vectors``); ``chunkd watch --sink``
    gives the same settings, so that either checks what the other wrote."""
    return settings_from_flags(given_flags(args) | {"vectors": True, "ids": True})


def store_fingerprint(settings: Settings, model: str) -> str:
    """How a store's rows of a source were made, as its bookkeeping records it:
    chunkd's version, the chunking settings (``chunk_settings``) and the model's
    identity. ``chunkd watch --sink`` and ``chunkd sync`` give the same one for the
    same options, so that either checks what the other wrote."""
    return fingerprint({"chunker": CHUNKER, "settings": settings.as_dict(), "model": model})


# --- syncing --------------------------------------------------------------------------

#: A transaction holds at most this many files, or about this many records: their new
#: texts go to the model in one call, and the store commits once.
GROUP_FILES, GROUP_RECORDS = 64, 4096


@dataclass
class Pending:
    """A file's change on its way to the store, and the ids whose vectors it keeps;
    ``relative``: the file's path, where it was chunked."""

    name: str
    where: str
    change: Change
    kept: set[str] = field(default_factory=set)
    relative: str | None = None


@dataclass
class Tally:
    applied: int = 0
    removed: int = 0
    current: int = 0
    left: int = 0
    failed: int = 0
    embedded: int = 0


class Sync:
    """One run over the folder: ``run`` syncs, ``check`` compares."""

    def __init__(self, args: argparse.Namespace, inbox: Inbox, settings: Settings,
                 embedder: Embedder, sink: Sink, metrics: Metrics | None, limits: Limits) -> None:
        self.args, self.inbox = args, inbox
        self.embedder, self.sink, self.metrics = embedder, sink, metrics
        self.fingerprint = store_fingerprint(settings, embedder.name)
        self.pipeline = Pipeline(settings, limits)
        self.tally = Tally()
        #: The length of the store's vectors, until the model's is found to match it.
        self.declared: int | None = None

    def files(self) -> list[tuple[str, str, os.stat_result]]:
        """The folder's inputs as (store name, relative path, state), in name order."""
        found = [(store_name(relative), relative, st) for relative, st in self.inbox.scan()
                 if stat.S_ISREG(st.st_mode)]
        return sorted(found, key=lambda item: item[0])

    def store(self, call: Callable[[], T]) -> T:
        """A store call, tried again with back-off while the store is down."""
        def waiting(error: StoreDown, seconds: float) -> None:
            if self.metrics:
                self.metrics.sink_failures.labels("down").inc()
            log.warning("chunkd: %s; trying again in %.1f s", display_name(str(error)), seconds)

        try:
            return retrying(call, self.args.retries + 1, waiting)
        except StoreDown:
            if self.metrics:
                self.metrics.sink_failures.labels("down").inc()
            raise
        except StoreRefused:
            if self.metrics:
                self.metrics.sink_failures.labels("refused").inc()
            raise

    def fail(self, message: str) -> None:
        self.tally.failed += 1
        if self.metrics:
            self.metrics.files_failed.inc()
        # A name may hold a line break or a terminal's escape: one line, as it is shown.
        log.error("chunkd: %s", display_name(message))

    def run(self) -> int:
        self.declared = self.store(self.sink.vector_size)
        stored = self.store(self.sink.sources)
        rows = self.store(self.sink.rows)
        files = self.files()
        metrics = self.metrics
        if metrics:
            for name, _, st in files:
                metrics.queue.add(name, st.st_mtime)
        # Each group's new texts are embedded while the group before it is written (and
        # the next one chunked): the model and the store work at once.
        group: list[Pending] = []
        ahead: tuple[list[Pending], Background] | None = None
        for name, relative, st in files:
            pending = self.prepare(name, relative, st, stored.get(name), rows.get(name, set()))
            if metrics:
                metrics.queue.done(name)
            if pending is not None:
                group.append(pending)
            if len(group) >= GROUP_FILES \
                    or sum(len(item.change.records) for item in group) >= GROUP_RECORDS:
                embedding = (group, self.embedding(group))
                if ahead is not None:
                    self.flush(*ahead)
                ahead, group = embedding, []
        if ahead is not None:
            self.flush(*ahead)
        if group:
            self.flush(group, self.embedding(group))
        names = {name for name, _, _ in files}
        gone = [Pending(name, name, removal(name, stored.get(name))) for name in sorted(
            (stored.keys() | rows.keys()) - names)]
        for start in range(0, len(gone), GROUP_FILES):
            self.commit(gone[start:start + GROUP_FILES])
        self.store(self.sink.settle)
        return EXIT_FAILED if self.tally.failed else EXIT_OK

    def prepare(self, name: str, relative: str, st: os.stat_result, known: Stored | None,
                held: set[str]) -> Pending | None:
        """The change the file needs (chunked), or None when the store holds it as it is
        (or it cannot be read: the store keeps what it has; but a file over --max-bytes,
        or one that cannot be chunked, leaves the store)."""
        where = display_name(relative)
        try:
            sha256 = file_sha256(self.inbox.options.root, relative, self.args.max_bytes,
                                 self.args.follow_symlinks)
        except OverLimit as error:
            self.fail(f"{error}; the store keeps no chunks of it")
            return (Pending(name, where, removal(name, known)) if known is not None or held
                    else None)
        except InputError as error:
            self.fail(str(error))
            return None
        if known is not None and known.sha256 == sha256 and not known.altered \
                and known.fingerprint == self.fingerprint and known.ids == held:
            self.tally.current += 1
            return None
        if self.metrics:
            self.metrics.sink_waiting.add(name, st.st_mtime)
        try:
            sha256, records = chunk_file(self.inbox.options.root, relative, self.pipeline,
                                         self.args.follow_symlinks)
        except InputError as error:
            self.fail(f"{error}; the store keeps no chunks of it")
            return (Pending(name, where, removal(name, known)) if known is not None or held
                    else None)
        except EmbedError as error:  # the semantic strategy's model: not the file's fault
            self.fail(f"{where}: embedding failed: {error}; the store keeps its previous "
                      "state")
            return None
        except LLMError as error:  # the llm strategy's: not the file's fault either
            self.fail(f"{where}: the LLM failed: {error}; the store keeps its previous state")
            return None
        for line in document_lines():  # a strategy that asks the LLM: what it says of it
            log.warning("chunkd: %s: %s", where, line)
        if self.metrics:
            self.metrics.files_chunked.inc()
        kept = held if known is not None and known.fingerprint == self.fingerprint else set()
        return Pending(name, where, Change(name, sha256, self.fingerprint, records, known), kept,
                       relative)

    def flush(self, group: list[Pending], vectors: Background) -> None:
        """Apply a group (one transaction) once its ``vectors`` are made."""
        try:
            vectors.result()
        except EmbedError as error:
            for item in group:
                self.fail(f"{item.where}: embedding failed: {error}; the store keeps its "
                          "previous state")
            return
        self.commit(group)

    def commit(self, group: list[Pending], again: bool = True) -> None:
        """Apply a group in one transaction; a group the store refuses is applied a
        source at a time, so that only the source at fault is left out. A file that
        another writer stored meanwhile is tried ``again`` (``superseded``)."""
        if not group:
            return
        try:
            left = set(self.store(lambda: self.sink.apply([item.change for item in group])))
        except StoreRefused as error:
            if len(group) > 1:
                for item in group:
                    self.commit([item], again)
            else:
                self.fail(f"{error}; the store keeps its previous state of {group[0].where}")
            return
        if left:
            self.superseded([item for item in group if item.name in left], again)
            group = [item for item in group if item.name not in left]
        if not group:  # every file was another writer's: the store committed nothing
            return
        if self.metrics:
            kind = "remove" if all(item.change.sha256 is None for item in group) else "apply"
            self.metrics.sink_transactions.labels(kind).inc()
        for item in group:
            if self.metrics:
                self.metrics.sink_waiting.done(item.name)
            count = len(item.change.records)
            if item.change.sha256 is None:
                self.tally.removed += 1
                log.info("removed %s", item.where)
            else:
                self.tally.applied += 1
                log.info("applied %s: %d chunk%s", item.where, count, "" if count == 1 else "s")

    def superseded(self, group: list[Pending], again: bool) -> None:
        """Files another writer (the daemon, another sync) stored while this sync ran:
        each is applied ``again``, against what the store holds now, if the folder
        still holds what this sync read (a removed file is still absent); else the
        store keeps what that writer stored, made from a later state of the file."""
        stored = self.store(self.sink.sources) if again else {}
        present = {name for name, _, _ in self.files()} if again and any(
            item.relative is None for item in group) else set()
        retry = []
        for item in group:
            now = stored.get(item.name)
            if again and (now.holds(item.change) if now is not None
                          else item.change.sha256 is None):
                self.tally.current += 1  # that writer stored this very state
            elif again and self.still_read(item, present):
                retry.append(replace(item, change=replace(item.change,
                                                          previous=stored.get(item.name))))
                continue  # still waiting: its commit marks it done
            else:
                self.tally.left += 1
                log.info("left %s as another writer stored it during this sync (the "
                         "file changed meanwhile)", item.where)
            if self.metrics:  # the store keeps what it holds of it: nothing waits
                self.metrics.sink_waiting.done(item.name)
        self.commit(retry, again=False)

    def still_read(self, item: Pending, present: set[str]) -> bool:
        """Whether the folder holds the file as this sync read it (``present``: the
        folder's names, for a removal)."""
        if item.relative is None:
            return item.name not in present
        try:
            return item.change.sha256 == file_sha256(
                self.inbox.options.root, item.relative, self.args.max_bytes,
                self.args.follow_symlinks)
        except InputError:
            return False

    def embedding(self, group: list[Pending]) -> Background:
        """Give each record of a group its vector: the store's for an id it holds (same
        id, same text), read now, else the model's (the group's texts in one call), made
        on a thread of its own; its ``result`` is the wait."""
        records = [record for item in group for record in item.change.records]
        reuse = [record["chunk_id"] for item in group for record in item.change.records
                 if record["chunk_id"] in item.kept]
        known = self.store(lambda: self.sink.vectors(reuse)) if reuse else {}
        for record in records:
            if record["chunk_id"] in known:
                record["vector"] = known[record["chunk_id"]]
        missing = [record for record in records if record["chunk_id"] not in known]
        if self.metrics:
            self.metrics.cache_hits.inc(len(records) - len(missing))
        return Background(lambda: self.embed(missing))

    def embed(self, missing: list[dict]) -> None:
        """Give ``missing`` records the model's vectors (the store's length checked on
        the first text embedded, before any other is)."""
        if not missing:
            return
        texts = [record.get("embed_text") or record["text"] for record in missing]
        vectors: list = []
        if self.declared is not None:  # one text first: the store may take none
            vectors = list(self.embedder.embed(texts[:1]))
            self.check_dimension(len(vectors[0]))
        if len(texts) > len(vectors):
            vectors += list(self.embedder.embed(texts[len(vectors):]))
        for record, vector in zip(missing, vectors):
            record["vector"] = vector
        self.tally.embedded += len(missing)
        if self.metrics:
            self.metrics.texts_embedded.inc(len(missing))

    def check_dimension(self, made: int) -> None:
        """``StoreRefused`` (the run stops: every file needs it) when the store's vectors
        are not of the length the model makes; checked on the first text embedded,
        before any other is."""
        if self.declared is not None and made != self.declared:
            raise StoreRefused(
                f"{self.sink.where}: its vectors have {self.declared} dimensions, the model "
                f"makes {made} (sync into another --collection, or with the model it was "
                "made with)")
        self.declared = None

    def check(self) -> int:
        """List how the store differs from the folder (stdout, a line a source): its
        bookkeeping, its rows' ids, and what a reader sees of each row (its text and
        metadata)."""
        self.store(self.sink.vector_size)  # a table without a column chunkd writes: refused
        stored = self.store(self.sink.sources)
        rows = self.store(self.sink.rows)
        contents = self.store(self.sink.contents)
        files = self.files()
        problems: list[str] = []
        for name, relative, _ in files:
            known, held = stored.get(name), rows.get(name, set())
            try:
                sha256, records = chunk_file(self.inbox.options.root, relative, self.pipeline,
                                             self.args.follow_symlinks)
            except (InputError, EmbedError, LLMError) as error:
                problems.append(f"unreadable {name}: {error}")
                continue
            expected = {record["chunk_id"] for record in records}
            if known is None:
                if expected or held:
                    problems.append(f"missing {name}")
                continue
            if known.sha256 != sha256 or known.fingerprint != self.fingerprint:
                problems.append(f"stale {name}")
            elif expected != held or known.ids != held:
                # The folder's ids against the rows; else the bookkeeping's against them.
                said = (f"{len(expected - held)} of the folder's not in the store, "
                        f"{len(held - expected)} in the store not of the folder"
                        if expected != held else
                        f"its bookkeeping records {len(known.ids - held)} ids without a row, "
                        f"and not {len(held - known.ids)} of its rows")
                problems.append(f"ids {name}: {said}")
            else:
                digests = contents.get(name, {})
                empty = sum(record["chunk_id"] not in digests for record in records)
                altered = sum(record["chunk_id"] in digests and digests[record["chunk_id"]]
                              != row_digest(record["text"], metadata(
                                  record, name, self.sink.origin, sha256, self.fingerprint))
                              for record in records)
                if empty:
                    problems.append(f"stale {name}: {empty} of its rows hold no embedding")
                elif altered:
                    problems.append(f"stale {name}: {altered} of its rows hold another text "
                                    "or metadata than its chunks")
                elif known.altered:
                    problems.append(f"stale {name}: its rows are not those its bookkeeping "
                                    "recorded")
        names = {name for name, _, _ in files}
        problems += [f"orphaned {name}" for name in sorted((stored.keys() | rows.keys()) - names)]
        out = sys.stdout
        for line in problems:  # one line each, whatever a name holds
            out.write(display_name(line) + "\n")
        out.flush()
        if not self.args.quiet:
            print(f"chunkd sync --check: {len(files)} files, {len(problems)} differences "
                  f"from {self.sink.where}", file=sys.stderr)
        return EXIT_FAILED if problems else EXIT_OK


def main(argv: list[str]) -> int:
    """``chunkd sync``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for logger in (log, logging.getLogger("chunkd.stores")):  # the stores' own lines too
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING if args.quiet else logging.INFO)
        logger.propagate = False
    url = args.sink or os.environ.get(URL_VARIABLE)
    if not url:
        parser.error(f"give the store: --sink URL, or set {URL_VARIABLE}")
    if args.retries < 0:
        parser.error("--retries must be 0 or more")
    limits = check_limits(parser, args.max_bytes, args.extract_timeout)
    try:
        settings, embedder = sync_settings(args)
    except SettingsError as error:
        parser.error(str(error))
    root = args.folder.resolve()
    if not root.is_dir():
        parser.error(f"{display_name(str(args.folder))} is not a folder")
    options = InboxOptions(
        str(root), settings, recursive=args.recursive, max_bytes=args.max_bytes,
        follow_symlinks=args.follow_symlinks, extract_seconds=limits.seconds,
        include=tuple(args.include or DEFAULT_INCLUDE + strategy_class(settings.strategy).include))
    metrics = None
    try:
        if args.metrics:
            from chunkd.service.metrics import Metrics
            metrics = Metrics()
            metrics.serve(args.metrics)
        sink = open_sink(url, args.collection, args.origin or str(root),
                         settings.record_fields())
    except SettingsError as error:
        parser.error(str(error))
    except (OSError, ValueError) as error:
        parser.error(f"--metrics {args.metrics}: {getattr(error, 'strerror', None) or error}")
    try:
        start_run()  # what an LLM strategy says is this run's
        sync = Sync(args, Inbox(options), settings, embedder, sink, metrics, limits)
        status = sync.check() if args.check else sync.run()
    except StoreDown as error:
        print(f"chunkd: {display_name(str(error))} (gave up after {args.retries + 1} tries)",
              file=sys.stderr)
        return EXIT_STORE
    except StoreRefused as error:
        print(f"chunkd: {display_name(str(error))}", file=sys.stderr)
        return EXIT_STORE
    except KeyboardInterrupt:
        return 130
    finally:
        sink.close()
    if not args.check and not args.quiet:
        tally = sync.tally
        left = f"{tally.left} left to another writer, " if tally.left else ""
        print(f"chunkd sync: {tally.applied} applied, {tally.removed} removed, "
              f"{tally.current} current, {left}{tally.failed} failed, {tally.embedded} texts "
              f"embedded; {display_name(public_url(url))} collection "
              f"{display_name(args.collection)}", file=sys.stderr)
        for line in run_lines():  # what a strategy's questions to the LLM cost
            print(f"chunkd sync: {line}", file=sys.stderr)
    return status
