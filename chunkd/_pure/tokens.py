"""cl100k_base token counting in plain Python: the twin of ``chunkd._kernel.TokenCounter``.

tiktoken cuts text into pre-tokens with a regex, then runs BPE on each pre-token
alone, so a count is the sum of the pre-tokens' counts. The pre-tokenizer here is the
kernel's hand translation of that regex, on the same table of character classes
(``chunkd.pretoken_classes``), and each distinct pre-token is sent to tiktoken once
and cached.
"""

from __future__ import annotations

from collections.abc import Callable

from chunkd.pretoken_classes import check_counter_arguments

LETTER, NUMBER, SPACE = 1, 2, 4  # the table's flags: \p{L}, \p{N}, \s
CRLF = "\r\n"
CONTRACTION_LETTERS = "sdmtSDMT\u017f"  # [sdmt] under (?i); the long s folds to s
CONTRACTIONS = ("ll", "ve", "re")       # compared in lower case


class TokenCounter:
    """Exact cl100k_base token counts: ``count(s) == len(encode_ordinary(s))``; a
    ``chunkd.units.LengthUnit``."""

    def __init__(self, encode: Callable[[str], list[int]], classes: bytes,
                 max_token_bytes: int, cache_entries: int = 1 << 16,
                 name: str = "cl100k_base") -> None:
        if not isinstance(classes, bytes):
            raise TypeError("classes must be bytes")
        check_counter_arguments(encode, classes, max_token_bytes, cache_entries)
        self._encode = encode
        self._classes = classes
        self._cache: dict[str, int] = {}
        self._cache_entries = cache_entries
        self.name = name
        self.max_chars: int | None = max_token_bytes

    def _class(self, text: str, i: int) -> int:
        return self._classes[ord(text[i])]

    def _pretoken_end(self, text: str, i: int, n: int) -> int:
        """End of the pre-token that starts at ``i`` when the text ends at ``n`` (the
        kernel's ``pretoken_end``, alternative for alternative)."""
        cls = self._class
        c = text[i]
        cc = cls(text, i)
        if c == "'" and i + 1 < n:
            if text[i + 1] in CONTRACTION_LETTERS:
                return i + 2
            if i + 2 < n and text[i + 1:i + 3].lower() in CONTRACTIONS and \
                    text[i + 1:i + 3].isascii():
                return i + 3
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

    def _pretoken_count(self, pretoken: str) -> int:
        count = self._cache.get(pretoken)
        if count is None:
            count = len(self._encode(pretoken))
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
        """The number of cl100k_base tokens in ``text``."""
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
