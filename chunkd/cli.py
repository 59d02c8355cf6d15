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
from typing import TYPE_CHECKING

from chunkd import __version__
from chunkd.pipeline import STRATEGIES, Settings, chunk_blocks
from chunkd.progress import Progress
from chunkd.readers import (Document, InputError, OnBytes, file_document, ndjson_documents,
                            stream_document)
from chunkd.writers import FORMATS, Writer, make_writer

if TYPE_CHECKING:
    from concurrent.futures import Future

EXIT_OK, EXIT_INPUT, EXIT_USAGE = 0, 1, 2
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


def render_document(task: tuple[Document, Settings, str, bool]) -> tuple[bytes, str | None]:
    """A ``--jobs`` worker: one document's whole output, and its error if any (the
    chunks made before an error are kept, as when streaming)."""
    document, settings, format, named = task
    out = io.BytesIO()
    try:
        write_document(document, settings, make_writer(format, out, named), lambda: None)
    except InputError as error:
        return out.getvalue(), str(error)
    return out.getvalue(), None


def in_order(tasks: Iterator[tuple | InputError], jobs: int
             ) -> Iterator[tuple[bytes, str | None] | InputError]:
    """``render_document`` over ``tasks`` in ``jobs`` processes, results in input order,
    with at most a few tasks per process in flight (memory stays bounded)."""
    from concurrent.futures import ProcessPoolExecutor  # only here: it costs memory

    with ProcessPoolExecutor(jobs) as pool:
        pending: deque = deque()
        try:
            for task in tasks:
                pending.append(task if isinstance(task, InputError)
                               else pool.submit(render_document, task))
                while len(pending) > 4 * jobs:
                    yield _result(pending.popleft())
            while pending:
                yield _result(pending.popleft())
        finally:
            pool.shutdown(cancel_futures=True)


def _result(item: Future | InputError) -> tuple[bytes, str | None] | InputError:
    return item if isinstance(item, InputError) else item.result()


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
        settings.splitter()  # load the tokenizer once, before the workers fork
        tasks = (d if isinstance(d, InputError) else (d, settings, args.format, named)
                 for d in documents(args, progress.add))
        for result in in_order(tasks, args.jobs):
            if isinstance(result, InputError):
                report(result)
                continue
            output, error = result
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
    many = args.input == "ndjson" or len([f for f in args.files if f != "-"]) > 1
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
