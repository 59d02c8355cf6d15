"""A pgvector store changed behind chunkd's back (a row without an embedding set or
added, the bookkeeping's ids cut), and an empty ``--collection``, through the installed
``chunkd`` against a real PostgreSQL: ``--check`` says what differs, the next sync
mends it, and what LangChain reads is the folder's chunks only."""

from __future__ import annotations

import os
import subprocess

import pytest
from command import HANG, chunkd_command
from store_servers import collection_name, embedded_texts, paragraphs, pgvector_rows, sync

#: The first seed of this module's texts (each test's differ: a chunk id is unique across
#: the database).
SEED = 70


def synced(postgres, endpoint, tmp_path, request, seed: int, *names: str):
    """A folder of files (three chunks or more each, of seeds from ``seed``: a chunk id
    is unique across the database) synced into a collection of the test's own:
    (folder, collection)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for seed, name in enumerate(names, seed):
        (folder / name).write_text(paragraphs(seed, 3))
    collection = collection_name(request)
    done = sync(folder, postgres.url, endpoint, "--collection", collection)
    assert done.returncode == 0, done.stderr
    return folder, collection


def of_source(postgres, collection: str, source: str) -> list[str]:
    return sorted(row for row, (_, _, values) in pgvector_rows(postgres.url, collection).items()
                  if values["source"] == source)


def langchain_finds(postgres, collection: str, source: str) -> list[str]:
    """The texts LangChain's filtered search returns of ``source``."""
    from langchain_core.embeddings import FakeEmbeddings
    from langchain_postgres import PGVector
    from test_embed_url import DIMENSION

    store = PGVector(FakeEmbeddings(size=DIMENSION), collection_name=collection,
                     connection=postgres.url.replace("postgresql://", "postgresql+psycopg://"),
                     create_extension=False)
    found = store.similarity_search("river", k=100, filter={"source": source})
    return [document.page_content for document in found]


def check(folder, postgres, endpoint, collection: str) -> subprocess.CompletedProcess:
    return sync(folder, postgres.url, endpoint, "--collection", collection, "--check")


@pytest.mark.slow
def test_a_row_without_an_embedding_added_under_a_file_is_found_and_removed(
        postgres, endpoint, tmp_path, request):
    """A row of chunkd's origin and a file's metadata, its embedding NULL: LangChain's
    filtered search returns it, so it is a row of that file: ``--check`` says so, and
    the next sync removes it (nothing embedded: the file's own rows are kept)."""
    folder, collection = synced(postgres, endpoint, tmp_path, request, SEED, "d.md", "e.md")
    victim = of_source(postgres, collection, "d.md")[0]
    with postgres.connect() as connection:
        connection.execute(
            "INSERT INTO langchain_pg_embedding (id, collection_id, embedding, document, "
            "cmetadata) SELECT 'injected-2', collection_id, NULL, 'INJECTED2', cmetadata "
            "FROM langchain_pg_embedding WHERE id = %s", (victim,))
    assert "INJECTED2" in langchain_finds(postgres, collection, "d.md")
    checked = check(folder, postgres, endpoint, collection)
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.decode().splitlines() == [
        "ids d.md: 0 of the folder's not in the store, 1 in the store not of the folder"]
    asked = embedded_texts(endpoint)
    done = sync(folder, postgres.url, endpoint, "--collection", collection)
    assert done.returncode == 0, done.stderr
    assert b"1 applied, 0 removed, 1 current" in done.stderr, done.stderr
    assert embedded_texts(endpoint) == asked
    assert "injected-2" not in pgvector_rows(postgres.url, collection)
    assert "INJECTED2" not in langchain_finds(postgres, collection, "d.md")
    checked = check(folder, postgres, endpoint, collection)
    assert (checked.returncode, checked.stdout) == (0, b""), checked.stderr


@pytest.mark.slow
def test_a_rows_embedding_set_to_null_is_found_and_embedded_again(postgres, endpoint,
                                                                   tmp_path, request):
    folder, collection = synced(postgres, endpoint, tmp_path, request, SEED + 2, "d.md", "e.md")
    victim = of_source(postgres, collection, "d.md")[0]
    with postgres.connect() as connection:
        connection.execute("UPDATE langchain_pg_embedding SET embedding = NULL WHERE id = %s",
                           (victim,))
    checked = check(folder, postgres, endpoint, collection)
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.decode().splitlines() == ["stale d.md: 1 of its rows hold no embedding"]
    asked = embedded_texts(endpoint)
    done = sync(folder, postgres.url, endpoint, "--collection", collection)
    assert done.returncode == 0, done.stderr
    assert b"1 applied, 0 removed, 1 current" in done.stderr, done.stderr
    assert embedded_texts(endpoint) == asked + 1  # that row's text only
    with postgres.connect() as connection:
        assert connection.execute("SELECT embedding IS NOT NULL FROM langchain_pg_embedding "
                                  "WHERE id = %s", (victim,)).fetchone() == (True,)
    checked = check(folder, postgres, endpoint, collection)
    assert (checked.returncode, checked.stdout) == (0, b""), checked.stderr


@pytest.mark.slow
def test_bookkeeping_whose_ids_are_cut_is_said_and_mended(postgres, endpoint, tmp_path,
                                                          request):
    """``chunkd_sources.ids`` set to an empty array: ``--check`` says the bookkeeping's
    ids differ from the rows (it said "0 ... 0 ...": a difference of nothing)."""
    folder, collection = synced(postgres, endpoint, tmp_path, request, SEED + 4, "d2.md")
    held = len(of_source(postgres, collection, "d2.md"))
    with postgres.connect() as connection:
        connection.execute("UPDATE chunkd_sources SET ids = '{}' FROM langchain_pg_collection c "
                           "WHERE c.uuid = collection_id AND c.name = %s", (collection,))
    checked = check(folder, postgres, endpoint, collection)
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.decode().splitlines() == [
        f"ids d2.md: its bookkeeping records 0 ids without a row, and not {held} of its rows"]
    asked = embedded_texts(endpoint)
    done = sync(folder, postgres.url, endpoint, "--collection", collection)
    assert done.returncode == 0, done.stderr
    assert b"1 applied" in done.stderr and embedded_texts(endpoint) == asked
    checked = check(folder, postgres, endpoint, collection)
    assert (checked.returncode, checked.stdout) == (0, b""), checked.stderr


@pytest.mark.parametrize("sink", ["postgresql://rag@127.0.0.1:1/rag", "lance"])
@pytest.mark.parametrize("command", ["sync", "watch"])
def test_an_empty_collection_is_a_usage_error_for_either_store(tmp_path, sink, command):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("text")
    url = str(tmp_path / "lance") if sink == "lance" else sink
    done = subprocess.run(
        [chunkd_command(), command, str(folder), "--collection", "", "--embed-url",
         "http://127.0.0.1:1", "--embed-model", "m", *(["--sink", url] if command == "sync"
                                                       else [])],
        capture_output=True, timeout=HANG,
        env={**os.environ, "CHUNKD_SINK_URL": url})
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.decode().splitlines()
    assert line.endswith("--collection '': an empty name (leave the option out for the "
                         "default, chunkd)"), line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["docs"]
