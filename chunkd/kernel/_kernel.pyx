# cython: language_level=3, cdivision=True
"""The compiled core: LangChain's recursive character splitting, run on a stream.

LangChain's ``_split_text(text, seps)`` picks the first separator found anywhere in
``text``, splits on it, merges the short pieces greedily and recurses into the long
ones with the remaining separators.  Here each separator is one ``_Level``; a level
reads the stream once, left to right, and

* cuts a piece at each occurrence of its separator (which stays at the end of the
  piece before it, at the start of the piece after it, or is dropped): a short piece
  goes to the level's merger, a long one (length >= chunk size) to the child level
  (the next separator);
* hands its text to the child as soon as the piece in hand is known to end up long,
  whether or not the separator was seen yet;
* at the end of its scope, if its separator never occurred, gives everything to the
  child: LangChain skips a separator the text does not contain.

Why that gives LangChain's chunks exactly, on any cutting of the input, is explained
in ``chunkd/kernel/twin/recursive.py``, the same algorithm in plain Python (its twin),
which the tests compare with this one.  Literal separators (and regular expressions that are plain
literals, like most of ``from_language``'s) stream: each level holds at most one
unfinished piece and one chunk in progress, so memory is bounded by the chunk size
and the separator depth, not by the document.  A real regular expression is run,
as LangChain runs it, on the whole text its level is given, which it holds until
that text ends.  Positions are code-point offsets into the document;
``RecursiveSplitter.buf`` holds the window of the document that some level still
needs, starting at document offset ``base``.
"""

cimport cython
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memmove, memset
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_Substring

from chunkd.kernel._core cimport (PY_SSIZE_T_MAX, PyUnicode_DATA, PyUnicode_KIND, PyUnicode_READ,
                           Spans, TextStream, find, spans_drop, spans_free, spans_push)

from chunkd.model.chunk import NO_OPTIONAL_FIELDS, Chunk
from chunkd.kernel.pretoken_classes import bad_rank, check_counter_arguments
from chunkd.kernel.splitting import SEPARATORS, checked_arguments, joined_chunk, literal_text
from chunkd.model.length import CHARS, Chars, CountError, checked_unit

# Character classes of the cl100k_base pre-tokenizer pattern, one byte per code point.
cdef enum:
    LETTER = 1   # \p{L}
    NUMBER = 2   # \p{N}
    SPACE = 4    # \s (Unicode White_Space)

# The o200k_base pattern's classes: bits of the category table
# (chunkd.kernel.pretoken_classes.CATEGORY_BITS).
cdef enum:
    CAT_LETTER = 1 | 2 | 4 | 8 | 16   # \p{L}: Lu Ll Lt Lm Lo
    CAT_UPPER = 1 | 4 | 8 | 16 | 32   # [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    CAT_LOWER = 2 | 8 | 16 | 32       # [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    CAT_NUMBER = 64                   # \p{N}
    CAT_SPACE = 128                   # \s

# Where a separator goes (LangChain's keep_separator).
cdef enum:
    KEEP_NONE = 0    # dropped; merged pieces are joined with it again (False)
    KEEP_START = 1   # at the start of the piece after it (True, "start")
    KEEP_END = 2     # at the end of the piece before it ("end")

# How a level finds its separator.
cdef enum:
    BY_CODE_POINT = 0   # "": every code point is a piece
    BY_LITERAL = 1      # a literal string, searched with memchr; streams
    BY_PATTERN = 2      # a regular expression, run once its whole scope has arrived


# Byte-pair encoding over an encoding's ranks (``TokenCounter``'s ``ranks``).
cdef enum:
    # Longer pre-tokens (rare: runs of symbols, long words) go to tiktoken, whose merge
    # is quadratic as this one is; the piece is held on the stack.
    BPE_MAX_BYTES = 256
cdef uint32_t NO_RANK = 0xFFFFFFFF    # pretoken_classes.NO_RANK: no such token


