"""Output writers: chunk records to NDJSON, JSON documents or msgpack, as bytes.

A record is the chunk's fields (index, start, end, length, the optional fields the
settings ask for, text), preceded by ``doc`` when the input names its documents and
by the extra fields of an NDJSON input line.  Writers write bytes to a binary stream;
the caller decides when to flush. Every write is whole (``chunkd.processes.stdio.write_all``:
a raw stream's short writes are completed) and at most about ``BATCH_BYTES`` (a record
larger than that alone), so that no output is ever held whole in memory: a whole-
document format encodes its records as they come into a spool, in memory up to
``BATCH_BYTES`` and then in a temporary file, and writes the document from it.

Names: a document name that is valid UTF-8 is written as a string; a file name that
is not (Linux names are bytes) is written as ``{"bytes": "<base64>"}`` in JSON (the
convention of ripgrep's JSON output) and as msgpack binary, so that no name is lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, BinaryIO

from chunkd.model.chunk import NULL, OPTIONAL_FIELDS, Chunk, Parent, name_value
from chunkd.kernel.chosen import IMPLEMENTATION
from chunkd.processes.stdio import OutputError, Stream, write_all

if TYPE_CHECKING:
    from chunkd.inputs import Extracted

FORMATS = ("ndjson", "json", "msgpack")
#: The most bytes a writer joins for one write (a record larger than this alone).
BATCH_BYTES = 1 << 20
#: What writes bytes out: all of them, or raises.
Write = Callable[[bytes], object]


def _dumps(value: object) -> bytes:
    """``orjson.dumps``, imported at the first use rather than at start-up (its import
    takes several milliseconds, and the compiled writer needs it only for a header)."""
    import orjson

    return orjson.dumps(value)


def _optional(chunk: Chunk) -> dict:
    """The optional fields the chunk has, as plain JSON values."""
    values: dict[str, object] = {}
    for name, value in zip(OPTIONAL_FIELDS, chunk[5:], strict=True):
        if isinstance(value, Parent):  # a record's parent is its number and span
            values[name] = {"index": value.index, "start": value.start, "end": value.end}
        elif value is NULL:
            values[name] = None
        elif value is not None:
            values[name] = value
    return values


def chunk_record(chunk: Chunk, header: dict | None = None) -> dict:
    """The chunk as the dict every output format shares, after ``header``'s keys."""
    return {**(header or {}), "index": chunk.index, "start": chunk.start, "end": chunk.end,
            "length": chunk.length, **_optional(chunk), "text": chunk.text}


def _json_records(chunks: Iterable[Chunk], opening: bytes, closing: bytes) -> Iterator[bytes]:
    """Each chunk's JSON record, as ``orjson.dumps(chunk_record(chunk, header))`` would
    write it: ``opening`` (``{`` and the header's keys), its fields, then ``closing``."""
    # Formatting the numbers directly and letting orjson escape only the text is a
    # third cheaper than a dict per chunk, and output is most of the command's time.
    import orjson  # here, not at start-up: the compiled writer leaves only rare records here

    dumps = orjson.dumps
    optional = partial(dumps, option=orjson.OPT_SERIALIZE_NUMPY)  # a vector's float32s
    # (A vector, the last field, is an array: compared with None it would not be a bool.)
    return (opening + b'"index":%d,"start":%d,"end":%d,"length":%d,' % chunk[:4]
            + (optional(_optional(chunk))[1:-1] + b","
               if chunk[-1] is not None or chunk[5:] != _NONE else b"")
            + b'"text":' + dumps(chunk[4]) + closing for chunk in chunks)


def write_batches(write: Write, pieces: Iterable[bytes], separator: bytes = b"",
                  after_others: bool = False) -> int:
    """Write ``pieces`` joined by ``separator``, about ``BATCH_BYTES`` a write;
    ``after_others``: pieces were written before, so a separator comes first. Returns
    the number of pieces."""
    # A batch after others starts with an empty piece, so that the join puts the
    # separator before its first one.
    lead = [b""] if separator else []
    batch = lead[:] if after_others else []
    append, size, count, empty = batch.append, 0, 0, len(batch)
    for piece in pieces:
        append(piece)
        size += len(piece)
        if size >= BATCH_BYTES:
            write(separator.join(batch))
            count += len(batch) - empty
            batch = lead[:]
            append, size, empty = batch.append, 0, len(batch)
    if len(batch) > empty:
        write(separator.join(batch))
        count += len(batch) - empty
    return count


