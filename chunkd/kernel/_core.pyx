# cython: language_level=3, cdivision=True
"""The streaming core of the compiled modules: a document fed in pieces, held from
the first offset a subclass still needs, and the chunk records made from it.

``TextStream.feed`` joins new text to the buffer only once it is as long as what
is held: while a subclass holds much of the document (a regular expression waiting
for all of its text, a section without a heading after it), the buffer grows by
doubling, so any input costs linear time.
"""

cimport cython
from cpython.unicode cimport PyUnicode_Substring

from chunkd.model.chunk import Chunk

cdef extern from "Python.h":
    ctypedef struct PyTypeObject
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t items)
    void PyTuple_SET_ITEM(object tuple, Py_ssize_t at, object item)
    void Py_INCREF(object item)

cdef extern from *:
    """
    /* From Python 3.14 a tuple caches its hash, which tuple.__new__ marks as not yet
       computed (-1) in a field of its own: a chunk made there is not filled in place. */
    #define CHUNKD_FILL_IN_PLACE (PY_VERSION_HEX < 0x030E0000)
    """
    const bint CHUNKD_FILL_IN_PLACE


cdef inline void _set(object filling, Py_ssize_t at, object item):
    """Put ``item`` at ``at`` of a tuple being filled (its slot empty)."""
    Py_INCREF(item)  # the slot takes a reference of its own
    PyTuple_SET_ITEM(filling, at, item)


cdef extern from *:
    """
    #ifndef CHUNKD_DEBUG_BUILD
    #define CHUNKD_DEBUG_BUILD 0
    #endif
    """
    const int CHUNKD_DEBUG_BUILD

#: Whether this is the debug build (``CHUNKD_DEBUG_BUILD=1`` at build time: bounds
#: checks and assertions on the invariants).
DEBUG_BUILD = bool(CHUNKD_DEBUG_BUILD)

cdef extern from *:
    """
    #if defined(__GLIBC__)
    #include <malloc.h>
    /* Setting M_TOP_PAD stops glibc from raising its mmap threshold as it would (from
       128 KiB, to the largest block freed), so it is set too: to 256 KiB, which a
       reader's block and its text (64 KiB, a UCS-2 str of twice that) stay under. A
       larger block that the heap has no free room for is mapped on its own and handed
       back when freed; at 512 KiB or more, the transient copies of a 40 MB NDJSON line
       fragmented the heap (a peak 9 MB higher, tests/test_input_findings.py). */
    #define CHUNKD_MAPPED_FROM (256 << 10)
    #define CHUNKD_PAD_HEAP(bytes) (mallopt(M_MMAP_THRESHOLD, CHUNKD_MAPPED_FROM) == 1 \
                                    && mallopt(M_TOP_PAD, (bytes)) == 1)
    #else
    #define CHUNKD_PAD_HEAP(bytes) 0
    #endif
    """
    bint CHUNKD_PAD_HEAP(int bytes)


def pad_heap(int bytes):
    """Have the C allocator grow its heap ``bytes`` beyond what it needs, keep as much
    when memory is freed rather than hand the top of the heap back to the system, and
    take blocks under 256 KiB from it; False where the allocator has no such settings
    (it is not glibc's). A stream frees its buffer and blocks and allocates
    them again block after block, and each page handed back and taken again is a page
    fault: some 6,600 on a 43 MB book, 5 % of the command's time. It changes the whole
    process: for the command only (``chunkd.cli``), never for a program that imports
    chunkd."""
    return CHUNKD_PAD_HEAP(bytes)


