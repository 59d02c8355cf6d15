"""The grid of settings: every combination of the settings options' comma lists.

Each strategy takes the sizes written for its kind: a recursive strategy every
``--chars`` and ``--tokens`` value, a window strategy every ``--size`` value; each size
is combined with every ``--overlap``. What is not given takes a default: the recursive
strategy, ``DEFAULT_TOKENS`` for a recursive strategy (the strategy's own default size
for a window strategy), ``DEFAULT_OVERLAPS``. The other settings options (separators,
``--language``, ``--strip-headings``, ``--embed-text``, ...) apply to every setting.
Every combination is built by ``chunkd.settings.settings_from_options``, the filter's
own path; a combination it refuses (an overlap not smaller than a size) is reported and
left out. Parent/child settings are refused: eval scores the chunks retrieval returns,
and would have to choose between children and parents.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

from chunkd.settings import Settings, SettingsError, settings_from_options
from chunkd.strategies import strategy_class

DEFAULT_TOKENS = [64, 128, 256, 512, 1024, 2048]
DEFAULT_OVERLAPS: list[int | str] = [0, "15%"]
#: The settings options that apply to every setting of the grid, as they are given.
SHARED = ("errors", "strip_headings", "embed_text", "separators", "separator_regex",
          "language", "keep_separator", "strip_whitespace")


@dataclass(frozen=True)
class Point:
    """One setting of the grid, and the overlap as written (``15%`` draws one line
    across sizes in the chart, where the overlaps in units differ)."""

    settings: Settings
    overlap: str

    def options(self) -> str:
        """The filter's options that choose these settings."""
        settings = self.settings
        size = "--size" if strategy_class(settings.strategy).window else f"--{settings.unit}"
        return shlex.join(["--strategy", settings.strategy, size, str(settings.size),
                           "--overlap", str(settings.overlap), *settings.other_arguments()])


def grid(args: argparse.Namespace) -> tuple[list[Point], list[str]]:
    """The settings the options ask for, in option order, without repeats, and a
    message for each combination that cannot work. Options that no strategy of the
    grid takes, or an unknown strategy, raise ``SettingsError``."""
    strategies = args.strategy or ["recursive"]
    kinds = [strategy_class(name) for name in strategies]  # unknown names raise here
    for option in ("parent_chars", "parent_tokens", "parent_overlap"):
        if getattr(args, option) is not None:
            raise SettingsError(f"--{option.replace('_', '-')}: chunkd eval does not evaluate "
                                "parent/child chunking (it scores the chunks retrieval "
                                "returns); evaluate the children's sizes without it")
    shared = {name: getattr(args, name) for name in SHARED}
    recursive_sizes = ([("chars", size) for size in args.chars or []]
                       + [("tokens", size) for size in args.tokens or []])
    window_sizes = [("size", size) for size in args.size or []]
    for sizes, window in ((recursive_sizes, False), (window_sizes, True)):
        if sizes and not any(kind.window == window for kind in kinds):
            option, value = sizes[0]  # let the settings say what to write instead
            settings_from_options(strategies[0], **{option: value})
    recursive_sizes = recursive_sizes or [("tokens", size) for size in DEFAULT_TOKENS]
    points: list[Point] = []
    problems: list[str] = []
    for name, kind in zip(strategies, kinds):
        sizes = (window_sizes or [("size", None)]) if kind.window else recursive_sizes
        for option, size in sizes:
            for overlap in args.overlap or DEFAULT_OVERLAPS:
                try:
                    settings = settings_from_options(name, overlap=overlap, **shared,
                                                     **{option: size})
                except SettingsError as error:
                    shown = "" if size is None else f" --{option} {size}"
                    problems.append(f"--strategy {name}{shown} --overlap {overlap}: {error}")
                    continue
                if all(point.settings != settings for point in points):
                    points.append(Point(settings, str(overlap)))
    return points, problems
