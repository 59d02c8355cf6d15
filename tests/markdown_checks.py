"""The markdown strategy's contract, checked: each section's chunks are LangChain's
split of that section's text alone (the section rule from tests/windows_reference.py),
with exact offsets, heading paths and, with embed_text, prefixes within the size; with
embed_text, the section's pipe tables are cut apart from the text around them, each one
chunk if it fits, else between rows, with its header before every piece of its body."""

from __future__ import annotations

import itertools
import re

import regex

import chunkd
import windows_reference as reference
from oracle import langchain_chunks, token_length


def section_texts(text: str, strip_headings: bool) -> list[tuple[str, tuple[str, ...], int, int]]:
    """(split text, headings, start, end) of each section, as the contract says."""
    sections = []
    for start, end, headings in reference.section_units(text):
        if strip_headings and headings:
            newline = text.find("\n", start, end)
            start = end if newline < 0 else newline + 1
        sections.append((text[start:end], headings, start, end))
    return sections


def expected_chunks(text: str, unit: str, size: int, overlap: int,
                    strip_headings: bool) -> list[tuple[str, tuple[str, ...], int, int]]:
    """(text, headings, section start, section end) of each chunk, as the contract says."""
    return [(chunk, headings, start, end)
            for section, headings, start, end in section_texts(text, strip_headings)
            for chunk in langchain_chunks(section, size, overlap, unit)]


def unit_length(unit: str):
    return len if unit == "chars" else token_length


def contract_prefix(headings: tuple[str, ...], unit: str, size: int) -> str | None:
    """The embed_text prefix of a section, where the contract fixes it: the path with
    its outermost headings dropped until it takes at most half the size; in code
    points, the innermost cut to its longest start of whole graphemes that fits with
    "…" (nothing if no code point of it does). None: a cut in tokens (any that fits)."""
    length = unit_length(unit)
    for first in range(len(headings)):
        prefix = " > ".join(headings[first:]) + "\n\n"
        if 2 * length(prefix) <= size:
            return prefix
    if not headings:
        return ""
    if unit == "tokens":
        return None
    kept = ""
    for cluster in regex.findall(r"\X", headings[-1]):
        if len(kept + cluster) + len("…\n\n") > size // 2:
            break
        kept += cluster
    return kept + "…\n\n" if kept else ""


def check_cut_prefix(prefix: str, headings: tuple[str, ...], size: int) -> None:
    """A prefix cut in tokens: the innermost heading's start at a grapheme boundary
    and "…", that takes at most half the size (or none at all)."""
    if prefix:
        kept = prefix.removesuffix("…\n\n")
        assert prefix == kept + "…\n\n" and kept
        assert headings[-1].startswith(kept) and kept in regex_starts(headings[-1])
        assert 2 * token_length(prefix) <= size


def regex_starts(heading: str) -> set[str]:
    """The heading's starts that end at a grapheme boundary."""
    ends = [m.end() for m in regex.finditer(r"\X", heading)]
    return {heading[:end] for end in ends}


#: The contract's bounds on lines, in code points: a header or separator row is at most
#: this long (its line ending included), and a row has a "|" within this many.
LINE_LIMIT = 65_536
SEPARATOR_ROW = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")
#: The most code points one unit covers: a row longer than this many times the size
#: cannot fit (it is cut by the recursive splitter).
MAX_CHARS = {"chars": 1, "tokens": 128}


def cells(row: str) -> int:
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return len(re.split(r"(?<!\\)\|", row))


def table_spans(section: str, heading_line: bool) -> list[tuple[int, int, int]]:
    """(start, body start, end) of each pipe table in a section's text (GFM's rule): a
    header row (a line with a "|", not the section's heading line, outside fenced code)
    right before a separator row with as many cells, then each next line that has a "|"
    and is not blank. A line is read by its first LINE_LIMIT code points."""
    spans = []
    numbered = reference.lines(section)
    fence = None
    i = 0
    while i < len(numbered):
        start, line = numbered[i]
        content = reference.line_content(line)
        head = content[:LINE_LIMIT]
        if fence is not None:        # the section scanner's rule for fenced code
            closing = re.match(r" {0,3}(`+|~+)", head)
            if (closing and closing.group(1)[0] == fence[0]
                    and len(closing.group(1)) >= len(fence)
                    and content[closing.end():].strip() == ""):
                fence = None
            i += 1
            continue
        opening = reference.FENCE.match(head)
        if opening:
            fence = opening.group(1)
            i += 1
            continue
        if i + 1 < len(numbered) and not (heading_line and i == 0):
            separator = reference.line_content(numbered[i + 1][1])
            if ("|" in content and "|" in separator and len(line) <= LINE_LIMIT
                    and len(numbered[i + 1][1]) <= LINE_LIMIT
                    and SEPARATOR_ROW.fullmatch(separator)
                    and cells(content) == cells(separator)):
                last = i + 1
                while (last + 1 < len(numbered) and "|" in numbered[last + 1][1][:LINE_LIMIT]
                       and numbered[last + 1][1].strip()):
                    last += 1
                body = numbered[i + 2][0] if i + 2 <= last else len(section)
                spans.append((start, body, numbered[last][0] + len(numbered[last][1])))
                i = last + 1
                continue
        i += 1
    return spans


