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
* Corruption-tolerant: each entry stores a checksum of its key and vector; an entry
  whose checksum does not match (a damaged page, a torn copy) is a miss, deleted and
  embedded again, never a wrong vector. A file that is not a database, or one damaged
  past reading, is set aside (renamed ``vectors.sqlite.damaged``) and started anew.
* Failures are misses: a working database that cannot be opened, read or written (a
  read-only or full filesystem, an I/O error) gives nothing and keeps nothing, said
  once; it is never set aside, and serves again once the filesystem does.
* Its user's own: the folder and the database's files must belong to the user running
  the command and be writable by no one else, and none may be a symbolic link. A folder
  another user could fill (the daemon's default is in the inbox, which producers write
  to) would let them choose the vectors of any text; it is refused. A new folder is
  made 0700 and its database 0600, whatever the umask.
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

from chunkd.embeddings import counting, embedded
from chunkd.errors import SettingsError

if TYPE_CHECKING:
    import numpy

    from chunkd.embeddings import Embedder

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


def checksum(key: bytes, vector: bytes) -> bytes:
    return hashlib.blake2b(key + vector, digest_size=16).digest()


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
    ``SettingsError`` if the folder cannot be made or is not to be trusted; one whose
    filesystem fails is all misses, said once."""

    def __init__(self, folder: str, max_bytes: int = MAX_BYTES) -> None:
        self.folder = folder
        self.path = os.path.join(folder, DATABASE)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = 0
        self._warned = False
        try:
            os.makedirs(os.path.dirname(os.path.abspath(folder)), exist_ok=True)
            os.mkdir(folder, 0o700)  # unlike makedirs, never through a link in its place
        except FileExistsError:
            pass
        except OSError as error:
            problem = f"--embed-cache {folder}: cannot make the folder: {error.strerror}"
            if error.errno not in _UNAVAILABLE:
                raise SettingsError(problem) from None
            self._failed(problem)  # a full or read-only disk: misses until it is made
        with self._lock:
            try:
                self._connect()
            except Unavailable as error:
                self._failed(str(error))

    def _connect(self) -> sqlite3.Connection:
        """This process's connection (a forked child opens its own: SQLite's may not
        cross a fork); a database that is damaged is set aside and made anew.
        ``SettingsError`` for a folder or file not to be trusted, ``Unavailable`` where
        the filesystem fails."""
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        self._connection = None
        folder = self._trusted_folder()
        try:
            connection = self._opened_once()
        except sqlite3.DatabaseError as error:
            if not damaged(error):
                raise self._unavailable(error) from None
            self._set_aside(error)
            try:
                connection = self._opened_once()
            except sqlite3.DatabaseError as again:
                raise self._unavailable(again) from None
        try:
            if self._trusted_folder() != folder:
                # Another folder put in its place while SQLite opened its files.
                raise SettingsError(f"--embed-cache {self.folder}: replaced while it was "
                                    "opened, not trusted")
            self._trusted_files()
        except BaseException:
            connection.close()
            raise
        self._connection, self._pid = connection, os.getpid()
        return connection

    def _unavailable(self, error: Exception) -> Unavailable:
        return Unavailable(f"--embed-cache {self.folder}: cannot use {DATABASE}: {error}")

    def _opened_once(self) -> sqlite3.Connection:
        """The database's files checked, the database made if missing and opened."""
        self._trusted_files()
        try:
            self._made()
        except OSError as error:
            raise Unavailable(f"--embed-cache {self.folder}: cannot make {DATABASE}: "
                              f"{error.strerror or error}") from None
        return self._opened()

    def _made(self) -> None:
        """Make a new database file 0600 (SQLite's would follow the umask, and gives
        its journal and shared memory files the database's permissions)."""
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                             | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            pass

    def _opened(self) -> sqlite3.Connection:
        """A new connection to the database, made (or set up) if it is new."""
        connection = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None,
                                     check_same_thread=False)
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_SECONDS * 1000}")
            _write_ahead(connection)
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.executescript(_SCHEMA)
        except BaseException:
            connection.close()
            raise
        return connection

    def _trusted_folder(self) -> tuple[int, int]:
        """The folder's device and inode, once checked: ``SettingsError`` if it is a
        symbolic link or not a folder (a link put in its place would have the database
        written wherever it points), or if another user owns it or could write it (they
        could put entries there: any vector for any text). Checked at every connection,
        a forked process's included."""
        try:
            found = os.lstat(self.folder)
        except OSError as error:  # gone, or never made on a full or read-only disk
            raise Unavailable(f"--embed-cache {self.folder}: {error.strerror or error}"
                              ) from None
        if stat.S_ISLNK(found.st_mode):
            raise SettingsError(f"--embed-cache {self.folder}: a symbolic link, not "
                                "followed: give the folder it names, or remove it")
        if not stat.S_ISDIR(found.st_mode):
            raise SettingsError(f"--embed-cache {self.folder}: not a folder")
        problem = _untrusted(found)
        if problem:
            raise SettingsError(f"--embed-cache {self.folder}: {problem}, not trusted: "
                                "remove it, or give a folder of this user's own")
        return found.st_dev, found.st_ino

    def _trusted_files(self) -> None:
        """``SettingsError`` if one of the database's files is a symbolic link (SQLite
        would read and write where it points), not a file, or not this user's alone."""
        for name in FILES:
            try:
                found = os.lstat(os.path.join(self.folder, name))
            except FileNotFoundError:
                continue
            except OSError as error:
                raise Unavailable(f"--embed-cache {self.folder}: cannot use {name}: "
                                  f"{error.strerror or error}") from None
            if stat.S_ISLNK(found.st_mode):
                raise SettingsError(f"--embed-cache {self.folder}: {name} is a symbolic "
                                    "link, not followed: remove it")
            if not stat.S_ISREG(found.st_mode):
                raise SettingsError(f"--embed-cache {self.folder}: {name} is not a file: "
                                    "remove it")
            problem = _untrusted(found)
            if problem:
                raise SettingsError(f"--embed-cache {self.folder}: {name} {problem}, not "
                                    "trusted: remove it")

    def _set_aside(self, error: Exception) -> None:
        print(f"chunkd: --embed-cache {self.folder}: {DATABASE} is damaged ({error}): "
              "set aside, starting a new cache", file=sys.stderr, flush=True)
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(self.path + suffix, self.path + ".damaged" + suffix)
            except FileNotFoundError:
                pass
            except OSError as failure:
                raise Unavailable(f"--embed-cache {self.folder}: {DATABASE} is damaged "
                                  "and cannot be set aside: "
                                  f"{failure.strerror or failure}") from None

    def get(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The vectors (float32 bytes) of the keys held, whose checksums match; those
        found are marked used now, those damaged deleted. A database that fails
        (damaged past a page's checksum, locked past the wait) is all misses."""
        try:
            return self._get(keys)
        except sqlite3.DatabaseError as error:
            self._failed(f"--embed-cache {self.folder}: {error}")
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
            self._failed(f"--embed-cache {self.folder}: {error}")
        except (SettingsError, Unavailable) as error:  # made a link since; a failing disk
            self._failed(str(error))

    def _failed(self, problem: str) -> None:
        """Said once a process: the run goes on, embedding what it cannot read."""
        if not self._warned:
            self._warned = True
            print(f"chunkd: {problem}: texts it cannot give are embedded again",
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
                            and checksum(key, vector) == stored):
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
                    self._failed(f"--embed-cache {self.folder}: {error}")
        return found

    def _put(self, entries: Sequence[tuple[bytes, bytes]]) -> None:
        if not entries:
            return
        now = time.time_ns()
        rows = [(key, vector, checksum(key, vector), now) for key, vector in entries]
        with self._lock:
            connection = self._connect()
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
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None


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
    from chunkd.embeddings import EmbedError

    raise EmbedError(f"{name}: the embedding cache holds vectors of another length for "
                     "this model's identity; give another --embed-cache folder")
