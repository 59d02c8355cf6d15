# cython: language_level=3, cdivision=True
"""The compiled window strategies: units (graphemes, words, sentences, Markdown
sections) scanned on a stream, and windows of ``size`` units made from them.

Why a scanner can run on a stream and give the same units however the text is cut:
each unit rule decides a boundary from what lies *before* it plus at most one
character after it, so a left-to-right state machine that keeps that little context
between pieces sees exactly what a pass over the whole text sees.

* Graphemes: the boundary between two code points depends on their properties and on
  three facts about what precedes them (UAX #29): the parity of the run of regional
  indicators (GB12/13), whether an ``Extended_Pictographic Extend* ZWJ`` sequence just
  ended (GB11), and whether a run of ``InCB=Extend``/``Linker`` code points holding a
  Linker just ended (GB9c). Those are three small integers carried from piece to
  piece; a cluster ends only when the next code point arrives (a ``\\r`` waits for a
  possible ``\\n``). The properties come from a table built from the pinned ``regex``
  module, so that the rules and the oracle (``regex``'s ``\\X``) share one Unicode
  version. ``regex`` applies GB9c without requiring the ``InCB=Consonant`` before the
  Linker (``a\\u094d\\u0937`` is one cluster); chunkd follows it, as it is the oracle.
* Words: a word ends at the first white or CJK code point after it, a CJK code point
  is a word alone: one code point of context.
* Sentences: a line is read left to right; a run of terminal marks and its closing
  marks is pending until the next code point shows what follows it (white space, the
  end of the line, or more text). The unit in progress ends at the latest at its line's
  ``\\n``.
* Sections: ``SectionScanner`` reads line by line, keeping only the state of the line
  in hand (indent, run of ``#`` or fence characters, the heading's text) and the fence
  that is open; a section start is reported once its heading line is complete (or
  once its title is certain to be longer than ``HEADING_LIMIT``, so that a heading
  line of any length streams). It
  holds no text but the start of a heading's title (its first ``HEADING_LIMIT + 1``
  code points, whatever the line's length), so other strategies (the recursive
  splitter run inside each section) can use it on a stream.

Windows: the units of the window in progress are kept in a queue (start and end
offsets); when it holds ``size`` units, the window is emitted and the first
``size - overlap`` units leave. The text buffer starts at the first unit the queue (or
the scanner) still needs, so memory is bounded by the largest window and the unit in
progress, not by the document. At the end the last window is emitted if it holds a
unit the previous window did not.
"""

cimport cython
from libc.stdlib cimport free, malloc
from cpython.unicode cimport PyUnicode_Substring

from chunkd.kernel._core cimport (PyUnicode_DATA, PyUnicode_KIND, PyUnicode_READ, Spans, TextStream,
                           find_newline, is_white, spans_drop, spans_free, spans_push)

from chunkd.model.chunk import OPTIONAL_FIELDS
from chunkd.kernel.splitting import check_window

#: The most code points a heading keeps in a heading path: a longer one is cut (see
#: ``cut_heading``), so that a record's path, at most six headings deep, stays small
#: whatever the document's heading lines.
cdef Py_ssize_t HEADING_CODE_POINTS = 256
HEADING_LIMIT = HEADING_CODE_POINTS
#: What ends a heading that was cut.
ELLIPSIS = "\u2026"
#: The optional fields after ``headings`` (``parent``, ...), None in a window's chunk.
_AFTER_HEADINGS = (None,) * (len(OPTIONAL_FIELDS) - OPTIONAL_FIELDS.index("headings") - 1)


# --- code point classes --------------------------------------------------------------

cdef inline bint is_cjk(Py_UCS4 c) noexcept nogil:
    """The contract's CJK ranges (a word alone, 1.05 estimated tokens)."""
    if c < 0x1100:
        return False
    if c < 0x2E80:
        return c <= 0x11FF
    if c < 0xA960:   # 2E80-2FFF, 3001-303F, 3040-31FF, 3200-4DBF, 4E00-9FFF
        return (c <= 0x4DBF and c != 0x3000) or 0x4E00 <= c <= 0x9FFF
    if c <= 0xA97F:
        return True
    if c < 0xF900:
        return 0xAC00 <= c <= 0xD7FF
    if c < 0xFE30:
        return c <= 0xFAFF
    if c < 0xFF00:
        return c <= 0xFE4F
    if c <= 0xFFEF:
        return True
    return 0x20000 <= c <= 0x3FFFF


