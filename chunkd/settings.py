"""How to chunk: every setting, its default and its validation, in one place.

The filter, ``chunkd watch``, the other subcommands and the Python API all build a
``Settings`` here, so a setting means the same everywhere and a bad one gets the same
message everywhere. ``Settings.as_dict()`` is what the daemon records in each result
and compares to decide whether the result is current.

The command-line options that choose settings (``--strategy``, ``--chars``,
``--tokens``, ``--size``, ``--overlap``, ``--separators``, ...) are defined here too,
once, for every subcommand that takes them.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from dataclasses import dataclass, fields, replace
from typing import Any, NoReturn

from chunkd.errors import SettingsError as SettingsError  # reached from here too

#: Sizes beyond this are refused: no document has that many units, and the kernel
#: counts in 64-bit integers.
MAX_SIZE = 10**12
ERRORS = ("strict", "replace")
#: Where a separator goes: at the "end" of the piece before it, at the "start" of the
#: piece after it, or nowhere ("none"): LangChain's keep_separator "end", True, False.
KEEP_SEPARATOR = ("end", "start", "none")


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
    #: Markdown: leave each section's heading line out of its chunks (it stays in
    #: ``headings``).
    strip_headings: bool = False
    #: Add ``embed_text``: the heading path, then the chunk's text (strategies whose
    #: records carry ``headings``).
    embed_text: bool = False
    #: Add each chunk's exact cl100k_base count as ``tokens``.
    count_tokens: bool = False
    #: Add ``chunk_id``, each chunk's stable UUID (``chunkd.ids``), for vector-store upserts.
    ids: bool = False
    #: Invalid UTF-8 in the input: "strict" (an error naming the byte) or "replace".
    errors: str = "strict"
    #: Recursive strategies: the separators, coarsest first (None: chunkd's fourteen,
    #: ``chunkd.SEPARATORS``); "" splits into code points.
    separators: tuple[str, ...] | None = None
    #: The separators are regular expressions (LangChain's ``is_separator_regex``).
    separator_regex: bool = False
    #: LangChain's separators for a programming or markup language (``from_language``;
    #: regular expressions), instead of ``separators``.
    language: str | None = None
    #: Where a separator goes (``KEEP_SEPARATOR``); None: "start" with a ``language``,
    #: as in LangChain's ``from_language``, else "end".
    keep_separator: str | None = None
    #: Strip white space around chunks (LangChain's ``strip_whitespace``).
    strip_whitespace: bool = True

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
        for switch in ("count_tokens", "strip_headings", "embed_text", "ids"):
            if not isinstance(getattr(self, switch), bool):
                raise SettingsError(f"{switch} must be True or False")
        if self.embed_text and "headings" not in kind.fields:
            raise SettingsError(f"embed_text needs a strategy that gives headings (markdown or "
                                f"sections), not {self.strategy}")
        if self.strip_headings and not kind.strips_headings:
            raise SettingsError(f"strip_headings is for the markdown strategy, not {self.strategy}")
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "overlap", overlap)
        if self.parent_size is not None:
            self._check_parents(kind)
        elif self.parent_overlap is not None:
            raise SettingsError("a parent overlap needs a parent size")
        self._check_separators(kind)
        kind.check(self)

    # Made, settings have every field resolved: typed views for the code that cuts.
    @property
    def chunk_size(self) -> int:
        """``size``, resolved."""
        assert self.size is not None, "resolved in __post_init__"
        return self.size

    @property
    def chunk_overlap(self) -> int:
        """``overlap``, resolved."""
        assert self.overlap is not None, "resolved in __post_init__"
        return self.overlap

    @property
    def length_unit(self) -> str:
        """``unit``, resolved."""
        assert self.unit is not None, "resolved in __post_init__"
        return self.unit

    @property
    def separator_place(self) -> str:
        """``keep_separator``, resolved."""
        assert self.keep_separator is not None, "resolved in __post_init__"
        return self.keep_separator

    def _check_parents(self, kind) -> None:
        if not kind.parents:
            raise SettingsError(f"the {self.strategy} strategy has no parent/child mode")
        parent_size = _whole(self.parent_size, "parent size", 1)
        if parent_size <= self.chunk_size:
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

    def _check_separators(self, kind) -> None:
        """Validate the separator settings and resolve ``keep_separator``."""
        from chunkd.strategies.languages import LANGUAGE_SEPARATORS

        separators = self.separators
        if separators is not None:
            if isinstance(separators, str) or not isinstance(separators, (list, tuple)) \
                    or not separators or not all(isinstance(s, str) for s in separators):
                raise SettingsError(f"separators must be a non-empty list of strings, "
                                    f"not {separators!r}")
            problem = _not_unicode(separators)
            if problem:
                raise SettingsError(f"separators: {problem}")
            object.__setattr__(self, "separators", tuple(separators))
        if self.language is not None and self.language not in LANGUAGE_SEPARATORS:
            if self.language == "perl":
                raise SettingsError("LangChain has no separators for perl")
            raise SettingsError(f"unknown language {self.language!r}; choose one of "
                                f"{', '.join(LANGUAGE_SEPARATORS)}")
        if separators is not None and self.language is not None:
            raise SettingsError("give separators or a language, not both")
        if not isinstance(self.separator_regex, bool):
            raise SettingsError("separator_regex must be True or False")
        if self.separator_regex and separators is None:
            raise SettingsError("separator_regex applies to the separators given: give them "
                                "too (a language's separators are regular expressions already)")
        keep = self.keep_default() if self.keep_separator is None else self.keep_separator
        if keep not in KEEP_SEPARATOR:
            raise SettingsError(f"keep_separator must be one of {', '.join(KEEP_SEPARATOR)}, "
                                f"not {keep!r}")
        object.__setattr__(self, "keep_separator", keep)
        if not isinstance(self.strip_whitespace, bool):
            raise SettingsError("strip_whitespace must be True or False")
        if kind.window and self.separator_fields():
            raise SettingsError(f"the {self.strategy} strategy takes no separators: they are "
                                "for the recursive strategies")

    def keep_default(self) -> str:
        """Where separators go unless told: as LangChain's ``from_language`` puts them
        for a language (at the start of a piece: ``def`` opens its function), else at
        the end of a piece (a full stop closes its sentence)."""
        return "start" if self.language is not None else "end"

    def separator_fields(self) -> dict[str, Any]:
        """The separator settings that differ from the defaults, as recorded (JSON
        values)."""
        recorded: dict[str, Any] = {}
        if self.separators is not None:
            recorded["separators"] = list(self.separators)
        if self.separator_regex:
            recorded["separator_regex"] = True
        if self.language is not None:
            recorded["language"] = self.language
        if self.keep_separator is not None and self.keep_separator != self.keep_default():
            recorded["keep_separator"] = self.keep_separator
        if not self.strip_whitespace:
            recorded["strip_whitespace"] = False
        return recorded

    def other_arguments(self) -> list[str]:
        """The command-line arguments besides strategy, sizes, overlaps, ``--errors`` and
        ``--count-tokens`` that give these settings (``--language``, ``--embed-text``...)."""
        arguments = [f"--{switch.replace('_', '-')}"
                     for switch in ("strip_headings", "embed_text", "ids") if getattr(self, switch)]
        recorded = self.separator_fields()
        if "language" in recorded:
            arguments += ["--language", recorded["language"]]
        if "separators" in recorded:
            arguments += ["--separators", json.dumps(recorded["separators"])]
        if "separator_regex" in recorded:
            arguments.append("--separator-regex")
        if "keep_separator" in recorded:
            arguments += ["--keep-separator", recorded["keep_separator"]]
        if "strip_whitespace" in recorded:
            arguments.append("--no-strip")
        return arguments

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

    def as_dict(self) -> dict[str, Any]:
        """The settings as a result records them: the ones that shape every result,
        then the optional ones only when they are switched on (so that a new option
        does not make every earlier result look stale)."""
        recorded: dict[str, Any] = {"strategy": self.strategy, "unit": self.unit, "size": self.size,
                    "overlap": self.overlap, "errors": self.errors}
        if self.parent_size is not None:
            recorded |= {"parent_size": self.parent_size, "parent_overlap": self.parent_overlap}
        for switch in ("strip_headings", "embed_text", "count_tokens", "ids"):
            if getattr(self, switch):
                recorded[switch] = True
        recorded.update(self.separator_fields())
        return recorded

    def record_fields(self) -> tuple[str, ...]:
        """The optional chunk fields (``chunkd.chunk.OPTIONAL_FIELDS``) its records carry."""
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
        from chunkd.chunk import OPTIONAL_FIELDS
        return tuple(name for name in OPTIONAL_FIELDS if name in extra)


def _not_unicode(separators: list[str] | tuple[str, ...]) -> str | None:
    """Why separators are not Unicode text, if one holds a lone surrogate (JSON can
    write one, ``"\\ud800"``): no decoded text holds one, and no result holding it can
    be written as UTF-8."""
    for separator in separators:
        for character in separator:
            if "\ud800" <= character <= "\udfff":
                return (f"{separator!r} holds a lone surrogate (U+{ord(character):04X}), "
                        "which is not Unicode text")
    return None


def _whole(value: object, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"the {name} must be a whole number, not {value!r}")
    if value < least:
        raise SettingsError(f"the {name} must be at least {least}, got {value}")
    if value > MAX_SIZE:
        raise SettingsError(f"the {name} must be at most {MAX_SIZE}, got {value}")
    return value


# --- command-line options --------------------------------------------------------------

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


def _shown(text: str) -> str:
    """An option's value in a message: at most 80 code points of it."""
    return repr(text) if len(text) <= 80 else repr(text[:80]) + f"... ({len(text)} code points)"


