"""How to chunk: every setting declared once, with everything that is known about it.

Each setting is an ``Option``: its type, default, the command-line flags that set it
(``Flag``: spelling, metavar, help, how its value updates the settings), the strategies
that take it, its check, how results record it, whether a ``chunkd serve`` request may
set it and whether ``chunkd eval`` takes a comma list of it. The parser of every
command, the checks, ``Settings``, the daemon's record of settings, serve's query
parameters and ``/api/config``, eval's grid and docs/options.md all read the
declarations. The common settings are declared on ``Settings`` below; a strategy
declares its own in its module and registers them (``register_option``).

Raw options (flags and their values, a query's parameters, a grid point) become
``Settings`` once, through ``settings_from_flags``; nothing goes back through argv.
``Settings.as_dict()`` is what the daemon records in each result and compares to decide
whether the result is current.
"""

from __future__ import annotations

import argparse
import enum
import json
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, overload

from chunkd.errors import SettingsError as SettingsError  # reached from here too

if TYPE_CHECKING:
    from chunkd.strategies.base import Strategy

T = TypeVar("T")

#: Sizes beyond this are refused: no document has that many units, and the kernel
#: counts in 64-bit integers.
MAX_SIZE = 10**12
ERRORS = ("strict", "replace")
#: Where a separator goes: at the "end" of the piece before it, at the "start" of the
#: piece after it, or nowhere ("none"): LangChain's keep_separator "end", True, False.
KEEP_SEPARATOR = ("end", "start", "none")


class Record(enum.Enum):
    """How results record a setting (``Settings.as_dict``). Settings recorded ``ALWAYS``
    come first, then those recorded when ``SET`` (differing from their default), so that
    a new option does not make every earlier result look stale."""

    ALWAYS = "always"
    SET = "set"
    NEVER = "never"


@dataclass(frozen=True)
class Flag:
    """One command-line spelling of a setting, ripgrep-style: its spelling, what it
    takes, its help, and how its value updates the settings being made (``Draft``).
    ``chunkd serve`` takes the flags of settings a request may set as query parameters
    of the same name without the dashes."""

    spelling: str
    #: Its help (a function: help that names what is registered, such as the strategies).
    help: str | Callable[[], str]
    #: How a given value updates the draft; the default sets the option to the value.
    update: Callable[[Draft, Any], None] | None = None
    metavar: str | None = None
    #: Reads a value as written (``argparse``'s ``type``); None: a switch, no value.
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    #: A switch's value when given.
    const: Any = True
    #: The arguments of this flag that give ``settings`` (a command line shown to a
    #: user); None: the value when it differs from the default.
    shown: Callable[[Settings], list[str]] | None = None

    @property
    def key(self) -> str:
        """The flag's name in a namespace, a query and a grid (``--parent-chars``:
        ``parent_chars``)."""
        return self.spelling.lstrip("-").replace("-", "_")

    def read(self, text: str) -> Any:
        """A value as written (a query parameter's), checked as the parser checks it."""
        if self.choices is not None and text not in self.choices:
            raise argparse.ArgumentTypeError(
                f"invalid choice: {text!r} (choose from {', '.join(map(repr, self.choices))})")
        return text if self.parse is None else self.parse(text)


