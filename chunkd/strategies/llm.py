"""The llm strategy: chunk boundaries an LLM chooses, within size bounds
(LumberChunker's idea, arXiv 2406.17526), every chunk still a slice of the document.

chunkd proposes the candidates: each Markdown section (a heading starts one, and no
chunk crosses it) is cut into pieces, its blocks (paragraphs, a fenced code block, a
table), and a block longer than the maximum into its sentences (a table into its
rows; a code block stays whole). The model sees the pieces in windows, one a line led
by its number, and answers JSON ``{"boundaries": [n, ...]}``: the lines that begin a
new topic. Each window begins with the pieces before it (``LEAD``), so that its first
own piece is judged against the text before it; the windows are fixed by the text
alone, so they are all asked at once (within ``--llm-concurrency``) and a window whose
text is unchanged is the same question (the cache answers it). Every answer is
checked; one that fails is asked again once, saying why, then the window gets no
boundaries from the model (``Fallback``: its pieces are packed by size alone).

Then the sizes: a group over the maximum is cut at its pieces, greedily (a piece
alone over it by the recursive splitter), and a piece under the minimum joins a
neighbour as the semantic strategy's do (``chunkd.strategies.semantic.joined``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from chunkd.llm.ledger import Ledger
from chunkd.llm.options import (LLM_CACHE, LLM_CONCURRENCY, LLM_MODEL, LLM_URL, LLM_WINDOW,
                                STRATEGIES_ASKING, context_cache)
from chunkd.model.chunk import Chunk
from chunkd.model.chunker import DocumentChunker
from chunkd.model.errors import LLMError, SettingsError
from chunkd.model.patterns import deferred
from chunkd.strategies.base import DocumentAtOnce, Strategy, register
from chunkd.strategies.markdown import _FENCE, closes_fence, starts_table
from chunkd.strategies.semantic import Piece, chunkd_sentences, joined, minimum

if TYPE_CHECKING:
    import threading

    from chunkd.embeddings.cache import DiskCache
    from chunkd.llm.client import ChatClient
    from chunkd.llm.context import Cost
    from chunkd.strategies.base import SettingsView
    from chunkd.model.length import LengthUnit

#: The question: the pieces, one a line, then what to answer. Its text is part of each
#: decision's cache key, so a change here asks again.
PROMPT = """Below are consecutive pieces of a document, one a line, each led by its \
number (a newline inside a piece is shown as \\n).

{pieces}

