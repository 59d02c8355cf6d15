"""Parquet for the filter: documents from Parquet files, chunk records into one.

    chunkd --input parquet docs.parquet --text-column body --id-column url
    chunkd --input parquet part-*.parquet --format parquet --output chunks.parquet

``--input parquet``: each row of each FILE is a document: its text column is the text,
its id column names it (``doc``; without an id column, the row's number from 0), and
every other column is copied into each of its chunk records, as the fields of an
NDJSON line are. A text column of strings holds text; one of bytes holds files, each
told and read as the filter tells a FILE under ``--input auto``
(``chunkd.inputs.detect_bytes``): a file of a registered format (PDF, HTML, DOCX)
is extracted within ``--max-bytes`` and
``--extract-timeout`` (by the ``--jobs`` worker that takes its row), anything else is
UTF-8 text. Rows are read about a MiB of text (at most ``BATCH_ROWS`` rows) at a
time, streaming within row groups, and go to Python one at a time, their text left in
Arrow's memory as UTF-8 and decoded a block at a time as it is chunked, so memory is
bounded by the longest documents (a Parquet page is decoded whole), not by the file or
its row groups.

``--format parquet --output FILE``: the records the NDJSON output would have, same
keys and values, as the rows of one Parquet file, with the types of ``chunkd.arrow``
(carried columns keep their input types; the text is a string), written a row group
at a time to a hidden file beside FILE and renamed into place at the end. Where the
input may hold PDFs (FILEs under ``--input auto`` or ``pdf``, a Parquet column of
files), a ``pages`` column (null for the chunks of other documents) follows the
settings' own. Its columns are fixed by the first input read, so every Parquet input
must have the same columns (a PDF in a later file, after one whose text column holds
strings, has no ``pages`` column to go to: its row is refused); NDJSON input, whose
lines have no fixed columns, cannot be written as Parquet.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import os
import secrets
import stat
import struct
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, BinaryIO

# The filter's Arrow memory comes from jemalloc, unless the user chose: pyarrow's
# default, mimalloc, keeps much of what it freed (1 GB of Parquet to --format parquet
# peaks at 238 MiB with it, 284 MiB with the C library's malloc, 197-204 with jemalloc).
# Arrow reads the variable once, when pyarrow loads: the filter imports this module
# first. Linux wheels of pyarrow have jemalloc; elsewhere it may be missing.
if sys.platform == "linux":
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError("Parquet needs pyarrow: pip install 'pyarrow>=16'",
                      name=error.name) from None

from chunkd.outputs.columns import (FIELD_TYPES, Columns, chunk_arrays,  # noqa: E402
                                    chunk_schema, is_bytes_type, to_arrow, with_pages)
from chunkd.model.chunk import Chunk  # noqa: E402
from chunkd.inputs import (FORMATS, DocumentFile, Limits, detect_bytes,  # noqa: E402
                              extract)
from chunkd.processes.stdio import OutputError  # noqa: E402
from chunkd.inputs.readers import (RESERVED_KEYS, BytesBlocks, Document, InputError,  # noqa: E402
                            display_name)
from chunkd.settings import Settings  # noqa: E402
from chunkd.processes.signals import remove_before_ending  # noqa: E402

if TYPE_CHECKING:
    from chunkd.inputs.base import Extracted

#: A record batch read holds about this much text: enough to amortize the reader's
#: per-batch cost, small beside the memory bound.
BATCH_BYTES = 1 << 20
BATCH_ROWS = 64
#: Read buffer within a column chunk; without one, pyarrow reads a whole column chunk
#: (up to a whole row group's text) at once.
READ_BUFFER = 1 << 20
#: Chunks are held as Python objects up to about this much text (or this many
#: documents), then as Arrow columns up to a row group of about ``ROW_GROUP_BYTES``.
BLOCK_BYTES, BLOCK_DOCUMENTS = 1 << 20, 4096
ROW_GROUP_BYTES = 32 << 20
#: Where a process's open files can be opened again by number (Linux), if anywhere.
PROC_DESCRIPTORS = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else None


class ParquetFiles:
    """The filter's Parquet options: reads ``--input parquet`` files as documents and
    makes the ``--format parquet`` writer. ``header`` (the columns before a chunk's
    own) is fixed by the first Parquet input read, or by the input kind; so is
    ``pages``, whether the output has a ``pages`` column."""

    def __init__(self, args: argparse.Namespace, errors: str) -> None:
        self.text_column = args.text_column or "text"
        self.id_column = args.id_column          # None: "id" if the file has one
        self.errors = errors
        self.limits = Limits(args.max_bytes, args.extract_timeout)
        self.from_parquet = args.input == "parquet"
        self.to_parquet = args.format == "parquet"
        self.output = args.output
        self.header: pa.Schema | None = None
        # Stdin is text under --input auto; a FILE may be a PDF.
        self.pages = args.input == "pdf" or (args.input == "auto"
                                             and any(path != "-" for path in args.files))

    @classmethod
    def setup(cls, parser: argparse.ArgumentParser, args: argparse.Namespace,
              errors: str) -> ParquetFiles:
        """The Parquet side of the arguments; misuse is a usage error (exit 2)."""
        if args.format == "parquet" and not args.output:
            parser.error("--format parquet needs --output FILE (Parquet is not a stream)")
        if args.output and args.format != "parquet":
            parser.error("--output is for --format parquet; the other formats write to stdout")
        if args.input == "parquet" and (not args.files or "-" in args.files):
            parser.error("--input parquet reads FILEs, not stdin (Parquet keeps its "
                         "index at the end of the file)")
        if args.input != "parquet" and (args.text_column or args.id_column):
            parser.error("--text-column and --id-column are for --input parquet")
        if args.input == "ndjson" and args.format == "parquet":
            parser.error("--format parquet takes --input text or parquet: NDJSON lines have "
                         "no fixed columns (write --input parquet, or --format ndjson)")
        return cls(args, errors)

    # --- input ----------------------------------------------------------------------

    def documents(self, path: str) -> Iterator[Document | InputError]:
        """The rows of the Parquet file at ``path`` as documents, in order; a row that
        cannot be chunked is an ``InputError`` naming it, and the rows after it go on;
        a file that cannot be read, or whose columns do not fit, is one ``InputError``."""
        where = display_name(path)
        try:
            # Opened once, by Python (a name is bytes, which pyarrow's own files cannot
            # take; the system's words for the errors, as the other readers give them),
            # and without blocking: a FIFO with no writer yet is refused, not waited for.
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as error:
            yield InputError(f"{where}: {_reason(error)}")
            return
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            os.close(descriptor)
            yield InputError(f"{where}: " + (os.strerror(errno.EISDIR) if stat.S_ISDIR(mode)
                                             else "not a regular file (Parquet is read from "
                                                  "its end: it cannot come from a pipe)"))
            return
        with open(descriptor, "rb", buffering=0) as file:
            try:
                source = _arrow_file(file)
            except OSError as error:
                yield InputError(f"{where}: {_reason(error)}")
                return
            with source:
                yield from self._rows(source, where)

    def _rows(self, source: pa.NativeFile, where: str) -> Iterator[Document | InputError]:
        try:
            file = pq.ParquetFile(source, pre_buffer=False, buffer_size=READ_BUFFER)
            schema = file.schema_arrow
            columns = Columns.of(schema, self.text_column, self.id_column or "id",
                                 id_required=self.id_column is not None)
            self._adopt_header(self._header(columns, schema),
                               is_bytes_type(schema.field(columns.text).type))
        except OSError as error:
            yield InputError(f"{where}: {_reason(error)}")
            return
        except (ValueError, pa.ArrowException) as error:  # not Parquet, or wrong columns
            yield InputError(f"{where}: {_one_line(error)}")
            return
        clashing = sorted(RESERVED_KEYS.intersection(columns.carried))
        if clashing:  # --format json's document keys, which a column would overwrite
            yield InputError(f"{where}: column {clashing[0]!r} is reserved for chunk "
                             "records; rename it")
            return
        row = 0
        try:
            for batch in file.iter_batches(batch_size=_batch_rows(file, columns.text),
                                           columns=[columns.text, *filter(None, [columns.id]),
                                                    *columns.carried],
                                           use_threads=False):
                # Row by row: one document at a time in Python, whatever the batch holds.
                text_values = batch.column(columns.text)
                files = is_bytes_type(text_values.type)
                id_values = None if columns.id is None else self._carried(batch, columns.id)
                carried = [(name, *self._carried(batch, name)) for name in columns.carried]
                for index in range(batch.num_rows):
                    yield self._document(text_values, id_values, carried, index, row,
                                         f"{where}: row {row}", files)
                    row += 1
        except OSError as error:
            yield InputError(f"{where}: read failed at row {row}: {_reason(error)}")
        except pa.ArrowException as error:
            yield InputError(f"{where}: unreadable at row {row}: {_one_line(error)}")

    def _document(self, texts: pa.Array, ids: tuple[pa.Array, Reader] | None,
                  carried: list[tuple[str, pa.Array, Reader]], index: int, row: int,
                  where: str, files: bool) -> Document | InputError:
        """Row ``index`` of a batch (``row`` of its file) as a document. Its text is
        decoded as it is chunked, as ``--errors`` says (Parquet readers do not check
        that strings are UTF-8); a string that is not UTF-8 in another column is the
        row's error. With ``files``, a value that is a file of a registered format is
        extracted when it is chunked."""
        text = _utf8_bytes(texts, index)
        name = row if ids is None else ids[1](ids[0], index)
        named = name.as_py() if isinstance(name, pa.Scalar) else name
        kind = detect_bytes(text, named) if files and text is not None else None
        if kind in FORMATS:  # named by its file's name
            where += f" ({display_name(named)})" if isinstance(named, str) else ""
        elif ids is not None and named is not NOT_UTF8 and named is not None:
            where += f" (id {display_name(named) if isinstance(named, str) else named})"
        if text is None:
            return InputError(f"{where}: the text is null")
        fields = {column: read(values, index) for column, values, read in carried}
        bad = next((column for column, held in [("the id column", name), *fields.items()]
                    if held is NOT_UTF8), None)
        if bad is not None:
            return InputError(f"{where}: {bad} holds a string that is not valid UTF-8")
        if kind in FORMATS:
            form = FORMATS[kind]
            if form.paged and self.to_parquet and not self.pages:
                return InputError(f"{where}: a {form.label}, whose pages the output has no "
                                  "column for (the first file's text column holds strings)")
            return Document(name, RowFile(text, kind, where, self.limits), fields,
                            size=len(text), media_type=form.media_type)
        return Document(name, BytesBlocks(text, where, self.errors), fields, size=len(text))

    def _carried(self, batch: pa.RecordBatch, name: str) -> tuple[pa.Array, Reader]:
        """A column carried into the records (the id included) and how to read a row's
        value of it. Into JSON and msgpack, values go through Python, which decodes
        every string. Into Parquet, they go as Arrow scalars, exactly (Python has no
        nanoseconds nor year 10000), decoded from a dictionary (each file, each row
        group even, has its own); their strings are checked once a batch, and row by
        row only in a batch where one is not UTF-8 (the file would be invalid)."""
        values = batch.column(name)
        if not self.to_parquet:
            return values, _value
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        return values, (_scalar if _valid(values) else _checked_scalar)

    def _header(self, columns: Columns, schema: pa.Schema) -> pa.Schema:
        header = columns.header(schema)
        if self.to_parquet:
            # Dictionaries decoded, as _carried gives them (the writer encodes them
            # again); nullable, so that files whose writers declared a column "not
            # null" and files whose writers did not fit together.
            header = pa.schema([(field.with_type(field.type.value_type)
                                 if pa.types.is_dictionary(field.type) else field
                                 ).with_nullable(True) for field in header])
        if columns.id is None:  # rows are named by their number
            header = header.insert(0, pa.field("doc", pa.int64()))
        if not self.to_parquet:
            for field in header:
                if not _json_type(field.type):
                    raise ValueError(f"column {field.name!r} holds {field.type}, which JSON "
                                     "and msgpack records cannot hold; use --format parquet")
        return header

    def _adopt_header(self, header: pa.Schema, files: bool) -> None:
        """The first file's columns are the output's (with ``pages`` if its text column
        holds ``files``); later files must match them."""
        if self.header is None:
            self.header, self.pages = header, files
        elif self.to_parquet and not header.equals(self.header):
            raise ValueError("its columns differ from the first file's, which the output "
                             f"follows ({_columns(self.header)}, not {_columns(header)})")

    # --- output ---------------------------------------------------------------------

    def writer(self, settings: Settings, named: bool) -> ParquetWriter:
        """The ``--format parquet`` writer. Text input: ``doc`` is the file's path, a
        string (none for stdin); Parquet input: the first file read decides."""
        if self.header is None and not self.from_parquet:
            self.header = pa.schema([("doc", pa.string())] if named else [])
        return ParquetWriter(self.output, self, settings.record_fields(), named)

    def fields(self, fields: tuple[str, ...]) -> tuple[str, ...]:
        """The optional chunk fields the output's rows have: the settings' ``fields``,
        and ``pages`` where the input may hold PDFs."""
        return with_pages(fields) if self.pages else fields


class RowFile(DocumentFile):
    """A file of a registered format that a row holds, as a document's text blocks: extracted
    as a FILE is (``chunkd.inputs.extract``), when first asked. Picklable, as bytes,
    for ``--jobs`` workers."""

    def __init__(self, data: bytes | memoryview, kind: str, where: str, limits: Limits) -> None:
        super().__init__(None, kind, limits)
        self.data, self.where = data, where

    def extract(self) -> Extracted:
        if self.extracted is None:
            self.extracted = extract(bytes(self.data), self.kind, self.where, self.limits)
            self.data = b""  # its text is what is read from now on
        return self.extracted

    def __reduce__(self) -> tuple:
        return RowFile, (bytes(self.data), self.kind, self.where, self.limits)


class ParquetWriter:
    """Chunk records into a Parquet file (see the module's docstring), with the filter's
    writer methods: ``begin`` a document, ``write`` its chunks, ``end`` it; ``close``
    writes the last row group and the footer and puts the file in place.

    Chunks are turned into Arrow columns every ``BLOCK_BYTES`` (Python objects cost
    several times their text) and written as a row group every ``ROW_GROUP_BYTES``."""

    def __init__(self, path: str, files: ParquetFiles, fields: tuple[str, ...],
                 named: bool) -> None:
        self.path, self.files, self.named = path, files, named
        self.settings_fields = fields      # pages may join them (ParquetFiles.fields)
        self.headers: list[tuple] = []     # each pending document's header values
        self.owners: list[int] = []        # each pending chunk's document
        self.chunks: list[Chunk] = []
        self.pending = 0                   # bytes pending (text and headers), about
        self.in_document = False
        self.begun = False                 # whether any document began
        self.dimension: int | None = None  # a vector's numbers, once a chunk has one
        self.header_bytes = 0              # the current document's header, about
        self.blocks: list[pa.RecordBatch] = []   # the row group so far
        self.writer: pq.ParquetWriter | None = None
        # Through a symbolic link, the file it points to is replaced, as a shell's ``>``
        # writes it, not the link.
        self.final = os.path.realpath(path)
        self.target, self.temporary = self._open()
        self.owner = os.getpid()           # not a --jobs worker, forked with the handlers
        atexit.register(self._discard)
        # A SIGTERM or SIGHUP ends the filter as it would anyway, but not before the
        # hidden file is removed (exit handlers do not run when a signal kills).
        self._restore_handlers = remove_before_ending(self._discard)

    def _open(self) -> tuple[str | BinaryIO, str | None]:
        """Where the rows go: a hidden file beside a regular (or new) file, renamed at
        the end; a device or a pipe (``/dev/stdout``, a FIFO) directly, opened here, not
        by Arrow: a FIFO's open waits for its reader, and only Python's lets a signal
        (Ctrl-C, SIGTERM) end the wait."""
        try:
            mode = None
            try:
                # The path, not its real path: /dev/stdout's, when it is a pipe, is
                # /proc/PID/fd/pipe:[N], which names nothing.
                status = os.stat(self.path)
                if not stat.S_ISREG(status.st_mode):
                    return open(self.path, "wb"), None
                mode = stat.S_IMODE(status.st_mode)  # a file replaced keeps its mode
            except FileNotFoundError:
                pass
            folder, name = os.path.split(self.final)
            temporary = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.part")
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            if mode is not None:
                os.chmod(temporary, mode)
        except OSError as error:
            raise self._output_error(error) from None
        return temporary, temporary

    def begin(self, doc: object, fields: dict, extracted: Extracted | None = None) -> None:
        if isinstance(doc, str):
            try:
                doc.encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(f"{display_name(doc)}: the name is not UTF-8, which the "
                                 "doc column (a Parquet string) cannot hold") from None
        self.headers.append(((doc,) if self.named else ()) + tuple(fields.values()))
        # Each chunk row holds a copy of the header: it counts towards a block as the
        # chunk's text does (a large carried column must not pile up unconverted).
        self.header_bytes = sum(map(_header_bytes, self.headers[-1]))
        self.in_document = self.begun = True

    def write(self, chunks: list[Chunk]) -> None:
        if chunks and chunks[0].vector is not None:
            self.dimension = len(chunks[0].vector)
            self.pending += 4 * self.dimension * len(chunks)
        self.chunks += chunks
        self.owners += [len(self.headers) - 1] * len(chunks)
        self.pending += sum(len(chunk.text) for chunk in chunks)
        self.pending += self.header_bytes * len(chunks)
        if self.pending >= BLOCK_BYTES:
            self._convert()

    def end(self) -> None:
        self.in_document = False
        if len(self.headers) >= BLOCK_DOCUMENTS:  # documents without chunks add up too
            self._convert()

    def _header(self) -> pa.Schema:
        return self.files.header or pa.schema([])  # None: no input was readable

    @property
    def fields(self) -> tuple[str, ...]:
        """The optional chunk fields of the rows, fixed with the header."""
        return self.files.fields(self.settings_fields)

    def _schema(self) -> pa.Schema:
        return chunk_schema(self._header(), self.fields, self.dimension)

    def _convert(self) -> None:
        """The pending chunks as an Arrow block of the row group."""
        if not self.chunks:  # documents without chunks have no rows (and no vectors
            self.headers = self.headers[-1:] if self.in_document else []  # to type them)
            self.owners, self.pending = [], 0
            return
        header = self._header()
        owners = to_arrow(self.owners, pa.int64())
        values = list(zip(*self.headers)) if self.headers else [()] * len(header)
        columns = [pa.array(column, field.type).take(owners)  # scalars, or row numbers
                   for column, field in zip(values, header)]
        self.blocks.append(pa.RecordBatch.from_arrays(
            [*columns, *chunk_arrays(self.chunks, self.fields, self.dimension)],
            schema=self._schema()))
        # The document in progress keeps its header for the chunks still to come.
        self.headers = self.headers[-1:] if self.in_document else []
        self.owners, self.chunks, self.pending = [], [], 0
        if sum(block.nbytes for block in self.blocks) >= ROW_GROUP_BYTES:
            self._write()

    def _write(self) -> None:
        """Write the blocks as a row group."""
        table = pa.Table.from_batches(self.blocks, schema=self._schema())
        self.blocks = []
        try:
            if self.writer is None:
                self.writer = pq.ParquetWriter(self.target, table.schema, use_dictionary=[
                    name for name in table.schema.names if name not in FIELD_TYPES])
            if table.num_rows:
                self.writer.write_table(table, row_group_size=table.num_rows)
        except OSError as error:
            raise self._output_error(error) from None

    def close(self, failed: bool = False) -> None:
        """Write what is pending and the footer; put the file in place. A failed run
        that read no document (a mistyped input, say) leaves the output as it was."""
        if failed and not self.begun:
            self._discard()
            self.temporary = None
            self._restore_handlers()
            return
        self._convert()
        self._write()
        assert self.writer is not None, "_write made it"
        try:
            self.writer.close()
            if not isinstance(self.target, str):
                self.target.close()
            if self.temporary is not None:
                os.replace(self.temporary, self.final)
        except OSError as error:
            raise self._output_error(error) from None
        self.temporary = None
        self._restore_handlers()

    def _discard(self) -> None:
        """At exit, a file never closed (an error, an interrupt) is removed."""
        if self.temporary is not None and os.getpid() == self.owner:
            try:
                os.unlink(self.temporary)
            except OSError:
                pass

    def _output_error(self, error: OSError) -> OutputError:
        return OutputError(f"{display_name(self.path)}: {_reason(error)}")


def _arrow_file(file: BinaryIO) -> pa.NativeFile:
    """An open file for Arrow to read: the same file reopened by Arrow, through
    ``/proc``, where there is one, so that its reads go into Arrow's memory, not into
    Python bytes objects (19 MB more at peak for 1 GB of Parquet)."""
    if PROC_DESCRIPTORS is None:
        return pa.PythonFile(file, mode="r")
    return pa.OSFile(f"{PROC_DESCRIPTORS}/{file.fileno()}")


def _batch_rows(file: pq.ParquetFile, text_column: str) -> int:
    """Rows a record batch, so that it holds about ``BATCH_BYTES`` of text, and at most
    ``BATCH_ROWS``: the sizes in the file's metadata are those of its pages, and a
    dictionary-encoded column of repeated documents says little of what it decodes to."""
    meta = file.metadata
    size = sum(column.total_uncompressed_size
               for group in range(meta.num_row_groups)
               for column in map(meta.row_group(group).column, range(meta.num_columns))
               if column.path_in_schema == text_column)
    return max(1, min(BATCH_ROWS, BATCH_BYTES * max(meta.num_rows, 1) // max(size, 1)))


def _header_bytes(value: object) -> int:
    """About the bytes of a header value (an Arrow scalar, or a name or row number):
    its buffer for strings and binaries, a word for the rest."""
    if isinstance(value, pa.Scalar) and value.is_valid and hasattr(value, "as_buffer"):
        return value.as_buffer().size
    return len(value) if isinstance(value, (str, bytes)) else 8


#: What ``_value`` gives for a string of a Parquet file that is not valid UTF-8.
NOT_UTF8 = object()
#: How a row's value of a carried column is read: ``_value``, ``_scalar`` or
#: ``_checked_scalar``.
Reader = Callable[[pa.Array, int], object]


def _utf8_bytes(values: pa.Array, index: int) -> memoryview | None:
    """The bytes of the text at ``index`` (None: null), a view of Arrow's memory, no
    copy, where the column is plain strings or bytes, as it is in most files."""
    one = values.slice(index, 1)
    if pa.types.is_dictionary(one.type):
        one = one.dictionary_decode()
    if pa.types.is_string_view(one.type) or pa.types.is_binary_view(one.type):
        one = one.cast(pa.large_binary())  # a view's bytes may lie in several buffers
    if one.null_count:
        return None
    _, offsets, data = one.buffers()
    large = pa.types.is_large_string(one.type) or pa.types.is_large_binary(one.type)
    width = 8 if large else 4
    start, end = struct.unpack_from("=2q" if large else "=2i", offsets, one.offset * width)
    return memoryview(data or b"")[start:end]


def _scalar(values: pa.Array, index: int) -> pa.Scalar:
    return values[index]


def _checked_scalar(values: pa.Array, index: int) -> pa.Scalar | object:
    """The Arrow scalar at ``index``, or ``NOT_UTF8`` if a string in it is not UTF-8."""
    value = values[index]
    try:
        value.validate(full=True)
    except pa.ArrowInvalid:
        return NOT_UTF8
    return value


def _valid(values: pa.Array) -> bool:
    """Whether every string in ``values`` (nested ones included) is valid UTF-8: Arrow's
    full validation checks that, as Parquet readers do not."""
    try:
        values.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _value(values: pa.Array, index: int) -> object:
    """The Python value at ``index``, or ``NOT_UTF8``."""
    try:
        return values[index].as_py()
    except UnicodeDecodeError:
        return NOT_UTF8


def _json_type(kind: pa.DataType) -> bool:
    """Whether values of this type are JSON values (and msgpack ones) as they are."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)
            or pa.types.is_fixed_size_list(kind) or pa.types.is_list_view(kind)):
        return _json_type(kind.value_type)
    if pa.types.is_struct(kind):
        return all(_json_type(kind.field(i).type) for i in range(kind.num_fields))
    return (pa.types.is_null(kind) or pa.types.is_boolean(kind) or pa.types.is_integer(kind)
            or pa.types.is_floating(kind) or pa.types.is_string(kind)
            or pa.types.is_large_string(kind) or pa.types.is_string_view(kind))


def _columns(schema: pa.Schema) -> str:
    return ", ".join(f"{field.name} {field.type}" for field in schema)


def _reason(error: OSError) -> str:
    """An I/O error's reason, as the system words it (pyarrow's own messages wrap it)."""
    return os.strerror(error.errno) if error.errno else _one_line(error)


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())
