"""The chunkd filter: documents in, chunk records out.

    cat doc.txt | chunkd --tokens 300          # one JSON object a line per chunk
    chunkd --chars 800 --overlap 120 a.md b.md
    chunkd --input ndjson < docs.ndjson         # {"id": ..., "text": ...} a line

Documents flow one way: readers (bytes to text blocks) -> the strategy's splitter ->
a writer (records to stdout), flushed as chunks become final. With ``--jobs``, small
documents are chunked by worker processes in batches and their output is written in
input order; a large document is streamed here, in order, so that memory stays
bounded whatever the mix of inputs.

Exit status: 0 success, 1 some input could not be read (the rest was processed) or
the output could not be written, 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple, TypeGuard

from chunkd.about import ReportVersion
from chunkd.cli.commands import COMMANDS
from chunkd.inputs import (DocumentFile, Limits, add_document_options, check_limits,
                              document_source,
                              file_opener, kinds, labels)
from chunkd.embeddings.selection import LATE, VECTORS, batch_size, embedder, takes_model
from chunkd.llm.options import CONTEXT, STRATEGIES_ASKING
from chunkd.model.errors import EmbedError, LLMError
from chunkd.options import supporting
from chunkd.processes.stdio import EXIT_FAILED, EXIT_OK, Output, run_writing
from chunkd.outputs.progress import Progress, input_size
from chunkd.inputs.readers import (Document, FileBlocks, InputError, Paused, TextBlocks,
                            display_name, documents)
from chunkd.settings import CommandParser, Settings, add_settings_options, parse_with_settings
from chunkd.strategies import build
from chunkd.llm.ledger import document_lines, run_lines, start_run
from chunkd.pipeline import DocumentText, Pipeline
from chunkd.outputs.late import LateWriter
from chunkd.outputs.vectors import VectorWriter
from chunkd.outputs.writers import FORMATS, Writer, make_writer

if TYPE_CHECKING:
    from chunkd.llm.context import Contexts
    from chunkd.outputs.parquet import ParquetFiles, ParquetWriter


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="chunkd",
        description="Cut documents into chunks for retrieval (RAG). Reads stdin (one UTF-8 "
                    "document) or FILEs (one document each) and writes one JSON object a line "
                    "per chunk: index, start, end (code-point offsets), length, text. The "
                    "recursive strategy (default) is chunk for chunk LangChain's "
                    "RecursiveCharacterTextSplitter.",
        epilog="Commands:\n" + "".join(f"  chunkd {name}: {summary}\n"
                                        for name, (_, summary) in COMMANDS.items())
               + "  (chunkd COMMAND --help)\n\nExamples:\n"
               "  cat doc.txt | chunkd --tokens 300\n"
               "  chunkd --strategy sentences --size 8 *.md\n"
               "  chunkd --input ndjson < docs.ndjson\n\n"
               "Exit status: 0 ok, 1 some input unreadable (the rest was processed) or "
               "output unwritable, 2 usage.")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="documents to chunk; none or '-' reads stdin")
    add_settings_options(parser)
    parser.add_argument("--input", choices=("auto", "text", *kinds(), "ndjson", "parquet"),
                        default="auto",
                        help=f"auto: each FILE is a {labels('or', 'text')} document as its "
                             "content, then its name, says, and stdin is text (default); "
                             f"{', '.join(('text', *kinds()))}: each input is one document "
                             "of that kind; "
                             'ndjson: one JSON object a line, {"text": ..., "id": ...}; other '
                             "fields are copied into each chunk record; parquet: a document "
                             "a row")
    add_document_options(parser)
    parser.add_argument("--format", choices=(*FORMATS, "parquet"), default="ndjson",
                        help="ndjson: a record a chunk (default); json: one document a line, "
                             '{"doc": ..., "chunks": [...]}; msgpack: a stream of maps; '
                             "parquet: a row a chunk, into --output FILE")
    # Parquet (chunkd.outputs.parquet, which needs pyarrow: imported only when used).
    parquet = parser.add_argument_group("Parquet")
    parquet.add_argument("--text-column", metavar="NAME",
                         help="--input parquet: the column holding the text (default: text)")
    parquet.add_argument("--id-column", metavar="NAME",
                         help="--input parquet: the column naming each document, written as "
                              "doc (default: id if there is one, else the row's number from 0)")
    parquet.add_argument("--output", metavar="FILE",
                         help="--format parquet: the file to write (Parquet is not a stream)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="processes for many documents (several FILEs or --input ndjson); "
                             "output stays in input order; with a model (--strategy "
                             "semantic, --vectors) one process, which batches every "
                             "document's texts for it (default: the number of cores, "
                             f"{os.cpu_count()} here)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress line (shown on stderr only when it is a terminal)")
    parser.add_argument("--version", action=ReportVersion)
    return parser


def write_document(document: Document, pipeline: Pipeline,
                   writer: Writer | ParquetWriter | VectorWriter | LateWriter,
                   flush: Callable[[], None], contexts: Contexts | None = None,
                   note: Callable[[str], None] | None = None) -> None:
    """Chunk one document into ``writer``, flushing as chunks become final; with
    ``contexts``, all its chunks at once, each with its context (chunks left without
    one, with ``--context-on-error keep``, are told to ``note`` in one line)."""
    source, extracted = document_source(document)
    writer.begin(document.name, document.fields, extracted)
    try:
        if contexts is None:
            for chunks in pipeline.chunks(DocumentText(source, document.blocks)):
                writer.write(chunks)
                flush()
        else:
            if "context" in document.fields:  # a record holds a key once
                raise InputError(f"{where(document.name)}: field 'context' is reserved for "
                                 "chunk records with --context; rename it")
            read: list[str] = []  # the whole text, which every request begins with
            chunks = [chunk for made in pipeline.chunks(DocumentText(
                source, _kept(document.blocks, read.append))) for chunk in made]
            done = contexts.document("".join(read), chunks)
            while contexts.notes and note is not None:
                note(contexts.notes.pop(0))
            if done.missing and note is not None:
                note(f"{where(document.name)}: {done.missing} of {len(chunks)} chunks "
                     f"written with \"context\": null (--context-on-error keep): {done.why}")
            writer.write(done.chunks)
            flush()
    except (EmbedError, LLMError) as error:  # the model failed on this document: the
        raise InputError(f"{where(document.name)}: {error}") from None  # others may not
    writer.end()


def _kept(blocks: Iterable[str], keep: Callable[[str], None]) -> Iterator[str]:
    """``blocks``, each given to ``keep`` as it goes by."""
    for block in blocks:
        keep(block)
        yield block


def where(name: object) -> str:
    """A document as messages name it: its file name or NDJSON id, or stdin."""
    return "stdin" if name is None else display_name(str(name))


#: The text the semantic strategy reads ahead, so that the windows of that many
#: documents go to the model together (``embed_ahead``).
AHEAD_CHARS = 1 << 19


def read_ahead(items: Iterable[Document | InputError | Paused],
               settings: Settings) -> Iterator[Document | InputError | Paused]:
    """``items`` in order, each text document's text read into memory (an error in it
    taking its place), about ``AHEAD_CHARS`` of text at a time, whose windows the
    semantic strategy embeds in one call before they go on (where the input pauses,
    what was read goes on at once). A PDF, HTML or DOCX document goes on as it is."""
    from chunkd.strategies.semantic import embed_ahead

    held: list[Document | InputError] = []
    size = 0

    def release() -> Iterator[Document | InputError]:
        texts = [item.blocks.text for item in held
                 if isinstance(item, Document) and isinstance(item.blocks, TextBlocks)]
        try:
            embed_ahead(settings, texts)
        except EmbedError:  # each document meets the failure itself, and says so
            pass
        yield from held
        held.clear()

    for item in items:
        if isinstance(item, Paused):
            yield from release()
            yield item
            continue
        if isinstance(item, Document) and not isinstance(item.blocks, DocumentFile):
            try:
                text = "".join(item.blocks)  # the strategy holds a document's text anyway
            except InputError as error:
                item = error
            else:
                item = Document(item.name, TextBlocks(text), item.fields, item.size,
                                item.media_type)
                size += len(text)
        held.append(item)
        if size >= AHEAD_CHARS:
            yield from release()
            size = 0
    yield from release()


# --- --jobs ------------------------------------------------------------------------------

#: A worker task holds consecutive documents up to about this many bytes (or this many
#: documents), so that small documents do not cost a round trip each.
BATCH_BYTES, BATCH_DOCUMENTS = 1 << 20, 256
#: Seconds a --jobs worker has to end once told to, before it is killed.
WORKERS_GRACE = 3.0
#: Larger documents are streamed by the main process: a worker renders its documents'
#: whole output in memory, and that must stay small.
LOCAL_BYTES = 4 << 20

#: What ``in_order`` yields: a document's rendered output and its error, if any, or a
#: document to stream here.
Rendered = tuple[bytes, str | None]


def render_batch(batch: list[Document | InputError], settings: Settings, format: str,
                 named: bool, folder: str | None) -> str | list[Rendered]:
    """A ``--jobs`` worker: each document's whole output and its error, if any (the
    chunks made before an error are kept, as when streaming), in a new file in
    ``folder``, whose path it returns. Through a file, not the pool's pipe: a worker
    killed while it sent a large answer would leave the pool reading the rest for ever
    (a pipe takes a write of up to 4 KiB, such as a path, whole or not at all). Where
    the file cannot be written (``TMPDIR`` full, or no ``folder``), the answer itself is
    returned."""
    import pickle
    import tempfile

    pipeline = Pipeline(settings)
    results: list[Rendered] = []
    for document in batch:
        out = io.BytesIO()
        try:
            if isinstance(document, InputError):
                raise document
            write_document(document, pipeline,
                           make_writer(format, out, named, settings.about()), lambda: None)
        except InputError as error:
            results.append((out.getvalue(), str(error)))
        else:
            results.append((out.getvalue(), None))
    if folder is None:
        return results
    path = None
    try:
        descriptor, path = tempfile.mkstemp(dir=folder)
        with open(descriptor, "wb") as file:
            pickle.dump(results, file, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError:
        if path is not None:
            os.unlink(path)
        return results
    return path


def answers_folder() -> str | None:
    """A new folder for the ``--jobs`` workers' answers, or None where none can be
    made (no usable ``TMPDIR``): the answers then come through the pool's pipe."""
    import tempfile

    try:
        return tempfile.mkdtemp(prefix="chunkd-jobs-")
    except OSError:
        return None


