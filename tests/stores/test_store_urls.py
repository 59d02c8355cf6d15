"""``--sink`` settings as a careless or hostile user writes them, through the installed
``chunkd`` (``sync``, and ``watch`` given the store by ``CHUNKD_SINK_URL``) against a
real PostgreSQL: a URL without ``//``, libpq's keyword/value settings (quoted passwords
too), settings libpq refuses before connecting, the user's own connection options.
A password never appears; a setting that cannot work is a usage error at once."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.parse

import pytest
from command import HANG, chunkd_command
from store_servers import collection_name, paragraphs, pgvector_rows, sync

from chunkd.stores.pgvector import STATEMENT_SECONDS, PgvectorSink
from chunkd.net.urls import identity_url, masked, public_url, quoted, secrets

PASSWORD = "S3cret-Pass"


def folder_of(tmp_path, seed: int = 7):
    """A folder of one file (its chunk ids the seed's: unique across a database)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(paragraphs(seed, 3))
    return folder


def run(command: str, folder, url: str, *options: str, env: dict | None = None,
        timeout: float = HANG) -> subprocess.CompletedProcess:
    """``chunkd sync`` given ``--sink URL``, or ``chunkd watch`` given it by the
    environment; the endpoint is a closed port (a usage error comes before any call)."""
    given = ["--sink", url] if command == "sync" else []
    return subprocess.run(
        [chunkd_command(), command, str(folder), *given, "--embed-url", "http://127.0.0.1:1",
         "--embed-model", "m", *options], capture_output=True, timeout=timeout, cwd=folder,
        env={**os.environ, **(env or {}),
             **({"CHUNKD_SINK_URL": url} if command == "watch" else {})})


def one_line(done: subprocess.CompletedProcess) -> str:
    text = done.stderr.decode() + done.stdout.decode()
    assert PASSWORD not in text and "S3cret" not in text, text
    assert "Traceback" not in text
    [line] = done.stderr.decode().splitlines()
    return line


# --- the one masking rule ------------------------------------------------------------

@pytest.mark.parametrize("text, shown", [
    ("postgresql:rag:S3cret-Pass@127.0.0.1:5432/rag", "postgresql:..."),
    ("postgresql://rag:S3cret-Pass@db:5432/rag?sslmode=require", "postgresql://rag@db:5432/rag"),
    ("postgresql://rag:S3cr/et-Pass@db/rag", "postgresql://rag@db/rag"),
    ("postgresql://rag:S3cr@et-Pass@db/rag", "postgresql://rag@db/rag"),
    ("postgresql://rag:S3cr%3Fet-Pass@db/rag", "postgresql://rag@db/rag"),
    ("postgresql://rag@db/rag?password=S3cret-Pass&x=1", "postgresql://rag@db/rag"),
    ("host=db port=5432 user=rag password=S3cret-Pass dbname=rag",
     "host=db port=5432 user=rag dbname=rag"),
    ("host=db user=rag password='S3cret Pass\\' x' dbname=rag", "host=db user=rag dbname=rag"),
    ("host = db password = S3cret-Pass", "host=db"),
    ("/srv/x password=S3cret-Pass", "..."),
    ("http:someone:S3cret-Pass@127.0.0.1:8080", "http:..."),
    ("http://someone:S3cret-Pass@127.0.0.1:8080/v1?api-key=S3cret-Key", "http://127.0.0.1:8080/v1"),
    ("/var/lib/chunkd/lance", "/var/lib/chunkd/lance"),
])
def test_public_url_never_shows_a_secret(text, shown):
    assert public_url(text) == shown
    hidden = secrets(text)
    assert hidden and all("S3cr" in secret for secret in hidden) or "S3cr" not in text
    assert "S3cr" not in masked(f"the driver quotes {text}", hidden)
    assert "S3cr" not in identity_url(text)


# --- through the command -------------------------------------------------------------

@pytest.mark.parametrize("command", ["sync", "watch"])
def test_a_url_without_slashes_is_a_usage_error_that_hides_the_password(tmp_path, command):
    done = run(command, folder_of(tmp_path), f"postgresql:rag:{PASSWORD}@127.0.0.1:1/rag")
    assert done.returncode == 2
    assert "--sink postgresql:...: a PostgreSQL URL begins postgresql://" in one_line(done)


@pytest.mark.parametrize("url", [
    f"postgresql://rag:{PASSWORD}@127.0.0.1:1/rag?sslmode=bogus",
    f"postgresql://rag:{PASSWORD}@127.0.0.1:99999/rag",
    f"host=127.0.0.1 port=99999 user=rag password={PASSWORD} dbname=rag",
    f"host=a,b port=1,2,3 user=rag password={PASSWORD}",
])
@pytest.mark.parametrize("command", ["sync", "watch"])
def test_a_setting_libpq_refuses_is_a_usage_error_at_once(tmp_path, url, command):
    """Not a store that is down: no retries (for sync, a minute of them with --retries 8;
    for watch, 18 s, then exit 3, before)."""
    started = time.monotonic()
    done = run(command, folder_of(tmp_path), url, *(["--retries", "8"] if command == "sync"
                                                    else []))
    assert done.returncode == 2
    line = one_line(done)
    assert "--sink " in line and ("not one of" in line or "port" in line), line
    assert time.monotonic() - started < 30


def test_a_bad_setting_from_libpqs_environment_is_a_usage_error_too(tmp_path):
    done = run("sync", folder_of(tmp_path), f"postgresql://rag:{PASSWORD}@127.0.0.1:1/rag",
               env={"PGSSLMODE": "bogus"})
    assert done.returncode == 2
    assert "PGSSLMODE=bogus: not one of disable, allow, prefer" in one_line(done)


def test_keyword_settings_that_are_no_store_never_become_a_folder(tmp_path):
    folder = folder_of(tmp_path)
    done = run("sync", folder, f"{tmp_path}/x password={PASSWORD}")
    assert done.returncode == 2
    one_line(done)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["docs"]
    assert sorted(path.name for path in folder.iterdir()) == ["a.md"]


# --- against the real PostgreSQL -------------------------------------------------------

def keyword_settings(url: str, **more: str) -> str:
    """The server's URL as libpq's keyword/value settings (values quoted)."""
    from psycopg.conninfo import conninfo_to_dict

    settings = {**conninfo_to_dict(url), **more}
    return " ".join(f"{name}='{value}'" if " " in str(value) else f"{name}={value}"
                    for name, value in settings.items())


@pytest.mark.slow
def test_keyword_settings_are_postgresql_with_the_password_masked(postgres, endpoint,
                                                                  tmp_path, request):
    """libpq's keyword/value settings (psycopg takes them) reach PostgreSQL, not a
    folder named after them; the password (quoted, with a space) shows nowhere."""
    folder = folder_of(tmp_path)
    collection = collection_name(request)
    settings = keyword_settings(postgres.url, password="S3cret Pass")
    done = sync(folder, settings, endpoint, "--collection", collection)
    assert done.returncode == 0, done.stderr
    assert b"S3cret" not in done.stderr + done.stdout
    assert b"1 applied" in done.stderr
    assert f"; {public_url(settings)} collection {collection}".encode() in done.stderr
    assert pgvector_rows(postgres.url, collection)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["docs"]
    assert not any(path.name.startswith(("host=", "user=", "dbname="))
                   for path in folder.parent.parent.iterdir())


@pytest.mark.slow
def test_keyword_settings_of_a_store_that_is_down_never_show_the_password(tmp_path, endpoint):
    done = sync(folder_of(tmp_path), f"host=127.0.0.1 port=1 user=rag password='{PASSWORD} x' "
                                     "dbname=rag", endpoint, "--retries", "0")
    assert done.returncode == 3, done.stderr
    assert b"S3cret" not in done.stderr + done.stdout
    assert b"host=127.0.0.1 port=1 user=rag dbname=rag collection chunkd: " in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("given", ["url", "keywords", "PGOPTIONS"])
def test_the_users_connection_options_are_kept(postgres, endpoint, tmp_path, request, given,
                                              monkeypatch):
    """A search_path in the URL's options (or PGOPTIONS) puts the tables in the tenant's
    schema (a database of the test's own, its vector extension in that schema): chunkd
    adds its statement timeout to the user's options, never in their place."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    schema, database = "tenant_a", f"tenants_{given.lower()}"
    with postgres.connect() as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {database}")
        connection.execute(f"CREATE DATABASE {database}")
    base = make_conninfo(**{**conninfo_to_dict(postgres.url), "dbname": database})
    import psycopg

    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
        connection.execute(f"CREATE EXTENSION vector SCHEMA {schema}")
    folder = folder_of(tmp_path)
    collection = collection_name(request)
    options = f"-c search_path={schema}"
    if given == "url":
        url = (postgres.url.replace("/postgres?", f"/{database}?") + "&options="
               + urllib.parse.quote(options))
        assert url.startswith("postgresql://") and database in url
    elif given == "keywords":
        url = f"{base} options='{options}'"
    else:
        url = base
        monkeypatch.setenv("PGOPTIONS", options)
    done = sync(folder, url, endpoint, "--collection", collection)
    assert done.returncode == 0, done.stderr
    with psycopg.connect(base, autocommit=True) as connection:
        tables = connection.execute(
            "SELECT table_schema, count(*) FROM information_schema.tables WHERE "
            "table_name IN ('langchain_pg_embedding', 'langchain_pg_collection', "
            "'chunkd_sources') GROUP BY table_schema").fetchall()
        rows = connection.execute(
            f"SELECT count(*) FROM {schema}.langchain_pg_embedding").fetchone()[0]
    assert tables == [(schema, 3)] and rows > 0
    checked = sync(folder, url, endpoint, "--check", "--collection", collection)
    assert (checked.returncode, checked.stdout) == (0, b""), checked.stderr
    # In process: the user's options are set, and chunkd's own bound beside them.
    sink = PgvectorSink(url, collection, "x")
    try:
        shown = sink._connected().execute(
            "SELECT current_setting('search_path'), current_setting('statement_timeout')"
        ).fetchone()
    finally:
        sink.close()
    assert shown == (schema, f"{STATEMENT_SECONDS // 60}min")


# --- a secret that masking would give away --------------------------------------------

def test_quoted_text_holding_a_secret_too_short_or_too_common_is_not_shown():
    """Masked, the password ``postgres`` of ``postgresql://postgres@/postgres`` or a
    one-letter one would mangle the text and tell it: the text is not shown."""
    public = public_url("postgresql://postgres:postgres@/postgres?host=/tmp/x")
    assert public == "postgresql://postgres@/postgres"
    assert quoted('database "postgres" does not exist', ("postgres",), public, "G") == "G"
    assert quoted("connection refused", ("e",), "postgresql://rag@db/rag", "G") == "G"
    assert quoted("no such host", ("e",), "postgresql://rag@db/rag", "G") == "no such host"
    assert quoted(f"password {PASSWORD} refused", (PASSWORD,), "postgresql://rag@db/rag",
                  "G") == "password *** refused"
    # The setting's public form is built from parts that hold no secret: never masked.
    assert public_url("postgresql://rag:e@db/rag?sslmode=require") == "postgresql://rag@db/rag"
    assert identity_url("http://u:e@example.com/v1?deployment=large&key=e") \
        == "http://example.com/v1?deployment=large"
    # A part read across a secret's "@" or holding a "=" is not shown.
    assert public_url("postgresql://db/rag?password=S3cr@et/x") == "postgresql://...@.../..."
    assert public_url("postgresql://u@db/rag;password=S3cret") == "postgresql://u@db/..."


def test_a_one_letter_password_never_mangles_a_settings_error(tmp_path):
    done = run("sync", folder_of(tmp_path), "postgresql://rag:e@127.0.0.1:1/postgres"
                                            "?sslmode=bogus")
    assert done.returncode == 2
    [line] = done.stderr.decode().splitlines()
    assert line.endswith(": --sink postgresql://rag@127.0.0.1:1/postgres collection "
                         "chunkd: sslmode=bogus: not one of disable, allow, prefer, require, "
                         "verify-ca, verify-full"), line
    assert "***" not in line


def test_a_driver_message_holding_a_one_letter_password_is_not_shown(tmp_path):
    """The store is down (a closed port): the driver's words hold many an "e"; the line
    names the kind of error, never the words with each "e" masked."""
    done = run("sync", folder_of(tmp_path), "postgresql://rag:e@127.0.0.1:1/postgres",
               "--retries", "0")
    assert done.returncode == 3, done.stderr
    [line] = done.stderr.decode().splitlines()
    assert line.startswith("chunkd: postgresql://rag@127.0.0.1:1/postgres collection chunkd: "
                           "OperationalError: its message is not shown"), line
    assert "***" not in line


def test_an_endpoints_one_letter_secret_never_mangles_its_messages(tmp_path, endpoint):
    """An endpoint's URL is shown as its public form: a query secret "e" masks nothing."""
    url = f"{endpoint.url}/elsewhere?key=e"
    done = subprocess.run(
        [chunkd_command(), "sync", str(folder_of(tmp_path)), "--sink",
         str(tmp_path / "lance"), "--embed-url", url, "--embed-model", "m"],
        capture_output=True, timeout=HANG)
    assert done.returncode == 1, done.stderr
    text = done.stderr.decode()
    assert f"{endpoint.url}/elsewhere/v1/embeddings: HTTP 404" in text, text
    assert "***" not in text


@pytest.mark.slow
def test_the_summary_shows_the_store_as_its_public_form(postgres, endpoint, tmp_path,
                                                         request):
    """A password ``postgres``, as are the user and database (the test server trusts its
    socket: any password does): the summary shows ``postgresql://postgres@/postgres``,
    never ``***ql://***@/***``."""
    url = postgres.url.replace("postgresql://postgres:@/", "postgresql://postgres:postgres@/")
    assert ":postgres@/postgres?" in url
    collection = collection_name(request)
    done = sync(folder_of(tmp_path, seed=17), url, endpoint, "--collection", collection)
    assert done.returncode == 0, done.stderr
    assert f"; postgresql://postgres@/postgres collection {collection}".encode() \
        in done.stderr, done.stderr
    assert b"***" not in done.stderr
