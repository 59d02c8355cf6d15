"""The ``chunkd`` command: a Unix filter from documents to chunk records.

    cat doc.txt | chunkd --tokens 300          # one JSON object a line per chunk
    chunkd --chars 800 --overlap 120 a.md b.md
    chunkd --input ndjson < docs.ndjson         # {"id": ..., "text": ...} a line
    chunkd watch INBOX                          # the daemon (see chunkd.daemon)

Exit status: 0 success, 1 some input could not be read (the rest was processed),
2 usage error.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator

from chunkd import __version__
from chunkd.pipeline import STRATEGIES, Settings, chunk_blocks
from chunkd.progress import Progress
from chunkd.readers import (Document, FileBlocks, InputError, OnBytes, file_document,
                            ndjson_documents, stream_document)
from chunkd.writers import FORMATS, Writer, make_writer

EXIT_OK, EXIT_INPUT = 0, 1  # usage errors exit 2, through argparse
DEFAULT_CHARS = 1000
OVERLAP_PERCENT = 10


def _positive(value: str) -> int:
    number = _count(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return number


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return number


def add_size_options(parser: argparse.ArgumentParser) -> None:
    """--chars / --tokens / --overlap / --strategy, shared with ``chunkd watch``."""
    size = parser.add_argument_group("chunk size (pick one unit)").add_mutually_exclusive_group()
    size.add_argument("--chars", type=_positive, metavar="N",
                      help=f"at most N Unicode code points a chunk (default: {DEFAULT_CHARS})")
    size.add_argument("--tokens", type=_positive, metavar="N",
                      help="at most N cl100k_base tokens a chunk (counted offline)")
    parser.add_argument("--overlap", type=_count, metavar="M",
                        help=f"at most M units shared by neighbouring chunks, in the same unit; "
                             f"must be smaller than N (default: {OVERLAP_PERCENT}%% of N)")
    parser.add_argument("--strategy", choices=STRATEGIES, default="recursive",
                        help="how to cut (default: recursive, LangChain's "
                             "RecursiveCharacterTextSplitter)")


def settings_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Settings:
    """The chunking settings the options ask for; exits 2 on an impossible overlap."""
    unit, size = ("tokens", args.tokens) if args.tokens else ("chars", args.chars or DEFAULT_CHARS)
    overlap = size * OVERLAP_PERCENT // 100 if args.overlap is None else args.overlap
    if overlap >= size:
        parser.error(f"--overlap {overlap} must be smaller than the chunk size {size}")
    return Settings(unit=unit, size=size, overlap=overlap, strategy=args.strategy)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chunkd",
        description="Cut documents into chunks for retrieval (RAG), exactly as LangChain's "
                    "RecursiveCharacterTextSplitter would, streaming. Reads stdin (one UTF-8 "
                    "document) or FILEs (one document each) and writes one JSON object a line "
                    "per chunk: index, start, end (code-point offsets), length, text.",
        epilog="Examples:  cat doc.txt | chunkd --tokens 300    "
               "chunkd --chars 800 --overlap 120 *.md    "
               "chunkd --input ndjson < docs.ndjson    "
               "chunkd watch INBOX (see chunkd watch --help).  "
               "Exit status: 0 ok, 1 some input unreadable (the rest was processed), 2 usage.")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="documents to chunk; none or '-' reads stdin")
    add_size_options(parser)
    parser.add_argument("--input", choices=("text", "ndjson"), default="text",
                        help="text: each input is one document (default); ndjson: one "
                             'JSON object a line, {"text": ..., "id": ...}; other fields are '
                             "copied into each chunk record")
    parser.add_argument("--format", choices=FORMATS, default="ndjson",
                        help="ndjson: a record a chunk (default); json: one document a line, "
                             '{"doc": ..., "chunks": [...]}; msgpack: a stream of maps')
    parser.add_argument("--errors", choices=("strict", "replace"), default="strict",
                        help="invalid UTF-8: stop that document with an error naming the byte "
                             "offset (strict, default) or substitute U+FFFD (replace)")
    parser.add_argument("--jobs", type=_positive, default=os.cpu_count() or 1, metavar="N",
                        help="processes for many documents (several FILEs or --input ndjson); "
                             "output stays in input order (default: the number of cores, "
                             f"{os.cpu_count()} here)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress line (shown on stderr only when it is a terminal)")
    parser.add_argument("--version", action="version", version=f"chunkd {__version__}")
    return parser


def documents(args: argparse.Namespace, on_bytes: OnBytes) -> Iterator[Document | InputError]:
    """The documents the arguments name, in order; unreadable ones as ``InputError``."""
    for path in args.files or ["-"]:
        if args.input == "ndjson":
            if path == "-":
                yield from ndjson_documents(sys.stdin.buffer, args.errors, on_bytes=on_bytes)
                continue
            try:
                with open(path, "rb") as stream:
                    yield from ndjson_documents(stream, args.errors, path, on_bytes)
            except OSError as error:
                yield InputError(f"{path}: {error.strerror or error}")
        elif path == "-":
            yield stream_document(sys.stdin.buffer, args.errors, on_bytes)
        else:
            yield file_document(path, args.errors, None if args.parallel else on_bytes)


def write_document(document: Document, settings: Settings, writer: Writer,
                   flush: Callable[[], None]) -> None:
    """Chunk one document into ``writer``, flushing as chunks become final."""
    writer.begin(document.name, document.fields)
    for chunks in chunk_blocks(settings, document.blocks):
        writer.write(chunks)
        flush()
    writer.end()


#: A --jobs task holds consecutive documents up to about this many bytes (or this
#: many documents), so that small documents do not cost a round trip each.
BATCH_BYTES, BATCH_DOCUMENTS = 1 << 20, 256


def render_batch(batch: list[Document | InputError], settings: Settings, format: str,
                 named: bool) -> list[tuple[bytes, str | None]]:
    """A ``--jobs`` worker: each document's whole output and its error, if any (the
    chunks made before an error are kept, as when streaming)."""
    results = []
    for document in batch:
        out = io.BytesIO()
        try:
            if isinstance(document, InputError):
                raise document
            write_document(document, settings, make_writer(format, out, named), lambda: None)
        except InputError as error:
            results.append((out.getvalue(), str(error)))
        else:
            results.append((out.getvalue(), None))
    return results


def batches(items: Iterator[Document | InputError]) -> Iterator[list[Document | InputError]]:
    batch, size = [], 0
    for item in items:
        batch.append(item)
        size += _size(item)
        if size >= BATCH_BYTES or len(batch) >= BATCH_DOCUMENTS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _size(item: Document | InputError) -> int:
    if isinstance(item, InputError):
        return 0
    if isinstance(item.blocks, FileBlocks):
        try:
            return os.stat(item.blocks.path).st_size
        except OSError:
            return 0
    return sum(len(block) for block in item.blocks)


def in_order(items: Iterator[Document | InputError], jobs: int, settings: Settings,
             format: str, named: bool) -> Iterator[tuple[bytes, str | None]]:
    """Every document's output and error, rendered by ``jobs`` processes, in input
    order, with a few batches per process in flight (memory stays bounded)."""
    from concurrent.futures import ProcessPoolExecutor  # only here: it costs memory

    settings.splitter()  # load the tokenizer once, before the workers fork
    with ProcessPoolExecutor(jobs) as pool:
        pending: deque = deque()
        try:
            for batch in batches(items):
                pending.append(pool.submit(render_batch, batch, settings, format, named))
                while len(pending) > 2 * jobs:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        finally:
            pool.shutdown(cancel_futures=True)


def run(args: argparse.Namespace, settings: Settings) -> int:
    out = sys.stdout.buffer
    named = args.input == "ndjson" or bool(args.files) and args.files != ["-"]
    progress = Progress(enabled=not args.quiet)
    status = EXIT_OK

    def report(error: InputError | str) -> None:
        nonlocal status
        out.flush()
        progress.close()
        print(f"chunkd: {error}", file=sys.stderr)
        status = EXIT_INPUT

    if args.parallel:
        rendered = in_order(documents(args, progress.add), args.jobs, settings, args.format,
                            named)
        for output, error in rendered:
            out.write(output)
            out.flush()
            if error:
                report(error)
    else:
        writer = make_writer(args.format, out, named)
        for document in documents(args, progress.add):
            try:
                if isinstance(document, InputError):
                    raise document
                write_document(document, settings, writer, out.flush)
            except InputError as error:
                report(error)
    out.flush()
    progress.close()
    return status


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["watch"]:
        from chunkd.daemon import main as watch_main
        return watch_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = settings_from(args, parser)
    # Workers render whole documents, so stdin (a stream) is never one of theirs.
    many = args.input == "ndjson" or (len(args.files) > 1 and "-" not in args.files)
    args.parallel = many and args.jobs > 1
    try:
        return run(args, settings)
    except BrokenPipeError:
        # The reader went away (`| head`): end quietly, as a filter should.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