def rendered_batch(answer: str | list[Rendered]) -> list[Rendered]:
    """What ``render_batch`` answered, or wrote to the file ``answer`` names (removed
    once read)."""
    import pickle

    if not isinstance(answer, str):
        return answer
    path = answer
    with open(path, "rb") as file:
        results: list[Rendered] = pickle.load(file)
    os.unlink(path)
    return results


def _is_local(item: Document | InputError) -> TypeGuard[Document]:
    """Whether a document is streamed here: large, or of unknown size (a pipe)."""
    return isinstance(item, Document) and (item.size is None or item.size > LOCAL_BYTES)


def in_order(items: Iterator[Document | InputError | Paused], jobs: int, settings: Settings,
             format: str, named: bool) -> Iterator[Rendered | Document]:
    """Every document's output, in input order: rendered by ``jobs`` processes, with a
    few batches per process in flight, or (a large document) the document itself, for
    the caller to stream. Where the input pauses (a ``Paused``), what is read so far
    is yielded as it is rendered, until the input has more: records follow their lines
    as with one process, and reading goes on as soon as it can."""
    import multiprocessing  # only here, with the pool: they cost memory
    import shutil
    import signal
    import time
    from concurrent.futures import Future, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from chunkd.processes.signals import remove_before_ending

    def new_pool(processes: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(processes, initializer=_worker_start,
                                   initargs=(os.getpid(),))

    build(settings)  # load the tokenizer once, before the workers fork
    folder = answers_folder()

    def kill_workers(number: int) -> None:
        for worker in multiprocessing.active_children():  # the pool's processes
            if worker.pid is not None:
                try:
                    os.kill(worker.pid, number)
                except ProcessLookupError:
                    pass

    def discard_answers() -> None:
        """Before a signal ends the run: the workers, which may be writing an answer,
        are killed, then the answers' folder removed."""
        kill_workers(signal.SIGKILL)
        if folder is None:
            return
        for _ in range(100):  # until the last write of a worker being killed is in
            shutil.rmtree(folder, ignore_errors=True)
            if not os.path.exists(folder):
                break
            time.sleep(0.01)

    def close(executor: ProcessPoolExecutor) -> None:
        """Shut ``executor`` down: its workers get ``WORKERS_GRACE`` seconds to end,
        then are killed. A worker killed from outside while it waited for work holds the
        lock of the pool's queue for ever, and the others, which wait for that lock,
        would never end, nor the pool, nor this process. (No other pool's workers are
        alive here: each pool is closed before the next is made.)"""
        executor.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + WORKERS_GRACE
        for worker in multiprocessing.active_children():
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                worker.kill()
                worker.join()
        executor.shutdown()

    restore_handlers = remove_before_ending(discard_answers)
    pool = new_pool(jobs)
    with _Wake() as wake:
        #: Documents to stream here, and batches in a worker's hands (with their documents).
        pending: deque[Document | tuple[Future, list[Document | InputError]]] = deque()
        batch: list[Document | InputError] = []
        batch_bytes = 0

        def rendering(documents: list[Document | InputError]
                      ) -> tuple[Future, list[Document | InputError]]:
            try:
                future = pool.submit(render_batch, documents, settings, format, named, folder)
            except BrokenProcessPool:  # since the last batch: this one waits for a new pool
                future = Future()
                future.set_exception(BrokenProcessPool())
            return future, documents

        def submit() -> None:
            nonlocal batch, batch_bytes
            if batch:
                pending.append(rendering(batch))
                batch, batch_bytes = [], 0

        def take_first() -> Iterator[Rendered | Document]:
            first = pending.popleft()
            if isinstance(first, Document):
                yield first
                return
            future, documents = first
            try:
                rendered = rendered_batch(future.result())
            except BrokenProcessPool:
                rendered = each_alone(documents)
            yield from rendered

        def each_alone(documents: list[Document | InputError]) -> list[Rendered]:
            """A worker died (killed from outside, out of memory) while the pool had
            this batch: each of its documents is rendered again alone, by a process of
            its own, and one whose process dies again is an error; then the batches
            that were in the pool's hands go to a new pool."""
            nonlocal pool
            wait([item[0] for item in pending if not isinstance(item, Document)])
            close(pool)
            rendered: list[Rendered] = []
            alone = new_pool(1)
            try:
                for document in documents:
                    try:
                        rendered += rendered_batch(alone.submit(
                            render_batch, [document], settings, format, named, folder).result())
                    except BrokenProcessPool:
                        name = document.name if isinstance(document, Document) else None
                        rendered.append((b"", f"{where(name)}: its --jobs worker process "
                                              "ended abruptly (killed, or out of memory), "
                                              "also with the document alone: not chunked"))
                        close(alone)
                        alone = new_pool(1)
            finally:
                close(alone)
            pool = new_pool(jobs)
            for index, item in enumerate(pending):
                if not isinstance(item, Document) \
                        and isinstance(item[0].exception(), BrokenProcessPool):
                    pending[index] = rendering(item[1])
            return rendered

        def until_input(paused: Paused) -> Iterator[Rendered | Document]:
            """The pending output, in order, as it is ready, until the input has more
            (the workers keep the rest meanwhile)."""
            submit()
            import select  # here: only --jobs on paused input waits on descriptors

            ready = select.poll()  # poll, unlike select, takes any descriptor number
            ready.register(paused.fd, select.POLLIN)
            ready.register(wake.fd, select.POLLIN)
            while pending:
                first = pending[0]
                if isinstance(first, Document) or first[0].done():
                    yield from take_first()
                    continue
                first[0].add_done_callback(wake.set)
                woken = ready.poll()
                wake.clear()
                if any(fd == paused.fd for fd, _ in woken):
                    return

        try:
            for item in items:
                if isinstance(item, Paused):
                    yield from until_input(item)
                elif _is_local(item):
                    submit()
                    pending.append(item)
                    if not isinstance(item.blocks, FileBlocks):
                        while pending:  # its text is in memory already: read no further
                            yield from take_first()
                else:
                    batch.append(item)
                    batch_bytes += (item.size or 0) if isinstance(item, Document) else 0
                    if batch_bytes >= BATCH_BYTES or len(batch) >= BATCH_DOCUMENTS:
                        submit()
                while len(pending) > 2 * jobs:
                    yield from take_first()
            submit()
            while pending:
                yield from take_first()
        except BaseException:
            # Ctrl-C (a terminal sends it to the workers too), or the output failed: the
            # work in hand is abandoned, and each worker's extraction in progress ends at
            # once, so that the shutdown does not wait for --extract-timeout.
            kill_workers(signal.SIGINT)
            raise
        finally:
            close(pool)
            if folder is not None:  # a killed worker's answer, if any
                shutil.rmtree(folder, ignore_errors=True)
            restore_handlers()


class _Wake:
    """A pipe that wakes ``select`` from another thread (a future's done callback)."""

    def __init__(self) -> None:
        self.fd, self._write = os.pipe()
        os.set_blocking(self.fd, False)
        os.set_blocking(self._write, False)

    def set(self, _future: object = None) -> None:
        try:
            os.write(self._write, b".")
        except BlockingIOError:  # full: it wakes already
            pass

    def clear(self) -> None:
        try:
            while os.read(self.fd, 4096):
                pass
        except BlockingIOError:
            pass

    def __enter__(self) -> _Wake:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
        os.close(self._write)


def _worker_start(parent: int) -> None:
    """Ctrl-C is the main process's (``parent``) to handle; workers are shut down by
    it, or die with it. In a worker it ends only the extraction in progress and those
    after it, which the shutdown would otherwise wait for."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # until its own handler is in
    from chunkd.inputs.worker import interrupt_extractions
    from chunkd.processes.signals import die_with_parent

    signal.signal(signal.SIGINT, interrupt_extractions)
    die_with_parent(parent)


# --- the command -------------------------------------------------------------------------

class Job(NamedTuple):
    """The filter's options, resolved once: what to read, how to cut, what to write."""

    files: list[str]
    input: str
    format: str
    jobs: int
    quiet: bool
    settings: Settings
    #: What a PDF, HTML or DOCX document's extraction may take.
    limits: Limits
    #: The Parquet side (``--input parquet``, ``--format parquet``), when used.
    parquet: ParquetFiles | None
    #: Whether workers render whole documents (``--jobs``).
    parallel: bool


def run(job: Job, out: Output) -> int:
    settings = job.settings
    writer: Writer | ParquetWriter | VectorWriter | LateWriter
    named = job.input == "ndjson" or bool(job.files) and job.files != ["-"]
    progress = Progress(enabled=not job.quiet)
    if progress.enabled and job.input != "parquet":
        progress.expect(input_size(job.files))
    status = EXIT_OK
    writer = (job.parquet.writer(settings, named) if job.parquet and job.format == "parquet"
              else make_writer(job.format, out, named, settings.about()))
    if settings[LATE]:  # records wait for their document's end
        from chunkd.embeddings.late import loaded_late_model

        writer = LateWriter(writer, loaded_late_model(embedder(settings)),
                            lambda name, error: report(InputError(f"{where(name)}: {error}")))
    elif settings[VECTORS]:  # records wait for a batch of chunks across documents
        writer = VectorWriter(writer, embedder(settings), batch_size(settings),
                              lambda name, error: report(InputError(f"{where(name)}: {error}")))
    start_run()  # what an LLM strategy says is this run's
    pipeline = Pipeline(settings)
    contexts = None
    if settings[CONTEXT]:
        from chunkd.llm.context import contexts as made_contexts

        contexts = made_contexts(settings)

    def report(error: InputError | str) -> None:
        nonlocal status
        out.flush()
        progress.close()
        print(f"chunkd: {error}", file=sys.stderr, flush=True)
        status = EXIT_FAILED

    def note(line: str) -> None:
        out.flush()
        progress.close()
        print(f"chunkd: {line}", file=sys.stderr, flush=True)

    def stream(document: Document | InputError) -> None:
        try:
            if isinstance(document, InputError):
                raise document
            write_document(document, pipeline, writer, out.flush, contexts, note)
        except InputError as error:
            report(error)
        if isinstance(document, Document):  # a strategy that asks the LLM: its lines
            for line in document_lines():
                note(f"{where(document.name)}: {line}")

    items: Iterator[Document | InputError | Paused]
    if job.parquet and job.input == "parquet":
        parquet = job.parquet
        items = (item for path in job.files for item in parquet.documents(path))
    else:
        items = documents(job.files, job.input, settings.errors, progress.add,
                          workers_read_files=job.parallel,
                          pauses=job.parallel or isinstance(writer, (VectorWriter, LateWriter)),
                          open_file=file_opener(job.input, job.limits))
    if settings.strategy == "semantic" and not job.parallel:
        items = read_ahead(items, settings)
    if isinstance(writer, LateWriter):
        items = writer.whole_texts(items)
    if job.parallel:
        # Workers read the files, so progress counts a file's size when its output is
        # written (NDJSON lines are read here, and counted as read); in_order gives one
        # output per item, in order.
        sizes: deque[int] = deque()

        def noted(items: Iterator[Document | InputError | Paused]
                  ) -> Iterator[Document | InputError | Paused]:
            for item in items:
                if isinstance(item, Paused):  # no output of its own
                    yield item
                    continue
                size = (item.size if job.input not in ("ndjson", "parquet")
                        and isinstance(item, Document) else None)
                sizes.append(size or 0)
                yield item

        for item in in_order(noted(items), job.jobs, settings, job.format, named):
            if isinstance(item, Document):
                stream(item)
            else:
                output, error = item
                out.write(output)
                out.flush()
                if error:
                    report(error)
            progress.advance(sizes.popleft())
    else:
        for document in items:
            if not isinstance(document, Paused):
                stream(document)
            elif isinstance(writer, (VectorWriter, LateWriter)):  # written before a wait
                writer.flush()
                out.flush()
    out.flush()
    writer.close(failed=status != EXIT_OK)
    progress.close()
    if contexts is not None:  # what the contexts cost, said
        note(contexts.cost.line(contexts.client.endpoint.shown))
    for line in run_lines():  # what a strategy's questions to the LLM cost
        note(line)
    return status


def main(argv: list[str]) -> int:
    """Run the filter; returns the exit status."""
    parser = build_parser()
    with supporting("context", "late"):
        args, settings = parse_with_settings(parser, argv)
    if not 1 <= args.jobs <= 1024:
        parser.error(f"--jobs must be from 1 to 1024, got {args.jobs}")
    parquet = None
    if "parquet" in (args.input, args.format) or args.output or args.text_column or args.id_column:
        try:
            from chunkd.outputs.parquet import ParquetFiles
        except ImportError as error:
            parser.error(str(error))
        parquet = ParquetFiles.setup(parser, args, settings.errors)
    # Workers render whole documents, so stdin (a stream) is never one of theirs; and
    # a Parquet file is written by one process.
    many = (args.input in ("ndjson", "parquet")
            or (len(args.files) > 1 and "-" not in args.files))
    job = Job(args.files, args.input, args.format, args.jobs, args.quiet, settings,
              check_limits(parser, args.max_bytes, args.extract_timeout, args.ocr), parquet,
              # A model is loaded once, here, and given texts of many documents at once
              # (it uses every core, or the GPU, by itself): no workers that each load it.
              # With --context or a strategy that asks the LLM, one process too: the
              # LLM's requests are bounded in flight (--llm-concurrency), not
              # multiplied by the workers.
              parallel=(many and args.jobs > 1 and args.format != "parquet"
                        and not takes_model(settings._values) and not settings[CONTEXT]
                        and settings.strategy not in STRATEGIES_ASKING))
    if args.format == "parquet" and sys.stdout is None:  # started with >&-: not needed
        sys.stdout = open(os.devnull, "w")
    with supporting("context", "late"):  # settings made again as it runs keep them
        return run_writing("chunkd", lambda out: run(job, out))
