# cython: language_level=3
"""The NDJSON writer's hot path compiled: chunk records formatted and escaped into one
buffer, written about ``batch_bytes`` at a time, without a bytes object per record
(an ASCII text is escaped from the str's own bytes, sixteen at a time; a text of
two-byte characters, the most common other kind, is encoded to UTF-8 in the same pass).
``chunkd.outputs.writers.write_batches`` over ``chunkd.outputs.writers._json_records`` is its twin,
byte for byte and write for write."""

import sys

from cpython.object cimport PyObject
from cpython.ref cimport Py_XDECREF
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.unicode cimport PyUnicode_CheckExact
from libc.stdint cimport uint16_t
from libc.string cimport memcpy

# The escaping in C: the runs of text that need none, sixteen code units a step with
# SSE2 (every x86-64 has it; elsewhere bytes go eight at a time, UCS-2 units one).
cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    #include <stdint.h>
    #include <string.h>
    /* Write at out the escape of the byte c, which escapes (ESCAPES) says it needs:
       a backslash and its letter, or a backslash, u and four hex digits; where it ends. */
    static char* chunkd_escaped(char* out, unsigned char c, const char* escapes) {
        static const char hex[] = "0123456789abcdef";
        out[0] = 92;  /* a backslash */
        out[1] = escapes[c];
        if (escapes[c] != 'u') return out + 2;
        out[2] = '0'; out[3] = '0'; out[4] = hex[c >> 4]; out[5] = hex[c & 15];
        return out + 6;
    }
    /* Copy to out the bytes of text that stay themselves in a JSON string (at least
       0x20, no quote, no backslash: UTF-8's other bytes stay too), sixteen or eight at
       a time while there are as many; how many were copied. Up to sixteen bytes past
       them may be written. */
    static Py_ssize_t chunkd_plain_bytes(const unsigned char* text, Py_ssize_t length,
                                         char* out) {
        Py_ssize_t at = 0;
    #if defined(__SSE2__)
        const __m128i controls = _mm_set1_epi8(0x1F), quote = _mm_set1_epi8(0x22),
                      backslash = _mm_set1_epi8(0x5C);
        while (at + 16 <= length) {
            __m128i bytes = _mm_loadu_si128((const __m128i*)(text + at));
            __m128i escape = _mm_or_si128(
                _mm_cmpeq_epi8(_mm_max_epu8(bytes, controls), controls),
                _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)));
            int found = _mm_movemask_epi8(escape);
            _mm_storeu_si128((__m128i*)(out + at), bytes);
            if (found) return at + __builtin_ctz(found);
            at += 16;
        }
    #endif
        const uint64_t ones = 0x0101010101010101ULL;
        while (at + 8 <= length) {  /* eight at a time, as bits of a word */
            uint64_t word, quotes, backslashes, found;
            memcpy(&word, text + at, 8);
            quotes = word ^ (ones * 0x22);
            backslashes = word ^ (ones * 0x5C);
            /* The high bit of each byte below 0x20, a quote or a backslash (a borrow
               can set only bits above the lowest such byte, which is the one used). */
            found = (((word - ones * 0x20) & ~word) | ((quotes - ones) & ~quotes)
                     | ((backslashes - ones) & ~backslashes)) & (ones * 0x80);
            memcpy(out + at, &word, 8);
            if (found) return at + (__builtin_ctzll(found) >> 3);
            at += 8;
        }
        return at;
    }
    /* The same for UCS-2 code units, each copied as its one byte of UTF-8: the units
       that are ASCII needing no escape. */
    static Py_ssize_t chunkd_plain_ucs2(const uint16_t* text, Py_ssize_t length, char* out) {
        Py_ssize_t at = 0;
    #if defined(__SSE2__)
        const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8(0x22),
                      backslash = _mm_set1_epi8(0x5C);
        while (at + 16 <= length) {
            /* Packing saturates: a unit from 0x80 to 0x7FFF becomes 0xFF, one from
               0x8000 (signed, negative) 0; both then compare below 0x20, signed. */
            __m128i bytes = _mm_packus_epi16(_mm_loadu_si128((const __m128i*)(text + at)),
                                             _mm_loadu_si128((const __m128i*)(text + at + 8)));
            __m128i escape = _mm_or_si128(
                _mm_cmplt_epi8(bytes, space),
                _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)));
            int found = _mm_movemask_epi8(escape);
            _mm_storeu_si128((__m128i*)(out + at), bytes);
            if (found) return at + __builtin_ctz(found);
            at += 16;
        }
    #endif
        return at;
    }
    /* A UCS-2 str's text as the inside of a JSON string, encoded to UTF-8 (room for 6
       bytes a unit at out); where it ends, or NULL at a lone surrogate. escapes: what
       each byte below 0x80 becomes (ESCAPES). Plain ASCII goes sixteen units a step;
       the units beyond it (CJK text, a curly quote) and escapes one at a time. */
    static char* chunkd_ucs2_json(const uint16_t* text, Py_ssize_t length, char* out,
                                  const char* escapes) {
        Py_ssize_t at = 0, plain;
        uint16_t c;
        while (at < length) {
            c = text[at];
            if (c >= 0x800) {
                if (c >= 0xD800 && c <= 0xDFFF) return NULL;
                out[0] = (char)(0xE0 | (c >> 12));
                out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
                out[2] = (char)(0x80 | (c & 0x3F));
                out += 3;
                at++;
            } else if (c >= 0x80) {
                out[0] = (char)(0xC0 | (c >> 6));
                out[1] = (char)(0x80 | (c & 0x3F));
                out += 2;
                at++;
            } else if (escapes[c]) {
                out = chunkd_escaped(out, (unsigned char)c, escapes);
                at++;
            } else {
                plain = chunkd_plain_ucs2(text + at, length - at, out);
                if (!plain) {  /* fewer than sixteen left, or no SSE2 */
                    *out++ = (char)c;
                    at++;
                }
                out += plain;
                at += plain;
            }
        }
        return out;
    }
    """
    char* chunkd_escaped(char* out, unsigned char c, const char* escapes)
    Py_ssize_t chunkd_plain_bytes(const unsigned char* text, Py_ssize_t length, char* out)
    char* chunkd_ucs2_json(const uint16_t* text, Py_ssize_t length, char* out,
                           const char* escapes)

cdef extern from "Python.h":
    PyObject* PyBytes_FromStringAndSize(const char* data, Py_ssize_t size) except NULL
    char* PyBytes_AS_STRING(PyObject* data)
    int _PyBytes_Resize(PyObject** data, Py_ssize_t size) except -1
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    int PyUnicode_KIND(object text)
    const uint16_t* PyUnicode_2BYTE_DATA(object text)
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    int PyUnicode_2BYTE_KIND


if sys.byteorder != "little":  # the eight-byte test reads words little-endian: the twin runs
    raise ImportError("chunkd.kernel._records reads words little-endian")

# What a byte of UTF-8 text becomes in a JSON string, as orjson writes it: 0 where it
# stays itself, the letter after the backslash where it has a short escape, 'u' where
# it is written \u00XX (the other control characters).
cdef char ESCAPES[256]
cdef int byte
for byte in range(256):
    ESCAPES[byte] = b'u' if byte < 0x20 else 0
ESCAPES[0x08], ESCAPES[0x09], ESCAPES[0x0A], ESCAPES[0x0C], ESCAPES[0x0D] = \
    b'b', b't', b'n', b'f', b'r'
ESCAPES[0x22], ESCAPES[0x5C] = b'"', b'\\'

# The bytes between the record's parts.
cdef bytes START = b'"index":', START_ = b',"start":', END_ = b',"end":'
cdef bytes LENGTH_ = b',"length":', TEXT_ = b',"text":"', CLOSE = b'"}\n'
cdef Py_ssize_t FIXED = sum(map(len, (START, START_, END_, LENGTH_, TEXT_, CLOSE)))

# The room a buffer starts with: what the last one grew to, up to the size past which
# the C heap maps memory afresh anyway. A call writes one block's chunks, so each
# call's buffer would otherwise grow, and copy what it holds, again (1 % of the
# command's time on a book).
cdef Py_ssize_t STARTING_ROOM = 1 << 16, KEPT_ROOM = 1 << 18


cdef class _Buffer:
    """Bytes being gathered for one write, in the bytes object that is written: taken,
    it is cut to its size, not copied."""
    cdef PyObject* block  # the bytes being filled (a reference of its own), or NULL
    cdef char* data
    cdef Py_ssize_t size, capacity

    def __dealloc__(self):
        Py_XDECREF(self.block)

    cdef int reserve(self, Py_ssize_t more) except -1:
        global STARTING_ROOM
        cdef Py_ssize_t wanted = self.size + more
        if self.block is NULL:  # as large as the last one grew: it is not grown again
            self.capacity = max(wanted, self.capacity, STARTING_ROOM)
            self.block = PyBytes_FromStringAndSize(NULL, self.capacity)
        elif wanted > self.capacity:
            self.capacity = max(wanted, 2 * self.capacity)
            _PyBytes_Resize(&self.block, self.capacity)  # NULL, raising, if it fails
            STARTING_ROOM = max(STARTING_ROOM, min(self.capacity, KEPT_ROOM))
        self.data = PyBytes_AS_STRING(self.block)
        return 0

    cdef inline void put(self, const char* source, Py_ssize_t length):
        memcpy(self.data + self.size, source, length)
        self.size += length

    cdef inline void put_number(self, long long value):
        cdef char digits[24]
        cdef Py_ssize_t count = 0
        cdef unsigned long long rest = (0ULL - <unsigned long long>value if value < 0
                                        else <unsigned long long>value)
        if value < 0:
            self.data[self.size] = b'-'
            self.size += 1
        while True:
            digits[count] = <char>(48 + rest % 10)
            count += 1
            rest //= 10
            if rest == 0:
                break
        while count:
            count -= 1
            self.data[self.size] = digits[count]
            self.size += 1

    cdef void put_escaped(self, const unsigned char* text, Py_ssize_t length):
        """``text`` as the inside of a JSON string (room for 6 bytes a byte reserved)."""
        cdef Py_ssize_t at = 0, plain
        cdef unsigned char c
        while at < length:
            plain = chunkd_plain_bytes(text + at, length - at, self.data + self.size)
            self.size += plain
            at += plain
            if at < length:  # a byte to escape, or one of the last seven
                c = text[at]
                at += 1
                if ESCAPES[c]:
                    self.put_escape(c)
                else:
                    self.data[self.size] = <char>c
                    self.size += 1

    cdef inline void put_escape(self, unsigned char c):
        self.size = chunkd_escaped(self.data + self.size, c, ESCAPES) - self.data

    cdef bint put_ucs2(self, const uint16_t* text, Py_ssize_t length):
        """A two-byte kind of str's ``text`` as the inside of a JSON string, encoded to
        UTF-8 here (room for 6 bytes a unit reserved); False, with nothing put, at a
        lone surrogate (the caller lets the twin fail on it)."""
        cdef char* end = chunkd_ucs2_json(text, length, self.data + self.size, ESCAPES)
        if end is NULL:
            return False
        self.size = end - self.data
        return True

    cdef bint put_plain(self, str text, bytes opening, long long* numbers) except -1:
        """Put the record of ``numbers`` (index, start, end, length) and ``text``; False,
        with nothing put, where its text holds a lone surrogate."""
        cdef Py_ssize_t start = self.size, size
        cdef const char* utf8 = NULL
        cdef bint two_byte = PyUnicode_KIND(text) == PyUnicode_2BYTE_KIND
        if two_byte:  # encoded and escaped in one pass, rather than encoded first
            size = PyUnicode_GET_LENGTH(text)
        else:  # ASCII's UTF-8 is the str's own data; the rare others are encoded
            try:
                utf8 = PyUnicode_AsUTF8AndSize(text, &size)
            except UnicodeEncodeError:
                return False
        # The keys, four numbers of at most 20 characters, and at most 6 bytes for
        # each code unit of the text (a control character's \u00XX).
        self.reserve(len(opening) + FIXED + 4 * 20 + 6 * size)
        self.put(opening, len(opening))
        self.put(START, len(START))
        self.put_number(numbers[0])
        self.put(START_, len(START_))
        self.put_number(numbers[1])
        self.put(END_, len(END_))
        self.put_number(numbers[2])
        self.put(LENGTH_, len(LENGTH_))
        self.put_number(numbers[3])
        self.put(TEXT_, len(TEXT_))
        if two_byte:
            if not self.put_ucs2(PyUnicode_2BYTE_DATA(text), size):
                self.size = start
                return False
        else:
            self.put_escaped(<const unsigned char*>utf8, size)
        self.put(CLOSE, len(CLOSE))
        return True

    cdef object take(self):
        _PyBytes_Resize(&self.block, self.size)
        taken = <object>self.block  # a reference of the caller's
        Py_XDECREF(self.block)
        self.block, self.data, self.size = NULL, NULL, 0
        return taken


cdef inline bint plain(tuple chunk, long long* numbers):
    """Whether the chunk has its five fields only (no optional field set), its text a
    str and its numbers ints of 64 bits, put in ``numbers``: the records this module
    writes itself."""
    cdef Py_ssize_t at
    cdef int overflow
    if len(chunk) < 5 or not PyUnicode_CheckExact(chunk[4]):
        return False
    for at in range(5, len(chunk)):
        if chunk[at] is not None:
            return False
    for at in range(4):
        if not PyLong_CheckExact(chunk[at]):
            return False
        numbers[at] = PyLong_AsLongLongAndOverflow(chunk[at], &overflow)
        if overflow:
            return False
    return True


def write_json_lines(write, chunks, bytes opening, record, Py_ssize_t batch_bytes):
    """Write each chunk's NDJSON line (``opening``, its fields, its text) through
    ``write``, about ``batch_bytes`` a call: a line is added and, once the lines
    gathered reach ``batch_bytes``, they are written. ``record(chunk)`` makes the line
    of any other chunk (one with optional fields, numbers that are not ints of 64 bits
    or a text holding a lone surrogate), as the twin does: its bytes, or its error."""
    cdef _Buffer buffer = _Buffer()
    cdef bytes line
    cdef tuple chunk
    cdef long long numbers[4]
    for item in chunks:
        if not isinstance(item, tuple):  # a Chunk is a tuple: a named one
            raise TypeError(f"a chunk, not {type(item).__name__}")
        chunk = <tuple>item
        if not plain(chunk, numbers) or not buffer.put_plain(chunk[4], opening, numbers):
            line = record(chunk)
            buffer.reserve(len(line))
            buffer.put(line, len(line))
        if buffer.size >= batch_bytes:
            write(buffer.take())
    if buffer.size:
        write(buffer.take())
