"""How to chunk: the common settings, declared once, and making ``Settings`` from them.

Each setting is an ``Option`` (``chunkd.options``): its type, default, command-line
flags, check, the strategies that take it, how results record it, whether a ``chunkd
serve`` request may set it and whether ``chunkd eval`` takes a comma list of it. The
common ones are declared on ``Settings`` below; a strategy declares its own in its
module. The parser of every command (``add_settings_options``), the checks, the
daemon's record of settings (``Settings.as_dict``, compared to decide whether a result
is current), serve's query parameters and ``/api/config``, eval's grid and
docs/options.md all read the declarations.

Raw options (flags and their values, a query's parameters, a grid point) become
``Settings`` once, through ``settings_from_flags``; nothing goes back through argv.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from chunkd.model.errors import SettingsError as SettingsError  # reached from here too

from chunkd.options import (OPTIONS, PLACED_AFTER, Flag, Option, Record, choice, number_value,
                            overlap_value, percent_of, switch, whole)
# Below the settings: the strategies register their options when imported.
from chunkd.strategies import REGISTRY, Strategy, strategy_class
# After them: --context and the LLM's options, placed after --vectors.
import chunkd.llm.options  # noqa: F401
from chunkd.units import measure, resolve, window

if TYPE_CHECKING:
    from chunkd.model.length import LengthUnit

T = TypeVar("T")
ERRORS = ("strict", "replace")

def flags() -> Iterator[tuple[Option[Any], Flag]]:
    """Every flag of every option, in declaration order."""
    for option in options():
        for flag in option.flags:
            yield option, flag


def options() -> list[Option[Any]]:
    """Every option in declaration order, whatever was imported first: those declared on
    ``Settings``, then the strategies' own (registered when they are imported), each
    placed after the option it names, if any."""
    ordered = [value for value in vars(Settings).values() if isinstance(value, Option)]
    for option in OPTIONS.values():
        if option not in ordered:
            after = PLACED_AFTER.get(option.name)
            names = [known.name for known in ordered]
            ordered.insert(names.index(after) + 1 if after in names else len(ordered), option)
    return ordered


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
        return strategy_class(self.strategy)


def set_strategy(draft: Draft, name: str) -> None:
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
    unit, size_now = default_unit_and_size(kind, draft.values)
    units = percent_of(overlap, size_now)
    assert units is not None
    if 1 <= size_now <= units:
        given = (f"{size_now} {unit}" if size is not None else
                 f"{size_now} {unit}, the default of --strategy {draft.strategy}"
                 + (f" with --tokenizer {draft.values['tokenizer']}"
                    if draft.values.get("tokenizer", DEFAULT_TOKENIZER) != DEFAULT_TOKENIZER
                    else ""))
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


#: The tokenizer that ``--tokens`` and ``--count-tokens`` count in when none is given.
DEFAULT_TOKENIZER = "cl100k_base"


def set_tokenizer(draft: Draft, spec: str) -> None:
    """``--tokenizer``, given (an update, so that a parser holds None when it is not:
    the strategy's model's own tokenizer is the default then)."""
    draft.values["tokenizer"] = spec


def check_tokenizer(value: Any, name: str) -> str:
    """A check: a tokenizer spec (``chunkd.units.resolve``), loaded now, so that a
    missing or malformed one is a usage error before any input is read."""
    if not isinstance(value, str) or not value or value in ("chars", "tokens"):
        raise SettingsError(f"{name} takes a tiktoken encoding's name, a .tiktoken file, or a "
                            f"Hugging Face tokenizer.json file or model folder, not {value!r}")
    try:
        if value != DEFAULT_TOKENIZER:  # chunkd's own, loaded only when it counts
            resolve(value)
    except SettingsError as error:
        message = str(error)
        # Messages about a file start with its path: say it once.
        message = message[len(value) + 2:] if message.startswith(f"{value}: ") else message
        raise SettingsError(f"{name} {value}: {message}") from None
    return value


def default_tokenizer(values: Mapping[str, Any]) -> str:
    """The tokenizer when none is given: the strategy's model's own
    (``Strategy.model_tokenizer``), else ``DEFAULT_TOKENIZER``."""
    from chunkd.strategies import strategy_class

    own = strategy_class(values.get("strategy") or "recursive").model_tokenizer(values)
    return DEFAULT_TOKENIZER if own is None else own[0]


def tokenizer_identity(spec: str) -> str:
    """How results record a tokenizer: its unit's name (an encoding's name, or a
    file's name and SHA-256), never a path of this machine."""
    return resolve(spec).name


