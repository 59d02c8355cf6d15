"""Length units: what a chunk's size is measured in.

A unit is any object with the ``LengthUnit`` protocol (``chunkd.model.length``): the splitter
(compiled or pure Python) runs on any of them, exactly. Code points ("chars") and
cl100k_base tokens ship here; a new unit is one module in this package (see
``cl100k.py``) plus a line in ``resolve``.
"""

from __future__ import annotations

import functools
import os

from chunkd.model.errors import SettingsError
from chunkd.model.length import CHARS, Chars, CountError, FunctionUnit, LengthUnit, checked_unit

__all__ = ["CHARS", "Chars", "CountError", "FunctionUnit", "LengthUnit", "checked_unit", "measure",
           "resolve"]


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
    if os.sep in spec or spec.endswith(".json"):
        raise SettingsError(f"{spec}: no such file or folder")
    raise SettingsError(f"unknown tokenizer {spec!r}: give chars, a tiktoken encoding "
                        f"(cl100k_base, {', '.join(tiktoken_encodings.names())}), a .tiktoken "
                        f"file, or a Hugging Face tokenizer.json file or model folder")


def window(spec: str) -> int | None:
    """The ``max_size`` of the unit ``spec`` names, without loading one that is no
    model's (code points and tiktoken's encodings have none): the default settings
    never load cl100k_base just to learn that it has no window."""
    return None if _no_model(spec) else resolve(spec).max_size


def special_tokens(spec: str) -> int | None:
    """The tokens the model of the Hugging Face tokenizer ``spec`` names adds to every
    input ([CLS] and [SEP]); None for a unit that is no such tokenizer."""
    return None if _no_model(spec) else getattr(resolve(spec), "special", None)


def _no_model(spec: str) -> bool:
    """Whether ``spec`` names code points or a tiktoken encoding, known without
    loading it."""
    if spec in ("chars", "cl100k_base", "tokens"):
        return True  # known without importing tiktoken's list (every run asks)
    from chunkd.units import tiktoken_encodings

    return spec in tiktoken_encodings.names() or spec.endswith(tiktoken_encodings.SUFFIX)


def measure(unit: str, tokenizer: str) -> LengthUnit:
    """The unit of a size in ``unit`` ("chars", "tokens"), tokens being those of
    ``tokenizer`` (a spec for ``resolve``): how settings name a unit
    (``chunkd.settings.Settings.measure``)."""
    return resolve(tokenizer if unit == "tokens" else unit)