class Writer:
    """NDJSON: one JSON object a line, one line per chunk, written as it comes."""

    binary_names = False

    def __init__(self, stream: Stream, named: bool) -> None:
        """``named``: whether records carry their document's name as ``doc``."""
        self.stream = stream
        self.named = named
        self.out: Write = partial(write_all, stream)

    def begin(self, doc: object, fields: dict, extracted: Extracted | None = None) -> None:
        """Start a document; ``extracted``: the text a PDF, HTML or DOCX document became
        (the whole-document formats carry it)."""
        self.header = ({"doc": name_value(doc, self.binary_names)} if self.named else {}) | fields
        # The record's opening, header keys included, encoded once per document.
        self.opening = b"{" + (_dumps(self.header)[1:-1] + b"," if self.header else b"")

    def write(self, chunks: list[Chunk]) -> None:
        if write_json_lines is None:
            write_batches(self.out, _json_records(chunks, self.opening, b"}\n"))
        else:
            write_json_lines(self.out, chunks, self.opening, self._line, BATCH_BYTES)

    def _line(self, chunk: Chunk) -> bytes:
        """One chunk's line, as the twin writes it (for the records the compiled writer
        leaves to it: with optional fields, numbers that are not ints of 64 bits, a
        lone surrogate)."""
        return next(_json_records((chunk,), self.opening, b"}\n"))

    def end(self) -> None:
        """End the document."""

    def close(self, failed: bool = False) -> None:
        """End the output (a file format, such as Parquet, writes its footer here);
        ``failed``: the run met an error."""


_NONE = (None,) * len(OPTIONAL_FIELDS)

#: The NDJSON writer's loop compiled (``chunkd.kernel._records``), where the core is; None
#: runs its twin, ``write_batches`` over ``_json_records``.
write_json_lines: Callable[[Write, Iterable[Chunk], bytes, Callable[[Chunk], bytes], int],
                           None] | None = None
if IMPLEMENTATION == "compiled":
    try:
        from chunkd.kernel._records import write_json_lines
    except ImportError:  # built before it had this module: the twin, the same bytes
        pass


class MsgpackWriter(Writer):
    """A stream of msgpack maps with the NDJSON keys, one per chunk."""

    binary_names = True

    def __init__(self, stream: Stream, named: bool) -> None:
        import msgpack  # only here: most runs write JSON

        super().__init__(stream, named)
        self.pack = msgpack.Packer().pack

    def begin(self, doc: object, fields: dict, extracted: Extracted | None = None) -> None:
        self.header = ({"doc": name_value(doc, True)} if self.named else {}) | fields

    def write(self, chunks: list[Chunk]) -> None:
        pack, header = self.pack, self.header
        write_batches(self.out, (pack(_binary_vector(chunk_record(chunk, header)))
                                 for chunk in chunks))


def _binary_vector(record: dict) -> dict:
    """A msgpack record: its vector as little-endian float32 bytes (a quarter of the
    size of a list of doubles, and what vector stores load)."""
    vector = record.get("vector")
    if vector is not None:
        record["vector"] = vector.astype("<f4").tobytes()
    return record


