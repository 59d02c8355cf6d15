"""The chunk record that every part of chunkd passes around."""

from __future__ import annotations

from typing import NamedTuple


class Chunk(NamedTuple):
    """One chunk of a document: ``document[start:end] == text``.

    ``start`` and ``end`` are offsets in code points (Python ``str`` indices);
    ``length`` is the size of ``text`` in the splitter's unit (code points or tokens).
    """

    index: int
    start: int
    end: int
    length: int
    text: str
