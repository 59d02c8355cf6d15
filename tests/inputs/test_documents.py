"""PDF, HTML and DOCX input through the installed ``chunkd``, on files real tools made
from the shared corpus (``document_files``): pages against poppler's ``pdftotext``,
headings against the source Markdown's, offsets against ``chunkd extract``'s text."""

from __future__ import annotations

import json
import re
import shutil

import orjson
import pytest

from command import ndjson, run_chunkd
from document_files import (heading_paths, made_documents, poppler_pages, source_headings,
                            squeezed)

#: Every built-in strategy and a size it takes.
STRATEGIES = (("recursive", "--chars", "400"), ("recursive", "--tokens", "80"),
              ("markdown", "--chars", "500"), ("sections", "--size", "2"),
              ("sentences", "--size", "3"), ("words", "--size", "40"),
              ("graphemes", "--size", "300"))


@pytest.fixture(scope="module")
def made():
    return made_documents()


def json_documents(*args: str) -> list[dict]:
    """``chunkd --format json ARGS``: one document a line."""
    done = run_chunkd("--format", "json", "-q", *args)
    assert done.returncode == 0, done.stderr.decode()
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def extracted(path) -> str:
    done = run_chunkd("extract", str(path))
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode("utf-8")


def on(line: str, pages: str) -> bool:
    """Whether a line of a chunk is in a stretch of poppler's pages' text (squeezed):
    whole, or word by word, words as either tool gives them (white space and hyphens
    apart). Two extractors may read a table's cells in other orders, and one may
    break a cell's word where the other does not (PDFium's "Architecture-dependent",
    poppler's "Architecture-" and "dependent" lines apart, as the fonts set them)."""
    return squeezed(line) in pages or all(word in pages for word in WORD_BREAK.split(line)
                                          if word)


#: What parts words as both tools give them: white space, hyphens, soft hyphens.
WORD_BREAK = re.compile(r"[\s\-\u00ad]+")


def placed(chunk: dict, pages: list[str]) -> bool:
    """Whether a chunk is on the pages it names (poppler's, squeezed): every line on
    them, its first line on its first page and its last on its last (no page named
    that holds none of it)."""
    first, last = chunk["pages"]
    lines = [line for line in chunk["text"].splitlines() if squeezed(line)]
    return (all(on(line, "".join(pages[first - 1:last])) for line in lines)
            and on(lines[0], pages[first - 1]) and on(lines[-1], pages[last - 1]))


def test_every_pdf_chunk_is_on_the_pages_it_names_and_starts_and_ends_there(made):
    spanning = misplaced = elsewhere = 0
    for document in made:
        pages = [squeezed(page) for page in poppler_pages(document.pdf)]
        [result] = json_documents("--chars", "300", str(document.pdf))
        assert len(result["page_starts"]) == len(pages)
        assert result["chunks"], document.pdf.name
        for chunk in result["chunks"]:
            first, last = chunk["pages"]
            assert 1 <= first <= last <= len(pages)
            assert placed(chunk, pages), (document.pdf.name, chunk)
            spanning += first < last
            # The same chunk said to be on another page (one it does not touch) fails
            # the check: words alone still tell pages apart.
            other = next((n for n in (last + 1, first - 1) if 1 <= n <= len(pages)), None)
            if other is not None:
                elsewhere += 1
                misplaced += placed({**chunk, "pages": [other, other]}, pages)
    assert spanning, "some chunk must cross a page break for the test to mean anything"
    assert elsewhere > 100 and misplaced <= elsewhere // 50, (misplaced, elsewhere)


def test_a_chunk_across_a_page_break_names_both_pages(made):
    document = made[0]
    [result] = json_documents("--chars", "2000", str(document.pdf))
    text, starts = result["text"], result["page_starts"]
    for chunk in result["chunks"]:
        first, last = chunk["pages"]
        inside = [n for n, start in enumerate(starts, 1)
                  if chunk["start"] < start < chunk["end"]]
        # A page starting inside the chunk, after some of its text: both pages named.
        expected_last = max([first, *inside])
        assert last == expected_last, chunk
        assert text[chunk["start"]:chunk["end"]] == chunk["text"]


