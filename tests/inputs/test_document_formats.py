"""The formats' registry (a format is one declaration that every front end reads) and the
long-lived extraction worker (its bounds, and a fresh worker after a fault).

A toy format, declared here, is told, extracted and chunked by the filter like the
built-in ones; a "fault" format whose documents hang, crash or eat memory on demand
drives the worker's bounds with real processes."""

from __future__ import annotations

import os
import signal
import time

import orjson
import pytest

from command import HANG

from chunkd.cli import filter as chunkd_filter
from chunkd.inputs import (FORMATS, Extracted, Format, Limits, default_include, detect,
                              extract, kinds, labels, register, worker)
from chunkd.inputs.readers import InputError

TOY_HEAD = b"TOY1\n"


def toy_parse(data: bytes, limits: Limits) -> Extracted:
    """A toy document: its head (or none), then sections separated by ``;``; each becomes a
    Markdown heading and its paragraph."""
    sections = data.removeprefix(TOY_HEAD).decode("utf-8").split(";")
    text = "\n\n".join(f"# {title}\n\n{body}" for title, body in
                       (section.split("=", 1) for section in sections))
    return Extracted(text, warnings=("a toy document",))


@pytest.fixture
def toy():
    form = register(Format(name="toy", label="TOY", media_type="text/x-toy",
                           extensions=(".toy",), library="json", markdown=True,
                           include=("*.toy",),
                           sniff=lambda head, whole: head.startswith(TOY_HEAD),
                           parse=toy_parse))
    yield form
    del FORMATS["toy"]


def run_filter(capfd, *argv: str) -> tuple[int, list[dict], str]:
    status = chunkd_filter.main(list(argv))
    out, err = capfd.readouterr()
    return status, [orjson.loads(line) for line in out.splitlines()], err


def test_a_format_registered_in_one_module_is_told_extracted_and_chunked_by_the_filter(
        toy, tmp_path, capfd):
    assert "toy" in kinds() and labels().endswith("or TOY") and "*.toy" in default_include()
    by_content = tmp_path / "notes.bin"  # told by its head, whatever its name
    by_content.write_bytes(TOY_HEAD + b"Alpha=first section;Beta=second section")
    by_name = tmp_path / "named.toy"  # no head: told by its extension
    by_name.write_bytes(b"Gamma=third")
    assert detect(by_content.read_bytes(), str(by_content), None) == "toy"
    assert detect(b"Gamma=third", str(by_name), None) == "toy"

    status, records, err = run_filter(capfd, "--strategy", "auto", "--chars", "40",
                                      "--jobs", "1", str(by_content))
    assert status == 0
    # Its text is the parser's, and the auto strategy took markdown (heading paths).
    assert [record["text"] for record in records] == [
        "# Alpha\n\nfirst section", "# Beta\n\nsecond section"]
    assert [record["headings"] for record in records] == [["Alpha"], ["Beta"]]
    assert err == f"chunkd: {by_content}: a toy document\n"

    status, records, _ = run_filter(capfd, "--input", "toy", "--format", "json", "--jobs", "1",
                                    str(by_name))
    assert status == 0
    [result] = records
    assert result["text"] == "# Gamma\n\nthird" and result["warnings"] == ["a toy document"]
    # The filter's help names it among the kinds --input takes.
    with pytest.raises(SystemExit):
        chunkd_filter.main(["--help"])
    assert "each FILE is a PDF, HTML, DOCX, TOY or text document" in " ".join(
        capfd.readouterr().out.split())


def test_without_the_format_the_same_file_is_text(tmp_path, capfd):
    path = tmp_path / "notes.bin"
    path.write_bytes(TOY_HEAD + b"Alpha=first")
    status, records, _ = run_filter(capfd, "--jobs", "1", str(path))
    assert status == 0 and [record["text"] for record in records] == ["TOY1\nAlpha=first"]


# --- the worker ---------------------------------------------------------------------------

FAULT_HEAD = b"FAULT\n"


