"""LanceDB, embedded (a folder; no server), in the columns LangChain's ``LanceDB``
vector store reads as it is: ``id``, ``text``, ``vector`` and ``metadata`` (a struct:
``source``, ``origin``, ``sha256``, ``fingerprint`` and the record fields of
``chunkd.stores.METADATA``). The table is the collection (default ``chunkd``).

Atomic per source: LanceDB has no transaction across tables, so chunkd's bookkeeping
is in the rows themselves: each row carries its source's SHA-256 and fingerprint, and
a source's bookkeeping is its rows (``sources`` reads them back). A source is applied
with ONE ``merge_insert`` on ``id`` (insert the new rows, update the kept ones, delete
the source's rows that are not in the new data: ``when_not_matched_by_source_delete``
restricted to the sources of the change), which Lance commits as one new version of
the table (a group of sources is one merge too: each whole, and one commit instead of
many, which matters: each merge reads the table's ids): a
reader sees the version before it or the one after it, never half a file, and a
process killed before the commit leaves only unreferenced data files. A source with no
chunks (an empty file) has no rows, so no bookkeeping: it is chunked again by each sync
(it costs nothing) and ``--check`` finds it equal when the store holds none of it.
A source some of whose ids rows of another origin hold is refused before the merge.

Each row also carries the digest of what a reader sees of it and of its source's whole
set of ids (``chunkd_digest``: ``ROW:IDS``, the ``row_digest`` of its text and metadata
as written, and ``ids_digest`` of the source's ids): a row whose text or metadata was
changed behind chunkd's back no longer matches it, nor do the ids a source's rows hold
once one of them was deleted (or one added under it), and the source is stale
(``altered``), written again by the next sync, as pgvector's ``rows_digest``. Checking
it reads each row's text and hashes it at every sync (about 5 µs a row). A table of an
older chunkd, without the column or with digests of the row alone, is given it (every
source is written again once, its vectors kept).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import logging
import os
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from chunkd.model.chunk import RECORD_FIELDS
from chunkd.model.errors import SettingsError
from chunkd.stores.base import (GIVEN_METADATA, METADATA, Change, StoreDown, StoreRefused,
                               Stored, metadata, row_digest, superseded)

if TYPE_CHECKING:
    import pyarrow

EXTRA = "pip install 'lancedb>=0.25'"
log = logging.getLogger("chunkd.stores")
#: The file names a table takes beside it in the folder, around its name: Lance's
#: folder, and chunkd's lock; the longest name a file may have.
LANCE_SUFFIX, LOCK_NAME, NAME_BYTES = ".lance", ".{}.chunkd-lock", 255
#: The longest table name whose files all fit (the lock's name is the longer).
TABLE_NAME_BYTES = NAME_BYTES - max(len(LANCE_SUFFIX), len(LOCK_NAME.format("")))
#: The column of each row's digests: ``row_digest`` of its text and metadata, ``:``,
#: ``ids_digest`` of its source's ids.
DIGEST = "chunkd_digest"
#: The system errors of a store that may pass (a full disk, a quota): tried again.
PASSING = {errno.ENOSPC, errno.EDQUOT, errno.EAGAIN, errno.EINTR, errno.ETIMEDOUT,
           errno.EIO}


def _said(error: BaseException) -> str:
    """Lance's message on one line, without the places in its own source it names."""
    text = re.sub(r",? (/\S+\.rs:\d+:\d+)", "", str(error))
    return " ".join(text.split()) or type(error).__name__


def _code(error: BaseException) -> int | None:
    """The system error number an error carries (Python's, or Lance's ``os error N``)."""
    if isinstance(error, OSError) and error.errno is not None:
        return error.errno
    found = re.search(r"\(os error (\d+)\)", str(error))
    return int(found.group(1)) if found else None


def ids_digest(ids: Iterable[str]) -> str:
    """The digest of a source's whole set of ids, recorded in each of its rows: a row
    deleted (or added) behind chunkd's back leaves ids that no longer match it."""
    return hashlib.sha256("\0".join(sorted(ids)).encode()).hexdigest()


def _literal(value: str) -> str:
    """A string as an SQL literal of Lance's filters."""
    return "'" + value.replace("'", "''") + "'"


