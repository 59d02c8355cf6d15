"""The inbox: which files to take, where their results go, and chunking one file safely.

For an input ``NAME`` the result is ``NAME.chunks.json`` (or ``.chunks.msgpack``), or
``NAME.error.json`` when the file cannot be chunked, beside it or under the output
folder. A result is written to a hidden temporary file in its folder, synced and
renamed into place, so a reader never sees a partial one; its records are spooled as
they are made (``DocumentRecords``), so that a worker never holds a whole result, and
every write is whole (``write_all``) or fails. The input itself is only
read (unless ``--move-done`` asks to move it after success).

Nothing outside the folders is ever read or written, whatever links, names or races
the daemon meets: the folders are opened once at start, and every path below them is
resolved from a folder's descriptor one component at a time with ``O_NOFOLLOW``
(``openat``), so a symbolic link anywhere on the way, or one swapped in while a file
settles, is refused rather than followed. Paths inside the inbox are relative
``str`` paths with ``/`` between components; names are bytes on Linux and are carried
losslessly (``os.fsdecode``'s surrogate escapes).
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from typing import BinaryIO

import orjson

from chunkd.model.version import __version__
from chunkd.service.changes import Changes, result_ids
from chunkd.processes.stdio import OutputError, write_all
from chunkd.embeddings.selection import EMBED_CACHE, VECTORS, batch_size, embedder, texts_sent
from chunkd.model.errors import EmbedError, LLMError
from chunkd.inputs.readers import (InputError, display_name, open_subfolder, read_blocks,
                            subfolder)
from chunkd.settings import Settings
from chunkd.model.ids import id_bytes
from chunkd.inputs import DEFAULT_SECONDS, HEAD_BYTES, Limits, default_include
from chunkd.llm.ledger import document_lines
from chunkd.pipeline import Pipeline
from chunkd.outputs.vectors import with_vectors
from chunkd.model.chunk import name_value
from chunkd.outputs.writers import DocumentRecords, Write, extracted_fields

DEFAULT_INCLUDE = ("*.txt", "*.text", "*.md", "*.markdown", "*.rst", "*.adoc", "*.org",
                   *default_include())
#: Never taken, whatever --include says: hidden files, partial downloads, editor files.
IGNORED = (".*", "*.tmp", "*.part", "*.crdownload", "*.swp", "*~")
RESULT_SUFFIX = {"json": ".chunks.json", "msgpack": ".chunks.msgpack"}
ERROR_SUFFIX = ".error.json"
TEMP_SUFFIX = ".chunkd-tmp"
#: What made a result; a result another version made is redone.
CHUNKER = f"chunkd {__version__}"

#: chunkd's own temporary names (``write_atomically``); a producer's look-alike stays.
TEMPORARY = re.compile(r"\.[0-9a-f]{16}\.chunkd-tmp")
#: An input on its way to --move-done (``move_to_done``), for an instant.
MOVING_SUFFIX = ".chunkd-moving"
MOVING = re.compile(r"\.[0-9a-f]{16}\.chunkd-moving")
OUTPUT_SUFFIXES = (*RESULT_SUFFIX.values(), ERROR_SUFFIX, TEMP_SUFFIX, MOVING_SUFFIX)
#: The longest file name Linux file systems take, in bytes.
NAME_MAX = 255


#: A file's identity and state: (device, inode, size, mtime ns, ctime ns). Any change
#: means "not settled", and a result recorded for other values must be confirmed.
Signature = tuple[int, int, int, int, int]


def signature(st: os.stat_result) -> Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _stat_record(st: os.stat_result) -> dict:
    """What a result records of its input's state, to be trusted at a restart."""
    return {"inode": st.st_ino, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}


class Abandoned(Exception):
    """The daemon is stopping: the file in hand is dropped, nothing half-written."""


class Grown(Exception):
    """The file grew past --max-bytes while it was read."""