def chunk_limit(tokenizer: str) -> int | None:
    """The most tokens a chunk may have for the model whose tokenizer ``tokenizer``
    names: its unit's ``max_size`` (a model folder's limit less the special tokens the
    model adds); None for a tokenizer that is no model's."""
    return window(tokenizer)


def model_window(values: Mapping[str, Any]) -> int | None:
    """The window of the model the chunks are for, in the tokenizer's tokens:
    ``--embed-window``, else the smaller of the tokenizer's model's (``chunk_limit``)
    and the one the ``--embed-url`` endpoint reports (``served_window``), else None."""
    from chunkd.embeddings.selection import served_window

    given = values.get("embed_window")
    if given is not None:
        return given
    known = (chunk_limit(values.get("tokenizer") or DEFAULT_TOKENIZER),
             served_window(values))
    return min((window for window in known if window is not None), default=None)


def default_unit_and_size(kind: type[Strategy], values: Mapping[str, Any]) -> tuple[str, int]:
    """The unit and size of ``values`` (by option name, perhaps not all given): as
    given, else the defaults. A tokenizer given, or a model's window, makes tokens the
    default unit of the strategies that count them, and the smaller of the strategy's
    default size and the window (``model_window``) their default size."""
    tokenizer = values.get("tokenizer") or DEFAULT_TOKENIZER
    window = model_window(values) if "tokens" in kind.units else None
    unit = values.get("unit") or ("tokens" if (tokenizer != DEFAULT_TOKENIZER
                                               or window is not None)
                                  and "tokens" in kind.units else kind.units[0])
    size = values.get("size")
    if size is None:
        size = kind.default_size if window is None or unit != "tokens" else \
            min(kind.default_size, window)
    return unit, size


def _check_window(values: Mapping[str, Any], model: str, spell: Callable[[str], str]) -> None:
    """A size in tokens must fit the model's window (``model_window``), and a size in
    code points is refused with one: a code point can be several tokens (a Hangul
    syllable is three of a WordPiece model's, a rare character up to four of a byte-level
    one's), so no size in code points is sure to fit. ``model`` names where the window
    comes from. Parents are not embedded, so their size may be larger."""
    window, unit, size = model_window(values), values["unit"], values["size"]
    if window is None or unit not in ("tokens", "chars") or values.get("late"):
        return  # --late reads a chunk in its document's windows, whatever its size
    if unit == "chars":
        raise SettingsError(
            f"{model} reads {window} tokens a chunk, and a size in code points "
            f"({size} chars) cannot promise to fit it (a code point can be several "
            f"tokens): count in its tokens, --tokens {window} or less")
    if size > window:
        why = ("" if values.get("embed_window") is not None else
               " (its window, less the special tokens it adds to every input)")
        raise SettingsError(f"the size ({size} tokens) is more than {model} takes: {window} "
                            f"tokens a chunk{why}; give a size of {window} or less")


def always_shown(option: str) -> Callable[[Settings], list[str]]:
    """A flag shown in every command line (``--strategy``, ``--overlap``)."""
    def arguments(settings: Settings) -> list[str]:
        return [f"--{option}", str(settings._values[option])]
    return arguments


def size_shown(unit: str | None) -> Callable[[Settings], list[str]]:
    """``--chars``/``--tokens``/``--size`` N, whichever gives the settings' size."""
    def arguments(settings: Settings) -> list[str]:
        window = strategy_class(settings.strategy).window
        if (unit is None) == window and unit in (None, settings.unit):
            return [f"--{unit or 'size'}", str(settings.size)]
        return []
    return arguments


def _strategies_help() -> str:
    return (f"{', '.join(REGISTRY)} (default: recursive, LangChain's "
            "RecursiveCharacterTextSplitter)")


def _window_sizes_help() -> str:
    window = ", ".join(f"{name} {kind.default_size}" for name, kind in REGISTRY.items()
                       if kind.window)
    return f"window strategies: N units a window (default: {window})"


