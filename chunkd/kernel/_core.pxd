# The streaming core both compiled modules (_kernel.pyx, _windows.pyx) are built on:
# the text buffer that grows by doubling, the queue of spans, strip-and-emit, the
# building of chunk records and the vectorised searches. Declared here, the class
# implemented in _core.pyx; the small helpers are inline, so hot loops pay no call.

from libc.stdint cimport uint16_t, uint32_t
from libc.stdlib cimport free, realloc
from libc.string cimport memchr, memmove

cdef extern from "Python.h":
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    unsigned int PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil  # a Py_UCS4
    bint Py_UNICODE_ISSPACE(unsigned int ch) nogil
    void PyObject_GC_UnTrack(object op)
    const Py_ssize_t PY_SSIZE_T_MAX

cdef extern from *:
    """
    #include <wchar.h>
    #include <stdint.h>
    /* Four-byte text: the C library's wmemchr where wchar_t is four bytes wide (glibc,
       musl, macOS), a plain loop elsewhere (Windows' wchar_t is two bytes). */
    static const uint32_t* chunkd_find_u32(const uint32_t* s, uint32_t c, size_t n) {
    #if WCHAR_MAX > 0xFFFF && WCHAR_MAX <= 0xFFFFFFFF
        return (const uint32_t*)wmemchr((const wchar_t*)s, (wchar_t)c, n);
    #else
        for (; n; ++s, --n) if (*s == c) return s;
        return NULL;
    #endif
    }
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define CHUNKD_PAIR_SEARCH 1
    /* Where the code points first and second stand side by side in text of kind
       (1, 2 or 4 bytes a unit), starting from at to last (the unit after last is in
       the text), or -1: both compared sixteen bytes a step, so that a separator of two
       or more ("\n\n") is not looked for at each of its first code point (at every
       line's end). */
    static Py_ssize_t chunkd_find_pair(int kind, const void* data, Py_ssize_t at,
                                       Py_ssize_t last, uint32_t first, uint32_t second) {
        if (kind == 1) {
            const unsigned char* text = (const unsigned char*)data;
            const __m128i a = _mm_set1_epi8((char)first), b = _mm_set1_epi8((char)second);
            if (first > 0xFF || second > 0xFF) return -1;
            for (; at + 15 <= last; at += 16) {
                int found = _mm_movemask_epi8(_mm_and_si128(
                    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*)(text + at)), a),
                    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i*)(text + at + 1)), b)));
                if (found) return at + __builtin_ctz(found);
            }
            for (; at <= last; at++) if (text[at] == first && text[at + 1] == second) return at;
        } else if (kind == 2) {
            const uint16_t* text = (const uint16_t*)data;
            const __m128i a = _mm_set1_epi16((short)first), b = _mm_set1_epi16((short)second);
            if (first > 0xFFFF || second > 0xFFFF) return -1;
            for (; at + 7 <= last; at += 8) {
                int found = _mm_movemask_epi8(_mm_and_si128(
                    _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i*)(text + at)), a),
                    _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i*)(text + at + 1)), b)));
                if (found) return at + (__builtin_ctz(found) >> 1);
            }
            for (; at <= last; at++) if (text[at] == first && text[at + 1] == second) return at;
        } else {
            const uint32_t* text = (const uint32_t*)data;
            const __m128i a = _mm_set1_epi32((int)first), b = _mm_set1_epi32((int)second);
            for (; at + 3 <= last; at += 4) {
                int found = _mm_movemask_epi8(_mm_and_si128(
                    _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i*)(text + at)), a),
                    _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i*)(text + at + 1)), b)));
                if (found) return at + (__builtin_ctz(found) >> 2);
            }
            for (; at <= last; at++) if (text[at] == first && text[at + 1] == second) return at;
        }
        return -1;
    }
    #else
    #define CHUNKD_PAIR_SEARCH 0
    static Py_ssize_t chunkd_find_pair(int kind, const void* data, Py_ssize_t at,
                                       Py_ssize_t last, uint32_t first, uint32_t second) {
        return -1;  /* never called: find() takes the first code point's search */
    }
    #endif
    """
    const uint32_t* chunkd_find_u32(const uint32_t* s, uint32_t c, size_t n) nogil
    const bint CHUNKD_PAIR_SEARCH
    Py_ssize_t chunkd_find_pair(int kind, const void* data, Py_ssize_t at, Py_ssize_t last,
                                uint32_t first, uint32_t second) nogil


cdef inline bint is_white(unsigned int c) noexcept nogil:
    """``str.isspace``: Python's own test, skipped for the code points above U+3000,
    none of which is white space (a test checks every code point)."""
    return c <= 0x3000 and Py_UNICODE_ISSPACE(c)