cdef enum Terminal:
    NOT_TERMINAL = 0
    ASCII_TERMINAL = 1
    FULL_WIDTH_TERMINAL = 2


cdef inline Terminal terminal_mark(Py_UCS4 c) noexcept nogil:
    if c == 0x2E or c == 0x21 or c == 0x3F:                     # . ! ?
        return ASCII_TERMINAL
    if c == 0x3002 or c == 0xFF01 or c == 0xFF1F or c == 0xFF0E or c == 0xFF61:
        return FULL_WIDTH_TERMINAL                               # 。！？．｡
    return NOT_TERMINAL


cdef inline bint is_closing_mark(Py_UCS4 c) noexcept nogil:
    if c < 0x80:                                                # " ' ) ] }
        return c == 0x22 or c == 0x27 or c == 0x29 or c == 0x5D or c == 0x7D
    return (c == 0x201D or c == 0x2019 or c == 0x300D or c == 0x300F or c == 0xFF09
            or c == 0x3011 or c == 0x300B or c == 0x3009)       # ” ’ 」 』 ） 】 》 〉


cdef Py_ssize_t estimated_tokens(int kind, void* data, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """``ceil(1.05 * CJK + other / 4)`` over [lo, hi), in integers."""
    cdef Py_ssize_t cjk = 0, i
    if kind != 1:                       # one-byte text has no CJK code point
        for i in range(lo, hi):
            if is_cjk(PyUnicode_READ(kind, data, i)):
                cjk += 1
    return (105 * cjk + 25 * (hi - lo - cjk) + 99) // 100


# --- grapheme cluster properties ------------------------------------------------------

#: Grapheme_Cluster_Break values in the low four bits of a property byte (Other is 0).
GRAPHEME_BREAK_VALUES = ("CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator",
                         "Prepend", "SpacingMark", "L", "V", "T", "LV", "LVT")
#: Indic_Conjunct_Break values in bits 4 and 5 (None is 0).
CONJUNCT_BREAK_VALUES = ("Consonant", "Extend", "Linker")
cdef enum:
    PICTOGRAPHIC = 64
#: Extended_Pictographic is bit 6.
PICTOGRAPHIC_BIT = PICTOGRAPHIC

cdef enum GraphemeBreak:
    GB_OTHER = 0
    GB_CR = 1
    GB_LF = 2
    GB_CONTROL = 3
    GB_EXTEND = 4
    GB_ZWJ = 5
    GB_RI = 6
    GB_PREPEND = 7
    GB_SPACING_MARK = 8
    GB_L = 9
    GB_V = 10
    GB_T = 11
    GB_LV = 12
    GB_LVT = 13

cdef enum ConjunctBreak:
    INCB_NONE = 0
    INCB_CONSONANT = 1
    INCB_EXTEND = 2
    INCB_LINKER = 3


# --- windows --------------------------------------------------------------------------

cdef class _Windows(TextStream):
    """Windows of ``size`` units, ``overlap`` of them shared by neighbours; a subclass
    scans the units (``scan``) and hands each to ``add_unit``."""
    cdef readonly Py_ssize_t size, overlap
    cdef Py_ssize_t step
    cdef Py_ssize_t scan_pos      # document offset up to which the scanner has read
    cdef Spans units              # the units of the window in progress
    cdef Py_ssize_t covered       # queued units the previous window already holds
    cdef list tags                # sections: the headings of each queued unit

    def __cinit__(self, Py_ssize_t size, Py_ssize_t overlap, *args, **kwargs):
        """Checked here, so that no instance (not even one made with ``__new__``)
        exists half-built."""
        check_window(size, overlap)
        self.size = size
        self.overlap = overlap
        self.step = size - overlap
        self.start_document()

    def __dealloc__(self):
        spans_free(&self.units)

    cdef void start_document(self) noexcept:
        TextStream.start_document(self)
        self.scan_pos = 0
        self.units.head = self.units.count = self.covered = 0
        if self.tags is not None:
            self.tags = []

    cdef Py_ssize_t needed_from(self) except -1:
        """The lowest document offset a window or the scanner still reads."""
        cdef Py_ssize_t need = self.scanner_needs()
        if self.units.count:
            need = min(need, self.units.start[self.units.head])
        return need

    cdef int advance(self, bint final) except -1:
        """Scan the text; at the end, emit the last window if it holds a unit the
        previous one did not."""
        self.scan(final)
        if final and self.units.count > self.covered:
            self.emit(self.units.count)
        return 0

    cdef int scan(self, bint final) except -1:
        """Read ``buf`` from ``scan_pos`` on; ``final``: the document ends there."""
        raise NotImplementedError("a window strategy scans its own units")

    cdef Py_ssize_t scanner_needs(self):
        """The lowest document offset the scanner still reads (a unit in progress)."""
        return self.scan_pos

    @cython.final
    cdef int add_unit(self, Py_ssize_t start, Py_ssize_t end) except -1:
        """The next unit is document[start:end]; a full window is emitted."""
        spans_push(&self.units, start, end, 1)
        if self.units.count == self.size:
            self.emit(self.size)
            spans_drop(&self.units, self.step)
            self.covered = self.overlap
            if self.tags is not None:
                del self.tags[:self.step]
        return 0

    @cython.final
    cdef int emit(self, Py_ssize_t count) except -1:
        """The window of the first ``count`` queued units, trimmed of white space at
        both ends; none if it is all white."""
        cdef Py_ssize_t first = self.units.head, last = self.units.head + count - 1
        cdef Py_ssize_t lo = self.units.start[first] - self.base
        cdef Py_ssize_t hi = self.units.end[last] - self.base
        if not self.strip(&lo, &hi):
            return 0
        # The length: the units that overlap the trimmed range.
        while first < last and self.units.end[first] - self.base <= lo:
            first += 1
        while last > first and self.units.start[last] - self.base >= hi:
            last -= 1
        headings = None if self.tags is None else self.tags[0]
        return self.add_chunk(lo + self.base, hi + self.base, last - first + 1,
                              PyUnicode_Substring(self.buf, lo, hi),
                              (None, estimated_tokens(PyUnicode_KIND(self.buf),
                                                      PyUnicode_DATA(self.buf), lo, hi),
                               headings) + _AFTER_HEADINGS)


cdef class GraphemeWindows(_Windows):
    """Windows of extended grapheme clusters, as the ``regex`` module's ``\\X`` gives
    them; ``properties`` has one byte per code point (see ``GRAPHEME_BREAK_VALUES``,
    ``CONJUNCT_BREAK_VALUES`` and ``PICTOGRAPHIC_BIT``)."""
    cdef bytes _properties_ref
    cdef const unsigned char* properties
    cdef Py_ssize_t cluster_start     # -1: no cluster in progress (document start)
    cdef unsigned char previous       # Grapheme_Cluster_Break of the last code point
    cdef bint odd_regional            # an odd run of regional indicators just ended
    cdef int pictographic             # 1: ExtPict Extend* just ended, 2: ... ZWJ
    cdef bint linked                  # a run of InCB Extend/Linker with a Linker just ended

    def __cinit__(self, Py_ssize_t size, Py_ssize_t overlap, bytes properties not None):
        if len(properties) != 0x110000:
            raise ValueError("properties must have one byte per code point")
        self._properties_ref = properties
        self.properties = properties
        self.cluster_start = -1

    cdef void start_document(self) noexcept:
        _Windows.start_document(self)
        self.cluster_start = -1

    cdef Py_ssize_t scanner_needs(self):
        return self.scan_pos if self.cluster_start < 0 else self.cluster_start

    cdef int scan(self, bint final) except -1:
        cdef str text = self.buf
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef const unsigned char* properties = self.properties
        cdef Py_ssize_t i = self.scan_pos - self.base, n = len(text), base = self.base
        # The state in locals (registers) while the loop runs.
        cdef Py_ssize_t start = self.cluster_start
        cdef unsigned char previous = self.previous, p, g, conjunct
        cdef bint odd_regional = self.odd_regional, linked = self.linked, pictographic
        cdef int emoji = self.pictographic
        for i in range(i, n):
            p = properties[PyUnicode_READ(kind, data, i)]
            if p == 0 and previous == GB_OTHER and start >= 0:
                # Two plain code points (most text): a boundary, and no context.
                self.add_unit(start, i + base)
                start = i + base
                odd_regional = linked = False
                emoji = 0
                continue
            g = p & 15
            conjunct = (p >> 4) & 3
            pictographic = p & PICTOGRAPHIC
            if start < 0:
                start = i + base
            elif not _no_break(previous, g, conjunct, pictographic, odd_regional, emoji, linked):
                self.add_unit(start, i + base)
                start = i + base
            # The context the next boundary needs.
            odd_regional = g == GB_RI and not odd_regional
            if pictographic:
                emoji = 1
            elif emoji == 1 and g == GB_ZWJ:
                emoji = 2
            elif not (emoji == 1 and g == GB_EXTEND):
                emoji = 0
            if conjunct == INCB_LINKER:
                linked = True
            elif conjunct != INCB_EXTEND:
                linked = False
            previous = g
        self.previous, self.odd_regional, self.linked = previous, odd_regional, linked
        self.pictographic = emoji
        self.scan_pos = n + base
        if final and start >= 0:
            self.add_unit(start, self.scan_pos)
            start = -1
        self.cluster_start = start
        return 0


cdef inline bint _no_break(unsigned char before, unsigned char after, unsigned char conjunct,
                           bint pictographic, bint odd_regional, int emoji,
                           bint linked) noexcept nogil:
    """UAX #29's rules GB3 to GB13 between two code points (GB999 otherwise)."""
    if before == GB_CR and after == GB_LF:                                      # GB3
        return True
    if before == GB_CR or before == GB_LF or before == GB_CONTROL:              # GB4
        return False
    if after == GB_CR or after == GB_LF or after == GB_CONTROL:                 # GB5
        return False
    if before == GB_L and (after == GB_L or after == GB_V or after == GB_LV or after == GB_LVT):
        return True                                                             # GB6
    if (before == GB_LV or before == GB_V) and (after == GB_V or after == GB_T):
        return True                                                             # GB7
    if (before == GB_LVT or before == GB_T) and after == GB_T:                  # GB8
        return True
    if after == GB_EXTEND or after == GB_ZWJ or after == GB_SPACING_MARK:       # GB9, 9a
        return True
    if before == GB_PREPEND:                                                    # GB9b
        return True
    if conjunct == INCB_CONSONANT and linked:                       # GB9c
        return True
    if pictographic and before == GB_ZWJ and emoji == 2:                        # GB11
        return True
    return before == GB_RI and after == GB_RI and odd_regional                  # GB12, 13


cdef class WordWindows(_Windows):
    """Windows of words: a maximal run of non-white code points that are not CJK, or
    one CJK code point alone."""
    cdef Py_ssize_t word_start        # -1: between words

    def __cinit__(self, Py_ssize_t size, Py_ssize_t overlap):
        self.word_start = -1

    cdef void start_document(self) noexcept:
        _Windows.start_document(self)
        self.word_start = -1

    cdef Py_ssize_t scanner_needs(self):
        return self.scan_pos if self.word_start < 0 else self.word_start

    cdef int scan(self, bint final) except -1:
        cdef str text = self.buf
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t i = self.scan_pos - self.base, n = len(text), base = self.base
        cdef Py_ssize_t start = self.word_start
        cdef Py_UCS4 c
        for i in range(i, n):
            c = PyUnicode_READ(kind, data, i)
            if is_white(c):
                if start >= 0:
                    self.add_unit(start, i + base)
                    start = -1
            elif is_cjk(c):
                if start >= 0:
                    self.add_unit(start, i + base)
                    start = -1
                self.add_unit(i + base, i + base + 1)
            elif start < 0:
                start = i + base
        self.scan_pos = n + base
        if final and start >= 0:
            self.add_unit(start, self.scan_pos)
            start = -1
        self.word_start = start
        return 0


cdef enum SentenceState:
    IN_TEXT              # no terminal run pending
    IN_TERMINAL_RUN      # after a terminal mark
    IN_CLOSING_MARKS     # after a terminal run and closing marks


cdef class SentenceWindows(_Windows):
    """Windows of sentences, line by line: a sentence ends after a run of terminal
    marks and the closing marks after it, when white space or the line's end follows
    (a run with a full-width mark ends it whatever follows); the text after a line's
    last sentence is a unit too."""
    cdef Py_ssize_t unit_start        # -1: no unit in progress
    cdef Py_ssize_t unit_end          # the end of its last non-white code point
    cdef SentenceState state
    cdef bint full_width              # the pending terminal run has a full-width mark

    def __cinit__(self, Py_ssize_t size, Py_ssize_t overlap):
        self.unit_start = -1

    cdef void start_document(self) noexcept:
        _Windows.start_document(self)
        self.unit_start = -1
        self.state = IN_TEXT

    cdef Py_ssize_t scanner_needs(self):
        return self.scan_pos if self.unit_start < 0 else self.unit_start

    cdef int scan(self, bint final) except -1:
        cdef str text = self.buf
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t i = self.scan_pos - self.base, n = len(text), base = self.base
        # The state in locals (registers) while the loop runs.
        cdef Py_ssize_t start = self.unit_start, end = self.unit_end
        cdef SentenceState state = self.state
        cdef bint full_width = self.full_width
        cdef Py_UCS4 c
        cdef Terminal mark
        for i in range(i, n):
            c = PyUnicode_READ(kind, data, i)
            if state == IN_TEXT and start >= 0 and 0x40 <= c <= 0x7E and c != 0x5D and c != 0x7D:
                end = i + base + 1          # an ASCII letter in a sentence (most text)
                continue
            if is_white(c):
                # White space, or the line's end, after a pending run ends the sentence.
                if state != IN_TEXT or c == 10:
                    if start >= 0:
                        self.add_unit(start, end)
                        start = -1
                    state = IN_TEXT
                continue
            mark = terminal_mark(c)
            if state != IN_TEXT and mark == NOT_TERMINAL and is_closing_mark(c):
                state = IN_CLOSING_MARKS        # closing marks join the pending run
            elif state == IN_TERMINAL_RUN and mark != NOT_TERMINAL:
                full_width = full_width or mark == FULL_WIDTH_TERMINAL
            else:
                # Anything else after a pending run: a full-width run has ended the
                # sentence, an ASCII one (3.14, file.txt) has not.
                if state != IN_TEXT and full_width and start >= 0:
                    self.add_unit(start, end)
                    start = -1
                state = IN_TEXT if mark == NOT_TERMINAL else IN_TERMINAL_RUN
                full_width = mark == FULL_WIDTH_TERMINAL
            if start < 0:
                start = i + base
            end = i + base + 1
        self.scan_pos = n + base
        if final:
            if start >= 0:
                self.add_unit(start, end)
                start = -1
            state = IN_TEXT
        self.unit_start, self.unit_end, self.state, self.full_width = start, end, state, full_width
        return 0


# --- Markdown sections ----------------------------------------------------------------

cdef enum LinePhase:
    LINE_INDENT        # up to three spaces read
    LINE_HASHES        # the opening run of #
    LINE_HASHES_CR     # a \r right after the #s: a heading only if \n follows
    LINE_HEADING       # a heading line's text
    LINE_FENCE_RUN     # a run of ` or ~ after the indent
    LINE_FENCE_TAIL    # white space after a run that may close the open fence
    LINE_REST          # the rest of a line that is no heading


def cut_heading(str text not None, Py_ssize_t keep):
    """``text`` cut at its last grapheme boundary (the pinned ``regex`` module's
    ``\\X``) at or before ``keep`` code points, then "…"."""
    import regex

    end = 0
    # A boundary at ``keep`` is decided by the code point after it, so one more is read.
    for cluster in regex.finditer(r"\X", text[:keep + 1]):
        if cluster.end() > keep:
            break
        end = cluster.end()
    return text[:end] + ELLIPSIS


cdef class SectionScanner:
    """Markdown section starts and heading paths, as text streams in (no windows).

    ``feed(text)`` returns the sections that start in the text read so far and were
    not reported yet, in order, as ``(offset, headings)``: the document offset of the
    section's first code point and the texts of its enclosing headings, outermost
    first, its own included (``()`` for the text before the first heading). A heading's
    section is reported when its line is complete, or as soon as its title is certain
    to be longer than ``HEADING_LIMIT`` (what follows cannot change the cut title):
    every heading's section that starts before ``settled`` has been reported. The text before the first heading is reported
    (at offset 0, before any other) as soon as a non-white code point outside a heading
    line shows that it is not only white space; until some section has been reported,
    the text read is white space (or a byte-order mark), but for a line in hand that
    may be a heading.
    ``finish()`` ends the document and readies the scanner for the next one.

    A section starts at an ATX heading line (0-3 spaces, 1-6 ``#``, then a space, a
    tab or the line's end) outside fenced code (0-3 spaces then 3 or more backticks or
    tildes; closed by a line of 0-3 spaces, at least as many of the same character,
    then only white space). Lines end after ``\\n``. A U+FEFF at the document's very
    start (a byte-order mark) is skipped: the first line is read after it, though its
    section's offset counts it. A heading longer than ``HEADING_LIMIT`` code points is
    cut (``cut_heading``).
    """
    cdef readonly Py_ssize_t position      # document offset of the next code point
    cdef Py_ssize_t line_start
    cdef LinePhase phase
    cdef Py_ssize_t count                 # spaces, #s or fence characters on the line
    cdef Py_ssize_t hashes
    cdef Py_UCS4 run_char
    cdef Py_UCS4 fence_char               # 0: no fence open
    cdef Py_ssize_t fence_length
    # The heading line's text after its #s, as far as its title needs it: code points
    # read, the first and after the last that are not white space, where the last run
    # of # began (-1: the last of them is no #), the code point before that run and
    # where the text before it ends, the last code point read; and the pieces from the
    # first code point that is not white space, HEADING_LIMIT + 1 of them at most;
    # whether its section was reported before the line's end (its title is too long to
    # depend on the rest).
    cdef Py_ssize_t h_read, h_first, h_last, h_run, h_before_run_end
    cdef Py_UCS4 h_before_run, h_previous
    cdef list heading_text
    cdef bint h_reported
    cdef list levels                      # the enclosing headings' levels and texts
    cdef list titles
    cdef bint started                     # a section has been reported
    cdef bint marked                      # the document begins with a byte-order mark
    cdef list events

    def __cinit__(self):
        self.start_document()

    cdef void start_document(self) noexcept:
        self.position = self.line_start = 0
        self.phase = LINE_INDENT
        self.count = self.hashes = 0
        self.fence_char = 0
        self.start_heading()
        self.levels = []
        self.titles = []
        self.started = False
        self.marked = False
        self.events = []

    def feed(self, str text not None):
        """Read the next piece of the document; return the sections now known."""
        self.scan(text, 0)
        events, self.events = self.events, []
        return events

    def finish(self):
        """End the document; return the last sections known."""
        self.end()
        events = self.events
        self.start_document()
        return events

    @property
    def settled(self):
        """Every section that starts before this document offset has been reported."""
        return self.settled_offset()

    cdef Py_ssize_t settled_offset(self) noexcept:
        if self.phase == LINE_REST or self.phase == LINE_FENCE_RUN \
                or self.phase == LINE_FENCE_TAIL or self.fence_char:
            return self.position            # the line in hand is no heading
        if self.phase == LINE_HEADING and self.h_reported:
            return self.position            # a heading already reported
        return self.line_start

    cdef int content(self) except -1:
        """A non-white code point outside heading lines: the text before the first
        heading, if this is it, is a section."""
        if not self.started:
            self.started = True
            self.events.append((0, ()))
        return 0

    cdef int scan(self, str text, Py_ssize_t i) except -1:
        """Read ``text[i:]``, the document from offset ``position`` on."""
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t n = len(text), offset = self.position - i, at, heading_from
        cdef Py_UCS4 c
        heading_from = i if self.phase == LINE_HEADING else -1
        if offset + i == 0 and i < n and PyUnicode_READ(kind, data, i) == 0xFEFF:
            i += 1       # a byte-order mark: in the offsets, but no part of the first line
            self.marked = True
        while i < n:
            if self.phase == LINE_REST and self.started:
                at = find_newline(kind, data, i, n)   # the common case: skip the line
                if at < 0:
                    break
                i = at
            elif self.phase == LINE_HEADING:
                at = find_newline(kind, data, i, n)
                if at < 0:
                    break
                self.heading_part(text, heading_from, at)
                heading_from = -1
                i = at
            c = PyUnicode_READ(kind, data, i)
            if c == 10:
                self.end_line()
                self.line_start = i + 1 + offset
            elif self.phase == LINE_INDENT:
                if c == 32 and self.count < 3:
                    self.count += 1
                elif c == 35 and not self.fence_char:                   # #
                    self.phase = LINE_HASHES
                    self.hashes = 1
                elif (c == 96 or c == 126) and (not self.fence_char or c == self.fence_char):
                    self.phase = LINE_FENCE_RUN                        # ` or ~
                    self.run_char = c
                    self.count = 1
                    self.content()
                else:
                    self.rest(c)
            elif self.phase == LINE_HASHES:
                if c == 35 and self.hashes < 6:
                    self.hashes += 1
                elif c == 32 or c == 9:
                    self.phase = LINE_HEADING
                    heading_from = i
                elif c == 13:
                    self.phase = LINE_HASHES_CR
                else:
                    self.rest(c)
            elif self.phase == LINE_HASHES_CR:
                self.rest(c)                                            # \r then not \n
            elif self.phase == LINE_FENCE_RUN:
                if c == self.run_char:
                    self.count += 1
                elif self.fence_char and self.count >= self.fence_length and is_white(c):
                    self.phase = LINE_FENCE_TAIL
                else:
                    self.end_fence_run(False)
                    self.phase = LINE_REST
            elif self.phase == LINE_FENCE_TAIL:
                if not is_white(c):
                    self.phase = LINE_REST
            else:                                # LINE_REST before the first section
                if not is_white(c):
                    self.content()
            i += 1
        if heading_from >= 0 and heading_from < n:
            self.heading_part(text, heading_from, n)
        self.position = n + offset
        return 0

    cdef int rest(self, Py_UCS4 c) except -1:
        """The line in hand is no heading (nor fence); ``c`` is its code point in hand."""
        self.phase = LINE_REST
        if self.hashes or not is_white(c):
            self.content()
        return 0

    cdef int end_fence_run(self, bint line_ends) except -1:
        """A run of fence characters ended: it may open a fence, or close the open one
        if only white space followed it to the line's end."""
        if self.count < 3:
            return 0
        if not self.fence_char:
            self.fence_char = self.run_char
            self.fence_length = self.count
        elif line_ends and self.count >= self.fence_length:
            self.fence_char = 0
        return 0

    cdef int end_line(self) except -1:
        """The line in hand ends (at a \\n or the document's end)."""
        if self.phase == LINE_HASHES or self.phase == LINE_HASHES_CR or self.phase == LINE_HEADING:
            self.heading()
        else:
            if self.phase == LINE_FENCE_RUN or self.phase == LINE_FENCE_TAIL:
                self.end_fence_run(True)
            if self.marked and self.line_start == 0:
                # A first line that is no heading: its byte-order mark is no white
                # space, so the text before the first heading is a section (none is lost).
                self.content()
        self.phase = LINE_INDENT
        self.count = self.hashes = 0
        return 0

    cdef void start_heading(self) noexcept:
        self.h_read = self.h_last = self.h_before_run_end = 0
        self.h_first = self.h_run = -1
        self.h_before_run = self.h_previous = 0
        self.heading_text = []
        self.h_reported = False

    cdef int heading_part(self, str text, Py_ssize_t lo, Py_ssize_t hi) except -1:
        """Read ``text[lo:hi]``, the next part of the heading line's text after its #s,
        keeping only what its title needs: a heading line of any length costs at most
        HEADING_LIMIT + 1 code points here."""
        cdef int kind = PyUnicode_KIND(text)
        cdef void* data = PyUnicode_DATA(text)
        cdef Py_ssize_t i, at, shift = self.h_read - lo   # text[i] is the line's at i + shift
        cdef Py_ssize_t keep_from, keep_to
        cdef Py_UCS4 c
        cdef bint long_title = False
        for i in range(lo, hi):
            c = PyUnicode_READ(kind, data, i)
            if not is_white(c):
                at = i + shift
                if self.h_first < 0:
                    self.h_first = at
                if c != 35:
                    self.h_run = -1
                    # The title ends after this, whatever follows: longer than the limit.
                    long_title = at - self.h_first >= HEADING_CODE_POINTS
                elif self.h_run < 0 or self.h_last != at:     # a new run of #
                    self.h_run = at
                    self.h_before_run = self.h_previous
                    self.h_before_run_end = self.h_last
                self.h_last = at + 1
            self.h_previous = c
        if self.h_first >= 0:
            keep_from = max(lo, self.h_first - shift)
            keep_to = min(hi, self.h_first + HEADING_CODE_POINTS + 1 - shift)
            if keep_from < keep_to:
                self.heading_text.append(PyUnicode_Substring(text, keep_from, keep_to))
        self.h_read += hi - lo
        if long_title and not self.h_reported:
            # Its section can be reported now, and the rest of the line streams on.
            self.h_reported = True
            self.report(cut_heading("".join(self.heading_text), HEADING_CODE_POINTS - 1))
        return 0

    cdef str heading_title(self):
        """The title of the heading line read: without surrounding white space, and
        without a closing run of # preceded by a space or a tab (or by nothing)."""
        cdef Py_ssize_t last = self.h_last
        if self.h_run >= 0 and (self.h_before_run == 0 or self.h_before_run == 32
                                or self.h_before_run == 9):
            last = self.h_before_run_end
        if self.h_first < 0 or last <= self.h_first:
            return ""
        kept = "".join(self.heading_text)
        if last - self.h_first > HEADING_CODE_POINTS:
            return cut_heading(kept, HEADING_CODE_POINTS - 1)
        return kept[:last - self.h_first]

    cdef int heading(self) except -1:
        """A heading line ended: its section starts at ``line_start``."""
        if self.h_reported:
            self.start_heading()
            return 0
        title = self.heading_title()
        self.start_heading()
        return self.report(title)

    cdef int report(self, str title) except -1:
        """The heading line in hand has this title: its section starts at ``line_start``."""
        while self.levels and self.levels[len(self.levels) - 1] >= self.hashes:
            self.levels.pop()
            self.titles.pop()
        self.levels.append(self.hashes)
        self.titles.append(title)
        self.started = True
        self.events.append((self.line_start, tuple(self.titles)))
        return 0

    cdef int end(self) except -1:
        """The document ends: so does its last line."""
        if self.phase == LINE_HASHES_CR:
            self.rest(13)                       # a \r at the end is no line ending
        if self.position > self.line_start:
            self.end_line()
        return 0


cdef class SectionWindows(_Windows):
    """Windows of Markdown sections (``SectionScanner``); each chunk carries the
    headings of its first section."""
    cdef SectionScanner scanner
    cdef Py_ssize_t section_start         # -1: no section in progress
    cdef tuple section_headings

    def __cinit__(self, Py_ssize_t size, Py_ssize_t overlap):
        self.scanner = SectionScanner()
        self.tags = []
        self.section_start = -1

    cdef void start_document(self) noexcept:
        _Windows.start_document(self)
        self.section_start = -1
        if self.scanner is not None:
            self.scanner.start_document()

    cdef Py_ssize_t scanner_needs(self):
        if self.section_start >= 0:
            return self.section_start
        # No section yet: everything the scanner has settled is white space, which
        # trimming would drop; the text before the first heading may still turn out to
        # be a section, starting at the first code point kept (see ``sections``). But a
        # byte-order mark is no white space: that section would begin with it.
        return 0 if self.scanner.marked else self.scanner.settled_offset()

    cdef int scan(self, bint final) except -1:
        self.scanner.scan(self.buf, self.scan_pos - self.base)
        if final:
            self.scanner.end()
        self.sections(self.scanner.events)
        self.scanner.events = []
        self.scan_pos = self.base + len(self.buf)
        if final and self.section_start >= 0:
            self.tags.append(self.section_headings)
            self.add_unit(self.section_start, self.scan_pos)
            self.section_start = -1
        return 0

    cdef int sections(self, list starts) except -1:
        cdef Py_ssize_t start
        for start, headings in starts:
            if self.section_start >= 0:
                self.tags.append(self.section_headings)
                self.add_unit(self.section_start, start)
            self.section_start = max(start, self.base)
            self.section_headings = headings
        return 0
