"""The recursive strategy: LangChain's RecursiveCharacterTextSplitter, compiled and
streaming (``chunkd._kernel``), in code points or cl100k_base tokens."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from chunkd.errors import SettingsError
from chunkd.strategies.base import Chunker, Strategy, register
from chunkd.units import length_counter

if TYPE_CHECKING:
    from chunkd.settings import Settings

#: ``Settings.keep_separator`` -> the kernel's (LangChain's) ``keep_separator``.
KEEP_SEPARATOR = {"end": "end", "start": "start", "none": False}


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
        from chunkd.fallback import checked_arguments

        try:
            checked_arguments(settings.size, settings.overlap, separators(settings),
                              KEEP_SEPARATOR[settings.keep_separator], merge_long=False)
        except ValueError as error:
            raise SettingsError(str(error)) from None

    @classmethod
    def splitter(cls, settings: Settings) -> Chunker:
        from chunkd._kernel import RecursiveSplitter

        return RecursiveSplitter(settings.size, settings.overlap,
                                 separators=separators(settings),
                                 keep_separator=KEEP_SEPARATOR[settings.keep_separator],
                                 strip_whitespace=settings.strip_whitespace,
                                 counter=length_counter(settings.unit))


def separators(settings: Settings) -> list[str | re.Pattern]:
    """The kernel's separators for ``settings``: literal strings, or compiled patterns
    when they are regular expressions (a ``language``'s always are)."""
    from chunkd._kernel import SEPARATORS
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