class Spool:
    """Bytes written in order, then copied out once: in memory up to ``BATCH_BYTES``,
    then in the file ``open_file`` makes (read and written, nameless). A failure of
    that file (a full disk) is an ``OutputError`` naming it."""

    def __init__(self, open_file: Callable[[], BinaryIO]) -> None:
        self.open_file = open_file
        self.memory = bytearray()
        self.file: BinaryIO | None = None

    def write(self, data: bytes) -> None:
        if self.file is None and len(self.memory) + len(data) <= BATCH_BYTES:
            self.memory += data
            return
        try:
            if self.file is None:
                self.file = self.open_file()
                write_all(self.file, self.memory)
                self.memory = bytearray()
            write_all(self.file, data)
        except OSError as error:
            raise _spool_error(error) from None

    def copy_to(self, write: Write) -> None:
        """Write what was spooled, ``BATCH_BYTES`` at a time."""
        if self.file is None:
            if self.memory:
                write(bytes(self.memory))
            return
        try:
            self.file.seek(0)
        except OSError as error:
            raise _spool_error(error) from None
        while block := self._read():
            write(block)

    def _read(self) -> bytes:
        assert self.file is not None, "read only once spooled to a file"
        try:
            return self.file.read(BATCH_BYTES)
        except OSError as error:
            raise _spool_error(error) from None

    def close(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError:  # a failure already reported: the file is nameless, gone
                pass
            self.file = None


def _spool_error(error: OSError) -> OutputError:
    return OutputError(f"the temporary file of a document's records: "
                       f"{error.strerror or error}")


class DocumentRecords:
    """A whole document's records, for the formats that write a document at once
    (``--format json``, the daemon's results, JSON or msgpack): its chunk records and,
    in parent/child mode, each parent once (``{"index", "start", "end", "length",
    "text"}``). They are encoded as they come into spools (``open_file`` makes the
    file a spool goes to past ``BATCH_BYTES``), so that memory is bounded by a batch,
    not by the document's output; ``write`` writes the document, as ``encode`` would
    encode ``header``, the parents if any, then the chunks (always last)."""

    def __init__(self, format: str = "json",
                 open_file: Callable[[], BinaryIO] | None = None) -> None:
        if open_file is None:
            import tempfile

            open_file = tempfile.TemporaryFile
        self.format = format
        self.chunks, self.parents = Spool(open_file), Spool(open_file)
        self.count = self.parent_count = 0   # chunks and parents so far
        self.last_parent: int | None = None  # the index of the last parent spooled
        if format == "msgpack":
            import msgpack
            self.pack = msgpack.Packer().pack

    def add(self, chunks: list[Chunk]) -> None:
        parents = []
        for chunk in chunks:
            parent = chunk.parent
            if parent is not None and parent.index != self.last_parent:
                self.last_parent = parent.index
                parents.append(parent)
        records: Iterator[bytes]
        if self.format == "msgpack":
            pack = self.pack
            records = (pack(_binary_vector(chunk_record(chunk))) for chunk in chunks)
            parent_records = (pack(parent._asdict()) for parent in parents)
            separator = b""
        else:
            records = _json_records(chunks, b"{", b"}")
            parent_records = (_dumps(parent._asdict()) for parent in parents)
            separator = b","
        self.parent_count += write_batches(self.parents.write, parent_records, separator,
                                           self.parent_count > 0)
        self.count += write_batches(self.chunks.write, records, separator, self.count > 0)

    def write(self, write: Write, header: dict,
              trailer: Sequence[tuple[str, Callable[[Write], object]]] = ()) -> None:
        """Write the document: ``header``'s keys, ``parents`` if any, ``chunks``, then
        each key of ``trailer`` with the value its function writes (encoded in the
        document's format: values too large to build whole, known once the chunks are)."""
        if self.format == "msgpack":
            import msgpack
            packer = msgpack.Packer()
            write(packer.pack_map_header(len(header) + (self.parent_count > 0) + 1
                                         + len(trailer))
                  + b"".join(packer.pack(key) + packer.pack(value)
                             for key, value in header.items()))
            if self.parent_count:
                write(packer.pack("parents") + packer.pack_array_header(self.parent_count))
                self.parents.copy_to(write)
            write(packer.pack("chunks") + packer.pack_array_header(self.count))
            self.chunks.copy_to(write)
            for key, write_value in trailer:
                write(packer.pack(key))
                write_value(write)
            return
        opening = _dumps(header)[:-1]
        write(opening + b"," if header else opening)
        if self.parent_count:
            write(b'"parents":[')
            self.parents.copy_to(write)
            write(b"],")
        write(b'"chunks":[')
        self.chunks.copy_to(write)
        write(b"]")
        for key, write_value in trailer:
            write(b"," + _dumps(key) + b":")
            write_value(write)
        write(b"}")

    def close(self) -> None:
        """Remove the spools' files."""
        self.chunks.close()
        self.parents.close()


def extracted_fields(extracted: Extracted | None) -> dict:
    """What a whole-document result says of the text a document became, so that each
    chunk's ``text[start:end]`` can be checked from the result alone: ``text`` and, for a
    PDF, ``page_starts`` (the offset where each page starts); and ``warnings``, what the
    reader should know of it (a PDF's pages without text), if any."""
    if extracted is None:
        return {}
    fields: dict = {"text": extracted.text}
    if extracted.page_starts is not None:
        fields["page_starts"] = list(extracted.page_starts)
    if extracted.warnings:
        fields["warnings"] = list(extracted.warnings)
    return fields


class JsonWriter(Writer):
    """One JSON document a line per input document: ``{"doc": ..., "chunks": [...]}``,
    with ``about`` after ``doc`` (the tokenizer that counted, when not the default);
    it spools a document's records until the document ends (see ``DocumentRecords``)."""

    records: DocumentRecords | None = None

    def __init__(self, stream: Stream, named: bool, about: dict | None = None) -> None:
        super().__init__(stream, named)
        self.about = about or {}

    def begin(self, doc: object, fields: dict, extracted: Extracted | None = None) -> None:
        self.close()  # a document that failed leaves its records unwritten
        self.header = ({"doc": name_value(doc)} | self.about | fields
                       | extracted_fields(extracted))
        self.records = DocumentRecords("json")

    def write(self, chunks: list[Chunk]) -> None:
        assert self.records is not None, "a document has begun"
        self.records.add(chunks)

    def end(self) -> None:
        assert self.records is not None, "a document has begun"
        self.records.write(self.out, self.header)
        self.out(b"\n")
        self.close()

    def close(self, failed: bool = False) -> None:
        if self.records is not None:
            self.records.close()
            self.records = None


def make_writer(format: str, stream: Stream, named: bool, about: dict | None = None) -> Writer:
    """The writer for ``format``, one of ``FORMATS``; ``about``: what whole-document
    formats say of the run (``Settings.about``)."""
    if format == "json":
        return JsonWriter(stream, named, about)
    return {"ndjson": Writer, "msgpack": MsgpackWriter}[format](stream, named)
