"""Both splitting cores side by side: the compiled modules and their pure-Python twin
(``chunkd.kernel.twin``), with the length units each runs on. ``chunkd.kernel.chosen`` picks one for
the product; the tests compare the two directly."""

from __future__ import annotations

import functools

from chunkd.kernel import _kernel, pretoken_classes
from chunkd.kernel.twin import recursive as twin
from chunkd.kernel.twin import tokens as twin_tokens
from chunkd.units import CHARS, LengthUnit, resolve
from chunkd.units.cl100k import encoding
from oracle import PlainTokens

Kernel = _kernel.RecursiveSplitter
Twin = twin.RecursiveSplitter


@functools.lru_cache(maxsize=None)
def twin_token_counter() -> twin_tokens.TokenCounter:
    """The twin's cl100k_base counter, built as ``chunkd.units.cl100k`` builds the
    compiled one."""
    enc = encoding()
    return twin_tokens.TokenCounter(enc.encode_ordinary, pretoken_classes.load(),
                                    max(len(token) for token in enc.token_byte_values()))


def kernel_unit(unit: str) -> LengthUnit:
    """The compiled core's unit: "chars", "tokens" (its own counter, the fast path) or
    "plain tokens" (tiktoken through the protocol alone)."""
    return PlainTokens() if unit == "plain tokens" else CHARS if unit == "chars" else \
        resolve("cl100k_base")


def twin_unit(unit: str) -> LengthUnit:
    """The twin's unit of the same name."""
    return PlainTokens() if unit == "plain tokens" else CHARS if unit == "chars" else \
        twin_token_counter()


def chunks_of(splitter, pieces: list[str]) -> list:
    """Everything ``splitter`` makes of the document fed in ``pieces``."""
    chunks = []
    for piece in pieces:
        chunks += splitter.feed(piece)
    return chunks + splitter.finish()
