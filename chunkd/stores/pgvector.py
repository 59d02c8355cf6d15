"""PostgreSQL with pgvector, in langchain-postgres's tables, so that
``langchain_postgres.PGVector(collection_name=...)`` reads and searches what chunkd
wrote, as it is.

Its layout (langchain-postgres's ``PGVector``, which creates the same tables if they
are absent): ``langchain_pg_collection (uuid, name UNIQUE, cmetadata)`` and
``langchain_pg_embedding (id PRIMARY KEY, collection_id, embedding vector, document,
cmetadata JSONB)``. A chunk is a row: its ``chunk_id`` the row's id, its text the
document, its vector the embedding, and ``source``, ``origin`` and the record's other
fields (``chunkd.stores.METADATA``) the metadata. chunkd's bookkeeping is one more
table, ``chunkd_sources (collection_id, origin, source, sha256, fingerprint, ids)``,
written in the same transaction as the rows.

Created if absent (under langchain-postgres's own advisory lock, so that the two never
race): the ``vector`` extension, the tables, LangChain's GIN index on the metadata and
an HNSW index on the embedding for cosine distance (LangChain's default), which needs
the column's dimension: chunkd creates the table with the dimension of its vectors; a
table LangChain created without one gets no HNSW index (searches still work, exactly).
The HNSW index is built once the writer has caught up (``settle``), not before the first
rows: built after a load it costs a fraction of what every insert pays to keep it up.

chunkd's tables are all in one schema, the first of the connection's search_path that
exists (``current_schema()``, where they are created), each name qualified with it.

The connection's settings come from the URL (or libpq's keyword/value settings) and
libpq's environment (``PGPASSWORD``, ``~/.pgpass``, ``PGSSLMODE``...); the user's
``options`` (else ``PGOPTIONS``) are kept, chunkd's statement timeout added before them;
a setting libpq would refuse before connecting is the setting's error, not a store that
is down; the password never appears in a message (``chunkd.net.urls``).
"""

from __future__ import annotations

import logging
import os
import struct
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from chunkd.model.errors import SettingsError
from chunkd.stores.base import (Change, StoreDown, StoreRefused, Stored, Unchecked, metadata,
                               row_digest, superseded)
from chunkd.net.urls import conninfo, in_credentials, public_url, quoted, secrets, slashed

if TYPE_CHECKING:
    import psycopg

EXTRA = "pip install 'psycopg[binary]>=3.2'"
#: langchain-postgres's lock around creating the extension (the same number, so that a
#: PGVector starting at the same time waits for chunkd, and chunkd for it).
SCHEMA_LOCK = 1573678846307946496
#: The most seconds to connect, and the most any statement may take.
CONNECT_SECONDS, STATEMENT_SECONDS = 10, 120
#: The HNSW index's build, bounded on its own: the most seconds it may wait for the
#: rows' table (its SHARE lock would hold up every writer queued behind it) and take;
#: after a build that failed, the fewest seconds before a later ``settle`` tries again.
INDEX_LOCK_SECONDS, INDEX_SECONDS, INDEX_AGAIN_SECONDS = 5, 3600, 3600.0
#: The rows the table holds before the HNSW index is built: below, an exact search
#: reads them all in milliseconds (and finds every neighbour), and the build would cost
#: a small load more than its rows (0.8 to 1.7 s of a 1,000-file sync's 2.5 to 3.5 s).
INDEX_ROWS = 10_000

#: chunkd's tables, each in the schema chunkd creates and reads them in (``_names``):
#: the name each statement gives it (``{collection}``...).
TABLES = {"collection": "langchain_pg_collection", "embedding": "langchain_pg_embedding",
          "sources": "chunkd_sources", "gin": "ix_cmetadata_gin",
          "by_source": "chunkd_embedding_source", "hnsw": "chunkd_embedding_hnsw"}
BOOKKEEPING = ("""CREATE EXTENSION IF NOT EXISTS vector""", """
CREATE TABLE IF NOT EXISTS {collection} (
    uuid UUID PRIMARY KEY, name VARCHAR NOT NULL UNIQUE, cmetadata JSON)""", """
CREATE TABLE IF NOT EXISTS {sources} (
    collection_id UUID NOT NULL REFERENCES {collection} (uuid) ON DELETE CASCADE,
    origin TEXT NOT NULL, source TEXT NOT NULL, sha256 TEXT NOT NULL,
    fingerprint TEXT NOT NULL, ids TEXT[] NOT NULL,
    applied TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, origin, source))""")
