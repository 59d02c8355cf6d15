"""``chunkd preview``: the preview page for one document and one setting, as a single
self-contained HTML file (styles, script and data inline) that opens from disk.

    chunkd preview handbook.md --tokens 300 --overlap 30 -o report.html

Its "Copy JSONL" gives exactly what ``chunkd --count-tokens [the same options] FILE``
writes. Exit status: 0 written, 1 the document could not be read or the report not
written, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys

from chunkd.processes.stdio import EXIT_FAILED, EXIT_OK, Output, run_writing
from chunkd.inputs import (add_document_options, check_limits, document_source, file_opener,
                              labels)
from chunkd.inputs.readers import Document, InputError, display_name, documents
from chunkd.embeddings.selection import VECTORS
from chunkd.settings import CommandParser, add_settings_options, parse_with_settings
from chunkd.web import report, standalone_html, with_token_counts


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="chunkd preview",
        description="Write one document's chunks as a self-contained HTML page: the "
                    "document with each chunk's range and the overlap marked, every chunk's "
                    "details (range, length, exact tokens of --tokenizer), totals, a histogram "
                    "of lengths, with --strategy semantic the distance curve (the threshold, "
                    "the cuts), and the JSONL the filter writes (with --count-tokens) to "
                    "copy or download. The file opens from disk and loads nothing.",
        epilog="Exit status: 0 written, 1 the document could not be read or the report "
               "not written, 2 usage error.")
    parser.add_argument("file", metavar="FILE",
                        help=f"the document: text, or a {labels()} file as its content, "
                             "then its name, says ('-' reads stdin, as text)")
    parser.add_argument("-o", "--output", metavar="HTML", default="-",
                        help="where to write the page (default: stdout)")
    add_settings_options(parser)
    add_document_options(parser)
    return parser


def main(argv: list[str]) -> int:
    """``chunkd preview``; returns the exit status."""
    parser = build_parser()
    args, settings = parse_with_settings(parser, argv)
    if settings[VECTORS]:
        parser.error("--vectors is for chunkd, chunkd watch and the Python API (chunkd.arrow, "
                     "chunkd.outputs.vectors)")
    settings = with_token_counts(settings)
    name = None if args.file == "-" else args.file
    limits = check_limits(parser, args.max_bytes, args.extract_timeout, args.ocr)
    [document] = documents([args.file], "auto", settings.errors,
                           open_file=file_opener("auto", limits))
    try:
        if isinstance(document, InputError):  # stdin closed
            raise document
        assert isinstance(document, Document), "pauses come only when asked for"
        source, extracted = document_source(document)
        text = extracted.text if extracted is not None else "".join(document.blocks)
        page = standalone_html(report(settings, text, name, source=source))
    except InputError as error:  # unreadable, or no grammar for its language
        print(f"chunkd preview: {error}", file=sys.stderr)
        return EXIT_FAILED
    if args.output == "-":
        def write(out: Output) -> int:
            out.write(page)
            out.flush()
            return EXIT_OK
        return run_writing("chunkd preview", write)
    try:
        with open(args.output, "wb") as out:
            out.write(page)
    except OSError as error:
        print(f"chunkd preview: {display_name(args.output)}: {error.strerror or error}",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
