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

A file chunkd did not write is refused, never changed: every line chunkd writes begins
with ``{"seq":``, so a file that does not (a token, a log, a file without a newline) is
not a journal, and a partial last line is cut off only after at least one complete
entry (or when it is the first line, begun as chunkd begins it: ``FIRST_LINE_START``). Every entry replayed is checked (its ``seq`` an integer above the one before and
below ``MAX_SEQ``, its event a known one, its ids and paths of their types): a journal
that fails is refused at start, not met by the first append.

``result_stat`` (the result file's inode, size and mtime in ns) lets a restart trust a
result the journal already describes without reading it.
"""

from __future__ import annotations

import base64
import fcntl
import os
import stat
import time
from dataclasses import dataclass, field

import orjson

from chunkd.service.changes import Changes
from chunkd.model.ids import document_key, id_bytes
from chunkd.inputs.readers import display_name
from chunkd.model.chunk import name_value


class JournalError(Exception):
    """The journal cannot be read, locked or appended to."""


#: Every line chunkd writes begins with this (``seq`` is the first key).
LINE_START = b'{"seq":'
#: How the first line begins: a file that holds only a partial line is the first
#: line cut short by a crash only if it begins so.
FIRST_LINE_START = b'{"seq":1,"time":"'
#: The last sequence number: the largest signed 64-bit integer, the field most readers
#: keep a JSON integer in (orjson writes none past 2**64 - 1).
MAX_SEQ = 2**63 - 1
EVENTS = frozenset({"chunked", "error", "removed"})


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
        shown = display_name(path)
        try:
            # O_NONBLOCK: a FIFO's open must not wait for a writer (it is refused below).
            self.fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
                              | os.O_NOCTTY | os.O_NONBLOCK, 0o644)
        except OSError as error:
            raise JournalError(f"cannot open the journal {shown}: {error.strerror}") from None
        try:
            if not stat.S_ISREG(os.fstat(self.fd).st_mode):
                raise JournalError(f"the journal {shown} is not a regular file; name another")
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JournalError(f"the journal {shown} is in use by another chunkd "
                                   "watch") from None
            self.path = shown
            self.seq = 0
            self.state: dict[bytes, Replayed] = {}
            self.cut = self._replay()
        except BaseException:
            os.close(self.fd)
            raise

    def _replay(self) -> int:
        """Read and check every line; cut off a partial last line after at least one
        complete one. The bytes cut off. ``JournalError`` (the file untouched) for a
        file that is not a journal chunkd wrote, or one whose entries do not hold."""
        complete = 0
        with open(os.dup(self.fd), "rb") as stream:
            first = stream.read(len(FIRST_LINE_START))
            if first and not first.startswith(LINE_START):
                raise JournalError(f"{self.path} is not a chunkd watch journal (its first "
                                   "line is not a journal entry); it is left as it is: "
                                   "name another file")
            stream.seek(0)
            for number, line in enumerate(stream, 1):
                if not line.endswith(b"\n"):
                    break
                try:
                    self._apply(self._entry(orjson.loads(line)))
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as error:
                    reason = f": {error}" if isinstance(error, BadEntry) else ""
                    raise JournalError(f"{self.path}: line {number} is not a chunkd watch "
                                       f"journal entry{reason}; it is left as it is: name "
                                       "another file") from None
                complete += len(line)
            size = stream.seek(0, os.SEEK_END)
        if size > complete and not complete and not first.startswith(FIRST_LINE_START):
            raise JournalError(f"{self.path} is not a chunkd watch journal (it holds no "
                               "complete line); it is left as it is: name another file")
        if self.seq >= MAX_SEQ:
            raise JournalError(f"{self.path}: its sequence numbers are used up; start a "
                               "new journal")
        if size > complete:
            os.ftruncate(self.fd, complete)
        return size - complete

    def _entry(self, entry: object) -> dict:
        """``entry`` if it is a line chunkd writes after the line before, its ``seq``
        taken; ``BadEntry`` saying what is wrong if not."""
        if not isinstance(entry, dict):
            raise BadEntry("not an object")
        seq = entry.get("seq")
        # bool is an int to Python, and 1e300 or "7" is no sequence number.
        if type(seq) is not int or not self.seq < seq <= MAX_SEQ:
            raise BadEntry(f"seq must be an integer above {self.seq} and at most {MAX_SEQ}")
        if entry.get("event") not in EVENTS:
            raise BadEntry(f"event must be one of {', '.join(sorted(EVENTS))}")
        if not _is_name(entry.get("source")):
            raise BadEntry("source must be a name")
        if "result" in entry and not _is_name(entry["result"]):
            raise BadEntry("result must be a name")
        for key in ("added", "removed"):
            ids = entry.get(key)
            if not isinstance(ids, list) or not all(isinstance(i, str) and len(i) == 36
                                                    for i in ids):
                raise BadEntry(f"{key} must be a list of chunk ids")
        result_stat = entry.get("result_stat")
        if result_stat is not None and not (isinstance(result_stat, list) and len(
                result_stat) == 3 and all(type(number) is int for number in result_stat)):
            raise BadEntry("result_stat must be three integers")
        for key in ("time", "sha256", "error"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                raise BadEntry(f"{key} must be a string")
        self.seq = seq
        return entry

    def _apply(self, entry: dict) -> None:
        key = orjson.dumps(entry["source"], option=orjson.OPT_SORT_KEYS, default=str)
        if entry["event"] == "removed":
            self.state.pop(key, None)
            return
        replayed = self.state.setdefault(key, Replayed(_relative(entry["source"])))
        for text in entry["removed"]:
            replayed.ids.pop(id_bytes(text), None)
        replayed.ids.update(dict.fromkeys(map(id_bytes, entry["added"])))
        stat_list = entry.get("result_stat")  # checked by _entry: three integers
        replayed.result_stat = (stat_list[0], stat_list[1], stat_list[2]) if stat_list else None

    def forget(self) -> None:
        """Drop the replayed state (needed only at start)."""
        self.state = {}

    def append(self, event: str, relative: str, changes: Changes, **fields: object) -> None:
        """Append one line and sync it."""
        if self.seq >= MAX_SEQ:  # refused at start; the bound is for ever out of reach
            raise JournalError(f"{self.path}: its sequence numbers are used up")
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


def _is_name(value: object) -> bool:
    """Whether ``value`` is a name as ``name_value`` writes it."""
    return isinstance(value, str) or (isinstance(value, dict) and list(value) == ["bytes"]
                                      and isinstance(value["bytes"], str))


class BadEntry(ValueError):
    """A line that is JSON, but not an entry chunkd writes; says what is wrong."""


def _relative(source: object) -> str:
    """An input's relative path from its ``source`` value (``name_value``'s inverse)."""
    if isinstance(source, dict):
        return os.fsdecode(base64.b64decode(source["bytes"]))
    if not isinstance(source, str):
        raise TypeError("a source is a name")
    return source