EMBEDDINGS = ("""
CREATE TABLE IF NOT EXISTS {embedding} (
    id VARCHAR PRIMARY KEY,
    collection_id UUID REFERENCES {collection} (uuid) ON DELETE CASCADE,
    embedding vector({dimension}), document VARCHAR, cmetadata JSONB)""", """
CREATE INDEX IF NOT EXISTS ix_cmetadata_gin ON {embedding}
    USING gin (cmetadata jsonb_path_ops)""", """
CREATE INDEX IF NOT EXISTS chunkd_embedding_source ON {embedding}
    (collection_id, (cmetadata ->> 'origin'), (cmetadata ->> 'source'))""")
#: A source's rows (``e``; ``{origin}`` and ``{source}``: SQL of the values), found through
#: chunkd's B-tree index on the metadata's origin and source: LangChain's GIN index
#: answers a containment (``@>``) only once the table has statistics (ANALYZE, which a
#: fresh load lacks), and without it every lookup read the whole table, so that a sync's
#: bookkeeping took time in the square of the files (4.2 s at 1,000, 23 s at 2,000).
SOURCE_ROWS = ("e.cmetadata ->> 'origin' = {origin} AND e.cmetadata ->> 'source' = {source}")
#: The columns chunkd writes and LangChain reads, and their types.
COLUMNS = {"id": ("character varying", "text"), "collection_id": ("uuid",),
           "embedding": ("vector",), "document": ("character varying", "text"),
           "cmetadata": ("jsonb",)}
#: What a source's rows hold as a reader sees them (ids, texts, metadata), in one
#: digest computed by the store: written in the bookkeeping with the rows, so that a
#: row changed behind chunkd's back makes its source stale (rewritten by the next
#: write). Every row counts, whatever its embedding: one without (NULL, which chunkd
#: never writes: set or added behind its back) is marked in the digest, so that its
#: source is stale. ``{rows}``: the rows' selection, aliased ``e``.
ROWS_DIGEST = ("SELECT md5(string_agg(e.id || ' ' || md5(coalesce(e.document, '')) || ' ' "
               "|| md5(e.cmetadata::text) || CASE WHEN e.embedding IS NULL THEN ' null' "
               "ELSE '' END, ',' ORDER BY e.id)) FROM {embedding} e WHERE {rows}")
HNSW = ("CREATE INDEX IF NOT EXISTS chunkd_embedding_hnsw ON {embedding} "
        "USING hnsw (embedding vector_cosine_ops)")

#: A temporary table for a group's rows, filled by one binary COPY (vectors as float4,
#: never as text) and emptied at commit.
STAGE = ("CREATE TEMP TABLE IF NOT EXISTS chunkd_stage (id VARCHAR, embedding vector, "
         "document VARCHAR, cmetadata TEXT) ON COMMIT DELETE ROWS")
UPSERT = """
INSERT INTO {embedding} AS stored (id, collection_id, embedding, document, cmetadata)
SELECT id, %s, embedding, document, cmetadata::jsonb FROM chunkd_stage
ON CONFLICT (id) DO UPDATE SET document = EXCLUDED.document, cmetadata = EXCLUDED.cmetadata,
    embedding = EXCLUDED.embedding
WHERE stored.collection_id = EXCLUDED.collection_id
    AND stored.cmetadata ->> 'origin' = EXCLUDED.cmetadata ->> 'origin'
RETURNING cmetadata ->> 'source'
"""

T = TypeVar("T")
log = logging.getLogger("chunkd.stores")

# The driver logs, to stderr unless told otherwise, what it ignored while ending a
# failed statement: the failure itself is the sink's error, said once.
logging.getLogger("psycopg").addHandler(logging.NullHandler())
logging.getLogger("psycopg").propagate = False


