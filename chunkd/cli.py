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
import os
import sys
from collections.abc import Iterator

from chunkd import __version__
from chunkd.pipeline import STRATEGIES, Settings, chunk_blocks
from chunkd.readers import (Document, InputError, file_document, ndjson_documents,
                            stream_document)
from chunkd.writers import FORMATS, make_writer

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
    parser.add_argument("--version", action="version", version=f"chunkd {__version__}")
    return parser


def documents(args: argparse.Namespace) -> Iterator[Document | InputError]:
    """The documents the arguments name, in order; unreadable ones as ``InputError``."""
    for path in args.files or ["-"]:
        if args.input == "ndjson":
            if path == "-":
                yield from ndjson_documents(sys.stdin.buffer, args.errors)
                continue
            try:
                with open(path, "rb") as stream:
                    yield from ndjson_documents(stream, args.errors, where=path)
            except OSError as error:
                yield InputError(f"{path}: {error.strerror or error}")
        elif path == "-":
            yield stream_document(sys.stdin.buffer, args.errors)
        else:
            yield file_document(path, args.errors)


def run(args: argparse.Namespace, settings: Settings) -> int:
    out = sys.stdout.buffer
    writer = make_writer(args.format, out)
    named = args.input == "ndjson" or bool(args.files) and args.files != ["-"]
    status = EXIT_OK
    for document in documents(args):
        try:
            if isinstance(document, InputError):
                raise document
            writer.begin(document.name, named, document.fields)
            for chunks in chunk_blocks(settings, document.blocks):
                writer.write(chunks)
                out.flush()
            writer.end()
        except InputError as error:
            out.flush()
            print(f"chunkd: {error}", file=sys.stderr)
            status = EXIT_INPUT
    out.flush()
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