def _parent_shown(unit: str) -> Callable[[Settings], list[str]]:
    def arguments(settings: Settings) -> list[str]:
        if settings.parent_size is None or settings.unit != unit:
            return []
        return [f"--parent-{unit}", str(settings.parent_size)]
    return arguments


def _tokenizer_shown(settings: Settings) -> list[str]:
    """``--tokenizer SPEC`` as given (a path of this machine, shown to its user)."""
    given = OPTIONS["tokenizer"].is_set(settings._values)
    return ["--tokenizer", settings.tokenizer] if given else []


def _has_headings(kind: type[Strategy]) -> bool:
    """Whether its chunks have a path to put before them: headings, or (a strategy
    that fills ``embed_text`` itself) the code strategy's symbols."""
    return "headings" in kind.fields or kind.embeds


class Settings:
    """How documents become chunks: one value for every declared option (``OPTIONS``),
    checked and resolved; immutable, compared and hashed by value.

    ``size`` and ``overlap`` are in ``unit``: "chars" (code points) or "tokens" (of
    ``tokenizer``, cl100k_base by default) for the recursive strategies, the strategy's
    own unit (graphemes, words, sentences, sections) for the window strategies. Left as None, ``unit``,
    ``size`` and ``overlap`` take the strategy's defaults (see ``chunkd.strategies``).
    The keywords are the options' names; a strategy's own options are read as
    ``settings[OPTION]``.
    """

    strategy = Option[str](
        "recursive", "the strategy", record=Record.ALWAYS, request=True, grid=True,
        flags=(Flag("--strategy", _strategies_help, set_strategy, "NAME", str,
                    shown=always_shown("strategy")),))
    unit = Option[str](
        None, "the unit of the sizes and overlaps (None: the strategy's first; checked "
              "against the strategy's units)", record=Record.ALWAYS, request=True)
    size = Option[int](
        None, "the largest chunk, in the unit (None: the strategy's default)",
        record=Record.ALWAYS, request=True, grid=True, check=whole(1), noun="size", flags=(
            Flag("--chars", "recursive strategies: at most N Unicode code points a chunk "
                            "(default: 1000)", set_size_in("chars"), "N", number_value,
                 shown=size_shown("chars")),
            Flag("--tokens", "recursive strategies: at most N tokens a chunk, of "
                             "--tokenizer (default: cl100k_base, counted offline)",
                 set_size_in("tokens"), "N", number_value,
                 shown=size_shown("tokens")),
            Flag("--size", _window_sizes_help, set_size_in(None), "N", number_value,
                 shown=size_shown(None))))
    #: What ``tokens`` count in: sizes in tokens, parents in tokens, ``count_tokens``.
    tokenizer = Option[str](
        None, "the tokenizer that tokens count in (recorded by its identity; None: the "
              "strategy's model's own, else cl100k_base)",
        check=check_tokenizer, to_json=tokenizer_identity, implied=default_tokenizer,
        flags=(Flag("--tokenizer", "what --tokens, --parent-tokens and --count-tokens count "
                                   "in: a tiktoken encoding (cl100k_base, the default, or "
                                   "the --embed model's own tokenizer; o200k_base...), a "
                                   ".tiktoken file, or a Hugging Face tokenizer.json file "
                                   "or model folder, whose window then bounds --tokens "
                                   "(and the default size); loaded offline", set_tokenizer,
                    metavar="SPEC", parse=str, shown=_tokenizer_shown),))
    #: The window of the model the chunks are embedded with, in the tokenizer's tokens.
    embed_window = Option[int | None](
        None, "the most tokens of the tokenizer a chunk may have for the model that embeds "
              "it (None: the model's own, where its folder says it)", check=whole(1),
        noun="model's window", applies=lambda kind: not kind.window,
        refusal="{option} bounds a size in tokens: it is for the recursive, markdown, code "
                "and semantic strategies, not {strategy}", flags=(
            Flag("--embed-window", "the most tokens of --tokenizer a chunk may have for the "
                                   "model that embeds it (default: the window a model "
                                   "folder's config, or --embed-url's GET /info, gives, "
                                   "less its special tokens): the "
                                   "default size is at most it, a larger --tokens is "
                                   "refused, and so is --chars", metavar="N",
                 parse=number_value),))
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
        grid=True, check=whole(1), noun="parent size", fields=("parent",),
        applies=lambda kind: kind.parents, refusal="the {strategy} strategy has no "
                                                   "parent/child mode", flags=(
            Flag("--parent-chars", "parent/child: cut parents of N code points, then the "
                                   "chunks (children) from each parent; with --chars",
                 set_parent_size_in("chars"), "N", number_value, shown=_parent_shown("chars")),
            Flag("--parent-tokens", "parent/child, in tokens; with --tokens",
                 set_parent_size_in("tokens"), "N", number_value,
                 shown=_parent_shown("tokens"))))
    parent_overlap = Option[int | None](
        None, "parent/child: units shared by neighbouring parents (None: 10%)", request=True,
        grid=True, check=whole(0), noun="parent overlap", flags=(
            Flag("--parent-overlap", "units shared by neighbouring parents, or a percentage "
                                     "of the parent size (default: 10%%)",
                 set_parent_overlap, "M", overlap_value),))
    #: Add ``embed_text``: the heading path, then the chunk's text (strategies whose
    #: records carry ``headings``).
    embed_text = Option[bool](
        False, "add embed_text", check=switch, applies=_has_headings, fields=("embed_text",),
        refusal="{option} needs headings: write --strategy markdown, sections or code "
                "(--strategy {strategy} gives none)", flags=(
            Flag("--embed-text", "add \"embed_text\": the heading path (A > B > C), a blank "
                                 "line, then the chunk's text (markdown, sections; code: "
                                 "the file's path and symbols); markdown: a pipe table "
                                 "cut between rows, its header before every piece"),))
    #: Add each chunk's exact count in the tokenizer's tokens as ``tokens``.
    count_tokens = Option[bool](
        False, "add tokens", check=switch, fields=("tokens",), flags=(
            Flag("--count-tokens", "add each chunk's exact token count (of --tokenizer) as "
                                   "\"tokens\""),))
    #: Add ``chunk_id``, each chunk's stable UUID (``chunkd.model.ids``), for vector-store upserts.
    ids = Option[bool](
        False, "add chunk_id", check=switch, fields=("chunk_id",), flags=(
            Flag("--ids", "add \"chunk_id\": each chunk's stable UUID, from its document and "
                          "text (not its offsets), for vector-store upserts"),))
    #: Invalid UTF-8 in the input: "strict" (an error naming the byte) or "replace".
    errors = Option[str](
        "strict", "invalid UTF-8", record=Record.ALWAYS, request=True, check=choice(*ERRORS),
        flags=(Flag("--errors", "invalid UTF-8: an error naming the byte offset (strict, "
                                "default) or U+FFFD (replace)", choices=ERRORS),))
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
    def measure(self) -> LengthUnit:
        """The length unit sizes count in: every strategy measures through this one."""
        return measure(self.unit, self.tokenizer)

    @property
    def token_measure(self) -> LengthUnit:
        """The unit a chunk's ``tokens`` (``--count-tokens``) counts in."""
        return measure("tokens", self.tokenizer)

    @classmethod
    def _made(cls, values: dict[str, Any]) -> Settings:
        settings = cls.__new__(cls)
        object.__setattr__(settings, "_values", values)
        return settings

    def __getitem__(self, option: Option[T]) -> T:
        """The value of ``option`` (a strategy's own options are read so)."""
        return self._values[option.name]

    def set_options(self) -> list[Option[Any]]:
        """The options that differ from their defaults here, in declaration order."""
        return [option for option in options() if option.is_set(self._values)]

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
        """The settings that cut the parents (a parent/child setting's other half):
        made from these, whose checks covered the parents' size and overlap, without
        checking again, since parents are not embedded and their size may pass a
        model's limit (``chunk_limit``)."""
        return Settings._made({**self._values, "size": self.parent_size,
                               "overlap": self.parent_overlap, "parent_size": None,
                               "parent_overlap": None, "count_tokens": False})

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
                        policy is Record.SET and not option.is_set(self._values)):
                    continue
                recorded[option.name] = value if option.to_json is None else option.to_json(value)
        return recorded

    def about(self) -> dict[str, Any]:
        """What a whole-document result says of how it was counted: the tokenizer by
        its identity, when it is not the default (so default results stay as they were)."""
        if self.tokenizer == DEFAULT_TOKENIZER:
            return {}
        return {"tokenizer": tokenizer_identity(self.tokenizer)}

    def record_fields(self) -> tuple[str, ...]:
        """The optional chunk fields (``chunkd.model.chunk.OPTIONAL_FIELDS``) its records carry."""
        from chunkd.model.chunk import OPTIONAL_FIELDS

        extra = set(strategy_class(self.strategy).fields)
        for option in options():
            if option.fields and option.is_set(self._values):
                extra.update(option.fields)
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
    if not option.is_set(values):
        return []
    if flag.parse is None and flag.choices is None:
        return [flag.spelling] if value == flag.const else []
    import json  # a command line shown (serve, eval), never the filter's

    value = value if option.to_json is None else option.to_json(value)
    return [flag.spelling, value if isinstance(value, str) else json.dumps(value)]


