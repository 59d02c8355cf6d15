"""PDF and DOCX documents on the page, in a real browser (Debian's Chromium, driven by
Playwright), as a user opens them: a PDF LibreOffice made, opened through ``chunkd
serve``'s page, shows the filter's chunks of its extracted text and each chunk's
pages, which poppler's ``pdftotext`` confirms; a ``chunkd preview`` of a DOCX shows
each chunk's heading path, one the source Markdown has."""

from __future__ import annotations

import shutil

import pytest
from playwright.sync_api import expect

from command import HANG, ndjson, run_chunkd
from document_files import heading_paths, made_documents, poppler_pages, source_headings
from test_documents import pdf_pages_check
from test_page import (check_segments, choose, details, expected_row,  # noqa: F401
                       number, open_server_page, page, server, shown_rows, shown_segments)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def made():
    return made_documents()


def every_chunks_details(page, count: int) -> list[tuple[dict[str, str], str]]:
    """Each chunk's facts and text as the details pane shows them, going down the list
    with the keyboard from the first."""
    page.focus("#list")
    page.keyboard.press("Home")
    shown = []
    for index in range(count):
        if index:
            page.keyboard.press("ArrowDown")
        expect(page.locator("#details [data-fact='Index']")).to_have_text(str(index))
        shown.append((details(page), page.text_content("#details .chunk-text")))
    return shown


def pages_label(pages: list[int]) -> str:
    first, last = pages
    return str(first) if first == last else f"{first}–{last}"


def label_pages(label: str) -> list[int]:
    first, _, last = label.partition("–")
    return [int(first), int(last or first)]


def test_a_pdf_opened_on_the_page_shows_its_chunks_and_their_pages(page, server, made,
                                                                   tmp_path):
    document = next(d for d in made if len(poppler_pages(d.pdf)) >= 3)
    shutil.copy(document.pdf, tmp_path / "report.pdf")
    expected = run_chunkd("--count-tokens", "--chars", "500", "report.pdf", cwd=tmp_path)
    assert expected.returncode == 0, expected.stderr
    records = ndjson(expected.stdout)
    text = run_chunkd("extract", "report.pdf", cwd=tmp_path).stdout.decode("utf-8")

    open_server_page(page, server.url)
    choose(page, "recursive", "chars", "500", "")
    page.set_input_files("#file", str(tmp_path / "report.pdf"))  # opening a file splits it
    expect(page.locator("#action-status")).to_contain_text(
        f"{number(len(records))} chunks, shown in", timeout=HANG * 1000)

    assert shown_rows(page) == [expected_row(record, "chars") for record in records]
    check_segments(shown_segments(page), text, records)  # the extracted text, chunk by chunk
    shown = every_chunks_details(page, len(records))
    assert [facts["Pages"] for facts, _ in shown] == [pages_label(r["pages"]) for r in records]
    # The pages as the page shows them, against poppler's text of each page.
    labelled = [{"text": chunk_text, "pages": label_pages(facts["Pages"])}
                for facts, chunk_text in shown]
    pdf_pages_check(document.pdf, labelled)
    assert any("–" in facts["Pages"] for facts, _ in shown), "no chunk across a page break"


def test_a_preview_of_a_docx_shows_each_chunks_headings(page, made, tmp_path):
    document = made[2]
    options = ("--strategy", "markdown", "--chars", "600")
    done = run_chunkd("preview", str(document.docx), *options, "-o", str(tmp_path / "report.html"))
    assert (done.returncode, done.stderr) == (0, b"")
    records = ndjson(run_chunkd("--count-tokens", *options, str(document.docx)).stdout)
    paths = heading_paths(source_headings(document.markdown.read_text(encoding="utf-8")))

    page.goto((tmp_path / "report.html").as_uri())
    expect(page.locator("#action-status")).to_have_text("")
    assert shown_rows(page) == [expected_row(record, "chars") for record in records]
    shown = every_chunks_details(page, len(records))
    assert [facts["Heading path"] for facts, _ in shown] == \
        [" › ".join(r["headings"]) or "(none)" for r in records]
    headed = {tuple(facts["Heading path"].split(" › ")) for facts, _ in shown
              if facts["Heading path"] != "(none)"}
    assert headed and headed <= paths  # the source Markdown's headings, in its nesting
    assert len(headed) > 3