@dataclass
class Outcome:
    """What became of one file.

    ``processed``: its result was written; ``error``: an error result was written (the
    file is at fault); ``current``: its result was already current; ``skipped``: not a
    regular file, a link, or a name no result can be written for; ``gone``: vanished;
    ``changed``: written to while read; ``failed``: the environment is at fault (a full
    disk, an unwritable output folder): try again later; ``abandoned``: stopping.

    A result or error result written also says what it changed (``changes``), the
    input's ``sha256`` and the result's file name; ``moved``: the input went to
    --move-done; ``embedded``: what its vectors cost."""

    kind: str
    message: str = ""
    signature: Signature | None = None
    changes: Changes | None = None
    sha256: str | None = None
    result: str | None = None
    moved: bool = False
    #: With --vectors: the texts sent to the model and the chunks given vectors (the
    #: others' vectors were in a cache); None when the model's cache does not count.
    embedded: tuple[int, int] | None = None


@dataclass(frozen=True)
class InboxOptions:
    """An inbox folder and how its files are chunked; picklable, for worker processes.
    Folders are absolute paths, resolved once at start. Results carry ids whatever
    ``settings.ids`` says (their ``changes`` are told by ids)."""

    root: str
    settings: Settings
    format: str = "json"
    output_dir: str | None = None
    include: tuple[str, ...] = DEFAULT_INCLUDE
    recursive: bool = False
    max_bytes: int = 64 * 2**20
    follow_symlinks: bool = False
    move_done: str | None = None
    #: The most seconds a PDF, HTML or DOCX file's extraction may take.
    extract_seconds: float = DEFAULT_SECONDS
    #: Whether a PDF's pages without text are read by OCR (``--ocr``).
    ocr: bool = False
    #: (device, inode) of each folder, as the daemon opened them at start.
    identities: dict = field(default_factory=dict)


class FolderChanged(Exception):
    """A folder is no longer the one the daemon opened at start."""


