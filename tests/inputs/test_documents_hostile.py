"""Bad and hostile PDF, HTML and DOCX files: one line ``chunkd: FILE: WHAT``, exit status
1, the other files chunked, never a traceback; and in ``chunkd watch``, an error result
while the next file gets its result. The files are real tools' (LibreOffice, PDFium,
Python's zipfile), damaged or grown by the test."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import time
import zipfile

import orjson
import pytest

from command import HANG, chunkd_command, run_chunkd, with_faults
from document_files import encrypted_pdf, made_documents
from watching import results


@pytest.fixture(scope="module")
def made():
    return made_documents()


def one_error_and_the_good_file(path, good, *options: str) -> str:
    """Chunk ``path`` then ``good``: exit status 1, one stderr line about ``path``,
    the good file's chunks all there. Returns what the line says after the name."""
    done = run_chunkd("--format", "json", "-q", "--chars", "500", *options, str(path), str(good))
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert "Traceback" not in stderr
    [line] = stderr.splitlines()
    prefix = f"chunkd: {path}: "
    assert line.startswith(prefix), line
    documents = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [document["doc"] for document in documents] == [str(good)]
    assert documents[0]["chunks"]
    return line.removeprefix(prefix)


@pytest.mark.slow  # LibreOffice starts again to encrypt it
def test_an_encrypted_pdf_is_named_as_such(made, tmp_path):
    locked = encrypted_pdf(made[2].html, tmp_path)
    assert locked.read_bytes().startswith(b"%PDF-") and b"/Encrypt" in locked.read_bytes()
    reason = one_error_and_the_good_file(locked, made[2].docx)
    assert reason == "encrypted: it needs a password to be read"