cdef inline Py_ssize_t find_unit(int kind, const void* data, Py_ssize_t i, Py_ssize_t end,
                                 unsigned int unit) noexcept nogil:
    """Index of the first code point ``unit`` in [i, end), or -1, with the C library's
    vectorized search for every string kind."""
    cdef const unsigned char* bytes_ = <const unsigned char*>data
    cdef const unsigned char* hit
    cdef const uint16_t* wide = <const uint16_t*>data
    cdef Py_ssize_t at
    if i >= end:
        return -1
    if kind == 1:
        if unit > 255:
            return -1
        hit = <const unsigned char*>memchr(bytes_ + i, unit, end - i)
        return -1 if hit == NULL else hit - bytes_
    if kind == 4:
        hit = <const unsigned char*>chunkd_find_u32(<const uint32_t*>data + i, unit, end - i)
        return -1 if hit == NULL else (hit - bytes_) // 4
    if unit > 0xFFFF:
        return -1
    # Two-byte text: memchr for the low byte, then check the whole unit (little or big
    # endian alike, since the unit is compared as a whole).
    while i < end:
        hit = <const unsigned char*>memchr(bytes_ + 2 * i, unit & 0xFF, 2 * (end - i))
        if hit == NULL:
            return -1
        at = (hit - bytes_) // 2
        if wide[at] == unit:
            return at
        i = at + 1
    return -1


cdef inline Py_ssize_t find(int kind, void* data, Py_ssize_t start, Py_ssize_t end,
                            const uint32_t* sep, Py_ssize_t sep_len) noexcept nogil:
    """Index of the first occurrence of the separator (``sep_len`` code points) within
    [start, end), or -1.

    Faster than ``str.find`` here: no conversion of the separator to the text's kind
    per call, and the C library's memchr/wmemchr for its first code point, or its
    first two compared at once (``chunkd_find_pair``)."""
    cdef Py_ssize_t i = start, last = end - sep_len, k
    cdef bint pairs = CHUNKD_PAIR_SEARCH and sep_len > 1
    while i <= last:
        if pairs:
            i = chunkd_find_pair(kind, data, i, last, sep[0], sep[1])
        else:
            i = find_unit(kind, data, i, last + 1, sep[0])
        if i < 0 or sep_len == 1:
            return i
        k = 2 if pairs else 1
        while k < sep_len and PyUnicode_READ(kind, data, i + k) == sep[k]:
            k += 1
        if k == sep_len:
            return i
        i += 1
    return -1


cdef inline Py_ssize_t find_newline(int kind, void* data, Py_ssize_t i,
                                    Py_ssize_t end) noexcept nogil:
    """Index of the first \\n in [i, end), or -1."""
    return find_unit(kind, data, i, end, 10)


# --- the queue of spans ----------------------------------------------------------------

cdef struct Spans:
    # Spans of the document (start and end offsets, and a length in the unit) at
    # [head, head + count) of arrays of ``cap`` entries.
    Py_ssize_t* start
    Py_ssize_t* end
    Py_ssize_t* length
    Py_ssize_t head, count, cap


cdef inline void* _grown(void* block, Py_ssize_t count) except NULL:
    """``block`` reallocated to hold ``count`` offsets (Py_ssize_t)."""
    cdef void* grown = realloc(block, count * sizeof(Py_ssize_t))
    if grown == NULL:
        raise MemoryError()
    return grown


cdef inline int spans_push(Spans* spans, Py_ssize_t start, Py_ssize_t end,
                           Py_ssize_t length) except -1:
    """Queue the span [start, end) of ``length``, making room first if needed: the
    queue slides to the front, and doubles once it is half full."""
    cdef Py_ssize_t at, cap
    if spans.head + spans.count == spans.cap:
        if spans.head:
            memmove(spans.start, spans.start + spans.head, spans.count * sizeof(Py_ssize_t))
            memmove(spans.end, spans.end + spans.head, spans.count * sizeof(Py_ssize_t))
            memmove(spans.length, spans.length + spans.head, spans.count * sizeof(Py_ssize_t))
            spans.head = 0
        if spans.count >= spans.cap // 2:
            cap = max(64, 2 * spans.cap)
            spans.start = <Py_ssize_t*>_grown(spans.start, cap)
            spans.end = <Py_ssize_t*>_grown(spans.end, cap)
            spans.length = <Py_ssize_t*>_grown(spans.length, cap)
            spans.cap = cap
    at = spans.head + spans.count
    assert 0 <= at < spans.cap, "the queue has room"
    spans.start[at] = start
    spans.end[at] = end
    spans.length[at] = length
    spans.count += 1
    return 0


cdef inline int spans_drop(Spans* spans, Py_ssize_t n) except -1:
    """Take the first ``n`` spans off the queue."""
    assert 0 <= n <= spans.count, "only queued spans leave"
    spans.head += n
    spans.count -= n
    return 0


cdef inline void spans_free(Spans* spans) noexcept:
    free(spans.start)
    free(spans.end)
    free(spans.length)


# --- the text stream ------------------------------------------------------------------

cdef class TextStream:
    """A document fed in pieces: ``buf`` holds it from document offset ``base`` on,
    as far as a subclass still needs it; chunks made go to ``out``."""
    cdef str buf                  # the part of the document still needed
    cdef Py_ssize_t base          # document offset of buf[0]
    cdef list pending             # text fed but not yet in ``buf``
    cdef Py_ssize_t pending_len
    cdef Py_ssize_t next_index    # the next chunk's index
    cdef list out                 # chunks made since the last feed

    cdef void start_document(self) noexcept
    cdef Py_ssize_t needed_from(self) except -1
    cdef int advance(self, bint final) except -1
    cdef int take_pending(self) except -1
    cdef list take_out(self)
    cdef bint strip(self, Py_ssize_t* lo, Py_ssize_t* hi) noexcept
    cdef int add_chunk(self, Py_ssize_t start, Py_ssize_t end, Py_ssize_t length, str text,
                       tuple optional) except -1
