# cython: language_level=3
"""The hot path of ``chunkd.units.kept`` compiled: a text's count as the sum of the
kept counts of its groups (its runs between spaces, tabs, CR and LF), without a list
of them (``chunkd.units.kept.pieces_sum`` is its twin)."""

from cpython.dict cimport PyDict_GetItemWithError, PyDict_SetItem
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_Substring


cpdef Py_ssize_t group_sum(kept, str text, Py_ssize_t limit) except -2:
    """The sum of the counts of ``text``'s groups in ``kept`` (a ``KeptCounts``), each
    group not kept yet counted by ``kept.count`` and kept; -1 when one more would pass
    ``limit`` code points kept (those counted before it stay kept)."""
    cdef dict counts = kept.counts
    cdef Py_ssize_t n = len(text), start = 0, end, total = 0
    cdef PyObject* found
    cdef object group, value
    while start < n:
        if text[start] in " \t\n\r":
            start += 1
            continue
        end = start + 1
        while end < n and text[end] not in " \t\n\r":
            end += 1
        group = PyUnicode_Substring(text, start, end)
        found = PyDict_GetItemWithError(counts, group)
        if found is NULL:
            if kept.points + (end - start) > limit:
                return -1
            value = kept.count(group)
            PyDict_SetItem(counts, group, value)
            kept.points += end - start
            total += value
        else:
            total += <object>found
        start = end
    return total