{lead} before, for context. Which of the lines {first} to {last} begin a new topic, one \
that the line before it does not continue? Answer with JSON only: \
{{"boundaries": [the line numbers, increasing]}}, an empty list if none does."""
#: Added to the question when it is asked again.
AGAIN = "\n\nYour last answer could not be used ({why}). Answer with that JSON only."
#: What the answer must be, asked for with the server's structured output.
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {
    "name": "boundaries", "strict": True, "schema": {
        "type": "object", "additionalProperties": False, "required": ["boundaries"],
        "properties": {"boundaries": {"type": "array", "items": {"type": "integer"}}}}}}
#: The pieces shown before a window's own, for context.
LEAD = 2
#: The tokens (cl100k_base) of a window's pieces at most, whatever the LLM's window:
#: a small model judges a short window better, and an edit re-asks less.
WINDOW_TOKENS = 2048
#: A piece is shown within this share of the window's tokens (then cut, with "[…]").
PIECE_SHARE = 8
#: The lines of a window at most, which bounds its answer too.
MAX_LINES = 64
_LINE = deferred(r"[^\n]+")


@functools.cache
def cache_key() -> str:
    """The ``prompt_cache_key`` of every question: they all begin with the same
    instructions (worked out when first asked: a plain run imports no hashing)."""
    import hashlib

    return "chunkd-llm-" + hashlib.sha256(PROMPT.encode()).hexdigest()[:16]


@register
class LLMBoundaries(Strategy):
    """Pieces (blocks, sentences of a long block) grouped where an LLM sees a new topic,
    within Markdown sections, then bounded by a minimum and a maximum size."""

    name = "llm"
    units = ("tokens", "chars")
    default_size = 512
    fields = ("headings",)
    overlaps = False
    streams = False

    @classmethod
    def check(cls, settings: SettingsView) -> None:
        if settings.overlap:
            raise SettingsError("the llm strategy's chunks do not overlap: leave out "
                                "--overlap (or write --overlap 0)")

    @classmethod
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        return LLMSplitter(settings)


STRATEGIES_ASKING[LLMBoundaries.name] = ("llm_window",)  # its windows fit the server's


class AskedTally(Ledger):
    """What the strategy's questions cost in this process, and how many windows got no
    usable answer (``fallbacks``, the first one's reason in ``why``)."""

    def __init__(self) -> None:
        super().__init__()
        self.windows = self.fallbacks = 0
        self.why: str | None = None
        self.shown = ""  # the endpoint, as messages show it

    @functools.cached_property
    def cost(self) -> Cost:
        # (made when first asked: a run of another strategy imports no LLM client)
        from chunkd.llm.context import Cost

        return Cost()

    def clear(self) -> None:
        super().clear()
        self.windows = self.fallbacks = 0
        self.why = None
        self.__dict__.pop("cost", None)

    def lines(self) -> list[str]:
        """What the front end says at the end: the cost, and the windows cut by size
        alone (if any)."""
        if not self.windows:
            return []
        said = [self.cost.line(self.shown, what="--strategy llm")]
        if self.fallbacks:
            said.append(f"--strategy llm: {self.fallbacks:,} of {self.windows:,} windows cut "
                        f"by size alone: the model's answer failed twice ({self.why})")
        return said


#: The process's tally (a front end says its lines at the end).
TALLY = AskedTally()


class Block(NamedTuple):
    """A range of the document, trimmed of white space, and what it is: "prose",
    "code" (a fenced block) or "table"."""

    start: int
    end: int
    kind: str


class Window(NamedTuple):
    """Pieces ``first`` to ``end`` (exclusive) of a section shown to the model, those
    from ``own`` on for it to judge; ``prompt`` the question."""

    first: int
    own: int
    end: int
    prompt: str

    @property
    def lines(self) -> int:
        return self.end - self.first


class BadAnswer(ValueError):
    """An answer that is not the boundaries of its window; the message says why."""


def blocks(text: str, start: int, end: int) -> list[Block]:
    """The blocks of ``text[start:end]``: runs of lines between blank lines, a fenced
    code block (to its closing fence, blank lines and all) always one of its own."""
    found: list[Block] = []
    opened: int | None = None  # the current block's start
    fence: str | None = None
    code_start = at = start
    while at < end:
        newline = text.find("\n", at, end)
        line_end = end if newline < 0 else newline + 1
        line = text[at:line_end].rstrip("\r\n")
        if fence is not None:
            if closes_fence(fence, line):
                found.append(Block(code_start, line_end, "code"))
                opened, fence = None, None
        elif (opening := _FENCE.match(line)) is not None:
            if opened is not None:
                found.append(Block(opened, at, "prose"))
            opened = code_start = at
            fence = opening.group(1)
        elif not line.strip():
            if opened is not None:
                found.append(Block(opened, at, "prose"))
            opened = None
        elif opened is None:
            opened = at
        at = line_end
    if opened is not None:
        found.append(Block(opened, end, "code" if fence is not None else "prose"))
    kept = []
    for block in found:
        span = trimmed(text, block.start, block.end)
        if span is not None:
            lines = text[span[0]:span[1]].split("\n", 2)
            table = block.kind == "prose" and len(lines) > 1 and starts_table(*lines[:2])
            kept.append(Block(*span, "table" if table else block.kind))
    return kept


def trimmed(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``[start, end)`` without the white space at either end; None if that is all."""
    piece = text[start:end]
    first, last = start + len(piece) - len(piece.lstrip()), start + len(piece.rstrip())
    return (first, last) if first < last else None


def pieces(text: str, start: int, end: int, count: Callable[[str], int], size: int,
           headed: bool) -> list[tuple[int, int]]:
    """The candidates of a section, as ranges: its blocks, and a block over ``size``
    cut into its sentences (a table into its rows; a code block stays whole). The
    heading line of a section (``headed``) goes with the block after it: no boundary
    just after a heading."""
    made: list[tuple[int, int]] = []
    found = blocks(text, start, end)
    for number, block in enumerate(found):
        if block.kind == "code" or count(text[block.start:block.end]) <= size:
            parts = [(block.start, block.end)]
        elif block.kind == "table":
            rows = [trimmed(text, match.start(), match.end()) for match in
                    _LINE.finditer(text, block.start, block.end)]
            parts = [row for row in rows if row is not None]
        else:
            parts = [(block.start + sentence.start, block.start + sentence.end)
                     for sentence in chunkd_sentences(text[block.start:block.end])]
        if number == 1 and headed and len(made) == 1 \
                and "\n" not in text[made[0][0]:made[0][1]]:
            made[0] = (made[0][0], parts[0][1])  # the heading line, then its first piece
            parts = parts[1:]
        made += parts
    return made


#: What a piece's line breaks are written as: every character that ends a line for
#: ``str.splitlines`` (so also for a model's reader that splits so: U+2028, U+0085),
#: so that each piece is exactly one line of the question.
_ONE_LINE = {ord("\\"): "\\\\", ord("\r"): "", ord("\n"): "\\n",
             **{ord(mark): f"\\u{ord(mark):04x}" for mark in "\v\f\x1c\x1d\x1e\x85\u2028\u2029"}}


def shown(piece: str, room: int, count: Callable[[str], int]) -> str:
    """A piece as one line of the question: its newlines written ``\\n`` (other line
    breaks ``\\uXXXX``), cut to ``room`` tokens (with "[…]") if longer."""
    line = piece.translate(_ONE_LINE)
    if count(line) <= room:
        return line
    width = room * 4
    while width > 1 and count(line[:width]) > room:
        width = width * 4 // 5
    return line[:width] + " […]"


def parsed(answer: str, lines: int) -> list[int]:
    """The line numbers an answer gives: JSON ``{"boundaries": [n, ...]}`` (prose or a
    code fence around the object is tolerated: a server without structured output
    adds them), whole numbers from 1 to ``lines``, increasing; else ``BadAnswer``."""
    import json

    try:
        value = json.loads(answer)
    except (ValueError, RecursionError):
        first, last = answer.find("{"), answer.rfind("}")
        try:
            value = json.loads(answer[first:last + 1]) if 0 <= first < last else None
        except (ValueError, RecursionError):
            value = None
        if value is None:
            raise BadAnswer("not JSON") from None
    numbers = value.get("boundaries") if isinstance(value, dict) else None
    if not isinstance(numbers, list):
        raise BadAnswer('no "boundaries" list')
    if not all(isinstance(number, int) and not isinstance(number, bool) for number in numbers):
        raise BadAnswer("not whole numbers")
    if not all(1 <= number <= lines for number in numbers):
        raise BadAnswer(f"a number outside 1 to {lines}")
    if any(later <= number for number, later in zip(numbers, numbers[1:])):
        raise BadAnswer("numbers not increasing")
    return numbers


class Decision(NamedTuple):
    """A window's answer: the line numbers that begin a topic, and why the model gave
    none usable (None if it did)."""

    boundaries: list[int]
    fallback: str | None


class LLMSplitter(DocumentAtOnce):
    """Cuts a whole document (see the module)."""

    def __init__(self, settings: SettingsView) -> None:
        super().__init__()
        from chunkd.units import resolve

        self.unit: LengthUnit = settings.measure
        self.size = settings.chunk_size
        self.minimum = minimum(settings)
        from chunkd.llm.client import ChatClient

        self.client = ChatClient(settings[LLM_URL], settings[LLM_MODEL])
        self.given_window = settings[LLM_WINDOW]
        self.concurrency = settings[LLM_CONCURRENCY]
        folder = settings[LLM_CACHE]
        self.cache: DiskCache | None = None if folder is None else context_cache(folder)
        self.tokens = resolve("cl100k_base").count
        TALLY.shown = self.client.endpoint.shown

    def chunks(self, text: str) -> list[Chunk]:
        from chunkd.kernel.chosen import SectionScanner

        scanner = SectionScanner()
        starts = scanner.feed(text) + scanner.finish()
        sections = [(start, end, headings) for (start, headings), end in
                    zip(starts, [start for start, _ in starts[1:]] + [len(text)])]
        count = self.unit.count
        cut = [pieces(text, start, end, count, self.size, bool(headings))
               for start, end, headings in sections]
        windows = [self.windows(text, section) for section in cut]
        decisions = self.decide([window for section in windows for window in section])
        made: list[Chunk] = []
        for (_, _, headings), section, asked in zip(sections, cut, windows):
            starts_topic = {window.first + number - 1 for window in asked
                            for number in decisions[window.prompt].boundaries
                            if window.first + number - 1 >= window.own}
            for piece in self.bounded(text, section, starts_topic):
                made.append(Chunk(len(made), piece.start, piece.end, piece.length,
                                  text[piece.start:piece.end], headings=headings))
        return made

    def budget(self) -> int:
        """The tokens a window's pieces may take."""
        from chunkd.llm.context import DEFAULT_WINDOW, SPARE

        window = self.given_window or self.client.window() or DEFAULT_WINDOW
        room = window - window // SPARE - self.tokens(PROMPT) - self.answer_tokens(MAX_LINES)
        return max(64, min(WINDOW_TOKENS, room))

    @staticmethod
    def answer_tokens(lines: int) -> int:
        """The tokens an answer may take: a number and a comma a line, and the rest."""
        return 32 + 4 * lines

    def windows(self, text: str, section: list[tuple[int, int]]) -> list[Window]:
        """The windows of a section's pieces: as many pieces as fit the budget, after
        ``LEAD`` pieces of lead (at least one own piece a window, every piece but the
        first owned by one)."""
        if len(section) < 2:
            return []
        budget = self.budget()
        room = budget // PIECE_SHARE
        lines = [shown(text[start:end], room, self.tokens) for start, end in section]
        sizes = [self.tokens(line) for line in lines]
        made, own = [], 1
        while own < len(section):
            first = max(0, own - LEAD)
            used, end = sum(sizes[first:own]), own
            while end < len(section) and (end == own or used + sizes[end] <= budget
                                          and end - first < MAX_LINES):
                used += sizes[end]
                end += 1
            numbered = "\n".join(f"{number}: {line}"
                                 for number, line in enumerate(lines[first:end], 1))
            lead = "Line 1 comes" if own - first == 1 else f"Lines 1 to {own - first} come"
            prompt = PROMPT.format(pieces=numbered, lead=lead, first=own - first + 1,
                                   last=end - first)
            made.append(Window(first, own, end, prompt))
            own = end
        return made

    def decide(self, windows: list[Window]) -> dict[str, Decision]:
        """Each window's decision, by its question: from the cache, else asked (all at
        once, within the concurrency); ``LLMError`` if a call fails."""
        import hashlib
        import json
        import threading
        import time

        from chunkd.llm.context import _each

        if not windows:
            return {}
        by_key = {hashlib.sha256(f"{self.client.name}\0".encode()
                                 + window.prompt.encode("utf-8", "surrogatepass")).digest():
                  window for window in windows}
        decisions: dict[str, Decision] = {}
        if self.cache is not None:
            for key, value in self.cache.get(list(by_key)).items():
                try:
                    entry = json.loads(value)
                    decisions[by_key[key].prompt] = Decision(list(entry["boundaries"]),
                                                             entry["fallback"])
                except (ValueError, KeyError, TypeError):
                    continue  # a damaged entry is asked again
        cost = TALLY.cost
        with cost.lock:
            cost.reused += len(decisions)
        asked = [key for key, window in by_key.items() if window.prompt not in decisions]
        failures: list[str] = []
        lock = threading.Lock()

        def ask(key: bytes, given_up: threading.Event) -> None:
            window = by_key[key]
            decision = self.asked(window, given_up)
            with lock:
                decisions[window.prompt] = decision
            if self.cache is not None:
                self.cache.put([(key, json.dumps(decision._asdict()).encode())])

        if asked:
            started = time.monotonic()
            try:
                _each(asked, ask, self.concurrency, failures, stop_at_failure=True)
            finally:
                with cost.lock:
                    cost.seconds += time.monotonic() - started
        if failures or len(decisions) < len(by_key):
            raise LLMError(failures[0] if failures else "the LLM was not asked every window")
        with cost.lock:
            TALLY.windows += len(windows)
            for window in windows:
                why = decisions[window.prompt].fallback
                if why is not None:
                    TALLY.fallbacks += 1
                    TALLY.why = TALLY.why or why
        return decisions

    def asked(self, window: Window, given_up: threading.Event) -> Decision:
        """One window's decision from the model: asked once, again if the answer is
        unusable, then none (the fallback, with the reason)."""
        question, why = window.prompt, ""
        for _ in range(2):
            completion = self.client.complete(question, cache_key(),
                                              self.answer_tokens(window.lines), given_up,
                                              response_format=RESPONSE_FORMAT)
            TALLY.cost.add(completion)
            try:
                return Decision(parsed(completion.text, window.lines), None)
            except BadAnswer as error:
                why = str(error)
                question = window.prompt + AGAIN.format(why=why)
        return Decision([], why)

    def bounded(self, text: str, section: list[tuple[int, int]],
                starts_topic: set[int]) -> list[Piece]:
        """A section's chunks: its pieces grouped at ``starts_topic``, each group over
        the size cut at its pieces (greedily; a piece alone over it by the recursive
        splitter), then the pieces under the minimum joined to a neighbour."""
        count = self.unit.count
        made: list[Piece] = []
        group: list[tuple[int, int]] = []
        for number, piece in enumerate(section):
            group.append(piece)
            if number + 1 == len(section) or number + 1 in starts_topic:
                made += self.fitted(text, group, count)
                group = []
        return joined(text, made, count, self.size, self.minimum)

    def fitted(self, text: str, group: list[tuple[int, int]],
               count: Callable[[str], int]) -> list[Piece]:
        """A group of pieces within the size: whole if it fits, else packed greedily
        (a cut there is one by size: ``distance`` None; after the group, one by the
        model: 1.0, which the minimum undoes last)."""
        from chunkd.kernel.chosen import RecursiveSplitter

        made: list[Piece] = []
        start = end = None
        for piece_start, piece_end in group:
            if start is not None and count(text[start:piece_end]) <= self.size:
                end = piece_end
                continue
            if start is not None and end is not None:
                made.append(Piece(start, end, count(text[start:end]), None))
            start, end = piece_start, piece_end
            if count(text[start:end]) > self.size:  # a piece alone over the size
                inner = RecursiveSplitter(self.size, 0, unit=self.unit)
                for chunk in inner.feed(text[start:end]) + inner.finish():
                    made.append(Piece(start + chunk.start, start + chunk.end, chunk.length,
                                      None))
                start = end = None
        if start is not None and end is not None:
            made.append(Piece(start, end, count(text[start:end]), None))
        return made[:-1] + [made[-1]._replace(distance=1.0)] if made else made


