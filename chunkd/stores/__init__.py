"""Vector stores that hold exactly a folder's current chunks (``chunkd sync --sink``).

A store is one module with a ``Sink``: per source (a file of the folder, by its path
relative to the folder), ``apply`` replaces what the store holds of it by its current
records (a ``Change``; or removes it), in ONE transaction (or one atomic commit)
together with chunkd's bookkeeping of it (its SHA-256, the fingerprint of how it was
chunked and embedded, its chunk ids), so that no reader ever sees half a file or a
file twice; several sources' changes may share the transaction, each whole.
``sources`` reads the bookkeeping back (to know what changed, after a restart too) and
``rows`` the ids the store actually holds (to check that it equals the folder).

A sink keeps to its own sources: those of its ``origin`` (a name for the folder) in its
collection; others may write the same store. Every call is bounded in time. A store
that cannot be reached raises ``StoreDown`` (tried again, with back-off: ``retrying``);
one that refuses a change (a constraint violated, a vector of another length) raises
``StoreRefused``, and that source is left as it was.
"""

from __future__ import annotations

import urllib.parse

from chunkd.model.errors import SettingsError
from chunkd.stores.base import (
    DEFAULT_COLLECTION,
    METADATA,
    URL_VARIABLE,
    Change,
    Sink,
    Stored,
    StoreDown,
    StoreRefused,
    fingerprint,
    metadata,
    removal,
    retrying,
)
from chunkd.net.urls import conninfo, public_url, scheme, slashed

__all__ = ["DEFAULT_COLLECTION", "METADATA", "URL_VARIABLE", "Change", "Sink", "Stored",
           "StoreDown", "StoreRefused", "fingerprint", "metadata", "open_sink", "public_url",
           "removal", "retrying"]


def open_sink(url: str, collection: str, origin: str, fields: tuple[str, ...] = ()) -> Sink:
    """The store at ``url``: ``postgresql://...`` or libpq's ``keyword=value`` settings
    (pgvector, in langchain-postgres's tables), or a folder path (LanceDB, embedded);
    ``SettingsError`` if it is neither or its package is missing. Connects lazily: a
    store that is down fails on first use. A setting holding ``keyword=`` after white
    space is never taken for a folder (its password would name one). An empty
    ``collection`` names none, in either store."""
    if not collection:
        raise SettingsError("--collection '': an empty name (leave the option out for the "
                            f"default, {DEFAULT_COLLECTION})")
    keywords = conninfo(url)
    kind = "postgresql" if keywords else scheme(url)
    if kind and not keywords:
        try:
            urllib.parse.urlsplit(url)
        except ValueError:  # neither the URL nor the parser's words, which may quote it
            raise SettingsError("--sink: not a URL (it is not shown: it may hold a "
                                "password)") from None
    if kind in ("postgresql", "postgres"):
        from chunkd.stores.pgvector import PgvectorSink
        return PgvectorSink(url, collection, origin)
    if kind in ("", "file"):
        from chunkd.stores.lancedb import LanceSink
        return LanceSink(urllib.parse.urlsplit(url).path if kind == "file" else url,
                         collection, origin, fields)
    raise SettingsError(f"--sink {public_url(url)}: not a store chunkd writes (a "
                        "postgresql:// URL, or a folder for LanceDB)")