def _separators(text: str) -> list[str]:
    """``--separators``: a JSON list of strings."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON ({error}): {_shown(text)}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError(f"JSON nested too deeply: {_shown(text)}") from None
    if not isinstance(value, list) or not value or not all(isinstance(s, str) for s in value):
        raise argparse.ArgumentTypeError(f"not a non-empty JSON list of strings: {_shown(text)}")
    problem = _not_unicode(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def _list_of(parse):
    def parse_list(text: str) -> list:
        return [parse(item.strip()) for item in text.split(",")]
    return parse_list


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


def add_settings_options(parser: argparse.ArgumentParser, grid: bool = False) -> None:
    """The options that choose settings, as every subcommand spells them. With
    ``grid``, each takes a comma list (``--tokens 128,256``) for ``chunkd eval``."""
    from chunkd.strategies import REGISTRY

    many = _list_of if grid else (lambda parse: parse)
    window = ", ".join(f"{name} {kind.default_size}" for name, kind in REGISTRY.items()
                       if kind.window)
    group = parser.add_argument_group(
        "chunking", "how documents are cut (the same options for every chunkd command)")
    group.add_argument("--strategy", type=many(str), metavar="NAME",
                       help=f"{', '.join(REGISTRY)} (default: recursive, LangChain's "
                            "RecursiveCharacterTextSplitter)")
    group.add_argument("--chars", type=many(number_value), metavar="N",
                       help="recursive strategies: at most N Unicode code points a chunk "
                            "(default: 1000)")
    group.add_argument("--tokens", type=many(number_value), metavar="N",
                       help="recursive strategies: at most N cl100k_base tokens a chunk "
                            "(counted offline)")
    group.add_argument("--size", type=many(number_value), metavar="N",
                       help=f"window strategies: N units a window (default: {window})")
    group.add_argument("--overlap", type=many(overlap_value), metavar="M",
                       help="units shared by neighbouring chunks, a number or a percentage "
                            "of the size (15%%); smaller than the size (default: 10%% for "
                            "recursive, 0 for window strategies)")
    group.add_argument("--parent-chars", type=many(number_value), metavar="N",
                       help="parent/child: cut parents of N code points, then the chunks "
                            "(children) from each parent; with --chars")
    group.add_argument("--parent-tokens", type=many(number_value), metavar="N",
                       help="parent/child, in cl100k_base tokens; with --tokens")
    group.add_argument("--parent-overlap", type=many(overlap_value), metavar="M",
                       help="units shared by neighbouring parents, or a percentage of the "
                            "parent size (default: 10%%)")
    group.add_argument("--strip-headings", action="store_true",
                       help="markdown: leave each section's heading line out of its chunks "
                            "(it stays in \"headings\")")
    group.add_argument("--embed-text", action="store_true",
                       help="add \"embed_text\": the heading path (A > B > C), a blank line, "
                            "then the chunk's text (markdown, sections)")
    group.add_argument("--count-tokens", action="store_true",
                       help="add each chunk's exact cl100k_base token count as \"tokens\"")
    group.add_argument("--ids", action="store_true",
                       help="add \"chunk_id\": each chunk's stable UUID, from its document, offsets "
                            "and text, for vector-store upserts")
    group.add_argument("--errors", choices=ERRORS, default="strict",
                       help="invalid UTF-8: an error naming the byte offset (strict, default) "
                            "or U+FFFD (replace)")
    group.add_argument("--separators", type=_separators, metavar="JSON",
                       help="recursive strategies: the separators, coarsest first, as a JSON "
                            """list ('["\\n\\n", "\\n", " ", ""]'; "" splits into """
                            "characters); default: chunkd's fourteen")
    group.add_argument("--separator-regex", action="store_true",
                       help="the --separators are regular expressions (Python's re)")
    group.add_argument("--language", metavar="NAME",
                       help="LangChain's separators for source code or markup "
                            "(from_language): python, js, markdown, ...")
    group.add_argument("--keep-separator", choices=KEEP_SEPARATOR,
                       help="where a separator goes: at the end of the chunk it closes, at "
                            "the start of the one it opens, or none (default: start with "
                            "--language, else end)")
    group.add_argument("--no-strip", dest="strip_whitespace", action="store_false",
                       help="keep the white space around chunks (LangChain's "
                            "strip_whitespace=False)")


def settings_from_options(strategy: str | None = None, chars: int | None = None,
                          tokens: int | None = None, size: int | None = None,
                          overlap: int | str | None = None, count_tokens: bool = False,
                          errors: str = "strict", parent_chars: int | None = None,
                          parent_tokens: int | None = None,
                          parent_overlap: int | str | None = None,
                          strip_headings: bool = False, embed_text: bool = False,
                          separators: list[str] | None = None, separator_regex: bool = False,
                          language: str | None = None, keep_separator: str | None = None,
                          strip_whitespace: bool = True, ids: bool = False) -> Settings:
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
    size_now = kind.default_size if size is None else size
    overlap = _percent_of(overlap, size_now)
    if overlap is not None and 1 <= size_now <= overlap:
        given = (f"{size_now} {unit or kind.units[0]}" if size is not None else
                 f"{size_now} {kind.units[0]}, the default of --strategy {strategy}")
        larger = "--size" if kind.window else f"--{unit}"
        raise SettingsError(f"--overlap {overlap} is not smaller than the size ({given}); "
                            f"write --overlap {size_now - 1} or less, or a larger {larger}")
    parent_size = parent_tokens if parent_tokens is not None else parent_chars
    if parent_size is not None:
        parent_unit = "tokens" if parent_tokens is not None else "chars"
        if parent_chars is not None and parent_tokens is not None:
            raise SettingsError("--parent-chars and --parent-tokens exclude each other")
        if parent_unit != (unit or "chars"):
            raise SettingsError(f"parents are counted in the children's unit: with "
                                f"--{unit or 'chars'} write --parent-{unit or 'chars'} N")
        parent_overlap = _percent_of(parent_overlap, parent_size)
    elif parent_overlap is not None:
        raise SettingsError("--parent-overlap needs --parent-chars or --parent-tokens")
    if strip_headings and not kind.strips_headings:
        raise SettingsError(f"--strip-headings is for --strategy markdown, not {strategy}")
    if embed_text and "headings" not in kind.fields:
        raise SettingsError(f"--embed-text needs headings: write --strategy markdown or "
                            f"sections (--strategy {strategy} gives none)")
    if separator_regex and separators is None:
        raise SettingsError("--separator-regex applies to --separators: give them too")
    if separators is not None and language is not None:
        raise SettingsError("--separators and --language exclude each other: give one")
    return Settings(strategy=strategy, unit=unit, size=size, overlap=overlap,
                    parent_size=parent_size, parent_overlap=parent_overlap,
                    strip_headings=strip_headings, embed_text=embed_text,
                    count_tokens=count_tokens, errors=errors,
                    separators=None if separators is None else tuple(separators),
                    separator_regex=separator_regex, language=language,
                    keep_separator=keep_separator, strip_whitespace=strip_whitespace, ids=ids)


def _percent_of(overlap: int | str | None, size: int) -> int | None:
    """An overlap option's value in units: a percentage (``"15%"``) of ``size``."""
    if isinstance(overlap, str):
        return int(size * float(overlap[:-1]) // 100)
    return overlap


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the options of ``add_settings_options`` (without ``grid``)."""
    return settings_from_options(
        args.strategy, args.chars, args.tokens, args.size, args.overlap,
        count_tokens=args.count_tokens, errors=args.errors, parent_chars=args.parent_chars,
        parent_tokens=args.parent_tokens, parent_overlap=args.parent_overlap,
        strip_headings=args.strip_headings, embed_text=args.embed_text,
        separators=args.separators, separator_regex=args.separator_regex,
        language=args.language, keep_separator=args.keep_separator,
        strip_whitespace=args.strip_whitespace, ids=args.ids)


def parse_with_settings(parser: argparse.ArgumentParser,
                        argv: list[str]) -> tuple[argparse.Namespace, Settings]:
    """A subcommand's arguments and its settings; bad settings are a usage error
    (exit 2, one line, without argparse's usage text)."""
    args = parser.parse_args(argv)
    try:
        return args, settings_from_args(args)
    except SettingsError as error:  # one line that says what to write instead
        parser.error(str(error))