def fault_parse(data: bytes, limits: Limits) -> Extracted:
    """What the document asks: hang, crash, take memory without end, or give the
    worker's process id."""
    command = data[len(FAULT_HEAD):].decode()
    if command == "hang":
        time.sleep(3600)
    elif command == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif command == "memory":
        hoard = []
        while True:  # 64 MiB at a time, until the worker's bound stops it
            hoard.append(bytes(64 * 2**20))
    elif command == "big":
        return Extracted("x" * (limits.max_bytes + 1))
    return Extracted(str(os.getpid()))


@pytest.fixture
def faults():
    register(Format(name="fault", label="FAULT", media_type="application/x-fault",
                    extensions=(), library="json",
                    sniff=lambda head, whole: head.startswith(FAULT_HEAD), parse=fault_parse))
    yield
    del FORMATS["fault"]


def worker_pid(limits: Limits = Limits()) -> int:
    return int(extract(FAULT_HEAD + b"pid", "fault", "ok.fault", limits).text)


def gone(pid: int, wait: float = 5.0) -> bool:
    """Whether process ``pid`` has ended (within ``wait`` seconds): no such process, or a
    zombie that a reaper other than this process has yet to collect."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rpartition(")")[2].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_one_worker_reads_document_after_document(faults):
    first = worker_pid()
    assert first != os.getpid() and all(worker_pid() == first for _ in range(5))


def test_a_hung_a_crashing_and_a_memory_hungry_document_in_a_row_leave_the_next_unaffected(
        faults):
    limits = Limits(seconds=2)
    started = worker_pid(limits)
    failures = {}
    for fault in ("hang", "crash", "memory", "big"):
        begun = time.monotonic()
        with pytest.raises(InputError) as raised:
            extract(FAULT_HEAD + fault.encode(), "fault", f"{fault}.fault", limits)
        failures[fault] = (str(raised.value), time.monotonic() - begun)
    assert failures["hang"][0] == ("hang.fault: extracting its text took more than 2 s "
                                   "(--extract-timeout)")
    assert 2 <= failures["hang"][1] < 5  # the time bound: killed at the limit
    assert failures["crash"][0] == ("crash.fault: extracting its text failed: its process "
                                    "ended with signal SIGSEGV")
    assert failures["memory"][0] == ("memory.fault: extracting its text needs more than the "
                                     "2 GiB of memory it may take")
    assert failures["memory"][1] < 5
    assert failures["big"][0] == (f"big.fault: its text is {Limits().max_bytes + 1} bytes, "
                                  f"over --max-bytes {Limits().max_bytes}")
    # Each fault's worker was ended and reaped; a fresh one reads the next document.
    after = worker_pid(limits)
    assert after != started and gone(started)
    assert worker_pid(limits) == after


def test_a_worker_killed_while_idle_is_replaced_at_the_next_document(faults):
    first = worker_pid()
    os.kill(first, signal.SIGKILL)
    assert gone(first)
    second = worker_pid()
    assert second != first and worker_pid() == second


def test_a_worker_that_ended_while_idle_but_is_not_yet_reapable_costs_no_document(
        faults, monkeypatch):
    """The race of the test above: a killed worker the kernel does not yet report ended
    (it is still exiting when checked) is found out at the next document, which a
    fresh worker then reads."""
    first = worker_pid()
    reaped = worker._reaped
    monkeypatch.setattr(worker, "_reaped", lambda pid, options: (
        (0, 0) if options == os.WNOHANG else reaped(pid, options)))
    os.kill(first, signal.SIGKILL)
    assert gone(first)
    second = worker_pid()
    assert second != first and worker_pid() == second


def test_a_document_that_crashes_a_worker_is_read_once_more_by_a_fresh_one_then_failed(
        faults, monkeypatch):
    """A reused worker's end is not taken for the document's fault at once (the worker
    may have been killed before it): a fresh worker reads it again, and its end is."""
    first = worker_pid()
    started = []
    real = worker.Worker.__init__

    def counted(self):
        real(self)
        started.append(self.pid)
    monkeypatch.setattr(worker.Worker, "__init__", counted)
    with pytest.raises(InputError, match="its process ended with signal SIGSEGV$"):
        extract(FAULT_HEAD + b"crash", "fault", "crash.fault", Limits())
    assert len(started) == 1 and first not in started and gone(first)


def test_a_fresh_worker_that_ends_before_its_first_document_fails_that_document(
        faults, monkeypatch):
    """The retry above is for a worker that read documents before; one that cannot take
    even its first document is not started again and again."""
    started = []
    monkeypatch.setattr(worker, "_serve", lambda requests, answers: os._exit(3))
    monkeypatch.setattr(worker.Worker, "usable", lambda self, form: False)
    real = worker.Worker.__init__

    def counted(self):
        real(self)
        started.append(self.pid)
        assert gone(self.pid)
    monkeypatch.setattr(worker.Worker, "__init__", counted)
    with pytest.raises(InputError, match="its process ended with status 3"):
        worker_pid()
    assert len(started) == 1


def test_the_worker_is_replaced_after_its_share_of_documents(faults, monkeypatch):
    monkeypatch.setattr(worker, "MOST_DOCUMENTS", 3)
    pids = [worker_pid() for _ in range(7)]
    assert len(set(pids[0:3])) == 1 and len(set(pids[3:6])) == 1 and pids[6] not in pids[:6]
    assert pids[0] != pids[3] and gone(pids[0]) and gone(pids[3])


def test_a_forked_process_starts_its_own_worker(faults):
    parents = worker_pid()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.write(write, str(worker_pid()).encode())
        finally:
            os._exit(0)
    os.close(write)
    childs = int(os.read(read, 100))
    os.close(read)
    os.waitpid(child, 0)
    assert childs not in (parents, child) and gone(childs)
    assert worker_pid() == parents  # the parent's own is untouched


#: A library that starts a thread again in every fork (as LanceDB restarts its event
#: loop's), on a descriptor of its own that the worker closes: the thread fails.
THREAD_IN_EVERY_FORK = """
import os, sys, threading, time
from chunkd.inputs import Limits, extract