@pytest.mark.slow
@pytest.mark.parametrize("strategy, unit, size", STRATEGIES)
def test_offsets_are_exact_against_chunkd_extract_for_every_strategy(made, strategy, unit, size):
    for document in made[2:4]:
        for path in (document.pdf, document.html, document.docx):
            text = extracted(path)
            [result] = json_documents("--strategy", strategy, unit, size, str(path))
            assert result["text"] == text
            assert result["chunks"], path.name
            for chunk in result["chunks"]:
                assert text[chunk["start"]:chunk["end"]] == chunk["text"], (path.name, chunk)
                assert ("pages" in chunk) == (path.suffix == ".pdf")


def test_the_ndjson_records_are_the_json_documents_chunks(made):
    document = made[3]
    done = run_chunkd("--chars", "300", "--count-tokens", "-q", str(document.pdf),
                      str(document.docx))
    assert done.returncode == 0, done.stderr.decode()
    records = [orjson.loads(line) for line in done.stdout.splitlines()]
    documents = json_documents("--chars", "300", "--count-tokens", str(document.pdf),
                               str(document.docx))
    assert records == [{"doc": result["doc"], **chunk} for result in documents
                       for chunk in result["chunks"]]
    assert all("tokens" in record for record in records)


def heading_lines(text: str) -> list[tuple[int, str]]:
    """The ``#`` lines of a Markdown text outside its fenced code, (level, text)."""
    found, fence = [], None
    for line in text.splitlines():
        opening = re.match(r"(`{3,})", line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None and (match := re.fullmatch(r"(#{1,6}) (.*)", line)):
            found.append((len(match.group(1)), match.group(2)))
    return found


@pytest.mark.parametrize("kind", ["html", "docx"])
def test_headings_of_html_and_docx_chunks_are_the_source_markdowns(made, kind):
    for document in made:
        headings = source_headings(document.markdown.read_text(encoding="utf-8"))
        assert headings, document.stem
        path = getattr(document, kind)
        text = extracted(path)
        assert heading_lines(text) == headings, document.stem
        paths = heading_paths(headings)
        [result] = json_documents("--strategy", "markdown", "--chars", "600", str(path))
        seen = {tuple(chunk["headings"]) for chunk in result["chunks"]}
        assert seen <= paths, document.stem
        assert len(seen) > len(headings) // 2, document.stem  # most sections have chunks


def test_html_tables_become_pipe_rows_under_a_header_and_scripts_are_dropped(made):
    document = next(d for d in made if d.stem == "src_ch03-02-data-types")
    text = extracted(document.html)
    source = document.markdown.read_text(encoding="utf-8")
    assert "document.title" not in text and "margin" not in text  # script, style
    source_rows = [line for line in source.splitlines() if line.startswith("|")]
    assert source_rows
    header = [cell.strip() for cell in source_rows[0].strip("|").split("|")]
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert [cell.strip() for cell in rows[0].strip("|").split("|")] == \
        [re.sub(r"[`*]", "", cell) for cell in header]
    assert set(rows[1].replace(" ", "")) == {"|", "-"}


def test_the_auto_strategy_chooses_per_document(made, tmp_path):
    document = made[2]
    plain = tmp_path / "notes.txt"
    plain.write_text(document.markdown.read_text(encoding="utf-8"), encoding="utf-8")
    source = tmp_path / "tool.py"  # the code strategy's; Ruby has no grammar there
    source.write_text("import os\n\n\ndef here():\n    return os.getcwd()\n" * 40)
    ruby = tmp_path / "tool.rb"
    ruby.write_text(source.read_text())
    paths = [document.markdown, document.html, document.docx, document.pdf, plain, source, ruby]
    # One overlap for all: each strategy's default differs.
    chosen = json_documents("--strategy", "auto", "--chars", "400", "--overlap", "40",
                            *map(str, paths))
    expected = ["markdown", "markdown", "markdown", "recursive", "recursive", "code",
                "recursive"]
    for path, strategy, result in zip(paths, expected, chosen, strict=True):
        [alone] = json_documents("--strategy", strategy, "--chars", "400", "--overlap", "40",
                                 str(path))
        assert result["chunks"] == alone["chunks"], (path.name, strategy)
    assert chosen[0]["chunks"] != chosen[4]["chunks"]  # the same text, two strategies
    assert chosen[5]["chunks"] != chosen[6]["chunks"]
    # embed_text: the markdown strategy's own (fitted to the size) for its documents.
    for path in paths[:3]:
        [auto] = json_documents("--strategy", "auto", "--embed-text", "--chars", "300", str(path))
        [alone] = json_documents("--strategy", "markdown", "--embed-text", "--chars", "300",
                                 str(path))
        assert auto["chunks"] == alone["chunks"], path.name


def test_the_preview_of_a_pdf_holds_the_filters_records_with_pages(made, tmp_path):
    document = made[2]
    page = tmp_path / "report.html"
    done = run_chunkd("preview", str(document.pdf), "--chars", "500", "-o", str(page))
    assert (done.returncode, done.stderr) == (0, b"")
    data = json.loads(re.search(r'<script id="report" type="application/json">(.*?)</script>',
                                page.read_text(encoding="utf-8"), re.S).group(1))
    expected = run_chunkd("--count-tokens", "--chars", "500", str(document.pdf))
    assert data["jsonl"] == expected.stdout.decode()
    assert data["text"] == extracted(document.pdf)
    assert "pages" in data["fields"] and '"pages":[' in data["jsonl"]


def test_serve_answers_an_uploaded_pdf_with_its_pages_and_a_bad_one_with_a_reason(made, tmp_path):
    from browser import Serve, request

    document = made[2]
    shutil.copy(document.pdf, tmp_path / "upload.pdf")
    expected = run_chunkd("--count-tokens", "--chars", "400", "upload.pdf", cwd=tmp_path)
    with Serve() as server:
        def split(body: bytes) -> tuple[int, dict]:
            status, _, data = request(server, "POST", "/api/split?chars=400&doc=upload.pdf",
                                      body, host=f"127.0.0.1:{server.port}")
            return status, orjson.loads(data)
        status, report = split(document.pdf.read_bytes())
        assert status == 200, report
        assert report["jsonl"] == expected.stdout.decode()
        assert report["text"] == extracted(document.pdf) and "pages" in report["fields"]
        status, report = split(document.pdf.read_bytes()[:16] + bytes(4096))
        assert status == 400 and report["error"].startswith("upload.pdf: not a readable PDF")


def test_serve_bounds_extracted_text_by_its_own_max_bytes(made):
    """A DOCX of 24 KB whose text is 42 KB, posted to a server started with --max-bytes
    30000: refused by that bound, with the filter's reason, not passed by a default the
    user never set."""
    from browser import Serve, request

    docx = made[0].docx
    body = docx.read_bytes()
    text = extracted(docx).encode("utf-8")
    assert len(body) < 30000 < len(text)
    filtered = run_chunkd("--max-bytes", "30000", str(docx))
    [reason] = filtered.stderr.decode().splitlines()
    assert reason.startswith(f"chunkd: {docx}: ") and "--max-bytes" in reason, reason
    with Serve("--max-bytes", "30000") as server:
        status, _, data = request(server, "POST", "/api/split?chars=400&doc=a.docx", body,
                                  host=f"127.0.0.1:{server.port}")
    assert (status, orjson.loads(data)) == (400, {"error": "a.docx: " + reason.split(": ", 2)[2]})


def test_an_arrow_column_of_files_gives_the_filters_records(made, tmp_path):
    import pyarrow as pa

    from chunkd.arrow import chunk_table

    document = made[2]
    notes = tmp_path / "notes.txt"
    notes.write_text("Plain text, chunked as it is.", encoding="utf-8")
    files = [document.pdf, document.docx, document.html, notes]
    table = pa.table({"id": [path.name for path in files],
                      "text": pa.array([path.read_bytes() for path in files], pa.binary())})
    chunks = chunk_table(table, chunk_size=400, chunk_overlap=40, unit="chars", documents=True)
    for path in files[:3]:  # beside the text file, for the filter
        shutil.copy(path, tmp_path / path.name)
    done = run_chunkd("--chars", "400", "--overlap", "40", "-q", *[path.name for path in files],
                      cwd=tmp_path)
    expected = [orjson.loads(line) for line in done.stdout.splitlines()]
    rows = [{key: value for key, value in row.items() if value is not None}
            for row in chunks.to_pylist()]
    assert rows == expected
    assert chunks.schema.field("pages").type == pa.list_(pa.int64())


def test_eval_reads_a_pdf_as_its_extracted_text(made, tmp_path):
    """A question on a PDF names a line poppler reads on its second page; ``chunkd eval``
    finds it in the PDF's text (as ``chunkd extract`` prints it) and retrieves it."""
    document = next(d for d in made if len(poppler_pages(d.pdf)) > 1)
    text = extracted(document.pdf)
    lines = [line.strip() for line in poppler_pages(document.pdf)[1].splitlines()]
    line = next(line for line in lines if len(line) > 30 and text.count(line) == 1)
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"question": line, "doc": document.pdf.name,
                                     "references": [{"text": line}]}) + "\n")
    done = run_chunkd("eval", str(document.pdf), "--questions", str(questions),
                      "--chars", str(len(text)), "--overlap", "0", "-k", "1",  # the one chunk,
                      "--format", "ndjson")  # larger than the default context budget
    assert done.returncode == 0, done.stderr.decode()
    [record] = [orjson.loads(row) for row in done.stdout.splitlines()]
    assert record["recall"] == 1.0


