"""What a result of ``chunkd watch`` changed: the ids a result holds, and its
difference from the result it replaces (its ``changes``: the ids added, the ids
removed, how many kept).

Ids travel as their 16 bytes (``chunkd.model.ids.id_bytes``), packed one after another: a
result of millions of chunks costs 16 bytes a chunk here, not a Python string each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from chunkd.model.ids import id_bytes, id_text
from chunkd.inputs.readers import read_blocks
from chunkd.outputs.writers import Write

ID_SIZE = 16
#: A chunk record's id in a JSON result. Its quotes cannot occur unescaped inside a
#: JSON string, so the chunks' texts (and a document's extracted text) never match.
JSON_ID = re.compile(rb'"chunk_id":"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"')
#: Longer than any match: what is kept of a block for a match across two blocks.
JSON_CARRY = 64
#: Ids encoded at once when a list of them is written.
WRITE_BATCH = 4096


def result_ids(stream: BinaryIO, format: str) -> Iterator[bytes]:
    """The ids of a result's chunks, in order, read a block at a time (``format``:
    json or msgpack; a result without ids has none)."""
    if format == "msgpack":
        yield from _msgpack_ids(stream)
        return
    carry = b""
    for block in read_blocks(stream):
        data = carry + block
        end = 0
        for match in JSON_ID.finditer(data):
            yield id_bytes(match.group(1).decode("ascii"))
            end = match.end()
        carry = data[max(end, len(data) - JSON_CARRY):]


def _msgpack_ids(stream: BinaryIO) -> Iterator[bytes]:
    import msgpack

    unpacker = msgpack.Unpacker(stream, read_size=1 << 16, raw=False)
    for _ in range(unpacker.read_map_header()):
        if unpacker.unpack() != "chunks":
            unpacker.skip()
            continue
        for _ in range(unpacker.read_array_header()):
            record = unpacker.unpack()
            if isinstance(record, dict) and isinstance(record.get("chunk_id"), str):
                yield id_bytes(record["chunk_id"])


def unpack(packed: bytes) -> Iterator[bytes]:
    """Each id of a packed run of them."""
    return (packed[at:at + ID_SIZE] for at in range(0, len(packed), ID_SIZE))


def texts(packed: bytes) -> list[str]:
    """The ids of a packed run, as text."""
    return [id_text(raw) for raw in unpack(packed)]


@dataclass(frozen=True)
class Changes:
    """A result's ids against those of the result it replaced: ``added`` in the new
    result's order, ``removed`` in the old one's (each packed), ``kept`` how many
    both have."""

    added: bytes = b""
    removed: bytes = b""
    kept: int = 0

    @classmethod
    def between(cls, previous: dict[bytes, None], current: bytes) -> Changes:
        """From the previous result's ids (an ordered set, emptied of those kept) and
        the current result's, packed."""
        added = bytearray()
        kept = 0
        for raw in unpack(current):
            if raw in previous:
                del previous[raw]
                kept += 1
            else:
                added += raw
        return cls(bytes(added), b"".join(previous), kept)

    def as_dict(self) -> dict:
        """As results and the journal write it."""
        return {"added": texts(self.added), "removed": texts(self.removed), "kept": self.kept}

    def write(self, write: Write, format: str) -> None:
        """Write ``as_dict()`` in ``format`` (json or msgpack), the lists a batch of
        ids at a time, never whole."""
        if format == "msgpack":
            import msgpack

            packer = msgpack.Packer()
            write(packer.pack_map_header(3))
            for key, packed in (("added", self.added), ("removed", self.removed)):
                write(packer.pack(key) + packer.pack_array_header(len(packed) // ID_SIZE))
                for at in range(0, len(packed), WRITE_BATCH * ID_SIZE):
                    write(b"".join(packer.pack(text) for text in
                                   texts(packed[at:at + WRITE_BATCH * ID_SIZE])))
            write(packer.pack("kept") + packer.pack(self.kept))
            return
        for key, packed in (("added", self.added), ("removed", self.removed)):
            write(b'{"added":[' if key == "added" else b'],"removed":[')
            for at in range(0, len(packed), WRITE_BATCH * ID_SIZE):
                batch = texts(packed[at:at + WRITE_BATCH * ID_SIZE])
                write((b"," if at else b"") + ",".join(f'"{text}"' for text in batch).encode())
        write(b'],"kept":%d}' % self.kept)
