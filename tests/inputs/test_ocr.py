"""A scanned PDF (pages that are images, no text layer), made from rendered text by
Pillow: without ``--ocr`` its pages are named on stderr and the user told that OCR
exists; with it, Tesseract reads them and every word is on the page it was drawn on.
The daemon's result carries the same warning."""

from __future__ import annotations

import re
import shutil

import orjson
import pytest
from command import run_chunkd

PAGES = ["Lighthouse keepers watch\nthe harbour at night.",
         "",  # a blank page: OCR finds nothing on it either
         "Granite quarries supply\nmarble for cathedrals."]  # no word of page 1


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=44)  # Pillow's own font: no system font needed
    images = []
    for text in PAGES:
        image = Image.new("L", (1275, 1650), 255)  # a letter page at 150 dpi
        ImageDraw.Draw(image).multiline_text((120, 160), text, fill=0, font=font, spacing=16)
        images.append(image)
    path = tmp_path_factory.mktemp("scan") / "scan.pdf"
    images[0].save(path, save_all=True, append_images=images[1:], resolution=150)
    return path


def page_of(offset: int, starts: list[int]) -> int:
    return sum(1 for start in starts if start <= offset)


def test_without_ocr_the_pages_are_named_and_ocr_is_offered(scan):
    done = run_chunkd("--format", "json", str(scan))
    assert done.returncode == 0
    assert done.stderr.decode() == (f"chunkd: {scan}: pages 1-3 of 3 have no text (scanned?): "
                                    "--ocr reads such pages with Tesseract\n")
    result = orjson.loads(done.stdout)
    assert result["chunks"] == [] and result["warnings"] == [
        "pages 1-3 of 3 have no text (scanned?): --ocr reads such pages with Tesseract"]


def test_with_ocr_each_word_is_read_on_its_page(scan):
    done = run_chunkd("--ocr", "--format", "json", "--chars", "40", str(scan))
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode() == f"chunkd: {scan}: page 2 of 3 has no text, and OCR found none\n"
    result = orjson.loads(done.stdout)
    text, starts = result["text"], result["page_starts"]
    assert len(starts) == 3
    for number, drawn in enumerate(PAGES, 1):
        for word in drawn.split():
            found = re.search(rf"\b{re.escape(word)}", text)
            assert found, (word, text)
            assert page_of(found.start(), starts) == number, word
    for chunk in result["chunks"]:
        pages = {page_of(chunk["start"] + at, starts)
                 for at, character in enumerate(chunk["text"]) if character.isalpha()}
        assert chunk["pages"] == [min(pages), max(pages)]
    assert {tuple(chunk["pages"]) for chunk in result["chunks"]} == {(1, 1), (3, 3)}


def test_ocr_is_refused_in_one_line_where_it_cannot_run(scan, tmp_path, monkeypatch):
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))  # no language data there
    done = run_chunkd("--ocr", str(scan))
    assert done.returncode == 2
    assert done.stderr.decode().splitlines()[-1] == (
        "chunkd: error: --ocr needs Tesseract's eng language data: apt-get install "
        "tesseract-ocr (or set TESSDATA_PREFIX to its folder)")


@pytest.mark.slow
def test_the_daemon_result_of_a_scan_carries_the_warning(scan, inbox, watch):
    watcher = watch(inbox)
    watcher.started()
    shutil.copy(scan, inbox / ".scan.pdf")
    (inbox / ".scan.pdf").rename(inbox / "scan.pdf")
    result_path = inbox / "scan.pdf.chunks.json"
    watcher.wait_for(result_path.exists, what="the scan's result")
    result = orjson.loads(result_path.read_bytes())
    assert result["chunks"] == [] and result["warnings"] == [
        "pages 1-3 of 3 have no text (scanned?): --ocr reads such pages with Tesseract"]
    assert watcher.stop() == 0


@pytest.mark.slow
def test_the_daemon_reads_a_scan_with_ocr(scan, inbox, watch):
    watcher = watch(inbox, "--ocr", "--chars", "40")
    watcher.started()
    shutil.copy(scan, inbox / ".scan.pdf")
    (inbox / ".scan.pdf").rename(inbox / "scan.pdf")
    result_path = inbox / "scan.pdf.chunks.json"
    watcher.wait_for(result_path.exists, what="the scan's result")
    result = orjson.loads(result_path.read_bytes())
    assert result["warnings"] == ["page 2 of 3 has no text, and OCR found none"]
    text = " ".join(chunk["text"] for chunk in result["chunks"])
    for word in " ".join(PAGES).split():
        assert re.search(rf"\b{re.escape(word)}", text), (word, text)
    assert watcher.stop() == 0