def pdf_pages_check(pdf, chunks) -> None:
    """Every chunk of ``pdf`` (dicts with ``text`` and ``pages``) is on the pages it
    names by poppler's ``pdftotext``, its first and last lines on its first and last."""
    pages = [squeezed(page) for page in poppler_pages(pdf)]
    assert chunks
    for chunk in chunks:
        first, last = chunk["pages"]
        assert 1 <= first <= last <= len(pages)
        assert placed(chunk, pages), chunk


@pytest.mark.parametrize("kind", ["binary", "large_binary"])
def test_a_parquet_column_of_files_gives_the_filters_records_and_pages(made, tmp_path, kind):
    """``--input parquet`` with a binary column of PDF, DOCX, HTML and text files: the
    records the filter gives the same files as FILEs (a carried column added), with
    ``--jobs`` 1 and 2; into Parquet, a ``pages`` column poppler agrees with."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    document = made[0]  # several pages: chunks across page breaks
    notes = tmp_path / "notes.txt"
    notes.write_text("Plain text, chunked as it is.\n\nA second paragraph.", encoding="utf-8")
    files = [document.pdf, document.docx, document.html, notes]
    for path in files[:3]:
        shutil.copy(path, tmp_path / path.name)
    table = pa.table({"name": [path.name for path in files],
                      "data": pa.array([path.read_bytes() for path in files], getattr(pa, kind)()),
                      "lang": ["en", "en", "en", "en"]})
    source = tmp_path / "files.parquet"
    pq.write_table(table, source)
    settings = ["--chars", "400", "--overlap", "40", "-q"]
    expected = [{**record, "lang": "en"} for record in ndjson(
        run_chunkd(*settings, *[path.name for path in files], cwd=tmp_path).stdout)]
    assert {record["doc"] for record in expected} == {path.name for path in files}
    read = ["--input", "parquet", str(source), "--text-column", "data", "--id-column", "name"]
    for jobs in ("1", "2"):
        done = run_chunkd(*read, *settings, "--jobs", jobs)
        assert (done.returncode, done.stderr) == (0, b"")
        assert ndjson(done.stdout) == expected
    out = tmp_path / "chunks.parquet"
    done = run_chunkd(*read, *settings, "--format", "parquet", "--output", str(out))
    assert (done.returncode, done.stderr) == (0, b"")
    assert pq.read_schema(out).field("pages").type == pa.list_(pa.int64())
    rows = pq.read_table(out).to_pylist()
    assert [{key: value for key, value in row.items() if value is not None}
            for row in rows] == expected
    pdf_rows = [row for row in rows if row["doc"] == document.pdf.name]
    assert all(row["pages"] is None for row in rows if row not in pdf_rows)
    pdf_pages_check(document.pdf, pdf_rows)
    assert any(row["pages"][0] < row["pages"][1] for row in pdf_rows)


def test_a_pdf_file_into_parquet_keeps_its_pages(made, tmp_path):
    """``--format parquet`` of PDF FILEs has the ``pages`` the NDJSON records have;
    text from stdin, which cannot be a PDF, gets no such column."""
    import pyarrow.parquet as pq

    document = made[1]
    out = tmp_path / "chunks.parquet"
    done = run_chunkd("--chars", "500", str(document.pdf), str(document.markdown),
                      "--format", "parquet", "--output", str(out))
    assert (done.returncode, done.stderr) == (0, b"")
    rows = pq.read_table(out).to_pylist()
    expected = ndjson(run_chunkd("--chars", "500", str(document.pdf),
                                 str(document.markdown)).stdout)
    assert [{key: value for key, value in row.items() if value is not None}
            for row in rows] == expected
    pdf_pages_check(document.pdf, [row for row in rows if row["doc"] == str(document.pdf)])
    done = run_chunkd("--format", "parquet", "--output", str(out),
                      input=document.markdown.read_bytes())
    assert done.returncode == 0 and "pages" not in pq.read_schema(out).names


def test_a_bad_file_in_a_parquet_row_is_one_line_and_the_other_rows_are_chunked(made, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = made[2].docx.read_bytes()
    corrupt = made[2].pdf.read_bytes()[:16] + bytes(range(256)) * 40
    big = made[0].pdf.read_bytes()
    source = tmp_path / "files.parquet"
    pq.write_table(pa.table({"id": ["bad.pdf", "good.docx", "big.pdf", "again.docx"],
                             "text": pa.array([corrupt, good, big, good], pa.binary())}), source)
    limit = str(len(big) - 1)
    done = run_chunkd("--input", "parquet", str(source), "--chars", "400", "--max-bytes", limit,
                      "-q")
    stderr = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in stderr
    bad, over = stderr.splitlines()
    assert bad.startswith(f"chunkd: {source}: row 0 (bad.pdf): not a readable PDF"), bad
    assert over == f"chunkd: {source}: row 2 (big.pdf): {len(big)} bytes, over --max-bytes {limit}"
    assert {r["doc"] for r in ndjson(done.stdout)} == {"good.docx", "again.docx"}


def test_eval_tells_its_chunkers_each_documents_kind_as_the_filter_does(made, tmp_path):
    """Under ``--strategy auto``, eval cuts Markdown, HTML and DOCX with the markdown
    strategy and a PDF with the recursive one, as the filter does: each document's
    chunks and tokens in eval's records are the filter's."""
    paths = [made[2].markdown, made[2].html, made[3].docx, made[0].pdf]
    questions = tmp_path / "questions.jsonl"
    with questions.open("w") as out:
        for path in paths:
            line = next(line for line in extracted(path).splitlines() if len(line) > 40)
            out.write(json.dumps({"question": line, "doc": path.name,
                                  "references": [{"text": line}]}) + "\n")
    settings = ["--chars", "400", "--overlap", "40"]
    done = run_chunkd("eval", *map(str, paths), "--questions", str(questions),
                      "--strategy", "auto", *settings, "--format", "ndjson")
    assert done.returncode == 0, done.stderr.decode()
    [record] = ndjson(done.stdout)
    shown = [(part["chunks"], part["tokens"]) for part in record["documents"]]

    def filtered(strategy: str) -> list[tuple[int, int]]:
        results = json_documents("--strategy", strategy, *settings, "--count-tokens",
                                 *map(str, paths))
        return [(len(result["chunks"]), sum(chunk["tokens"] for chunk in result["chunks"]))
                for result in results]
    assert shown == filtered("auto")
    # The test tells the strategies apart: recursive cuts the first three otherwise.
    recursive = filtered("recursive")
    assert all(shown[n] != recursive[n] for n in range(3)) and shown[3] == recursive[3]


def test_a_pdf_row_after_a_file_of_text_is_refused_for_parquet_output(made, tmp_path):
    """The first file fixes the Parquet output's columns: after one whose text column
    holds strings, a PDF in a later column of files has no ``pages`` column to go to,
    so its row is refused; that column's other files are chunked. Into NDJSON, or with
    the column of files first, every row is chunked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    strings, files = tmp_path / "strings.parquet", tmp_path / "files.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["some text"]}), strings)
    pq.write_table(pa.table({"id": ["report.pdf", "page.html"],
                             "text": pa.array([made[2].pdf.read_bytes(),
                                               made[2].html.read_bytes()], pa.binary())}), files)
    out = tmp_path / "out.parquet"

    def docs(*args: str) -> tuple[int, str, list[str]]:
        done = run_chunkd("--input", "parquet", *args, "--chars", "500", "--format", "parquet",
                          "--output", str(out))
        return (done.returncode, done.stderr.decode(),
                sorted({row["doc"] for row in pq.read_table(out).to_pylist()}))

    assert docs(str(strings), str(files)) == (
        1, f"chunkd: {files}: row 0 (report.pdf): a PDF, whose pages the output has no column "
           "for (the first file's text column holds strings)\n", ["a", "page.html"])
    assert "pages" not in pq.read_schema(out).names
    assert docs(str(files), str(strings)) == (0, "", ["a", "page.html", "report.pdf"])
    both = run_chunkd("--input", "parquet", str(strings), str(files), "--chars", "500")
    assert both.returncode == 0
    assert {r["doc"] for r in ndjson(both.stdout)} == {"a", "page.html", "report.pdf"}