def _resolved(given: Mapping[str, Any], spell: Callable[[Option[Any]], str]) -> dict[str, Any]:
    """Every option's value, checked and resolved from ``given`` (by name); messages
    name an option as ``spell`` does (its flag on the command line, else its name)."""
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
    def named(name: str) -> str:
        return spell(OPTIONS[name])

    model = _model_named(kind, values, named)
    unit, size = default_unit_and_size(kind, values)
    if unit not in kind.units:
        raise SettingsError(f"the {kind.name} strategy counts in "
                            f"{' or '.join(kind.units)}, not {unit!r}")
    overlap = kind.default_overlap(size) if values["overlap"] is None else values["overlap"]
    if overlap >= size:
        raise SettingsError(f"the overlap ({overlap}) must be smaller than the size ({size})")
    values.update(unit=unit, size=size, overlap=overlap)
    for option in declared:
        if values[option.name] is None and option.implied is not None:
            values[option.name] = option.implied(values)
    for option in declared:
        if option.applies is not None and not option.applies(kind) and option.is_set(values):
            raise SettingsError(option.refusal.format(option=spell(option), strategy=kind.name))
    _resolve_parents(values, kind)
    _check_window(values, model, named)
    for option in declared:
        if option.check_with is not None:
            option.check_with(values, named)
    kind.check(Settings._made(values))
    return values


