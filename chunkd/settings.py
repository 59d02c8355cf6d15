"""How to chunk: every setting, its default and its validation, in one place.

The filter, ``chunkd watch``, the other subcommands and the Python API all build a
``Settings`` here, so a setting means the same everywhere and a bad one gets the same
message everywhere. ``Settings.as_dict()`` is what the daemon records in each result
and compares to decide whether the result is current.

The command-line options that choose settings (``--strategy``, ``--chars``,
``--tokens``, ``--size``, ``--overlap``, ...) are defined here too, once, for every
subcommand that takes them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields, replace

#: Sizes beyond this are refused: no document has that many units, and the kernel
#: counts in 64-bit integers.
MAX_SIZE = 10**12
ERRORS = ("strict", "replace")


class SettingsError(ValueError):
    """Settings that cannot work; the message says what is wrong, in one line."""


@dataclass(frozen=True)
class Settings:
    """How documents become chunks.

    ``size`` and ``overlap`` are in ``unit``: "chars" (code points) or "tokens"
    (cl100k_base) for the recursive strategies, the strategy's own unit (graphemes,
    words, sentences, sections) for the window strategies. Left as None, ``unit``,
    ``size`` and ``overlap`` take the strategy's defaults (see ``chunkd.strategies``).
    """

    strategy: str = "recursive"
    unit: str | None = None
    size: int | None = None
    overlap: int | None = None
    #: Parent/child: children (``size``) are cut from parents of ``parent_size`` units
    #: (same unit) overlapping by ``parent_overlap``; each child records its parent.
    parent_size: int | None = None
    parent_overlap: int | None = None
    #: Add each chunk's exact cl100k_base count as ``tokens``.
    count_tokens: bool = False
    #: Invalid UTF-8 in the input: "strict" (an error naming the byte) or "replace".
    errors: str = "strict"

    def __post_init__(self) -> None:
        from chunkd.strategies import strategy_class

        kind = strategy_class(self.strategy)
        unit = kind.units[0] if self.unit is None else self.unit
        if unit not in kind.units:
            raise SettingsError(f"the {self.strategy} strategy counts in "
                                f"{' or '.join(kind.units)}, not {unit!r}")
        size = kind.default_size if self.size is None else _whole(self.size, "size", 1)
        overlap = (kind.default_overlap(size) if self.overlap is None
                   else _whole(self.overlap, "overlap", 0))
        if overlap >= size:
            raise SettingsError(f"the overlap ({overlap}) must be smaller than the size ({size})")
        if self.errors not in ERRORS:
            raise SettingsError(f"errors must be 'strict' or 'replace', not {self.errors!r}")
        if not isinstance(self.count_tokens, bool):
            raise SettingsError("count_tokens must be True or False")
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "overlap", overlap)
        if self.parent_size is not None:
            self._check_parents(kind)
        elif self.parent_overlap is not None:
            raise SettingsError("a parent overlap needs a parent size")
        kind.check(self)

    def _check_parents(self, kind) -> None:
        if not kind.parents:
            raise SettingsError(f"the {self.strategy} strategy has no parent/child mode")
        parent_size = _whole(self.parent_size, "parent size", 1)
        if parent_size <= self.size:
            raise SettingsError(f"the parent size ({parent_size}) must be larger than the "
                                f"size ({self.size})")
        parent_overlap = (kind.default_overlap(parent_size) if self.parent_overlap is None
                          else _whole(self.parent_overlap, "parent overlap", 0))
        if parent_overlap >= parent_size:
            raise SettingsError(f"the parent overlap ({parent_overlap}) must be smaller than "
                                f"the parent size ({parent_size})")
        object.__setattr__(self, "parent_overlap", parent_overlap)

    def parent_settings(self) -> Settings:
        """The settings that cut the parents (a parent/child setting's other half)."""
        return replace(self, size=self.parent_size, overlap=self.parent_overlap,
                       parent_size=None, parent_overlap=None, count_tokens=False)

    @classmethod
    def from_keywords(cls, chunk_size: int | None = None, chunk_overlap: int | None = None,
                      **options) -> Settings:
        """Settings from the Python API's keyword names (``chunk_size``,
        ``chunk_overlap``, then the field names: ``unit``, ``strategy``, ...)."""
        allowed = {f.name for f in fields(cls)} - {"size", "overlap"}
        unknown = set(options) - allowed
        if unknown:
            raise TypeError(f"unexpected keyword argument {sorted(unknown)[0]!r}")
        return cls(size=chunk_size, overlap=chunk_overlap, **options)

    def as_dict(self) -> dict:
        """The settings as a result records them: the ones that shape every result,
        then the optional ones only when they are switched on (so that a new option
        does not make every earlier result look stale)."""
        recorded = {"strategy": self.strategy, "unit": self.unit, "size": self.size,
                    "overlap": self.overlap, "errors": self.errors}
        if self.parent_size is not None:
            recorded |= {"parent_size": self.parent_size, "parent_overlap": self.parent_overlap}
        if self.count_tokens:
            recorded["count_tokens"] = True
        return recorded

    def record_fields(self) -> tuple[str, ...]:
        """The optional chunk fields (``chunkd.chunk.OPTIONAL_FIELDS``) its records carry."""
        from chunkd.strategies import strategy_class

        extra = set(strategy_class(self.strategy).fields)
        if self.count_tokens:
            extra.add("tokens")
        if self.parent_size is not None:
            extra.add("parent")
        from chunkd.chunk import OPTIONAL_FIELDS
        return tuple(name for name in OPTIONAL_FIELDS if name in extra)


def _whole(value: object, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"the {name} must be a whole number, not {value!r}")
    if value < least:
        raise SettingsError(f"the {name} must be at least {least}, got {value}")
    if value > MAX_SIZE:
        raise SettingsError(f"the {name} must be at most {MAX_SIZE}, got {value}")
    return value


# --- command-line options --------------------------------------------------------------

def _number(text: str) -> int:
    """A whole number as an option value; its range is checked by ``Settings``."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _overlap(text: str) -> int | str:
    """An overlap: a whole number of units, or a percentage of the size (``15%``)."""
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
        if not 0 <= percent < 100:
            raise argparse.ArgumentTypeError(f"a percentage from 0 to under 100, got {text}")
        return text
    return _number(text)


def _list_of(parse):
    def parse_list(text: str) -> list:
        return [parse(item.strip()) for item in text.split(",")]
    return parse_list


def add_settings_options(parser: argparse.ArgumentParser, grid: bool = False) -> None:
    """The options that choose settings, as every subcommand spells them. With
    ``grid``, each takes a comma list (``--tokens 128,256``) for ``chunkd eval``."""
    from chunkd.strategies import REGISTRY

    many = _list_of if grid else (lambda parse: parse)
    window = ", ".join(name for name, kind in REGISTRY.items() if kind.window)
    group = parser.add_argument_group(
        "chunking", "how documents are cut (the same options for every chunkd command)")
    group.add_argument("--strategy", type=many(str), metavar="NAME",
                       help=f"{', '.join(REGISTRY)} (default: recursive, LangChain's "
                            "RecursiveCharacterTextSplitter)")
    group.add_argument("--chars", type=many(_number), metavar="N",
                       help="recursive strategies: at most N Unicode code points a chunk "
                            "(default: 1000)")
    group.add_argument("--tokens", type=many(_number), metavar="N",
                       help="recursive strategies: at most N cl100k_base tokens a chunk "
                            "(counted offline)")
    group.add_argument("--size", type=many(_number), metavar="N",
                       help=f"window strategies ({window}): N units a window")
    group.add_argument("--overlap", type=many(_overlap), metavar="M",
                       help="units shared by neighbouring chunks, a number or a percentage "
                            "of the size (15%%); smaller than the size (default: 10%% for "
                            "recursive, 0 for window strategies)")
    group.add_argument("--parent-chars", type=many(_number), metavar="N",
                       help="parent/child: cut parents of N code points, then the chunks "
                            "(children) from each parent; with --chars")
    group.add_argument("--parent-tokens", type=many(_number), metavar="N",
                       help="parent/child, in cl100k_base tokens; with --tokens")
    group.add_argument("--parent-overlap", type=many(_overlap), metavar="M",
                       help="units shared by neighbouring parents, or a percentage of the "
                            "parent size (default: 10%%)")
    group.add_argument("--count-tokens", action="store_true",
                       help="add each chunk's exact cl100k_base token count as \"tokens\"")
    group.add_argument("--errors", choices=ERRORS, default="strict",
                       help="invalid UTF-8: an error naming the byte offset (strict, default) "
                            "or U+FFFD (replace)")


def settings_from_options(strategy: str | None = None, chars: int | None = None,
                          tokens: int | None = None, size: int | None = None,
                          overlap: int | str | None = None, count_tokens: bool = False,
                          errors: str = "strict", parent_chars: int | None = None,
                          parent_tokens: int | None = None,
                          parent_overlap: int | str | None = None) -> Settings:
    """Settings from option values, as the command line spells them; a wrong
    combination raises ``SettingsError`` saying what to write instead."""
    from chunkd.strategies import REGISTRY, strategy_class

    strategy = strategy or "recursive"
    if strategy not in REGISTRY:
        raise SettingsError(f"--strategy {strategy}: unknown; choose one of {', '.join(REGISTRY)}")
    kind = strategy_class(strategy)
    if chars is not None and tokens is not None:
        raise SettingsError("--chars and --tokens exclude each other: give one size")
    if kind.window:
        if chars is not None or tokens is not None:
            option = "--chars" if chars is not None else "--tokens"
            raise SettingsError(f"{option} is for the recursive strategies; with --strategy "
                                f"{strategy} write --size N ({kind.units[0]} a window)")
        unit = None
    else:
        if size is not None:
            raise SettingsError(f"--size is for the window strategies; with --strategy "
                                f"{strategy} write --chars N or --tokens N")
        unit, size = ("tokens", tokens) if tokens is not None else ("chars", chars)
    overlap = _percent_of(overlap, kind.default_size if size is None else size)
    parent_size = None
    if parent_chars is not None or parent_tokens is not None:
        parent_unit, parent_size = (("tokens", parent_tokens) if parent_tokens is not None
                                    else ("chars", parent_chars))
        if parent_chars is not None and parent_tokens is not None:
            raise SettingsError("--parent-chars and --parent-tokens exclude each other")
        if parent_unit != (unit or "chars"):
            raise SettingsError(f"parents are counted in the children's unit: with "
                                f"--{unit or 'chars'} write --parent-{unit or 'chars'} N")
        parent_overlap = _percent_of(parent_overlap, parent_size)
    elif parent_overlap is not None:
        raise SettingsError("--parent-overlap needs --parent-chars or --parent-tokens")
    return Settings(strategy=strategy, unit=unit, size=size, overlap=overlap,
                    parent_size=parent_size, parent_overlap=parent_overlap,
                    count_tokens=count_tokens, errors=errors)


def _percent_of(overlap: int | str | None, size: int) -> int | None:
    """An overlap option's value in units: a percentage (``"15%"``) of ``size``."""
    if isinstance(overlap, str):
        return int(size * float(overlap[:-1]) // 100)
    return overlap


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the options of ``add_settings_options`` (without ``grid``)."""
    return settings_from_options(args.strategy, args.chars, args.tokens, args.size,
                                 args.overlap, args.count_tokens, args.errors,
                                 args.parent_chars, args.parent_tokens, args.parent_overlap)


def parse_with_settings(parser: argparse.ArgumentParser,
                        argv: list[str]) -> tuple[argparse.Namespace, Settings]:
    """A subcommand's arguments and its settings; bad settings are a usage error
    (exit 2, one line)."""
    args = parser.parse_args(argv)
    try:
        return args, settings_from_args(args)
    except SettingsError as error:
        parser.error(str(error))
