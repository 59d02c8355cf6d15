"""Stable chunk ids (``--ids``): ``chunk_id``, one UUID a chunk, for vector-store upserts.

A chunk's id is derived from its document and its text, never from its offsets, so a
chunk whose text is unchanged keeps its id whatever changed elsewhere in the document,
in every run, format, front end and version:

    CONTENT = TEXT                                       (a chunk)
    CONTENT = hex(SHA-256(PARENT_TEXT)) + "\\n" + TEXT     (a child of parent/child chunking)
    N       = how many earlier chunks of the same document have the same CONTENT
    key     = DOC + "\\n" + N + "\\n" + hex(SHA-256(CONTENT))
    id      = the first 16 bytes of SHA-256(key), as a UUID of version 8 (RFC 9562)

Everything is hashed as UTF-8; hex is lower-case, N decimal (0 for the first chunk with
that content). DOC is the record's ``doc`` value as compact JSON with sorted keys
(``null`` when the records have no ``doc``, a non-UTF-8 file name as its
``{"bytes": ...}`` form, a value JSON has no form for as the JSON string of its
``str()``). N makes the ids of one document distinct when a text repeats: after an
edit, a text that occurs k times before and m times after keeps min(k, m) ids, those
of its first min(k, m) occurrences. A UUID is what every common vector store takes as
a point id (Qdrant and Weaviate require one; Chroma, Pinecone, Milvus and pgvector take
any string).

N is counted as chunks are made (a stream's chunks get their ids before its document
ends): ``ChunkIds`` keeps one entry per distinct content of the document so far, a
16-byte digest and a count (about 92 bytes each in CPython: a document's memory grows
with its distinct chunk texts, at most its length over the smallest chunk's).
"""

from __future__ import annotations

import hashlib

import orjson

from chunkd.model.chunk import Chunk, name_value


def document_key(doc: object) -> bytes:
    """DOC, as the key spells it (see the module's docstring)."""
    return orjson.dumps(name_value(doc), option=orjson.OPT_SORT_KEYS, default=str)


def as_uuid(digest: bytes) -> str:
    """The first 16 bytes of ``digest`` as a version-8 UUID's text."""
    raw = bytearray(digest[:16])
    raw[6] = raw[6] & 0x0F | 0x80   # version 8
    raw[8] = raw[8] & 0x3F | 0x80   # the RFC 9562 variant
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


def id_bytes(chunk_id: str) -> bytes:
    """An id's 16 bytes (a compact form for sets of ids)."""
    return bytes.fromhex(chunk_id.replace("-", ""))


def id_text(raw: bytes) -> str:
    """The id whose 16 bytes are ``raw``."""
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


class ChunkIds:
    """Sets ``chunk_id`` on the chunks of one document, given in document order (in as
    many calls as the chunks come in); a new document needs a new ``ChunkIds``."""

    def __init__(self, doc: object) -> None:
        self.document = document_key(doc)
        #: Each content's digest so far, and how many chunks had it.
        self.seen: dict[bytes, int] = {}
        #: The last parent's index and its text's digest (a parent's children come together).
        self.parent: tuple[int, bytes] = (-1, b"")

    def __call__(self, chunks: list[Chunk]) -> list[Chunk]:
        return [chunk._replace(chunk_id=self.identify(chunk)) for chunk in chunks]

    def identify(self, chunk: Chunk) -> str:
        """The id of the document's next chunk."""
        content = hashlib.sha256()
        parent = chunk.parent
        if parent is not None:
            if self.parent[0] != parent.index:
                self.parent = (parent.index,
                               hashlib.sha256(parent.text.encode("utf-8")).hexdigest().encode())
            content.update(self.parent[1] + b"\n")
        content.update(chunk.text.encode("utf-8"))
        digest = content.digest()
        # 16 bytes suffice to count: contents that shared them would share a count, and
        # their ids would still differ (the key has the whole digest).
        counted = digest[:16]
        occurrence = self.seen.get(counted, 0)
        self.seen[counted] = occurrence + 1
        key = b"%s\n%d\n%s" % (self.document, occurrence, digest.hex().encode())
        return as_uuid(hashlib.sha256(key).digest())
