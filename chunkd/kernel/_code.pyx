# cython: language_level=3
"""The code strategy's walk, compiled: a document parsed by tree-sitter's C runtime
(vendored in chunkd/kernel/_vendor/tree_sitter, the version the tree-sitter package is) and
cut on its nodes in C, as ``chunkd.strategies.code.CodeDocument`` cuts it (its twin and
oracle), for the common case that document checks first: sizes in code points, no
``embed_text`` prefix. It returns the chunks' starts and the definitions' outline; the
records are made by the Python side. A leaf over the size is cut by the Python side's
recursive splitter, called back.

Each function below is the CodeDocument method of the same name; their docstrings there.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Calloc, PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t, uint16_t, uint32_t, uintptr_t
from libc.stdlib cimport qsort
from libc.string cimport memcpy, memmove, memset


# The runtime compiled in this module's own translation unit (lib.c includes the rest),
# so that the compiler inlines its small node functions into the walk.
cdef extern from "lib.c":
    pass


cdef extern from "tree_sitter/api.h":
    ctypedef struct TSLanguage:
        pass
    ctypedef struct TSParser:
        pass
    ctypedef struct TSTree:
        pass
    ctypedef uint16_t TSSymbol
    ctypedef uint16_t TSFieldId
    ctypedef struct TSPoint:
        uint32_t row
        uint32_t column
    ctypedef struct TSNode:
        uint32_t context[4]
        const void *id
        const TSTree *tree
    ctypedef struct TSTreeCursor:
        pass
    int TREE_SITTER_LANGUAGE_VERSION
    int TREE_SITTER_MIN_COMPATIBLE_LANGUAGE_VERSION

    TSParser *ts_parser_new() nogil
    void ts_parser_delete(TSParser *self) nogil
    bint ts_parser_set_language(TSParser *self, const TSLanguage *language) nogil
    TSTree *ts_parser_parse_string(TSParser *self, const TSTree *old_tree,
                                   const char *string, uint32_t length) nogil
    void ts_tree_delete(TSTree *self) nogil
    TSNode ts_tree_root_node(const TSTree *self) nogil
    uint32_t ts_language_abi_version(const TSLanguage *self) nogil
    void ts_set_allocator(void *(*new_malloc)(size_t), void *(*new_calloc)(size_t, size_t),
                          void *(*new_realloc)(void *, size_t), void (*new_free)(void *))
    TSFieldId ts_language_field_id_for_name(const TSLanguage *self, const char *name,
                                            uint32_t name_length) nogil

    TSSymbol ts_node_symbol(TSNode self) nogil
    uint32_t ts_node_start_byte(TSNode self) nogil
    uint32_t ts_node_end_byte(TSNode self) nogil
    TSPoint ts_node_start_point(TSNode self) nogil
    TSPoint ts_node_end_point(TSNode self) nogil
    bint ts_node_is_null(TSNode self) nogil
    bint ts_node_is_named(TSNode self) nogil
    bint ts_node_has_error(TSNode self) nogil
    uint32_t ts_node_child_count(TSNode self) nogil
    TSNode ts_node_child(TSNode self, uint32_t child_index) nogil
    TSNode ts_node_child_by_field_id(TSNode self, TSFieldId field_id) nogil
    TSNode ts_node_prev_sibling(TSNode self) nogil
    uint32_t ts_node_descendant_count(TSNode self) nogil

    TSTreeCursor ts_tree_cursor_new(TSNode node) nogil
    void ts_tree_cursor_delete(TSTreeCursor *self) nogil
    TSNode ts_tree_cursor_current_node(const TSTreeCursor *self) nogil
    bint ts_tree_cursor_goto_parent(TSTreeCursor *self) nogil
    bint ts_tree_cursor_goto_next_sibling(TSTreeCursor *self) nogil
    bint ts_tree_cursor_goto_first_child(TSTreeCursor *self) nogil
    int64_t ts_tree_cursor_goto_first_child_for_byte(TSTreeCursor *self,
                                                     uint32_t goal_byte) nogil


# The runtime's own representation of a tree (its internal headers): every node of a
# tree visited straight through its subtrees, eight times faster than with a cursor.
cdef extern from "subtree.h":
    ctypedef struct Length:
        uint32_t bytes
        TSPoint extent
    ctypedef struct Subtree:
        pass
    TSSymbol ts_subtree_symbol(Subtree self) nogil
    bint ts_subtree_visible(Subtree self) nogil
    bint ts_subtree_named(Subtree self) nogil
    bint ts_subtree_extra(Subtree self) nogil
    Length ts_subtree_padding(Subtree self) nogil
    Length ts_subtree_size(Subtree self) nogil
    uint32_t ts_subtree_child_count(Subtree self) nogil
    uint16_t ts_subtree_production_id(Subtree self) nogil
    Subtree *ts_subtree_children(Subtree self) nogil
    Length length_add(Length a, Length b) nogil

cdef extern from "language.h":
    ctypedef struct TSSymbolMetadata:
        bint visible
        bint named
    TSSymbolMetadata ts_language_symbol_metadata(const TSLanguage *self, TSSymbol symbol) nogil
    TSSymbol ts_language_public_symbol(const TSLanguage *self, TSSymbol symbol) nogil
    const TSSymbol *ts_language_alias_sequence(const TSLanguage *self,
                                               uint32_t production_id) nogil

cdef extern from "tree.h":
    TSNode ts_node_new(const TSTree *tree, const Subtree *subtree, Length position,
                       TSSymbol alias) nogil


cdef extern from "Python.h":
    bint PyCapsule_IsValid(object capsule, const char *name)
    void *PyCapsule_GetPointer(object capsule, const char *name) except? NULL
    int PyUnicode_KIND(object text)
    void *PyUnicode_DATA(object text)
    Py_UCS4 PyUnicode_READ(int kind, void *data, Py_ssize_t index) nogil
    bint Py_UNICODE_ISSPACE(Py_UCS4 ch) nogil
    int PyUnicode_4BYTE_KIND
    str PyUnicode_FromKindAndData(int kind, const void *buffer, Py_ssize_t size)


#: The bits of a node kind's flags (``CodeWalk``'s ``kinds``).
cdef enum:
    FLAG_LEADING = 1
    FLAG_CONTAINER = 2
    FLAG_DEFINITION = 4

#: The kinds of level (chunkd.strategies.code's CONTAINER, CONSTRUCT, GROUP).
cdef enum:
    CONTAINER = 0
    CONSTRUCT = 1
    GROUP = 2

#: 1 << STEP_BITS bytes between two checkpoints of the byte -> code point conversion (a
#: conversion counts at most that many bytes).
cdef Py_ssize_t STEP_BITS = 6

# The runtime allocates with Python's allocator, as the tree-sitter package does: its
# many small nodes cost less so (the parse and the tree's deletion took 8% more with the C
# library's), and a parse holds the GIL for it.
ts_set_allocator(PyMem_Malloc, PyMem_Calloc, PyMem_Realloc, PyMem_Free)

#: The ABI versions of grammar this runtime reads.
ABI_VERSIONS = range(TREE_SITTER_MIN_COMPATIBLE_LANGUAGE_VERSION,
                     TREE_SITTER_LANGUAGE_VERSION + 1)


cdef struct Piece:
    Py_ssize_t start, end       # code points
    Py_ssize_t first, count     # its nodes: the level's nodes[first:first + count]


cdef struct Level:
    TSNode *nodes               # owned: the nodes its pieces are made of (a node's
    Py_ssize_t node_count       # children: a batch of them)
    Piece *pieces               # owned
    Py_ssize_t piece_count, piece_room
    int kind
    bint definition, past, glue
    bint header                 # within a definition's header: all signature
    Py_ssize_t body_start       # byte offset of a definition's body (-1: none)
    Py_ssize_t at
    Py_ssize_t end              # the level's end
    TSTreeCursor cursor         # a node's level: on its next child to read
    bint has_cursor, reading    # (reading: there is one)


cdef struct Group:
    Py_ssize_t first, count


cdef struct Frame:
    Subtree parent              # a subtree whose children are being visited
    Length position             # where its next child starts
    uint32_t child, structural  # its next child, and that child's index among the
                                # children that are not extras (their aliases' index)
    const TSSymbol *aliases


cdef struct Found:
    Py_ssize_t start, end, order
    TSNode node


cdef int _by_start(const void *left, const void *right) noexcept nogil:
    """Definitions by start, then the longest first, then as found (a stable sort)."""
    cdef const Found *a = <const Found *>left
    cdef const Found *b = <const Found *>right
    if a.start != b.start:
        return -1 if a.start < b.start else 1
    if a.end != b.end:
        return -1 if a.end > b.end else 1
    return -1 if a.order < b.order else (1 if a.order > b.order else 0)


cdef void *_grown(void *memory, Py_ssize_t count, size_t item) except NULL:
    cdef void *grown = PyMem_Realloc(memory, count * item if count else item)
    if grown == NULL:
        raise MemoryError()
    return grown


cdef class _Ends:
    """Where each node's code ends (``code_end``), by node id: open addressing, a node
    looked up once (the cut asks it of each level of a deep nest)."""

    cdef uintptr_t *keys
    cdef Py_ssize_t *values
    cdef Py_ssize_t room, used

    def __cinit__(self):
        self.room = 1024
        self.used = 0
        self.keys = <uintptr_t *>PyMem_Malloc(self.room * sizeof(uintptr_t))
        self.values = <Py_ssize_t *>PyMem_Malloc(self.room * sizeof(Py_ssize_t))
        if self.keys == NULL or self.values == NULL:
            raise MemoryError()
        memset(self.keys, 0, self.room * sizeof(uintptr_t))

    def __dealloc__(self):
        PyMem_Free(self.keys)
        PyMem_Free(self.values)

    cdef Py_ssize_t get(self, uintptr_t key) noexcept:
        cdef Py_ssize_t slot = (key >> 4) & (self.room - 1)
        while self.keys[slot]:
            if self.keys[slot] == key:
                return self.values[slot]
            slot = (slot + 1) & (self.room - 1)
        return -1

    cdef int put(self, uintptr_t key, Py_ssize_t value) except -1:
        cdef Py_ssize_t slot, index, old_room
        cdef uintptr_t *old_keys
        cdef Py_ssize_t *old_values
        if 2 * (self.used + 1) > self.room:
            old_keys, old_values, old_room = self.keys, self.values, self.room
            self.room *= 2
            self.keys = <uintptr_t *>PyMem_Malloc(self.room * sizeof(uintptr_t))
            self.values = <Py_ssize_t *>PyMem_Malloc(self.room * sizeof(Py_ssize_t))
            if self.keys == NULL or self.values == NULL:
                PyMem_Free(old_keys)
                PyMem_Free(old_values)
                raise MemoryError()
            memset(self.keys, 0, self.room * sizeof(uintptr_t))
            self.used = 0
            for index in range(old_room):
                if old_keys[index]:
                    self.put(old_keys[index], old_values[index])
            PyMem_Free(old_keys)
            PyMem_Free(old_values)
        slot = (key >> 4) & (self.room - 1)
        while self.keys[slot] and self.keys[slot] != key:
            slot = (slot + 1) & (self.room - 1)
        if not self.keys[slot]:
            self.used += 1
        self.keys[slot] = key
        self.values[slot] = value
        return 0


cdef class CodeWalk:
    """A grammar's walk: its own parser, and what the cut needs of the grammar's node
    kinds. ``language``: the grammar package's capsule (``tree_sitter_python.language()``);
    ``kinds``: a flag byte for each of the 65536 node kind ids (``LEADING``,
    ``CONTAINER``, ``DEFINITION``: their bits); ``wrapping``: the field ids of a node that
    wraps a definition; ``keywords``: the definitions' keywords (empty: the outline is
    found by visiting every node); ``most_children`` and ``keyword_nodes``:
    chunkd.strategies.code's ``MOST_CHILDREN`` and ``KEYWORD_NODES``. A grammar of an ABI version this runtime does not
    read is a ValueError (the caller cuts with the Python path)."""

    LEADING, CONTAINER, DEFINITION = FLAG_LEADING, FLAG_CONTAINER, FLAG_DEFINITION

    cdef TSParser *parser
    cdef const TSLanguage *language
    cdef bytes kinds
    cdef const unsigned char *flags
    cdef TSFieldId *wrapping
    cdef Py_ssize_t wrapping_count
    cdef tuple keywords
    cdef uint32_t keyword_lengths   # a bit for each length of keyword (up to 31)
    cdef TSFieldId name_field, declarator_field, type_field, body_field
    cdef Py_ssize_t most_children, keyword_nodes

    def __cinit__(self, language, bytes kinds, tuple wrapping, tuple keywords,
                  Py_ssize_t most_children, Py_ssize_t keyword_nodes):
        cdef Py_ssize_t index
        if not PyCapsule_IsValid(language, "tree_sitter.Language"):
            raise ValueError("not a tree-sitter grammar capsule")
        if len(kinds) != 65536:
            raise ValueError("kinds: a flag byte for each of 65536 node kinds")
        self.language = <const TSLanguage *>PyCapsule_GetPointer(language, "tree_sitter.Language")
        version = ts_language_abi_version(self.language)
        if version not in ABI_VERSIONS:
            raise ValueError(f"a grammar of ABI version {version}; this tree-sitter runtime "
                             f"reads {ABI_VERSIONS.start} to {ABI_VERSIONS.stop - 1}")
        self.parser = ts_parser_new()
        if not ts_parser_set_language(self.parser, self.language):
            raise ValueError(f"tree-sitter refused a grammar of ABI version {version}")
        if most_children < 1:
            raise ValueError("most_children: at least 1")
        self.most_children, self.keyword_nodes = most_children, keyword_nodes
        self.kinds = kinds
        self.flags = <const unsigned char *>PyBytes_AS_STRING(kinds)
        self.wrapping_count = len(wrapping)
        self.wrapping = <TSFieldId *>_grown(NULL, self.wrapping_count, sizeof(TSFieldId))
        for index in range(self.wrapping_count):
            self.wrapping[index] = wrapping[index]
        self.keywords = keywords
        self.keyword_lengths = 0
        for keyword in keywords:
            if not 0 < len(keyword) < 32:
                raise ValueError(f"a keyword of 1 to 31 bytes, not {keyword!r}")
            self.keyword_lengths |= (<uint32_t>1) << len(keyword)
        self.name_field = ts_language_field_id_for_name(self.language, "name", 4)
        self.declarator_field = ts_language_field_id_for_name(self.language, "declarator", 10)
        self.type_field = ts_language_field_id_for_name(self.language, "type", 4)
        self.body_field = ts_language_field_id_for_name(self.language, "body", 4)

    def __dealloc__(self):
        if self.parser != NULL:
            ts_parser_delete(self.parser)
        PyMem_Free(self.wrapping)

    def records(self, str text, list cuts, tuple fields, template, Py_ssize_t at_symbols,
                Py_ssize_t at_defines):
        """``Document.records`` of chunks that start at their cuts (no overlap), in code
        points without an ``embed_text`` prefix: ``fields``, those of the document's
        ``Outline``; each record a copy of ``template`` (a Chunk of the document's
        language) with its index, start, end, length and text, and its symbols and
        defines at the fields ``at_symbols`` and ``at_defines``."""
        cdef list starts, ends, code_ends, parents, symbols, qualified, chains, chain_ends
        cdef list made = []
        cdef Py_ssize_t count = len(cuts), length = len(text), width = len(template)
        cdef Py_ssize_t definitions, index, field, start, end, point, at, lo, first = 0
        cdef Py_ssize_t before = 0   # the definitions that start before the point
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        cdef tuple values, found, defaults = tuple(template)
        cdef list names
        starts, ends, code_ends, parents, symbols, qualified, chains, chain_ends = fields
        definitions = len(starts)
        record = type(template)
        for index in range(count):
            start = cuts[index]
            end = cuts[index + 1] if index + 1 < count else length
            lo = first   # defines: those that start in the chunk
            while lo < definitions and <Py_ssize_t>starts[lo] < start:
                lo += 1
            first = lo
            while first < definitions and <Py_ssize_t>starts[first] < end:
                first += 1
            point = start   # symbols: of those enclosing its first code point not white space
            while point < length and Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, point)):
                point += 1
            found = ()
            if point < length:
                while before < definitions and <Py_ssize_t>starts[before] < point:
                    before += 1
                at = before - 1
                while at >= 0 and <Py_ssize_t>ends[at] <= point:
                    at = parents[at]
                if at >= 0 and point < <Py_ssize_t>chain_ends[at]:
                    found = chains[at]
                elif at >= 0:
                    names = []
                    while at >= 0:
                        if point < <Py_ssize_t>code_ends[at]:
                            names.append(symbols[at])
                        at = parents[at]
                    names.reverse()
                    found = tuple(names)
            values = PyTuple_New(width)
            for field in range(width):
                item = defaults[field]
                Py_INCREF(item)
                PyTuple_SET_ITEM(values, field, item)
            _set(values, 0, index)
            _set(values, 1, start)
            _set(values, 2, end)
            _set(values, 3, end - start)
            _set(values, 4, text[start:end])
            _set(values, at_symbols, found)
            _set(values, at_defines, () if lo == first else tuple(qualified[lo:first]))
            made.append(tuple.__new__(record, values))
        return made

    def cut(self, str text, bytes data, Py_ssize_t size, leaf_starts, symbol):
        """The chunks' starts of ``text`` (``data``: it in UTF-8, surrogates passed)
        cut at ``size`` code points, and the fields of its ``Outline``.
        ``leaf_starts(start, end, size)``: the starts of a leaf over the size, cut;
        ``symbol(words, named)``: a definition's symbol from the words of its text up
        to its name's end (each once, one space between) or, without a name
        (``named`` false), of all its text."""
        cdef TSTree *tree
        cdef const char *bytes_ = PyBytes_AS_STRING(data)
        cdef uint32_t length = <uint32_t>PyBytes_GET_SIZE(data)
        if PyBytes_GET_SIZE(data) > 0xFFFFFFFF:
            raise ValueError("a source over 4 GiB")
        tree = ts_parser_parse_string(self.parser, NULL, bytes_, length)
        if tree == NULL:
            raise MemoryError("tree-sitter did not parse")
        try:
            return _Cut(self, text, data, size, leaf_starts, symbol).run_with(tree)
        finally:
            ts_tree_delete(tree)


cdef class _Cut:
    """The cutting of one document (``Document``'s twin)."""

    cdef CodeWalk walk
    cdef str text
    cdef int text_kind
    cdef void *text_data
    cdef Py_ssize_t text_length
    cdef bytes data
    cdef const unsigned char *bytes_
    cdef Py_ssize_t size
    cdef object leaf_starts, symbol
    cdef TSNode root
    cdef const unsigned char *flags
    cdef Py_ssize_t *points_at       # the code points before every 1 << STEP_BITS bytes
    cdef bint ascii
    cdef Py_ssize_t *cuts
    cdef Py_ssize_t cut_count, cut_room
    cdef Level *levels
    cdef Py_ssize_t level_count, level_room
    cdef _Ends ends

    def __cinit__(self, CodeWalk walk, str text, bytes data, Py_ssize_t size, leaf_starts,
                  symbol):
        self.walk = walk
        self.text = text
        self.text_kind = PyUnicode_KIND(text)
        self.text_data = PyUnicode_DATA(text)
        self.text_length = len(text)
        self.data = data
        self.bytes_ = <const unsigned char *>PyBytes_AS_STRING(data)
        self.size = size
        self.leaf_starts, self.symbol = leaf_starts, symbol
        self.flags = walk.flags
        self.ends = _Ends()
        self.ascii = len(text) == len(data)

    def __dealloc__(self):
        while self.level_count:
            self.popped()
        PyMem_Free(self.levels)
        PyMem_Free(self.cuts)
        PyMem_Free(self.points_at)

    # --- offsets -----------------------------------------------------------------------

    cdef int checkpoints(self) except -1:
        """The code points before every ``1 << STEP_BITS`` bytes (a text not ASCII)."""
        cdef Py_ssize_t length = len(self.data), steps = (length >> STEP_BITS) + 1
        cdef Py_ssize_t at, points = 0
        self.points_at = <Py_ssize_t *>_grown(NULL, steps, sizeof(Py_ssize_t))
        for at in range(length):
            if at & ((1 << STEP_BITS) - 1) == 0:
                self.points_at[at >> STEP_BITS] = points
            if self.bytes_[at] & 0xC0 != 0x80:
                points += 1
        if length & ((1 << STEP_BITS) - 1) == 0:
            self.points_at[length >> STEP_BITS] = points
        return 0

    cdef inline Py_ssize_t point(self, Py_ssize_t byte) noexcept:
        """The code point at a byte offset (a character's first byte)."""
        cdef Py_ssize_t at, points
        if self.ascii:
            return byte
        points = self.points_at[byte >> STEP_BITS]
        for at in range((byte >> STEP_BITS) << STEP_BITS, byte):
            if self.bytes_[at] & 0xC0 != 0x80:
                points += 1
        return points

    # --- text --------------------------------------------------------------------------

    cdef inline Py_UCS4 char_at(self, Py_ssize_t at) noexcept:
        return PyUnicode_READ(self.text_kind, self.text_data, at)

    cdef inline bint space_at(self, Py_ssize_t at) noexcept:
        return Py_UNICODE_ISSPACE(PyUnicode_READ(self.text_kind, self.text_data, at))

    cdef str words(self, Py_ssize_t start, Py_ssize_t end):
        """``" ".join(text[start:end].split())``."""
        cdef Py_UCS4 *joined = <Py_UCS4 *>_grown(NULL, end - start, sizeof(Py_UCS4))
        cdef Py_ssize_t length = 0, at
        cdef Py_UCS4 char
        cdef bint space = False
        try:
            for at in range(start, end):
                char = self.char_at(at)
                if Py_UNICODE_ISSPACE(char):
                    space = length > 0
                    continue
                if space:
                    joined[length] = 32
                    length += 1
                    space = False
                joined[length] = char
                length += 1
            return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, joined, length)
        finally:
            PyMem_Free(joined)

    cdef Py_ssize_t not_space(self, Py_ssize_t start, Py_ssize_t end) noexcept:
        """The first code point in ``[start, end)`` that is not white space; -1: none."""
        while start < end:
            if not self.space_at(start):
                return start
            start += 1
        return -1

    cdef Py_ssize_t find_line(self, Py_ssize_t start, Py_ssize_t end) noexcept:
        """``text.find("\\n", start, end)``."""
        while start < end:
            if self.char_at(start) == 10:
                return start
            start += 1
        return -1

    cdef Py_ssize_t rfind_line(self, Py_ssize_t start, Py_ssize_t end) noexcept:
        """``text.rfind("\\n", start, end)``."""
        end -= 1
        while end >= start:
            if self.char_at(end) == 10:
                return end
            end -= 1
        return -1

    # --- nodes -------------------------------------------------------------------------

    cdef inline bint is_leading(self, TSNode node) noexcept:
        return self.flags[ts_node_symbol(node)] & FLAG_LEADING

    cdef Py_ssize_t code_end(self, TSNode node) except -2:
        cdef Py_ssize_t end = -1, known, path_count = 0, path_room = 16, index
        cdef uintptr_t *path = <uintptr_t *>_grown(NULL, path_room, sizeof(uintptr_t))
        cdef uint32_t child_count
        cdef TSNode child
        try:
            while end < 0:
                known = self.ends.get(<uintptr_t>node.id)
                if known >= 0:
                    end = known
                    break
                if path_count == path_room:
                    path_room *= 2
                    path = <uintptr_t *>_grown(path, path_room, sizeof(uintptr_t))
                path[path_count] = <uintptr_t>node.id
                path_count += 1
                child_count = ts_node_child_count(node)
                if child_count == 0:
                    end = ts_node_end_byte(node)
                    break
                child = ts_node_child(node, child_count - 1)
                while not ts_node_is_null(child) and self.is_leading(child):
                    child = ts_node_prev_sibling(child)
                if ts_node_is_null(child):
                    end = ts_node_start_byte(node)
                    break
                node = child
            for index in range(path_count):
                self.ends.put(path[index], end)
        finally:
            PyMem_Free(path)
        return end

    cdef bint is_definition(self, Level *level, Piece *piece) noexcept:
        cdef TSNode node, inner
        cdef Py_ssize_t index
        if piece.count != 1:
            return False
        node = level.nodes[piece.first]
        if self.flags[ts_node_symbol(node)] & FLAG_DEFINITION:
            return True
        for index in range(self.walk.wrapping_count):
            inner = ts_node_child_by_field_id(node, self.walk.wrapping[index])
            if not ts_node_is_null(inner):
                return self.flags[ts_node_symbol(inner)] & FLAG_DEFINITION
        return False

    # --- levels ------------------------------------------------------------------------

    cdef Piece *room_for(self, Level *level, Py_ssize_t count) except NULL:
        """Room for ``count`` pieces in all (their contents kept)."""
        if count > level.piece_room:
            level.piece_room = max(count, 2 * level.piece_room)
            level.pieces = <Piece *>_grown(level.pieces, level.piece_room, sizeof(Piece))
        return level.pieces

    cdef int tiled(self, Level *level, Py_ssize_t first, Py_ssize_t after, Py_ssize_t start,
                   Py_ssize_t end) except -1:
        """``level.nodes[first:after]`` as the level's pieces from ``start`` to ``end``
        (``Document.tiled``; glued to their leading nodes if the level ``glue``\\s)."""
        cdef Group *groups = <Group *>_grown(NULL, after - first, sizeof(Group))
        cdef Py_ssize_t count = 0, index, run_start = 0, run = 0, before = -1
        cdef Py_ssize_t previous_end, next_start, line, low, bound, cut
        cdef TSNode node
        cdef Piece *pieces
        try:
            if not level.glue:
                for index in range(first, after):
                    groups[count].first, groups[count].count = index, 1
                    count += 1
            else:   # _glued
                for index in range(first, after):
                    node = level.nodes[index]
                    if run and ts_node_start_point(node).row > \
                            ts_node_end_point(level.nodes[index - 1]).row + 1:
                        for bound in range(run_start, run_start + run):
                            groups[count].first, groups[count].count = bound, 1
                            count += 1
                        run = 0
                    if self.is_leading(node):
                        if run or before < 0 or ts_node_start_point(node).row > \
                                ts_node_end_point(level.nodes[before]).row:
                            if not run:
                                run_start = index
                            run += 1
                        else:
                            groups[count].first, groups[count].count = index, 1
                            count += 1
                    elif run:
                        groups[count].first, groups[count].count = run_start, run + 1
                        count += 1
                        run = 0
                    else:
                        groups[count].first, groups[count].count = index, 1
                        count += 1
                    before = index
                for bound in range(run_start, run_start + run):
                    groups[count].first, groups[count].count = bound, 1
                    count += 1
            pieces = self.room_for(level, count)
            bound = start
            for index in range(count):
                pieces[index].first = groups[index].first
                pieces[index].count = groups[index].count
                pieces[index].start = bound
                if index + 1 == count:
                    break
                previous_end = self.point(ts_node_end_byte(
                    level.nodes[groups[index].first + groups[index].count - 1]))
                next_start = self.point(ts_node_start_byte(level.nodes[groups[index + 1].first]))
                low = previous_end - 1 if previous_end else 0
                line = self.rfind_line(low, next_start) + 1
                cut = next_start
                if line >= previous_end and (line == next_start
                                             or self.not_space(line, next_start) < 0):
                    cut = line
                bound = max(bound, cut)
                pieces[index].end = bound
            pieces[count - 1].end = end
            level.piece_count = count
        finally:
            PyMem_Free(groups)
        return 0

    cdef int next_batch(self, Level *level, Py_ssize_t start) except -1:
        """A node's level: its next ``most_children`` children, read with a cursor (a
        node's n-th child is found from its first), as its pieces, from ``start`` to
        where the batch after starts (``Document.level``, ``Document.batch_end``)."""
        cdef Py_ssize_t count = 0, end = level.end
        while count < self.walk.most_children and level.reading:
            level.nodes[count] = ts_tree_cursor_current_node(&level.cursor)
            count += 1
            level.reading = ts_tree_cursor_goto_next_sibling(&level.cursor)
        level.node_count = count
        if level.reading:
            end = self.point(ts_node_start_byte(ts_tree_cursor_current_node(&level.cursor)))
        self.tiled(level, 0, count, start, end)
        level.at = 0
        return 0

    cdef Level *pushed(self, Py_ssize_t end, int kind, bint definition) except NULL:
        """An empty level on the stack."""
        cdef Level *level
        if self.level_count == self.level_room:
            self.level_room = max(16, 2 * self.level_room)
            self.levels = <Level *>_grown(self.levels, self.level_room, sizeof(Level))
        level = &self.levels[self.level_count]
        memset(level, 0, sizeof(Level))
        self.level_count += 1
        level.kind, level.definition, level.end = kind, definition, end
        level.body_start = -1
        return level

    cdef void popped(self) noexcept:
        cdef Level *level = &self.levels[self.level_count - 1]
        PyMem_Free(level.nodes)
        PyMem_Free(level.pieces)
        if level.has_cursor:
            ts_tree_cursor_delete(&level.cursor)
        self.level_count -= 1

    cdef int pushed_node(self, TSNode node, Py_ssize_t start, Py_ssize_t end, int kind,
                         bint definition, bint header) except -1:
        """The level of a node's children, glued to their leading nodes."""
        cdef Level *level = self.pushed(end, kind, definition)
        cdef TSNode body
        cdef Py_ssize_t index
        level.glue = True
        level.header = header
        if definition:   # its body: by field ``body``, else the definition it wraps
            body = ts_node_child_by_field_id(node, self.walk.body_field)   # null if none
            index = 0
            while ts_node_is_null(body) and index < self.walk.wrapping_count:
                body = ts_node_child_by_field_id(node, self.walk.wrapping[index])
                index += 1
            if not ts_node_is_null(body):
                level.body_start = ts_node_start_byte(body)
        level.nodes = <TSNode *>_grown(NULL, min(<Py_ssize_t>ts_node_child_count(node),
                                                 self.walk.most_children), sizeof(TSNode))
        level.cursor = ts_tree_cursor_new(node)
        level.has_cursor = True
        level.reading = ts_tree_cursor_goto_first_child(&level.cursor)
        return self.next_batch(level, start)

    cdef int pushed_group(self, Level *level, Piece *piece, int kind, bint definition,
                          bint header) except -1:
        """The level of a piece's nodes (leading nodes and the node they lead), all at
        once."""
        cdef TSNode *nodes = <TSNode *>_grown(NULL, piece.count, sizeof(TSNode))
        cdef Py_ssize_t body_start = level.body_start
        memcpy(nodes, &level.nodes[piece.first], piece.count * sizeof(TSNode))
        try:
            level = self.pushed(piece.end, kind, definition)
        except BaseException:
            PyMem_Free(nodes)
            raise
        level.nodes, level.node_count = nodes, piece.count
        level.header, level.body_start = header, body_start
        return self.tiled(level, 0, piece.count, piece.start, piece.end)

    # --- cutting -----------------------------------------------------------------------

    cdef int add_cut(self, Py_ssize_t start) except -1:
        if self.cut_count == self.cut_room:
            self.cut_room = max(256, 2 * self.cut_room)
            self.cuts = <Py_ssize_t *>_grown(self.cuts, self.cut_room, sizeof(Py_ssize_t))
        self.cuts[self.cut_count] = start
        self.cut_count += 1
        return 0

    cdef inline bint fits(self, Py_ssize_t start, Py_ssize_t end) noexcept:
        return end - start <= self.size

    cdef Py_ssize_t furthest(self, Py_ssize_t start, Level *level, Py_ssize_t first) noexcept:
        cdef Py_ssize_t low = first, high = level.piece_count, middle
        cdef Py_ssize_t limit = start + self.size
        while low < high:
            middle = (low + high) // 2
            if limit < level.pieces[middle].end:
                high = middle
            else:
                low = middle + 1
        return low

    cdef bint has_code(self, Level *level, Py_ssize_t first, Py_ssize_t after) noexcept:
        cdef Py_ssize_t index
        cdef Piece *piece
        for index in range(after - 1, first - 1, -1):
            piece = &level.pieces[index]
            if piece.count > 1 or piece.count == 1 and \
                    not self.is_leading(level.nodes[piece.first]):
                return True
        return False

    cdef Py_ssize_t line_end(self, Piece *piece) noexcept:
        cdef Py_ssize_t found = self.not_space(piece.start, piece.end), line = -1
        if found >= 0:
            line = self.find_line(found, piece.end)
        if line >= 0:
            line = self.find_line(line + 1, piece.end)
        return piece.end if line < 0 else line + 1

    cdef Py_ssize_t closed(self, Py_ssize_t opened, Level *level, Py_ssize_t at,
                           bint alone) except -2:
        """``Document.closed``; -1: None."""
        cdef Py_ssize_t back = at, index
        cdef bint moved = False
        cdef Piece *pieces = level.pieces
        while back > 0 and pieces[back - 1].start > opened \
                and not self.has_code(level, back - 1, back):
            back -= 1
        while back < at and self.char_at(pieces[back].start - 1) != 10:
            back += 1
        if back < at:
            for index in range(back, at):
                if pieces[index].count:
                    moved = True
                    break
            moved = moved and self.fits(pieces[back].start, pieces[at].end if alone
                                        else self.line_end(&pieces[at]))
        self.add_cut(opened)
        return pieces[back].start if moved else -1

    cdef bint trimmed(self, Level *level, Py_ssize_t at, Py_ssize_t after) except -1:
        """``Document.trimmed`` (``after`` -1: None), done: the piece replaced by its
        content and the rest; False if its content does not fit either."""
        cdef Piece piece = level.pieces[at]
        cdef Py_ssize_t end = piece.end, first, start, count, choice
        cdef Py_ssize_t starts[2]
        cdef Piece *pieces
        if piece.count:
            end = min(piece.end, self.point(self.code_end(
                level.nodes[piece.first + piece.count - 1])))
        first = self.not_space(piece.start, end)
        if first < 0:
            return False
        while self.space_at(end - 1):
            end -= 1
        starts[0] = self.rfind_line(piece.start, first) + 1
        if starts[0] == 0:
            starts[0] = piece.start
        starts[1] = first
        for choice in range(2 if self.is_definition(level, &piece) else 1):
            start = starts[choice]
            if self.fits(start if after < 0 else after, end):
                count = 1 + (start > piece.start) + (end < piece.end)
                pieces = self.room_for(level, level.piece_count + count - 1)
                memmove(&pieces[at + count], &pieces[at + 1],
                        (level.piece_count - at - 1) * sizeof(Piece))
                level.piece_count += count - 1
                if start > piece.start:
                    pieces[at].start, pieces[at].end = piece.start, start
                    pieces[at].first, pieces[at].count = piece.first, 0
                    at += 1
                pieces[at].start, pieces[at].end = start, end
                pieces[at].first, pieces[at].count = piece.first, piece.count
                if end < piece.end:
                    at += 1
                    pieces[at].start, pieces[at].end = end, piece.end
                    pieces[at].first, pieces[at].count = piece.first, 0
                return True
        return False

    cdef Py_ssize_t cut_leaf(self, Py_ssize_t opened, Py_ssize_t start, Py_ssize_t end) \
            except -2:
        """``Document.cut_leaf`` (``opened`` -1: None)."""
        cdef list starts, first
        cdef Py_ssize_t room, after, index
        if opened < 0:
            starts = self.leaf_starts(start, end, self.size)
        elif self.fits(start, end):
            starts = [opened, start]
        else:
            starts = [opened]
            room = self.size - (start - opened)
            first = self.leaf_starts(start, end, room) if room > 0 else []
            after = first[1] if len(first) > 1 else end
            if first and self.not_space(start, after) >= 0 and self.fits(opened, after):
                start = after
            if start < end:
                starts += self.leaf_starts(start, end, self.size)
        for index in range(len(starts) - 1):
            self.add_cut(starts[index])
        return starts[len(starts) - 1]

    cdef Py_ssize_t cut(self) except -2:
        """``Document.cut`` from the file's level; -1: no chunk left open."""
        cdef Level *level
        cdef Piece piece
        cdef Py_ssize_t opened = -1, at, start, after
        cdef bint body = False, signature = False, alone, room, closing, definition, header
        cdef int kind
        cdef TSNode node
        while self.level_count:
            level = &self.levels[self.level_count - 1]
            at = level.at
            if at == level.piece_count and level.reading:
                self.next_batch(level, level.pieces[level.piece_count - 1].end)
                continue
            if at == level.piece_count:
                header = level.header
                self.popped()
                if self.level_count:
                    level = &self.levels[self.level_count - 1]
                    level.at += 1
                    if header:   # a header cut down is still signature
                        signature = True
                    else:
                        level.past = True
                        body = True
                continue
            start = level.pieces[at].start if opened < 0 else opened
            after = self.furthest(start, level, at)
            if after > at:
                opened, level.at = start, after
                if level.kind != CONSTRUCT:
                    body = body or self.has_code(level, at, after)
                elif level.past:
                    body = True
                elif level.definition or level.header:
                    signature = True
                continue
            piece = level.pieces[at]
            alone = opened >= 0 and self.fits(piece.start, piece.end)
            if self.trimmed(level, at, opened if alone else -1):
                continue
            room = alone or opened >= 0 and not self.fits(opened, self.line_end(&piece))
            if level.kind == CONTAINER:
                closing = body or room and not signature
            else:
                closing = room and (body or not signature)
            if opened >= 0 and closing:
                opened = self.closed(opened, level, at, alone)
                body = signature = False
                if alone:
                    continue
            # a definition's child before its body (parameters, decorators) is header
            header = level.header or piece.count > 0 and <Py_ssize_t>ts_node_start_byte(
                level.nodes[piece.first + piece.count - 1]) < level.body_start
            if piece.count > 1:
                self.pushed_group(level, &piece,
                                  GROUP if level.kind == CONTAINER else CONSTRUCT,
                                  level.definition, header)
                continue
            if piece.count == 1:
                node = level.nodes[piece.first]
                if ts_node_child_count(node):
                    definition = self.is_definition(level, &piece)
                    kind = CONTAINER if self.flags[ts_node_symbol(node)] & FLAG_CONTAINER \
                        else CONSTRUCT
                    self.pushed_node(node, piece.start, piece.end, kind, definition, header)
                    continue
            opened = self.cut_leaf(opened, piece.start, piece.end)
            if header:
                signature = True
            else:
                body = level.past = True
            level.at += 1
        return opened

    # --- outline -----------------------------------------------------------------------

    cdef Found *keyword_definitions(self, Py_ssize_t *count) except? NULL:
        """``Document.keyword_definitions``: NULL (with ``count`` -1) if the words are so
        many that visiting every node costs less."""
        cdef const unsigned char *bytes_ = self.bytes_
        cdef Py_ssize_t length = len(self.data), at = 0, word, found = 0, room = 64, words = 0
        cdef Py_ssize_t limit = ts_node_descendant_count(self.root)
        cdef Found *definitions
        cdef TSTreeCursor cursor
        cdef TSNode token, parent
        cdef bytes keyword
        cdef Py_ssize_t *spans = <Py_ssize_t *>_grown(NULL, 2 * room, sizeof(Py_ssize_t))
        try:
            while at < length:   # the whole words of ASCII letters, digits and _
                if not WORD_BYTES[bytes_[at]]:
                    at += 1
                    continue
                word = at
                while at < length and WORD_BYTES[bytes_[at]]:
                    at += 1
                if at - word >= 32 or \
                        not self.walk.keyword_lengths & ((<uint32_t>1) << (at - word)):
                    continue
                for keyword in self.walk.keywords:
                    if len(keyword) == at - word and \
                            _same_bytes(&bytes_[word], PyBytes_AS_STRING(keyword), at - word):
                        if words == room:
                            room *= 2
                            spans = <Py_ssize_t *>_grown(spans, 2 * room, sizeof(Py_ssize_t))
                        spans[2 * words], spans[2 * words + 1] = word, at
                        words += 1
                        break
            if words * self.walk.keyword_nodes > limit:
                count[0] = -1
                return NULL
            definitions = <Found *>_grown(NULL, words, sizeof(Found))
            cursor = ts_tree_cursor_new(self.root)
            try:
                for word in range(words):
                    # The node a descent from the root takes toward the word's first byte
                    # (the first child that ends past it, at each level), found from where
                    # the last word's left the cursor: the words come in order, and the
                    # nodes before that path's end before them.
                    while ts_node_end_byte(ts_tree_cursor_current_node(&cursor)) \
                            <= spans[2 * word]:
                        if not ts_tree_cursor_goto_next_sibling(&cursor) and \
                                not ts_tree_cursor_goto_parent(&cursor):
                            break
                    while ts_tree_cursor_goto_first_child_for_byte(&cursor,
                                                                   spans[2 * word]) >= 0:
                        pass
                    token = ts_tree_cursor_current_node(&cursor)
                    if ts_node_start_byte(token) != spans[2 * word] or ts_node_is_named(token) \
                            or ts_node_end_byte(token) != spans[2 * word + 1] \
                            or not ts_tree_cursor_goto_parent(&cursor):
                        continue
                    parent = ts_tree_cursor_current_node(&cursor)
                    if self.flags[ts_node_symbol(parent)] & FLAG_DEFINITION:
                        definitions[found].node = parent
                        found += 1
            finally:
                ts_tree_cursor_delete(&cursor)
        finally:
            PyMem_Free(spans)
        count[0] = found
        return definitions

    cdef Found *every_definition(self, Py_ssize_t *count) except NULL:
        """The named nodes of a definition's kind, every node visited in order (the
        query ``Document.outline`` makes): the subtrees, each child's symbol its alias
        in its parent's production where it has one, as a cursor sees them."""
        cdef const TSLanguage *language = self.walk.language
        cdef const TSTree *tree = self.root.tree
        cdef Py_ssize_t found = 0, room = 64, depth = 0, frames = 64
        cdef Found *definitions = <Found *>_grown(NULL, room, sizeof(Found))
        cdef Frame *stack = NULL
        cdef Frame *frame
        cdef const Subtree *child
        cdef Length position
        cdef TSSymbol alias, symbol
        cdef bint named
        try:
            stack = <Frame *>_grown(NULL, frames, sizeof(Frame))
            if self.flags[ts_node_symbol(self.root)] & FLAG_DEFINITION \
                    and ts_node_is_named(self.root):
                definitions[found].node = self.root
                found += 1
            child = <const Subtree *>self.root.id
            position.bytes = self.root.context[0]
            position.extent.row, position.extent.column = self.root.context[1], self.root.context[2]
            if ts_subtree_child_count(child[0]):
                stack[0].parent, stack[0].position = child[0], position
                stack[0].child = stack[0].structural = 0
                stack[0].aliases = ts_language_alias_sequence(
                    language, ts_subtree_production_id(child[0]))
                depth = 1
            while depth:
                frame = &stack[depth - 1]
                if frame.child == ts_subtree_child_count(frame.parent):
                    depth -= 1
                    continue
                child = &ts_subtree_children(frame.parent)[frame.child]
                position = frame.position
                alias = 0
                if not ts_subtree_extra(child[0]):
                    if frame.aliases != NULL:
                        alias = frame.aliases[frame.structural]
                    frame.structural += 1
                frame.position = length_add(position, ts_subtree_size(child[0]))
                frame.child += 1
                if frame.child < ts_subtree_child_count(frame.parent):
                    frame.position = length_add(frame.position, ts_subtree_padding(
                        ts_subtree_children(frame.parent)[frame.child]))
                if alias or ts_subtree_visible(child[0]):
                    symbol = ts_language_public_symbol(
                        language, alias if alias else ts_subtree_symbol(child[0]))
                    named = ts_language_symbol_metadata(language, alias).named if alias \
                        else ts_subtree_named(child[0])
                    if self.flags[symbol] & FLAG_DEFINITION and named:
                        if found == room:
                            room *= 2
                            definitions = <Found *>_grown(definitions, room, sizeof(Found))
                        definitions[found].node = ts_node_new(tree, child, position, alias)
                        found += 1
                if ts_subtree_child_count(child[0]):
                    if depth == frames:
                        frames *= 2
                        stack = <Frame *>_grown(stack, frames, sizeof(Frame))
                    frame = &stack[depth]
                    frame.parent, frame.position = child[0], position
                    frame.child = frame.structural = 0
                    frame.aliases = ts_language_alias_sequence(
                        language, ts_subtree_production_id(child[0]))
                    depth += 1
        except BaseException:
            PyMem_Free(definitions)
            raise
        finally:
            PyMem_Free(stack)
        count[0] = found
        return definitions

    cdef TSNode name_node(self, TSNode node) noexcept:
        """``_name_node``."""
        cdef TSNode name, inner
        cdef TSTreeCursor cursor
        if self.walk.name_field:
            name = ts_node_child_by_field_id(node, self.walk.name_field)
            if not ts_node_is_null(name):
                return name
        if self.walk.declarator_field:
            name = ts_node_child_by_field_id(node, self.walk.declarator_field)
            if not ts_node_is_null(name):
                inner = ts_node_child_by_field_id(name, self.walk.declarator_field)
                while not ts_node_is_null(inner):
                    name = inner
                    inner = ts_node_child_by_field_id(name, self.walk.declarator_field)
                return name
        if self.walk.type_field:
            name = ts_node_child_by_field_id(node, self.walk.type_field)
            if not ts_node_is_null(name):
                return name
        cursor = ts_tree_cursor_new(node)
        name = ts_node_child_by_field_id(node, 0)   # a null node
        if self.walk.name_field and ts_tree_cursor_goto_first_child(&cursor):
            while True:
                inner = ts_tree_cursor_current_node(&cursor)
                if ts_node_is_named(inner):
                    name = ts_node_child_by_field_id(inner, self.walk.name_field)
                    if not ts_node_is_null(name):
                        break
                if not ts_tree_cursor_goto_next_sibling(&cursor):
                    break
        ts_tree_cursor_delete(&cursor)
        return name

    cdef tuple outline(self):
        """``Document.outline``: the fields of its ``Outline``, in code points."""
        cdef Py_ssize_t count = -1, index, depth = 0, start, end, parent
        cdef Found *found = NULL
        cdef Py_ssize_t *enclosing = NULL
        cdef list starts, ends, code_ends, parents, symbols, qualified, chains, chain_ends
        cdef TSNode name
        cdef str symbol
        if self.walk.keywords and not ts_node_has_error(self.root):
            found = self.keyword_definitions(&count)
        if count < 0:
            found = self.every_definition(&count)
        try:
            for index in range(count):
                found[index].start = ts_node_start_byte(found[index].node)
                found[index].end = ts_node_end_byte(found[index].node)
                found[index].order = index
            qsort(found, count, sizeof(Found), _by_start)
            starts, ends, code_ends, parents, symbols = [], [], [], [], []
            qualified, chains, chain_ends = [], [], []
            enclosing = <Py_ssize_t *>_grown(NULL, count, sizeof(Py_ssize_t))
            for index in range(count):
                while depth and found[enclosing[depth - 1]].end <= found[index].start:
                    depth -= 1
                parent = enclosing[depth - 1] if depth else -1
                enclosing[depth] = index
                depth += 1
                start = self.point(found[index].start)
                starts.append(start)
                ends.append(self.point(found[index].end))
                code_ends.append(self.point(self.code_end(found[index].node)))
                parents.append(parent)
                name = self.name_node(found[index].node)
                end = ends[index] if ts_node_is_null(name) \
                    else self.point(ts_node_end_byte(name))
                symbol = self.symbol(self.words(start, end), not ts_node_is_null(name))
                symbols.append(symbol)
                if parent < 0:   # Outline.made
                    qualified.append(symbol)
                    chains.append((symbol,))
                    chain_ends.append(code_ends[index])
                else:
                    qualified.append(qualified[parent] + " > " + symbol)
                    chains.append(chains[parent] + (symbol,))
                    chain_ends.append(min(chain_ends[parent], code_ends[index]))
        finally:
            PyMem_Free(found)
            PyMem_Free(enclosing)
        return starts, ends, code_ends, parents, symbols, qualified, chains, chain_ends

    cdef tuple run_with(self, TSTree *tree):
        """``Document.chunks`` up to the records: the cuts and the outline."""
        cdef Py_ssize_t opened, index
        self.root = ts_tree_root_node(tree)
        if not self.ascii:
            self.checkpoints()
        if ts_node_child_count(self.root):
            self.pushed_node(self.root, 0, self.text_length, CONTAINER, False, False)
            opened = self.cut()
        else:
            opened = self.cut_leaf(-1, 0, self.text_length)
        if opened >= 0:
            self.add_cut(opened)
        cuts = [self.cuts[index] for index in range(self.cut_count)]
        return cuts, self.outline()


#: Whether each byte is one of a word to a bytes pattern's ``\\b``: an ASCII letter,
#: digit or _.
cdef unsigned char WORD_BYTES[256]
for _byte in range(256):
    WORD_BYTES[_byte] = chr(_byte).isascii() and (chr(_byte).isalnum() or _byte == 95)


cdef inline void _set(tuple values, Py_ssize_t field, object value):
    """A field of a tuple being made: the template's item replaced."""
    cdef PyObject *template = PyTuple_GET_ITEM(values, field)
    Py_INCREF(value)
    PyTuple_SET_ITEM(values, field, value)
    Py_XDECREF(template)


cdef inline bint _same_bytes(const unsigned char *left, const char *right,
                             Py_ssize_t length) noexcept nogil:
    """Whether ``length`` bytes are equal."""
    cdef Py_ssize_t index
    for index in range(length):
        if left[index] != <unsigned char>right[index]:
            return False
    return True
