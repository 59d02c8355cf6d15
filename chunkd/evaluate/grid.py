"""The grid of settings: every combination of the comma lists of the options eval
varies (each ``Option`` declared with ``grid``).

Each strategy takes the sizes written for its kind: a recursive strategy every
``--chars`` and ``--tokens`` value, a window strategy every ``--size`` value; each size
is combined with every ``--overlap``. What is not given takes a default: the recursive
strategy, ``DEFAULT_TOKENS`` for a recursive strategy (those that fit, and the
largest that fits, with a model folder's ``--tokenizer``; the strategy's own default
size for a window strategy), ``DEFAULT_OVERLAPS`` (0 alone for a strategy whose chunks
do not overlap). The other settings flags (separators, ``--language``,
``--strip-headings``, ``--embed-text``, ...) apply to every setting; the model
(``--embed``) to the strategies that take it, and to the retriever.
Every combination is made by ``chunkd.settings.settings_from_flags``, the filter's own
path; a combination it refuses (an overlap not smaller than a size) is reported and
left out. Parent/child settings are refused: eval scores the chunks retrieval returns,
and would have to choose between children and parents.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from typing import Any

from chunkd.embeddings.selection import MODEL_OPTIONS, takes_model
from chunkd.llm.options import STRATEGIES_ASKING
from chunkd.settings import (OPTIONS, Settings, SettingsError, flags, given_flags,
                             model_window, settings_from_flags)
from chunkd.strategies import Strategy, strategy_class

DEFAULT_TOKENS = [64, 128, 256, 512, 1024, 2048]
#: Settings flags that eval's retriever reads too (the model): a strategy that does not
#: take them is given the others only.
RETRIEVER_FLAGS = MODEL_OPTIONS
#: The LLM's flags: for the strategies that ask it (``STRATEGIES_ASKING``) only.
LLM_FLAGS = ("llm_url", "llm_model", "llm_concurrency", "llm_window", "llm_cache")
DEFAULT_OVERLAPS: list[int | str] = [0, "15%"]


@dataclass(frozen=True)
class Point:
    """One setting of the grid, and the overlap as written (``15%`` draws one line
    across sizes in the chart, where the overlaps in units differ)."""

    settings: Settings
    overlap: str

    def options(self) -> str:
        """The filter's options that choose these settings."""
        return shlex.join(self.settings.command_line())


def default_tokens(fits: int | None) -> list[int]:
    """The default sizes in tokens: ``DEFAULT_TOKENS``, or, for a model that takes at
    most ``fits`` tokens a chunk, those below it and ``fits`` itself."""
    if fits is None:
        return DEFAULT_TOKENS
    return [size for size in DEFAULT_TOKENS if size < fits] + [fits]


def grid(args: argparse.Namespace) -> tuple[list[Point], list[str]]:
    """The settings the options ask for, in option order, without repeats, and a
    message for each combination that cannot work. Options that no strategy of the
    grid takes, or an unknown strategy, raise ``SettingsError``."""
    given = given_flags(args)
    strategies = given.get("strategy") or ["recursive"]
    kinds = [strategy_class(name) for name in strategies]  # unknown names raise here
    for option in (OPTIONS["parent_size"], OPTIONS["parent_overlap"]):
        for flag in option.flags:
            if flag.key in given:
                raise SettingsError(f"{flag.spelling}: chunkd eval does not evaluate "
                                    "parent/child chunking (it scores the chunks retrieval "
                                    "returns); evaluate the children's sizes without it")
    varied = {flag.key for option, flag in flags() if option.grid}
    shared = {key: value for key, value in given.items() if key not in varied | {"late"}}
    # Once, not for each combination: a bad tokenizer is a usage error.
    common = settings_from_flags({key: value for key, value in shared.items()
                                  if key in ("tokenizer", "embed_window")})
    recursive_sizes = ([("chars", size) for size in given.get("chars", [])]
                       + [("tokens", size) for size in given.get("tokens", [])])
    window_sizes = [("size", size) for size in given.get("size", [])]
    for sizes, window in ((recursive_sizes, False), (window_sizes, True)):
        if sizes and not any(kind.window == window for kind in kinds):
            key, value = sizes[0]  # let the settings say what to write instead
            settings_from_flags({"strategy": strategies[0], key: value})
    fits = model_window({"tokenizer": common.tokenizer, "embed_window": common.embed_window})
    recursive_sizes = recursive_sizes or [("tokens", size) for size in default_tokens(fits)]
    points: list[Point] = []
    problems: list[str] = []
    for name, kind in zip(strategies, kinds):
        chosen_sizes: list[tuple[str, Any]] = ((window_sizes or [("size", None)]) if kind.window
                                               else recursive_sizes)
        for key, size in chosen_sizes:
            for overlap in given.get("overlap") or (DEFAULT_OVERLAPS if kind.overlaps else [0]):
                chosen = {"strategy": name, "overlap": overlap}
                if size is not None:
                    chosen[key] = size
                try:
                    settings = settings_from_flags(taken(shared, kind) | chosen)
                except SettingsError as error:
                    shown = "" if size is None else f" --{key} {size}"
                    problems.append(f"--strategy {name}{shown} --overlap {overlap}: {error}")
                    continue
                if all(point.settings != settings for point in points):
                    points.append(Point(settings, str(overlap)))
                    if given.get("late"):  # the same chunks, their vectors late chunking's
                        points.append(Point(settings_from_flags(
                            shared | chosen | {"vectors": True, "late": True}), str(overlap)))
    return points, problems


def taken(flags: dict[str, Any], kind: type[Strategy]) -> dict[str, Any]:
    """``flags`` less the retriever's model options, for a strategy that embeds nothing,
    and less the LLM's, for one that does not ask it."""
    return {key: value for key, value in flags.items()
            if (key not in RETRIEVER_FLAGS or takes_model({"strategy": kind.name}))
            and (key not in LLM_FLAGS or kind.name in STRATEGIES_ASKING)}
