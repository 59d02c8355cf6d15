"""``chunkd watch --journal FILE``: one JSON line per change of the results, appended,
never rewritten, for consumers that keep something (a vector store) in step.

Each line has ``seq`` (1, 2, ... in the file's order), ``time`` (UTC, ISO 8601),
``event`` and ``source`` (the input, as results name it):

* ``chunked``: a result was written; ``result`` (its file name), ``sha256`` (of the
  input), ``added`` and ``removed`` (ids), ``kept`` (how many ids stayed);
* ``error``: an error result was written: ``error`` says why, ``removed`` the ids
  that left with the result it replaced (``added`` is empty);
* ``removed``: the input's results were removed (deleted, renamed away, no longer
  taken): ``removed``, the ids that left.

Replaying the lines in order (for each line, take away ``removed``, then put in
``added``) gives each source's ids; a line applied twice changes nothing (``added`` and
``removed`` never share an id). The daemon writes a result first and its line after:
a daemon killed between the two leaves a result the journal does not have yet, and at
its next start it compares every result with the replayed journal and appends what
is missing (``reconcile``), before it chunks anything. A line is one ``write`` to a
file opened for appending, then synced; a partial last line (a crash of the machine in
the middle of one) is cut off at start: consumers read only lines that end in a newline.

``result_stat`` (the result file's inode, size and mtime in ns) lets a restart trust a
result the journal already describes without reading it.
"""

from __future__ import annotations

import base64
import fcntl
import os
import time
from dataclasses import dataclass, field

import orjson

from chunkd.changes import Changes
from chunkd.ids import document_key, id_bytes
from chunkd.writers import name_value


class JournalError(Exception):
    """The journal cannot be read, locked or appended to."""


#: A result file's identity: (inode, size, mtime ns).
ResultStat = tuple[int, int, int]


@dataclass
class Replayed:
    """A source's state as the journal tells it: its input's relative path, its ids
    in order, and the identity of the result file its last line describes."""

    relative: str
    ids: dict[bytes, None] = field(default_factory=dict)
    result_stat: ResultStat | None = None


class Journal:
    """An open journal: its next sequence number and, until ``forget``, what replaying
    it gives (by ``document_key`` of the source)."""

    def __init__(self, path: str) -> None:
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise JournalError(f"cannot open the journal {path}: {error.strerror}") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise JournalError(f"the journal {path} is in use by another chunkd watch") from None
        self.path = path
        self.seq = 0
        self.state: dict[bytes, Replayed] = {}
        self.cut = self._replay()

    def _replay(self) -> int:
        """Read every line; cut off a partial last line. The bytes cut off."""
        complete = 0
        with open(os.dup(self.fd), "rb") as stream:
            stream.seek(0)
            for number, line in enumerate(stream, 1):
                if not line.endswith(b"\n"):
                    break
                try:
                    entry = orjson.loads(line)
                    self.seq = int(entry["seq"])
                    self._apply(entry)
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    raise JournalError(f"{self.path}: line {number} is not a chunkd watch "
                                       "journal line; name another file") from None
                complete += len(line)
            size = stream.seek(0, os.SEEK_END)
        if size > complete:
            os.ftruncate(self.fd, complete)
        return size - complete

    def _apply(self, entry: dict) -> None:
        key = orjson.dumps(entry["source"], option=orjson.OPT_SORT_KEYS, default=str)
        if entry["event"] == "removed":
            self.state.pop(key, None)
            return
        replayed = self.state.setdefault(key, Replayed(_relative(entry["source"])))
        for text in entry["removed"]:
            replayed.ids.pop(id_bytes(text), None)
        replayed.ids.update(dict.fromkeys(map(id_bytes, entry["added"])))
        stat = entry.get("result_stat")
        replayed.result_stat = tuple(stat) if stat else None  # type: ignore[assignment]

    def forget(self) -> None:
        """Drop the replayed state (needed only at start)."""
        self.state = {}

    def append(self, event: str, relative: str, changes: Changes, **fields: object) -> None:
        """Append one line and sync it."""
        self.seq += 1
        line = {"seq": self.seq,
                "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z",
                "event": event, "source": name_value(relative)} | fields | changes.as_dict()
        data = orjson.dumps(line) + b"\n"
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
            os.fsync(self.fd)
        except OSError as error:
            raise JournalError(f"cannot append to the journal {self.path}: "
                               f"{error.strerror}") from None

    def replayed(self, relative: str) -> Replayed | None:
        """What replaying the journal gives for an input (until ``forget``)."""
        return self.state.get(document_key(relative))


def _relative(source: object) -> str:
    """An input's relative path from its ``source`` value (``name_value``'s inverse)."""
    if isinstance(source, dict):
        return os.fsdecode(base64.b64decode(source["bytes"]))
    if not isinstance(source, str):
        raise TypeError("a source is a name")
    return source