def table_chunks(table: str, prefix: str, unit: str, size: int,
                 overlap: int) -> list[tuple[tuple[int, int], str, str | None]]:
    """(where it starts in the table, text, embed_text) of each chunk of a table: its
    rows taken
    while the chunk's embed_text fits (a piece that starts after the header row is
    embedded under the header and separator rows, unless those and the prefix take more
    than half the size); a row that does not fit alone is LangChain's split at the size
    less what goes before it (embed_text None: that, or a shorter prefix and the text
    alone, within the size). A piece of rows starts at a known offset, a piece of a row
    somewhere in the row: (first, last) offsets it may start at."""
    length = unit_length(unit)
    rows = reference.lines(table)
    header = rows[0][1].strip() + "\n" + rows[1][1].strip() + "\n"
    if 2 * length(prefix + header) > size:
        header = ""

    def before(start: int) -> str:
        return prefix + ("" if start == 0 else header)

    def fits(start: int, end: int) -> bool:
        return length(before(start) + table[start:end].strip()) <= size

    chunks: list[tuple[tuple[int, int], str, str | None]] = []

    def piece(start: int, end: int) -> None:
        text = table[start:end]
        offset = start + len(text) - len(text.lstrip())
        chunks.append(((offset, offset), text.strip(), before(start) + text.strip()))

    filling = None
    for start, row in rows:
        end = start + len(row)
        if filling is not None and fits(filling, end):
            continue
        if filling is not None:
            piece(filling, start)
            filling = None
        if len(row) <= MAX_CHARS[unit] * size and fits(start, end):
            filling = start
            continue
        room = size - length(before(start))
        for text in langchain_chunks(row, room, min(overlap, room - 1), unit):
            fitted = before(start) + text
            chunks.append(((start, end - 1), text, fitted if length(fitted) <= size else None))
    if filling is not None:
        piece(filling, len(table))
    return chunks


def check_embedded(text: str, chunks: list[chunkd.Chunk], unit: str, size: int,
                   overlap: int, strip_headings: bool) -> None:
    """With embed_text: each section's text between its tables is LangChain's split of it
    at the size less the section's prefix, and each table gives ``table_chunks``; each
    embed_text is the prefix (and a table's header) then the text, within the size (a
    text longer than its room, as LangChain's chunks can be, gets a shorter prefix that
    fits with it, or none)."""
    length = unit_length(unit)
    rest = list(chunks)
    for section, headings, start, end in section_texts(text, strip_headings):
        tables = table_spans(section, bool(headings) and not strip_headings)
        prefix = contract_prefix(headings, unit, size)
        if prefix is None:       # any cut that fits: the one used (the longest, as a
            bodies = [(start + body, start + table_end) for _, body, table_end in tables]
            mine = [c.embed_text.removesuffix(c.text)
                    for c in itertools.takewhile(lambda c: c.start < end, rest)
                    if not any(body <= c.start < table_end for body, table_end in bodies)]
            if not mine:         # chunk whose text is longer than its room has a shorter)
                continue
            prefix = max(mine, key=len)
            check_cut_prefix(prefix, headings, size)
        room = size - length(prefix)
        done = 0
        for table_start, _, table_end in [*tables, (len(section), None, len(section))]:
            for expected in langchain_chunks(section[done:table_start], room,
                                             min(overlap, room - 1), unit):
                chunk = rest.pop(0)
                assert (chunk.text, chunk.headings) == (expected, headings)
                assert start + done <= chunk.start and chunk.end <= start + table_start
                if length(chunk.text) <= room:
                    assert chunk.embed_text == prefix + chunk.text
                    assert length(chunk.embed_text) <= size
                else:   # longer than its room, as LangChain's chunks can be in tokens:
                    shorter = chunk.embed_text.removesuffix(chunk.text)   # a shorter prefix
                    assert chunk.embed_text == shorter + chunk.text and len(shorter) <= len(prefix)
                    assert length(chunk.embed_text) <= size or shorter == ""
            if table_start == len(section):
                break
            table = section[table_start:table_end]
            for (first, last), expected, embed_text in table_chunks(table, prefix, unit, size,
                                                                    overlap):
                chunk = rest.pop(0)
                assert (chunk.text, chunk.headings) == (expected, headings)
                assert first <= chunk.start - start - table_start <= last
                if embed_text is not None:
                    assert chunk.embed_text == embed_text
                else:   # a row's piece with what goes before it would be too long
                    shorter = chunk.embed_text.removesuffix(chunk.text)
                    assert chunk.embed_text == shorter + chunk.text and len(shorter) <= len(prefix)
                    assert length(chunk.embed_text) <= size or shorter == ""
            done = table_end
    assert rest == []


def check_markdown(text: str, pieces: list[str], unit: str, size: int, overlap: int,
                   strip_headings: bool = False) -> None:
    for embed_text in (False, True):
        splitter = chunkd.Splitter(size, overlap, unit=unit, strategy="markdown",
                                   strip_headings=strip_headings, embed_text=embed_text)
        chunks = [c for piece in pieces for c in splitter.feed(piece)] + splitter.finish()
        for index, chunk in enumerate(chunks):
            assert chunk.index == index
            assert text[chunk.start:chunk.end] == chunk.text
        if embed_text:
            check_embedded(text, chunks, unit, size, overlap, strip_headings)
            continue
        expected = expected_chunks(text, unit, size, overlap, strip_headings)
        assert [(c.text, c.headings) for c in chunks] == [(t, h) for t, h, _, _ in expected]
        for chunk, (_, headings, start, end) in zip(chunks, expected, strict=True):
            assert start <= chunk.start and chunk.end <= end       # never across a section
            assert chunk.embed_text is None
