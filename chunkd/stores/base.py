"""The sink protocol and what every store shares: changes, errors, metadata, retries
(see ``chunkd.stores``)."""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import orjson

# How messages show a store's URL: the one masking rule of every credential-bearing
# setting (re-exported here, where the sinks' callers look for it).
from chunkd.net.urls import public_url as public_url


#: The record fields a store keeps as metadata beside the text and the vector (with
#: ``source`` and ``origin``), and their Arrow types' names in ``chunkd.model.chunk``.
METADATA = ("index", "start", "end", "length", "tokens", "pages", "headings", "symbols",
            "language")
#: The fields a store keeps beside those only where a record has them (the propositions
#: strategy's): the rows of other records, and their digests, stay as they were.
GIVEN_METADATA = ("title", "summary", "propositions")
#: The collection (pgvector) or table (LanceDB) written when none is named.
DEFAULT_COLLECTION = "chunkd"
#: The environment variable that gives the store when ``--sink`` does not.
URL_VARIABLE = "CHUNKD_SINK_URL"


class StoreDown(Exception):
    """The store could not be reached or lost the connection: worth trying again."""


class StoreRefused(Exception):
    """The store refused a change (a constraint, a vector of another length): the
    source stays as it was; trying again the same change would not help."""


@dataclass(frozen=True)
class Stored:
    """What a store's bookkeeping says of one source: the SHA-256 of the bytes it was
    chunked from, the fingerprint of how (chunkd's version, the settings, the model),
    its chunk ids, and what each write of the source changes (pgvector: its time;
    LanceDB: its rows' addresses), so that a source written over and back to the same
    state is not the state it was before. ``altered``: its rows are not those its
    writer recorded (a row's text or metadata changed behind its back): stale."""

    sha256: str
    fingerprint: str
    ids: frozenset[str]
    written: str = ""
    altered: bool = False

    def holds(self, change: Change) -> bool:
        """Whether this is the state ``change`` makes (whoever wrote it)."""
        return not self.altered and (self.sha256, self.fingerprint, self.ids) == (
            change.sha256, change.fingerprint,
            frozenset(record["chunk_id"] for record in change.records))


class Unchecked:
    """The ``previous`` of a change applied whatever the store holds of its source: the
    daemon's, whose results on disk are the truth (a later result brings a later
    change)."""


UNCHECKED = Unchecked()


@dataclass(frozen=True)
class Change:
    """A source's new state: its records, the SHA-256 of the bytes they were made from
    and the fingerprint of how; ``sha256`` None: the source is removed. ``previous``:
    what the store held of the source (None: nothing) when the change was made from
    the file; the change is applied only while the store still holds that, so that a
    sync never overwrites what another writer stored since (the daemon, another sync;
    ``Sink.apply``)."""

    source: str
    sha256: str | None
    fingerprint: str = ""
    records: list[dict] = field(default_factory=list)
    previous: Stored | None | Unchecked = UNCHECKED


def removal(source: str, previous: Stored | None | Unchecked = UNCHECKED) -> Change:
    """The change that removes ``source``."""
    return Change(source, None, previous=previous)


def superseded(change: Change, now: Stored | None) -> bool:
    """Whether the store, which holds ``now`` of the change's source, no longer holds
    what the change was made against."""
    return not isinstance(change.previous, Unchecked) and change.previous != now


class Sink(Protocol):
    """A vector store's side of ``chunkd sync`` (see the module's docstring)."""

    #: The store as messages name it: never with credentials.
    where: str
    #: The name of the folder whose sources this sink keeps to.
    origin: str

    def sources(self) -> dict[str, Stored]:
        """The bookkeeping of every source of this origin in the collection."""
        ...

    def rows(self) -> dict[str, set[str]]:
        """The chunk ids the store holds for each source of this origin (the rows
        themselves, which a reader sees, not the bookkeeping)."""
        ...

    def contents(self) -> dict[str, dict[str, str]]:
        """What a reader sees of each row of this origin, per source: its id and the
        ``row_digest`` of its text and metadata as the store holds them (read back,
        for ``--check``)."""
        ...

    def vector_size(self) -> int | None:
        """The length of the vectors the store takes, where it declares one (None: no
        table yet, or a column without a dimension); ``StoreRefused`` if its table
        lacks a column chunkd writes or a reader needs."""
        ...

    def vectors(self, ids: Iterable[str]) -> dict[str, list[float]]:
        """The stored vectors of these ids (of this origin), for records that keep one."""
        ...

    def apply(self, changes: Sequence[Change]) -> list[str]:
        """Make the store hold exactly each change's records for its source (every
        current chunk, each with ``chunk_id``, ``text``, ``vector`` and the ``METADATA``
        fields it has) and its bookkeeping, or nothing of a removed source: all the
        changes in one transaction (each source whole; a group is cheaper to commit
        than its sources one by one), with no other writer between reading what the
        store holds of a source and writing it. A change ``superseded`` is not
        applied: the sources left as they are, returned."""
        ...

    def settle(self) -> None:
        """The writer has caught up (a sync's end, a daemon with nothing pending):
        build what is cheaper built once after a load than kept up row by row."""
        ...

    def close(self) -> None:
        ...


def metadata(record: dict, source: str, origin: str, sha256: str,
             fingerprint: str) -> dict[str, Any]:
    """The metadata a store keeps of a record: its source, its origin, the source's
    SHA-256 and fingerprint, and the ``METADATA`` fields (None where it has none)."""
    return {"source": source, "origin": origin, "sha256": sha256, "fingerprint": fingerprint,
            **{name: record.get(name) for name in METADATA},
            **{name: record[name] for name in GIVEN_METADATA if record.get(name) is not None}}


def row_digest(text: str | None, values: dict[str, Any]) -> str:
    """A row as a reader sees it, in one digest: its text and its metadata (the fields
    without a value left out, as pgvector's JSON leaves them, within a struct too, as
    LanceDB gives a proposition's absent ``score``), each U+0000 as U+FFFD
    (PostgreSQL holds no NUL: both stores' rows compare alike)."""
    def storable(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("\x00", "\ufffd")
        if isinstance(value, (list, tuple)):
            return [storable(item) for item in value]
        if isinstance(value, dict):
            return {key: storable(item) for key, item in value.items() if item is not None}
        return value

    shown = {key: storable(value) for key, value in values.items() if value is not None}
    return hashlib.sha256(orjson.dumps([storable(text), shown],
                                       option=orjson.OPT_SORT_KEYS)).hexdigest()


def fingerprint(values: dict[str, Any]) -> str:
    """The SHA-256 of ``values`` as compact JSON with sorted keys."""
    return hashlib.sha256(orjson.dumps(values, option=orjson.OPT_SORT_KEYS)).hexdigest()


T = TypeVar("T")

#: Back-off between tries of a store call: the first wait, doubling up to the most,
#: each with up to a quarter more at random (two syncs do not retry in step).
BACKOFF_FIRST, BACKOFF_MOST = 0.5, 30.0


def retrying(call: Callable[[], T], tries: int,
             waiting: Callable[[StoreDown, float], None] = lambda error, seconds: None,
             sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``, tried up to ``tries`` times while the store is down, with back-off;
    the last ``StoreDown`` is raised. ``waiting`` hears of each wait."""
    delay = BACKOFF_FIRST
    for attempt in range(1, tries + 1):
        try:
            return call()
        except StoreDown as error:
            if attempt == tries:
                raise
            seconds = delay * (1 + random.random() / 4)
            waiting(error, seconds)
            sleep(seconds)
            delay = min(2 * delay, BACKOFF_MOST)
    raise AssertionError("unreachable: the loop returns or raises")