def test_a_corrupt_pdf_and_a_truncated_one(made, tmp_path):
    data = made[0].pdf.read_bytes()
    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(data[:16] + bytes(range(256)) * (len(data) // 256))
    assert one_error_and_the_good_file(corrupt, made[1].html).startswith("not a readable PDF")
    # Cut in half: PDFium may rebuild what remains, or refuse it; either way no
    # traceback, and what it gives keeps its offsets.
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes(data[:len(data) // 2])
    done = run_chunkd("--format", "json", "-q", str(truncated), str(made[1].html))
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr.decode()
    assert len(done.stderr.splitlines()) == (done.returncode == 1)
    for document in map(orjson.loads, done.stdout.splitlines()):
        for chunk in document["chunks"]:
            assert document["text"][chunk["start"]:chunk["end"]] == chunk["text"]


def test_a_docx_zip_bomb_is_refused_before_it_expands(made, tmp_path):
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(made[0].docx) as real, \
            zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as out:
        for member in real.infolist():
            out.writestr(member, real.read(member))
        out.writestr("word/media/zeros.bin", bytes(64 * 2**20))
    assert bomb.stat().st_size < 2**20
    reason = one_error_and_the_good_file(bomb, made[1].pdf, "--max-bytes", str(2**20))
    assert reason.startswith("its parts would expand to ")
    assert "ZIP bomb" in reason


def test_files_over_max_bytes_and_a_zip_that_is_no_docx(made, tmp_path):
    page = tmp_path / "large.html"
    page.write_bytes(made[0].html.read_bytes() * 40)
    limit = page.stat().st_size - 1
    assert one_error_and_the_good_file(page, made[1].pdf, "--max-bytes", str(limit)) == \
        f"over --max-bytes {limit} bytes"
    archive = tmp_path / "not-word.docx"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        out.writestr("content.xml", "<a/>")
    archive.write_bytes(buffer.getvalue())
    assert one_error_and_the_good_file(archive, made[1].pdf) == \
        "not a DOCX: its ZIP archive holds no word/document.xml"


def test_kinds_are_told_by_content_before_their_names(made, tmp_path):
    disguised = {"pdf": tmp_path / "report.txt", "docx": tmp_path / "letter.bin",
                 "html": tmp_path / "page"}
    shutil.copy(made[2].pdf, disguised["pdf"])
    shutil.copy(made[2].docx, disguised["docx"])
    shutil.copy(made[2].html, disguised["html"])
    for kind, path in disguised.items():
        done = run_chunkd("extract", str(path))
        assert done.returncode == 0, done.stderr
        assert done.stdout == run_chunkd("extract", str(getattr(made[2], kind))).stdout
    text = tmp_path / "notes.md"
    text.write_text("# Notes\n\nplain <html> text", encoding="utf-8")
    assert run_chunkd("extract", str(text)).stdout == text.read_bytes()
    # Told: stdin is text unless --input says; a PDF given as text is not UTF-8.
    pdf = made[2].pdf.read_bytes()
    assert run_chunkd("extract", "--input", "pdf", "-", input=pdf).stdout == \
        run_chunkd("extract", str(made[2].pdf)).stdout
    as_text = run_chunkd("--input", "text", str(made[2].pdf))
    assert as_text.returncode == 1 and b"invalid UTF-8" in as_text.stderr


def test_a_text_that_quotes_the_pdf_header_is_not_a_pdf(made, tmp_path):
    """``%PDF-`` in the first KiB makes a PDF only after white space or bytes that are not
    text (as a reader finds it): a note or a page that quotes it was refused as "not a
    readable PDF"."""
    note = tmp_path / "notes.md"
    note.write_text("# PDF notes\n\nEvery PDF starts with %PDF-1.7 and binary bytes.\n")
    page = tmp_path / "page.html"
    page.write_text("<!doctype html><html><body><p>It starts with %PDF-1.7</p></body></html>")
    for path, text in ((note, note.read_bytes()), (page, b"It starts with %PDF-1.7")):
        done = run_chunkd("extract", str(path))
        assert (done.returncode, done.stderr, done.stdout) == (0, b"", text)
    pdf = made[2].pdf.read_bytes()
    for prefix in (b"\r\n \n", b"\x00\x07\xff junk\n"):   # still a PDF
        led = tmp_path / "led.bin"
        led.write_bytes(prefix + pdf)
        assert run_chunkd("extract", str(led)).stdout == \
            run_chunkd("extract", str(made[2].pdf)).stdout


@pytest.fixture(scope="module")
def many_pages(made, tmp_path_factory):
    """A PDF of 10,002 pages that PDFium itself makes from a LibreOffice PDF."""
    import pypdfium2 as pdfium

    source = pdfium.PdfDocument(str(made[2].pdf))
    copies = -(-10_000 // len(source))
    document = pdfium.PdfDocument.new()
    document.import_pages(source, list(range(len(source))) * copies)
    path = tmp_path_factory.mktemp("many") / "many.pdf"
    document.save(str(path))
    return path, len(document)


@pytest.mark.slow
def test_an_extraction_over_the_time_limit_is_killed_and_the_next_file_done(made, many_pages):
    path, _ = many_pages
    reason = one_error_and_the_good_file(path, made[1].html, "--extract-timeout", "1")
    assert reason == "extracting its text took more than 1 s (--extract-timeout)"


@pytest.mark.slow
def test_ten_thousand_pages_are_numbered_to_the_last(many_pages):
    path, count = many_pages
    # About 25 s alone; a machine loaded by other work may need more than the default
    # 60 s limit, which this test is not about.
    done = run_chunkd("--format", "json", "-q", "--chars", "4000", "--extract-timeout", "600",
                      str(path))
    assert done.returncode == 0, done.stderr
    [document] = map(orjson.loads, done.stdout.splitlines())
    assert len(document["page_starts"]) == count
    assert document["chunks"][-1]["pages"][1] == count
    assert document["chunks"][0]["pages"][0] == 1


@pytest.mark.slow
def test_the_daemon_gives_a_dropped_pdf_its_result_and_a_bad_one_an_error(made, inbox, tmp_path,
                                                                          watch):
    watcher = watch(inbox, "--chars", "400")
    watcher.started()
    locked = encrypted_pdf(made[0].html, tmp_path)
    for path in (locked, made[0].pdf, made[1].docx, made[2].html):
        staged = inbox / ("." + path.name)
        shutil.copy(path, staged)
        staged.rename(inbox / ("locked.pdf" if path == locked else path.name))
    wanted = {made[0].pdf.name, made[1].docx.name, made[2].html.name}
    watcher.wait_for(lambda: set(results(inbox)) == wanted
                     and (inbox / "locked.pdf.error.json").exists(), what="the results")
    error = orjson.loads((inbox / "locked.pdf.error.json").read_bytes())
    assert error["error"] == "encrypted: it needs a password to be read"
    found = results(inbox)
    for name, result in found.items():
        assert result["chunks"]
        for chunk in result["chunks"]:  # checkable from the result alone
            assert result["text"][chunk["start"]:chunk["end"]] == chunk["text"]
            assert ("pages" in chunk) == name.endswith(".pdf")
    # The same chunks as the filter's, and the restart finds every result current.
    for name, result in found.items():
        filtered = run_chunkd("--format", "json", "--chars", "400", "--ids", name, cwd=inbox)
        assert orjson.loads(filtered.stdout)["chunks"] == result["chunks"]
    assert watcher.stop() == 0
    again = watch(inbox, "--chars", "400", "-v")
    again.started()
    assert not again.processed()
    assert again.stop() == 0


def test_a_pipe_is_told_by_its_name_and_none_of_it_is_lost(made, tmp_path):
    import os
    import subprocess
    import threading

    from command import chunkd_command

    source = made[0].markdown.read_bytes()
    for name, data in (("piped.md", source), ("piped.pdf", made[2].pdf.read_bytes())):
        pipe = tmp_path / name
        os.mkfifo(pipe)
        writer = threading.Thread(target=pipe.write_bytes, args=(data,))
        writer.start()
        done = subprocess.run([chunkd_command(), "extract", str(pipe)], capture_output=True,
                              timeout=HANG)
        writer.join()
        assert done.returncode == 0, done.stderr
        expected = source if name.endswith(".md") else \
            run_chunkd("extract", str(made[2].pdf)).stdout
        assert done.stdout == expected


#: The size of the large HTML file the issue names among hostile files.
BIG_HTML_BYTES = 500 * 2**20


@pytest.fixture(scope="module")
def big_html(made, tmp_path_factory):
    """A real HTML page of 500 MiB: the markdown library's rendering of a corpus
    document, its body repeated, streamed to disk (not a sparse file)."""
    from document_files import to_html

    page = to_html(made[2].markdown.read_text(encoding="utf-8"))
    head, body = page.split("<body>", 1)
    body = body.rsplit("</body>", 1)[0].encode()
    path = tmp_path_factory.mktemp("big") / "big.html"
    with open(path, "wb") as stream:
        stream.write(head.encode() + b"<body>\n")
        while stream.tell() < BIG_HTML_BYTES:
            stream.write(body)
        stream.write(b"</body></html>\n")
    return path


def measured_chunkd(*args: str) -> tuple[int, list[dict], str, int]:
    """The installed chunkd's exit status, ``--format json`` documents, stderr and peak
    RSS in MB (its extractions' processes included)."""
    import subprocess
    import sys

    from command import chunkd_command
    from memory import MEASURE

    done = subprocess.run([sys.executable, "-c", MEASURE, chunkd_command(), "--format", "json",
                           "-q", "--chars", "500", *args], capture_output=True, timeout=600)
    *stderr, peak = done.stderr.decode().splitlines()
    return (done.returncode, [orjson.loads(line) for line in done.stdout.splitlines()],
            "\n".join(stderr), int(peak))


@pytest.mark.slow  # writes 500 MiB; about 20 s, most of it the raised limit's extraction
def test_an_html_file_of_500_mb_is_refused_in_bounded_memory(made, big_html):
    """Under the default --max-bytes it is refused after reading at most that much;
    with the limit raised past it, the extraction's memory bound (2 GiB) ends it, long
    before Lexbor's tree of it (about ten times the file) is built. One line each, the
    next file chunked."""
    size = big_html.stat().st_size
    assert size >= BIG_HTML_BYTES and big_html.read_bytes()[:15] == b"<!DOCTYPE html>"
    good = made[1].html
    for options, reason, bound in (
            ((), "over --max-bytes 67108864 bytes", 200),
            (("--max-bytes", str(size + 1)),
             "extracting its text needs more than the 2 GiB of memory it may take",
             # the file read (and copied once), and the 2 GiB the extraction may add
             2 * size // 2**20 + 2048 + 300)):
        status, documents, stderr, peak = measured_chunkd(*options, str(big_html), str(good))
        assert (status, stderr) == (1, f"chunkd: {big_html}: {reason}")
        assert [document["doc"] for document in documents] == [str(good)]
        assert documents[0]["chunks"]
        assert peak < bound, (options, peak)


def test_a_text_too_large_to_encode_is_said_to_outgrow_the_memory_bound(made, tmp_path):
    """A text that the extraction made within its memory bound but cannot encode (a
    fault injected into chunkd: its encoding raises MemoryError) is said as such, not
    as a process that "ended with status 0" (the MemoryError came out past the parse's
    handler and ended the worker)."""
    page = tmp_path / "page.html"
    page.write_text("<html><body><p>words</p></body></html>")
    env = with_faults({"text_past_memory": True})
    done = subprocess.run([chunkd_command(), "--chars", "500", str(page), str(made[1].pdf)],
                          capture_output=True, env=env, timeout=HANG)
    assert (done.returncode, done.stderr.decode()) == (1, f"chunkd: {page}: extracting its "
                                                          "text needs more than the 2 GiB of "
                                                          "memory it may take\n")
    assert [orjson.loads(line)["doc"] for line in done.stdout.splitlines()][0] == \
        str(made[1].pdf)


def test_lists_nested_thousands_deep_stay_small(made, tmp_path):
    """270 KB of lists nested 30,000 deep: indented to the ninth level only, their text is
    about as large as the file (two spaces a level made it grow with the square of the
    depth, past the extraction's 2 GiB)."""
    nested = tmp_path / "nested.html"
    nested.write_text("<html><body>" + "<ul><li>x" * 30_000 + "</body></html>")
    done = run_chunkd("extract", str(nested))
    assert (done.returncode, done.stderr) == (0, b"")
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 30_000 and set(lines[8:]) == {" " * 16 + "- x"}


@pytest.mark.slow
def test_the_daemon_refuses_an_html_file_of_500_mb_and_goes_on(made, big_html, inbox, watch):
    watcher = watch(inbox, "--chars", "400")
    watcher.started()
    os.link(big_html, inbox / "big.html")  # a second name, not a copy of 500 MiB
    shutil.copy(made[1].html, inbox / ".next.html")
    (inbox / ".next.html").rename(inbox / "next.html")
    watcher.wait_for(lambda: (inbox / "big.html.error.json").exists()
                     and set(results(inbox)) == {"next.html"}, what="the results")
    error = orjson.loads((inbox / "big.html.error.json").read_bytes())
    assert error["error"] == (f"file is {big_html.stat().st_size} bytes, over --max-bytes "
                              f"{64 * 2**20}; raise the limit to chunk it")
    assert results(inbox)["next.html"]["chunks"]
    peaks = {pid: peak_rss_kb(pid) for pid in processes_of(watcher.process.pid)}
    assert len(peaks) > 1 and max(peaks.values()) < 200 * 1024, peaks  # the daemon, its workers
    assert watcher.stop() == 0


def processes_of(pid: int) -> list[int]:
    """A process and its descendants, by Linux's /proc."""
    found = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as children:
            for child in children.read().split():
                found += processes_of(int(child))
    return found


def peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("VmHWM:")).split()[1])


def depths(pid: int, level: int = 1) -> dict[int, int]:
    """A process and its descendants, each with its depth (``pid`` is 1), by /proc."""
    found = {pid: level}
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as children:
            for child in children.read().split():
                found.update(depths(int(child), level + 1))
    return found


def cpu_seconds(pid: int) -> float:
    """The user and system CPU time process ``pid`` has taken (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow  # seconds: the extraction runs before the Ctrl-C
@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("group", [True, False], ids=["terminal", "main-process"])
def test_ctrl_c_ends_the_filter_at_once_while_a_document_is_extracted(tmp_path, jobs, group):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it, or to the chunkd
    process alone) while a hostile HTML file's extraction runs: status 130 within about
    a second, not when --extract-timeout is up, and no process of the run is left."""
    (tmp_path / "good.txt").write_text("hi\n")
    (tmp_path / "good.html").write_text("<html><body><p>ok</p></body></html>")
    (tmp_path / "deep.html").write_text("<html><body>" + "<ul><li>" * 100_000 + "x</body></html>")
    process = subprocess.Popen(
        [chunkd_command(), "--jobs", jobs, "--extract-timeout", "300",
         *(str(tmp_path / name) for name in ("good.txt", "deep.html", "good.html"))],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        # The extraction worker (beneath a --jobs worker, with --jobs 2) busy for a
        # while: the deep file's, not good.html's (milliseconds).
        depth = 2 if jobs == "1" else 3
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            seen = depths(process.pid)
            extracting = [pid for pid, level in seen.items() if level == depth]
            if extracting and cpu_seconds(extracting[0]) > 1.0:
                break
            assert process.poll() is None, process.stderr.read()
            time.sleep(0.05)
        else:
            pytest.fail("no extraction worker took a second of CPU")
        interrupted = time.monotonic()
        if group:
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.send_signal(signal.SIGINT)
        status = process.wait(timeout=HANG)
        elapsed = time.monotonic() - interrupted
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert (status, process.stderr.read()) == (130, b"")
    assert elapsed < 10, elapsed  # not the extraction's own end
    # Each process was reaped by its parent before that ended: none is left, not
    # even a zombie for the system to collect.
    assert [pid for pid in seen if os.path.exists(f"/proc/{pid}")] == []

