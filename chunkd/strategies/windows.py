"""The window strategies: windows of ``size`` graphemes, words, sentences or Markdown
sections, ``overlap`` of them shared by neighbouring windows (``chunkd.kernel.chosen``).

Every record carries ``estimated_tokens``; sections records carry ``headings`` too.
The contract (units, trimming, length) is in docs/strategies.md, "Window strategies".
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, ClassVar

from chunkd.model.chunker import DocumentChunker
from chunkd.strategies.base import Strategy, register

if TYPE_CHECKING:
    from chunkd.strategies.base import SettingsView


class WindowStrategy(Strategy):
    """Windows of one unit; the size and the overlap count that unit."""

    window = True
    fields: ClassVar[tuple[str, ...]] = ("estimated_tokens",)
    #: The core's class that scans the units and makes the windows (``chunkd.kernel.chosen``).
    compiled: ClassVar[str]

    @classmethod
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        import chunkd.kernel.chosen

        return getattr(chunkd.kernel.chosen, cls.compiled)(settings.chunk_size, settings.chunk_overlap)


@register
class Graphemes(WindowStrategy):
    """Extended grapheme clusters (UAX #29, as the pinned ``regex`` module's ``\\X``)."""

    name = "graphemes"
    units = ("graphemes",)
    default_size = 1000          # as many as the recursive strategy's default characters

    @classmethod
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        from chunkd.kernel.chosen import GraphemeWindows

        return GraphemeWindows(settings.chunk_size, settings.chunk_overlap, grapheme_properties())


@register
class Words(WindowStrategy):
    """Runs of non-white code points that are not CJK; a CJK code point is a word."""

    name = "words"
    units = ("words",)
    default_size = 200           # about 260 tokens of English prose
    compiled = "WordWindows"


@register
class Sentences(WindowStrategy):
    """Sentences, line by line, ended by terminal marks and their closing marks."""

    name = "sentences"
    units = ("sentences",)
    default_size = 8             # a paragraph or two
    compiled = "SentenceWindows"


@register
class Sections(WindowStrategy):
    """Markdown sections, each from its ATX heading line to the next one."""

    name = "sections"
    units = ("sections",)
    default_size = 1             # one section a chunk, with its heading path
    fields = ("estimated_tokens", "headings")
    compiled = "SectionWindows"


@functools.lru_cache(maxsize=None)
def grapheme_properties() -> bytes:
    """One byte per code point for the grapheme scanner, built from the pinned
    ``regex`` module's own Unicode tables, so that the scanner and ``regex``'s ``\\X``
    (the tests' oracle) agree on every code point: the Grapheme_Cluster_Break value in
    the low four bits, Indic_Conjunct_Break in the next two, Extended_Pictographic in
    bit 6 (``chunkd.kernel.chosen`` names them). Built once a process (0.13 s here)."""
    import array

    import regex

    from chunkd.kernel.chosen import CONJUNCT_BREAK_VALUES, GRAPHEME_BREAK_VALUES, PICTOGRAPHIC_BIT

    # Every code point, lone surrogates included (a Python string may hold them).
    everything = array.array("I", range(0x110000)).tobytes().decode("utf-32-le",
                                                                   "surrogatepass")
    table = bytearray(0x110000)

    def mark(pattern: str, bits: int) -> None:
        for match in regex.finditer(pattern + "+", everything):
            start, end = match.span()
            table[start:end] = bytes(value | bits for value in table[start:end])

    for value, name in enumerate(GRAPHEME_BREAK_VALUES, 1):
        mark(rf"\p{{Grapheme_Cluster_Break={name}}}", value)
    for value, name in enumerate(CONJUNCT_BREAK_VALUES, 1):
        mark(rf"\p{{Indic_Conjunct_Break={name}}}", value << 4)
    mark(r"\p{Extended_Pictographic}", PICTOGRAPHIC_BIT)
    return bytes(table)
