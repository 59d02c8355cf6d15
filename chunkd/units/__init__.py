"""Length units: what a chunk's size is measured in.

A unit is any object with the ``LengthUnit`` protocol below: the recursive splitter
(compiled or pure Python) runs on any of them, exactly. Code points ("chars") and
cl100k_base tokens ship here; a new unit is one module in this package (see
``cl100k.py``) plus a line in ``resolve``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from chunkd.errors import SettingsError

__all__ = ["CHARS", "Chars", "CountError", "FunctionUnit", "LengthUnit", "checked_unit", "resolve"]


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


@functools.lru_cache(maxsize=None)
def resolve(spec: str) -> LengthUnit:
    """The unit for ``spec``, loaded once a process, offline: "chars", "cl100k_base"
    (also called "tokens", the name the options give it), another tiktoken encoding's
    name ("o200k_base"...), a ``.tiktoken`` file named after its encoding, or a Hugging
    Face ``tokenizer.json`` file or model folder (see ``docs/tokenizers.md``)."""
    if spec == "chars":
        return CHARS
    if spec in ("cl100k_base", "tokens"):
        from chunkd.units import cl100k

        return cl100k.unit()
    from chunkd.units import huggingface, tiktoken_encodings

    if spec in tiktoken_encodings.names():
        return tiktoken_encodings.unit(spec)
    if spec.endswith(tiktoken_encodings.SUFFIX):
        return tiktoken_encodings.file_unit(spec)
    if os.path.exists(spec):
        return huggingface.unit(spec)
    raise SettingsError(f"unknown tokenizer {spec!r}: give chars, a tiktoken encoding "
                        f"(cl100k_base, {', '.join(tiktoken_encodings.names())}), a .tiktoken "
                        f"file, or a Hugging Face tokenizer.json file or model folder")