cdef class TextStream:
    """A document fed in pieces; a subclass reads ``buf`` in ``advance``, says in
    ``needed_from`` where its reading still starts, and makes chunks with
    ``add_chunk``."""

    def __cinit__(self, *args, **kwargs):
        self.buf = ""
        self.pending = []
        self.out = []

    cdef void start_document(self) noexcept:
        """Forget the document: the next feed starts a new one."""
        self.buf = ""
        self.base = 0
        self.pending = []
        self.pending_len = 0
        self.next_index = 0
        self.out = []

    cdef Py_ssize_t needed_from(self) except -1:
        """The lowest document offset the subclass still reads."""
        raise NotImplementedError("a stream says what it still reads")

    cdef int advance(self, bint final) except -1:
        """Read the buffer up to its end; ``final``: the document ends there."""
        raise NotImplementedError("a stream reads its own text")

    def feed(self, str text not None):
        """Take the next piece of the document; return the chunks now final."""
        self.pending.append(text)
        self.pending_len += len(text)
        # Add new text only once it is as long as what is held: linear time.
        if self.pending_len < self.base + len(self.buf) - self.needed_from():
            return []
        self.take_pending()
        self.advance(False)
        return self.take_out()

    def finish(self):
        """End the document; return its remaining chunks and start a new document."""
        self.take_pending()
        self.advance(True)
        chunks = self.take_out()
        self.start_document()
        return chunks

    cdef int take_pending(self) except -1:
        """Drop the text nothing reads any more and append the text fed since."""
        cdef Py_ssize_t drop = self.needed_from() - self.base
        assert 0 <= drop <= len(self.buf), "the base never passes what is needed"
        # One copy: the kept text and the pending pieces joined at once.
        self.pending.insert(0, self.buf[drop:])
        self.buf = "".join(self.pending)
        self.base += drop
        self.pending = []
        self.pending_len = 0
        return 0

    cdef list take_out(self):
        chunks = self.out
        self.out = []
        return chunks

    cdef bint strip(self, Py_ssize_t* lo, Py_ssize_t* hi) noexcept:
        """Narrow buf[lo:hi] to its text without white space at either end
        (``str.strip``); False if nothing is left."""
        cdef int kind = PyUnicode_KIND(self.buf)
        cdef void* data = PyUnicode_DATA(self.buf)
        while lo[0] < hi[0] and is_white(PyUnicode_READ(kind, data, lo[0])):
            lo[0] += 1
        while hi[0] > lo[0] and is_white(PyUnicode_READ(kind, data, hi[0] - 1)):
            hi[0] -= 1
        return lo[0] < hi[0]

    @cython.final
    cdef int add_chunk(self, Py_ssize_t start, Py_ssize_t end, Py_ssize_t length, str text,
                       tuple optional) except -1:
        """Make the chunk ``text`` that stands for document[start:end], of ``length``,
        with the optional fields ``optional``, and number it.

        The named tuple is allocated and filled here, as ``tuple.__new__`` would fill
        it from a tuple of its fields, without that tuple (before Python 3.14:
        ``CHUNKD_FILL_IN_PLACE``), and never through its Python-level ``__new__`` (a
        third of the per-chunk cost in profiles). A chunk holds only
        ints, strs and tuples of strs, so it cannot be part of a cycle: untracked, it
        costs the garbage collector nothing."""
        cdef Py_ssize_t extra = len(optional), at
        cdef object chunk  # a Chunk: a tuple's subclass, not an exact tuple
        assert self.base <= start < end <= self.base + len(self.buf), \
            "a chunk stands for text within the buffer"
        if not CHUNKD_FILL_IN_PLACE:
            chunk = tuple.__new__(Chunk, (self.next_index, start, end, length, text) + optional)
        else:
            chunk = PyType_GenericAlloc(<PyTypeObject*>Chunk, 5 + extra)
            _set(chunk, 0, self.next_index)
            _set(chunk, 1, start)
            _set(chunk, 2, end)
            _set(chunk, 3, length)
            _set(chunk, 4, text)
            for at in range(extra):
                _set(chunk, 5 + at, optional[at])
        PyObject_GC_UnTrack(chunk)
        self.out.append(chunk)
        self.next_index += 1
        return 0
