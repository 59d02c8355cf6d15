"""The semantic strategy: cut where the meaning changes, within size bounds.

Sentences (chunkd's ``sentences`` units, or LangChain's with ``--sentence-split
langchain``) are each embedded with ``buffer_size`` neighbours on each side; the
distance between neighbouring windows is 1 - cosine similarity, and a chunk ends after
a sentence where the breakpoint value (the distance, or its gradient) is strictly above
a threshold computed over the whole document, by LangChain's ``SemanticChunker``'s four
rules. The groups are then bounded: one over the maximum (the size) is cut inside by the
recursive splitter, and a piece under the minimum joins a neighbour that can take it. The rules, defaults and
memory are in docs/semantic.md.

A whole-document threshold needs every distance first, so the chunker holds the
document's text from its first ``feed`` until ``finish``, which cuts it. Within
``curves()`` (the preview page's report) it also hands over each document's ``Curve``:
the distances, the threshold and the cuts it drew.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NamedTuple

from chunkd.model.chunk import Chunk
from chunkd.embeddings.selection import EMBED, EMBED_URL, checked_model, embedder
from chunkd.model.errors import SettingsError
from chunkd.options import (MAX_SIZE, Flag, Option, Record, choice, number_value,
                            register_option, whole)
from chunkd.model.patterns import deferred
from chunkd.model.chunker import DocumentChunker
from chunkd.strategies.base import DocumentAtOnce, Strategy, register

if TYPE_CHECKING:
    import numpy

    from chunkd.embeddings.models import Embedder
    from chunkd.strategies.base import DraftView, SettingsView
    from chunkd.model.length import LengthUnit

#: LangChain's thresholds and their default amounts (``BREAKPOINT_DEFAULTS``).
BREAKPOINTS = {"percentile": 95.0, "standard_deviation": 3.0, "interquartile": 1.5,
               "gradient": 95.0}
#: The sentence splits: chunkd's ``sentences`` units, or LangChain's regular expression.
SENTENCE_SPLITS = ("chunkd", "langchain")
LANGCHAIN_SENTENCE_END = deferred(r"(?<=[.?!])\s+")


def _semantic_only(kind: type[Strategy]) -> bool:
    return kind.name == "semantic"


_SEMANTIC_ONLY = "{option} is for --strategy semantic, not {strategy}"


def _langchain_sizes(draft: DraftView, split: str) -> None:
    """``--sentence-split langchain`` is LangChain's ``SemanticChunker``: no maximum,
    in code points, unless a size is given."""
    draft.values["sentence_split"] = split
    if split == "langchain" and "chars" not in draft.given and "tokens" not in draft.given:
        draft.values.update(unit="chars", size=MAX_SIZE)


SENTENCE_SPLIT = register_option(Option[str](
    "chunkd", "the sentences the semantic strategy embeds", name="sentence_split",
    check=choice(*SENTENCE_SPLITS), applies=_semantic_only, refusal=_SEMANTIC_ONLY,
    flags=(
        Flag("--sentence-split", "semantic: chunkd's sentence units (default), or "
                                 "langchain: LangChain's SemanticChunker exactly (its "
                                 "sentences, windows, min_chunk_size; no maximum unless "
                                 "--chars or --tokens is given)", _langchain_sizes,
             choices=SENTENCE_SPLITS),)), after="embed_model")
BUFFER_SIZE = register_option(Option[int](
    1, "sentences on each side of a sentence in its window", name="buffer_size",
    check=whole(0), applies=_semantic_only, refusal=_SEMANTIC_ONLY,
    flags=(Flag("--buffer-size", "semantic: embed each sentence with B neighbours on each "
                                 "side (default: 1)", metavar="B", parse=number_value),)),
    after="sentence_split")


def _amount_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    return value


def _check_amount(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value in (float("inf"), float("-inf")):
        raise SettingsError(f"{name} must be a finite number, not {value!r}")
    return float(value)


def _amount_in_range(values: Mapping[str, Any], spell: Callable[[str], str]) -> None:
    amount = values["breakpoint_amount"]
    if values["breakpoint"] in ("percentile", "gradient") and amount is not None and not \
            0 <= amount <= 100:
        raise SettingsError(f"{spell('breakpoint_amount')} is a percentile with "
                            f"{spell('breakpoint')} {values['breakpoint']}: from 0 to 100, "
                            f"not {amount:g}")


BREAKPOINT = register_option(Option[str](
    "percentile", "the breakpoint threshold's rule", name="breakpoint",
    check=choice(*BREAKPOINTS), applies=_semantic_only, refusal=_SEMANTIC_ONLY,
    flags=(
        Flag("--breakpoint", "semantic: the threshold over the document's distances, as "
                             "LangChain's SemanticChunker computes it (default: percentile)",
             choices=tuple(BREAKPOINTS)),)), after="buffer_size")
BREAKPOINT_AMOUNT = register_option(Option[float | None](
    None, "the breakpoint threshold's amount (None: the rule's default)",
    name="breakpoint_amount", check=_check_amount, check_with=_amount_in_range,
    applies=_semantic_only, refusal=_SEMANTIC_ONLY, flags=(
        Flag("--breakpoint-amount", "semantic: the rule's amount: the percentile (95), the "
                                    "standard deviations above the mean (3), the "
                                    "interquartile ranges above the mean (1.5), the "
                                    "percentile of the gradient (95)", metavar="X",
             parse=_amount_value),)), after="breakpoint")


def _set_min_in(unit: str) -> Callable[[DraftView, int], None]:
    """``--min-chars``/``--min-tokens``: the minimum, in the size's unit."""
    def update(draft: DraftView, size: int) -> None:
        if "min_chars" in draft.given and "min_tokens" in draft.given:
            raise SettingsError("--min-chars and --min-tokens exclude each other")
        sized = draft.values.get("unit") or draft.kind.units[0]
        if unit != sized:
            raise SettingsError(f"the minimum is counted in the size's unit ({sized}): write "
                                f"--min-{sized} N, or --{unit} N for the size")
        draft.values["min_size"] = size
    return update


