"""``chunkd extract FILE``: the text a document of a registered format (PDF, HTML,
DOCX) becomes, which every chunk's offsets refer to (a text file's is its own UTF-8
text).

    chunkd extract report.pdf > report.txt
    chunkd extract --pages report.pdf          # where each page starts, as JSON

Exit status: 0 ok, 1 the file could not be read or extracted, 2 usage, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys

import orjson

from chunkd.inputs import (Extracted, Limits, add_document_options, check_limits,
                              detect_file, extract, kinds, labels, media_type, read_document)
from chunkd.processes.stdio import EXIT_FAILED, EXIT_OK, Output, run_writing
from chunkd.inputs.readers import InputError, decode_blocks, display_name
from chunkd.settings import CommandParser


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="chunkd extract",
        description=f"Print the text a {labels()} document becomes for chunking: the "
                    "text every chunk's start and end refer to (a PDF: its pages' text, a "
                    "form feed line between pages; HTML and DOCX: Markdown-like text).",
        epilog="Exit status: 0 ok, 1 the file could not be read or extracted, 2 usage.")
    parser.add_argument("file", metavar="FILE", help="the document; '-' reads stdin")
    parser.add_argument("--input", choices=("auto", "text", *kinds()), default="auto",
                        help="auto: the kind its content, then its name, says (default; "
                             "stdin: text); or the kind")
    parser.add_argument("--pages", action="store_true",
                        help='print {"media_type": ..., "page_starts": [...]} instead: the '
                             "offset (in code points) where each page starts, a PDF's")
    add_document_options(parser)
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    limits = check_limits(parser, args.max_bytes, args.extract_timeout, args.ocr)
    path = None if args.file == "-" else args.file
    kind = args.input
    if kind == "auto":
        kind = "text" if path is None else detect_file(path)
    try:
        extracted = _extracted(path, kind, limits)
    except InputError as error:
        print(f"chunkd: {error}", file=sys.stderr)
        return EXIT_FAILED
    if args.pages:
        answer = orjson.dumps({"media_type": media_type(kind),
                               "page_starts": extracted.page_starts}) + b"\n"
    else:
        answer = extracted.text.encode("utf-8")

    def write(out: Output) -> int:
        out.write(answer)
        out.flush()
        return EXIT_OK

    return run_writing("chunkd extract", write)


def _extracted(path: str | None, kind: str, limits: Limits) -> Extracted:
    data = read_document(path, limits.max_bytes)
    where = "stdin" if path is None else display_name(path)
    if kind == "text":
        return Extracted("".join(decode_blocks([data], where)))
    extracted = extract(data, kind, where, limits)
    for warning in extracted.warnings:
        print(f"chunkd: {where}: {warning}", file=sys.stderr, flush=True)
    return extracted