class Option(Generic[T]):
    """One setting, declared once. On ``Settings`` it is an attribute typed ``T``; a
    strategy's own option is read as ``settings[OPTION]``."""

    def __init__(self, default: T | None, help: str, *, flags: tuple[Flag, ...] = (),
                 check: Callable[[Any, str], T] | None = None, record: Record = Record.SET,
                 implied: Callable[[Mapping[str, Any]], T] | None = None,
                 request: bool = False, grid: bool = False,
                 applies: Callable[[type[Strategy]], bool] | None = None,
                 refusal: str = "", to_json: Callable[[T], Any] | None = None,
                 noun: str | None = None, name: str = "") -> None:
        #: The API's keyword and the record's key.
        self.name = name
        self.default = default
        #: Its value when not given, where that depends on other settings.
        self.implied = implied
        self.help = help
        self.flags = flags
        self.check = check
        self.record = record
        #: Whether a ``chunkd serve`` request may set it (else it stays the server's).
        self.request = request
        #: Whether ``chunkd eval`` takes a comma list of its flags' values.
        self.grid = grid
        #: The strategies that take it (None: every one), and the message for the others
        #: (``{option}`` its spelling, ``{strategy}`` the strategy).
        self.applies = applies
        self.refusal = refusal
        self.to_json = to_json
        #: How messages about its value name it ("the size"); None: its spelling.
        self.noun = noun

    def default_in(self, values: Mapping[str, Any]) -> Any:
        """Its value when not given, among ``values``."""
        return self.default if self.implied is None else self.implied(values)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        register_option(self)

    @overload
    def __get__(self, settings: None, owner: type | None = None) -> Option[T]: ...
    @overload
    def __get__(self, settings: Settings, owner: type | None = None) -> T: ...

    def __get__(self, settings: Settings | None, owner: type | None = None) -> Option[T] | T:
        if settings is None:
            return self
        return settings._values[self.name]

    def __set__(self, settings: Settings, value: object) -> NoReturn:
        raise AttributeError(f"settings are immutable: use replace({self.name}=...)")

    def __repr__(self) -> str:
        return f"Option({self.name!r})"


#: Every option, in declaration order (the parsers' and the records' order).
OPTIONS: dict[str, Option[Any]] = {}


def register_option(option: Option[Any], after: str | None = None) -> Option[Any]:
    """Declare an option (a strategy's own, from its module): it is then a keyword of
    ``Settings``, its flags are every command's, and results record it. ``after`` puts
    it after that option in the parsers and the records."""
    if option.name in OPTIONS and OPTIONS[option.name] is not option:
        raise ValueError(f"the option {option.name!r} is declared twice")
    if after is None:
        OPTIONS[option.name] = option
    else:
        items = list(OPTIONS.items())
        place = [name for name, _ in items].index(after) + 1
        items.insert(place, (option.name, option))
        OPTIONS.clear()
        OPTIONS.update(items)
    return option


def flags() -> Iterator[tuple[Option[Any], Flag]]:
    """Every flag of every option, in declaration order."""
    for option in options():
        for flag in option.flags:
            yield option, flag


def options() -> list[Option[Any]]:
    """Every option, the strategies' own included (registered when they are imported)."""
    import chunkd.strategies  # noqa: F401  (the strategies register their options)

    return list(OPTIONS.values())


# --- checks of a value, whoever gives it ------------------------------------------------

def whole(least: int) -> Callable[[Any, str], int]:
    """A check: a whole number from ``least`` to ``MAX_SIZE``."""
    def check(value: Any, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"the {name} must be a whole number, not {value!r}")
        if value < least:
            raise SettingsError(f"the {name} must be at least {least}, got {value}")
        if value > MAX_SIZE:
            raise SettingsError(f"the {name} must be at most {MAX_SIZE}, got {value}")
        return value
    return check


def switch(value: Any, name: str) -> bool:
    """A check: True or False."""
    if not isinstance(value, bool):
        raise SettingsError(f"{name} must be True or False")
    return value


def choice(*choices: str) -> Callable[[Any, str], str]:
    """A check: one of ``choices``."""
    def check(value: Any, name: str) -> str:
        if value not in choices:
            raise SettingsError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
        return value
    return check


def not_unicode(separators: list[str] | tuple[str, ...]) -> str | None:
    """Why separators are not Unicode text, if one holds a lone surrogate (JSON can
    write one, ``"\\ud800"``): no decoded text holds one, and no result holding it can
    be written as UTF-8."""
    for separator in separators:
        for character in separator:
            if "\ud800" <= character <= "\udfff":
                return (f"{separator!r} holds a lone surrogate (U+{ord(character):04X}), "
                        "which is not Unicode text")
    return None


# --- reading a flag's value -----------------------------------------------------------

def number_value(text: str) -> int:
    """A whole number as an option value; its range is checked by ``Settings``."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def overlap_value(text: str) -> int | str:
    """An overlap: a whole number of units, or a percentage of the size (``15%``)."""
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
        if not 0 <= percent < 100:
            raise argparse.ArgumentTypeError(f"a percentage from 0 to under 100, got {text}")
        return text
    return number_value(text)


def shown(text: str) -> str:
    """An option's value in a message: at most 80 code points of it."""
    return repr(text) if len(text) <= 80 else repr(text[:80]) + f"... ({len(text)} code points)"


