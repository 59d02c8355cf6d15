"""What a setting is: an ``Option`` declared once, with its command-line ``Flag``\\ s.

An option holds everything known about one setting: its type and default, the flags
that set it (ripgrep-style: spelling, metavar, help, and how a value updates the
settings being made), its check, the strategies that take it and the one message for
the others, how results record it, whether a ``chunkd serve`` request may set it and
whether ``chunkd eval`` takes a comma list of it. ``chunkd.settings`` declares the
common ones on ``Settings``; a strategy declares its own in its module and registers
them here (``register_option``), so that a new option touches one file. Every front end
reads the registry (``OPTIONS``): the parsers, the checks, the records, serve's query
and ``/api/config``, eval's grid and docs/options.md.

This module imports no other part of chunkd but its errors, so that settings and
strategies can both import it.
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, NamedTuple, NoReturn, Protocol, TypeVar, overload

from chunkd.model.errors import SettingsError

T = TypeVar("T")

# The callbacks an option holds take the settings (``chunkd.settings.Settings``), the
# settings being made (``chunkd.settings.Draft``) or a strategy's class: all of them
# above this module, which only hands them on, so their types are left open here.


class OptionHolder(Protocol):
    """What an ``Option`` reads its value from: ``chunkd.settings.Settings``."""

    def __getitem__(self, option: Option[Any], /) -> Any: ...


#: The options only some front ends act on (``--context``, ``--late``) that the front end
#: whose settings are being made does (``supporting``).
_SUPPORTED: ContextVar[frozenset[str]] = ContextVar("supported_options", default=frozenset())


@contextmanager
def supporting(*names: str) -> Iterator[None]:
    """Within it, the settings being made may set the options ``names``: the front end
    that makes them acts on them. Elsewhere such an option is refused, never ignored."""
    token = _SUPPORTED.set(_SUPPORTED.get() | frozenset(names))
    try:
        yield
    finally:
        _SUPPORTED.reset(token)


def supported(name: str) -> bool:
    """Whether the front end whose settings are being made acts on the option ``name``."""
    return name in _SUPPORTED.get()


#: Sizes beyond this are refused: no document has that many units, and the kernel
#: counts in 64-bit integers.
MAX_SIZE = 10**12


class Record(enum.Enum):
    """How results record a setting (``Settings.as_dict``). Settings recorded ``ALWAYS``
    come first, then those recorded when ``SET`` (differing from their default), so that
    a new option does not make every earlier result look stale."""

    ALWAYS = "always"
    SET = "set"
    NEVER = "never"


class Flag(NamedTuple):
    """One command-line spelling of a setting, ripgrep-style: its spelling, what it
    takes, its help, and how its value updates the settings being made (``Draft``).
    ``chunkd serve`` takes the flags of settings a request may set as query parameters
    of the same name without the dashes."""

    spelling: str
    #: Its help (a function: help that names what is registered, such as the strategies).
    help: str | Callable[[], str]
    #: How a given value updates the draft; the default sets the option to the value.
    update: Callable[[Any, Any], None] | None = None
    metavar: str | None = None
    #: Reads a value as written (``argparse``'s ``type``); None: a switch, no value.
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    #: A switch's value when given.
    const: Any = True
    #: The arguments of this flag that give ``settings`` (a command line shown to a
    #: user); None: the value when it differs from the default.
    shown: Callable[[Any], list[str]] | None = None

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
    strategy's own option is read as ``settings[OPTION]``. (Not a dataclass, as no
    class that start-up makes is: importing ``dataclasses`` took a tenth of it.)"""

    def __init__(
        self,
        #: Its value when not given (None: resolved from other settings, see ``implied``).
        default: T | None,
        #: What it is, in a few words (``/api/config``).
        help: str,
        *,
        flags: tuple[Flag, ...] = (),
        #: Checks a given value (not None) and returns it as held; its second argument
        #: names the option in a message.
        check: Callable[[Any, str], T] | None = None,
        #: Relations with other options, checked once every value is resolved:
        #: ``values`` by name, and how a message names an option.
        check_with: Callable[[Mapping[str, Any], Callable[[str], str]], None] | None = None,
        record: Record = Record.SET,
        #: Its value when not given, where that depends on other settings.
        implied: Callable[[Mapping[str, Any]], T] | None = None,
        #: Whether a ``chunkd serve`` request may set it (else it stays the server's).
        request: bool = False,
        #: Whether ``chunkd eval`` takes a comma list of its flags' values.
        grid: bool = False,
        #: The strategies that take it (None: every one), and the message for the
        #: others (``{option}`` its spelling, ``{strategy}`` the strategy).
        applies: Callable[[Any], bool] | None = None,
        refusal: str = "",
        #: The optional chunk fields (``chunkd.model.chunk.OPTIONAL_FIELDS``) records carry
        #: when it is set (differs from its default).
        fields: tuple[str, ...] = (),
        #: When it is set, how it makes the chunker: from the settings and ``inner``,
        #: which makes the chunker of the options declared before it (the strategy's,
        #: at first), perhaps from other settings (a smaller size). None: the strategy
        #: reads it.
        builds: Callable[..., Any] | None = None,
        #: Its value as results record it (JSON), when that is not the value itself.
        to_json: Callable[[T], Any] | None = None,
        #: How messages about its value name it ("size"); None: as the caller spells it.
        noun: str | None = None,
        #: The API's keyword and the record's key (set from the attribute on
        #: ``Settings``).
        name: str = "",
    ) -> None:
        self.default = default
        self.help = help
        self.flags = flags
        self.check = check
        self.check_with = check_with
        self.record = record
        self.implied = implied
        self.request = request
        self.grid = grid
        self.applies = applies
        self.refusal = refusal
        self.fields = fields
        self.builds = builds
        self.to_json = to_json
        self.noun = noun
        self.name = name

    def default_in(self, values: Mapping[str, Any]) -> Any:
        """Its value when not given, among ``values``."""
        return self.default if self.implied is None else self.implied(values)

    def is_set(self, values: Mapping[str, Any]) -> bool:
        """Whether it differs from its default among ``values``."""
        return values[self.name] != self.default_in(values)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        register_option(self)

    @overload
    def __get__(self, settings: None, owner: type | None = None) -> Option[T]: ...
    @overload
    def __get__(self, settings: OptionHolder, owner: type | None = None) -> T: ...

    def __get__(self, settings: OptionHolder | None, owner: type | None = None) -> Option[T] | T:
        if settings is None:
            return self
        value: T = settings[self]
        return value

    def __set__(self, settings: OptionHolder, value: object) -> NoReturn:
        raise AttributeError(f"settings are immutable: use replace({self.name}=...)")

    def __repr__(self) -> str:
        return f"Option({self.name!r})"


#: Every option by name, in the order they were registered (``chunkd.settings.options``
#: gives the declaration order: the common ones, then the strategies').
OPTIONS: dict[str, Option[Any]] = {}
#: Where an option goes among the others: after the option named.
PLACED_AFTER: dict[str, str] = {}


def register_option(option: Option[T], after: str | None = None) -> Option[T]:
    """Declare an option (a strategy's own, from its module): it is then a keyword of
    ``Settings``, its flags are every command's, and results record it. ``after`` puts
    it after that option in the parsers and the records."""
    if OPTIONS.get(option.name, option) is not option:
        raise ValueError(f"the option {option.name!r} is declared twice")
    OPTIONS[option.name] = option
    if after is not None:
        PLACED_AFTER[option.name] = after
    return option


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
