"""An embedding cache on disk, by content: a text embedded once by a model, in any run,
file or front end, is not sent to that model again.

An entry is keyed by the SHA-256 of the model's identity (``Embedder.name``: a folder's
name and the SHA-256 of its files, an endpoint's URL and model, with the dtype where it
is not float32) and the text, so another model, or the same one changed, never reads
another's vectors. The cache is one SQLite database in the folder (``vectors.sqlite``)
rather than a file per entry: a run adds thousands of entries of a few KB each, which
as files would cost an inode and a rename each and leave no cheap way to find the least
recently used; SQLite gives atomic batches, concurrent readers with one writer at a
time across processes (write-ahead log, ``busy_timeout``), and an index on last use.

* Bounded: past ``max_bytes`` of database pages, the least recently used tenth is
  deleted (its pages are reused, so the file stops growing).
* Shared: any number of threads, worker processes and commands may use one folder; a
  process that forks opens its own connection.
* Corruption-tolerant: each entry stores a checksum of its key and vector, keyed by a
  secret of the cache's own (``vectors.key``); an entry whose checksum does not match (a
  damaged page, a torn copy, an entry made by anyone without the secret) is a miss,
  deleted and embedded again, never a wrong vector. A file that is not a database, or one damaged
  past reading, is set aside (renamed ``vectors.sqlite.damaged``) and started anew.
* Failures are misses: a working database that cannot be opened, read or written (a
  read-only or full filesystem, an I/O error) gives nothing and keeps nothing, said
  once; it is never set aside, and serves again once the filesystem does.
* Its user's own: the folder and the database's files must belong to the user running
  the command and be writable by no one else, and none may be a symbolic link. A folder
  another user could fill (the daemon's default is in the inbox, which producers write
  to) would let them choose the vectors of any text; it is refused. A new folder is
  made 0700 and its database 0600, whatever the umask. The folder is opened once, by a
  descriptor, and everything else is checked and opened through it, so that a folder
  swapped into its place after the checks is never used; SQLite is given the
  descriptor's ``/proc/self/fd`` path (without ``/proc`` the cache is not used). SQLite
  resolves that path to the folder's name again before it opens its files, so the
  secret, read through the descriptor, is what makes a database swapped in at that
  moment serve nothing: its entries' checksums are not the secret's.
* Refused or misses: a cache not to be trusted is a ``SettingsError`` where the command
  starts (``refuse``); in a worker process, or found later, it is all misses, said once.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import stat
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from chunkd.embeddings.models import counting, embedded
from chunkd.model.errors import SettingsError

if TYPE_CHECKING:
    import numpy

    from chunkd.embeddings.models import Embedder

#: The database's name in the cache folder.
DATABASE = "vectors.sqlite"
#: The cache's bound when none is given: 2 GiB of pages (about 1.3 million vectors of
#: 384 numbers, 500,000 of 1024).
MAX_BYTES = 2 << 30
#: How long a writer waits for another process's write to end, in seconds.
BUSY_SECONDS = 60
#: Keys looked up in one statement (SQLite's bound on parameters is 32,766).
LOOKUP = 500
#: The database's files: SQLite makes the others beside it, with its permissions.
FILES = (DATABASE, DATABASE + "-wal", DATABASE + "-shm", DATABASE + "-journal")
#: The secret the entries' checksums are keyed with, beside the database.
KEY = "vectors.key"
#: The secret's length in bytes (BLAKE2b takes up to 64).
KEY_BYTES = 32
#: How the folder is opened: a folder, never through a link in its place.
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: SQLite's primary result codes for a file that is damaged or not a database at all:
#: only these set the file aside; any other failure (a full or read-only filesystem, an
#: I/O error, a lock held too long) is the filesystem's, and the entries are still good.
_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
#: The same, as Python before 3.11 says them (it gives no result code).
_DAMAGED_WORDS = ("malformed", "not a database", "database corruption")
#: ``OSError`` numbers of a filesystem that cannot take a write now, rather than a
#: folder the user cannot use at all.
_UNAVAILABLE = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    key BLOB PRIMARY KEY,     -- SHA-256 of the model's identity, a zero byte, the text
    vector BLOB NOT NULL,     -- little-endian float32
    checksum BLOB NOT NULL,   -- BLAKE2b-128 of key and vector
    used INTEGER NOT NULL     -- last use, nanoseconds since the epoch
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used);
"""