def percent_of(overlap: int | str | None, size: int) -> int | None:
    """An overlap flag's value in units: a percentage (``"15%"``) of ``size``."""
    if isinstance(overlap, str):
        return int(size * float(overlap[:-1]) // 100)
    return overlap


# --- how flags update the settings being made -------------------------------------------

class Draft:
    """Settings being made from flags: the flags given (by key), the values so far (by
    option name), and the strategy's class. Each given flag updates it in declaration
    order, so a flag may rely on the ones declared before it (an overlap on the size)."""

    def __init__(self, given: Mapping[str, Any], values: dict[str, Any]) -> None:
        self.given = given
        self.values = values

    @property
    def strategy(self) -> str:
        return self.values.get("strategy") or "recursive"

    @property
    def kind(self) -> type[Strategy]:
        from chunkd.strategies import strategy_class

        return strategy_class(self.strategy)


def set_strategy(draft: Draft, name: str) -> None:
    from chunkd.strategies import REGISTRY

    if name not in REGISTRY:
        raise SettingsError(f"--strategy {name}: unknown; choose one of {', '.join(REGISTRY)}")
    draft.values["strategy"] = name


def set_size_in(unit: str | None) -> Callable[[Draft, int], None]:
    """``--chars``/``--tokens`` (a recursive strategy's size and its unit), or, with
    None, ``--size`` (a window strategy's size, in its one unit)."""
    def update(draft: Draft, size: int) -> None:
        kind, strategy = draft.kind, draft.strategy
        if unit is None:
            if not kind.window:
                raise SettingsError(f"--size is for the window strategies; with --strategy "
                                    f"{strategy} write --chars N or --tokens N")
        else:
            if "chars" in draft.given and "tokens" in draft.given:
                raise SettingsError("--chars and --tokens exclude each other: give one size")
            if kind.window:
                raise SettingsError(f"--{unit} is for the recursive strategies; with --strategy "
                                    f"{strategy} write --size N ({kind.units[0]} a window)")
            draft.values["unit"] = unit
        draft.values["size"] = size
    return update


def set_overlap(draft: Draft, overlap: int | str) -> None:
    kind, size = draft.kind, draft.values.get("size")
    size_now = kind.default_size if size is None else size
    units = percent_of(overlap, size_now)
    assert units is not None
    if 1 <= size_now <= units:
        unit = draft.values.get("unit") or kind.units[0]
        given = (f"{size_now} {unit}" if size is not None else
                 f"{size_now} {kind.units[0]}, the default of --strategy {draft.strategy}")
        larger = "--size" if kind.window else f"--{unit}"
        raise SettingsError(f"--overlap {units} is not smaller than the size ({given}); "
                            f"write --overlap {size_now - 1} or less, or a larger {larger}")
    draft.values["overlap"] = units


def set_parent_size_in(unit: str) -> Callable[[Draft, int], None]:
    """``--parent-chars``/``--parent-tokens``: parents in the children's unit."""
    def update(draft: Draft, size: int) -> None:
        if "parent_chars" in draft.given and "parent_tokens" in draft.given:
            raise SettingsError("--parent-chars and --parent-tokens exclude each other")
        children = draft.values.get("unit") or "chars"
        if unit != children:
            raise SettingsError(f"parents are counted in the children's unit: with "
                                f"--{children} write --parent-{children} N")
        draft.values["parent_size"] = size
    return update


def set_parent_overlap(draft: Draft, overlap: int | str) -> None:
    parent_size = draft.values.get("parent_size")
    if parent_size is None:
        raise SettingsError("--parent-overlap needs --parent-chars or --parent-tokens")
    draft.values["parent_overlap"] = percent_of(overlap, parent_size)


def always_shown(option: str) -> Callable[[Settings], list[str]]:
    """A flag shown in every command line (``--strategy``, ``--overlap``)."""
    def arguments(settings: Settings) -> list[str]:
        return [f"--{option}", str(settings._values[option])]
    return arguments


def size_shown(unit: str | None) -> Callable[[Settings], list[str]]:
    """``--chars``/``--tokens``/``--size`` N, whichever gives the settings' size."""
    def arguments(settings: Settings) -> list[str]:
        from chunkd.strategies import strategy_class

        window = strategy_class(settings.strategy).window
        if (unit is None) == window and unit in (None, settings.unit):
            return [f"--{unit or 'size'}", str(settings.size)]
        return []
    return arguments


def _keep_default(values: Mapping[str, Any]) -> str:
    """Where separators go unless told: as LangChain's ``from_language`` puts them for a
    language (at the start of a piece: ``def`` opens its function), else at the end of
    a piece (a full stop closes its sentence)."""
    return "start" if values.get("language") is not None else "end"


def _check_separators(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value \
            or not all(isinstance(s, str) for s in value):
        raise SettingsError(f"{name} must be a non-empty list of strings, not {value!r}")
    problem = not_unicode(value)
    if problem:
        raise SettingsError(f"{name}: {problem}")
    return tuple(value)


def _check_language(value: Any, name: str) -> str:
    from chunkd.strategies.languages import LANGUAGE_SEPARATORS

    if value not in LANGUAGE_SEPARATORS:
        if value == "perl":
            raise SettingsError("LangChain has no separators for perl")
        raise SettingsError(f"unknown language {value!r}; choose one of "
                            f"{', '.join(LANGUAGE_SEPARATORS)}")
    return value


def _separators_value(text: str) -> list[str]:
    """``--separators``: a JSON list of strings."""
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


def _strategies_help() -> str:
    from chunkd.strategies import REGISTRY

    return (f"{', '.join(REGISTRY)} (default: recursive, LangChain's "
            "RecursiveCharacterTextSplitter)")


def _window_sizes_help() -> str:
    from chunkd.strategies import REGISTRY

    window = ", ".join(f"{name} {kind.default_size}" for name, kind in REGISTRY.items()
                       if kind.window)
    return f"window strategies: N units a window (default: {window})"


def _parent_shown(unit: str) -> Callable[[Settings], list[str]]:
    def arguments(settings: Settings) -> list[str]:
        if settings.parent_size is None or settings.unit != unit:
            return []
        return [f"--parent-{unit}", str(settings.parent_size)]
    return arguments


def _has_headings(kind: type[Strategy]) -> bool:
    return "headings" in kind.fields


def _not_window(kind: type[Strategy]) -> bool:
    return not kind.window


_NO_SEPARATORS = ("the {strategy} strategy takes no separators ({option}): they are for "
                  "the recursive strategies")


class Settings:
    """How documents become chunks: one value for every declared option (``OPTIONS``),
    checked and resolved; immutable, compared and hashed by value.

    ``size`` and ``overlap`` are in ``unit``: "chars" (code points) or "tokens"
    (cl100k_base) for the recursive strategies, the strategy's own unit (graphemes,
    words, sentences, sections) for the window strategies. Left as None, ``unit``,
    ``size`` and ``overlap`` take the strategy's defaults (see ``chunkd.strategies``).
    The keywords are the options' names; a strategy's own options are read as
    ``settings[OPTION]``.
    """

    strategy = Option[str](
        "recursive", "the strategy", record=Record.ALWAYS, request=True, grid=True,
        flags=(Flag("--strategy", _strategies_help, set_strategy, "NAME", str,
                    shown=always_shown("strategy")),))
    unit = Option[str](
        None, "the unit of the sizes and overlaps (None: the strategy's first)",
        record=Record.ALWAYS, request=True, check=lambda value, name: value)
    size = Option[int](
        None, "the largest chunk, in the unit (None: the strategy's default)",
        record=Record.ALWAYS, request=True, grid=True, check=whole(1), noun="size", flags=(
            Flag("--chars", "recursive strategies: at most N Unicode code points a chunk "
                            "(default: 1000)", set_size_in("chars"), "N", number_value,
                 shown=size_shown("chars")),
            Flag("--tokens", "recursive strategies: at most N cl100k_base tokens a chunk "
                             "(counted offline)", set_size_in("tokens"), "N", number_value,
                 shown=size_shown("tokens")),
            Flag("--size", _window_sizes_help, set_size_in(None), "N", number_value,
                 shown=size_shown(None))))
    overlap = Option[int](
        None, "units shared by neighbouring chunks (None: the strategy's default)",
        record=Record.ALWAYS, request=True, grid=True, check=whole(0), noun="overlap",
        flags=(Flag("--overlap", "units shared by neighbouring chunks, a number or a "
                                 "percentage of the size (15%%); smaller than the size "
                                 "(default: 10%% for recursive, 0 for window strategies)",
                    set_overlap, "M", overlap_value, shown=always_shown("overlap")),))
    #: Parent/child: children (``size``) are cut from parents of ``parent_size`` units
    #: (same unit) overlapping by ``parent_overlap``; each child records its parent.
    parent_size = Option[int | None](
        None, "parent/child: the parents' size, in the children's unit", request=True,
        grid=True, check=whole(1), noun="parent size",
        applies=lambda kind: kind.parents, refusal="the {strategy} strategy has no "
                                                   "parent/child mode", flags=(
            Flag("--parent-chars", "parent/child: cut parents of N code points, then the "
                                   "chunks (children) from each parent; with --chars",
                 set_parent_size_in("chars"), "N", number_value, shown=_parent_shown("chars")),
            Flag("--parent-tokens", "parent/child, in cl100k_base tokens; with --tokens",
                 set_parent_size_in("tokens"), "N", number_value,
                 shown=_parent_shown("tokens"))))
    parent_overlap = Option[int | None](
        None, "parent/child: units shared by neighbouring parents (None: 10%)", request=True,
        grid=True, check=whole(0), noun="parent overlap", flags=(
            Flag("--parent-overlap", "units shared by neighbouring parents, or a percentage "
                                     "of the parent size (default: 10%%)",
                 set_parent_overlap, "M", overlap_value),))
    #: Markdown: leave each section's heading line out of its chunks (it stays in
    #: ``headings``).
    strip_headings = Option[bool](
        False, "leave each section's heading line out of its chunks", check=switch,
        applies=lambda kind: kind.strips_headings,
        refusal="{option} is for --strategy markdown, not {strategy}", flags=(
            Flag("--strip-headings", "markdown: leave each section's heading line out of its "
                                     "chunks (it stays in \"headings\")"),))
    #: Add ``embed_text``: the heading path, then the chunk's text (strategies whose
    #: records carry ``headings``).
    embed_text = Option[bool](
        False, "add embed_text", check=switch, applies=_has_headings,
        refusal="{option} needs headings: write --strategy markdown or sections "
                "(--strategy {strategy} gives none)", flags=(
            Flag("--embed-text", "add \"embed_text\": the heading path (A > B > C), a blank "
                                 "line, then the chunk's text (markdown, sections)"),))
    #: Add each chunk's exact cl100k_base count as ``tokens``.
    count_tokens = Option[bool](
        False, "add tokens", check=switch, flags=(
            Flag("--count-tokens", "add each chunk's exact cl100k_base token count as "
                                   "\"tokens\""),))
    #: Add ``chunk_id``, each chunk's stable UUID (``chunkd.ids``), for vector-store upserts.
    ids = Option[bool](
        False, "add chunk_id", check=switch, flags=(
            Flag("--ids", "add \"chunk_id\": each chunk's stable UUID, from its document, "
                          "offsets and text, for vector-store upserts"),))
    #: Invalid UTF-8 in the input: "strict" (an error naming the byte) or "replace".
    errors = Option[str](
        "strict", "invalid UTF-8", record=Record.ALWAYS, request=True, check=choice(*ERRORS),
        flags=(Flag("--errors", "invalid UTF-8: an error naming the byte offset (strict, "
                                "default) or U+FFFD (replace)", choices=ERRORS),))
    #: Recursive strategies: the separators, coarsest first (None: chunkd's fourteen,
    #: ``chunkd.SEPARATORS``); "" splits into code points.
    separators = Option[tuple[str, ...] | None](
        None, "the separators", check=_check_separators, to_json=_as_list,
        applies=_not_window, refusal=_NO_SEPARATORS, flags=(
            Flag("--separators", "recursive strategies: the separators, coarsest first, as a "
                                 """JSON list ('["\\n\\n", "\\n", " ", ""]'; "" splits into """
                                 "characters); default: chunkd's fourteen", metavar="JSON",
                 parse=_separators_value),))
    #: The separators are regular expressions (LangChain's ``is_separator_regex``).
    separator_regex = Option[bool](
        False, "the separators are regular expressions", check=switch, applies=_not_window,
        refusal=_NO_SEPARATORS, flags=(
            Flag("--separator-regex", "the --separators are regular expressions "
                                      "(Python's re)"),))
    #: LangChain's separators for a programming or markup language (``from_language``;
    #: regular expressions), instead of ``separators``.
    language = Option[str | None](
        None, "LangChain's separators for a language", check=_check_language,
        applies=_not_window, refusal=_NO_SEPARATORS, flags=(
            Flag("--language", "LangChain's separators for source code or markup "
                               "(from_language): python, js, markdown, ...", metavar="NAME",
                 parse=str),))
    #: Where a separator goes (``KEEP_SEPARATOR``); None: "start" with a ``language``,
    #: as in LangChain's ``from_language``, else "end".
    keep_separator = Option[str](
        None, "where a separator goes", check=choice(*KEEP_SEPARATOR), implied=_keep_default,
        applies=_not_window, refusal=_NO_SEPARATORS, flags=(
            Flag("--keep-separator", "where a separator goes: at the end of the chunk it "
                                     "closes, at the start of the one it opens, or none "
                                     "(default: start with --language, else end)",
                 choices=KEEP_SEPARATOR),))
    #: Strip white space around chunks (LangChain's ``strip_whitespace``).
    strip_whitespace = Option[bool](
        True, "strip white space around chunks", check=switch, applies=_not_window,
        refusal=_NO_SEPARATORS, flags=(
            Flag("--no-strip", "keep the white space around chunks (LangChain's "
                               "strip_whitespace=False)", const=False),))

    _values: dict[str, Any]

    def __init__(self, **values: Any) -> None:
        """Settings from the options' values by name; a bad one raises ``SettingsError``
        (an unknown name, ``TypeError``)."""
        object.__setattr__(self, "_values", _resolved(values, _api_name))

    # Made, settings have every field resolved: typed views for the code that cuts.
    @property
    def chunk_size(self) -> int:
        """``size``, resolved."""
        return self.size

    @property
    def chunk_overlap(self) -> int:
        """``overlap``, resolved."""
        return self.overlap

    @property
    def length_unit(self) -> str:
        """``unit``, resolved."""
        return self.unit

    @property
    def separator_place(self) -> str:
        """``keep_separator``, resolved."""
        return self.keep_separator

    @classmethod
    def _made(cls, values: dict[str, Any]) -> Settings:
        settings = cls.__new__(cls)
        object.__setattr__(settings, "_values", values)
        return settings

    def __getitem__(self, option: Option[T]) -> T:
        """The value of ``option`` (a strategy's own options are read so)."""
        return self._values[option.name]

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"settings are immutable: use replace({name}=...)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (self._values,))

    def replace(self, **changes: Any) -> Settings:
        """These settings with ``changes``, checked again."""
        return Settings(**{**self._values, **changes})

    def parent_settings(self) -> Settings:
        """The settings that cut the parents (a parent/child setting's other half)."""
        return self.replace(size=self.parent_size, overlap=self.parent_overlap,
                            parent_size=None, parent_overlap=None, count_tokens=False)

    @classmethod
    def from_keywords(cls, chunk_size: int | None = None, chunk_overlap: int | None = None,
                      **options: Any) -> Settings:
        """Settings from the Python API's keyword names (``chunk_size``,
        ``chunk_overlap``, then the options' names: ``unit``, ``strategy``, ...)."""
        unknown = set(options) - (set(_names()) - {"size", "overlap"})
        if unknown:
            raise TypeError(f"unexpected keyword argument {sorted(unknown)[0]!r}")
        return cls(size=chunk_size, overlap=chunk_overlap, **options)

    def as_dict(self) -> dict[str, Any]:
        """The settings as a result records them (each option's ``Record``): the ones
        recorded always, then the others that differ from their defaults."""
        recorded: dict[str, Any] = {}
        for policy in (Record.ALWAYS, Record.SET):
            for option in options():
                value = self._values[option.name]
                if option.record is not policy or (
                        policy is Record.SET and value == option.default_in(self._values)):
                    continue
                recorded[option.name] = value if option.to_json is None else option.to_json(value)
        return recorded

    def record_fields(self) -> tuple[str, ...]:
        """The optional chunk fields (``chunkd.chunk.OPTIONAL_FIELDS``) its records carry."""
        from chunkd.chunk import OPTIONAL_FIELDS
        from chunkd.strategies import strategy_class

        extra = set(strategy_class(self.strategy).fields)
        if self.count_tokens:
            extra.add("tokens")
        if self.parent_size is not None:
            extra.add("parent")
        if self.embed_text:
            extra.add("embed_text")
        if self.ids:
            extra.add("chunk_id")
        return tuple(name for name in OPTIONAL_FIELDS if name in extra)

    def command_line(self) -> list[str]:
        """The filter's options that give these settings, to show a user (never parsed
        again)."""
        arguments: list[str] = []
        for option, flag in flags():
            arguments += (flag.shown(self) if flag.shown is not None
                          else _default_shown(option, flag, self._values))
        return arguments


def _rebuilt(values: dict[str, Any]) -> Settings:
    """Settings unpickled (in a worker process): checked again where they are used."""
    return Settings(**values)


def _names() -> list[str]:
    return [option.name for option in options()]


def _api_name(option: Option[Any]) -> str:
    return option.name


def _flag_name(option: Option[Any]) -> str:
    return option.flags[0].spelling if option.flags else option.name


def _default_shown(option: Option[Any], flag: Flag, values: Mapping[str, Any]) -> list[str]:
    """A flag's arguments when its option differs from its default."""
    value = values[option.name]
    if value == option.default_in(values):
        return []
    if flag.parse is None and flag.choices is None:
        return [flag.spelling] if value == flag.const else []
    value = value if option.to_json is None else option.to_json(value)
    return [flag.spelling, value if isinstance(value, str) else json.dumps(value)]


def _resolved(given: Mapping[str, Any], spell: Callable[[Option[Any]], str]) -> dict[str, Any]:
    """Every option's value, checked and resolved from ``given`` (by name); messages
    name an option as ``spell`` does (its flag on the command line, else its name)."""
    from chunkd.strategies import strategy_class

    declared = options()
    unknown = set(given) - {option.name for option in declared}
    if unknown:
        raise TypeError(f"unexpected keyword argument {sorted(unknown)[0]!r}")
    kind = strategy_class(given.get("strategy", "recursive"))
    values: dict[str, Any] = {}
    for option in declared:
        value = given.get(option.name, option.default)
        if value is not None and option.check is not None:
            value = option.check(value, option.noun or spell(option))
        values[option.name] = value
    unit = kind.units[0] if values["unit"] is None else values["unit"]
    if unit not in kind.units:
        raise SettingsError(f"the {kind.name} strategy counts in "
                            f"{' or '.join(kind.units)}, not {unit!r}")
    size = kind.default_size if values["size"] is None else values["size"]
    overlap = kind.default_overlap(size) if values["overlap"] is None else values["overlap"]
    if overlap >= size:
        raise SettingsError(f"the overlap ({overlap}) must be smaller than the size ({size})")
    values.update(unit=unit, size=size, overlap=overlap)
    for option in declared:
        if values[option.name] is None and option.implied is not None:
            values[option.name] = option.implied(values)
    for option in declared:
        if option.applies is not None and not option.applies(kind) \
                and values[option.name] != option.default_in(values):
            raise SettingsError(option.refusal.format(option=spell(option), strategy=kind.name))
    _resolve_parents(values, kind)
    separators, language = OPTIONS["separators"], OPTIONS["language"]
    if values["separators"] is not None and values["language"] is not None:
        raise SettingsError(f"{spell(separators)} and {spell(language)} exclude each other: "
                            "give one")
    if values["separator_regex"] and values["separators"] is None:
        raise SettingsError(f"{spell(OPTIONS['separator_regex'])} applies to "
                            f"{spell(separators)}: give them too (a language's separators "
                            "are regular expressions already)")
    kind.check(Settings._made(values))
    return values


def _resolve_parents(values: dict[str, Any], kind: type[Strategy]) -> None:
    parent_size, parent_overlap = values["parent_size"], values["parent_overlap"]
    if parent_size is None:
        if parent_overlap is not None:
            raise SettingsError("a parent overlap needs a parent size")
        return
    if parent_size <= values["size"]:
        raise SettingsError(f"the parent size ({parent_size}) must be larger than the "
                            f"size ({values['size']})")
    if parent_overlap is None:
        parent_overlap = kind.default_overlap(parent_size)
    if parent_overlap >= parent_size:
        raise SettingsError(f"the parent overlap ({parent_overlap}) must be smaller than "
                            f"the parent size ({parent_size})")
    values["parent_overlap"] = parent_overlap


# --- the command line -----------------------------------------------------------------

def settings_from_flags(given: Mapping[str, Any],
                        base: Mapping[str, Any] | None = None) -> Settings:
    """Settings from flags' values by key (``{"chars": 500, "overlap": "15%"}``), over
    ``base`` (values by option name); a wrong combination raises ``SettingsError``
    saying what to write instead, naming options as the command line spells them."""
    draft = Draft(given, dict(base or {}))
    for option, flag in flags():
        if flag.key in given:
            if flag.update is not None:
                flag.update(draft, given[flag.key])
            else:
                draft.values[option.name] = (given[flag.key] if flag.parse or flag.choices
                                             else flag.const)
    settings = Settings._made(_resolved(draft.values, _flag_name))
    return settings


def given_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The settings flags given in ``args`` (``add_settings_options``), by key."""
    return {flag.key: getattr(args, flag.key) for _, flag in flags()
            if getattr(args, flag.key, None) is not None}


class LineFormatter(argparse.HelpFormatter):
    """Help that keeps the line breaks of a description or epilog (a list of examples
    stays a list), each line wrapped to the width, indented as it is written (an
    indented line's continuation two spaces further, to show where an item ends)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            stripped = line.lstrip()
            margin = indent + line[:len(line) - len(stripped)]
            hanging = margin + "  " if stripped != line else margin
            lines.append(textwrap.fill(stripped, width, initial_indent=margin,
                                       subsequent_indent=hanging) if stripped else "")
        return "\n".join(lines)


class CommandParser(argparse.ArgumentParser):
    """Every chunkd command's parser: a usage error is one line on stderr,
    ``PROG: error: WHAT``, and exit status 2 (argparse would print the usage first);
    its help keeps the lines of the description and epilog (``LineFormatter``)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", LineFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _list_of(parse: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse_list(text: str) -> list[Any]:
        return [parse(item.strip()) for item in text.split(",")]
    return parse_list


def add_settings_options(parser: argparse.ArgumentParser, grid: bool = False) -> None:
    """Every option's flags, as every subcommand spells them. With ``grid``, the
    options eval varies take a comma list (``--tokens 128,256``) for ``chunkd eval``."""
    group = parser.add_argument_group(
        "chunking", "how documents are cut (the same options for every chunkd command)")
    for option, flag in flags():
        help = flag.help if isinstance(flag.help, str) else flag.help()
        if flag.parse is None and flag.choices is None:
            group.add_argument(flag.spelling, dest=flag.key, action="store_const",
                               const=flag.const, default=None, help=help)
            continue
        parse = flag.parse or str
        group.add_argument(flag.spelling, dest=flag.key, metavar=flag.metavar,
                           type=_list_of(parse) if grid and option.grid else parse,
                           choices=flag.choices, help=help,
                           default=option.default if flag.update is None else None)


def parse_with_settings(parser: argparse.ArgumentParser,
                        argv: list[str]) -> tuple[argparse.Namespace, Settings]:
    """A subcommand's arguments and its settings; bad settings are a usage error
    (exit 2, one line, without argparse's usage text)."""
    args = parser.parse_args(argv)
    try:
        return args, settings_from_flags(given_flags(args))
    except SettingsError as error:  # one line that says what to write instead
        parser.error(str(error))
