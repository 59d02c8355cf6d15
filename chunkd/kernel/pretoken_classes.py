"""The character classes of tiktoken's pre-tokenizers, one byte per code point: for
cl100k_base's pattern, 1 = ``\\p{L}``, 2 = ``\\p{N}``, 4 = ``\\s``; for o200k_base's,
which names more classes, the bits of ``CATEGORY_BITS`` (``PATTERNS``: the table each
pattern that the token counter translates reads).

Built once, when the package is built (``setup.py`` runs ``build``; building takes
half a second, which every run counting tokens would otherwise pay), and loaded from
the package at run time. This module imports nothing from chunkd, so that the build
can run it before the package exists.

Categories come from ``unicodedata2`` pinned at Unicode 16.0, the version of the Rust
regex tables inside tiktoken: with Python's own ``unicodedata`` (14.0 in Python 3.11)
or a newer one, letters assigned in other versions are counted wrong. The tests sweep
every code point against tiktoken itself.
"""

from __future__ import annotations

import os

FILE = "_pretoken_classes.zlib"
CATEGORIES_FILE = "_unicode_categories.zlib"

#: The bits of the category table: general categories (a one-letter key is the whole
#: major class) and White_Space, the classes that tiktoken's patterns name.
CATEGORY_BITS = {"Lu": 1, "Ll": 2, "Lt": 4, "Lm": 8, "Lo": 16, "M": 32, "N": 64,
                 "White_Space": 128}

#: Unicode White_Space, which is what \\s means in tiktoken's (Rust) regex; Python's
#: str.isspace() differs (it also takes U+001C..U+001F).
WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
               (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
               (0x3000, 0x3000)]


def build() -> bytes:
    """The table, computed from the Unicode database (zlib-compressed: 3 KB)."""
    import unicodedata2
    import zlib

    category = unicodedata2.category
    flags = {"L": 1, "N": 2}
    table = bytearray(flags.get(category(chr(cp))[0], 0) for cp in range(0x110000))
    for first, last in WHITE_SPACE:
        table[first:last + 1] = b"\x04" * (last - first + 1)
    return zlib.compress(bytes(table), 9)


def build_categories() -> bytes:
    """The category table, computed from the Unicode database (zlib-compressed)."""
    import unicodedata2
    import zlib

    category = unicodedata2.category
    bits = CATEGORY_BITS
    table = bytearray(0x110000)
    for cp in range(0x110000):
        name = category(chr(cp))
        table[cp] = bits.get(name, 0) | bits.get(name[0], 0)
    for first, last in WHITE_SPACE:
        for cp in range(first, last + 1):
            table[cp] |= bits["White_Space"]
    return zlib.compress(bytes(table), 9)


#: The pre-tokenizer patterns that the token counter (compiled and twin) translates,
#: named after the encoding that defines each, and the table of classes each reads.
PATTERNS = {"cl100k_base": FILE, "o200k_base": CATEGORIES_FILE}


def load(file: str = FILE) -> bytes:
    """A table (``FILE`` or ``CATEGORIES_FILE``), as the package ships it."""
    # Read beside this module (importlib.resources would import tempfile and more
    # at every start of the command, for a package that is always on disk); zlib
    # only here, as a run that counts no tokens has no use for it.
    import zlib

    with open(os.path.join(os.path.dirname(__file__), file), "rb") as data:
        return zlib.decompress(data.read())


def table(pattern: str) -> bytes:
    """The table of classes that ``pattern`` (a key of ``PATTERNS``) reads."""
    return load(PATTERNS[pattern])


#: tiktoken's Rank::MAX, which no token has: where BPE finds no token.
NO_RANK = 0xFFFFFFFF


def bad_rank(token: object, rank: object) -> ValueError:
    """The error for an entry of a counter's ranks that is not token bytes to an id
    (both cores check each entry as they take the ranks)."""
    return ValueError(f"ranks must map bytes to ids below 2**32 - 1, not {token!r} to {rank!r}")


def check_counter_arguments(encode: object, classes: bytes, max_token_bytes: int,
                            cache_entries: int, pattern: str = "cl100k_base",
                            ranks: object = None) -> None:
    """Check the arguments of a token counter (compiled or its twin): ``encode`` is
    tiktoken's ``encode_ordinary``, ``classes`` the table of ``pattern``,
    ``max_token_bytes`` the longest token's length, ``cache_entries`` how many
    pre-tokens the cache holds, ``pattern`` a key of ``PATTERNS``, ``ranks`` None or
    the ranks ``encode`` runs BPE over, a dict or packed (each core checks every entry
    as it takes them: ``bad_rank``, and the single bytes of packed ranks)."""
    if ranks is not None and not isinstance(ranks, bytes):  # packed: checked as read
        if not isinstance(ranks, dict):
            raise TypeError("ranks must be a dict of token bytes to ids, packed ranks "
                            "(bytes) or None")
        if any(bytes([byte]) not in ranks for byte in range(256)):
            raise ValueError("ranks must hold every single byte, as a byte-level BPE's do")
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {pattern!r}")
    if not callable(encode):
        raise TypeError("encode must be callable (tiktoken's encode_ordinary)")
    if len(classes) != 0x110000:
        raise ValueError("classes must have one byte per code point")
    if max_token_bytes < 1:
        raise ValueError(f"max_token_bytes must be at least 1, got {max_token_bytes}")
    if not 1 <= cache_entries <= 1 << 24:
        raise ValueError(f"cache_entries must be between 1 and 2**24, got {cache_entries}")