def open_folder(path: str, expected: tuple[int, int] | None = None) -> int:
    """A descriptor of the folder at ``path`` (links in the path the operator gave
    are followed, once, here); it must be ``expected`` (device, inode) if given."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    st = os.fstat(fd)
    if expected is not None and (st.st_dev, st.st_ino) != tuple(expected):
        os.close(fd)
        raise FolderChanged(f"{path} was replaced since the daemon started")
    return fd


def _split(relative: str) -> tuple[list[str], str]:
    *parts, name = relative.split("/")
    return parts, name


class Inbox:
    """An inbox's open folders and the work on one file."""

    def __init__(self, options: InboxOptions, check_identity: bool = False) -> None:
        """Open the folders; a worker process checks that they are the daemon's."""
        self.options = options
        self.settings = options.settings
        self.recorded_settings = options.settings.as_dict()
        expect = options.identities if check_identity else {}
        self.root = open_folder(options.root, expect.get("root"))
        self.output = (self.root if options.output_dir is None
                       else open_folder(options.output_dir, expect.get("output")))
        self.done = (None if options.move_done is None
                     else open_folder(options.move_done, expect.get("done")))
        self.result_suffix = RESULT_SUFFIX[options.format]
        self._pipeline: Pipeline | None = None  # built on first use: the main process never chunks
        cache = self.settings[EMBED_CACHE]
        #: The embedding cache's folder if it is in the inbox: never an input.
        self.cache = None if cache is None else self.relative(os.path.realpath(cache))

    def pipeline(self) -> Pipeline:
        """How its files become chunks, with ids whatever the settings say (a result's
        changes are told by them)."""
        if self._pipeline is None:
            options = self.options
            self._pipeline = Pipeline(self.settings, Limits(options.max_bytes,
                                                            options.extract_seconds, options.ocr),
                                      ids=True)
        return self._pipeline

    def identities(self) -> dict:
        folders = {"root": self.root, "output": self.output, "done": self.done}
        return {name: (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
                for name, fd in folders.items() if fd is not None}

    # --- names -----------------------------------------------------------------------

    def wants(self, relative: str) -> bool:
        """Whether a relative path's name makes it an input (its type is checked later)."""
        parts, name = _split(relative)
        if not name or (parts and not self.options.recursive):
            return False
        if self.in_cache(relative):
            return False
        if any(not part or part.startswith(".") for part in parts):
            return False
        return self.wants_name(name)

    def in_cache(self, relative: str) -> bool:
        return self.cache is not None and (relative + "/").startswith(self.cache + "/")

    def wants_name(self, name: str) -> bool:
        if name.endswith(OUTPUT_SUFFIXES) or any(fnmatch.fnmatch(name, p) for p in IGNORED):
            return False
        return any(fnmatch.fnmatch(name, pattern) for pattern in self.options.include)

    def relative(self, path: str) -> str | None:
        """The inbox-relative form of an absolute path under the inbox, or None."""
        root = self.options.root.rstrip("/") + "/"
        return path[len(root):] if path.startswith(root) and len(path) > len(root) else None

    # --- looking ---------------------------------------------------------------------

    def stat(self, relative: str) -> os.stat_result | None:
        """The input's state (its link's own, unless --follow-symlinks), or None when
        it is gone or its folder path is not a plain folder inside the inbox."""
        parts, name = _split(relative)
        try:
            with subfolder(self.root, parts) as folder:
                return os.stat(name, dir_fd=folder, follow_symlinks=self.options.follow_symlinks)
        except OSError:
            return None

    def scan(self, start: str = "") -> Iterator[tuple[str, os.stat_result]]:
        """Every input in the inbox (or under its folder ``start``, ``"a/b/"``), with
        its state; folders are entered only with --recursive, never through links,
        never hidden ones."""
        folders = [start]
        while folders:
            prefix = folders.pop()
            try:
                with subfolder(self.root, prefix.split("/")[:-1]) as folder:
                    for entry in list(os.scandir(folder)):
                        relative = prefix + entry.name
                        if entry.name.startswith(".") or self.in_cache(relative):
                            continue
                        if self.options.recursive and entry.is_dir(follow_symlinks=False):
                            folders.append(relative + "/")
                        elif self.wants_name(entry.name):
                            try:
                                st = os.stat(entry.name, dir_fd=folder,
                                             follow_symlinks=self.options.follow_symlinks)
                            except OSError:
                                continue
                            yield relative, st
            except OSError:
                continue  # vanished, or swapped for a link: nothing to take there

    def scan_folder(self, relative: str) -> Iterator[tuple[str, os.stat_result]]:
        """The inputs under one subfolder (a folder moved into the inbox); nothing if
        ``relative`` is not a folder the daemon enters."""
        if self.options.recursive and not any(
                not part or part.startswith(".") for part in relative.split("/")):
            yield from self.scan(relative + "/")

    # --- results ---------------------------------------------------------------------

    def recorded(self, relative: str, suffix: str) -> dict | None:
        """The metadata of the input's result (or error result), read from its head
        only; None if missing, unreadable or not chunkd's."""
        parts, name = _split(relative)
        try:
            with subfolder(self.output, parts) as folder:
                # Non-blocking, and regular files only: a FIFO planted at a result's
                # name must not hang the daemon.
                fd = os.open(name + suffix, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                             | os.O_CLOEXEC, dir_fd=folder)
                with open(fd, "rb", buffering=0) as stream:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        return None
                    header = _read_header(stream, suffix)
        except Exception:  # missing, unreadable or not ours: not current
            return None
        return header if isinstance(header, dict) else None

    def read_result(self, relative: str) -> dict | None:
        """The input's result whole (its chunks too, in this daemon's format), as a
        consumer of the results reads it; None if there is none, or it is unreadable or
        not chunkd's (a file planted at its name, a FIFO, is never read)."""
        parts, name = _split(relative)
        try:
            with subfolder(self.output, parts) as folder:
                fd = os.open(name + self.result_suffix, os.O_RDONLY | os.O_NOFOLLOW
                             | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
                with open(fd, "rb", buffering=0) as stream:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        return None
                    data = b"".join(read_blocks(stream))
            if self.options.format == "msgpack":
                import msgpack

                result = msgpack.unpackb(data, raw=False)
            else:
                result = orjson.loads(data)
        except Exception:  # missing, unreadable or not ours
            return None
        return result if isinstance(result, dict) else None

    def current(self, relative: str, st: os.stat_result) -> bool:
        """Whether the input has a current result (or error result): one recorded
        by this chunkd version (another may chunk differently) for these settings, this
        size, and this inode, mtime and ctime (users can set an mtime but not a ctime,
        so these are trusted without reading the input)."""
        for suffix in (self.result_suffix, ERROR_SUFFIX):
            recorded = self.recorded(relative, suffix)
            if recorded is not None and recorded.get("cause") == "environment":
                continue  # a missing extra may be installed now: tried again
            if recorded is not None and recorded.get("size") == st.st_size \
                    and recorded.get("chunker") == CHUNKER \
                    and recorded.get("settings") == self.recorded_settings \
                    and recorded.get("stat") == _stat_record(st):
                return True
        return False

    def previous_ids(self, relative: str) -> dict[bytes, None]:
        """The ids of the input's result now (in this format or the other), in order:
        what a new result replaces; none for an error result or none at all."""
        parts, name = _split(relative)
        suffixes = sorted(RESULT_SUFFIX.items(), key=lambda item: item[1] != self.result_suffix)
        try:
            with subfolder(self.output, parts) as folder:
                for format, suffix in suffixes:
                    try:
                        fd = os.open(name + suffix, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                                     | os.O_CLOEXEC, dir_fd=folder)
                    except FileNotFoundError:
                        continue
                    with open(fd, "rb", buffering=0) as stream:
                        if not stat.S_ISREG(os.fstat(fd).st_mode):
                            continue
                        return dict.fromkeys(result_ids(stream, format))
        except Exception:  # unreadable or not chunkd's: nothing it holds is known
            return {}
        return {}

    def remove_results(self, relative: str) -> Changes | None:
        """Remove the input's results, in every format: they belong to a file that is
        no longer there (or no longer taken); the ids that left with them, or None when
        there was no result to remove."""
        parts, name = _split(relative)
        previous = self.previous_ids(relative)
        removed = False
        try:
            with subfolder(self.output, parts) as folder:
                for suffix in (*RESULT_SUFFIX.values(), ERROR_SUFFIX):
                    try:
                        os.unlink(name + suffix, dir_fd=folder)
                        removed = True
                    except FileNotFoundError:
                        pass
        except OSError:
            pass
        return Changes.between(previous, b"") if removed else None

    def result_stat(self, result: str) -> tuple[int, int, int] | None:
        """A result file's identity (inode, size, mtime ns), by its path in the output
        folder; None if it is not there."""
        parts, name = _split(result)
        try:
            with subfolder(self.output, parts) as folder:
                st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def results(self) -> Iterator[tuple[str, str]]:
        """Every result in the output folder (its subfolders too with --recursive,
        never hidden ones, never through links): its input's relative path and its
        suffix."""
        suffixes = (*RESULT_SUFFIX.values(), ERROR_SUFFIX)
        folders: list[list[str]] = [[]]
        while folders:
            parts = folders.pop()
            try:
                with subfolder(self.output, parts) as folder:
                    for entry in list(os.scandir(folder)):
                        if entry.name.startswith("."):
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            if self.options.recursive:
                                folders.append(parts + [entry.name])
                            continue
                        for suffix in suffixes:
                            if entry.name.endswith(suffix) and len(entry.name) > len(suffix):
                                yield "/".join([*parts, entry.name[:-len(suffix)]]), suffix
            except OSError:
                continue

    def remove_stale_temporaries(self) -> tuple[int, list[str]]:
        """Delete the temporary files a killed run left (only chunkd's own); and the
        inputs a run killed in the middle of a --move-done left under a hidden name
        (they are not deleted: an operator must give them a name back)."""
        removed, stranded = 0, []
        folders: list[list[str]] = [[]]
        while folders:
            parts = folders.pop()
            try:
                with subfolder(self.output, parts) as folder:
                    for entry in list(os.scandir(folder)):
                        if TEMPORARY.fullmatch(entry.name):
                            try:
                                os.unlink(entry.name, dir_fd=folder)
                                removed += 1
                            except FileNotFoundError:
                                pass
                        elif MOVING.fullmatch(entry.name):
                            stranded.append("/".join([*parts, entry.name]))
                        elif (self.options.recursive and not entry.name.startswith(".")
                              and entry.is_dir(follow_symlinks=False)):
                            folders.append(parts + [entry.name])
            except OSError:
                continue
        return removed, stranded

    # --- one file --------------------------------------------------------------------

    def process(self, relative: str, stopping: Callable[[], bool],
                beat: Callable[[], None] = lambda: None) -> Outcome:
        """Chunk one input into its result, unless its result is current; never raises
        for a bad file or a failing environment. ``beat`` is called as work progresses
        (the watchdog's sign of life); ``stopping`` makes it abandon the file."""
        parts, name = _split(relative)
        try:
            folder = open_subfolder(self.root, parts)
        except FileNotFoundError:
            return Outcome("gone", "vanished before it was read")
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                return Outcome("skipped", "a folder on its path is a symbolic link (not followed)")
            return Outcome("failed", f"cannot open its folder: {error.strerror}")
        try:
            return self._process_in(folder, relative, name, stopping, beat)
        except Abandoned:
            return Outcome("abandoned")
        except OSError as error:  # the inbox itself misbehaves (EIO, EACCES on a folder)
            return Outcome("failed", error.strerror or str(error))
        finally:
            os.close(folder)

    def _process_in(self, folder: int, relative: str, name: str,
                    stopping: Callable[[], bool], beat: Callable[[], None]) -> Outcome:
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=self.options.follow_symlinks)
        except FileNotFoundError:
            return Outcome("gone", "vanished before it was read")
        unchunkable = self.unchunkable(st, relative)
        if unchunkable is not None:  # the daemon removes its results (and says so)
            return Outcome("skipped", unchunkable, signature(st))
        if st.st_size > self.options.max_bytes:
            return self.fail(relative, st, f"file is {st.st_size} bytes, over --max-bytes "
                                           f"{self.options.max_bytes}; raise the limit to chunk it")
        if self.current(relative, st):
            return Outcome("current", "result is current", signature(st))
        # A stale result stays until the new one (or an error result) replaces it,
        # which then says what changed.
        return self.chunk_file(folder, relative, name, st, stopping, beat)

    def chunk_file(self, folder: int, relative: str, name: str, st: os.stat_result,
                   stopping: Callable[[], bool], beat: Callable[[], None]) -> Outcome:
        started = time.monotonic()
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
        if not self.options.follow_symlinks:
            flags |= os.O_NOFOLLOW
        try:
            fd = os.open(name, flags, dir_fd=folder)
        except FileNotFoundError:
            return Outcome("gone", "vanished before it was read")
        except OSError as error:
            if error.errno == errno.ELOOP:
                return Outcome("skipped", "symbolic link (not followed)")
            return self.fail(relative, st, f"cannot open: {error.strerror}")
        with open(fd, "rb", buffering=0) as stream:
            before = os.fstat(fd)
            if signature(before) != signature(st):  # swapped or written to since the stat
                return Outcome("changed", "replaced or changed before it was read",
                               signature(before))
            # Records are spooled as they are made (to a file in the output folder past
            # a MiB): a result is never held whole in memory.
            with closing(DocumentRecords(self.options.format, self._spool_file)) as records:
                return self._chunk_open(stream, records, folder, relative, name, before,
                                        started, stopping, beat)

    def _chunk_open(self, stream: BinaryIO, records: DocumentRecords, folder: int,
                    relative: str, name: str, before: os.stat_result, started: float,
                    stopping: Callable[[], bool], beat: Callable[[], None]) -> Outcome:
        """Chunk the open input ``stream`` into ``records``, then write its result."""
        digest = hashlib.sha256()
        read = 0

        def on_bytes(data: bytes) -> None:
            nonlocal read
            if stopping():
                raise Abandoned()
            read += len(data)
            if read > self.options.max_bytes:  # it grows: no more than the limit in memory
                raise Grown()
            digest.update(data)
            beat()

        made_ids = bytearray()   # the new result's ids, 16 bytes each
        pipeline = self.pipeline()
        where = display_name(relative)
        try:
            document = pipeline.read(relative, os.pread(stream.fileno(), HEAD_BYTES, 0),
                                     read_blocks(stream, on_bytes), where,
                                     partial(self._waiting, stopping, beat))
            made_lists = pipeline.chunks(document)
            sent_before = None
            if self.settings[VECTORS]:
                model = embedder(self.settings)
                sent_before = texts_sent(model)
                made_lists = with_vectors(made_lists, model, batch_size(self.settings))
            for made in made_lists:
                for chunk in made:
                    assert chunk.chunk_id is not None, "the pipeline gives every chunk its id"
                    made_ids += id_bytes(chunk.chunk_id)
                records.add(made)
        except InputError as error:
            reason = str(error).removeprefix(f"{where}: ")
            return self.fail(relative, before, reason, folder,
                             environment=_environment_caused(error))
        except OSError as error:
            return self.fail(relative, before, f"read failed: {error.strerror}")
        except OutputError as error:  # the spool's file: the environment's failure
            return Outcome("failed", f"cannot write its result: {error}")
        except EmbedError as error:  # the model's failure, not the file's: tried again later
            return Outcome("failed", f"embedding failed: {error}")
        except LLMError as error:  # a strategy's LLM: so too
            return Outcome("failed", f"the LLM failed: {error}")
        except Grown:
            return Outcome("changed", "grew past --max-bytes while it was read",
                           signature(os.fstat(stream.fileno())))
        # The file at its name now must be the one read, unchanged: no result for a
        # file deleted, replaced or written to meanwhile.
        try:
            after = os.stat(name, dir_fd=folder, follow_symlinks=self.options.follow_symlinks)
        except FileNotFoundError:
            return Outcome("gone", "deleted while it was read")
        if signature(after) != signature(before) or read != after.st_size:
            return Outcome("changed", "changed while it was read", signature(after))
        if stopping():
            return Outcome("abandoned")
        if not self._in_inbox(folder, relative):
            return Outcome("gone", "its folder left the inbox while it was read")
        sha256 = digest.hexdigest()
        header = self.header(relative, after, sha256) | extracted_fields(document.extracted)
        changes = Changes.between(self.previous_ids(relative), bytes(made_ids))
        trailer = [("changes", partial(changes.write, format=self.options.format))]
        written = self.write_result(relative, self.result_suffix,
                                    lambda write: records.write(write, header, trailer))
        if written is not None:
            return written
        message = "; ".join([f"{records.count} chunks, {after.st_size} bytes, "
                             f"{time.monotonic() - started:.3f} s", *document_lines()])
        moved = ""
        if self.done is not None:
            moved = self.move_to_done(folder, relative, name, after)
        embedded = None
        if sent_before is not None:
            sent_after = texts_sent(embedder(self.settings))
            assert sent_after is not None, "the same model, counted before"
            embedded = (sent_after - sent_before, records.count)
        return Outcome("processed", message + moved, signature(after), changes, sha256,
                       relative + self.result_suffix, moved == MOVED, embedded)

    @staticmethod
    def _waiting(stopping: Callable[[], bool], beat: Callable[[], None]) -> None:
        """While an extraction runs: a heartbeat, or the daemon stops (and kills it)."""
        if stopping():
            raise Abandoned()
        beat()

    def _spool_file(self) -> BinaryIO:
        """A nameless file for a result's records until they are written: in the output
        folder, where the result goes, not in /tmp (which may be memory, as tmpfs).
        Where the file system cannot make one nameless, a hidden temporary file
        (``write_atomically``'s kind of name: one a crash leaves is removed at start)
        is removed at once."""
        flags = os.O_RDWR | os.O_CLOEXEC
        try:
            descriptor = os.open(".", flags | os.O_TMPFILE, 0o600, dir_fd=self.output)
        except (AttributeError, OSError):  # not Linux, or not this file system
            temporary = f".{secrets.token_hex(8)}{TEMP_SUFFIX}"
            descriptor = os.open(temporary, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                                 0o600, dir_fd=self.output)
            os.unlink(temporary, dir_fd=self.output)
        return open(descriptor, "w+b")

    def unchunkable(self, st: os.stat_result, relative: str) -> str | None:
        """Why the file at ``relative``, in this state, is skipped (a link not
        followed, a FIFO, a name too long for its result's), or None."""
        kind = _file_kind(st.st_mode)
        if kind != "regular file":
            return kind + (" (not followed; --follow-symlinks to allow)"
                           if kind == "symbolic link" else "")
        if len(os.fsencode(_split(relative)[1] + self.result_suffix)) > NAME_MAX:
            return (f"name too long for its result name (over {NAME_MAX} bytes with the "
                    "suffix); rename it")
        return None

    def _in_inbox(self, folder: int, relative: str) -> bool:
        """Whether ``folder``, opened for ``relative``, is still that folder of the
        inbox: a folder moved out while a file in it was read must get no result, and
        its file must not be moved."""
        parts, _ = _split(relative)
        if not parts:
            return True
        try:
            with subfolder(self.root, parts) as now:
                here, there = os.fstat(now), os.fstat(folder)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)

    def header(self, relative: str, st: os.stat_result | None, sha256: str | None) -> dict:
        return {"source": name_value(relative, self.options.format == "msgpack"),
                "sha256": sha256, "size": st.st_size if st is not None else None,
                "settings": self.recorded_settings, "chunker": CHUNKER,
                "stat": _stat_record(st) if st is not None else None}

    def fail(self, relative: str, st: os.stat_result, reason: str,
             folder: int | None = None, environment: bool = False) -> Outcome:
        """Write ``NAME.error.json`` with the reason, the input's size and state,
        when ``folder`` is given to read it from, its sha256, and the ids that left
        with the result it replaces; the daemon goes on. An error of the
        ``environment`` (a missing extra) says so, and is tried again at start."""
        sha256 = None
        if folder is not None:
            try:
                sha256 = self._sha256(folder, _split(relative)[1])
            except (OSError, Grown):
                pass
        document = self.header(relative, st, sha256) | {"error": reason}
        if environment:
            document["cause"] = "environment"
        changes = Changes.between(self.previous_ids(relative), b"")

        def compose(write: Write) -> None:
            write(orjson.dumps(document)[:-1] + b',"changes":')
            changes.write(write, "json")
            write(b"}")

        written = self.write_result(relative, ERROR_SUFFIX, compose)
        return written or Outcome("error", reason, signature(st), changes, sha256,
                                  relative + ERROR_SUFFIX)

    def write_result(self, relative: str, suffix: str,
                     compose: Callable[[Write], object]) -> Outcome | None:
        """Write one result, which ``compose`` writes a piece at a time (and remove the
        other kinds, an error result or a result in the other format, which no longer
        hold); None on success, else the environment's failure."""
        parts, name = _split(relative)
        others = [other for other in (*RESULT_SUFFIX.values(), ERROR_SUFFIX) if other != suffix]
        try:
            with subfolder(self.output, parts, create=True) as folder:
                for other in others:
                    try:
                        os.unlink(name + other, dir_fd=folder)
                    except FileNotFoundError:
                        pass
                write_atomically(folder, name + suffix, compose)
        except OutputError as error:  # reading the spool back
            return Outcome("failed", f"cannot write its result: {error}")
        except OSError as error:
            # A link in the way (FolderLink, whose errno is ELOOP) or a file (ENOTDIR).
            where = ("a symbolic link or a file is on its output path, where a folder "
                     "should be" if error.errno in (errno.ELOOP, errno.ENOTDIR)
                     else error.strerror)
            return Outcome("failed", f"cannot write its result: {where}")
        return None

    def move_to_done(self, folder: int, relative: str, name: str,
                     chunked: os.stat_result) -> str:
        """Move the input under --move-done: exactly the file that was chunked, and
        never over a file already there. It is first renamed to a hidden name in its
        folder (atomic, whatever is at its name now); if that is not the file chunked
        (replaced meanwhile) it is put back; else it is linked into DONE (a link fails
        where a rename would replace) and the hidden name is removed."""
        assert self.done is not None, "with --move-done only"
        done = self.done
        parts, _ = _split(relative)
        hidden = f".{secrets.token_hex(8)}{MOVING_SUFFIX}"
        if not self._in_inbox(folder, relative):
            return "; not moved: its folder left the inbox"
        try:  # checked first, so that the usual refusal does not touch the input
            with subfolder(done, parts) as target:
                os.stat(name, dir_fd=target, follow_symlinks=False)
            return "; not moved: a file of that name is already in --move-done"
        except FileNotFoundError:
            pass
        except OSError as error:
            if error.errno not in (errno.ENOTDIR, errno.ELOOP):
                return f"; not moved to --move-done: {error.strerror}"
        try:
            os.rename(name, hidden, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as error:
            return f"; not moved to --move-done: {error.strerror}"
        moved = os.stat(hidden, dir_fd=folder, follow_symlinks=self.options.follow_symlinks)
        if (moved.st_dev, moved.st_ino) != (chunked.st_dev, chunked.st_ino):
            return "; not moved: replaced since it was read" + self._put_back(folder, hidden, name)
        try:
            with subfolder(done, parts, create=True) as target:
                os.link(hidden, name, src_dir_fd=folder, dst_dir_fd=target,
                        follow_symlinks=False)
                os.unlink(hidden, dir_fd=folder)
                os.fsync(target)
                os.fsync(folder)
        except FileExistsError:
            return ("; not moved: a file of that name is already in --move-done"
                    + self._put_back(folder, hidden, name))
        except OSError as error:
            return (f"; not moved to --move-done: {error.strerror}"
                    + self._put_back(folder, hidden, name))
        return MOVED

    @staticmethod
    def _put_back(folder: int, hidden: str, name: str) -> str:
        """Give a file its name back, unless a newer file took the name meanwhile
        (then it stays under its hidden name, and the message says which)."""
        try:
            os.link(hidden, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            os.unlink(hidden, dir_fd=folder)
            return ""
        except OSError as error:
            return f" (it could not have its name back: {error.strerror}; it is kept as {hidden})"

    def _sha256(self, folder: int, name: str) -> str:
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
        if not self.options.follow_symlinks:
            flags |= os.O_NOFOLLOW
        digest = hashlib.sha256()
        with open(os.open(name, flags, dir_fd=folder), "rb", buffering=0) as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            read = 0
            for data in read_blocks(stream):
                read += len(data)
                if read > self.options.max_bytes:
                    raise Grown()
                digest.update(data)
        return digest.hexdigest()


#: What ``move_to_done`` says when the input was moved.
MOVED = "; moved to --move-done"


def _environment_caused(error: BaseException) -> bool:
    """Whether an input's error comes from this installation, not the file: a module
    missing somewhere in the chain of errors that led to it (an extra not installed)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ImportError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


#: The most of a result's head read to find its metadata: results write their chunks
#: last, and an error result is small; a larger head is not chunkd's.
HEADER_BYTES = 1 << 16


def _read_header(stream, suffix: str) -> object:
    """A result's metadata without its chunks (and without the text a PDF, HTML or DOCX
    document became, which comes before them), from at most ``HEADER_BYTES`` of its head
    (a ``,"text":`` or ``,"chunks":`` outside a JSON string cannot occur inside one, where
    every quote is escaped); a file planted at a result's name is never read whole."""
    if suffix.endswith(".msgpack"):
        import msgpack

        unpacker = msgpack.Unpacker(stream, read_size=HEADER_BYTES,
                                    max_buffer_size=HEADER_BYTES)
        header = {}
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key in ("text", "parents", "chunks"):
                break
            header[key] = unpacker.unpack()
        return header
    head = stream.read(HEADER_BYTES + 1)
    cuts = [cut for cut in (head.find(b',"text":'), head.find(b',"parents":'),
                            head.find(b',"chunks":')) if cut >= 0]
    if cuts:
        cut = min(cuts)
        return orjson.loads(head[:cut] + b"}")
    return orjson.loads(head) if len(head) <= HEADER_BYTES else None


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISREG, "regular file"), (stat.S_ISLNK, "symbolic link"),
                       (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return kind
    return "special file"


def write_atomically(folder: int, name: str, compose: Callable[[Write], object]) -> None:
    """Write ``name`` in ``folder``, as ``compose`` writes it a piece at a time, so that
    readers see the old file or the whole new one, never a part: a hidden temporary
    file (a short name, so that it fits where the result's name does), every piece
    written whole, fsync, rename, fsync of the folder."""
    temporary = f".{secrets.token_hex(8)}{TEMP_SUFFIX}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666, dir_fd=folder)
    try:
        with open(fd, "wb", closefd=True) as stream:
            compose(partial(write_all, stream))
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=folder)
        except FileNotFoundError:
            pass
        raise
    os.fsync(folder)
