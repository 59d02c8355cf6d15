"""HTML in another encoding than UTF-8, told as a browser tells it (a BOM, else a
``<meta>`` among the first 1024 bytes, else UTF-8): its records are those of the same
page in UTF-8; a file that starts with a UTF-16 or UTF-32 BOM and markup is HTML by
its content, as its UTF-8 form is; an unknown label is one warning line, never a
traceback."""

from __future__ import annotations

import codecs

import pytest

from command import ndjson, records_with_jobs, run_chunkd

pytest.importorskip("selectolax")

BODY = ("<body><h1>Titel</h1><p>Grüße aus Köln, café naïve “quoted” – fin.</p>"
        "<script>x = 'nicht im Text'</script><ul><li>eins</li><li>zwei</li></ul></body>")
JAPANESE = "<body><h1>見出し</h1><p>日本語の文章です。カタカナも。</p></body>"
RUSSIAN = "<body><h1>Заголовок</h1><p>Съешь же ещё этих мягких французских булок.</p></body>"


def page(body: str, head: str = "") -> str:
    return f"<!doctype html><html><head><title>t</title>{head}</head>{body}</html>"


#: Each file: its bytes, and the page whose UTF-8 form gives the same records.
FILES = {
    "utf16le.html": (codecs.BOM_UTF16_LE + page(BODY).encode("utf-16-le"), page(BODY)),
    "utf16be.html": (codecs.BOM_UTF16_BE + page(BODY).encode("utf-16-be"), page(BODY)),
    "utf32le.html": (codecs.BOM_UTF32_LE + page(BODY).encode("utf-32-le"), page(BODY)),
    "utf8bom.html": (codecs.BOM_UTF8 + page(BODY).encode("utf-8"), page(BODY)),
    # The BOM wins over what a <meta> says.
    "bom-over-meta.html": (codecs.BOM_UTF16_LE + page(BODY, '<meta charset="windows-1252">')
                           .encode("utf-16-le"), page(BODY)),
    "cp1252.html": (page(BODY, '<meta charset="windows-1252">').encode("cp1252"), page(BODY)),
    # Latin-1 is windows-1252 to a browser: 0x93 and 0x94 are quotation marks.
    "latin1.html": (page(BODY, "<meta charset=ISO-8859-1>").encode("cp1252"), page(BODY)),
    "shift_jis.html": (page(JAPANESE, "<meta charset='shift_jis'>").encode("shift_jis"),
                       page(JAPANESE)),
    "http-equiv.html": (page(RUSSIAN, '<meta http-equiv="Content-Type" '
                                      'content="text/html; charset=KOI8-R">').encode("koi8-r"),
                        page(RUSSIAN)),
    # A <meta> inside a comment is none.
    "commented.html": (page(BODY, "<!-- <meta charset=koi8-r> -->").encode("utf-8"),
                       page(BODY)),
    # No extension: told by its content alone.
    "utf16-no-extension": (codecs.BOM_UTF16_LE + page(BODY).encode("utf-16-le"), page(BODY)),
}


def records_by_document(records: list[dict]) -> dict[str, list[dict]]:
    by_document: dict[str, list[dict]] = {}
    for record in records:
        by_document.setdefault(record.pop("doc").rsplit("/", 1)[-1], []).append(record)
    return by_document


def test_each_encoding_gives_the_records_of_the_page_in_utf_8(tmp_path):
    for name, (data, _) in FILES.items():
        (tmp_path / name).write_bytes(data)
        (tmp_path / f"utf8-{name}.html").write_text(FILES[name][1], encoding="utf-8")
    names = [name for name in FILES] + [f"utf8-{name}.html" for name in FILES]
    found = records_by_document(records_with_jobs(
        "--chars", "40", *(str(tmp_path / name) for name in names)))
    for name in FILES:
        assert found[name] == found[f"utf8-{name}.html"], name
    texts = "".join(record["text"] for record in found["cp1252.html"])
    for word in ("Titel", "Grüße", "Köln", "café", "naïve", "“quoted”", "–", "zwei"):
        assert word in texts, word
    assert "nicht im Text" not in texts and "\ufffd" not in texts
    assert "日本語の文章です" in "".join(r["text"] for r in found["shift_jis.html"])


def test_an_unknown_label_is_read_as_utf_8_with_one_warning(tmp_path):
    path = tmp_path / "klingon.html"
    path.write_bytes(page(BODY, '<meta charset="klingon">').encode("utf-8"))
    reference = tmp_path / "reference.html"
    reference.write_text(page(BODY), encoding="utf-8")
    done = run_chunkd(str(path))
    assert done.returncode == 0
    assert done.stderr.decode().splitlines() == [
        f"chunkd: {path}: its <meta> declares the encoding 'klingon', unknown: read as UTF-8"]
    expected = run_chunkd(str(reference))
    assert [{**r, "doc": None} for r in ndjson(done.stdout)] == \
        [{**r, "doc": None} for r in ndjson(expected.stdout)]


def test_bytes_invalid_in_the_declared_encoding_become_replacement_characters(tmp_path):
    """As invalid UTF-8 does in HTML: a U+FFFD each, the rest read, exit status 0 (a
    Shift_JIS lead byte before a space, which no pair begins so)."""
    path = tmp_path / "bad.html"
    path.write_bytes(page("<body><p>gut \x81 und \x83J\x83^</p></body>",
                          "<meta charset=shift_jis>").encode("latin-1"))
    done = run_chunkd(str(path))
    assert (done.returncode, done.stderr) == (0, b"")
    assert [record["text"] for record in ndjson(done.stdout)] == ["gut \ufffd und カタ"]
