"""What a length unit is: the ``LengthUnit`` protocol, code points, any length function,
and the check the splitters make of a unit. The compiled kernel and its twin import
this module, never the package's ``resolve``, which loads the units (and through them
the core) on demand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable


@runtime_checkable
class LengthUnit(Protocol):
    """A length unit, as the splitters use it."""

    #: As results record it: "chars", "cl100k_base", "o200k_base", or a tokenizer
    #: file's identity (its name and SHA-256).
    name: str
    #: Every text t has count(t) >= len(t) // max_chars (each unit covers at most this
    #: many code points), or None when no such bound holds (WordPiece's [UNK] covers a
    #: whole word of any length).
    max_chars: int | None
    @property
    def max_size(self) -> int | None:
        """The model's window: the most units a chunk may have and still be read whole
        by the model this unit is the tokenizer of (its maximum sequence length less the
        special tokens it adds), or None when the unit is no model's (code points, an
        encoding, a tokenizer file without its model's limit)."""

    def count(self, text: str) -> int:
        """The exact length of text in this unit."""

    def settled(self, text: str) -> tuple[int, int]:
        """(end, n): a prefix text[:end] and its exact count n such that, for every
        string more, count(text + more) == n + count(text[end:] + more). The streaming
        kernel counts a growing piece by its settled prefixes and bounds the rest with
        max_chars, so that a piece is known to be long before it ends. (0, 0) is always
        a valid answer: the piece is then judged only once complete, and memory holds it."""


class Chars:
    """Unicode code points; the splitters count them without calling ``count``."""

    name = "chars"
    max_chars: int | None = 1
    max_size: int | None = None

    def count(self, text: str) -> int:
        return len(text)

    def settled(self, text: str) -> tuple[int, int]:
        return len(text), len(text)


#: The code-point unit.
CHARS = Chars()


class FunctionUnit:
    """Any length function (LangChain's ``length_function``) as a unit: exact, with no
    bound, so a piece is judged only once it is complete."""

    max_chars: int | None = None
    max_size: int | None = None

    def __init__(self, length: Callable[[str], int], name: str | None = None) -> None:
        self.length = length
        self.name = getattr(length, "__qualname__", repr(length)) if name is None else name

    def count(self, text: str) -> int:
        return self.length(text)

    def settled(self, text: str) -> tuple[int, int]:
        return 0, 0


class CountError(TypeError):
    """A unit counted something other than a whole number of at least 0 (a length
    function returning a float): the compiled kernel's integer counts cannot take it."""


def checked_unit(unit: object) -> LengthUnit:
    """``unit``, if it has the ``LengthUnit`` protocol's members and a valid bound."""
    if not isinstance(unit, LengthUnit):
        raise TypeError(f"a length unit has name, max_chars, count and settled, "
                        f"not {unit!r}")
    bound = unit.max_chars
    if bound is not None and (not isinstance(bound, int) or bound < 1):
        raise ValueError(f"a length unit's max_chars is None or at least 1, not {bound!r}")
    return unit