cdef inline uint32_t _bytes_hash(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """FNV-1a over ``n`` bytes, never 0 (which marks an empty slot)."""
    cdef uint32_t h = 2166136261U
    cdef Py_ssize_t k
    for k in range(n):
        h = (h ^ p[k]) * 16777619U
    return h | 1


cdef inline bint _is_crlf(unsigned int c) nogil:
    return c == 13 or c == 10


cdef inline bint _is_contraction_letter(unsigned int c) nogil:
    """[sdmt] under (?i), where the long s (U+017F) folds to s."""
    c = c | 32 if c < 128 else c
    return c == 115 or c == 100 or c == 109 or c == 116 or c == 0x17F


cdef inline Py_ssize_t _contraction_end(int kind, void* data, Py_ssize_t i,
                                        Py_ssize_t n) noexcept nogil:
    """End of (?i:'s|'t|'re|'ve|'m|'ll|'d) at ``i``, or ``i`` (both patterns' contractions)."""
    cdef unsigned int d, e
    if i + 1 < n and PyUnicode_READ(kind, data, i) == 39:
        d = PyUnicode_READ(kind, data, i + 1)
        if _is_contraction_letter(d):
            return i + 2
        if i + 2 < n:
            d = d | 32
            e = PyUnicode_READ(kind, data, i + 2) | 32
            if (d == 108 and e == 108) or (d == 118 and e == 101) or (d == 114 and e == 101):
                return i + 3
    return i


def unpack_ranks(bytes packed not None):
    """The ranks of a packed ranks file (each token's bytes after a byte of its length,
    in rank order, as ``chunkd.units.tiktoken_encodings`` ships them): token bytes to
    id, built here in half the time of the twin's Python loop (which takes a fifth of
    loading o200k_base)."""
    cdef const unsigned char* data = packed
    cdef Py_ssize_t n = len(packed), at = 0, end, rank = 0
    cdef dict ranks = {}
    while at < n:
        end = at + 1 + data[at]
        if end > n:
            raise ValueError(f"the packed ranks end inside token {rank}")
        ranks[PyBytes_FromStringAndSize(<const char*>data + at + 1, end - at - 1)] = rank
        rank += 1
        at = end
    return ranks


@cython.final  # final classes: methods are called directly, and can be inlined
cdef class TokenCounter:
    """Exact token counts of a tiktoken encoding whose pre-tokenizer is compiled here
    (cl100k_base's pattern or o200k_base's): ``count(s) == len(encode_ordinary(s))``.

    tiktoken cuts text into pre-tokens with a regex, then runs BPE on each pre-token
    alone, so a count is the sum of the pre-tokens' counts.  The pre-tokenizer is
    compiled here, and each distinct pre-token is encoded once and its count cached:
    by tiktoken's BPE, run here over the encoding's ranks when the counter has them
    (``bpe``: no call into Python), else by tiktoken.
    """
    cdef const unsigned char* classes
    cdef bint o200k                # the pattern is o200k_base's, else cl100k_base's
    cdef bytes _classes_ref
    cdef object _encode
    # The cache: an open-addressing hash table keyed by a pre-token's code points,
    # stored in ``keys``; hits cost no Python object.  Cleared when full.
    cdef uint64_t* slot_hash       # 0: empty
    cdef uint32_t* slot_key        # offset of the key in ``keys``
    cdef uint32_t* slot_len        # key length in code points
    cdef uint32_t* slot_count      # the token count
    cdef uint32_t* keys
    cdef Py_ssize_t slots, used, max_used, keys_used, keys_cap
    cdef unsigned char* single     # token count of each code point alone; 0: not yet known
    # The encoding's ranks (token bytes -> id), when given: an open-addressing table
    # whose keys are in ``rank_bytes``; a cache miss is then counted here, by tiktoken's
    # BPE, instead of by a call into tiktoken.
    cdef uint32_t* rank_hash       # 0: empty
    cdef uint32_t* rank_value
    cdef uint32_t* rank_at         # offset of the token's bytes in ``rank_bytes``
    cdef uint32_t* rank_len
    cdef unsigned char* rank_bytes
    cdef Py_ssize_t rank_mask      # slots - 1; -1: no ranks
    cdef uint32_t* pair_rank       # the rank of each two bytes (first << 8 | second)
    #: The unit's name, as results record it.
    cdef readonly str name
    #: No token covers more code points than this (its bytes, at one byte or more each).
    cdef readonly Py_ssize_t max_chars
    #: The pre-tokenizer, named after the encoding whose pattern it translates.
    cdef readonly str pattern
    #: No model's window: a tiktoken encoding is not one model's tokenizer.
    max_size = None

    def __cinit__(self, encode, bytes classes not None, Py_ssize_t max_token_bytes,
                  Py_ssize_t cache_entries=1 << 16, str name="cl100k_base",
                  str pattern="cl100k_base", ranks=None):
        """``encode``: tiktoken's ``encode_ordinary``; ``classes``: the pattern's table
        of classes, one byte per code point (``pretoken_classes.table(pattern)``);
        ``max_token_bytes``: the longest token's length, which bounds how many code
        points one token can cover; ``pattern``: "cl100k_base" or "o200k_base";
        ``ranks``: the encoding's ranks (tiktoken's ``_mergeable_ranks``, token bytes to
        id, or packed as ``unpack_ranks`` takes them), which ``encode`` runs BPE over:
        given, a new pre-token is encoded here.

        Everything is allocated and checked here, in ``__cinit__``, so that no instance
        (not even one made with ``TokenCounter.__new__``) exists half-built."""
        check_counter_arguments(encode, classes, max_token_bytes, cache_entries, pattern, ranks)
        self.rank_mask = -1
        self.pattern = pattern
        self.o200k = pattern == "o200k_base"
        self._classes_ref = classes
        self.classes = classes
        self._encode = encode
        self.name = name
        self.max_chars = max_token_bytes
        self.slots = 1
        while self.slots < 2 * cache_entries:
            self.slots *= 2
        self.max_used = cache_entries
        self.keys_cap = cache_entries * 8
        self.slot_hash = <uint64_t*>calloc(self.slots, sizeof(uint64_t))
        self.slot_key = <uint32_t*>malloc(self.slots * sizeof(uint32_t))
        self.slot_len = <uint32_t*>malloc(self.slots * sizeof(uint32_t))
        self.slot_count = <uint32_t*>malloc(self.slots * sizeof(uint32_t))
        self.keys = <uint32_t*>malloc(self.keys_cap * sizeof(uint32_t))
        self.single = <unsigned char*>calloc(0x110000, 1)
        if not (self.slot_hash and self.slot_key and self.slot_len and self.slot_count
                and self.keys and self.single):
            raise MemoryError()
        if isinstance(ranks, bytes):
            self.load_packed(ranks)
        elif ranks is not None:
            self.load_ranks(ranks)

    cdef int load_ranks(self, dict ranks) except -1:
        """The table of ``ranks`` (a dict that holds every single byte, as
        ``check_counter_arguments`` checked), each entry checked as it goes in."""
        cdef Py_ssize_t total = 0
        for key, value in ranks.items():
            if type(key) is not bytes:
                raise bad_rank(key, value)
            total += len(<bytes>key)
        self.allocate_ranks(len(ranks), total)
        total = 0
        for key, value in ranks.items():
            if type(key) is not bytes or not 0 <= value < NO_RANK:
                raise bad_rank(key, value)
            self.add_rank(<bytes>key, len(<bytes>key), <uint32_t>value, total)
            total += len(<bytes>key)
        return 0

    cdef int load_packed(self, bytes packed) except -1:
        """The table of packed ranks (``unpack_ranks``'s input: the id of a token is
        its place), read in place: no dict of 200,000 tokens is built to be dropped."""
        cdef const unsigned char* data = packed
        cdef Py_ssize_t n = len(packed), at = 0, count = 0, total = 0, byte
        cdef unsigned char single
        while at < n:
            if at + 1 + data[at] > n:
                raise ValueError(f"the packed ranks end inside token {count}")
            total += data[at]
            at += 1 + data[at]
            count += 1
        self.allocate_ranks(count, total)
        at = total = count = 0
        while at < n:
            self.add_rank(data + at + 1, data[at], <uint32_t>count, total)
            total += data[at]
            at += 1 + data[at]
            count += 1
        for byte in range(256):
            single = <unsigned char>byte
            if self.rank(&single, 1) == NO_RANK:
                raise ValueError("ranks must hold every single byte, as a byte-level "
                                 "BPE's do")
        return 0

    cdef int allocate_ranks(self, Py_ssize_t count, Py_ssize_t total) except -1:
        """The empty table for ``count`` tokens of ``total`` bytes in all."""
        cdef Py_ssize_t slots = 1
        if total >= NO_RANK or count >= NO_RANK:
            raise ValueError("ranks hold more than 4 GiB of tokens")
        while slots < 2 * count:
            slots *= 2
        self.rank_hash = <uint32_t*>calloc(slots, sizeof(uint32_t))
        self.rank_value = <uint32_t*>malloc(slots * sizeof(uint32_t))
        self.rank_at = <uint32_t*>malloc(slots * sizeof(uint32_t))
        self.rank_len = <uint32_t*>malloc(slots * sizeof(uint32_t))
        self.rank_bytes = <unsigned char*>malloc(max(total, 1))
        self.pair_rank = <uint32_t*>malloc(65536 * sizeof(uint32_t))
        if not (self.rank_hash and self.rank_value and self.rank_at and self.rank_len
                and self.rank_bytes and self.pair_rank):
            raise MemoryError()
        memset(self.pair_rank, 0xFF, 65536 * sizeof(uint32_t))  # NO_RANK
        self.rank_mask = slots - 1
        return 0

    cdef void add_rank(self, const unsigned char* token, Py_ssize_t n, uint32_t value,
                       Py_ssize_t stored) noexcept:
        """Put the token ``token[:n]`` of id ``value`` in the table, its bytes at
        ``stored`` in ``rank_bytes``."""
        cdef uint32_t h = _bytes_hash(token, n)
        cdef Py_ssize_t at = h & self.rank_mask
        while self.rank_hash[at]:
            at = (at + 1) & self.rank_mask
        self.rank_hash[at] = h
        self.rank_value[at] = value
        self.rank_at[at] = <uint32_t>stored
        self.rank_len[at] = <uint32_t>n
        memcpy(self.rank_bytes + stored, token, n)
        if n == 2:                     # BPE's first look-ups: a table of their own
            self.pair_rank[token[0] << 8 | token[1]] = value

    @property
    def encoding(self):
        """The ``tiktoken.Encoding`` whose ``encode_ordinary`` counts (None when
        ``encode`` is another function)."""
        return getattr(self._encode, "__self__", None)

    def __dealloc__(self):
        free(self.slot_hash)
        free(self.slot_key)
        free(self.slot_len)
        free(self.slot_count)
        free(self.keys)
        free(self.single)
        free(self.rank_hash)
        free(self.rank_value)
        free(self.rank_at)
        free(self.rank_len)
        free(self.rank_bytes)
        free(self.pair_rank)

    cdef inline uint32_t rank(self, const unsigned char* piece, Py_ssize_t n) noexcept nogil:
        """The id of the token whose bytes are ``piece[:n]``, or NO_RANK."""
        cdef uint32_t h = _bytes_hash(piece, n)
        cdef Py_ssize_t at = h & self.rank_mask
        while self.rank_hash[at]:
            if self.rank_hash[at] == h and self.rank_len[at] == n and \
                    memcmp(self.rank_bytes + self.rank_at[at], piece, n) == 0:
                return self.rank_value[at]
            at = (at + 1) & self.rank_mask
        return NO_RANK

    cdef Py_ssize_t bpe(self, str text, Py_ssize_t start, Py_ssize_t end,
                        uint32_t* out) noexcept:
        """The tokens of the pre-token ``text[start:end]`` by tiktoken's BPE over the
        ranks (``tiktoken/src/lib.rs``, ``byte_pair_encode``): their number, their ids
        in ``out`` (at most BPE_MAX_BYTES of them; NULL: the number only); or -1 where
        this does not encode it (no ranks, a surrogate, too long), and tiktoken must."""
        cdef unsigned char piece[BPE_MAX_BYTES]
        cdef uint32_t part[BPE_MAX_BYTES + 1]  # where each part starts, then the end
        cdef uint32_t pair[BPE_MAX_BYTES + 1]  # rank of each part joined with the next
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t n = 0, k, m, best
        cdef unsigned int c
        cdef uint32_t lowest, r
        if self.rank_mask < 0 or end <= start:
            return -1
        for k in range(start, end):            # UTF-8, as tiktoken encodes the text
            c = PyUnicode_READ(kind, data, k)
            if c < 0x80:
                if n + 1 > BPE_MAX_BYTES:
                    return -1
                piece[n] = c
                n += 1
            elif c < 0x800:
                if n + 2 > BPE_MAX_BYTES:
                    return -1
                piece[n] = 0xC0 | (c >> 6)
                piece[n + 1] = 0x80 | (c & 0x3F)
                n += 2
            elif c < 0x10000:
                if n + 3 > BPE_MAX_BYTES or 0xD800 <= c < 0xE000:
                    return -1                  # tiktoken replaces a lone surrogate
                piece[n] = 0xE0 | (c >> 12)
                piece[n + 1] = 0x80 | ((c >> 6) & 0x3F)
                piece[n + 2] = 0x80 | (c & 0x3F)
                n += 3
            else:
                if n + 4 > BPE_MAX_BYTES:
                    return -1
                piece[n] = 0xF0 | (c >> 18)
                piece[n + 1] = 0x80 | ((c >> 12) & 0x3F)
                piece[n + 2] = 0x80 | ((c >> 6) & 0x3F)
                piece[n + 3] = 0x80 | (c & 0x3F)
                n += 4
        r = self.rank(piece, n)
        if r != NO_RANK:                       # most pre-tokens are one token
            if out != NULL:
                out[0] = r
            return 1
        # tiktoken's merge: the parts start as single bytes; the pair of lowest rank
        # (the leftmost of equals) is joined, until no pair is a token.
        for k in range(n - 1):
            part[k] = <uint32_t>k
            pair[k] = self.pair_rank[piece[k] << 8 | piece[k + 1]]
        part[n - 1] = <uint32_t>(n - 1)
        pair[n - 1] = NO_RANK
        part[n] = <uint32_t>n
        m = n + 1                              # parts, and the end
        while True:
            lowest = NO_RANK
            best = -1
            for k in range(m - 1):
                if pair[k] < lowest:
                    lowest = pair[k]
                    best = k
            if best < 0:
                break
            # Part ``best`` takes in the next; the ranks of it and the part before it
            # with their new neighbours (before the removal, best + 3 is the new best + 2).
            if best > 0:
                pair[best - 1] = self.rank(piece + part[best - 1],
                                           part[best + 2] - part[best - 1]) \
                    if best + 2 < m else NO_RANK
            pair[best] = self.rank(piece + part[best], part[best + 3] - part[best]) \
                if best + 3 < m else NO_RANK
            memmove(part + best + 1, part + best + 2, (m - best - 2) * sizeof(uint32_t))
            memmove(pair + best + 1, pair + best + 2, (m - best - 2) * sizeof(uint32_t))
            m -= 1
        if out != NULL:
            for k in range(m - 1):
                r = self.rank(piece + part[k], part[k + 1] - part[k])
                if r == NO_RANK:               # ranks that are no BPE's: tiktoken decides
                    return -1
                out[k] = r
        return m - 1

    cdef inline Py_ssize_t pretoken_end(self, int kind, void* data, Py_ssize_t i,
                                        Py_ssize_t n) noexcept nogil:
        """End of the pre-token that starts at ``i`` when the text ends at ``n``."""
        if self.o200k:
            return self.o200k_end(kind, data, i, n)
        return self.cl100k_end(kind, data, i, n)

    cdef Py_ssize_t cl100k_end(self, int kind, void* data, Py_ssize_t i,
                               Py_ssize_t n) noexcept nogil:
        """``pretoken_end`` by cl100k_base's pattern, hand translated, alternatives in order:
        '(?i:[sdmt]|ll|ve|re) | [^\\r\\n\\p{L}\\p{N}]?+\\p{L}++ | \\p{N}{1,3}+ |
         ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+ | \\s++$ | \\s*[\\r\\n] | \\s+(?!\\S) | \\s
        """
        cdef const unsigned char* cls = self.classes
        cdef unsigned int c = PyUnicode_READ(kind, data, i)
        cdef unsigned char cc = cls[c]
        cdef Py_ssize_t j, k
        if c == 39:                        # '(?i:[sdmt]|ll|ve|re); ſ folds to s
            j = _contraction_end(kind, data, i, n)
            if j > i:
                return j
        if cc & LETTER:                    # \p{L}++
            j = i + 1
            while j < n and cls[PyUnicode_READ(kind, data, j)] & LETTER:
                j += 1
            return j
        if not (cc & NUMBER) and not _is_crlf(c) and i + 1 < n \
                and cls[PyUnicode_READ(kind, data, i + 1)] & LETTER:
            j = i + 2                      # [^\r\n\p{L}\p{N}]?+\p{L}++
            while j < n and cls[PyUnicode_READ(kind, data, j)] & LETTER:
                j += 1
            return j
        if cc & NUMBER:                    # \p{N}{1,3}+
            j = i + 1
            while j < n and j < i + 3 and cls[PyUnicode_READ(kind, data, j)] & NUMBER:
                j += 1
            return j
        j = i                              # ' '?[^\s\p{L}\p{N}]++[\r\n]*+
        if c == 32 and i + 1 < n and not cls[PyUnicode_READ(kind, data, i + 1)]:
            j = i + 1
        if not cls[PyUnicode_READ(kind, data, j)]:
            k = j + 1
            while k < n and not cls[PyUnicode_READ(kind, data, k)]:
                k += 1
            while k < n and _is_crlf(PyUnicode_READ(kind, data, k)):
                k += 1
            return k
        # Only white space is left.
        j = i + 1
        while j < n and cls[PyUnicode_READ(kind, data, j)] & SPACE:
            j += 1
        if j == n:                         # \s++$
            return n
        k = j - 1                          # \s*[\r\n]: up to the run's last CR or LF
        while k >= i:
            if _is_crlf(PyUnicode_READ(kind, data, k)):
                return k + 1
            k -= 1
        if j - 1 > i:                      # \s+(?!\S)
            return j - 1
        return i + 1                       # \s

    cdef Py_ssize_t o200k_end(self, int kind, void* data, Py_ssize_t i,
                              Py_ssize_t n) noexcept nogil:
        """``pretoken_end`` by o200k_base's pattern, hand translated; its regex
        backtracks (nothing in it is possessive). With U = [\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}],
        W = [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}], C = (?i:'s|'t|'re|'ve|'m|'ll|'d), in order:
        [^\\r\\n\\p{L}\\p{N}]?U*W+C? | [^\\r\\n\\p{L}\\p{N}]?U+W*C? | \\p{N}{1,3} |
         ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]* | \\s*[\\r\\n]+ | \\s+(?!\\S) | \\s+
        """
        cdef const unsigned char* cls = self.classes
        cdef unsigned int c = PyUnicode_READ(kind, data, i)
        cdef unsigned char cc = cls[c]
        cdef bint prefix = not (cc & (CAT_LETTER | CAT_NUMBER)) and not _is_crlf(c)
        cdef Py_ssize_t j = -1, k
        # The two letter alternatives, each with its optional prefix taken first, then
        # without it: a mark is both a prefix and in U and W, so both ways can match.
        if prefix:
            j = self.o200k_lower_end(kind, data, i + 1, n)
        if j < 0:
            j = self.o200k_lower_end(kind, data, i, n)
        if j < 0 and prefix:
            j = self.o200k_upper_end(kind, data, i + 1, n)
        if j < 0:
            j = self.o200k_upper_end(kind, data, i, n)
        if j >= 0:
            return _contraction_end(kind, data, j, n)
        if cc & CAT_NUMBER:                # \p{N}{1,3}
            j = i + 1
            while j < n and j < i + 3 and cls[PyUnicode_READ(kind, data, j)] & CAT_NUMBER:
                j += 1
            return j
        j = i + 1 if c == 32 and i + 1 < n else i     # ' '?[^\s\p{L}\p{N}]+[\r\n/]*
        if not cls[PyUnicode_READ(kind, data, j)] & (CAT_SPACE | CAT_LETTER | CAT_NUMBER):
            k = j + 1
            while k < n and not cls[PyUnicode_READ(kind, data, k)] & (
                    CAT_SPACE | CAT_LETTER | CAT_NUMBER):
                k += 1
            while k < n:
                c = PyUnicode_READ(kind, data, k)
                if not (_is_crlf(c) or c == 47):
                    break
                k += 1
            return k
        # Only white space is left: its run is [i, j).
        j = i + 1
        while j < n and cls[PyUnicode_READ(kind, data, j)] & CAT_SPACE:
            j += 1
        k = j - 1                          # \s*[\r\n]+: up to the run's last CR or LF
        while k >= i:
            if _is_crlf(PyUnicode_READ(kind, data, k)):
                return k + 1
            k -= 1
        if j == n or j == i + 1:           # \s+(?!\S) at the end; \s+ before \S
            return j
        return j - 1                       # \s+(?!\S)

    cdef inline Py_ssize_t o200k_lower_end(self, int kind, void* data, Py_ssize_t s,
                                           Py_ssize_t n) noexcept nogil:
        """End of U*W+ at ``s``, as the regex backtracks it, or -1."""
        cdef const unsigned char* cls = self.classes
        cdef Py_ssize_t u = s, p
        while u < n and cls[PyUnicode_READ(kind, data, u)] & CAT_UPPER:
            u += 1
        if u < n and cls[PyUnicode_READ(kind, data, u)] & CAT_LOWER:
            u += 1
            while u < n and cls[PyUnicode_READ(kind, data, u)] & CAT_LOWER:
                u += 1
            return u
        # U* gives code points back until W+ can take one: the run's last W, alone.
        p = u - 1
        while p >= s and not cls[PyUnicode_READ(kind, data, p)] & CAT_LOWER:
            p -= 1
        return p + 1 if p >= s else -1

    cdef inline Py_ssize_t o200k_upper_end(self, int kind, void* data, Py_ssize_t s,
                                           Py_ssize_t n) noexcept nogil:
        """End of U+W* at ``s``, or -1."""
        cdef const unsigned char* cls = self.classes
        cdef Py_ssize_t u = s
        while u < n and cls[PyUnicode_READ(kind, data, u)] & CAT_UPPER:
            u += 1
        if u == s:
            return -1
        while u < n and cls[PyUnicode_READ(kind, data, u)] & CAT_LOWER:
            u += 1
        return u

    cdef Py_ssize_t pretoken_count(self, str text, Py_ssize_t start, Py_ssize_t end) except -1:
        """Token count of the pre-token ``text[start:end]``, cached."""
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t length = end - start, k, at
        cdef uint64_t h = 14695981039346656037ULL       # FNV-1a over the code points
        cdef uint32_t* key
        for k in range(start, end):
            h = (h ^ PyUnicode_READ(kind, data, k)) * 1099511628211ULL
        h |= 1                                          # 0 marks an empty slot
        at = <Py_ssize_t>(h & <uint64_t>(self.slots - 1))
        while self.slot_hash[at]:
            if self.slot_hash[at] == h and self.slot_len[at] == length:
                key = self.keys + self.slot_key[at]
                k = 0
                while k < length and key[k] == PyUnicode_READ(kind, data, start + k):
                    k += 1
                if k == length:
                    return self.slot_count[at]
            at = (at + 1) & (self.slots - 1)
        count = self.bpe(text, start, end, NULL)
        if count < 0:
            count = len(self._encode(PyUnicode_Substring(text, start, end)))
        if count < 1 or count > 0xFFFFFFFF:
            raise ValueError(f"encode returned {count} tokens for a non-empty pre-token")
        if length > 64:                   # long pre-tokens are rare: not worth the room
            return count
        if self.used == self.max_used or self.keys_used + length > self.keys_cap:
            memset(self.slot_hash, 0, self.slots * sizeof(uint64_t))
            self.used = self.keys_used = 0  # bounded memory on text that never repeats
            return count
        self.slot_hash[at] = h
        self.slot_key[at] = <uint32_t>self.keys_used
        self.slot_len[at] = <uint32_t>length
        self.slot_count[at] = <uint32_t>count
        for k in range(length):
            self.keys[self.keys_used + k] = PyUnicode_READ(kind, data, start + k)
        self.keys_used += length
        self.used += 1
        return count

    cdef Py_ssize_t code_point_count(self, str text, Py_ssize_t at) except -1:
        """Token count of the single code point ``text[at]``, from a table (it is 1 to 4)."""
        cdef unsigned int cp = PyUnicode_READ(PyUnicode_KIND(text), PyUnicode_DATA(text), at)
        cdef Py_ssize_t count
        if not self.single[cp]:
            count = self.pretoken_count(text, at, at + 1)
            if count > 255:                # not a tiktoken count: do not truncate it into the table
                return count
            self.single[cp] = <unsigned char>count
        return self.single[cp]

    cpdef Py_ssize_t count(self, str text) except -1:
        """The number of tokens in ``text``."""
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t n = len(text), i = 0, j, total = 0
        while i < n:
            j = self.pretoken_end(kind, data, i, n)
            total += self.pretoken_count(text, i, j)
            i = j
        return total

    def settled(self, str text):
        """(end, n): the pre-tokens of ``text`` followed by two more, which stay
        pre-tokens of any text that begins with ``text``, end at ``end`` and hold
        ``n`` tokens (the ``LengthUnit`` protocol)."""
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t n = len(text), i = 0, j, total = 0, pending = 0, p0 = 0, p1 = 0
        # Pending pre-tokens are contiguous: the older is [p0, p1), the newer [p1, i).
        while i < n:
            j = self.pretoken_end(kind, data, i, n)
            if pending == 2:
                total += self.pretoken_count(text, p0, p1)
                p0 = p1
            else:
                pending += 1
            p1 = i
            i = j
        return p0, total

    def pretokens(self, str text):
        """The pre-tokens of ``text``, as tiktoken's regex cuts them (for tests)."""
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t n = len(text), i = 0, j
        out = []
        while i < n:
            j = self.pretoken_end(kind, data, i, n)
            out.append(text[i:j])
            i = j
        return out

    def tokens(self, str text):
        """``encode_ordinary(text)``: each pre-token's tokens as ``count`` finds them,
        by the BPE here where it encodes them, else by ``encode`` (for tests)."""
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t n = len(text), i = 0, j, k, count
        cdef uint32_t ids[BPE_MAX_BYTES]
        out = []
        while i < n:
            j = self.pretoken_end(kind, data, i, n)
            count = self.bpe(text, i, j, ids)
            if count < 0:
                out.extend(self._encode(text[i:j]))
            for k in range(count):
                out.append(ids[k])
            i = j
        return out


@cython.final
cdef class _Level:
    """One separator's pass over its scope: cutting pieces, merging, delegating."""
    cdef RecursiveSplitter sp
    cdef _Level child             # the next separator's level; None for the last
    cdef int how                  # BY_CODE_POINT, BY_LITERAL or BY_PATTERN
    cdef uint32_t* sep            # the literal's code points
    cdef Py_ssize_t sep_len
    cdef object pattern           # the compiled regular expression (BY_PATTERN)
    cdef str join                 # put between merged pieces when the separator is dropped
    cdef Py_ssize_t join_length   # its length in the unit (0 unless the separator is dropped)
    cdef bint delegating          # the piece in hand is being fed to the child
    cdef bint decided             # the separator has occurred in this scope
    cdef Py_ssize_t piece_start   # document offset of the piece in hand
    cdef Py_ssize_t scan_pos      # where the next search for the separator starts
    cdef Py_ssize_t piece_len     # exact length of the last piece judged short
    # Units other than code points: the piece in hand's settled prefix ends at
    # counted_pos and has length counted; unsettled is the rest's length when the unit
    # last settled it (the compiled TokenCounter settles pre-tokens itself).
    cdef Py_ssize_t counted_pos, counted, unsettled
    # The merger (LangChain's _merge_splits): pieces of the chunk in progress, and
    # their total length with the joins between them.
    cdef Spans run
    cdef Py_ssize_t total

    def __cinit__(self, RecursiveSplitter sp, separator, _Level child, str join):
        """``separator``: a literal ``str`` or a compiled ``re.Pattern`` without
        capturing groups; ``join``: what merged pieces are joined with when the
        separator is dropped (None: the separator's own text, a pattern's source, as
        LangChain joins them)."""
        self.sp = sp
        self.child = child
        if isinstance(separator, str):
            source = literal = separator
        else:                              # a pattern (checked by checked_arguments)
            source = separator.pattern
            literal = literal_text(separator) if source else ""
        if literal is None:
            self.how = BY_PATTERN
            self.pattern = separator
        elif literal:
            self.how = BY_LITERAL
            self.sep_len = len(literal)
            self.sep = <uint32_t*>malloc(self.sep_len * sizeof(uint32_t))
            if self.sep == NULL:
                raise MemoryError()
            for k in range(self.sep_len):
                self.sep[k] = ord(literal[k])
        else:
            self.how = BY_CODE_POINT
        if sp.keep == KEEP_NONE:
            self.join = source if join is None else join
            self.join_length = sp.length_of(self.join)
        else:
            self.join = ""

    def __dealloc__(self):
        free(self.sep)
        spans_free(&self.run)

    cdef void reset(self, Py_ssize_t start) noexcept:
        self.delegating = False
        self.decided = False
        self.piece_start = self.scan_pos = self.counted_pos = start
        self.counted = self.unsettled = 0
        self.run.head = self.run.count = self.total = 0

    cdef Py_ssize_t needed_from(self) noexcept:
        """The lowest document offset this level and its descendants still read."""
        cdef Py_ssize_t need = self.scan_pos if self.delegating else self.piece_start
        if self.run.count:
            need = min(need, self.run.start[self.run.head])
        if self.delegating:
            need = min(need, self.child.needed_from())
        return need

    cdef int advance(self, Py_ssize_t limit, bint final) except -1:
        """Take the scope's text up to document offset ``limit``; ``final``: it ends there."""
        cdef RecursiveSplitter sp = self.sp
        cdef Py_ssize_t pos
        if self.how == BY_CODE_POINT:
            return self.advance_code_points(limit, final)
        if self.how == BY_PATTERN:
            if final:
                self.split_by_pattern(limit)
            return 0
        cdef int kind = PyUnicode_KIND(sp.buf)
        cdef void* data = PyUnicode_DATA(sp.buf)
        assert sp.base <= self.scan_pos and limit <= sp.base + len(sp.buf), \
            "a level reads within the buffer"
        while True:
            pos = find(kind, data, self.scan_pos - sp.base, limit - sp.base,
                        self.sep, self.sep_len)
            if pos < 0:
                break
            self.cut(pos + sp.base, pos + sp.base + self.sep_len)
        if final:
            self.end_scope(limit)
        else:
            # A separator may straddle this block and the next: search its start again.
            self.scan_pos = max(self.scan_pos, limit - self.sep_len + 1)
            # The piece in hand ends where its separator starts (so not before
            # scan_pos), or, with the separator kept at its end, after ``limit``.
            self.grow_piece(limit if sp.keep == KEEP_END else self.scan_pos)
        return 0

    cdef int split_by_pattern(self, Py_ssize_t limit) except -1:
        """A regular expression runs on its whole scope, ending at ``limit``, as
        LangChain runs it: on that text alone, so that ``^``, ``$``, ``\\b`` and
        lookarounds see what they see in LangChain."""
        cdef RecursiveSplitter sp = self.sp
        cdef Py_ssize_t start = self.piece_start
        scope = PyUnicode_Substring(sp.buf, start - sp.base, limit - sp.base)
        for match in self.pattern.finditer(scope):
            at, after = match.span()
            self.cut(start + at, start + after)
        self.end_scope(limit)
        return 0

    cdef int cut(self, Py_ssize_t at, Py_ssize_t after) except -1:
        """The separator occurs at [at, after): the piece in hand ends, the next begins."""
        cdef int keep = self.sp.keep
        self.decided = True
        self.end_piece(after if keep == KEEP_END else at)
        self.piece_start = at if keep == KEEP_START else after
        self.scan_pos = after
        self.counted_pos = self.piece_start
        self.counted = self.unsettled = 0
        return 0

    cdef int end_piece(self, Py_ssize_t end) except -1:
        """The piece in hand ends at ``end``; an empty one is dropped, as in LangChain."""
        if self.delegating:
            self.child.advance(end, True)
            self.delegating = False
        elif end > self.piece_start:
            self.take_piece(end)
        return 0

    cdef int take_piece(self, Py_ssize_t end) except -1:
        """A whole piece, ``piece_start`` to ``end``: merge it if short (or if long
        pieces are merged too), else split it with the next separators."""
        cdef RecursiveSplitter sp = self.sp
        if self.is_long(end, True) and not sp.merge_long:
            self.flush()
            if self.child is None:
                sp.emit(self.piece_start, end, False)  # LangChain appends it as it is
            else:
                self.delegate(end, True)
        else:
            self.merge(self.piece_start, end, self.piece_len)
        return 0

    cdef int grow_piece(self, Py_ssize_t known_end) except -1:
        """The piece in hand reaches at least ``known_end``: delegate it once it must
        be long."""
        if self.delegating:
            self.child.advance(known_end, False)
        elif self.child is not None and known_end > self.piece_start \
                and self.is_long(known_end, False):
            self.flush()
            self.delegating = True
            self.delegate(known_end, False)
        return 0

    cdef int end_scope(self, Py_ssize_t limit) except -1:
        """The scope ends at ``limit``: the last piece has no separator after it."""
        if self.delegating:
            self.child.advance(limit, True)
            self.delegating = False
        elif limit > self.piece_start:
            if not self.decided and self.child is not None:
                # The separator never occurred: LangChain skips it.
                self.flush()
                self.delegate(limit, True)
            else:
                self.take_piece(limit)
        self.flush()
        self.piece_start = self.scan_pos = self.counted_pos = limit
        return 0

    cdef int delegate(self, Py_ssize_t end, bint final) except -1:
        """Start the child level on the piece in hand and give it the text up to ``end``."""
        self.child.reset(self.piece_start)
        self.child.advance(end, final)
        return 0

    cdef bint is_long(self, Py_ssize_t end, bint complete) except -1:
        """Whether the piece in hand, ``piece_start`` to ``end``, is (or, if not
        ``complete``, will surely be) at least the chunk size; if a complete piece is
        short, or long pieces are merged, its exact length is left in ``piece_len``."""
        cdef RecursiveSplitter sp = self.sp
        if sp.chars:
            self.piece_len = end - self.piece_start
            return self.piece_len >= sp.chunk_size
        if sp.tokens is not None:
            return self.is_long_in_tokens(end, complete)
        if complete:                       # the settled count plus the rest's
            self.piece_len = self.counted
            if end > self.counted_pos:
                self.piece_len += sp.count(PyUnicode_Substring(
                    sp.buf, self.counted_pos - sp.base, end - sp.base))
            return self.piece_len >= sp.chunk_size
        if end - self.counted_pos >= 2 * self.unsettled:
            # Settle again only once the rest has doubled since: linear in all.
            self.settle(end)
        if sp.max_chars == 0:              # no bound on the rest
            return self.counted >= sp.chunk_size
        return self.counted + (end - self.counted_pos) // sp.max_chars >= sp.chunk_size

    cdef int settle(self, Py_ssize_t end) except -1:
        """Ask the unit how much of the piece's unsettled rest, up to ``end``, is settled."""
        cdef RecursiveSplitter sp = self.sp
        rest = PyUnicode_Substring(sp.buf, self.counted_pos - sp.base, end - sp.base)
        settled_end, count = sp.unit.settled(rest)
        if not (0 <= settled_end <= len(rest) and count >= 0):
            raise ValueError(f"the length unit {sp.unit.name} settled {(settled_end, count)} "
                             f"of a text of {len(rest)} code points")
        self.counted_pos += <Py_ssize_t>settled_end
        self.counted += <Py_ssize_t>count
        self.unsettled = end - self.counted_pos
        return 0

    cdef bint is_long_in_tokens(self, Py_ssize_t end, bint complete) except -1:
        """``is_long`` with the compiled token counter: its pre-tokenizer runs
        here on the buffer, and only up to the chunk size."""
        cdef RecursiveSplitter sp = self.sp
        cdef TokenCounter counter = sp.tokens
        cdef int kind
        cdef void* data
        cdef Py_ssize_t i, j, n, p0, p1, tail, pending, stop
        stop = PY_SSIZE_T_MAX if sp.merge_long else sp.chunk_size
        kind = PyUnicode_KIND(sp.buf)
        data = PyUnicode_DATA(sp.buf)
        i = self.counted_pos - sp.base
        n = end - sp.base
        if complete:
            while i < n and self.counted < stop:
                j = counter.pretoken_end(kind, data, i, n)
                self.counted += counter.pretoken_count(sp.buf, i, j)
                i = j
            self.counted_pos = i + sp.base
            self.piece_len = self.counted
            return self.counted >= sp.chunk_size
        # Incomplete: text still to come can re-merge the last pre-tokens, so count
        # only those followed by two more (the counter's ``settled``).
        # Pending pre-tokens are contiguous: the older is [p0, p1), the newer [p1, i).
        pending = 0
        p0 = p1 = i
        while i < n and self.counted < sp.chunk_size:
            j = counter.pretoken_end(kind, data, i, n)
            if pending == 2:
                self.counted += counter.pretoken_count(sp.buf, p0, p1)
                self.counted_pos = p1 + sp.base
                p0 = p1
            else:
                pending += 1
            p1 = i
            i = j
        # The uncounted tail needs at least one token per max_chars code points.
        tail = n - (self.counted_pos - sp.base)
        return self.counted + tail // counter.max_chars >= sp.chunk_size

    cdef int advance_code_points(self, Py_ssize_t limit, bint final) except -1:
        """The "" separator: every code point is a piece."""
        cdef RecursiveSplitter sp = self.sp
        cdef TokenCounter counter = sp.tokens
        cdef Py_ssize_t pos, length = 1
        for pos in range(self.piece_start, limit):
            if counter is not None:
                length = counter.code_point_count(sp.buf, pos - sp.base)
            elif not sp.chars:
                length = sp.count(PyUnicode_Substring(sp.buf, pos - sp.base, pos - sp.base + 1))
            if length < sp.chunk_size or sp.merge_long:
                self.merge(pos, pos + 1, length)
            else:
                # LangChain appends such a split as it is, unstripped.
                self.flush()
                sp.emit(pos, pos + 1, False)
        self.piece_start = limit
        if final:
            self.flush()
        return 0

    cdef int merge(self, Py_ssize_t start, Py_ssize_t end, Py_ssize_t length) except -1:
        """Add a piece, emitting a chunk when it does not fit (``_merge_splits``; the
        join between pieces counts when the separator is dropped)."""
        cdef RecursiveSplitter sp = self.sp
        cdef Py_ssize_t join = self.join_length   # 0 unless the separator is dropped
        # With the join counted for a piece that follows another: the room it takes.
        cdef Py_ssize_t needed = length + join
        if self.run.count and self.total + needed > sp.chunk_size:
            self.emit_run()
            # Keep the tail that fits in the overlap and leaves room for this piece; as
            # in LangChain, pieces that count zero (white space in a word count) stay.
            while self.run.count and (self.total > sp.chunk_overlap or
                                      (self.total + needed > sp.chunk_size and self.total > 0)):
                self.total -= self.run.length[self.run.head]
                spans_drop(&self.run, 1)
                if self.run.count:
                    self.total -= join
                assert self.total >= 0, "the merger's total counts what it holds"
        self.total += needed if self.run.count else length
        spans_push(&self.run, start, end, length)
        return 0

    cdef int emit_run(self) except -1:
        """Emit the chunk in progress: the merger's pieces, joined and stripped."""
        cdef Py_ssize_t first = self.run.head, last = self.run.head + self.run.count - 1
        if self.sp.keep != KEEP_NONE or self.run_is_contiguous():
            return self.sp.emit(self.run.start[first], self.run.end[last], self.sp.strip_chunks)
        spans = [(self.run.start[k], self.run.end[k]) for k in range(first, last + 1)]
        return self.sp.emit_joined(spans, self.join)

    cdef bint run_is_contiguous(self) except -1:
        """Whether the document has exactly ``join`` between the merger's pieces, so
        that joining them gives a piece of the document (not so where a dropped
        separator repeats, or a pattern matched other text than its source)."""
        cdef RecursiveSplitter sp = self.sp
        cdef int kind = PyUnicode_KIND(sp.buf), join_kind = PyUnicode_KIND(self.join)
        cdef void* data = PyUnicode_DATA(sp.buf)
        cdef void* join_data = PyUnicode_DATA(self.join)
        cdef Py_ssize_t k, j, gap, n = len(self.join)
        for k in range(self.run.head, self.run.head + self.run.count - 1):
            gap = self.run.end[k] - sp.base
            if self.run.start[k + 1] - self.run.end[k] != n:
                return False
            for j in range(n):
                if PyUnicode_READ(kind, data, gap + j) != PyUnicode_READ(join_kind, join_data, j):
                    return False
        return True

    cdef int flush(self) except -1:
        """End the merger's run: emit the chunk in progress."""
        if self.run.count:
            self.emit_run()
        self.run.head = self.run.count = self.total = 0
        return 0


@cython.final
cdef class RecursiveSplitter(TextStream):
    """Incremental recursive splitter, chunk for chunk identical to LangChain's
    ``RecursiveCharacterTextSplitter`` (or, with ``merge_long``, its
    ``CharacterTextSplitter``) with the same settings.

    Feed one document in pieces of any size; ``feed`` returns the chunks that are
    final, ``finish`` the rest, after which the splitter is ready for a new document.
    The result does not depend on how the document was cut into pieces.
    """
    cdef readonly Py_ssize_t chunk_size, chunk_overlap
    #: The length unit (``chunkd.units.LengthUnit``).
    cdef readonly object unit
    cdef bint chars                # the unit is code points: counted here, never called
    cdef TokenCounter tokens       # the unit, when it is the compiled token counter
    cdef Py_ssize_t max_chars      # the unit's max_chars; 0 when it has none
    #: Whether chunks carry their length in the unit (else -1: the drop-in calls a
    #: length function only where LangChain calls it, never on a whole chunk).
    cdef readonly bint measure_chunks
    cdef readonly bint merge_long
    cdef int keep                  # KEEP_NONE, KEEP_START or KEEP_END
    cdef bint strip_chunks         # strip merged chunks (strip_whitespace)
    cdef _Level top
    #: None, or a list to which each chunk joined with a dropped separator (not a
    #: slice of the document) adds ``(index, splitting.Joined)``, where its code points
    #: come from (parent/child chunking maps its children's offsets through it).
    cdef public list joined

    def __cinit__(self, Py_ssize_t chunk_size, Py_ssize_t chunk_overlap, *,
                  separators=SEPARATORS, keep_separator="end", bint strip_whitespace=True,
                  bint merge_long=False, str join=None, unit=None, bint measure_chunks=True):
        """``chunk_size`` and ``chunk_overlap`` are in ``unit`` (a
        ``chunkd.units.LengthUnit``; by default code points). Any unit is exact; the
        compiled token counter (cl100k_base, o200k_base) is also run here directly.

        ``separators``: coarsest first, each a literal ``str`` or a compiled
        ``re.Pattern`` (any separators after "" are never used, as in LangChain).
        ``keep_separator``: "end" keeps a separator at the end of the piece before it,
        True or "start" at the start of the piece after it, False drops it (merged
        pieces are then joined with the separator's text, or with ``join``).
        ``strip_whitespace``: strip merged chunks. ``merge_long``: pieces of any length
        are merged, none split further (LangChain's CharacterTextSplitter; give one
        separator).

        Built whole here, so that no instance can exist half-initialised
        (``RecursiveSplitter.__new__`` runs this too)."""
        keep, used = checked_arguments(chunk_size, chunk_overlap, separators, keep_separator,
                                       merge_long)
        self.keep = KEEP_START if keep == "start" else KEEP_END if keep == "end" else KEEP_NONE
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.unit = CHARS if unit is None else checked_unit(unit)
        self.chars = type(self.unit) is Chars
        self.tokens = self.unit if type(self.unit) is TokenCounter else None
        self.max_chars = self.unit.max_chars or 0
        self.measure_chunks = measure_chunks
        self.strip_chunks = strip_whitespace
        self.merge_long = merge_long
        cdef _Level level = None
        for separator in reversed(used):
            level = _Level(self, separator, level, join)
        self.top = level
        self.start_document()

    cdef void start_document(self) noexcept:
        TextStream.start_document(self)
        self.top.reset(0)

    cdef Py_ssize_t needed_from(self) except -1:
        return self.top.needed_from()

    cdef int advance(self, bint final) except -1:
        return self.top.advance(self.base + len(self.buf), final)

    def resize(self, Py_ssize_t chunk_size, Py_ssize_t chunk_overlap):
        """Split the next document at another size and overlap, in the same unit
        (the markdown strategy's sections, each at the size its heading path leaves).
        Only between documents: nothing of one may have been fed."""
        if self.base + len(self.buf) + self.pending_len:
            raise ValueError("resize a splitter between documents only")
        checked_arguments(chunk_size, chunk_overlap, ("",), "end", False)
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap

    cdef Py_ssize_t length_of(self, str text) except -1:
        """The length of ``text`` in the unit."""
        if self.chars:
            return len(text)
        if self.tokens is not None:
            return self.tokens.count(text)
        return self.count(text)

    cdef Py_ssize_t count(self, str text) except -1:
        """The unit's own count of ``text``, checked: a whole number, at least 0."""
        length = self.unit.count(text)
        if type(length) is not int or length < 0:
            raise CountError(f"the length unit {self.unit.name} counted {length!r}, "
                            "not a whole number of at least 0")
        return length

    cdef int emit(self, Py_ssize_t start, Py_ssize_t end, bint strip) except -1:
        """Make the chunk document[start:end], stripped of white space if ``strip``."""
        cdef Py_ssize_t lo = start - self.base, hi = end - self.base
        assert 0 <= lo <= hi <= len(self.buf), "a chunk lies within the buffer"
        if strip and not self.strip(&lo, &hi):
            return 0
        chunk_text = PyUnicode_Substring(self.buf, lo, hi)
        length = -1 if not self.measure_chunks else hi - lo if self.chars \
            else self.length_of(chunk_text)
        return self.add_chunk(lo + self.base, hi + self.base, length, chunk_text,
                              NO_OPTIONAL_FIELDS)

    cdef int emit_joined(self, list spans, str join) except -1:
        """Make the chunk of the document pieces ``spans`` joined with ``join`` (a
        dropped separator that the document does not have exactly between them)."""
        made = joined_chunk(self.buf, self.base, spans, join, self.strip_chunks)
        if made is None:
            return 0
        start, end, chunk_text, placed = made
        if self.joined is not None:
            self.joined.append((self.next_index, placed))
        return self.add_chunk(start, end, self.length_of(chunk_text) if self.measure_chunks
                              else -1, chunk_text, NO_OPTIONAL_FIELDS)