def poll(fd):
    while True:
        os.fstat(fd)
        time.sleep(0.005)

def restart():
    read, _ = os.pipe()
    threading.Thread(target=poll, args=(read,), daemon=True).start()

os.register_at_fork(after_in_child=restart)
text = extract(b"<p>one paragraph</p>", "html", "page.html", Limits()).text
time.sleep(0.3)  # the worker lives as long as this process
print(text)
"""


def test_a_thread_that_a_library_starts_in_the_worker_says_nothing_when_it_fails():
    """The worker keeps none of the parent's descriptors, and so none of those a thread
    started in its fork works with; that thread's failure is not on stderr."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", THREAD_IN_EVERY_FORK], capture_output=True,
                          timeout=HANG)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"one paragraph\n", b"")


# --- DOCX paragraphs read from the XML --------------------------------------------------

def test_docx_paragraph_text_is_python_docx_s_on_every_paragraph_and_cell():
    """The fast reading of a paragraph's text against python-docx's ``Paragraph.text``
    (the oracle), on the DOCX files LibreOffice makes from the corpus (links, code,
    tables) and on one with tabs, line, page and column breaks."""
    import io

    import docx
    from docx.enum.text import WD_BREAK
    from document_files import made_documents

    from chunkd.inputs.docx import paragraph_text

    made = docx.Document()
    paragraph = made.add_paragraph("one")
    run = paragraph.add_run("two")
    run.add_tab()
    run.add_text("three")
    for kind in (WD_BREAK.LINE, WD_BREAK.PAGE, WD_BREAK.COLUMN):
        run.add_break(kind)
        run.add_text("after")
    made.add_table(rows=2, cols=2).cell(1, 1).text = "cell\nlines"
    stream = io.BytesIO()
    made.save(stream)
    documents = [docx.Document(stream)] + [docx.Document(str(document.docx))
                                          for document in made_documents()]
    checked = 0
    for document in documents:
        paragraphs = list(document.paragraphs)
        for table in document.tables:
            for row in table.rows:
                for cell in row.cells:
                    paragraphs += cell.paragraphs
        for paragraph in paragraphs:
            assert paragraph_text(paragraph._p) == paragraph.text
            checked += bool(paragraph.text)
    assert checked > 500