class PgvectorSink:
    """One collection of a PostgreSQL database, for one origin (``chunkd.stores``)."""

    def __init__(self, url: str, collection: str, origin: str) -> None:
        try:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict
        except ImportError:
            raise SettingsError(f"--sink postgresql://... needs psycopg: {EXTRA}") from None
        self.url = url
        self.collection = collection
        self.origin = origin
        self.secrets = secrets(url)
        self.where = f"{public_url(url)} collection {collection}"
        if not conninfo(url) and not slashed(url):  # no driver reads "postgresql:u@h"
            raise SettingsError(f"--sink {public_url(url)}: a PostgreSQL URL begins "
                                "postgresql:// (or give libpq's keyword=value settings)")
        try:  # a malformed URL is the setting's error, said now, not a store that is down
            settings = conninfo_to_dict(url)
        except psycopg.Error as error:
            raise SettingsError(f"--sink {self._message(error)}") from None
        problem = _misread(settings, lambda value: in_credentials(url, value) or any(
            secret in value for secret in self.secrets))
        if problem:  # (chunkd's words, and values that hold no secret)
            raise SettingsError(f"--sink {self.where}: {problem}")
        # The user's options (the URL's, else libpq's PGOPTIONS, which an options=
        # given to the driver replaces), with chunkd's statement timeout before them:
        # a statement_timeout of the user's own is theirs to choose.
        self.options = " ".join(part for part in (
            f"-c statement_timeout={STATEMENT_SECONDS * 1000}",
            str(settings.get("options") or os.environ.get("PGOPTIONS") or "").strip()) if part)
        self.connection: psycopg.Connection | None = None
        self.collection_id: uuid.UUID | None = None
        self.dimension: int | None = None  # once the tables are known to take it
        self.index_due = False  # the rows' table may lack its HNSW index (settle)
        self.index_again = 0.0  # after a failed build: not before this time.monotonic()
        # chunkd's tables in the connection's schema (``_schema``): as a statement's
        # text names them (``{embedding}``...), and as to_regclass reads them.
        self.names: dict[str, str] | None = None
        self.qualified: dict[str, str] = {}

    # --- the connection --------------------------------------------------------------

    def _connected(self) -> psycopg.Connection:
        import psycopg

        if self.connection is None or self.connection.closed or self.connection.broken:
            self.connection = None
            self.connection = psycopg.connect(
                self.url, connect_timeout=CONNECT_SECONDS, autocommit=False,
                # (fallback_: an application_name the user gives stays theirs)
                options=self.options, fallback_application_name="chunkd")
        return self.connection

    def _run(self, work: Callable[[psycopg.Cursor], T]) -> T:
        """``work`` in one transaction, committed; a driver error as the sink's."""
        import psycopg

        try:
            connection = self._connected()
            try:
                with connection.transaction(), connection.cursor() as cursor:
                    if self.names is None:
                        self._schema(cursor)
                    return work(cursor)
            except BaseException:  # what it learnt may have been rolled back
                self.collection_id, self.dimension, self.index_due = None, None, False
                raise
        # Operational: the connection, a timeout, a full disk, a deadlock or a
        # serialization failure: each worth another try.
        except (psycopg.OperationalError, psycopg.InterfaceError) as error:
            self._drop()
            raise StoreDown(self._message(error)) from None
        except psycopg.Error as error:
            raise StoreRefused(self._message(error)) from None

    def _drop(self) -> None:
        if self.connection is not None:
            try:
                self.connection.close()
            except Exception:  # noqa: BLE001 (a broken connection closes as it can)
                pass
        self.connection = None
        self.collection_id = None
        self.dimension = None
        self.names = None

    def _schema(self, cursor: psycopg.Cursor) -> None:
        """Name chunkd's tables in one schema, the one its connection creates in: the
        first of its search_path that exists (``current_schema()``). Unqualified, a
        lookup finds a later schema's table where this one lacks it (search_path=tenant,
        public with chunkd's tables in public: the bookkeeping made in tenant, the rows
        found in public). Types and functions (pgvector's ``vector``, which may live in
        another schema) still resolve through the search_path, as LangChain's do."""
        from psycopg import sql

        cursor.execute("SELECT current_schema()")
        schema = _one(cursor)
        if schema is None:
            raise StoreRefused(f"{self.where}: no schema of the connection's search_path "
                               "exists (chunkd creates its tables in the first that does)")
        self.qualified = {key: sql.Identifier(schema, table).as_string(cursor)
                          for key, table in TABLES.items()}
        # A "%" in a name is a placeholder's mark in a statement with parameters: each
        # statement that names a table is run with its parameters (none: ``()``).
        self.names = {key: name.replace("%", "%%") for key, name in self.qualified.items()}

    def _sql(self, template: str, **values: Any) -> str:
        """A statement's text, with chunkd's tables named in its schema."""
        assert self.names is not None, "named by _run"
        return template.format(**self.names, **values)

    def _exists(self, cursor: psycopg.Cursor, table: str) -> bool:
        """Whether chunkd's table (a key of ``TABLES``) exists in its schema."""
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (self.qualified[table],))
        return bool(_one(cursor))

    def _message(self, error: BaseException) -> str:
        kind = type(error).__name__
        sqlstate = getattr(error, "sqlstate", None)
        kind += f" (SQLSTATE {sqlstate})" if sqlstate else ""
        text = " ".join(str(error).split()) or kind
        # The driver may quote the URL it could not parse: where a secret cannot be
        # masked without telling it, its message is not shown.
        return f"{self.where}: " + quoted(text, self.secrets, public_url(self.url),
                                          f"{kind}: its message is not shown, as it "
                                          "may quote the password")

    # --- the tables ------------------------------------------------------------------

    def _collection(self, cursor: psycopg.Cursor, create: bool) -> uuid.UUID | None:
        """The collection's uuid (made if ``create``), or None if it has none yet."""
        if self.collection_id is None:
            if create:
                cursor.execute(self._sql("INSERT INTO {collection} (uuid, name) "
                                         "VALUES (%s, %s) ON CONFLICT (name) DO NOTHING"),
                               (uuid.uuid4(), self.collection))
            else:
                if not self._exists(cursor, "sources"):
                    return None
            cursor.execute(self._sql("SELECT uuid FROM {collection} WHERE name = %s"),
                           (self.collection,))
            row = cursor.fetchone()
            self.collection_id = row[0] if row else None
        return self.collection_id

    def _tables(self, cursor: psycopg.Cursor, dimension: int | None) -> uuid.UUID:
        """Create what is absent (the rows' table only once vectors of ``dimension``
        come); the collection's uuid."""
        if self.dimension is None or (dimension is not None and self.dimension != dimension):
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            for statement in BOOKKEEPING:
                cursor.execute(self._sql(statement), ())
            cursor.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = "
                           "to_regclass(%s) AND attname = 'rows_digest'",
                           (self.qualified["sources"],))
            if not _one(cursor):  # a table of an older chunkd: its sources become stale
                cursor.execute(self._sql("ALTER TABLE {sources} ADD COLUMN IF NOT EXISTS "
                                         "rows_digest TEXT"), ())
            # Only what is absent: CREATE INDEX IF NOT EXISTS takes the rows' table's
            # SHARE lock even when the index is there, waiting for every writer.
            if dimension is not None and not all(
                    self._exists(cursor, table) for table in ("embedding", "gin", "by_source")):
                for statement in EMBEDDINGS:
                    cursor.execute(self._sql(statement, dimension=int(dimension)), ())
            cursor.execute("SELECT atttypmod FROM pg_attribute WHERE attrelid = "
                           "to_regclass(%s) AND attname = 'embedding'",
                           (self.qualified["embedding"],))
            declared = _one(cursor)
            if declared is None:
                self.dimension = 0  # no rows' table yet: nothing to delete from
            elif declared > 0 and dimension is not None and declared != dimension:
                raise StoreRefused(f"{self.where}: its embedding column takes vectors of "
                                   f"{declared} dimensions, the model makes {dimension}")
            else:
                self.index_due = declared > 0  # built by settle(), once rows are in
                self.dimension = dimension or declared
        collection = self._collection(cursor, create=True)
        assert collection is not None, "the collection was just made"
        return collection

    # --- reading ---------------------------------------------------------------------

    def sources(self) -> dict[str, Stored]:
        def read(cursor: psycopg.Cursor) -> dict[str, Stored]:
            collection = self._collection(cursor, create=False)
            if collection is None:
                return {}
            cursor.execute("SELECT source, sha256, fingerprint, ids, applied::text, "
                           f"{self._intact(cursor, 's.source')} FROM "
                           f"{self._sql('{sources}')} s WHERE collection_id = %s AND "
                           "origin = %s", (collection, self.origin))
            return {source: _stored(sha256, made, ids, written, intact)
                    for source, sha256, made, ids, written, intact in cursor}
        return self._run(read)

    def rows(self) -> dict[str, set[str]]:
        def read(cursor: psycopg.Cursor) -> dict[str, set[str]]:
            collection = self._collection(cursor, create=False)
            if collection is None or not self._exists(cursor, "embedding"):
                return {}
            # Every row of the origin, whatever its embedding: a row without one is a
            # reader's row all the same (LangChain's filtered search returns it).
            cursor.execute(self._sql("SELECT cmetadata ->> 'source', id FROM {embedding} ")
                           + "WHERE collection_id = %s AND cmetadata ->> 'origin' = %s",
                           (collection, self.origin))
            found: dict[str, set[str]] = {}
            for source, row in cursor:
                found.setdefault(source, set()).add(row)
            return found
        return self._run(read)

    def contents(self) -> dict[str, dict[str, str]]:
        """Each source's rows' digests (``row_digest``), but a row without an embedding:
        it holds nothing chunkd wrote (``--check`` says so)."""
        def read(cursor: psycopg.Cursor) -> dict[str, dict[str, str]]:
            collection = self._collection(cursor, create=False)
            if collection is None or not self._exists(cursor, "embedding"):
                return {}
            cursor.execute(self._sql("SELECT cmetadata ->> 'source', id, document, cmetadata "
                                     "FROM {embedding} ") + "WHERE collection_id = %s AND "
                           "cmetadata ->> 'origin' = %s AND embedding IS NOT NULL",
                           (collection, self.origin))
            found: dict[str, dict[str, str]] = {}
            for source, row, document, values in cursor:
                found.setdefault(source, {})[row] = row_digest(document, values)
            return found
        return self._run(read)

    def vector_size(self) -> int | None:
        def read(cursor: psycopg.Cursor) -> int | None:
            cursor.execute("SELECT a.attname, format_type(a.atttypid, NULL), a.atttypmod "
                           "FROM pg_attribute a WHERE a.attrelid = "
                           "to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped",
                           (self.qualified["embedding"],))
            columns = {name: (kind, size) for name, kind, size in cursor}
            if not columns:
                return None
            for name, kinds in COLUMNS.items():
                if name not in columns or columns[name][0] not in kinds:
                    found = f"a {columns[name][0]}" if name in columns else "none"
                    raise StoreRefused(
                        f"{self.where}: langchain_pg_embedding's column {name} is not "
                        f"what chunkd writes and LangChain reads ({' or '.join(kinds)}; "
                        f"it has {found})")
            size = columns["embedding"][1]
            return size if size > 0 else None
        return self._run(read)

    def vectors(self, ids: Iterable[str]) -> dict[str, list[float]]:
        wanted = list(ids)

        def read(cursor: psycopg.Cursor) -> dict[str, list[float]]:
            collection = self._collection(cursor, create=False)
            if collection is None or not wanted \
                    or not self._exists(cursor, "embedding"):
                return {}
            cursor.execute(self._sql("SELECT id, embedding::text FROM {embedding} ")
                           + "WHERE collection_id = %s AND id = ANY(%s) AND cmetadata ->> 'origin' = %s",
                           (collection, wanted, self.origin))
            return {row: orjson.loads(text) for row, text in cursor if text is not None}
        return self._run(read)

    # --- writing ---------------------------------------------------------------------

    def apply(self, changes: Sequence[Change]) -> list[str]:
        for change in changes:
            ids = [record["chunk_id"] for record in change.records]
            if len(set(ids)) != len(ids):
                raise StoreRefused(f"{self.where}: {change.source} has two chunks with one id")
        dimension = next((len(change.records[0]["vector"]) for change in changes
                          if change.records), None)

        if self.dimension is None or (dimension is not None and self.dimension != dimension):
            # In a transaction of its own: CREATE INDEX IF NOT EXISTS locks the rows'
            # table (SHARE) to the transaction's end, and a writer holding a file's lock
            # that this one then waited for, itself waiting to write rows, deadlocked.
            self._run(lambda cursor: self._tables(cursor, dimension))

        def write(cursor: psycopg.Cursor) -> list[str]:
            collection = self._tables(cursor, dimension)  # known: creates nothing
            return self._write(cursor, collection,
                               sorted(changes, key=lambda change: change.source))
        return self._run(write)

    def _write(self, cursor: psycopg.Cursor, collection: uuid.UUID,
               changes: list[Change]) -> list[str]:
        """Write a group of changes (in name order) in a few statements whatever its
        size, under each source's lock; the sources ``superseded``, left as they are."""
        sources = [change.source for change in changes]
        self._lock(cursor, collection, sources)
        checked = [change.source for change in changes
                   if not isinstance(change.previous, Unchecked)]
        now: dict[str, Stored] = {}
        if checked:
            cursor.execute("SELECT source, sha256, fingerprint, ids, applied::text, "
                           f"{self._intact(cursor, 's.source')} FROM "
                           f"{self._sql('{sources}')} s WHERE collection_id = %s AND "
                           "origin = %s AND source = ANY(%s)",
                           (collection, self.origin, checked))
            now = {source: _stored(*row) for source, *row in cursor}
        left = [change.source for change in changes if superseded(change, now.get(change.source))]
        changes = [change for change in changes if change.source not in left]
        written = [change for change in changes if change.sha256 is not None]
        ids = [record["chunk_id"] for change in written for record in change.records]
        if changes and self.dimension:  # the rows' table exists: the rows no longer held
            cursor.execute(self._sql("DELETE FROM {embedding} e WHERE e.collection_id = %s "
                                     "AND " + SOURCE_ROWS.format(origin="%s", source="ANY(%s)"))
                           + " AND NOT e.id = ANY(%s)",
                           (collection, self.origin, [change.source for change in changes], ids))
        removed = [change.source for change in changes if change.sha256 is None]
        if removed:
            cursor.execute(self._sql("DELETE FROM {sources} WHERE collection_id = %s AND ")
                           + "origin = %s AND source = ANY(%s)",
                           (collection, self.origin, removed))
        if ids:
            self._upsert(cursor, collection, written)
        if written:
            rows = "e.collection_id = %s AND " + SOURCE_ROWS.format(origin="%s",
                                                                      source="u.source")
            cursor.execute(
                # Each write's own time, not its transaction's start: each write differs.
                f"INSERT INTO {self._sql('{sources}')} (collection_id, origin, source, "
                "sha256, fingerprint, ids, applied, rows_digest) SELECT %s, %s, u.source, "
                "u.sha256, u.fingerprint, ARRAY(SELECT id FROM jsonb_array_elements_text("
                "u.ids::jsonb) WITH ORDINALITY AS i(id, n) ORDER BY n), clock_timestamp(), "
                f"({self._sql(ROWS_DIGEST, rows=rows)}) FROM unnest(%s::text[], %s::text[], "
                "%s::text[], %s::text[]) AS u(source, sha256, fingerprint, ids) "
                "ON CONFLICT (collection_id, origin, source) DO UPDATE SET sha256 = "
                "EXCLUDED.sha256, fingerprint = EXCLUDED.fingerprint, ids = EXCLUDED.ids, "
                "applied = EXCLUDED.applied, rows_digest = EXCLUDED.rows_digest",
                (collection, self.origin, collection, self.origin,
                 [change.source for change in written], [change.sha256 for change in written],
                 [change.fingerprint for change in written],
                 [orjson.dumps([record["chunk_id"] for record in change.records]).decode()
                  for change in written]))
        return left

    def _upsert(self, cursor: psycopg.Cursor, collection: uuid.UUID,
                written: list[Change]) -> None:
        """The changes' rows, written over the rows of their ids: one binary COPY into
        ``STAGE``, one statement from there; ``StoreRefused`` when an id is another
        collection's or folder's row."""
        cursor.execute(STAGE)
        with cursor.copy("COPY chunkd_stage (id, embedding, document, cmetadata) FROM STDIN "
                         "(FORMAT BINARY)") as copy:
            copy.write(COPY_HEADER)
            for change in written:
                assert change.sha256 is not None, "a written change, not a removal"
                for record in change.records:
                    copy.write(_copy_row(
                        record["chunk_id"], record["vector"], _storable(record["text"]),
                        _json(metadata(record, change.source, self.origin, change.sha256,
                                       change.fingerprint))))
            copy.write(COPY_TRAILER)
        # The rows it wrote, by source: a row of another collection or origin under one
        # of the ids is left as it is (the upsert's condition), and not among them.
        cursor.execute(self._sql(UPSERT), (collection,))
        held = Counter(source for (source,) in cursor)
        for change in written:
            if held.get(change.source, 0) != len(change.records):
                raise StoreRefused(
                    f"{self.where}: {change.source}: "
                    f"{len(change.records) - held.get(change.source, 0)} of its chunk ids are "
                    "held by another collection or folder (langchain_pg_embedding's id is "
                    "unique across collections)")

    def settle(self) -> None:
        """Build the HNSW index if this writer's tables lack it (``IF NOT EXISTS``:
        another writer may have built it) and hold ``INDEX_ROWS`` rows or more, within
        its own bounds (``INDEX_SECONDS``: a large table takes longer than any other
        statement may). A build that fails
        (the table held by another writer, the bound reached) is said once, as what it
        is: the rows are in and searches work, exactly; it is tried again only by a
        ``settle`` ``INDEX_AGAIN_SECONDS`` later, so that a daemon's catch-ups are not
        each held up by it."""
        import psycopg

        if not self.index_due or time.monotonic() < self.index_again:
            return

        def build(cursor: psycopg.Cursor) -> bool:
            cursor.execute(self._sql("SELECT count(*) FROM (SELECT 1 FROM {embedding} "
                                     "LIMIT %s) AS counted"), (INDEX_ROWS,))
            if _one(cursor) < INDEX_ROWS:  # not yet: a later settle counts again
                return False
            cursor.execute(f"SET LOCAL lock_timeout = {INDEX_LOCK_SECONDS * 1000}")
            cursor.execute(f"SET LOCAL statement_timeout = {INDEX_SECONDS * 1000}")
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            cursor.execute(self._sql(HNSW), ())
            return True
        try:
            built = self._run(build)
        except (StoreDown, StoreRefused) as error:
            if isinstance(error.__context__, (psycopg.errors.QueryCanceled,
                                              psycopg.errors.LockNotAvailable)) \
                    or isinstance(error, StoreRefused):
                self.index_again = time.monotonic() + INDEX_AGAIN_SECONDS
                log.warning("chunkd: %s; the HNSW index on its embeddings was not built "
                            "(the rows are in; searches are exact until it is): %s",
                            self.where, str(error).removeprefix(f"{self.where}: "))
                return
            raise  # the store itself went away: the writer's retries are for that
        self.index_due = not built

    def _intact(self, cursor: psycopg.Cursor, source: str) -> str:
        """The SQL of whether a bookkeeping row ``s`` (its source's column ``source``)
        holds the digest of the rows the store holds of it now (``ROWS_DIGEST``); a table
        of an older chunkd, without the digest, holds none: its sources are stale."""
        if not self._exists(cursor, "embedding"):
            return "(to_jsonb(s) ->> 'rows_digest') IS NULL"
        rows = "e.collection_id = s.collection_id AND " + SOURCE_ROWS.format(
            origin="s.origin", source=source)
        return ("(to_jsonb(s) ->> 'rows_digest') IS NOT DISTINCT FROM "
                f"({self._sql(ROWS_DIGEST, rows=rows)})")

    def _lock(self, cursor: psycopg.Cursor, collection: uuid.UUID, sources: list[str]) -> None:
        """One writer at a time per source (two syncs of one folder): a transaction
        lock on each source's key, taken in the order given (every writer gives its
        sources in name order, so that no two wait for each other in a cycle)."""
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(key, 0)) FROM "
                       "unnest(%s::text[]) WITH ORDINALITY AS u(key, n) ORDER BY n",
                       ([f"{collection}\n{self.origin}\n{source}" for source in sources],))

    def close(self) -> None:
        self._drop()


