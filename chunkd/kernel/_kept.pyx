# cython: language_level=3
"""The hot path of ``chunkd.units.kept`` compiled: a text's count as the sum of the
kept counts of its pieces, without a list of them (``chunkd.units.kept.pieces_sum``
is its twin)."""

from cpython.dict cimport PyDict_GetItemWithError, PyDict_SetItem
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_Substring


cdef inline bint is_cut(Py_UCS4 c, bint* marks, bint ideographs):
    """Whether ``c`` is a cut: one of the ASCII ``marks`` (a table), or an ideograph."""
    return (c < 128 and marks[c]) or (ideographs and 0x4E00 <= c <= 0x9FFF)


cpdef Py_ssize_t piece_sum(kept, str text, Py_ssize_t limit, str marks="",
                           bint ideographs=False) except -2:
    """The sum of the counts of ``text``'s pieces in ``kept`` (a ``KeptCounts``), each
    piece not kept yet counted by ``kept.count`` and kept; -1 when one more would pass
    ``limit`` code points kept (those counted before it stay kept). The pieces: the
    runs between spaces, tabs, CR, LF and the cuts, and each cut; the cuts: the ASCII
    ``marks``, and the CJK ideographs U+4E00 to U+9FFF where ``ideographs``."""
    cdef dict counts = kept.counts
    cdef bint cut[128]
    cdef Py_ssize_t code
    cdef Py_ssize_t n = len(text), start = 0, end, total = 0
    cdef Py_UCS4 c
    cdef PyObject* found
    cdef object piece, value
    for code in range(128):
        cut[code] = False
    for c in marks:
        if c < 128:
            cut[c] = True
    while start < n:
        c = text[start]
        if c in " \t\n\r":
            start += 1
            continue
        end = start + 1
        if not is_cut(c, cut, ideographs):
            while end < n:
                c = text[end]
                if c in " \t\n\r" or is_cut(c, cut, ideographs):
                    break
                end += 1
        piece = PyUnicode_Substring(text, start, end)
        found = PyDict_GetItemWithError(counts, piece)
        if found is NULL:
            if kept.points + (end - start) > limit:
                return -1
            value = kept.count(piece)
            PyDict_SetItem(counts, piece, value)
            kept.points += end - start
            total += value
        else:
            total += <object>found
        start = end
    return total
