"""Where each chunk is: LangChain's splitting written out plainly on text that carries
the document offset of every code point.

A transcription of ``_split_text``, ``_split_text_with_regex``, ``_merge_splits`` and
``_join_docs`` (langchain-text-splitters 1.1, character.py and base.py) in which a
string is a ``Text``: its characters and, for each, where it is in the document. The
chunk texts must equal LangChain's (the tests check it), and then the offsets are
the truth to compare ``start_index`` with. Nothing here comes from chunkd.

A separator that LangChain drops and puts back between merged pieces (keep_separator
False) has no place of its own in the document: its code points are given the
offsets that follow the piece before it (where that separator occurrence starts).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple


class Text(NamedTuple):
    text: str
    offsets: tuple[int, ...]

    def __getitem__(self, index: slice) -> Text:  # slices only
        return Text(self.text[index], self.offsets[index])

    def __add__(self, other: Text) -> Text:
        return Text(self.text + other.text, self.offsets + other.offsets)


def document(text: str) -> Text:
    return Text(text, tuple(range(len(text))))


def split_with_regex(text: Text, pattern: str, keep: bool | str) -> list[Text]:
    """``_split_text_with_regex``: the pieces between the pattern's matches, each
    separator at the end of the piece before it ("end"), at the start of the piece
    after it (any other true value) or dropped; empty pieces dropped."""
    if not pattern:
        return [text[i:i + 1] for i in range(len(text.text))]
    bounds = [(m.start(), m.end()) for m in re.finditer(pattern, text.text)]
    between = [text[a:b] for a, b in zip([0] + [end for _, end in bounds],
                                         [start for start, _ in bounds] + [len(text.text)])]
    separators = [text[a:b] for a, b in bounds]
    if not keep:
        pieces = between
    elif keep == "end":
        pieces = [s + d for s, d in zip(between, separators)] + [between[-1]]
    else:
        pieces = [between[0]] + [d + s for d, s in zip(separators, between[1:])]
    return [piece for piece in pieces if piece.text]


class Splitter:
    """LangChain's RecursiveCharacterTextSplitter (or, ``character``, its
    CharacterTextSplitter with one separator) on ``Text``."""

    def __init__(self, separators: list[str], *, chunk_size: int, chunk_overlap: int,
                 keep_separator: bool | str, is_separator_regex: bool,
                 strip_whitespace: bool = True, length_function: Callable = len,
                 character: bool = False) -> None:
        self.separators, self.keep, self.regex = separators, keep_separator, is_separator_regex
        self.size, self.overlap, self.strip = chunk_size, chunk_overlap, strip_whitespace
        self.length, self.character = length_function, character

    def chunks(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, text) of each chunk: the document offsets of its first code
        point and after its last."""
        whole = document(text)
        found = self.split_character(whole) if self.character else self.split(whole, self.separators)
        return [(t.offsets[0], t.offsets[-1] + 1, t.text) for t in found]

    def pattern(self, separator: str) -> str:
        return separator if self.regex else re.escape(separator)

    def split_character(self, text: Text) -> list[Text]:
        (separator,) = self.separators
        splits = split_with_regex(text, self.pattern(separator), self.keep)
        lookaround = self.regex and separator.startswith(("(?=", "(?<!", "(?<=", "(?!"))
        return self.merge(splits, "" if self.keep or lookaround else separator)

    def split(self, text: Text, separators: list[str]) -> list[Text]:
        separator, rest = separators[-1], []
        for i, candidate in enumerate(separators):
            if not candidate:
                separator = candidate
                break
            if re.search(self.pattern(candidate), text.text):
                separator, rest = candidate, separators[i + 1:]
                break
        splits = split_with_regex(text, self.pattern(separator), self.keep)
        merge_separator = "" if self.keep else separator
        chunks, good = [], []
        for piece in splits:
            if self.length(piece.text) < self.size:
                good.append(piece)
                continue
            if good:
                chunks += self.merge(good, merge_separator)
                good = []
            chunks += self.split(piece, rest) if rest else [piece]
        if good:
            chunks += self.merge(good, merge_separator)
        return chunks

    def join(self, pieces: list[Text], separator: str) -> Text | None:
        """``_join_docs``: the pieces joined with the separator, stripped."""
        joined = pieces[0]
        for piece in pieces[1:]:
            # The separator's k-th code point is the k-th of the document between the
            # two pieces, or the last of them where fewer are there (a pattern's source
            # joins pieces cut at its matches), or the piece's last where none is.
            after, following = joined.offsets[-1] + 1, piece.offsets[0]
            between = tuple(min(after + k, max(following, after) - 1)
                            for k in range(len(separator)))
            joined = joined + Text(separator, between) + piece
        if self.strip:
            lead = len(joined.text) - len(joined.text.lstrip())
            joined = joined[lead:lead + len(joined.text.strip())]
        return joined if joined.text else None

    def merge(self, splits: list[Text], separator: str) -> list[Text]:
        """``_merge_splits``, line for line."""
        separator_len = self.length(separator)
        docs, current, total = [], [], 0
        for d in splits:
            len_ = self.length(d.text)
            if total + len_ + (separator_len if current else 0) > self.size:
                if current:
                    doc = self.join(current, separator)
                    if doc is not None:
                        docs.append(doc)
                    while total > self.overlap or (
                            total + len_ + (separator_len if current else 0) > self.size
                            and total > 0):
                        total -= self.length(current[0].text) + (
                            separator_len if len(current) > 1 else 0)
                        current = current[1:]
            current.append(d)
            total += len_ + (separator_len if len(current) > 1 else 0)
        doc = self.join(current, separator) if current else None
        if doc is not None:
            docs.append(doc)
        return docs
