"""The recursive strategy: LangChain's RecursiveCharacterTextSplitter, compiled and
streaming (``chunkd.kernel.chosen``), in code points or cl100k_base tokens."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from chunkd.model.errors import SettingsError
from chunkd.options import Flag, Option, choice, not_unicode, register_option, shown, switch
from chunkd.model.chunker import DocumentChunker
from chunkd.strategies.base import Strategy, register

if TYPE_CHECKING:
    from chunkd.strategies.base import SettingsView

#: ``keep_separator`` -> the kernel's (LangChain's) ``keep_separator``: at the "end" of the
#: piece before it, at the "start" of the piece after it, or nowhere ("none").
KEEP_SEPARATOR: dict[str, Literal["start", "end"] | bool] = {
    "end": "end", "start": "start", "none": False}


# --- the recursive family's own options (the markdown strategy cuts with them too) -----

def _takes_separators(kind: type[Strategy]) -> bool:
    return not kind.window


_NO_SEPARATORS = ("the {strategy} strategy takes no separators ({option}): they are for "
                  "the recursive strategies")


def _check_separators(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value \
            or not all(isinstance(s, str) for s in value):
        raise SettingsError(f"{name} must be a non-empty list of strings, not {value!r}")
    problem = not_unicode(value)
    if problem:
        raise SettingsError(f"{name}: {problem}")
    return tuple(value)


def _separators_value(text: str) -> list[str]:
    """``--separators``: a JSON list of strings."""
    import json  # only where the option is given: not at every start

    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error}): {shown(text)}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError(f"JSON nested too deeply: {shown(text)}") from None
    if not isinstance(value, list) or not value or not all(isinstance(s, str) for s in value):
        raise argparse.ArgumentTypeError(f"not a non-empty JSON list of strings: {shown(text)}")
    problem = not_unicode(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def _as_list(separators: tuple[str, ...] | None) -> list[str] | None:
    """Separators as results record them: a JSON list."""
    return None if separators is None else list(separators)


def _check_language(value: Any, name: str) -> str:
    from chunkd.strategies.languages import LANGUAGE_SEPARATORS

    if value not in LANGUAGE_SEPARATORS:
        if value == "perl":
            raise SettingsError("LangChain has no separators for perl")
        raise SettingsError(f"unknown language {value!r}; choose one of "
                            f"{', '.join(LANGUAGE_SEPARATORS)}")
    return value


def _one_source(values: Mapping[str, Any], spell: Callable[[str], str]) -> None:
    """The separators come from ``separators`` or from a ``language``, and only given
    separators can be made regular expressions."""
    if values["separators"] is not None and values["language"] is not None:
        raise SettingsError(f"{spell('separators')} and {spell('language')} exclude each "
                            "other: give one")
    if values["separator_regex"] and values["separators"] is None:
        raise SettingsError(f"{spell('separator_regex')} applies to {spell('separators')}: "
                            "give them too (a language's separators are regular expressions "
                            "already)")


def _keep_default(values: Mapping[str, Any]) -> str:
    """Where separators go unless told: as LangChain's ``from_language`` puts them for a
    language (at the start of a piece: ``def`` opens its function), else at the end of
    a piece (a full stop closes its sentence)."""
    return "start" if values.get("language") is not None else "end"


#: The separators, coarsest first (None: chunkd's fourteen, ``chunkd.SEPARATORS``); ""
#: splits into code points.
SEPARATOR_LIST = register_option(Option[tuple[str, ...] | None](
    None, "the separators", name="separators", check=_check_separators, to_json=_as_list,
    applies=_takes_separators, refusal=_NO_SEPARATORS, flags=(
        Flag("--separators", "recursive strategies: the separators, coarsest first, as a "
                             """JSON list ('["\\n\\n", "\\n", " ", ""]'; "" splits into """
                             "characters); default: chunkd's fourteen", metavar="JSON",
             parse=_separators_value),)))
#: The separators are regular expressions (LangChain's ``is_separator_regex``).
SEPARATOR_REGEX = register_option(Option[bool](
    False, "the separators are regular expressions", name="separator_regex", check=switch,
    applies=_takes_separators, refusal=_NO_SEPARATORS, flags=(
        Flag("--separator-regex", "the --separators are regular expressions "
                                  "(Python's re)"),)))
#: LangChain's separators for a programming or markup language (``from_language``;
#: regular expressions), instead of ``separators``.
LANGUAGE = register_option(Option[str | None](
    None, "LangChain's separators for a language", name="language", check=_check_language,
    check_with=_one_source, applies=_takes_separators, refusal=_NO_SEPARATORS, flags=(
        Flag("--language", "LangChain's separators for source code or markup "
                           "(from_language): python, js, markdown, ...", metavar="NAME",
             parse=str),)))
#: Where a separator goes (``KEEP_SEPARATOR``); None: "start" with a ``language``, as in
#: LangChain's ``from_language``, else "end".
KEEP = register_option(Option[str](
    None, "where a separator goes", name="keep_separator", check=choice(*KEEP_SEPARATOR),
    implied=_keep_default, applies=_takes_separators, refusal=_NO_SEPARATORS, flags=(
        Flag("--keep-separator", "where a separator goes: at the end of the chunk it "
                                 "closes, at the start of the one it opens, or none "
                                 "(default: start with --language, else end)",
             choices=tuple(KEEP_SEPARATOR)),)))
#: Strip white space around chunks (LangChain's ``strip_whitespace``).
STRIP_WHITESPACE = register_option(Option[bool](
    True, "strip white space around chunks", name="strip_whitespace", check=switch,
    applies=_takes_separators, refusal=_NO_SEPARATORS, flags=(
        Flag("--no-strip", "keep the white space around chunks (LangChain's "
                           "strip_whitespace=False)", const=False),)))


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
    def check(cls, settings: SettingsView) -> None:
        from chunkd.kernel.splitting import checked_arguments

        try:
            checked_arguments(settings.chunk_size, settings.chunk_overlap, separators(settings),
                              KEEP_SEPARATOR[settings[KEEP]], merge_long=False)
        except ValueError as error:
            raise SettingsError(str(error)) from None

    @classmethod
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        from chunkd.kernel.chosen import RecursiveSplitter

        return RecursiveSplitter(settings.chunk_size, settings.chunk_overlap,
                                 separators=separators(settings),
                                 keep_separator=KEEP_SEPARATOR[settings[KEEP]],
                                 strip_whitespace=settings[STRIP_WHITESPACE],
                                 unit=settings.measure)


def separators(settings: SettingsView) -> list[str | re.Pattern]:
    """The kernel's separators for ``settings``: literal strings, or compiled patterns
    when they are regular expressions (a ``language``'s always are)."""
    from chunkd.kernel.splitting import SEPARATORS
    from chunkd.strategies.languages import LANGUAGE_SEPARATORS

    language, given = settings[LANGUAGE], settings[SEPARATOR_LIST]
    if language is not None:
        texts, regex = LANGUAGE_SEPARATORS[language], True
    elif given is not None:
        texts, regex = given, settings[SEPARATOR_REGEX]
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