def _check_folder(path: str) -> None:
    """``SettingsError`` unless ``path`` is a folder or could be made one (LanceDB makes
    it and its parents): the nearest of them that exists must be a folder."""
    nearest = os.path.abspath(path)
    while not os.path.exists(nearest) and os.path.dirname(nearest) != nearest:
        nearest = os.path.dirname(nearest)
    if os.path.isdir(nearest):
        return
    if nearest == os.path.abspath(path):
        raise SettingsError(f"--sink {path}: not a folder (a LanceDB store is one)")
    raise SettingsError(f"--sink {path}: {nearest} is not a folder")


@functools.cache
def longest_table_name() -> int:
    """The longest table name the installed LanceDB takes whose files all fit: at most
    ``TABLE_NAME_BYTES``, and LanceDB bounds its names itself (128 since 0.41)."""
    from lancedb.util import validate_table_name

    shortest_refused, longest_taken = TABLE_NAME_BYTES + 1, 1
    while shortest_refused - longest_taken > 1:
        middle = (longest_taken + shortest_refused) // 2
        try:
            validate_table_name("a" * middle)
            longest_taken = middle
        except ValueError:
            shortest_refused = middle
    return longest_taken


class LanceSink:
    """One table of a LanceDB folder, for one origin (``chunkd.stores``)."""

    def __init__(self, path: str, collection: str, origin: str,
                 fields: tuple[str, ...] = ()) -> None:
        try:
            from lancedb.util import validate_table_name
        except ImportError:
            raise SettingsError(f"--sink PATH (LanceDB) needs lancedb: {EXTRA}") from None
        # The extraction worker (chunkd.inputs.worker) is forked from this process and
        # never uses LanceDB; lancedb warns in every forked child that it reset its async
        # runtime there, which concerns a child that goes on using it. (Were that reset
        # ever to hang the worker, the extraction's time limit kills it and the file is
        # tried again by the next sync.)
        warnings.filterwarnings("ignore", message="lancedb fork support",
                                category=RuntimeWarning)
        # Both are the user's to fix: found here, they are a usage error, not a store
        # that is down (retried for seconds) or LanceDB's traceback at the first write.
        _check_folder(path)
        try:
            validate_table_name(collection)
            if len(collection.encode()) > longest_table_name():
                raise ValueError(collection)
        except ValueError:
            raise SettingsError(
                f"--collection {collection!r}: not a LanceDB table name, which holds one to "
                f"{longest_table_name()} ASCII letters, digits, '_', '-' and '.' (and is not "
                "'.' or '..')") from None
        self.path = path
        self.collection = collection
        self.origin = origin
        #: The fields its metadata keeps where records have them (``GIVEN_METADATA``).
        self.given = tuple(name for name in GIVEN_METADATA if name in fields)
        self.where = f"{path} table {collection}"
        self.database: Any = None
        self.table: Any = None

    def _failed(self, error: BaseException) -> Exception:
        """A failure of LanceDB as the sink's: a store that may pass (a full disk, an
        I/O error, a folder it cannot reach) ``StoreDown``; anything else (a damaged
        table: a data file missing, a manifest it cannot read) ``StoreRefused``, which
        trying again would not mend."""
        if _code(error) in PASSING or (isinstance(error, OSError)
                                      and not isinstance(error, FileNotFoundError)):
            return StoreDown(f"{self.where}: {_said(error)}")
        return StoreRefused(f"{self.where}: the table cannot be used (damaged?): "
                            f"{_said(error)}")

    def _table(self, dimension: int | None = None) -> Any:
        """The table, or None while it does not exist (made for vectors of
        ``dimension`` if given)."""
        import lancedb

        try:
            if self.database is None:  # every read sees the latest commit (another sync's)
                self.database = lancedb.connect(self.path,
                                                read_consistency_interval=timedelta(0))
            if self.table is None:
                try:
                    self.table = self.database.open_table(self.collection)
                except ValueError:  # no such table (yet)
                    if dimension is not None:
                        self.table = self.database.create_table(
                            self.collection, schema=self.schema(dimension, self.given), exist_ok=True)
        except (OSError, RuntimeError, ValueError) as error:
            self.table = None
            raise self._failed(error) from None
        return self.table

    @staticmethod
    def schema(dimension: int, given: tuple[str, ...] = ()) -> pyarrow.Schema:
        import pyarrow

        types = {field.name: field.arrow_type(pyarrow) for field in RECORD_FIELDS}
        types.update(index=pyarrow.int64(), start=pyarrow.int64(), end=pyarrow.int64(),
                     length=pyarrow.int64())
        fields = [pyarrow.field(name, pyarrow.string()) for name in
                  ("source", "origin", "sha256", "fingerprint")]
        fields += [pyarrow.field(name, types[name]) for name in (*METADATA, *given)]
        return pyarrow.schema([
            pyarrow.field("id", pyarrow.string(), nullable=False),
            pyarrow.field("text", pyarrow.string()),
            pyarrow.field("vector", pyarrow.list_(pyarrow.float32(), dimension)),
            pyarrow.field("metadata", pyarrow.struct(fields)),
            pyarrow.field(DIGEST, pyarrow.string()),
        ])

    def _mine(self) -> str:
        """The filter of this origin's rows."""
        return f"metadata.origin = {_literal(self.origin)}"

    def _read(self, columns: list[str], where: str, addresses: bool = False) -> pyarrow.Table:
        """The ``columns`` of the rows ``where`` selects; with ``addresses``, ``_rowid``
        too (Lance's row address, which a write of the row changes)."""
        table = self._table()
        if table is None:
            import pyarrow
            return pyarrow.table({column: [] for column in
                                  columns + (["_rowid"] if addresses else [])})
        try:
            return (table.search().where(where).select(columns).with_row_id(addresses)
                    .limit(None).to_arrow())
        except (OSError, RuntimeError, ValueError) as error:
            raise self._failed(error) from None

    def sources(self) -> dict[str, Stored]:
        return self._held(self._mine())[0]

    def _held(self, where: str) -> tuple[dict[str, Stored], set[str]]:
        """What the rows ``where`` selects hold of each source, and the sources some of
        whose ids two rows hold (two merges at once, before this writer locked the
        table, inserted them twice): these, and a source whose rows are of two states,
        are stale, as is a source whose rows' ids are not the set its rows record (a row
        deleted or added behind chunkd's back), or whose rows' digests are not those of
        their text and metadata."""
        found: dict[str, tuple[str, str, set[str]]] = {}
        recorded: dict[str, set[str]] = {}  # each source's ids digests, as its rows hold
        addresses: dict[str, list[int]] = {}
        doubled: set[str] = set()
        altered: set[str] = set()
        digested = DIGEST in self._columns()  # else a table of an older chunkd
        rows = self._read(["id", "metadata"] + (["text", DIGEST] if digested else []),
                          where, addresses=True)
        metas = rows["metadata"].to_pylist()
        texts = rows["text"].to_pylist() if digested else [None] * len(metas)
        digests = rows[DIGEST].to_pylist() if digested else [None] * len(metas)
        for row, meta, address, text, digest in zip(
                rows["id"].to_pylist(), metas, rows["_rowid"].to_pylist(), texts, digests):
            own, _, of_ids = (digest or "").partition(":")
            if not of_ids or own != row_digest(text, meta):  # an older chunkd's: no ids
                altered.add(meta["source"])
            recorded.setdefault(meta["source"], set()).add(of_ids)
            entry = found.setdefault(meta["source"], (meta["sha256"], meta["fingerprint"], set()))
            if row in entry[2]:
                doubled.add(meta["source"])
            if (entry[0], entry[1]) != (meta["sha256"], meta["fingerprint"]) \
                    or meta["source"] in doubled:
                entry = found[meta["source"]] = ("", "", entry[2])
            entry[2].add(row)
            addresses.setdefault(meta["source"], []).append(address)
        altered.update(source for source, (_, _, ids) in found.items()
                       if recorded[source] != {ids_digest(ids)})
        return ({source: Stored(sha256, made, frozenset(ids), hashlib.sha256(
                    ",".join(map(str, sorted(addresses[source]))).encode()).hexdigest(),
                    source in altered)
                 for source, (sha256, made, ids) in found.items()}, doubled)

    def _columns(self) -> list[str]:
        """The names of the table's columns (none while there is no table)."""
        table = self._table()
        if table is None:
            return []
        try:
            return list(table.schema.names)
        except (OSError, RuntimeError, ValueError) as error:
            raise self._failed(error) from None

    def rows(self) -> dict[str, set[str]]:
        return {source: set(stored.ids) for source, stored in self.sources().items()}

    def contents(self) -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = {}
        rows = self._read(["id", "text", "metadata"], self._mine())
        for row, text, values in zip(rows["id"].to_pylist(), rows["text"].to_pylist(),
                                     rows["metadata"].to_pylist()):
            found.setdefault(values["source"], {})[row] = row_digest(text, values)
        return found

    def vector_size(self) -> int | None:
        """The table's vector size; ``StoreRefused`` if a column chunkd writes or
        LangChain's ``LanceDB`` reads is absent or of another type (rows written
        without it would lack it: a reader without ``text`` fails)."""
        import pyarrow

        self._refuse_linked_lock()
        table = self._table()
        if table is None:
            return None
        try:
            schema = table.schema
        except (OSError, RuntimeError, ValueError) as error:
            raise self._failed(error) from None
        vector = schema.field("vector").type if "vector" in schema.names else None
        size = vector.list_size if isinstance(vector, pyarrow.FixedSizeListType) else 1
        wanted = self.schema(size, self.given)
        for field in wanted:
            if field.name == DIGEST:  # an older chunkd's table: added at its next write
                continue
            found = schema.field(field.name) if field.name in schema.names else None
            if found is None or not _fits(found.type, field.type):
                raise StoreRefused(
                    f"{self.where}: the table's column {field.name} is not what chunkd "
                    f"writes and LangChain's LanceDB reads ({field.type}; it has "
                    f"{found.type if found is not None else 'none'})")
        return size

    def vectors(self, ids: Iterable[str]) -> dict[str, list[float]]:
        wanted = list(ids)
        if not wanted:
            return {}
        found = self._read(["id", "vector"], self._mine() + " AND id IN ("
                           + ", ".join(map(_literal, wanted)) + ")")
        size = getattr(found.schema.field("vector").type, "list_size", None)
        # A vector set to NULL (or with a NULL in it) behind chunkd's back is none: its
        # text is embedded again, and the rewrite mends the row.
        return {row: vector for row, vector in zip(found["id"].to_pylist(),
                                                   found["vector"].to_pylist())
                if vector is not None and len(vector) == size and None not in vector}

    def apply(self, changes: Sequence[Change]) -> list[str]:
        with self._locked():
            return self._apply(changes)

    def _lock_path(self) -> str:
        return os.path.join(self.path, LOCK_NAME.format(self.collection))

    def _linked_lock(self) -> StoreRefused:
        return StoreRefused(f"{self.where}: its lock {self._lock_path()} is a symbolic link "
                            "(chunkd locks no file a link points to: remove the link)")

    def _refuse_linked_lock(self) -> None:
        """``StoreRefused`` if the table's lock is a symbolic link (whoever can write
        the folder could point it at a file of chunkd's user): said before anything is
        embedded, as every file's write would meet it."""
        if os.path.islink(self._lock_path()):
            raise self._linked_lock()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The table's lock, held by one writer at a time (a sync, the daemon), from
        reading what it holds to its commit: Lance commits two merges made at once on
        one version without a conflict, and the ids both inserted are then in the table
        twice. An ``flock`` on a hidden file in the folder, which the kernel releases
        when its process ends, however it ends; never through a symbolic link in its
        place (``O_NOFOLLOW``), which would create or lock the file it points to."""
        try:
            os.makedirs(self.path, exist_ok=True)
            descriptor = os.open(self._lock_path(), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
                                 | os.O_NOFOLLOW, 0o644)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise self._linked_lock() from None
            raise StoreDown(f"{self.where}: {error}") from None
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.info("%s: waiting for another writer to finish its commit", self.where)
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)

    def _apply(self, changes: Sequence[Change]) -> list[str]:
        import pyarrow

        def among(names: Iterable[str]) -> str:
            return f"{self._mine()} AND metadata.source IN ({', '.join(map(_literal, names))})"

        held: dict[str, Stored] = {}
        doubled: set[str] = set()
        if self._table() is not None:
            held, doubled = self._held(among(change.source for change in changes))
        left = [change.source for change in changes
                if superseded(change, held.get(change.source))]
        changes = [change for change in changes if change.source not in left]
        records = [(change, record) for change in changes if change.sha256 is not None
                   for record in change.records]
        table = self._table(len(records[0][1]["vector"]) if records else None)
        if table is None or not changes:  # nothing stored yet, and nothing to store
            return left
        sources = among(change.source for change in changes)
        try:
            if not records:
                table.delete(sources)
                return left
            if DIGEST not in table.schema.names:  # an older chunkd's table
                table.add_columns(pyarrow.field(DIGEST, pyarrow.string()))
            data = pyarrow.Table.from_pylist([
                {"id": record["chunk_id"], "text": record["text"],
                 "vector": [float(value) for value in record["vector"]],
                 "metadata": metadata(record, change.source, self.origin,
                                      change.sha256 or "", change.fingerprint)}
                for change, record in records], schema=table.schema)
            # Each row's digest as a reader will read it back: of the values as the
            # table holds them (its types; the fields of another writer's, empty); then
            # its source's ids.
            of_ids = {change.source: ids_digest(record["chunk_id"]
                                                for record in change.records)
                      for change in changes if change.sha256 is not None}
            data = data.set_column(data.schema.get_field_index(DIGEST), DIGEST, pyarrow.array(
                [f"{row_digest(text, values)}:{of_ids[change.source]}"
                 for text, values, (change, _) in zip(
                     data["text"].to_pylist(), data["metadata"].to_pylist(), records)],
                pyarrow.string()))
        except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError) as error:
            raise StoreRefused(f"{self.where}: {_said(error)}") from None
        except (OSError, RuntimeError, ValueError) as error:
            raise self._failed(error) from None
        self._refuse_taken(records)
        try:
            if doubled:  # a merge would update both rows of an id: they go first
                table.delete(among(sorted(doubled)))
            (table.merge_insert("id")
             .when_matched_update_all(where="target.metadata.origin = source.metadata.origin")
             .when_not_matched_insert_all()
             .when_not_matched_by_source_delete(sources).execute(data))
        except (OSError, RuntimeError, ValueError) as error:
            failed = self._failed(error)
            if isinstance(failed, StoreRefused):  # this change's fault, not the table's
                failed = StoreRefused(f"{self.where}: {_said(error)}")
            raise failed from None
        return left

    def _refuse_taken(self, records: Sequence[tuple[Change, dict]]) -> None:
        """``StoreRefused`` naming the first change some of whose chunk ids (of
        ``records``, the changes' records to merge) rows of another origin hold (the same
        file in another folder: ids derive from the relative path and the text): the
        merge would keep those rows as they are, and the source would lack them."""
        wanted = {record["chunk_id"]: change.source for change, record in records}
        taken = self._read(["id"], f"(metadata.origin IS NULL OR NOT {self._mine()}) "
                           "AND id IN (" + ", ".join(map(_literal, wanted)) + ")")
        held: dict[str, int] = {}
        for row in taken["id"].to_pylist():
            held[wanted[row]] = held.get(wanted[row], 0) + 1
        if held:
            source, count = next(iter(held.items()))
            raise StoreRefused(f"{self.where}: {source}: {count} of its chunk ids are held by "
                               "another folder (another --origin) in the table")

    def settle(self) -> None:
        """Nothing: LanceDB searches without an index, and one is built by its owner
        (``create_index``) once the table is large enough to need it."""

    def close(self) -> None:
        self.table = self.database = None


def _fits(found: Any, wanted: Any) -> bool:
    """Whether a column of type ``found`` takes the values of ``wanted``: the same
    type, or a struct holding each of its fields (another writer may add some)."""
    import pyarrow

    if isinstance(wanted, pyarrow.StructType):
        if not isinstance(found, pyarrow.StructType):
            return False
        names = [field.name for field in found]
        return all(field.name in names and _fits(found.field(field.name).type, field.type)
                   for field in wanted)
    return bool(found == wanted)
