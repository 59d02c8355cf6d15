"""Output writers: chunk records to NDJSON, JSON documents or msgpack, as bytes.

A record is the chunk's fields (index, start, end, length, the optional fields the
settings ask for, text), preceded by ``doc`` when the input names its documents and
by the extra fields of an NDJSON input line.  Writers write bytes to a binary stream;
the caller decides when to flush.

Names: a document name that is valid UTF-8 is written as a string; a file name that
is not (Linux names are bytes) is written as ``{"bytes": "<base64>"}`` in JSON (the
convention of ripgrep's JSON output) and as msgpack binary, so that no name is lost.
"""

from __future__ import annotations

import base64
import os
from typing import BinaryIO

import orjson

from chunkd.chunk import OPTIONAL_FIELDS, Chunk

FORMATS = ("ndjson", "json", "msgpack")


def name_value(name: object, binary: bool = False) -> object:
    """A document name as records carry it (see the module's docstring)."""
    if not isinstance(name, str):
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        raw = os.fsencode(name)
        return raw if binary else {"bytes": base64.b64encode(raw).decode("ascii")}


def _optional(chunk: Chunk) -> dict:
    """The optional fields the chunk has, as plain JSON values."""
    values = {}
    for name, value in zip(OPTIONAL_FIELDS, chunk[5:], strict=True):
        if value is not None:
            values[name] = ({"index": value.index, "start": value.start, "end": value.end}
                            if name == "parent" else value)
    return values


def chunk_record(chunk: Chunk, header: dict | None = None) -> dict:
    """The chunk as the dict every output format shares, after ``header``'s keys."""
    return {**(header or {}), "index": chunk.index, "start": chunk.start, "end": chunk.end,
            "length": chunk.length, **_optional(chunk), "text": chunk.text}


class Writer:
    """NDJSON: one JSON object a line, one line per chunk, written as it comes."""

    binary_names = False

    def __init__(self, stream: BinaryIO, named: bool) -> None:
        """``named``: whether records carry their document's name as ``doc``."""
        self.stream = stream
        self.named = named

    def begin(self, doc: object, fields: dict) -> None:
        """Start a document."""
        self.header = ({"doc": name_value(doc, self.binary_names)} if self.named else {}) | fields
        # The record's opening, header keys included, encoded once per document.
        self.opening = b"{" + (orjson.dumps(self.header)[1:-1] + b"," if self.header else b"")

    def write(self, chunks: list[Chunk]) -> None:
        # Formatting the numbers directly and letting orjson escape only the text is a
        # third cheaper than a dict per chunk, and output is most of the command's time.
        dumps, opening = orjson.dumps, self.opening
        self.stream.write(b"".join([
            opening + b'"index":%d,"start":%d,"end":%d,"length":%d,' % chunk[:4]
            + (dumps(_optional(chunk))[1:-1] + b"," if chunk[5:] != _NONE else b"")
            + b'"text":' + dumps(chunk[4]) + b"}\n" for chunk in chunks]))

    def end(self) -> None:
        """End the document."""

    def close(self, failed: bool = False) -> None:
        """End the output (a file format, such as Parquet, writes its footer here);
        ``failed``: the run met an error."""


_NONE = (None,) * len(OPTIONAL_FIELDS)


class MsgpackWriter(Writer):
    """A stream of msgpack maps with the NDJSON keys, one per chunk."""

    binary_names = True

    def __init__(self, stream: BinaryIO, named: bool) -> None:
        import msgpack  # only here: most runs write JSON

        super().__init__(stream, named)
        self.pack = msgpack.Packer().pack

    def begin(self, doc: object, fields: dict) -> None:
        self.header = ({"doc": name_value(doc, True)} if self.named else {}) | fields

    def write(self, chunks: list[Chunk]) -> None:
        pack, header = self.pack, self.header
        self.stream.write(b"".join([pack(chunk_record(chunk, header)) for chunk in chunks]))


class DocumentRecords:
    """A whole document's records, for the formats that write a document at once
    (``--format json``, the daemon's results): its chunk records and, in parent/child
    mode, each parent once (``{"index", "start", "end", "length", "text"}``)."""

    def __init__(self) -> None:
        self.chunks: list[dict] = []
        self.parents: list[dict] = []

    def add(self, chunks: list[Chunk]) -> None:
        for chunk in chunks:
            parent = chunk.parent
            if parent is not None and (not self.parents or self.parents[-1]["index"] != parent.index):
                self.parents.append(parent._asdict())
            self.chunks.append(chunk_record(chunk))

    def document(self, header: dict) -> dict:
        """``header``'s keys, the parents if any, then the chunks (always last)."""
        return header | ({"parents": self.parents} if self.parents else {}) | {"chunks": self.chunks}


class JsonWriter(Writer):
    """One JSON document a line per input document: ``{"doc": ..., "chunks": [...]}``;
    it holds a document's chunks until the document ends."""

    def begin(self, doc: object, fields: dict) -> None:
        self.header = {"doc": name_value(doc)} | fields
        self.records = DocumentRecords()

    def write(self, chunks: list[Chunk]) -> None:
        self.records.add(chunks)

    def end(self) -> None:
        self.stream.write(encode_document("json", self.records.document(self.header)) + b"\n")


def encode_document(format: str, document: dict) -> bytes:
    """A whole document (a dict with a ``chunks`` list) as JSON or msgpack bytes."""
    if format == "msgpack":
        import msgpack
        return msgpack.packb(document)
    return orjson.dumps(document)


def make_writer(format: str, stream: BinaryIO, named: bool) -> Writer:
    """The writer for ``format``, one of ``FORMATS``."""
    return {"ndjson": Writer, "json": JsonWriter, "msgpack": MsgpackWriter}[format](stream, named)
