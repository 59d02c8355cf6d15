"""Stable chunk ids (``--ids``): ``chunk_id``, one UUID a chunk, for vector-store upserts.

A chunk's id is derived from what identifies it and nothing else, so the same chunk
gets the same id in every run, format, front end and version, and a changed text gets
a new one:

    key  = DOC + "\\n" + START + "\\n" + END [+ "\\n" + PARENT_START + "\\n" + PARENT_END]
           + "\\n" + TEXT
    id   = the first 16 bytes of SHA-256(key as UTF-8), as a UUID of version 8 (RFC 9562)

DOC is the record's ``doc`` value as compact JSON with sorted keys (``null`` when the
records have no ``doc``, a non-UTF-8 file name as its ``{"bytes": ...}`` form, a
value JSON has no form for as the JSON string of its ``str()``), START
and END are the chunk's offsets in decimal, and a child of parent/child chunking adds its
parent's offsets (children of overlapping parents can share their offsets and text).
A UUID is what every common vector store takes as a point id (Qdrant and Weaviate
require one; Chroma, Pinecone, Milvus and pgvector take any string).
"""

from __future__ import annotations

import hashlib
import uuid

import orjson

from chunkd.chunk import Chunk


def document_key(doc: object) -> bytes:
    """DOC, as the key spells it (see the module's docstring)."""
    from chunkd.writers import name_value

    return orjson.dumps(name_value(doc), option=orjson.OPT_SORT_KEYS, default=str)


def chunk_id(document: bytes, chunk: Chunk) -> str:
    """The id of ``chunk`` of the document whose key is ``document``."""
    parent = chunk.parent
    where = (b"%d\n%d" % (chunk.start, chunk.end) if parent is None else
             b"%d\n%d\n%d\n%d" % (chunk.start, chunk.end, parent.start, parent.end))
    digest = hashlib.sha256(b"%s\n%s\n%s" % (document, where, chunk.text.encode("utf-8")))
    number = int.from_bytes(digest.digest()[:16], "big")
    # Version 8 in bits 76-79, the RFC variant (0b10) in bits 62-63 (Python's uuid
    # module sets versions 1 to 5 only before Python 3.14).
    number = number & ~(0xF << 76) | 8 << 76
    number = number & ~(0x3 << 62) | 0x2 << 62
    return str(uuid.UUID(int=number))


class ChunkIds:
    """Sets ``id`` on the chunks of one document."""

    def __init__(self, doc: object) -> None:
        self.document = document_key(doc)

    def __call__(self, chunks: list[Chunk]) -> list[Chunk]:
        document = self.document
        return [chunk._replace(chunk_id=chunk_id(document, chunk)) for chunk in chunks]