def _min_shown(unit: str) -> Callable[[SettingsView], list[str]]:
    def arguments(settings: SettingsView) -> list[str]:
        if settings[MIN_SIZE] is None or settings.unit != unit:
            return []
        return [f"--min-{unit}", str(settings[MIN_SIZE])]
    return arguments


def minimum(settings: SettingsView) -> int:
    """The minimum: as given, else none in LangChain's mode (its ``min_chunk_size`` is
    None by default) and an eighth of the maximum in chunkd's."""
    given = settings[MIN_SIZE]
    if given is not None:
        return given
    return 0 if settings[SENTENCE_SPLIT] == "langchain" else settings.chunk_size // 8


def _min_below_size(values: Mapping[str, Any], spell: Callable[[str], str]) -> None:
    if values["min_size"] is not None and values["min_size"] > values["size"]:
        raise SettingsError(f"the minimum ({values['min_size']}) must not be larger than "
                            f"the size ({values['size']})")


#: The strategies whose groups have a minimum size (the llm strategy's too).
_MINIMUM_STRATEGIES = ("semantic", "llm")
MIN_SIZE = register_option(Option[int | None](
    None, "semantic, llm: the smallest chunk, in the size's unit (None: an eighth of the "
          "size, none with LangChain's sentences)", name="min_size", check=whole(0), check_with=_min_below_size,
    applies=lambda kind: kind.name in _MINIMUM_STRATEGIES,
    refusal="{option} is for --strategy semantic or llm, not {strategy}", noun="minimum", flags=(
        Flag("--min-chars", "semantic, llm: a group under N code points joins a neighbour "
                            "(with --chars; default: an eighth of the size, none with "
                            "--sentence-split langchain)", _set_min_in("chars"), "N",
             number_value, shown=_min_shown("chars")),
        Flag("--min-tokens", "semantic, llm: a group under N tokens joins a neighbour (with "
                             "--tokens; default: an eighth of the size)",
             _set_min_in("tokens"), "N", number_value, shown=_min_shown("tokens")))),
    after="breakpoint_amount")


