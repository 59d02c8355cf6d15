# C declarations and helpers that both compiled modules (_kernel.pyx, _windows.pyx) use.

from libc.stdlib cimport realloc

cdef extern from "Python.h":
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    unsigned int PyUnicode_READ(int kind, void* data, Py_ssize_t index) nogil  # a Py_UCS4
    bint Py_UNICODE_ISSPACE(unsigned int ch) nogil
    void PyObject_GC_UnTrack(object op)
    const Py_ssize_t PY_SSIZE_T_MAX


cdef inline void* grow_offsets(void* block, Py_ssize_t count) except NULL:
    """``block`` reallocated to hold ``count`` offsets (Py_ssize_t)."""
    cdef void* grown = realloc(block, count * sizeof(Py_ssize_t))
    if grown == NULL:
        raise MemoryError()
    return grown