def default_folder(output: str) -> str:
    """The daemon's cache folder when none is given: ``.embedding-cache`` in its output
    folder, so that the cache lives and goes with the results it paid for."""
    return os.path.join(output, ".embedding-cache")


def entry_key(identity: str, text: str) -> bytes:
    """An entry's key: the SHA-256 of the model's identity, a zero byte and the text."""
    return hashlib.sha256(identity.encode("utf-8", "surrogatepass") + b"\0"
                          + text.encode("utf-8", "surrogatepass")).digest()


def _write_ahead(connection: sqlite3.Connection) -> None:
    """Put the database in write-ahead-log mode, waiting up to ``BUSY_SECONDS`` on other
    processes: while one makes a new database WAL, SQLite answers another's "database
    is locked" at once, without its busy timeout."""
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def checksum(key: bytes, vector: bytes, secret: bytes) -> bytes:
    """An entry's checksum: BLAKE2b-128 of key and vector, keyed by the cache's secret
    (an entry made without it never matches)."""
    return hashlib.blake2b(key + vector, digest_size=16, key=secret).digest()


def damaged(error: sqlite3.DatabaseError) -> bool:
    """Whether SQLite's ``error`` says its file is damaged or not a database."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _DAMAGED
    return any(words in str(error) for words in _DAMAGED_WORDS)


class Unavailable(Exception):
    """The cache cannot be used now (its filesystem is read-only or full, or failing):
    every text is a miss and nothing is kept, and the next use tries again."""


class DiskCache:
    """The cache in ``folder`` (made if missing): ``get`` and ``put`` vectors by key.
    A folder that cannot be made or is not to be trusted is a ``SettingsError`` with
    ``refuse`` (where a command starts: its usage error), else all misses, said once;
    one whose filesystem fails is all misses, said once."""

    def __init__(self, folder: str, max_bytes: int = MAX_BYTES, refuse: bool = True,
                 option: str = "--embed-cache",
                 missed: str = "texts it cannot give are embedded again") -> None:
        """``option`` names the folder's setting in messages; ``missed`` says what a
        failing cache costs (another cache of values by key: ``--llm-cache``)."""
        self.folder = folder
        self.option, self.missed = option, missed
        self.path = os.path.join(folder, DATABASE)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        #: The folder's descriptor the connection's files were opened through (kept
        #: open while it lives: SQLite opens its log files later), and the secret.
        self._fd: int | None = None
        self._secret = b""
        self._pid = 0
        self._warned = False
        try:
            os.makedirs(os.path.dirname(os.path.abspath(folder)), exist_ok=True)
            os.mkdir(folder, 0o700)  # unlike makedirs, never through a link in its place
        except FileExistsError:
            pass
        except OSError as error:
            problem = f"{option} {folder}: cannot make the folder: {error.strerror}"
            if error.errno not in _UNAVAILABLE and refuse:
                raise SettingsError(problem) from None
            self._failed(problem)  # a full or read-only disk: misses until it is made
        with self._lock:
            try:
                self._connect()
            except Unavailable as error:
                self._failed(str(error))
            except SettingsError as error:
                if refuse:
                    raise
                self._failed(str(error))

    def _connect(self) -> sqlite3.Connection:
        """This process's connection (a forked child opens its own: SQLite's may not
        cross a fork); a database that is damaged is set aside and made anew.
        ``SettingsError`` for a folder or file not to be trusted, ``Unavailable`` where
        the filesystem fails."""
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        self._connection = None
        if self._fd is not None:  # a fork's parent's: its connection is left to it
            os.close(self._fd)
            self._fd = None
        fd = self._trusted_folder()
        try:
            if not os.path.isdir(f"/proc/self/fd/{fd}"):
                raise Unavailable(f"{self.option} {self.folder}: /proc is not mounted, "
                                  "through which the cache's files are opened")
            secret = self._key(fd)
            try:
                connection = self._opened_once(fd)
            except sqlite3.DatabaseError as error:
                if not damaged(error):
                    raise self._unavailable(error) from None
                self._set_aside(fd, error)
                try:
                    connection = self._opened_once(fd)
                except sqlite3.DatabaseError as again:
                    raise self._unavailable(again) from None
            try:
                self._trusted_files(fd)
            except BaseException:
                connection.close()
                raise
        except BaseException:
            os.close(fd)
            raise
        self._connection, self._fd, self._secret, self._pid = (connection, fd, secret,
                                                               os.getpid())
        return connection

    def _unavailable(self, error: Exception) -> Unavailable:
        return Unavailable(f"{self.option} {self.folder}: cannot use {DATABASE}: {error}")

    def _opened_once(self, fd: int) -> sqlite3.Connection:
        """The database's files checked, the database made if missing and opened."""
        self._trusted_files(fd)
        try:
            self._made(fd)
        except OSError as error:
            raise Unavailable(f"{self.option} {self.folder}: cannot make {DATABASE}: "
                              f"{error.strerror or error}") from None
        return self._opened(fd)

    @staticmethod
    def _made(fd: int) -> None:
        """Make a new database file 0600 (SQLite's would follow the umask, and gives
        its journal and shared memory files the database's permissions)."""
        try:
            os.close(os.open(DATABASE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600, dir_fd=fd))
        except FileExistsError:
            pass

    @staticmethod
    def _opened(fd: int) -> sqlite3.Connection:
        """A new connection to the database in the folder open as ``fd``, made (or set
        up) if it is new."""
        connection = sqlite3.connect(f"/proc/self/fd/{fd}/{DATABASE}", timeout=BUSY_SECONDS,
                                     isolation_level=None, check_same_thread=False)
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_SECONDS * 1000}")
            _write_ahead(connection)
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.executescript(_SCHEMA)
        except BaseException:
            connection.close()
            raise
        return connection

    def _trusted_folder(self) -> int:
        """The folder, opened once (a descriptor), and checked: ``SettingsError`` if it
        is a symbolic link or not a folder (a link put in its place would have the
        database written wherever it points), or if another user owns it or could write
        it (they could put entries there: any vector for any text). Checked at every
        connection, a forked process's included."""
        try:
            fd = os.open(self.folder, _FOLDER_FLAGS)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                try:
                    link = stat.S_ISLNK(os.lstat(self.folder).st_mode)
                except OSError:
                    link = False
                if link:
                    raise SettingsError(f"{self.option} {self.folder}: a symbolic link, not "
                                        "followed: give the folder it names, or remove it"
                                        ) from None
                raise SettingsError(f"{self.option} {self.folder}: not a folder") from None
            # Gone, never made on a full or read-only disk, or not ours to open.
            raise Unavailable(f"{self.option} {self.folder}: {error.strerror or error}"
                              ) from None
        problem = _untrusted(os.fstat(fd))
        if problem:
            os.close(fd)
            raise SettingsError(f"{self.option} {self.folder}: {problem}, not trusted: "
                                "remove it, or give a folder of this user's own")
        return fd

    def _trusted_files(self, fd: int) -> None:
        """``SettingsError`` if one of the database's files is a symbolic link (SQLite
        would read and write where it points), not a file, or not this user's alone."""
        for name in FILES:
            try:
                found = os.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError as error:
                raise Unavailable(f"{self.option} {self.folder}: cannot use {name}: "
                                  f"{error.strerror or error}") from None
            self._trusted_file(name, found)

    def _trusted_file(self, name: str, found: os.stat_result) -> None:
        if stat.S_ISLNK(found.st_mode):
            raise SettingsError(f"{self.option} {self.folder}: {name} is a symbolic "
                                "link, not followed: remove it")
        if not stat.S_ISREG(found.st_mode):
            raise SettingsError(f"{self.option} {self.folder}: {name} is not a file: "
                                "remove it")
        problem = _untrusted(found)
        if problem:
            raise SettingsError(f"{self.option} {self.folder}: {name} {problem}, not "
                                "trusted: remove it")

    def _key(self, fd: int) -> bytes:
        """The secret in the folder open as ``fd``, made if missing (written whole under
        a name of this process's, then linked into place: another process reads either
        none or all of it)."""
        try:
            return self._read_key(fd)
        except FileNotFoundError:
            pass
        made = f"{KEY}.{os.getpid()}.new"
        try:
            try:
                os.unlink(made, dir_fd=fd)
            except FileNotFoundError:
                pass
            out = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                          | os.O_CLOEXEC, 0o600, dir_fd=fd)
            try:
                os.write(out, os.urandom(KEY_BYTES))
                os.fsync(out)
            finally:
                os.close(out)
            try:
                os.link(made, KEY, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            except FileExistsError:
                pass  # another process's, made meanwhile: that one is the secret
            finally:
                os.unlink(made, dir_fd=fd)
            return self._read_key(fd)
        except OSError as error:
            raise Unavailable(f"{self.option} {self.folder}: cannot make {KEY}: "
                              f"{error.strerror or error}") from None

    def _read_key(self, fd: int) -> bytes:
        """``FileNotFoundError`` if there is none yet."""
        try:
            key = os.open(KEY, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        except OSError as error:
            if error.errno == errno.ENOENT:
                raise
            if error.errno == errno.ELOOP:
                self._trusted_file(KEY, os.lstat(KEY, dir_fd=fd))
            raise Unavailable(f"{self.option} {self.folder}: cannot read {KEY}: "
                              f"{error.strerror or error}") from None
        try:
            self._trusted_file(KEY, os.fstat(key))
            secret = os.read(key, KEY_BYTES + 1)
        except OSError as error:
            raise Unavailable(f"{self.option} {self.folder}: cannot read {KEY}: "
                              f"{error.strerror or error}") from None
        finally:
            os.close(key)
        if len(secret) != KEY_BYTES:
            raise SettingsError(f"{self.option} {self.folder}: {KEY} is not "
                                f"{KEY_BYTES} bytes: remove it (the cache starts anew)")
        return secret

    def _set_aside(self, fd: int, error: Exception) -> None:
        print(f"chunkd: {self.option} {self.folder}: {DATABASE} is damaged ({error}): "
              "set aside, starting a new cache", file=sys.stderr, flush=True)
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(DATABASE + suffix, DATABASE + ".damaged" + suffix,
                           src_dir_fd=fd, dst_dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError as failure:
                raise Unavailable(f"{self.option} {self.folder}: {DATABASE} is damaged "
                                  "and cannot be set aside: "
                                  f"{failure.strerror or failure}") from None

    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The vectors (float32 bytes) of the keys held, whose checksums match; those
        found are marked used now, those damaged deleted. A database that fails
        (damaged past a page's checksum, locked past the wait) is all misses."""
        try:
            return self._get(keys)
        except sqlite3.DatabaseError as error:
            self._failed(f"{self.option} {self.folder}: {error}")
            return {}
        except (SettingsError, Unavailable) as error:  # made a link since; a failing disk
            self._failed(str(error))
            return {}

    def put(self, entries: Sequence[tuple[bytes, bytes]]) -> None:
        """Store vectors (float32 bytes) by key, then keep the cache within its bound;
        a database that fails keeps nothing (the vectors are still the model's)."""
        try:
            self._put(entries)
        except sqlite3.DatabaseError as error:
            self._failed(f"{self.option} {self.folder}: {error}")
        except (SettingsError, Unavailable) as error:  # made a link since; a failing disk
            self._failed(str(error))

    def _failed(self, problem: str) -> None:
        """Said once a process: the run goes on, embedding what it cannot read."""
        if not self._warned:
            self._warned = True
            print(f"chunkd: {problem}: {self.missed}",
                  file=sys.stderr, flush=True)

    def _get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        wrong: list[bytes] = []
        with self._lock:
            connection = self._connect()
            for start in range(0, len(keys), LOOKUP):
                part = keys[start:start + LOOKUP]
                rows = connection.execute(
                    "SELECT key, vector, checksum FROM vectors WHERE key IN "
                    f"({','.join('?' * len(part))})", part).fetchall()
                for key, vector, stored in rows:
                    if (isinstance(vector, bytes) and isinstance(stored, bytes)
                            and checksum(key, vector, self._secret) == stored):
                        found[key] = vector
                    else:
                        wrong.append(key)
            if found or wrong:
                try:
                    self._write(connection, lambda: (
                        connection.executemany("UPDATE vectors SET used = ? WHERE key = ?",
                                               [(time.time_ns(), key) for key in found]),
                        connection.executemany("DELETE FROM vectors WHERE key = ?",
                                               [(key,) for key in wrong])))
                except sqlite3.DatabaseError as error:  # a full disk: still the vectors
                    self._failed(f"{self.option} {self.folder}: {error}")
        return found

    def _put(self, entries: Sequence[tuple[bytes, bytes]]) -> None:
        if not entries:
            return
        now = time.time_ns()
        with self._lock:
            connection = self._connect()
            rows = [(key, vector, checksum(key, vector, self._secret), now)
                    for key, vector in entries]
            self._write(connection, lambda: connection.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows))
            self._bound(connection)

    def _bound(self, connection: sqlite3.Connection) -> None:
        """Delete the least recently used tenth while the pages in use pass the bound."""
        page = connection.execute("PRAGMA page_size").fetchone()[0]
        used = (connection.execute("PRAGMA page_count").fetchone()[0]
                - connection.execute("PRAGMA freelist_count").fetchone()[0]) * page
        if used <= self.max_bytes:
            return
        count = connection.execute("SELECT count(*) FROM vectors").fetchone()[0]
        self._write(connection, lambda: connection.execute(
            "DELETE FROM vectors WHERE key IN (SELECT key FROM vectors ORDER BY used "
            "LIMIT ?)", (max(1, count // 10),)))

    @staticmethod
    def _write(connection: sqlite3.Connection, work: Callable[[], object]) -> None:
        """``work`` in one write transaction, taken at once (a reader that would later
        write could deadlock with another)."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            work()
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                if self._connection is not None:
                    self._connection.close()
                if self._fd is not None:
                    os.close(self._fd)
            self._connection, self._fd = None, None


def _untrusted(found: os.stat_result) -> str:
    """What makes a folder or file not this user's alone, or ``""``."""
    if found.st_uid != os.geteuid():
        return f"belongs to another user (uid {found.st_uid})"
    if found.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by others than its owner (mode {stat.S_IMODE(found.st_mode):o})"
    return ""


class DiskCached:
    """An embedder behind a ``DiskCache``: the texts it holds for this model come from
    the disk; the others, each once, go to the model in one call, longest first (a
    batch of like lengths pads least), and are stored."""

    def __init__(self, inner: Embedder, cache: DiskCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        #: Texts sent to the model, for the curious (a benchmark, a test).
        self.sent = 0

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy

        if not texts:
            return numpy.zeros((0, 0), dtype=numpy.float32)
        keys = [entry_key(self.name, text) for text in texts]
        found = self.cache.get(list(dict.fromkeys(keys)))
        vectors: dict[bytes, numpy.ndarray] = {
            key: numpy.frombuffer(vector, dtype="<f4") for key, vector in found.items()}
        missing = {key: text for key, text in zip(keys, texts) if key not in vectors}
        with counting(len(texts)):
            embedded(len(texts) - len(missing))  # those stored, and repeats of the others
            if missing:
                order = sorted(missing, key=lambda key: -len(missing[key]))
                made = self.inner.embed([missing[key] for key in order])
                self.sent += len(order)
                stored = []
                for key, vector in zip(order, made):
                    vectors[key] = vector
                    stored.append((key, numpy.asarray(vector, dtype="<f4").tobytes()))
                self.cache.put(stored)
        if len({vector.shape for vector in vectors.values()}) > 1:
            # Vectors of another length under this identity: not this model's.
            raise_mixed(self.name)
        return numpy.stack([vectors[key] for key in keys]).astype(numpy.float32, copy=False)


def raise_mixed(name: str) -> None:
    from chunkd.embeddings.models import EmbedError

    raise EmbedError(f"{name}: the embedding cache holds vectors of another length for "
                     "this model's identity; give another --embed-cache folder")