@register
class Semantic(Strategy):
    """Sentences grouped where the distance between neighbouring windows jumps, then
    bounded by a minimum and a maximum size."""

    name = "semantic"
    units = ("tokens", "chars")
    default_size = 512
    fields = ("distance",)
    overlaps = False
    streams = False

    @classmethod
    def model_tokenizer(cls, values: Mapping[str, Any]) -> tuple[str, str] | None:
        """The ``--embed`` model's tokenizer; none in LangChain's mode without
        ``--vectors``, which has no maximum unless one is given, as its
        ``SemanticChunker``."""
        from chunkd.embeddings.selection import model_tokenizer

        if values["sentence_split"] == "langchain" and not values.get("vectors"):
            return None
        return model_tokenizer(values)

    @classmethod
    def check(cls, settings: SettingsView) -> None:
        if settings.overlap:
            raise SettingsError("the semantic strategy's chunks do not overlap: leave out "
                                "--overlap (or write --overlap 0)")
        if settings[EMBED] is None and settings[EMBED_URL] is None:
            raise SettingsError("--strategy semantic needs a model: --embed MODEL (a "
                                "sentence-transformers folder, or a name in the Hugging Face "
                                "cache) or --embed-url URL --embed-model NAME")
        checked_model(settings)  # a model that cannot be loaded is a settings error

    @classmethod
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        return SemanticSplitter(settings)


class Sentence(NamedTuple):
    """A sentence's range in the document."""

    start: int
    end: int


class Group(NamedTuple):
    """Consecutive sentences ``first`` to ``last`` (inclusive) that make one chunk, and
    the distance at the cut after ``last`` (None after the document's last sentence)."""

    first: int
    last: int
    distance: float | None


class Piece(NamedTuple):
    """A range of the document that becomes a chunk, its length, and the distance at the
    cut after it (None after the document's last sentence, or inside a group cut at
    the maximum)."""

    start: int
    end: int
    length: int
    distance: float | None


class Curve(NamedTuple):
    """What one document's cuts were drawn from, for the preview page: ``starts``, each
    sentence's start offset; ``distances``, between each sentence's window and the
    next's (distance ``i`` is at the boundary before sentence ``i + 1``); ``values``,
    what the rule compares with ``threshold`` (the distances, or their gradient; no
    threshold where the distances are too few for the rule); ``cuts``, each chunk's
    start after the first with the distance it was cut at (None: inside a group, at
    the maximum size)."""

    starts: list[int]
    distances: list[float]
    values: list[float]
    threshold: float | None
    rule: str
    amount: float
    cuts: list[tuple[int, int | None]]


#: The list ``curves()`` collects into; None outside it, where no curve is made.
_CURVES: ContextVar[list[Curve] | None] = ContextVar("curves", default=None)


@contextmanager
def curves() -> Iterator[list[Curve]]:
    """Collect the ``Curve`` of every document the semantic strategy cuts within; the
    distances are the ones it holds anyway while it cuts, handed over, not kept."""
    seen: list[Curve] = []
    token = _CURVES.set(seen)
    try:
        yield seen
    finally:
        _CURVES.reset(token)