def _model_named(kind: type[Strategy], values: dict[str, Any],
                 spell: Callable[[str], str]) -> str:
    """How messages name the model whose window bounds the size; with no tokenizer
    given, the tokenizer becomes the strategy's model's own (``model_tokenizer``)."""
    own = kind.model_tokenizer(values) if values["tokenizer"] is None else None
    values["tokenizer"] = (values["tokenizer"] or DEFAULT_TOKENIZER) if own is None else own[0]
    if values["embed_window"] is not None:
        return f"the model ({spell('embed_window')} {values['embed_window']})"
    if own is not None:
        return f"the model of {spell(own[1])} {values[own[1]]}"
    if chunk_limit(values["tokenizer"]) is None and model_window(values) is not None:
        return (f"{spell('embed_model')} {values['embed_model']} (as {spell('embed_url')}'s "
                "/info says)")
    return f"the model of {spell('tokenizer')} {values['tokenizer']}"


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

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        # argparse asks shutil for the width, and shutil imports bz2 and lzma: 2 ms of
        # every start (each option added makes a formatter), for help seldom printed.
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap  # only for help, as in argparse

        lines = []
        for line in text.splitlines():
            stripped = line.lstrip()
            margin = indent + line[:len(line) - len(stripped)]
            hanging = margin + "  " if stripped != line else margin
            lines.append(textwrap.fill(stripped, width, initial_indent=margin,
                                       subsequent_indent=hanging) if stripped else "")
        return "\n".join(lines)


def _terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` gives it: ``COLUMNS`` where
    that is a positive number, else stdout's terminal's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    stdout = sys.__stdout__
    try:
        return (stdout is not None and os.get_terminal_size(stdout.fileno()).columns) or 80
    except (AttributeError, ValueError, OSError):  # closed, detached, not a terminal, or
        return 80                                  # a platform without the call


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
