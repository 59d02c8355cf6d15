"""The inbox: which files to take, where their results go, and chunking one file safely.

For an input ``NAME`` the result is ``NAME.chunks.json`` (or ``.chunks.msgpack``), or
``NAME.error.json`` when the file cannot be chunked, beside it or under the output
folder. A result is written to a hidden temporary file in its folder, synced and
renamed into place, so a reader never sees a partial one. The input itself is only
read (unless ``--move-done`` asks to move it after success).
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from chunkd import __version__
from chunkd.pipeline import Settings, chunk_blocks
from chunkd.readers import InputError, decode_blocks, read_blocks
from chunkd.writers import chunk_record, encode_document

DEFAULT_INCLUDE = ("*.txt", "*.text", "*.md", "*.markdown", "*.rst", "*.adoc", "*.org")
#: Never taken, whatever --include says: hidden files, partial downloads, editor files.
IGNORED = (".*", "*.tmp", "*.part", "*.crdownload", "*.swp", "*~")
RESULT_SUFFIX = {"json": ".chunks.json", "msgpack": ".chunks.msgpack"}
ERROR_SUFFIX = ".error.json"
TEMP_SUFFIX = ".chunkd-tmp"
OUTPUT_SUFFIXES = (*RESULT_SUFFIX.values(), ERROR_SUFFIX, TEMP_SUFFIX)

#: A file's identity and state: (inode, size, mtime in ns). A change means "not settled".
Signature = tuple[int, int, int]


def signature(st: os.stat_result) -> Signature:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Abandoned(Exception):
    """The daemon is stopping: the file in hand is dropped, nothing half-written."""


@dataclass
class Outcome:
    """What became of one file: ``processed``, ``error`` (an error result was written),
    ``current`` (its result was already current), ``skipped`` (not a regular file, or a
    link), ``gone`` (vanished before it was read) or ``changed`` (written to while read)."""

    kind: str
    message: str = ""
    signature: Signature | None = None


@dataclass(frozen=True)
class Inbox:
    """An inbox folder and how its files are chunked."""

    root: Path
    settings: Settings
    format: str = "json"
    output_dir: Path | None = None
    include: tuple[str, ...] = DEFAULT_INCLUDE
    recursive: bool = False
    max_bytes: int = 64 * 2**20
    errors: str = "strict"
    follow_symlinks: bool = False
    move_done: Path | None = None

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def wants(self, path: Path) -> bool:
        """Whether a path's name makes it an input (its type is checked later)."""
        try:
            parts = path.relative_to(self.root).parts
        except ValueError:
            return False
        if not parts or (len(parts) > 1 and not self.recursive):
            return False
        if any(part.startswith(".") for part in parts[:-1]):
            return False
        name = parts[-1]
        if name.endswith(OUTPUT_SUFFIXES) or any(fnmatch.fnmatch(name, p) for p in IGNORED):
            return False
        return any(fnmatch.fnmatch(name, pattern) for pattern in self.include)

    def output_path(self, path: Path, suffix: str) -> Path:
        base = path if self.output_dir is None else self.output_dir / path.relative_to(self.root)
        return base.with_name(base.name + suffix)

    def scan(self) -> Iterator[Path]:
        """Every path in the inbox whose name makes it an input (links not followed)."""
        folders = [self.root]
        while folders:
            folder = folders.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                path = Path(entry.path)
                if self.recursive and entry.is_dir(follow_symlinks=False) \
                        and not entry.name.startswith("."):
                    folders.append(path)
                elif self.wants(path):
                    yield path

    def output_folders(self) -> Iterator[Path]:
        yield self.root if self.output_dir is None else self.output_dir
        if self.recursive:
            base = self.root if self.output_dir is None else self.output_dir
            for folder, names, _ in os.walk(base):
                names[:] = [n for n in names if not n.startswith(".")]
                yield from (Path(folder) / n for n in names)

    def remove_stale_temporaries(self) -> int:
        """Delete the temporary files a killed run left (only chunkd's own)."""
        removed = 0
        for folder in self.output_folders():
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                if name.startswith(".") and name.endswith(TEMP_SUFFIX):
                    try:
                        os.unlink(folder / name)
                        removed += 1
                    except FileNotFoundError:
                        pass
        return removed

    # --- one file --------------------------------------------------------------------

    def process(self, path: Path, stopping: threading.Event,
                beat: Callable[[], None] = lambda: None) -> Outcome:
        """Chunk one input into its result, unless its result is current; never raises
        for a bad file. ``beat`` is called as work progresses (the watchdog's sign of
        life); ``stopping`` makes it abandon the file."""
        try:
            st = os.stat(path) if self.follow_symlinks else os.lstat(path)
        except FileNotFoundError:
            return Outcome("gone", "vanished before it was read")
        except OSError as error:
            return self.fail(path, None, f"cannot stat: {error.strerror}")
        kind = _file_kind(st.st_mode)
        if kind != "regular file":
            hint = " (not followed; --follow-symlinks to allow)" if kind == "symbolic link" else ""
            return Outcome("skipped", f"{kind}{hint}", signature(st))
        if st.st_size > self.max_bytes:
            return self.fail(path, st, f"file is {st.st_size} bytes, over --max-bytes "
                                       f"{self.max_bytes}; raise the limit to chunk it")
        for suffix in (RESULT_SUFFIX[self.format], ERROR_SUFFIX):
            recorded = self.recorded(path, suffix)
            if recorded is not None and recorded.get("size") == st.st_size \
                    and recorded.get("settings") == self.settings.as_dict():
                try:
                    if _sha256(path, stopping, beat) == recorded.get("sha256"):
                        return Outcome("current", "result is current", signature(st))
                except OSError:
                    pass  # chunking it will report the problem
        return self.chunk_file(path, stopping, beat)

    def chunk_file(self, path: Path, stopping: threading.Event,
                   beat: Callable[[], None]) -> Outcome:
        started = time.monotonic()
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
        if not self.follow_symlinks:
            flags |= os.O_NOFOLLOW
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            return Outcome("gone", "vanished before it was read")
        except OSError as error:
            if error.errno == errno.ELOOP:
                return Outcome("skipped", "symbolic link (not followed)")
            return self.fail(path, None, f"cannot open: {error.strerror}")
        with open(fd, "rb", buffering=0) as stream:
            before = os.fstat(fd)
            if _file_kind(before.st_mode) != "regular file":  # swapped since the stat
                return Outcome("skipped", _file_kind(before.st_mode), signature(before))
            digest = hashlib.sha256()
            read = 0

            def on_bytes(data: bytes) -> None:
                nonlocal read
                if stopping.is_set():
                    raise Abandoned()
                digest.update(data)
                read += len(data)
                beat()

            chunks = []
            where = self.relative(path)
            try:
                text = decode_blocks(read_blocks(stream, on_bytes), where, self.errors)
                for made in chunk_blocks(self.settings, text):
                    chunks.extend(chunk_record(chunk) for chunk in made)
            except InputError as error:
                return self.fail(path, before, str(error).removeprefix(f"{where}: "), stopping)
            except OSError as error:
                return self.fail(path, before, f"read failed: {error.strerror}", stopping)
            after = os.fstat(fd)
        if signature(after) != signature(before) or read != after.st_size:
            return Outcome("changed", "written to while it was read", signature(after))
        document = self.header(path, after.st_size, digest.hexdigest()) | {"chunks": chunks}
        write_atomically(self.output_path(path, RESULT_SUFFIX[self.format]),
                         encode_document(self.format, document))
        self.remove_error(path)
        message = f"{len(chunks)} chunks, {after.st_size} bytes, {time.monotonic() - started:.3f} s"
        if self.move_done is not None:
            message += self.move_to_done(path)
        return Outcome("processed", message, signature(after))

    def header(self, path: Path, size: int, sha256: str | None) -> dict:
        return {"source": self.relative(path), "sha256": sha256, "size": size,
                "settings": self.settings.as_dict(), "chunker": f"chunkd {__version__}"}

    def fail(self, path: Path, st: os.stat_result | None, reason: str,
             stopping: threading.Event | None = None) -> Outcome:
        """Write ``NAME.error.json`` with the reason (and the input's sha256, so that an
        unchanged bad file is not tried again); the daemon goes on."""
        sha256 = None
        if st is not None and st.st_size <= self.max_bytes and stopping is not None:
            try:
                sha256 = _sha256(path, stopping, lambda: None)
            except OSError:
                pass
        document = self.header(path, st.st_size if st else None, sha256) | {"error": reason}
        if self.recorded(path, ERROR_SUFFIX) != document:  # identical: leave it be
            write_atomically(self.output_path(path, ERROR_SUFFIX), orjson.dumps(document))
        return Outcome("error", reason, signature(st) if st is not None else None)

    def recorded(self, path: Path, suffix: str) -> dict | None:
        """The metadata of the input's result (or error result), if readable."""
        try:
            data = self.output_path(path, suffix).read_bytes()
            if suffix.endswith(".msgpack"):
                import msgpack
                document = msgpack.unpackb(data)
            else:
                document = orjson.loads(data)
        except Exception:  # missing, unreadable or not ours: not current
            return None
        if not isinstance(document, dict):
            return None
        document.pop("chunks", None)
        return document

    def remove_error(self, path: Path) -> None:
        """A file that now chunks no longer has the error it once had."""
        try:
            os.unlink(self.output_path(path, ERROR_SUFFIX))
        except FileNotFoundError:
            pass

    def move_to_done(self, path: Path) -> str:
        target = self.move_done / path.relative_to(self.root)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(path, target)
        except OSError as error:
            return f"; not moved to {target}: {error.strerror}"
        return f"; moved to {target}"


def _sha256(path: Path, stopping: threading.Event, beat: Callable[[], None]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as stream:
        for data in read_blocks(stream):
            if stopping.is_set():
                raise Abandoned()
            digest.update(data)
            beat()
    return digest.hexdigest()


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISREG, "regular file"), (stat.S_ISLNK, "symbolic link"),
                       (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return kind
    return "special file"


def write_atomically(target: Path, data: bytes) -> None:
    """Write ``target`` so that readers see the old file or the whole new one, never
    a part: a hidden temporary file in the same folder, fsync, rename, fsync folder."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with open(fd, "wb", closefd=True) as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