class SemanticSplitter(DocumentAtOnce):
    """Cuts a whole document (see the module)."""

    def __init__(self, settings: SettingsView) -> None:
        super().__init__()
        self.embedder = embedder(settings)
        self.unit: LengthUnit = settings.measure
        self.size = settings.chunk_size
        self.minimum = minimum(settings)
        self.buffer = settings[BUFFER_SIZE]
        self.rule = settings[BREAKPOINT]
        amount = settings[BREAKPOINT_AMOUNT]
        self.amount = BREAKPOINTS[self.rule] if amount is None else amount
        self.langchain = settings[SENTENCE_SPLIT] == "langchain"
        #: The document's distances while it is cut, when ``curves()`` wants them.
        self.measured: numpy.ndarray | None = None

    def chunks(self, text: str) -> list[Chunk]:
        sentences = langchain_sentences(text) if self.langchain else chunkd_sentences(text)
        if self.langchain:
            pieces = self.cut(text, sentences, self.langchain_groups(text, sentences))
        else:
            pieces = joined(text, self.cut(text, sentences, self.groups(text, sentences)),
                            self.unit.count, self.size, self.minimum)
        made = self.records(text, pieces)
        seen = _CURVES.get()
        if seen is not None:
            seen.append(self.curve(sentences, made))
        self.measured = None
        return made

    def curve(self, sentences: Sequence[Sentence], made: Sequence[Chunk]) -> Curve:
        """The ``Curve`` of a document cut into ``made``: a chunk that follows one
        with a ``distance`` starts at a sentence, cut at the distance before it."""
        import numpy

        distances = numpy.zeros(0) if self.measured is None else self.measured
        values, limit = (distances, None) if not len(distances) else \
            threshold(distances, self.rule, self.amount)
        starts = [sentence.start for sentence in sentences]
        boundary = {start: number - 1 for number, start in enumerate(starts) if number}
        cuts = [(chunk.start, None if before.distance is None else boundary[chunk.start])
                for before, chunk in zip(made, made[1:])]
        return Curve(starts, distances.tolist(), values.tolist(), limit, self.rule,
                     self.amount, cuts)

    def windows(self, text: str, sentences: Sequence[Sentence]) -> list[str]:
        """Each sentence with ``buffer`` neighbours on each side: the document's slice,
        or, as LangChain makes them, the sentences joined with single spaces."""
        last, buffer = len(sentences) - 1, self.buffer
        if self.langchain:
            texts = [text[start:end] for start, end in sentences]
            return [" ".join(texts[max(0, i - buffer):i + buffer + 1])
                    for i in range(len(sentences))]
        return [text[sentences[max(0, i - buffer)].start:sentences[min(last, i + buffer)].end]
                for i in range(len(sentences))]

    def distances(self, text: str, sentences: Sequence[Sentence]) -> numpy.ndarray:
        """1 - the cosine similarity of each window and the next."""
        vectors = self.embedder.embed(self.windows(text, sentences))
        distances = cosine_distances(vectors)
        if _CURVES.get() is not None:
            self.measured = distances
        return distances

    def groups(self, text: str, sentences: Sequence[Sentence]) -> list[Group]:
        """Sentences grouped at every breakpoint strictly above the threshold."""
        if len(sentences) < 2:
            return [Group(0, len(sentences) - 1, None)] if sentences else []
        distances = self.distances(text, sentences)
        cuts = breakpoints(distances, self.rule, self.amount)
        groups, first = [], 0
        for cut in cuts:
            groups.append(Group(first, cut, float(distances[cut])))
            first = cut + 1
        groups.append(Group(first, len(sentences) - 1, None))
        return groups

    def langchain_groups(self, text: str, sentences: Sequence[Sentence]) -> list[Group]:
        """LangChain's ``SemanticChunker.split_text``: its early returns (one sentence;
        two with the gradient rule), then its merge of a group under ``min_chunk_size``
        (measured on the sentences joined with single spaces) into the next one."""
        count = len(sentences)
        if count == 1 or (count == 2 and self.rule == "gradient"):
            return [Group(number, number, None) for number in range(count)]
        distances = self.distances(text, sentences)
        groups, first = [], 0
        for cut in breakpoints(distances, self.rule, self.amount):
            joined = " ".join(text[start:end] for start, end in sentences[first:cut + 1])
            if self.minimum and self.unit.count(joined) < self.minimum:
                continue
            groups.append(Group(first, cut, float(distances[cut])))
            first = cut + 1
        if first < count:
            groups.append(Group(first, count - 1, None))
        return groups

    def cut(self, text: str, sentences: Sequence[Sentence],
            groups: Sequence[Group]) -> list[Piece]:
        """The groups as ranges of the document, each group over the size cut inside by
        the recursive splitter (chunkd's separators, no overlap). Empty ranges (the
        empty last sentence LangChain's split can make) are left out."""
        from chunkd.kernel.chosen import RecursiveSplitter

        made: list[Piece] = []
        for group in groups:
            start, end = sentences[group.first].start, sentences[group.last].end
            if start == end:
                continue
            length = self.unit.count(text[start:end])
            if length <= self.size:
                made.append(Piece(start, end, length, group.distance))
                continue
            cut = RecursiveSplitter(self.size, 0, unit=self.unit)
            inner = cut.feed(text[start:end]) + cut.finish()
            for number, chunk in enumerate(inner):
                made.append(Piece(start + chunk.start, start + chunk.end, chunk.length,
                                  group.distance if number == len(inner) - 1 else None))
        return made

    def records(self, text: str, pieces: Sequence[Piece]) -> list[Chunk]:
        """The chunks: each piece's slice of the document, with the distance at the cut
        after it."""
        return [Chunk(index, piece.start, piece.end, piece.length, text[piece.start:piece.end],
                      distance=piece.distance) for index, piece in enumerate(pieces)]


