"""``chunkd eval``: documents, questions and a grid of settings in; for each setting,
how well a retriever finds the questions' reference excerpts in its chunks.

    chunkd eval a.md b.md --questions q.jsonl --tokens 128,256,512 --overlap 0,15%

Exit status: 0 success; 1 some input could not be used (a document, a question, a
combination of the grid, the chart file; or no question at all), the rest was
evaluated; 2 usage (a bad option, no setting of the grid that can work, the eval
extra missing); 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from chunkd.about import ReportVersion
from chunkd.inputs import add_document_options, check_limits, labels
from chunkd.llm.ledger import run_lines, start_run
from chunkd.options import supporting
from chunkd.model.errors import EmbedError, LLMError
from chunkd.processes.stdio import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Output, run_writing
from chunkd.outputs.progress import Progress
from chunkd.settings import (DEFAULT_TOKENIZER, CommandParser, SettingsError,
                             add_settings_options)

#: The context a question's chunks fit in by default, in tokens: a prompt's share for
#: retrieved text in a small model's context; top k chunks with -k instead.
DEFAULT_BUDGET = 1000
#: The chunks a question gets with a budget, for a retriever that needs a number.
DEFAULT_K = 5

#: How to add the eval extra's packages, wherever chunkd was installed from (chunkd is
#: not on PyPI, so ``pip install 'chunkd[eval]'`` needs an index that has it).
EXTRA = "pip install 'bm25s>=0.2.10,<0.4' 'matplotlib>=3.8'"


def build_parser() -> argparse.ArgumentParser:
    from chunkd.evaluate.grid import DEFAULT_OVERLAPS, DEFAULT_TOKENS
    from chunkd.evaluate.metrics import METRICS
    from chunkd.evaluate.report import CHARTS, FORMATS
    from chunkd.evaluate.retrieval import RETRIEVERS

    parser = CommandParser(
        prog="chunkd eval",
        description="Measure which chunking settings retrieve best on your own questions, "
                    "offline. Every combination of the settings options' comma lists is "
                    "one setting; each chunks all the documents as the filter does, a "
                    "retriever (BM25) returns the top k chunks for every question, and "
                    "the chunks are scored against the question's reference excerpts on "
                    "exact code-point ranges: recall, precision, IoU (the metrics of the "
                    "public chunking evaluation), recall@k, MRR and nDCG@k, each a mean "
                    "with its standard deviation. Needs the eval extra: " + EXTRA + ".",
        epilog="Default grid: --strategy recursive --tokens "
               + ",".join(map(str, DEFAULT_TOKENS)) + " --overlap "
               + ",".join(map(str, DEFAULT_OVERLAPS))
               + ". A combination that cannot work (an overlap not smaller than a size) is "
               "reported and left out.\n\nExit status: 0 ok, 1 some input, question or "
               "setting could not be used (the rest was evaluated), 2 usage.")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="the documents, one a file (or NDJSON files with --input ndjson; "
                             "none reads stdin)")
    parser.add_argument("--questions", required=True, metavar="FILE",
                        help='JSON lines {"question": ..., "doc": NAME, "references": '
                             '[{"start": S, "end": E} or {"text": ...}]} with code-point '
                             "offsets, or a .csv in the public chunking evaluation's layout "
                             "(question, references, corpus_id); NAME is a document's path "
                             "as given, its file name (with or without suffix) or its NDJSON id")
    add_settings_options(parser, grid=True)
    parser.add_argument("--input", choices=("text", "ndjson"), default="text",
                        help=f'text: each FILE is one document, a {labels()} file '
                             'as the text "chunkd extract" prints (default); ndjson: one '
                             '{"id": ..., "text": ...} a line')
    add_document_options(parser)
    parser.add_argument("-k", "--k", type=int, metavar="K",
                        help="retrieve the top K chunks per question instead of those that "
                             f"fit a budget of tokens (default: --budget {DEFAULT_BUDGET})")
    parser.add_argument("--retriever", choices=RETRIEVERS, default="bm25",
                        help="bm25: Okapi BM25 over words, CJK as character bigrams (default); "
                             "dense: the cosine similarity of the --embed model's vectors; "
                             "hybrid: the two fused by reciprocal rank")
    parser.add_argument("--query-prefix", default="", metavar="TEXT",
                        help="dense, hybrid: put TEXT before every question (E5's 'query: ', "
                             "BGE's instruction)")
    parser.add_argument("--document-prefix", default="", metavar="TEXT",
                        help="dense, hybrid: put TEXT before every chunk (E5's 'passage: ')")
    parser.add_argument("--budget", type=int, metavar="TOKENS",
                        help="retrieve as many of the best chunks as fit in TOKENS tokens "
                             "(the chunks' --count-tokens), so that sizes compete at equal "
                             f"context cost (default: {DEFAULT_BUDGET}, unless -k is given); "
                             "ranks by recall unless --rank says")
    parser.add_argument("--rank", choices=METRICS,
                        help="the metric that ranks the settings (default: recall within the "
                             "budget; with -k, iou: with k fixed, recall alone always favours "
                             "the largest chunks)")
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table: for a terminal (default); ndjson, json, csv: one record "
                             "per setting, best first")
    parser.add_argument("--chart", metavar="FILE",
                        help="also draw recall and IoU against size, a line per strategy and "
                             f"overlap: {', '.join(CHARTS)} (a page with the chart and tables)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar (drawn on stderr only when it is a terminal)")
    parser.add_argument("--version", action=ReportVersion)
    return parser


class GridProgress(Progress):
    """A bar over the grid on stderr, drawn only when stderr is a terminal."""

    WIDTH = 24

    def __init__(self, total: int, enabled: bool = True) -> None:
        super().__init__(enabled=enabled)
        #: Grid points, not bytes: always known.
        self.total: int = total

    def show(self, done: int, doing: str) -> None:
        if self.enabled:
            filled = self.WIDTH * done // self.total
            self.stream.write(f"\rchunkd eval: [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
                              f"{done}/{self.total} {doing}\x1b[K")
            self.stream.flush()
            self.shown = True


class Problems:
    """Reports input problems on stderr, one line each, and remembers there were some."""

    def __init__(self) -> None:
        self.count = 0

    def report(self, message: object) -> None:
        self.count += 1
        print(f"chunkd eval: {message}", file=sys.stderr, flush=True)


def load_documents(args: argparse.Namespace, errors: str, problems: Problems):
    """The documents the arguments name, read whole (references are found in them);
    invalid UTF-8 as ``errors`` says."""
    from chunkd.inputs import Limits, document_source, file_opener
    from chunkd.evaluate.questions import Documents
    from chunkd.inputs.readers import InputError, Paused, documents

    library = Documents()
    # A document of a registered format is its extracted text: the offsets questions give refer
    # to it, as they do to the chunks' offsets.
    opener = file_opener("auto", Limits(args.max_bytes, args.extract_timeout, args.ocr))
    for document in documents(args.files, args.input, errors, open_file=opener):
        if isinstance(document, InputError):
            problems.report(document)
            continue
        assert not isinstance(document, Paused), "documents() pauses only when asked to"
        try:
            source, extracted = document_source(document)
            text = extracted.text if extracted is not None else "".join(document.blocks)
            library.add(document.name, text, args.input == "text", source)
        except InputError as error:
            problems.report(error)
            library.add_unreadable(document.name, args.input == "text")
    return library


def load_questions(path: str, library, problems: Problems) -> list:
    """The questions whose references are found in their documents; the others are
    reported, one line each (one line a document for those on an unreadable one)."""
    from chunkd.evaluate.questions import QuestionError, Unreadable, read_questions
    from chunkd.inputs.readers import display_name

    resolved = []
    left_out: dict[str, int] = {}
    try:
        for question in read_questions(path):
            try:
                if isinstance(question, QuestionError):
                    raise question
                resolved.append(library.resolve(question))
            except Unreadable as error:
                left_out[str(error)] = left_out.get(str(error), 0) + 1
            except QuestionError as error:
                problems.report(error)
    except OSError as error:
        problems.report(f"{display_name(path)}: {error.strerror or error}")
    for name, count in left_out.items():
        print(f"chunkd eval: {name}: {count} question{'s' * (count != 1)} left out "
              "(the document could not be read)", file=sys.stderr)
    return resolved


def run(args: argparse.Namespace, parser: argparse.ArgumentParser, out: Output) -> int:
    from chunkd.evaluate import report
    from chunkd.evaluate.evaluation import evaluate
    from chunkd.evaluate.grid import grid
    from chunkd.evaluate.retrieval import retriever
    from chunkd.inputs.readers import display_name

    try:
        count_in_the_model(args)
        points, refused = grid(args)
    except SettingsError as error:
        parser.error(str(error))
    problems = Problems()
    for message in refused:
        problems.report(f"left out {message}")
    if not points:
        parser.error("no setting of the grid can work")
    model = retriever_model(args, parser)  # a model that cannot load: before any input
    # Every setting reads the documents alike: --errors is not one eval varies.
    library = load_documents(args, points[0].settings.errors, problems)
    questions = load_questions(args.questions, library, problems)
    if not questions:
        print("chunkd eval: no question to evaluate", file=sys.stderr)
        return EXIT_FAILED
    progress = GridProgress(len(points), enabled=not args.quiet)
    results = []
    started = time.perf_counter()
    search = retriever(args.retriever, model, args.query_prefix, args.document_prefix)
    try:
        for done, point in enumerate(points):
            progress.show(done, point.options())
            results.append(evaluate(point, library, questions, search, args.k or DEFAULT_K,
                                    args.budget))
    except (EmbedError, LLMError) as error:  # a model failed: nothing to report
        progress.close()
        print(f"chunkd eval: {error}", file=sys.stderr)
        return EXIT_FAILED
    progress.close()
    seconds = time.perf_counter() - started
    rank = args.rank or ("recall" if args.budget is not None else "iou")
    results = report.ranked(results, rank)
    scope = report.Scope(args.k or DEFAULT_K, rank, args.retriever, len(questions),
                         tuple(library.names), points[0].settings.token_measure.name,
                         None if model is None else model.name, args.budget)
    out.write(report.table(results, scope).encode("utf-8") if args.format == "table"
              else report.records_bytes(results, args.format, scope))
    out.flush()
    if args.chart:
        data = report.chart_bytes(results, os.path.splitext(args.chart)[1].lower(), scope)
        try:
            with open(args.chart, "wb") as chart:
                chart.write(data)
        except OSError as error:
            problems.report(f"{display_name(args.chart)}: {error.strerror or error}")
    if not args.quiet and sys.stderr.isatty():
        print(f"chunkd eval: {len(points)} settings in {seconds:.1f} s", file=sys.stderr)
    for line in run_lines():  # what a strategy's questions to the LLM cost: the gain's price
        print(f"chunkd eval: {line}", file=sys.stderr)
    return EXIT_FAILED if problems.count else EXIT_OK


def count_in_the_model(args: argparse.Namespace) -> None:
    """Sizes for a retriever that embeds with a model on disk: counted in the model's
    tokens (unless ``--tokenizer`` says otherwise), within its window (or an endpoint's,
    ``served_window``) less what
    ``--document-prefix`` takes, so that no chunk is cut short by the model unseen (a
    grid size over it is left out, and said)."""
    from chunkd.embeddings.models import tokenizer_folder
    from chunkd.evaluate.retrieval import EMBEDDING
    from chunkd.settings import model_window
    from chunkd.units import resolve

    if args.retriever not in EMBEDDING or (args.embed is None and args.embed_url is None):
        return
    if args.tokenizer is None and args.embed is not None:
        args.tokenizer = tokenizer_folder(args.embed)
    window = model_window({"tokenizer": args.tokenizer, "embed_window": args.embed_window,
                           "embed_url": args.embed_url, "embed_model": args.embed_model})
    if window is not None and args.embed_window is None and args.embed_url is not None:
        args.embed_window = window  # what the endpoint says, as if given
    if window is not None and args.document_prefix:
        prefix = resolve(args.tokenizer or DEFAULT_TOKENIZER).count(args.document_prefix)
        if prefix >= window:
            raise SettingsError(f"--document-prefix takes {prefix} of the model's {window} "
                                "tokens a chunk, which leaves the chunks none")
        args.embed_window = window - prefix


def retriever_model(args: argparse.Namespace, parser: argparse.ArgumentParser):
    """The model of a retriever that embeds (``--embed``), loaded once; None for BM25."""
    from chunkd.evaluate.retrieval import EMBEDDING

    if args.retriever not in EMBEDDING:
        return None
    from chunkd.embeddings.selection import checked_model, one_model

    try:
        one_model(vars(args), lambda name: "--" + name.replace("_", "-"))
        return checked_model(vars(args))
    except SettingsError as error:
        parser.error(str(error))


def main(argv: Sequence[str]) -> int:
    """Run ``chunkd eval``; returns the exit status."""
    from chunkd.evaluate.report import CHARTS

    parser = build_parser()
    args = parser.parse_args(list(argv))
    check_limits(parser, args.max_bytes, args.extract_timeout, args.ocr)
    start_run()  # what an LLM strategy says is this run's
    if args.k is not None and args.budget is not None:
        parser.error("-k and --budget exclude each other: give one")
    if args.k is None and args.budget is None:
        args.budget = DEFAULT_BUDGET
    if args.k is not None and args.k < 1:
        parser.error(f"-k must be at least 1, got {args.k}")
    if args.budget is not None and args.budget < 1:
        parser.error(f"--budget must be at least 1, got {args.budget}")
    if args.retriever != "bm25" and args.embed is None and args.embed_url is None:
        parser.error(f"--retriever {args.retriever} needs a model: --embed MODEL or "
                     "--embed-url URL --embed-model NAME")
    if args.retriever == "bm25" and args.late:
        parser.error("--late is for --retriever dense or hybrid: it makes the chunks' "
                     "vectors, which BM25 has none of")
    if args.late and args.document_prefix:
        parser.error("--late embeds each chunk within its document's text, which "
                     "--document-prefix's prefix is not part of: give one")
    if args.retriever == "bm25" and (args.query_prefix or args.document_prefix):
        parser.error("--query-prefix and --document-prefix are for --retriever dense or "
                     "hybrid")
    if args.input == "text" and (not args.files or "-" in args.files):
        parser.error("give the documents as FILEs (a question names its document), "
                     "or --input ndjson")
    twice = next((path for number, path in enumerate(args.files)
                  if path in args.files[:number]), None)
    if twice is not None:
        parser.error(f"{twice} is given twice")
    if args.chart and os.path.splitext(args.chart)[1].lower() not in CHARTS:
        parser.error(f"--chart {args.chart}: name a {', '.join(CHARTS)} file")
    missing = _missing_extra(args.chart is not None)
    if missing:
        print(f"chunkd eval: needs the eval extra ({missing} is not installed): {EXTRA}",
              file=sys.stderr)
        return EXIT_USAGE
    with supporting("late"):  # each setting of the grid may be --late
        return run_writing("chunkd eval", lambda out: run(args, parser, out))


def _missing_extra(chart: bool) -> str | None:
    """The first module of the eval extra that cannot be imported, if any."""
    import importlib

    for module in ("bm25s", "matplotlib") if chart else ("bm25s",):
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None
