# cython: language_level=3
"""UTF-8 decoding's fast path compiled: the text of a run of valid, complete
characters, ASCII sixteen bytes a step: a reader's block in one pass into room kept
between calls, then copied into the str of its final kind; a larger input in two
passes (one validates and counts, one writes the str). Python's own decoder, which
``chunkd.inputs.readers.decode_blocks`` keeps for everything else (a character cut by the
block's end, an invalid byte, its error or its U+FFFD), is its twin: the same text."""

from cpython.unicode cimport PyUnicode_New
from libc.stdint cimport uint8_t, uint16_t, uint32_t
from libc.stdlib cimport malloc
from libc.string cimport memcpy

cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    #include <stdint.h>
    /* Where the ASCII bytes from at end (the first byte from 0x80, or length). */
    static Py_ssize_t chunkd_ascii_end(const unsigned char* data, Py_ssize_t at,
                                       Py_ssize_t length) {
    #if defined(__SSE2__)
        while (at + 16 <= length) {
            int high = _mm_movemask_epi8(_mm_loadu_si128((const __m128i*)(data + at)));
            if (high) return at + __builtin_ctz(high);
            at += 16;
        }
    #endif
        while (at < length && data[at] < 0x80) at++;
        return at;
    }
    /* The bytes of the character at data[at], which is not ASCII: 2 to 4 where they
       are all there and make a character as Python's decoder reads them (no overlong
       form, no surrogate, nothing past U+10FFFF), else 0. */
    static int chunkd_char_size(const unsigned char* data, Py_ssize_t at,
                                Py_ssize_t length) {
        unsigned char lead = data[at], second;
        Py_ssize_t left = length - at;
        if (lead < 0xC2) return 0;  /* a continuation byte, or an overlong lead */
        if (lead < 0xE0) return left >= 2 && (data[at + 1] & 0xC0) == 0x80 ? 2 : 0;
        if (lead < 0xF0) {
            if (left < 3) return 0;
            second = data[at + 1];
            if (lead == 0xE0 ? second < 0xA0 || second > 0xBF
                : lead == 0xED ? second < 0x80 || second > 0x9F
                : (second & 0xC0) != 0x80) return 0;
            return (data[at + 2] & 0xC0) == 0x80 ? 3 : 0;
        }
        if (lead > 0xF4 || left < 4) return 0;
        second = data[at + 1];
        if (lead == 0xF0 ? second < 0x90 || second > 0xBF
            : lead == 0xF4 ? second < 0x80 || second > 0x8F
            : (second & 0xC0) != 0x80) return 0;
        return (data[at + 2] & 0xC0) == 0x80 && (data[at + 3] & 0xC0) == 0x80 ? 4 : 0;
    }
    /* From at, where the run of valid, complete characters ends; its code points in
       count, and its largest lead byte in top (0 where it is all ASCII). */
    static Py_ssize_t chunkd_valid_end(const unsigned char* data, Py_ssize_t at,
                                       Py_ssize_t length, Py_ssize_t* count,
                                       unsigned char* top) {
        Py_ssize_t points = 0, ascii;
        unsigned char largest = 0;
        int size;
        while (at < length) {
            if (data[at] < 0x80) {
                ascii = chunkd_ascii_end(data, at, length);
                points += ascii - at;
                at = ascii;
                continue;
            }
            size = chunkd_char_size(data, at, length);
            if (!size) break;
            if (data[at] > largest) largest = data[at];
            at += size;
            points++;
        }
        *count = points;
        *top = largest;
        return at;
    }
    /* The code point of the valid character at data[*at], which moves past it. */
    static inline uint32_t chunkd_next(const unsigned char* data, Py_ssize_t* at) {
        const unsigned char* c = data + *at;
        if (c[0] < 0x80) { *at += 1; return c[0]; }
        if (c[0] < 0xE0) { *at += 2; return ((c[0] & 0x1Fu) << 6) | (c[1] & 0x3Fu); }
        if (c[0] < 0xF0) {
            *at += 3;
            return ((c[0] & 0x0Fu) << 12) | ((c[1] & 0x3Fu) << 6) | (c[2] & 0x3Fu);
        }
        *at += 4;
        return ((c[0] & 0x07u) << 18) | ((c[1] & 0x3Fu) << 12) | ((c[2] & 0x3Fu) << 6)
               | (c[3] & 0x3Fu);
    }
    /* The valid characters of data[at:end] as two-byte code units (none is past
       U+FFFF), ASCII sixteen bytes a step where they are sixteen units. */
    static void chunkd_fill_ucs2(const unsigned char* data, Py_ssize_t at, Py_ssize_t end,
                                 uint16_t* out) {
        while (at < end) {
    #if defined(__SSE2__)
            while (at + 16 <= end) {
                __m128i bytes = _mm_loadu_si128((const __m128i*)(data + at));
                if (_mm_movemask_epi8(bytes)) break;
                _mm_storeu_si128((__m128i*)out, _mm_unpacklo_epi8(bytes, _mm_setzero_si128()));
                _mm_storeu_si128((__m128i*)(out + 8),
                                 _mm_unpackhi_epi8(bytes, _mm_setzero_si128()));
                out += 16;
                at += 16;
            }
            if (at == end) break;
    #endif
            *out++ = (uint16_t)chunkd_next(data, &at);
        }
    }
    /* The same as four-byte code units (a str with a character beyond U+FFFF). */
    static void chunkd_fill_ucs4(const unsigned char* data, Py_ssize_t at, Py_ssize_t end,
                                 uint32_t* out) {
        while (at < end) {
    #if defined(__SSE2__)
            while (at + 16 <= end) {
                __m128i bytes = _mm_loadu_si128((const __m128i*)(data + at)), low, high;
                const __m128i zero = _mm_setzero_si128();
                if (_mm_movemask_epi8(bytes)) break;
                low = _mm_unpacklo_epi8(bytes, zero);
                high = _mm_unpackhi_epi8(bytes, zero);
                _mm_storeu_si128((__m128i*)out, _mm_unpacklo_epi16(low, zero));
                _mm_storeu_si128((__m128i*)(out + 4), _mm_unpackhi_epi16(low, zero));
                _mm_storeu_si128((__m128i*)(out + 8), _mm_unpacklo_epi16(high, zero));
                _mm_storeu_si128((__m128i*)(out + 12), _mm_unpackhi_epi16(high, zero));
                out += 16;
                at += 16;
            }
            if (at == end) break;
    #endif
            *out++ = chunkd_next(data, &at);
        }
    }
    /* The ASCII bytes from at copied into out as units of width bytes (2 or 4),
       sixteen a step, each step stored before it is looked at (room for sixteen units
       past the copy); where they end. */
    static inline Py_ssize_t chunkd_widen_ascii(const unsigned char* data, Py_ssize_t at,
                                                Py_ssize_t length, void* out, int width) {
        uint16_t* two = (uint16_t*)out;
        uint32_t* four = (uint32_t*)out;
    #if defined(__SSE2__)
        const __m128i zero = _mm_setzero_si128();
        while (at + 16 <= length) {
            __m128i bytes = _mm_loadu_si128((const __m128i*)(data + at));
            __m128i low = _mm_unpacklo_epi8(bytes, zero), high = _mm_unpackhi_epi8(bytes, zero);
            int found = _mm_movemask_epi8(bytes), step = found ? __builtin_ctz(found) : 16;
            if (width == 2) {
                _mm_storeu_si128((__m128i*)two, low);
                _mm_storeu_si128((__m128i*)(two + 8), high);
            } else {
                _mm_storeu_si128((__m128i*)four, _mm_unpacklo_epi16(low, zero));
                _mm_storeu_si128((__m128i*)(four + 4), _mm_unpackhi_epi16(low, zero));
                _mm_storeu_si128((__m128i*)(four + 8), _mm_unpacklo_epi16(high, zero));
                _mm_storeu_si128((__m128i*)(four + 12), _mm_unpackhi_epi16(high, zero));
            }
            two += step;
            four += step;
            at += step;
            if (found) return at;
        }
    #endif
        for (; at < length && data[at] < 0x80; at++) {
            if (width == 2) *two++ = data[at]; else *four++ = data[at];
        }
        return at;
    }
    /* One pass for the common case: the valid, complete characters from at decoded
       into out (room for length - at + 16 units: sixteen ASCII bytes are stored as
       sixteen units before they are looked at), up to the first that is not valid or
       complete, or that needs four bytes; where that is. Their count in count and
       their largest lead byte in top (0 where they are all ASCII). */
    static Py_ssize_t chunkd_decode_ucs2(const unsigned char* data, Py_ssize_t at,
                                         Py_ssize_t length, uint16_t* out,
                                         Py_ssize_t* count, unsigned char* top) {
        uint16_t* start = out;
        Py_ssize_t ascii;
        unsigned char lead, second, third, largest = 0;
        uint32_t point;
        while (at < length) {
            lead = data[at];
            if (lead < 0x80) {
                ascii = chunkd_widen_ascii(data, at, length, out, 2);
                out += ascii - at;
                at = ascii;
                continue;
            }
            if (lead >= 0xE0) {  /* three bytes: CJK, punctuation like U+2019 */
                if (lead >= 0xF0 || at + 2 >= length) break;
                second = data[at + 1];
                third = data[at + 2];
                if ((second & 0xC0) != 0x80 || (third & 0xC0) != 0x80) break;
                point = ((lead & 0x0Fu) << 12) | ((second & 0x3Fu) << 6) | (third & 0x3Fu);
                if (point < 0x800 || (point >= 0xD800 && point <= 0xDFFF)) break;
                at += 3;
            } else {  /* two bytes */
                if (lead < 0xC2 || at + 1 >= length) break;
                second = data[at + 1];
                if ((second & 0xC0) != 0x80) break;
                point = ((lead & 0x1Fu) << 6) | (second & 0x3Fu);
                at += 2;
            }
            *out++ = (uint16_t)point;
            largest = lead > largest ? lead : largest;
        }
        *count = out - start;
        *top = largest;
        return at;
    }
    /* The same into four-byte units, from where a character beyond U+FFFF was met:
       every valid, complete character, up to the first that is not (room for
       length - at units); where that is, and their count in count. */
    static Py_ssize_t chunkd_decode_ucs4(const unsigned char* data, Py_ssize_t at,
                                         Py_ssize_t length, uint32_t* out,
                                         Py_ssize_t* count) {
        uint32_t* start = out;
        Py_ssize_t ascii;
        while (at < length) {
            if (data[at] < 0x80) {
                ascii = chunkd_widen_ascii(data, at, length, out, 4);
                out += ascii - at;
                at = ascii;
                continue;
            }
            if (!chunkd_char_size(data, at, length)) break;
            *out++ = chunkd_next(data, &at);
        }
        *count = out - start;
        return at;
    }
    """
    Py_ssize_t chunkd_valid_end(const unsigned char* data, Py_ssize_t at, Py_ssize_t length,
                                Py_ssize_t* count, unsigned char* top)
    uint32_t chunkd_next(const unsigned char* data, Py_ssize_t* at)
    int chunkd_char_size(const unsigned char* data, Py_ssize_t at, Py_ssize_t length)
    void chunkd_fill_ucs2(const unsigned char* data, Py_ssize_t at, Py_ssize_t end,
                          uint16_t* out)
    void chunkd_fill_ucs4(const unsigned char* data, Py_ssize_t at, Py_ssize_t end,
                          uint32_t* out)
    Py_ssize_t chunkd_decode_ucs2(const unsigned char* data, Py_ssize_t at,
                                  Py_ssize_t length, uint16_t* out, Py_ssize_t* count,
                                  unsigned char* top)
    Py_ssize_t chunkd_decode_ucs4(const unsigned char* data, Py_ssize_t at,
                                  Py_ssize_t length, uint32_t* out, Py_ssize_t* count)

cdef extern from "Python.h":
    void* PyUnicode_DATA(object text)

# Where the one pass decodes to (two-byte units, and four-byte units once a character
# beyond U+FFFF is met), kept between calls: the GIL, held throughout a call in which
# nothing runs Python code, keeps it to one call at a time. A larger input (a whole
# request's body) is counted first and decoded straight into its str, as the codec's
# memory would hold it, rather than into room of twice its size or more.
cdef Py_ssize_t KEPT_UNITS = 1 << 17
cdef uint16_t* kept_units = NULL
cdef uint32_t* kept_wide_units = NULL


def decode_valid(const unsigned char[::1] data not None, Py_ssize_t start):
    """The text of ``data`` from ``start`` up to the first byte that does not begin a
    valid, complete character (or its end), and where that is."""
    global kept_units
    cdef Py_ssize_t length = data.shape[0], count, end, at
    cdef unsigned char top
    cdef const unsigned char* bytes_
    cdef uint8_t* ucs1
    if not 0 <= start <= length:
        raise IndexError(f"start {start} is outside the {length} bytes")
    if start == length:
        return "", start
    bytes_ = &data[0]
    if length - start + 16 > KEPT_UNITS:
        return _counted(bytes_, start, length)
    if kept_units is NULL:
        kept_units = <uint16_t*>malloc(KEPT_UNITS * sizeof(uint16_t))
        if kept_units is NULL:
            raise MemoryError()
    end = chunkd_decode_ucs2(bytes_, start, length, kept_units, &count, &top)
    if end < length and bytes_[end] >= 0xF0 and chunkd_char_size(bytes_, end, length):
        return _wide(bytes_, end, length, count)  # a character beyond U+FFFF (rare)
    text = _room(count, top)
    if top == 0:
        memcpy(PyUnicode_DATA(text), bytes_ + start, count)
    elif top <= 0xC3:
        ucs1 = <uint8_t*>PyUnicode_DATA(text)
        for at in range(count):
            ucs1[at] = <uint8_t>kept_units[at]
    else:
        memcpy(PyUnicode_DATA(text), kept_units, count * sizeof(uint16_t))
    return text, end


cdef tuple _wide(const unsigned char* bytes_, Py_ssize_t end, Py_ssize_t length,
                 Py_ssize_t count):
    """``decode_valid``'s one pass on from ``end``, where a character beyond U+FFFF
    is: the ``count`` two-byte units decoded before it widened, the rest decoded as
    four-byte units after them (the room is the two-byte room's, in units)."""
    global kept_wide_units
    cdef Py_ssize_t more, at
    if kept_wide_units is NULL:
        kept_wide_units = <uint32_t*>malloc(KEPT_UNITS * sizeof(uint32_t))
        if kept_wide_units is NULL:
            raise MemoryError()
    for at in range(count):
        kept_wide_units[at] = kept_units[at]
    end = chunkd_decode_ucs4(bytes_, end, length, kept_wide_units + count, &more)
    text = PyUnicode_New(count + more, 0x10FFFF)
    memcpy(PyUnicode_DATA(text), kept_wide_units, (count + more) * sizeof(uint32_t))
    return text, end


cdef tuple _counted(const unsigned char* bytes_, Py_ssize_t start, Py_ssize_t length):
    """``decode_valid`` in two passes: the characters counted and their largest lead
    byte found, then decoded into the str of that kind."""
    cdef Py_ssize_t count, end, at = start
    cdef unsigned char top
    cdef uint8_t* ucs1
    end = chunkd_valid_end(bytes_, start, length, &count, &top)
    text = _room(count, top)
    if top == 0:
        memcpy(PyUnicode_DATA(text), bytes_ + start, count)
    elif top <= 0xC3:
        ucs1 = <uint8_t*>PyUnicode_DATA(text)
        while at < end:
            ucs1[0] = <uint8_t>chunkd_next(bytes_, &at)
            ucs1 += 1
    elif top <= 0xEF:
        chunkd_fill_ucs2(bytes_, start, end, <uint16_t*>PyUnicode_DATA(text))
    else:
        chunkd_fill_ucs4(bytes_, start, end, <uint32_t*>PyUnicode_DATA(text))
    return text, end


cdef str _room(Py_ssize_t count, unsigned char top):
    """A str of ``count`` characters to fill, of the kind that its largest lead byte
    ``top`` says, the smallest that holds them all, as a str's kind must be: none
    (ASCII), C2 or C3 (up to U+FF), up to EF (up to U+FFFF), or beyond."""
    return PyUnicode_New(count, 0x7F if top == 0 else 0xFF if top <= 0xC3
                         else 0xFFFF if top <= 0xEF else 0x10FFFF)
