"""Tables with their header: with --embed-text, the markdown strategy keeps a pipe table
that fits in one chunk, cuts a larger one between rows, and puts the table's header row
and separator row before the text of every chunk that starts in its body, within the
size; ``text`` stays the exact slice. Checked against the contract written out below
(tables found by GFM's rule in tests/markdown_checks.py) and against the exact reference
there, on handwritten and generated Markdown, whole and fed in pieces, on both cores;
and through the installed ``chunkd`` on Markdown, on HTML made by the ``markdown``
library and on DOCX made from it by LibreOffice."""

from __future__ import annotations

import os
import random
import subprocess

import markdown
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

import chunkd
import windows_reference as reference
from command import HANG, chunkd_command, ndjson, run_chunkd
from memory import STREAM_BYTES, stream_through_chunkd
from document_files import soffice
from markdown_checks import (MAX_CHARS, check_markdown, section_texts, table_spans,
                             unit_length)
from oracle import corpus_documents, random_cuts


def split(text: str, pieces: list[str], unit: str, size: int, overlap: int,
          strip_headings: bool = False) -> list[chunkd.Chunk]:
    splitter = chunkd.Splitter(size, overlap, unit=unit, strategy="markdown",
                               strip_headings=strip_headings, embed_text=True)
    return [c for piece in pieces for c in splitter.feed(piece)] + splitter.finish()


def check_tables(text: str, chunks: list[chunkd.Chunk], unit: str, size: int,
                 strip_headings: bool = False) -> int:
    """The contract, for every table of ``text``: one that fits (with its section's
    prefix) is one chunk; in one that does not, every chunk starts at a row (or inside a
    row that alone does not fit); every chunk that starts in the body embeds the header
    and separator rows before its text (unless with the prefix they would take more than
    half the size); every embed_text within the size. Returns the chunks that start in
    a table's body."""
    length = unit_length(unit)
    for chunk in chunks:
        assert text[chunk.start:chunk.end] == chunk.text
    in_bodies = 0
    for section, headings, start, _ in section_texts(text, strip_headings):
        for table_start, body, table_end in table_spans(section, bool(headings)
                                                        and not strip_headings):
            table_start, body, table_end = (start + table_start, start + body,
                                            start + table_end)
            table = text[table_start:table_end]
            rows = [(table_start + offset, row) for offset, row in reference.lines(table)]
            mine = [c for c in chunks if table_start <= c.start < table_end]
            assert mine and mine[0].start == table_start + len(table) - len(table.lstrip())
            assert all(c.end <= table_end for c in mine)
            prefix = mine[0].embed_text.removesuffix(mine[0].text)
            assert mine[0].embed_text == prefix + mine[0].text
            if length(prefix + table.strip()) <= size:
                assert [c.text for c in mine] == [table.strip()]      # never split
                assert mine[0].embed_text == prefix + table.strip()
                continue
            header = (reference.line_content(rows[0][1]).strip() + "\n"
                      + reference.line_content(rows[1][1]).strip() + "\n")
            if 2 * length(prefix + header) > size:
                header = ""
            too_long = [(row_start, row_start + len(row)) for row_start, row in rows
                        if len(row) > MAX_CHARS[unit] * size
                        or length(prefix + header + row.strip()) > size]
            row_starts = {row_start + len(row) - len(row.lstrip()) for row_start, row in rows}
            for chunk in mine:
                inside_long_row = any(a <= chunk.start < b for a, b in too_long)
                assert chunk.start in row_starts or inside_long_row, (chunk.start, chunk.text)
                if chunk.start >= body:
                    in_bodies += 1
                    if not inside_long_row:
                        assert chunk.embed_text == prefix + header + chunk.text
                    else:         # a piece of a row cut by the recursive splitter
                        assert (chunk.embed_text == prefix + header + chunk.text
                                or length(chunk.embed_text) <= size)
                assert length(chunk.embed_text) <= size or inside_long_row
    return in_bodies


def check(text: str, unit: str, size: int, overlap: int, rng: random.Random) -> int:
    """Whole and in random pieces: the same chunks, the contract, and the exact
    reference (which also checks that without --embed-text nothing changed)."""
    whole = split(text, [text], unit, size, overlap)
    pieces = random_cuts(text, rng, max_piece=rng.choice([1, 7, 200]))
    assert split(text, pieces, unit, size, overlap) == whole
    check_markdown(text, pieces, unit, size, overlap)
    return check_tables(text, whole, unit, size)


