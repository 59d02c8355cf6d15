"""Token counting in plain Python (cl100k_base's and o200k_base's pre-tokenizer): the
twin of ``chunkd.kernel._kernel.TokenCounter``.

tiktoken cuts text into pre-tokens with a regex, then runs BPE on each pre-token
alone, so a count is the sum of the pre-tokens' counts. The pre-tokenizer here is the
kernel's hand translation of that regex, on the same table of character classes
(``chunkd.kernel.pretoken_classes``), and each distinct pre-token is encoded once and its
count cached: by tiktoken's BPE run here over the encoding's ranks when the counter
has them (``byte_pair_encode``), else by tiktoken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chunkd.kernel.pretoken_classes import NO_RANK, bad_rank, check_counter_arguments

LETTER, NUMBER, SPACE = 1, 2, 4  # cl100k_base's table: \p{L}, \p{N}, \s
# o200k_base's table (pretoken_classes.CATEGORY_BITS): \p{L}; U, W (the pattern's two
# letter classes, see ``_o200k_end``); \p{N}; \s.
CAT_LETTER, CAT_UPPER, CAT_LOWER, CAT_NUMBER, CAT_SPACE = 31, 61, 58, 64, 128
CRLF = "\r\n"
CONTRACTION_LETTERS = "sdmtSDMT\u017f"  # [sdmt] under (?i); the long s folds to s
CONTRACTIONS = ("ll", "ve", "re")       # compared in lower case
#: Longer pre-tokens go to tiktoken (the kernel holds a piece on its stack).
BPE_MAX_BYTES = 256


def byte_pair_encode(ranks: dict[bytes, int], piece: bytes) -> list[int] | None:
    """The tokens of ``piece`` by tiktoken's BPE over ``ranks`` (``tiktoken/src/lib.rs``,
    ``byte_pair_encode``), or None where a part is no token (ranks that are no BPE's)."""
    rank = ranks.get(piece)
    if rank is not None:                   # most pre-tokens are one token
        return [rank]
    # The parts start as single bytes; the pair of lowest rank (the leftmost of equals)
    # is joined, until no pair is a token. ``part``: where each part starts, then the
    # end; ``pair``: the rank of each part joined with the next.
    part = list(range(len(piece) + 1))
    pair = [ranks.get(piece[k:k + 2], NO_RANK) for k in range(len(piece) - 1)] + [NO_RANK, NO_RANK]
    while True:
        lowest = min(pair[:-1])
        if lowest == NO_RANK:
            break
        best = pair.index(lowest)
        # The ranks of the joined part and the part before it with their new
        # neighbours (before the removal, best + 3 is the new best + 2).
        if best > 0:
            pair[best - 1] = ranks.get(piece[part[best - 1]:part[best + 2]], NO_RANK) \
                if best + 2 < len(part) else NO_RANK
        pair[best] = ranks.get(piece[part[best]:part[best + 3]], NO_RANK) \
            if best + 3 < len(part) else NO_RANK
        del part[best + 1], pair[best + 1]
    tokens = [ranks.get(piece[a:b], NO_RANK) for a, b in zip(part, part[1:])]
    return None if NO_RANK in tokens else tokens


def unpack_ranks(packed: bytes) -> dict[bytes, int]:
    """The ranks of a packed ranks file (each token's bytes after a byte of its length,
    in rank order, as ``chunkd.units.tiktoken_encodings`` ships them): token bytes to id."""
    ranks: dict[bytes, int] = {}
    at = rank = 0
    while at < len(packed):
        end = at + 1 + packed[at]
        if end > len(packed):
            raise ValueError(f"the packed ranks end inside token {rank}")
        ranks[packed[at + 1:end]] = rank
        rank += 1
        at = end
    return ranks


def _contraction_end(text: str, i: int, n: int) -> int:
    """End of (?i:'s|'t|'re|'ve|'m|'ll|'d) at ``i``, or ``i`` (both patterns' contractions)."""
    if i + 1 < n and text[i] == "'":
        if text[i + 1] in CONTRACTION_LETTERS:
            return i + 2
        if i + 2 < n and text[i + 1:i + 3].lower() in CONTRACTIONS and \
                text[i + 1:i + 3].isascii():
            return i + 3
    return i


class TokenCounter:
    """Exact token counts of a tiktoken encoding whose pre-tokenizer is translated here
    (cl100k_base's pattern or o200k_base's): ``count(s) == len(encode_ordinary(s))``; a
    ``chunkd.units.LengthUnit``."""

    def __init__(self, encode: Callable[[str], list[int]], classes: bytes,
                 max_token_bytes: int, cache_entries: int = 1 << 16,
                 name: str = "cl100k_base", pattern: str = "cl100k_base",
                 ranks: dict[bytes, int] | bytes | None = None) -> None:
        if not isinstance(classes, bytes):
            raise TypeError("classes must be bytes")
        if isinstance(ranks, bytes):  # packed: the twin looks them up in a dict
            ranks = unpack_ranks(ranks)
        check_counter_arguments(encode, classes, max_token_bytes, cache_entries, pattern, ranks)
        for token, rank in (ranks or {}).items():
            if type(token) is not bytes or not 0 <= rank < NO_RANK:
                raise bad_rank(token, rank)
        #: The ranks ``encode`` runs BPE over: given, a new pre-token is encoded here.
        self._ranks = ranks
        self.pattern = pattern
        self._pretoken_end = self._o200k_end if pattern == "o200k_base" else self._cl100k_end
        self._encode = encode
        self._classes = classes
        self._cache: dict[str, int] = {}
        self._cache_entries = cache_entries
        self.name = name
        self.max_chars: int | None = max_token_bytes
        #: No model's window: a tiktoken encoding is not one model's tokenizer.
        self.max_size: int | None = None

    @property
    def encoding(self) -> Any:
        """The ``tiktoken.Encoding`` whose ``encode_ordinary`` counts (None when
        ``encode`` is another function)."""
        return getattr(self._encode, "__self__", None)

    def _class(self, text: str, i: int) -> int:
        return self._classes[ord(text[i])]

    def _cl100k_end(self, text: str, i: int, n: int) -> int:
        """End of the pre-token that starts at ``i`` when the text ends at ``n``, by
        cl100k_base's pattern (the kernel's ``cl100k_end``, alternative for alternative)."""
        cls = self._class
        c = text[i]
        cc = cls(text, i)
        if c == "'":
            j = _contraction_end(text, i, n)
            if j > i:
                return j
        if cc & LETTER:
            j = i + 1
            while j < n and cls(text, j) & LETTER:
                j += 1
            return j
        if not cc & NUMBER and c not in CRLF and i + 1 < n and cls(text, i + 1) & LETTER:
            j = i + 2
            while j < n and cls(text, j) & LETTER:
                j += 1
            return j
        if cc & NUMBER:
            j = i + 1
            while j < n and j < i + 3 and cls(text, j) & NUMBER:
                j += 1
            return j
        j = i
        if c == " " and i + 1 < n and not cls(text, i + 1):
            j = i + 1
        if not cls(text, j):
            k = j + 1
            while k < n and not cls(text, k):
                k += 1
            while k < n and text[k] in CRLF:
                k += 1
            return k
        j = i + 1                          # only white space is left
        while j < n and cls(text, j) & SPACE:
            j += 1
        if j == n:                         # \s++$
            return n
        k = j - 1                          # \s*[\r\n]
        while k >= i:
            if text[k] in CRLF:
                return k + 1
            k -= 1
        if j - 1 > i:                      # \s+(?!\S)
            return j - 1
        return i + 1                       # \s

    def _o200k_end(self, text: str, i: int, n: int) -> int:
        """End of the pre-token that starts at ``i`` when the text ends at ``n``, by
        o200k_base's pattern (the kernel's ``o200k_end``, alternative for alternative:
        its regex backtracks). With U = [\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}],
        W = [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}], C = (?i:'s|'t|'re|'ve|'m|'ll|'d), in order:
        [^\\r\\n\\p{L}\\p{N}]?U*W+C? | [^\\r\\n\\p{L}\\p{N}]?U+W*C? | \\p{N}{1,3} |
         ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]* | \\s*[\\r\\n]+ | \\s+(?!\\S) | \\s+"""
        cls = self._class
        c = text[i]
        cc = cls(text, i)
        prefix = not cc & (CAT_LETTER | CAT_NUMBER) and c not in CRLF
        # Each letter alternative with its optional prefix taken first, then without it:
        # a mark is both a prefix and in U and W, so both ways can match.
        j = self._o200k_lower_end(text, i + 1, n) if prefix else -1
        if j < 0:
            j = self._o200k_lower_end(text, i, n)
        if j < 0 and prefix:
            j = self._o200k_upper_end(text, i + 1, n)
        if j < 0:
            j = self._o200k_upper_end(text, i, n)
        if j >= 0:
            return _contraction_end(text, j, n)
        if cc & CAT_NUMBER:                # \p{N}{1,3}
            j = i + 1
            while j < n and j < i + 3 and cls(text, j) & CAT_NUMBER:
                j += 1
            return j
        other = CAT_SPACE | CAT_LETTER | CAT_NUMBER
        j = i + 1 if c == " " and i + 1 < n else i      # ' '?[^\s\p{L}\p{N}]+[\r\n/]*
        if not cls(text, j) & other:
            k = j + 1
            while k < n and not cls(text, k) & other:
                k += 1
            while k < n and text[k] in "\r\n/":
                k += 1
            return k
        j = i + 1                          # only white space is left: its run is [i, j)
        while j < n and cls(text, j) & CAT_SPACE:
            j += 1
        k = j - 1                          # \s*[\r\n]+: up to the run's last CR or LF
        while k >= i:
            if text[k] in CRLF:
                return k + 1
            k -= 1
        if j == n or j == i + 1:           # \s+(?!\S) at the end; \s+ before \S
            return j
        return j - 1                       # \s+(?!\S)

    def _o200k_lower_end(self, text: str, s: int, n: int) -> int:
        """End of U*W+ at ``s``, as the regex backtracks it, or -1."""
        cls = self._class
        u = s
        while u < n and cls(text, u) & CAT_UPPER:
            u += 1
        if u < n and cls(text, u) & CAT_LOWER:
            u += 1
            while u < n and cls(text, u) & CAT_LOWER:
                u += 1
            return u
        p = u - 1                          # U* gives back until W+ takes the run's last W
        while p >= s and not cls(text, p) & CAT_LOWER:
            p -= 1
        return p + 1 if p >= s else -1

    def _o200k_upper_end(self, text: str, s: int, n: int) -> int:
        """End of U+W* at ``s``, or -1."""
        cls = self._class
        u = s
        while u < n and cls(text, u) & CAT_UPPER:
            u += 1
        if u == s:
            return -1
        while u < n and cls(text, u) & CAT_LOWER:
            u += 1
        return u

    def _pretoken_tokens(self, pretoken: str) -> list[int]:
        """The pre-token's tokens, by BPE over the ranks where the kernel encodes it
        (no surrogate, at most BPE_MAX_BYTES), else by ``encode``."""
        if self._ranks is not None and len(pretoken) <= BPE_MAX_BYTES:
            try:
                piece = pretoken.encode()
            except UnicodeEncodeError:     # a lone surrogate, which tiktoken replaces
                piece = b""
            if 0 < len(piece) <= BPE_MAX_BYTES:
                tokens = byte_pair_encode(self._ranks, piece)
                if tokens is not None:
                    return tokens
        return self._encode(pretoken)

    def _pretoken_count(self, pretoken: str) -> int:
        count = self._cache.get(pretoken)
        if count is None:
            count = len(self._pretoken_tokens(pretoken))
            if count < 1:
                raise ValueError(f"encode returned {count} tokens for a non-empty pre-token")
            if len(self._cache) == self._cache_entries:
                self._cache.clear()        # bounded memory on text that never repeats
            self._cache[pretoken] = count
        return count

    def _boundaries(self, text: str) -> list[int]:
        """Where each pre-token of ``text`` starts, and its end."""
        bounds, i, n = [0], 0, len(text)
        while i < n:
            i = self._pretoken_end(text, i, n)
            bounds.append(i)
        return bounds

    def count(self, text: str) -> int:
        """The number of tokens in ``text``."""
        bounds = self._boundaries(text)
        return sum(self._pretoken_count(text[a:b]) for a, b in zip(bounds, bounds[1:]))

    def settled(self, text: str) -> tuple[int, int]:
        """(end, n): the pre-tokens followed by two more, which stay pre-tokens of any
        text that begins with ``text``, end at ``end`` and hold ``n`` tokens."""
        bounds = self._boundaries(text)[:-2]
        if len(bounds) < 2:
            return 0, 0
        return bounds[-1], sum(self._pretoken_count(text[a:b])
                               for a, b in zip(bounds, bounds[1:]))

    def pretokens(self, text: str) -> list[str]:
        """The pre-tokens of ``text``, as tiktoken's regex cuts them (for tests)."""
        bounds = self._boundaries(text)
        return [text[a:b] for a, b in zip(bounds, bounds[1:])]

    def tokens(self, text: str) -> list[int]:
        """``encode_ordinary(text)``: each pre-token's tokens as ``count`` finds them
        (for tests)."""
        return [token for piece in self.pretokens(text) for token in self._pretoken_tokens(piece)]
