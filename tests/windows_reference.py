"""A plain reference of the window strategies, written from the contract
(docs/strategies.md, "Window strategies"), not from chunkd: slow, whole-text, obviously correct.

Units are (start, end) offsets into the text; sections carry their headings too.
Graphemes come from the ``regex`` module's ``\\X``, the oracle the contract names.
"""

from __future__ import annotations

import re

import regex

#: The contract's CJK ranges, inclusive.
CJK_RANGES = [(0x1100, 0x11FF), (0x2E80, 0x2FFF), (0x3001, 0x303F), (0x3040, 0x31FF),
              (0x3200, 0x4DBF), (0x4E00, 0x9FFF), (0xA960, 0xA97F), (0xAC00, 0xD7FF),
              (0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x20000, 0x3FFFF)]
CJK_CLASS = "".join(f"\\U{first:08x}-\\U{last:08x}" for first, last in CJK_RANGES)
TERMINAL_MARKS = ".!?。！？．｡"
ASCII_TERMINAL_MARKS = ".!?"
CLOSING_MARKS = "\"'”’)]}」』）】》〉"


CJK = re.compile(f"[{CJK_CLASS}]")


def estimated_tokens(text: str) -> int:
    cjk = len(CJK.findall(text))
    return (105 * cjk + 25 * (len(text) - cjk) + 99) // 100


# --- units -----------------------------------------------------------------------------

def grapheme_units(text: str) -> list[tuple[int, int]]:
    return [match.span() for match in regex.finditer(r"\X", text)]


WORD = re.compile(f"[^\\s{CJK_CLASS}]+|[{CJK_CLASS}]")


def word_units(text: str) -> list[tuple[int, int]]:
    # Python's \s on str is str.isspace, the contract's white space.
    return [match.span() for match in WORD.finditer(text)]


def lines(text: str) -> list[tuple[int, str]]:
    """Each line's start offset and text, its \\n included (the last may have none)."""
    out, start = [], 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        out.append((start, text[start:end]))
        start = end
    return out


TERMINAL_RUN = re.compile(f"[{re.escape(TERMINAL_MARKS)}]+[{re.escape(CLOSING_MARKS)}]*")


def sentence_units(text: str) -> list[tuple[int, int]]:
    units = []
    for line_start, line in lines(text):
        content = line.removesuffix("\n")
        ends = []   # where sentences end in the line
        for run in TERMINAL_RUN.finditer(content):
            marks = run.group().rstrip(CLOSING_MARKS)
            full_width = any(mark not in ASCII_TERMINAL_MARKS for mark in marks)
            followed_by_white = run.end() == len(content) or content[run.end()].isspace()
            if full_width or followed_by_white:
                ends.append(run.end())
        ends.append(len(content))          # the text after the last sentence
        start = 0
        for end in ends:
            piece = content[start:end]
            if piece.strip():
                first = start + len(piece) - len(piece.lstrip())
                last = start + len(piece.rstrip())
                units.append((line_start + first, line_start + last))
            start = end
    return units


def line_content(line: str) -> str:
    """A line without its ending: \\n, and a \\r before it."""
    return line.removesuffix("\n").removesuffix("\r") if line.endswith("\n") else line


HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t](.*))?\Z", re.DOTALL)
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


#: The contract's bound on a heading in a path, in code points.
HEADING_LIMIT = 256


def capped(title: str) -> str:
    """A heading longer than the bound: its grapheme clusters while they fit in one
    code point less, then "…"."""
    if len(title) <= HEADING_LIMIT:
        return title
    kept = ""
    for cluster in regex.findall(r"\X", title):
        if len(kept) + len(cluster) > HEADING_LIMIT - 1:
            break
        kept += cluster
    return kept + "\u2026"


def heading_title(rest: str) -> str:
    rest = rest.rstrip()
    without_closing = rest.rstrip("#")
    if without_closing != rest and (without_closing == "" or without_closing[-1] in " \t"):
        rest = without_closing
    return capped(rest.strip())


def section_units(text: str) -> list[tuple[int, int, tuple[str, ...]]]:
    """(start, end, headings) of each section."""
    starts = []            # (offset, headings)
    open_fence = None      # the opening run of the fence in hand
    path: list[tuple[int, str]] = []
    for line_start, line in lines(text):
        content = line_content(line)
        if line_start == 0:                # a byte-order mark is no part of the first line
            content = content.removeprefix("\ufeff")
        if open_fence is not None:
            closing = re.match(r" {0,3}(`+|~+)", content)
            if (closing and closing.group(1)[0] == open_fence[0]
                    and len(closing.group(1)) >= len(open_fence)
                    and content[closing.end():].strip() == ""):
                open_fence = None
            continue
        fence = FENCE.match(content)
        if fence:
            open_fence = fence.group(1)
            continue
        heading = HEADING.match(content)
        if heading:
            level = len(heading.group(1))
            path = [(lv, title) for lv, title in path if lv < level]
            path.append((level, heading_title(heading.group(2) or "")))
            starts.append((line_start, tuple(title for _, title in path)))
    if not starts or starts[0][0] > 0:
        first = starts[0][0] if starts else len(text)
        if text[:first].strip():          # a byte-order mark is no white space
            starts.insert(0, (0, ()))
    ends = [start for start, _ in starts[1:]] + [len(text)]
    return [(start, end, headings) for (start, headings), end in zip(starts, ends)]


UNITS = {"graphemes": grapheme_units, "words": word_units, "sentences": sentence_units,
         "sections": section_units}


# --- windows ---------------------------------------------------------------------------

def windows(text: str, strategy: str, size: int, overlap: int) -> list[dict]:
    """The chunks of ``text``: windows of ``size`` units, each ``size - overlap`` units
    after the previous, until one holds the last unit; trimmed; empty ones dropped."""
    units = UNITS[strategy](text)
    chunks, first = [], 0
    while first < len(units):
        window = units[first:first + size]
        start, end = window[0][0], window[-1][1]
        raw = text[start:end]
        start += len(raw) - len(raw.lstrip())
        end -= len(raw) - len(raw.rstrip())
        if start < end:
            chunk = {"index": len(chunks), "start": start, "end": end,
                     "length": sum(1 for unit in window if unit[0] < end and unit[1] > start),
                     "text": text[start:end], "estimated_tokens": estimated_tokens(text[start:end])}
            if strategy == "sections":
                chunk["headings"] = window[0][2]
            chunks.append(chunk)
        if first + size >= len(units):
            break
        first += size - overlap
    return chunks