def joined(text: str, pieces: list[Piece], count: Callable[[str], int], size: int,
           minimum: int) -> list[Piece]:
    """Pieces under the ``minimum`` joined to a neighbour, the shortest first, while the
    joined piece stays within the size: across a cut made at the maximum (inside a
    group) before a cut made by meaning, and across the smaller distance of two such
    cuts. A piece stays short only where neither neighbour can take it, which is
    looked at again whenever a neighbour changes."""
    stuck: set[int] = set()  # the starts of pieces that no neighbour can take
    while len(pieces) > 1:
        small = [(piece.length, number) for number, piece in enumerate(pieces)
                 if piece.length < minimum and piece.start not in stuck]
        if not small:
            break
        _, number = min(small)
        choices = []
        for other in (number - 1, number + 1):
            if 0 <= other < len(pieces):
                before, after = sorted((number, other))
                first, last = pieces[before], pieces[after]
                length = count(text[first.start:last.end])
                if length <= size:
                    # A cut at the maximum (None) is no cut by meaning: undone first.
                    cut = -1.0 if first.distance is None else first.distance
                    choices.append((cut, before, Piece(first.start, last.end, length,
                                                       last.distance)))
        if not choices:
            stuck.add(pieces[number].start)
            continue
        _, before, piece = min(choices, key=lambda choice: choice[0])
        pieces[before:before + 2] = [piece]
        # Its neighbours may now take a short piece they could not take before.
        for other in (before - 1, before, before + 1):
            if 0 <= other < len(pieces):
                stuck.discard(pieces[other].start)
    return pieces



def embed_ahead(settings: SettingsView, texts: Sequence[str]) -> None:
    """Embed the windows of several documents, about to be cut with ``settings``, in
    one call: the model's batches are then filled across documents and sorted by
    length over all of them, and each document's cut finds its windows' vectors in
    the model's cache (``chunkd.embeddings.models.Cached``) instead of calling the model with
    its own few."""
    splitter = SemanticSplitter(settings)
    windows: list[str] = []
    for text in texts:
        sentences = (langchain_sentences(text) if splitter.langchain
                     else chunkd_sentences(text))
        # The documents that ``groups`` and ``langchain_groups`` embed at all.
        if len(sentences) >= 2 and not (splitter.langchain and len(sentences) == 2
                                        and splitter.rule == "gradient"):
            windows += splitter.windows(text, sentences)
    if windows:
        splitter.embedder.embed(windows)


def chunkd_sentences(text: str) -> list[Sentence]:
    """chunkd's ``sentences`` units (docs/strategies.md), white space trimmed."""
    from chunkd.kernel.chosen import SentenceWindows

    units = SentenceWindows(1, 0)
    return [Sentence(chunk.start, chunk.end) for chunk in units.feed(text) + units.finish()]


def langchain_sentences(text: str) -> list[Sentence]:
    """``re.split(r"(?<=[.?!])\\s+", text)``'s pieces, as ranges (the last may be empty)."""
    sentences, start = [], 0
    for match in LANGCHAIN_SENTENCE_END.finditer(text):
        sentences.append(Sentence(start, match.start()))
        start = match.end()
    sentences.append(Sentence(start, len(text)))
    return sentences


def cosine_distances(vectors: numpy.ndarray) -> numpy.ndarray:
    """1 - the cosine similarity of each row and the next, in float64 (as LangChain
    computes it from the vectors' float values)."""
    import numpy

    rows = vectors.astype(numpy.float64)
    norms = numpy.linalg.norm(rows, axis=1)
    similarity = numpy.einsum("ij,ij->i", rows[:-1], rows[1:]) / (norms[:-1] * norms[1:])
    return 1.0 - similarity


def threshold(distances: numpy.ndarray, rule: str,
              amount: float) -> tuple[numpy.ndarray, float | None]:
    """What the rule compares (the distances, or their gradient) and the threshold it
    compares with (LangChain's ``_calculate_breakpoint_threshold``); None where the
    distances are too few for the rule (gradient needs two)."""
    import numpy

    if rule == "percentile":
        return distances, float(numpy.percentile(distances, amount))
    if rule == "standard_deviation":
        return distances, float(numpy.mean(distances) + amount * numpy.std(distances))
    if rule == "interquartile":
        first, third = numpy.percentile(distances, [25, 75])
        return distances, float(numpy.mean(distances) + amount * (third - first))
    if len(distances) < 2:
        return distances, None
    values = numpy.gradient(distances, range(len(distances)))
    return values, float(numpy.percentile(values, amount))


def breakpoints(distances: numpy.ndarray, rule: str, amount: float) -> list[int]:
    """The sentences after which a chunk ends: where the rule's value is strictly above
    its threshold."""
    import numpy

    values, limit = threshold(distances, rule, amount)
    if limit is None:
        return []
    return [int(number) for number in numpy.flatnonzero(values > limit)]
