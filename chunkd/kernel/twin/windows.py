"""The window strategies in plain Python: the twin of ``chunkd.kernel._windows``, with its
classes and its records, field for field (docs/strategies.md, "Window strategies").

A window strategy scans the text into units (grapheme clusters, words, sentences or
Markdown sections) and makes windows of ``size`` units, each ``size - overlap`` units
after the previous one, trimmed of white space at both ends.

Streaming. Text comes in pieces of any size. Each scanner finds its units with a
regular expression over the text it holds, and keeps back the last unit while the text
that follows could still change it: a unit's end is decided by what precedes it and at
most one code point after it. The next scan starts again where that unit starts (or,
between units, at the end of what was read), so a unit is reported once, when it is
final, and the units are the same whatever the cutting. Only the text from the first
unit of the window in progress (or from the unit in progress) on is held, so memory is
bounded by the largest window and the unit in progress. New text is appended to what is
held only once it is as long as that (a document without a single boundary then costs
a doubling buffer, not a copy at every piece), which keeps the rescans of a long unit
in progress linear in all.

Grapheme clusters are the pinned ``regex`` module's ``\\X``, restarted at a cluster
boundary after each piece. A restarted match finds the same clusters because every
rule of UAX #29 that joins two code points looks back only inside the cluster it is
building. GB11's context (an Extended_Pictographic, Extend code points, a ZWJ) and
GB9c's (a run of Extend and Linker code points) lie inside one cluster: no boundary
falls before an Extend, ZWJ or Linker code point but after a control or a line end
(GB4), which no such context holds. And a boundary inside a run of regional
indicators (GB12, GB13) has an even number of them before it, so counting pairs
afresh from it pairs them as the whole text does.
"""

from __future__ import annotations

import operator
import re
import sys
from collections.abc import Iterator, Sequence
from itertools import accumulate, islice, repeat

import regex

from chunkd.model.chunk import Chunk
from chunkd.kernel.splitting import check_window

#: The most code points a heading keeps in a heading path (see ``cut_heading``).
HEADING_LIMIT = 256
#: What ends a heading that was cut.
ELLIPSIS = "\u2026"
#: The layout of ``chunkd.strategies.windows.grapheme_properties()``, the compiled
#: module's table of grapheme properties (this module asks ``regex`` directly):
#: Grapheme_Cluster_Break values in the low four bits (Other is 0), Indic_Conjunct_Break
#: values in bits 4 and 5 (None is 0), Extended_Pictographic in bit 6.
GRAPHEME_BREAK_VALUES = ("CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator",
                         "Prepend", "SpacingMark", "L", "V", "T", "LV", "LVT")
CONJUNCT_BREAK_VALUES = ("Consonant", "Extend", "Linker")
PICTOGRAPHIC_BIT = 64

#: The contract's CJK code points (a word alone; 1.05 estimated tokens each).
CJK_CLASS = ("\u1100-\u11ff\u2e80-\u2fff\u3001-\u303f\u3040-\u31ff\u3200-\u4dbf"
             "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f"
             "\uff00-\uffef\U00020000-\U0003ffff")
CJK = re.compile(f"[{CJK_CLASS}]")
#: In a ``str`` pattern, ``\s`` is ``str.isspace``: the contract's white space.
NON_WHITE = re.compile(r"\S")
CLUSTER = regex.compile(r"\X")
WORD = re.compile(f"[^\\s{CJK_CLASS}]+|[{CJK_CLASS}]")
TERMINAL_MARKS = ".!?\u3002\uff01\uff1f\uff0e\uff61"          # . ! ? 。！？．｡
FULL_WIDTH_TERMINAL = re.compile("[\u3002\uff01\uff1f\uff0e\uff61]")
CLOSING_MARKS = "\"')]}\u201d\u2019\u300d\u300f\uff09\u3011\u300b\u3009"  # ” ’ 」 』 ） 】 》 〉
#: A line's end, or a run of terminal marks and the closing marks after it: where a
#: sentence may end.
SENTENCE_END = re.compile(f"\n|[{re.escape(TERMINAL_MARKS)}]+[{re.escape(CLOSING_MARKS)}]*")