def _stored(sha256: str, made: str, ids: list[str], written: str, intact: bool) -> Stored:
    """A bookkeeping row as ``Stored``, ``altered`` when its rows are not those it
    recorded."""
    return Stored(sha256, made, frozenset(ids), written, not intact)


def _one(cursor: Any) -> Any:
    row = cursor.fetchone()
    return row[0] if row else None


def _storable(value: Any) -> Any:
    """``value`` (a text, or a list of them) as PostgreSQL can hold it: neither its
    ``text`` nor its ``jsonb`` takes U+0000 (a PDF's text holds some, a ligature its
    font does not map), so each is U+FFFD, one code point for one: a row's ``start`` and
    ``end`` still index the source's text."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, (list, tuple)):
        return [_storable(item) for item in value]
    return value


def _json(values: dict[str, Any]) -> str:
    """Metadata as JSON, without the fields a chunk does not have."""
    return orjson.dumps({key: _storable(value) for key, value in values.items()
                         if value is not None}).decode()


#: A binary COPY's header (its signature, no flags, no extension) and its trailer.
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)


def _copy_row(chunk_id: str, vector: Any, text: str, values: str) -> bytes:
    """A row of ``STAGE`` in COPY's binary format: each field its length and bytes (a
    vector as pgvector's binary form: its dimension, a reserved zero, then each value
    as a big-endian float4, which a float32 vector is exactly)."""
    fields = [chunk_id.encode(), None if vector is None else _vector_bytes(vector),
              text.encode(), values.encode()]
    return struct.pack(">h", len(fields)) + b"".join(
        struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
        for field in fields)


def _vector_bytes(vector: Any) -> bytes:
    import numpy

    values = numpy.asarray(vector, dtype=">f4")
    return struct.pack(">HH", values.size, 0) + values.tobytes()


#: libpq's settings checked before connecting (libpq refuses another value at once,
#: which would otherwise be retried as a store that is down), and the environment
#: variable that gives each when the URL does not.
CHOICES = {
    "sslmode": ("PGSSLMODE", ("disable", "allow", "prefer", "require", "verify-ca",
                              "verify-full")),
    "gssencmode": ("PGGSSENCMODE", ("disable", "prefer", "require")),
    "channel_binding": ("PGCHANNELBINDING", ("disable", "prefer", "require")),
    "target_session_attrs": ("PGTARGETSESSIONATTRS", ("any", "read-write", "read-only",
                                                      "primary", "standby", "prefer-standby")),
    "load_balance_hosts": ("PGLOADBALANCEHOSTS", ("disable", "random")),
    "sslnegotiation": ("PGSSLNEGOTIATION", ("postgres", "direct")),
}


def _misread(settings: dict[str, Any], secret: Callable[[str], bool]) -> str | None:
    """What of the connection's settings libpq would refuse before connecting (a port
    that is not one, a value not among a setting's choices), in a few words; None if
    nothing. A value that may hold the password or a piece of it (``secret``: a password
    with a raw "/" ends the URL's credentials early for libpq) is not shown."""
    def given(name: str, variable: str) -> tuple[str, str] | None:
        if settings.get(name) not in (None, ""):
            return name, str(settings[name])
        value = os.environ.get(variable)
        return (variable, value) if value else None

    def said(name: str, value: str) -> str:
        return (f"{name} (its value not shown: it may hold the password; write a / in a "
                "password as %2F)" if secret(value) else f"{name}={value}")

    port = given("port", "PGPORT")
    if port is not None:
        for number in port[1].split(","):
            number = number.strip()
            if number and not (number.isascii() and number.isdigit()
                               and 0 < int(number) < 65536):
                return f"{said(*port)}: not a port number (1 to 65535)"
        hosts = len(str(settings.get("host") or settings.get("hostaddr") or "").split(","))
        ports = len(port[1].split(","))
        if ports > 1 and ports != hosts:
            return f"{said(*port)}: {ports} ports for {hosts} hosts"
    for name, (variable, choices) in CHOICES.items():
        found = given(name, variable)
        if found is not None and found[1] not in choices:
            return f"{said(*found)}: not one of {', '.join(choices)}"
    return None