PRICES = "\n".join(["| item | price | notes |", "| :--- | ---: | --- |",
                    *(f"| widget {n} | {n}.50 | in stock, ships in {n % 5 + 1} days |"
                      for n in range(1, 31))])


@pytest.mark.parametrize("unit,size", [("chars", 200), ("chars", 1000), ("tokens", 60),
                                       ("tokens", 400)])
def test_a_table_among_sections(unit, size):
    text = (f"# Shop\n\nOur prices, as of today:\n{PRICES}\n\nPrices change.\n\n"
            f"## Small\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nThe end.\n")
    assert check(text, unit, size, size // 10, random.Random(size)) > (size < 300)


def test_the_header_goes_before_every_piece_of_a_long_table():
    text = f"# Shop\n\n{PRICES}\n"
    chunks = split(text, [text], "chars", 300, 30)
    header = "| item | price | notes |\n| :--- | ---: | --- |\n"
    table = [c for c in chunks if c.text.startswith("|")]
    assert len(table) > 3 and table[0].text.startswith(header)
    for chunk in table[1:]:
        assert chunk.embed_text == "Shop\n\n" + header + chunk.text
        assert chunk.text.startswith("| widget") and chunk.text.endswith("|")   # whole rows
        assert len(chunk.embed_text) <= 300
    rows = [row for c in table for row in c.text.splitlines()]
    assert rows == PRICES.splitlines()                      # each row once, no overlap
    # Without --embed-text the chunks are LangChain's, rows cut anywhere.
    plain = chunkd.split_text(text, 300, 30, strategy="markdown")
    assert any(not c.text.endswith("|") for c in plain)


@pytest.mark.parametrize("text", [
    "```\n| a | b |\n| - | - |\n| 1 | 2 |\n```\n" + "word " * 40,    # in fenced code
    "| a | b | c |\n| - | - |\n| 1 | 2 | 3 |\n" + "word " * 40,      # cells differ
    "# Title | with a pipe\n| - | - |\nrow | row\n" + "word " * 40,  # a heading line
    "a | b\n--|--\n1 | 2\n" + "x | y\n" * 30,                          # no outer pipes
    "Intro\n| a | b |\n| --- | :-: |\n| 1 | 2 |\nnot a row\n" + "w " * 60,
    "| a | b |\r\n| --- | --- |\r\n" + "| 1 | 2 |\r\n" * 30,             # CRLF
    "| h |\n| - |\n| " + "long " * 80 + "|\n| short |\n",            # a row over the size
    "| " + "header " * 20 + "|\n| --- |\n" + "| cell |\n" * 40,        # header over half
    "| a |\n| - |\n\n| b |\n| - |\n| 1 |\n",                             # two tables
    "   | indented | header |\n  |---|---|\n" + " | x | y |\n" * 30,      # white space
])
@pytest.mark.parametrize("unit,size", [("chars", 64), ("chars", 150), ("tokens", 30)])
def test_handwritten_tables(text, unit, size):
    check(text, unit, size, size // 8, random.Random(text))


def test_not_tables_are_split_as_text():
    """Lines with pipes that GFM does not read as a table are the recursive splitter's."""
    text = "```\n| a | b |\n| - | - |\n```\n"
    assert table_spans(text, False) == []
    assert ([c.text for c in split(text, [text], "chars", 12, 0)]
            == [c.text for c in chunkd.split_text(text, 12, 0, strategy="markdown")])


WORDS = ["data", "row", "the", "value", "x", "中文", "e\u0301", "3.14", "`a|b`", "\\|", "**b**"]
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)


@st.composite
def tables(draw) -> str:
    columns = draw(st.integers(1, 4))
    outer = draw(st.booleans()) or columns == 1
    indent = draw(st.sampled_from(["", "", " ", "   "]))

    def row(cells: list[str]) -> str:
        inner = " | ".join(cells)
        return indent + (f"| {inner} |" if outer else inner)

    header = row(draw(st.lists(words, min_size=columns, max_size=columns)))
    separator = row([draw(st.sampled_from(["---", ":--", "--:", ":-:", "-"]))
                     for _ in range(columns)])
    body = [row(draw(st.lists(words, min_size=1, max_size=columns + 1)))
            for _ in range(draw(st.integers(0, 14)))]
    return "\n".join([header, separator, *body])


blocks = st.one_of(tables(), words, words.map(lambda w: "## " + w),
                   words.map(lambda w: "# " + w + " | x"),
                   tables().map(lambda t: "```\n" + t + "\n```"),
                   st.sampled_from(["| a | b |", "| - | - |", "---", "| x", ""]))


@st.composite
def table_documents(draw) -> str:
    parts = draw(st.lists(blocks, min_size=1, max_size=8))
    joins = [draw(st.sampled_from(["\n\n", "\n", "\n\n\n"])) for _ in parts]
    text = "".join(part + join for part, join in zip(parts, joins))
    return text.replace("\n", "\r\n") if draw(st.integers(0, 9)) == 0 else text


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_documents(), st.sampled_from(["chars", "tokens"]), st.data())
def test_generated_markdown_with_tables(text, unit, data):
    size = data.draw(st.integers(20, 300) if unit == "chars" else st.integers(8, 80))
    overlap = data.draw(st.integers(0, size // 3))
    check(text, unit, size, overlap, random.Random(data.draw(st.integers(0, 2**32))))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_documents(), st.sampled_from(["chars", "tokens"]),
       st.sampled_from(["end", "start", "none"]), st.data())
def test_tables_that_keep_their_white_space(text, unit, keep, data):
    """--no-strip (and any --keep-separator): a piece of a table is its rows as they are,
    line endings included, and its embed_text the prefix (and header), then that text,
    within the size (but where a piece of a row alone is not)."""
    size = data.draw(st.integers(20, 300) if unit == "chars" else st.integers(8, 80))
    overlap = data.draw(st.integers(0, size // 3))
    options = dict(unit=unit, strategy="markdown", embed_text=True, strip_whitespace=False,
                   keep_separator=keep)
    whole = chunkd.split_text(text, size, overlap, **options)
    splitter = chunkd.Splitter(size, overlap, **options)
    pieces = random_cuts(text, random.Random(data.draw(st.integers(0, 2**32))), 9)
    assert [c for piece in pieces for c in splitter.feed(piece)] + splitter.finish() == whole
    length = unit_length(unit)
    for section, headings, start, _ in section_texts(text, False):
        for table_start, _, table_end in table_spans(section, bool(headings)):
            rows = {start + table_start + offset
                    for offset, _ in reference.lines(section[table_start:table_end])}
            for chunk in whole:
                if start + table_start <= chunk.start < start + table_end:
                    assert chunk.end <= start + table_end
                    if chunk.start in rows and chunk.text.endswith("\n"):   # rows whole
                        assert text[chunk.start:chunk.end] == chunk.text
                        assert length(chunk.embed_text) <= size
    for chunk in whole:
        assert chunk.embed_text.endswith(chunk.text)
        assert length(chunk.embed_text) <= max(size, length(chunk.text))


def random_document(rng: random.Random) -> str:
    """Markdown of paragraphs, headings and tables of up to 40 rows, drawn by ``rng``."""
    parts = []
    for _ in range(rng.randint(1, 8)):
        line = " ".join(rng.choices(WORDS, k=rng.randint(1, 12)))
        kind = rng.randrange(3)
        if kind == 0:
            parts.append(line)
        elif kind == 1:
            parts.append("#" * rng.randint(1, 3) + " " + line)
        else:
            columns = rng.randint(1, 4)
            rows = [" | ".join(" ".join(rng.choices(WORDS, k=rng.randint(1, 6)))
                               for _ in range(columns)) for _ in range(rng.randint(1, 40))]
            rows.insert(1, " | ".join(["---"] * columns))
            parts.append("\n".join(f"| {row} |" for row in rows))
    return "\n\n".join(parts) + "\n"


def test_random_documents_with_long_tables():
    """Longer tables than the property test draws: many cut, every piece with its header."""
    rng = random.Random(31)
    in_bodies = 0
    for _ in range(150):
        unit = rng.choice(["chars", "tokens"])
        size = rng.randint(60, 400) if unit == "chars" else rng.randint(20, 100)
        in_bodies += check(random_document(rng), unit, size, size // 10, rng)
    assert in_bodies > 200


@pytest.mark.parametrize("unit,size", [("chars", 500), ("tokens", 100)])
def test_corpus_tables(unit, size):
    """Every shared-corpus document with a table: the contract, whole and in pieces."""
    with_tables = [path for path in corpus_documents()
                   if table_spans(path.read_text(encoding="utf-8"), False)]
    assert len(with_tables) >= 10         # 10 in the corpus of 2026-12
    in_bodies = 0
    for path in with_tables:
        text = path.read_text(encoding="utf-8")
        in_bodies += check(text, unit, size, size // 10, random.Random(path.name))
    assert in_bodies > 10


# --- the installed command, on Markdown, HTML and DOCX ---------------------------------

SOURCE = (f"# Catalogue\n\nSome words before the table.\n\n## Prices\n\n{PRICES}\n\n"
          "Words after the table.\n")
HEADER = "| item | price | notes |"


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> dict[str, str]:
    """The catalogue as Markdown, as HTML (the ``markdown`` library's tables extension)
    and as DOCX (LibreOffice, from that HTML)."""
    folder = tmp_path_factory.mktemp("tables")
    (folder / "catalogue.md").write_text(SOURCE, encoding="utf-8")
    html = markdown.markdown(SOURCE, extensions=["tables"])
    assert html.count("<tr>") == 31
    (folder / "catalogue.html").write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>t</title></head>"
        f"<body>{html}</body></html>", encoding="utf-8")
    soffice(folder, "docx:MS Word 2007 XML", [folder / "catalogue.html"])
    return {kind: str(folder / f"catalogue.{kind}") for kind in ("md", "html", "docx")}


@pytest.mark.parametrize("strategy", ["markdown", "auto"])
@pytest.mark.parametrize("kind", ["md", "html", "docx"])
def test_the_command_embeds_the_header_with_every_piece(documents, kind, strategy):
    result = run_chunkd("--strategy", strategy, "--chars", "300", "--embed-text",
                        documents[kind])
    assert result.returncode == 0, result.stderr
    records = ndjson(result.stdout)
    separator = "| :--- | ---: | --- |" if kind == "md" else "| --- | --- | --- |"
    rows = [r for r in records if r["text"].startswith("|")]
    assert len(rows) > 3
    assert rows[0]["text"].startswith(HEADER + "\n" + separator + "\n")
    body_rows = []
    for record in rows:
        assert len(record["embed_text"]) <= 300
        body = record["text"]
        if record is not rows[0]:
            assert record["embed_text"] == ("Catalogue > Prices\n\n" + HEADER + "\n"
                                            + separator + "\n" + body)
        else:
            body = body.split("\n", 2)[2]
        body_rows += body.splitlines()
    # Every row whole, once, in order.
    assert body_rows == [f"| widget {n} | {n}.50 | in stock, ships in {n % 5 + 1} days |"
                         for n in range(1, 31)]


def test_the_twin_gives_the_compiled_tables(documents, tmp_path):
    """The installed chunkd on each core: the same bytes for tables cut with their
    header, in code points and tokens."""
    generated = tmp_path / "generated.md"
    rng = random.Random(7)
    generated.write_text("\n".join(random_document(rng) for _ in range(40)), encoding="utf-8")
    for unit in (["--chars", "120"], ["--tokens", "40"]):
        outputs = set()
        for flag in ("0", "1"):
            result = subprocess.run(
                [chunkd_command(), "--strategy", "markdown", *unit, "--embed-text",
                 documents["md"], documents["html"], str(generated)],
                capture_output=True, timeout=HANG, env=dict(os.environ, CHUNKD_PUREPYTHON=flag))
            assert result.returncode == 0, result.stderr
            outputs.add(result.stdout)
        assert len(outputs) == 1 and outputs.pop().count(b'"embed_text"') > 40


# --- memory ----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("block", [
    # One table of 210 MB: the first block's header, then every line a row.
    b"| item | price |\n| --- | --- |\n" + b"| widget | 1.50 |\n" * 10_000,
    # Tables whose rows of 1 MB are cut as they stream.
    b"| a |\n| - |\n| " + b"word " * 200_000,
], ids=["rows", "long rows"])
def test_a_gigantic_table_streams_in_bounded_memory(block):
    status, lines, peak_mb = stream_through_chunkd(
        ["--strategy", "markdown", "--embed-text"], block)
    assert status == 0 and lines > STREAM_BYTES // 1100
    assert peak_mb < 64, f"peak RSS {peak_mb} MB"
