"""The rules the compiled splitters (``chunkd.kernel._kernel``, ``chunkd.kernel._windows``) share with
their pure-Python twins (``chunkd.kernel.twin``): the default separators, the checking of
their arguments, and the chunks of pieces joined with a dropped separator."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

try:
    from re import _parser as _regex_parser  # type: ignore[attr-defined]  # Python 3.11+
except ImportError:
    import sre_parse as _regex_parser        # Python 3.10

#: chunkd's separators, coarsest first; "" splits into code points (``chunkd.SEPARATORS``).
SEPARATORS = ("\n\n", "\n", "。", "！", "？", ". ", "! ", "? ", "；", "; ", "，", ", ", " ", "")


def check_window(size: int, overlap: int) -> None:
    """Check a window splitter's size and overlap (in its units)."""
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must be at least 0 and smaller than size ({size}), "
                         f"got {overlap}")


def checked_arguments(chunk_size: int, chunk_overlap: int,
                      separators: Iterable[str | re.Pattern], keep_separator: bool | str,
                      merge_long: bool) -> tuple[str | bool, list[str | re.Pattern]]:
    """Check the arguments both splitters take; return where the separator goes
    ("start", "end" or False) and the separators LangChain would use (none past "")."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    if not 0 <= chunk_overlap <= chunk_size:
        raise ValueError(f"chunk_overlap must be at least 0 and at most chunk_size "
                         f"({chunk_size}), got {chunk_overlap}")
    keep: str | bool
    if keep_separator is True or keep_separator == "start":
        keep = "start"
    elif keep_separator == "end" or keep_separator is False:
        keep = keep_separator
    else:
        raise ValueError(f"keep_separator must be True, 'start', 'end' or False, "
                         f"got {keep_separator!r}")
    used = []
    for separator in separators:
        if not isinstance(separator, (str, re.Pattern)) or not isinstance(separator_source(separator), str):
            raise TypeError(f"a separator is a str or a compiled str pattern, not {separator!r}")
        if isinstance(separator, re.Pattern) and separator.groups:
            raise ValueError(f"the separator pattern {separator.pattern!r} has capturing "
                             "groups: LangChain's split would repeat their text; write (?:...)")
        used.append(separator)
        if separator_source(separator) == "":
            break  # LangChain never looks past ""
    if not used:
        raise ValueError("give at least one separator")
    if merge_long and len(used) != 1:
        raise ValueError("merge_long splits with one separator only")
    return keep, used


class Joined(NamedTuple):
    """Where the code points of a chunk of pieces joined with a dropped separator come
    from: the pieces' offsets in the text they were cut from, the joining text's
    length, and the white space stripped from the joined text's start."""

    spans: tuple[tuple[int, int], ...]
    join_length: int
    lead: int

    def offset(self, at: int, place: Callable[[int], int] | None = None) -> int:
        """The offset of the chunk's code point ``at``: a piece's code point where it
        is; a joining separator's code point in the text between its piece and the
        next, its k-th code point at the k-th of that text, or at the last one where the
        text there is shorter than the join (a regular expression's source joins pieces
        cut at its matches, of any length) or at the piece's last code point where there
        is none: always a code point of the text, never before the previous one.
        ``place``: the document offset of each offset of the text the pieces were cut
        from (a parent's text, for its children); by default they are document offsets."""
        at += self.lead
        spans = self.spans
        for number, (start, end) in enumerate(spans):
            if at < end - start:
                local = start + at
            elif at - (end - start) < self.join_length:
                following = spans[number + 1][0]
                local = min(end + at - (end - start), max(following, end) - 1)
            else:
                at -= end - start + self.join_length
                continue
            return local if place is None else place(local)
        raise AssertionError("offset past the joined text")


def joined_chunk(buffer: str, base: int, spans: list[tuple[int, int]], join: str,
                 strip: bool) -> tuple[int, int, str, Joined] | None:
    """LangChain's chunk of the document pieces ``spans`` joined with ``join`` (the
    dropped separator) and stripped if ``strip``, with the document offsets of its
    first code point and after its last, and where its code points come from; None if
    it is empty. ``buffer`` holds the document from offset ``base``."""
    texts = [buffer[start - base:end - base] for start, end in spans]
    joined = join.join(texts)
    text = joined.strip() if strip else joined
    if not text:
        return None
    placed = Joined(tuple(spans), len(join),
                    len(joined) - len(joined.lstrip()) if strip else 0)
    return placed.offset(0), placed.offset(len(text) - 1) + 1, text, placed


def separator_source(separator: str | re.Pattern) -> str:
    """A separator's text: the literal, or the pattern's source."""
    return separator if isinstance(separator, str) else separator.pattern


@functools.lru_cache(maxsize=1024)  # splitters are built often: parse each pattern once
def literal_text(pattern: re.Pattern) -> str | None:
    """The text a compiled regular expression matches, if it is a plain literal
    (``"\\nclass "``, ``"\\nsetClass\\("``), else None.

    Such a pattern matches exactly where its text occurs, so its level searches the
    text as a literal and streams. The pattern is read by Python's own parser, so
    escapes, ``{`` and non-capturing groups mean what ``re`` makes of them."""
    if pattern.flags & ~int(re.UNICODE):
        return None
    try:
        parsed = _regex_parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # a private module: if it ever changes, use the regex as it is
        return None
    codes = []
    for op, argument in parsed:
        if op != _regex_parser.LITERAL:
            return None
        codes.append(chr(argument))
    return "".join(codes) or None
