"""The recursive strategy: LangChain's RecursiveCharacterTextSplitter, compiled and
streaming (``chunkd.core``), in code points or cl100k_base tokens."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from chunkd.errors import SettingsError
from chunkd.strategies.base import Chunker, Strategy, register
from chunkd.units import resolve

if TYPE_CHECKING:
    from chunkd.settings import Settings

#: ``Settings.keep_separator`` -> the kernel's (LangChain's) ``keep_separator``.
KEEP_SEPARATOR: dict[str, Literal["start", "end"] | bool] = {
    "end": "end", "start": "start", "none": False}


@register
class Recursive(Strategy):
    """Blank lines, then lines, sentence ends, clauses, spaces, characters (or the
    separators given); short pieces merged greedily up to the size (LangChain's
    ``_merge_splits``)."""

    name = "recursive"
    units = ("chars", "tokens")
    default_size = 1000
    parents = True

    @classmethod
    def default_overlap(cls, size: int) -> int:
        return size // 10

    @classmethod
    def check(cls, settings: Settings) -> None:
        from chunkd.splitting import checked_arguments

        try:
            checked_arguments(settings.chunk_size, settings.chunk_overlap, separators(settings),
                              KEEP_SEPARATOR[settings.separator_place], merge_long=False)
        except ValueError as error:
            raise SettingsError(str(error)) from None

    @classmethod
    def splitter(cls, settings: Settings) -> Chunker:
        from chunkd.core import RecursiveSplitter

        return RecursiveSplitter(settings.chunk_size, settings.chunk_overlap,
                                 separators=separators(settings),
                                 keep_separator=KEEP_SEPARATOR[settings.separator_place],
                                 strip_whitespace=settings.strip_whitespace,
                                 unit=resolve(settings.length_unit))


def separators(settings: Settings) -> list[str | re.Pattern]:
    """The kernel's separators for ``settings``: literal strings, or compiled patterns
    when they are regular expressions (a ``language``'s always are)."""
    from chunkd.splitting import SEPARATORS
    from chunkd.strategies.languages import LANGUAGE_SEPARATORS

    if settings.language is not None:
        texts, regex = LANGUAGE_SEPARATORS[settings.language], True
    elif settings.separators is not None:
        texts, regex = settings.separators, settings.separator_regex
    else:
        texts, regex = SEPARATORS, False
    return [compile_separator(text) if regex else text for text in texts]


def compile_separator(text: str) -> re.Pattern | str:
    """A regular-expression separator, compiled; "" stays "" (code points, as in
    LangChain, which tests for "" before using a separator as a pattern)."""
    if not text:
        return text
    try:
        return re.compile(text)
    except re.error as error:
        raise SettingsError(f"the separator {text!r} is not a regular expression: "
                            f"{error}") from None