#: A unit: its document offsets, and for a section its heading path.
Unit = tuple[int, int, "tuple[str, ...] | None"]


def estimated_tokens(text: str) -> int:
    """``ceil(1.05 * CJK + other / 4)``, in integers."""
    cjk = 0 if text.isascii() else len(CJK.findall(text))
    return (105 * cjk + 25 * (len(text) - cjk) + 99) // 100


def _checked_text(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    return text


def cut_heading(text: str, keep: int) -> str:
    """``text`` cut at its last grapheme boundary (``regex``'s ``\\X``) at or before
    ``keep`` code points, then "…"."""
    text = _checked_text(text)
    end = 0
    # A boundary at ``keep`` is decided by the code point after it, so one more is read.
    for cluster in CLUSTER.finditer(text[:keep + 1]):
        if cluster.end() > keep:
            break
        end = cluster.end()
    return text[:end] + ELLIPSIS


# --- windows ---------------------------------------------------------------------------

class _Windows:
    """Windows of ``size`` units, ``overlap`` of them shared by neighbours; a subclass
    scans the units (``_scan``) and hands them to ``_add_units``."""

    def __init__(self, size: int, overlap: int) -> None:
        size, overlap = operator.index(size), operator.index(overlap)
        if max(abs(size), abs(overlap)) > sys.maxsize:
            raise OverflowError("size and overlap must fit in a C ssize_t")
        check_window(size, overlap)
        self.size = size
        self.overlap = overlap
        self._start_document()

    def _start_document(self) -> None:
        self._text = ""              # the document from offset ``_base`` on
        self._base = 0
        self._pending: list[str] = []   # text fed but not yet in ``_text``
        self._pending_length = 0
        self._scanned = 0            # document offset where the next scan starts
        # The window in progress: (start, end, headings) of its units.
        self._units: list[Unit] = []
        self._covered = 0            # queued units the previous window already holds
        self._next_index = 0
        self._out: list[Chunk] = []

    def feed(self, text: str) -> list[Chunk]:
        """Take the next piece of the document; return the chunks now final."""
        self._pending.append(_checked_text(text))
        self._pending_length += len(text)
        if self._pending_length < self._base + len(self._text) - self._needed_from():
            return []
        self._take_pending()
        self._scan(final=False)
        chunks, self._out = self._out, []
        return chunks

    def finish(self) -> list[Chunk]:
        """End the document; return its remaining chunks and start a new document."""
        self._take_pending()
        self._scan(final=True)
        if len(self._units) > self._covered:
            self._emit(0, len(self._units))
        chunks = self._out
        self._start_document()
        return chunks

    def _take_pending(self) -> None:
        """Drop the text nothing reads any more and append the text fed since."""
        drop = self._needed_from() - self._base
        self._text = self._text[drop:] + "".join(self._pending)
        self._base += drop
        self._pending = []
        self._pending_length = 0

    def _needed_from(self) -> int:
        """The lowest document offset a window or the scanner still reads."""
        need = self._scanner_needs()
        return min(need, self._units[0][0]) if self._units else need

    def _scanner_needs(self) -> int:
        """The lowest document offset the scanner still reads (a unit in progress)."""
        return self._scanned

    def _scan(self, final: bool) -> None:
        """Read ``_text`` from ``_scanned`` on; ``final``: the document ends there."""
        raise NotImplementedError("a window strategy scans its own units")

    def _add_units(self, units: Sequence[Unit]) -> None:
        """The next units, in order; each window they fill is emitted."""
        queue = self._units
        queue += units
        first, step = 0, self.size - self.overlap
        while first + self.size <= len(queue):
            self._emit(first, first + self.size)
            first += step
            self._covered = self.overlap
        del queue[:first]

    def _add_matches(self, matches: Iterator[re.Match[str]], final: bool) -> None:
        """The units ``matches`` finds in the text held, in order; unless ``final``,
        the last one is held back if it reaches the end of that text (the next piece
        may continue it), and the next scan starts at it. They are queued a batch at a
        time: a batch of tuples costs less time than a call a unit, and less memory
        than a list of all the units a large piece holds."""
        base = self._base
        self._scanned = base + len(self._text)
        last: list[Unit] = []
        while True:
            units = last + [(base + match.start(), base + match.end(), None)
                            for match in islice(matches, 1024)]
            if len(units) <= len(last):
                break
            last = [units.pop()]
            self._add_units(units)
        if last and last[0][1] == self._scanned and not final:
            self._scanned = last[0][0]
        else:
            self._add_units(last)

    def _emit(self, first: int, stop: int) -> None:
        """The window of queued units [first, stop), trimmed of white space at both
        ends; none if it is all white."""
        units = self._units
        raw = self._text[units[first][0] - self._base:units[stop - 1][1] - self._base]
        text = raw.strip()
        if not text:
            return
        start = units[first][0] + len(raw) - len(raw.lstrip())
        end = start + len(text)
        headings = units[first][2]
        # The length: the units that overlap the trimmed range.
        last = stop - 1
        while first < last and units[first][1] <= start:
            first += 1
        while last > first and units[last][0] >= end:
            last -= 1
        self._out.append(Chunk(self._next_index, start, end, last - first + 1, text,
                               estimated_tokens=estimated_tokens(text), headings=headings))
        self._next_index += 1


class GraphemeWindows(_Windows):
    """Windows of extended grapheme clusters, as the ``regex`` module's ``\\X`` gives
    them. ``properties`` is the compiled module's table, unused here: it is taken so
    that one call makes either."""

    def __init__(self, size: int, overlap: int, properties: bytes | None = None) -> None:
        super().__init__(size, overlap)

    def _scan(self, final: bool) -> None:
        text, base = self._text, self._base
        at, span = self._scanned - base, 2048
        # A slice of the text at a time (a bounded list of units): clusters follow each
        # other, so their lengths give their offsets, and the last one, which may go
        # on past the slice, is read again at the start of the next.
        while at < len(text):
            stop = min(len(text), at + span)
            ends = list(accumulate(map(len, CLUSTER.findall(text, at, stop)), initial=base + at))
            if stop < len(text) or not final:
                ends.pop()
            if len(ends) == 1:            # no cluster is complete yet
                if stop == len(text):
                    break
                span *= 2                 # a cluster longer than the slice
                continue
            self._add_units(list(zip(ends, ends[1:], repeat(None))))
            at = ends[-1] - base
        self._scanned = base + at


class WordWindows(_Windows):
    """Windows of words: a maximal run of non-white code points that are not CJK, or
    one CJK code point alone."""

    def _scan(self, final: bool) -> None:
        self._add_matches(WORD.finditer(self._text, self._scanned - self._base), final)


class SentenceWindows(_Windows):
    """Windows of sentences, line by line: a sentence ends after a run of terminal
    marks and the closing marks after it, when white space or the line's end follows
    (a run with a full-width mark ends it whatever follows); the text after a line's
    last sentence is a unit too. A unit is trimmed of white space."""

    def _scan(self, final: bool) -> None:
        text, base = self._text, self._base
        sentences: list[Unit] = []
        start = self._scanned - base      # no sentence is in progress before this
        for end in SENTENCE_END.finditer(text, start):
            cut = end.end()
            if end.group() == "\n":
                cut = end.start()
            elif cut == len(text):
                if not final:             # the run, or what follows it, may go on
                    break
            elif not (FULL_WIDTH_TERMINAL.search(end.group()) or text[cut].isspace()):
                continue                  # 3.14, file.txt: no end
            sentences += self._trimmed(start, cut)
            start = cut
        else:
            if final:
                sentences += self._trimmed(start, len(text))
                start = len(text)
        # Start the next scan at the sentence in progress: white space before it
        # belongs to no unit and need not be held.
        first = NON_WHITE.search(text, start)
        self._scanned = base + (len(text) if first is None else first.start())
        self._add_units(sentences)

    def _trimmed(self, start: int, end: int) -> list[Unit]:
        """text[start:end] without its white space at both ends as a unit, unless it
        is all white."""
        first = NON_WHITE.search(self._text, start, end)
        if first is None:
            return []
        length = len(self._text[first.start():end].rstrip())
        return [(self._base + first.start(), self._base + first.start() + length, None)]


# --- Markdown sections ------------------------------------------------------------------

#: Where the line in hand is: its first code points are read one at a time (they
#: decide what the line is), the rest of a line in larger steps.
INDENT = "indent"            # up to three spaces read
HASHES = "hashes"            # the opening run of #
HASHES_CR = "hashes-cr"      # a \r right after the #s: a heading only if \n follows
HEADING = "heading"          # a heading line's text
FENCE_RUN = "fence-run"      # a run of ` or ~ after the indent
FENCE_TAIL = "fence-tail"    # white space after a run that may close the open fence
REST = "rest"                # the rest of a line that is no heading
FENCE_RUNS = {"`": re.compile("`*"), "~": re.compile("~*")}
NON_WHITE_RUN = re.compile(r"\S+")


class SectionScanner:
    """Markdown section starts and heading paths, as text streams in (no windows).

    ``feed(text)`` returns the sections that start in the text read so far and were
    not reported yet, in order, as ``(offset, headings)``: the document offset of the
    section's first code point and the texts of its enclosing headings, outermost
    first, its own included (``()`` for the text before the first heading). A
    heading's section is reported when its line is complete, or as soon as its title
    is certain to be longer than ``HEADING_LIMIT``: every heading's section that starts
    before ``settled`` has been reported. The text before the first heading is reported
    (at offset 0, before any other) as soon as a non-white code point outside a heading
    line shows that it is not only white space. ``finish()`` ends the document and
    readies the scanner for the next one; ``position`` is the document offset of the
    next code point.

    A section starts at an ATX heading line (0-3 spaces, 1-6 ``#``, then a space, a
    tab or the line's end) outside fenced code (0-3 spaces then 3 or more backticks or
    tildes; closed by a line of 0-3 spaces, at least as many of the same character,
    then only white space). Lines end after ``\\n``. A U+FEFF at the document's very
    start (a byte-order mark, then ``marked``) is skipped: the first line is read
    after it, though its section's offset counts it. The scanner holds no text but the
    start of a heading's title (``HeadingTitle``).
    """

    def __init__(self) -> None:
        self._start_document()

    def _start_document(self) -> None:
        self.position = 0
        self.marked = False          # the document begins with a byte-order mark
        self._line_start = 0
        self._phase = INDENT
        self._count = 0              # spaces, #s or fence characters on the line
        self._hashes = 0
        self._run_char = ""
        self._fence: tuple[str, int] | None = None   # the open fence's character and length
        self._title: HeadingTitle | None = None      # the heading line's, after its #s
        self._path: list[tuple[int, str]] = []        # the enclosing headings' levels, titles
        self._started = False        # a section has been reported
        self._events: list[tuple[int, tuple[str, ...]]] = []

    def feed(self, text: str) -> list[tuple[int, tuple[str, ...]]]:
        """Read the next piece of the document; return the sections now known."""
        text = _checked_text(text)
        at = 0
        if self.position == 0 and text.startswith("\ufeff"):
            at = 1       # a byte-order mark: in the offsets, but no part of the first line
            self.marked = True
        while at < len(text):
            newline = text.find("\n", at)
            self._read_line(text, at, len(text) if newline < 0 else newline)
            if newline < 0:
                break
            self._end_line()
            self._line_start = self.position + newline + 1
            at = newline + 1
        self.position += len(text)
        events, self._events = self._events, []
        return events

    def finish(self) -> list[tuple[int, tuple[str, ...]]]:
        """End the document; return the last sections known."""
        if self._phase == HASHES_CR:
            self._rest("\r")                    # a \r at the end is no line ending
        if self.position > self._line_start:
            self._end_line()
        events = self._events
        self._start_document()
        return events

    @property
    def settled(self) -> int:
        """Every section that starts before this document offset has been reported."""
        if self._phase in (REST, FENCE_RUN, FENCE_TAIL) or self._fence is not None:
            return self.position                # the line in hand is no heading
        if self._phase == HEADING and self._title is not None and self._title.reported:
            return self.position                # a heading already reported
        return self._line_start

    def _read_line(self, text: str, at: int, end: int) -> None:
        """Read text[at:end], the next part of the line in hand (no \\n in it)."""
        while at < end:
            if self._phase == REST:
                if not self._started and NON_WHITE.search(text, at, end):
                    self._content()
                return
            if self._phase == HEADING:
                assert self._title is not None
                if not self._title.reported:
                    self._title.read(text, at, end)
                    if self._title.long:        # what follows cannot change its cut title
                        self._title.reported = True
                        self._report(self._title.title())
                return
            if self._phase == FENCE_TAIL:
                if NON_WHITE.search(text, at, end):
                    self._phase = REST
                return
            if self._phase == FENCE_RUN:
                run = FENCE_RUNS[self._run_char].match(text, at, end)
                assert run is not None, "a pattern x* matches everywhere"
                run_end = run.end()
                self._count += run_end - at
                if run_end < end:               # the run ends before the line does
                    if (self._fence is not None and self._count >= self._fence[1]
                            and text[run_end].isspace()):
                        self._phase = FENCE_TAIL
                    else:
                        self._end_fence_run(line_ends=False)
                        self._phase = REST
                at = run_end + 1
                continue
            self._line_opening(text[at])
            at += 1

    def _line_opening(self, char: str) -> None:
        """The next of the line's first code points (its indent and #s)."""
        if self._phase == INDENT:
            if char == " " and self._count < 3:
                self._count += 1
            elif char == "#" and self._fence is None:
                self._phase = HASHES
                self._hashes = 1
            elif char in "`~" and (self._fence is None or char == self._fence[0]):
                self._phase = FENCE_RUN
                self._run_char = char
                self._count = 1
                self._content()
            else:
                self._rest(char)
        elif self._phase == HASHES:
            if char == "#" and self._hashes < 6:
                self._hashes += 1
            elif char in " \t":
                self._phase = HEADING
                self._title = HeadingTitle(char)
            elif char == "\r":
                self._phase = HASHES_CR
            else:
                self._rest(char)
        else:                                   # HASHES_CR: \r, then not \n
            self._rest(char)

    def _rest(self, char: str) -> None:
        """The line in hand is no heading (nor fence); ``char`` is its code point in hand."""
        self._phase = REST
        if self._hashes or not char.isspace():
            self._content()

    def _content(self) -> None:
        """A non-white code point outside heading lines: the text before the first
        heading, if this is it, is a section."""
        if not self._started:
            self._started = True
            self._events.append((0, ()))

    def _end_fence_run(self, line_ends: bool) -> None:
        """A run of fence characters ended: it may open a fence, or close the open one
        if only white space followed it to the line's end."""
        if self._count < 3:
            return
        if self._fence is None:
            self._fence = (self._run_char, self._count)
        elif line_ends and self._count >= self._fence[1]:
            self._fence = None

    def _end_line(self) -> None:
        """The line in hand ends (at a \\n or the document's end)."""
        if self._phase in (HASHES, HASHES_CR, HEADING):
            title = self._title
            if title is None:
                self._report("")
            elif not title.reported:
                self._report(title.title())
            self._title = None
        else:
            if self._phase in (FENCE_RUN, FENCE_TAIL):
                self._end_fence_run(line_ends=True)
            if self.marked and self._line_start == 0:
                # A first line that is no heading: its byte-order mark is no white
                # space, so the text before the first heading is a section.
                self._content()
        self._phase = INDENT
        self._count = self._hashes = 0

    def _report(self, title: str) -> None:
        """The heading line in hand has this title: its section starts at its line."""
        while self._path and self._path[-1][0] >= self._hashes:
            self._path.pop()
        self._path.append((self._hashes, title))
        self._started = True
        self._events.append((self._line_start, tuple(title for _, title in self._path)))


class HeadingTitle:
    """A heading line's title, read piece by piece from the text after its #s (its
    first code point, the space or tab after the #s, given at the start).

    The title is the text without surrounding white space and without a closing run of
    # preceded by a space or a tab; one longer than ``HEADING_LIMIT`` code points is
    cut (``cut_heading``). Only its first ``HEADING_LIMIT + 1`` code points are kept,
    and a few offsets (counted from the separator, at 0): a heading line of any length
    costs no more."""

    def __init__(self, separator: str) -> None:
        self.length = 1              # code points read
        self.previous = separator    # the last of them
        self.first = -1              # where the first non-white code point is
        self.last = 0                # after the last non-white code point
        self.end = 0                 # where the title ends, were the line to end here
        self.closing = False         # the last non-white code points are a closing run of #
        self.kept: list[str] = []    # from ``first`` on, HEADING_LIMIT + 1 code points at most
        self.long = False            # the title is longer than HEADING_LIMIT, whatever follows
        self.reported = False        # its section was reported before the line's end

    def read(self, text: str, at: int, end: int) -> None:
        """Read text[at:end], the next part of the line."""
        shift = self.length - at         # text[i] is the line's code point i + shift
        for run in NON_WHITE_RUN.finditer(text, at, end):
            start, stop = run.span()
            word = run.group()
            body = len(word.rstrip("#"))     # the code points before a final run of #
            if self.first < 0:
                self.first = start + shift
            if start + shift == self.last:
                # It goes on with the previous run: only #s keep a closing run open.
                if body or not self.closing:
                    self.end, self.closing = stop + shift, False
            elif body == 0 and (text[start - 1] if start > at else self.previous) in " \t":
                self.end, self.closing = self.last, True     # all it holds may be closing
            else:
                self.end, self.closing = stop + shift, False
            if body and start + body - 1 + shift - self.first >= HEADING_LIMIT:
                self.long = True
            self.last = stop + shift
        if self.first >= 0:
            kept_to = self.first + HEADING_LIMIT + 1 - shift
            keep = text[max(at, self.first - shift):min(end, kept_to)]
            if keep:
                self.kept.append(keep)
        self.length += end - at
        self.previous = text[end - 1]

    def title(self) -> str:
        if self.first < 0 or self.end <= self.first:
            return ""
        kept = "".join(self.kept)
        if self.end - self.first > HEADING_LIMIT:
            return cut_heading(kept, HEADING_LIMIT - 1)
        return kept[:self.end - self.first]


class SectionWindows(_Windows):
    """Windows of Markdown sections (``SectionScanner``); each chunk carries the
    headings of its first section."""

    def _start_document(self) -> None:
        super()._start_document()
        self._scanner = SectionScanner()
        self._section: tuple[int, tuple[str, ...]] | None = None   # in progress

    def _scanner_needs(self) -> int:
        if self._section is not None:
            return self._section[0]
        # No section yet: everything the scanner has settled is white space, which
        # trimming would drop; the text before the first heading may still turn out to
        # be a section (from offset 0). But a byte-order mark is no white space: that
        # section would begin with it.
        return 0 if self._scanner.marked else self._scanner.settled

    def _scan(self, final: bool) -> None:
        starts = self._scanner.feed(self._text[self._scanned - self._base:])
        if final:
            starts += self._scanner.finish()
        self._scanned = self._base + len(self._text)
        sections: list[Unit] = []
        for start, headings in starts:
            if self._section is not None:
                sections.append((self._section[0], start, self._section[1]))
            self._section = (max(start, self._base), headings)
        if final and self._section is not None:
            sections.append((self._section[0], self._scanned, self._section[1]))
            self._section = None
        self._add_units(sections)
