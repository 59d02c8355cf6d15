"""The strategies: a registry from a name to the class that knows how to cut.

A strategy is one registered subclass of ``Strategy``: its name, the units its size
may be given in, its defaults, its own checks of the settings, and a ``splitter``
factory that returns an object with ``feed(text) -> list[Chunk]`` and
``finish() -> list[Chunk]`` (chunks in document order, final as soon as returned; the
result must not depend on how the document is cut into pieces). Every front end
(the filter, the daemon, the API, ...) gets its chunks through ``build``, which adds
what the settings ask of any strategy (parents, ``embed_text``, token counts). The base
class and the registry live in ``chunkd.strategies.base``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from operator import add
from typing import TYPE_CHECKING, Any

from chunkd.model.chunk import Chunk, Parent
from chunkd.model.errors import SettingsError
from chunkd.options import Flag, Option, not_unicode, register_option
from chunkd.model.chunker import DocumentChunker, Source, begin
from chunkd.strategies.base import REGISTRY, Strategy, register, strategy_class

__all__ = ["REGISTRY", "DocumentChunker", "Source", "Strategy", "begin", "build", "chunk_blocks",
           "register", "strategy_class"]

if TYPE_CHECKING:
    from chunkd.strategies.base import SettingsView
    from chunkd.model.length import LengthUnit


def build(settings: SettingsView) -> DocumentChunker:
    """The splitter for ``settings``: the strategy's, as children of parents if asked,
    with exact token counts added if asked, then made by each option set that says how
    (``Option.builds``), the last declared outermost."""
    make: Callable[[SettingsView], DocumentChunker] = _strategy_chunker
    for option in settings.set_options():
        if option.builds is not None:
            make = partial(option.builds, inner=make)
    return make(settings)


def _strategy_chunker(settings: SettingsView) -> DocumentChunker:
    kind = strategy_class(settings.strategy)
    chunker = kind.splitter(settings)
    if settings.parent_size is not None:
        chunker = ParentChild(kind.splitter(settings.parent_settings()), chunker)
    if settings.embed_text and not kind.embeds:
        chunker = EmbedText(chunker)
    if settings.count_tokens:
        chunker = TokenCounting(chunker, settings.token_measure,
                                same_as_length=settings.length_unit == "tokens")
    return PageNumbers(chunker)


class Wrapper:
    """A chunker that changes the chunks of the one inside it (and passes it each
    document's ``Source``)."""

    def __init__(self, chunker: DocumentChunker) -> None:
        self.chunker = chunker

    def changed(self, chunks: list[Chunk]) -> list[Chunk]:
        raise NotImplementedError

    def begin(self, source: Source) -> None:
        begin(self.chunker, source)

    def feed(self, text: str) -> list[Chunk]:
        return self.changed(self.chunker.feed(text))

    def finish(self) -> list[Chunk]:
        return self.changed(self.chunker.finish())


class EmbedText(Wrapper):
    """Adds ``embed_text``, what to embed for a chunk of a headed document: its heading
    path (``A > B > C``), a blank line, then its text (the text alone where there are
    no headings); ``text`` stays the exact document slice. For strategies whose size
    does not count what the path adds (sections); the markdown strategy fits the path
    into its size itself (``embeds``)."""

    def changed(self, chunks: list[Chunk]) -> list[Chunk]:
        return [chunk if chunk.embed_text is not None  # the strategy's own, fitted
                else chunk._replace(embed_text=" > ".join(chunk.headings) + "\n\n" + chunk.text
                                    if chunk.headings else chunk.text) for chunk in chunks]


class PrefixedEmbedText(Wrapper):
    """Puts ``embed_prefix`` before each chunk's ``embed_text`` (its text where it has
    none): the fixed text an embedding model wants before a passage, such as E5's
    "passage: ". The chunks inside are cut at the size less the prefix's length, so the
    prefix counts within the size."""

    def __init__(self, chunker: DocumentChunker, prefix: str) -> None:
        super().__init__(chunker)
        self.prefix = prefix

    def changed(self, chunks: list[Chunk]) -> list[Chunk]:
        prefix = self.prefix
        return [chunk._replace(embed_text=prefix + (chunk.text if chunk.embed_text is None
                                                     else chunk.embed_text))
                for chunk in chunks]


def _prefix_length(prefix: str, values: Mapping[str, Any]) -> int:
    """The length of ``embed_prefix`` in the size's unit."""
    from chunkd.units import measure

    return measure(values["unit"], values["tokenizer"]).count(prefix)


def _check_prefix(value: Any, name: str) -> str:
    if not isinstance(value, str) or not_unicode([value]):
        raise SettingsError(f"{name} must be Unicode text, not {value!r}")
    return value


def _room_for_prefix(values: Mapping[str, Any], spell: Callable[[str], str]) -> None:
    """The size less the prefix must still be more than the overlap."""
    prefix, size, overlap, unit = (values["embed_prefix"], values["size"], values["overlap"],
                                   values["unit"])
    length = _prefix_length(prefix, values) if prefix else 0
    if prefix and size - length <= overlap:
        raise SettingsError(f"{spell('embed_prefix')} takes {length} of the size's {size} "
                            f"{unit}, which leaves the chunks no more than the overlap "
                            f"({overlap}); write a larger size or a smaller overlap")


def _with_prefix(settings: SettingsView, inner: Callable[[SettingsView], DocumentChunker]) -> DocumentChunker:
    prefix = settings[EMBED_PREFIX]
    cut = settings.replace(size=settings.size - settings.measure.count(prefix),
                           embed_prefix="")
    return PrefixedEmbedText(inner(cut), prefix)


#: A fixed text before each chunk's ``embed_text``, counted within the size.
EMBED_PREFIX = register_option(Option[str](
    "", "a fixed text before each chunk's embed_text", name="embed_prefix",
    check=_check_prefix, check_with=_room_for_prefix, fields=("embed_text",),
    builds=_with_prefix, applies=lambda kind: not kind.window,
    refusal="{option} counts within a size in chars or tokens: it is for the recursive "
            "and markdown strategies, not {strategy}", flags=(
        Flag("--embed-prefix", "put TEXT before each chunk's \"embed_text\" (its text when "
                               "it has no headings), counted within the size: the text an "
                               "embedding model wants before a passage, such as E5's "
                               "'passage: '", metavar="TEXT", parse=str),)), after="embed_text")


class TokenCounting(Wrapper):
    """Adds ``tokens``, the exact count of each chunk's text in the tokenizer's tokens."""

    def __init__(self, chunker: DocumentChunker, unit: LengthUnit, same_as_length: bool) -> None:
        super().__init__(chunker)
        self.count = unit.count
        self.same_as_length = same_as_length  # the length is already that count

    def changed(self, chunks: list[Chunk]) -> list[Chunk]:
        if self.same_as_length:
            return [chunk._replace(tokens=chunk.length) for chunk in chunks]
        count = self.count
        return [chunk._replace(tokens=count(chunk.text)) for chunk in chunks]


class PageNumbers(Wrapper):
    """Adds ``pages`` to the chunks of a document whose ``Source`` has page starts (a
    PDF's text); the chunks of any other document pass unchanged."""

    page_starts: tuple[int, ...] | None = None

    def begin(self, source: Source) -> None:
        self.page_starts = source.page_starts
        super().begin(source)

    def changed(self, chunks: list[Chunk]) -> list[Chunk]:
        starts = self.page_starts
        if starts is None:
            return chunks
        return [chunk._replace(pages=page_span(starts, chunk)) for chunk in chunks]

    def finish(self) -> list[Chunk]:
        chunks = super().finish()
        self.page_starts = None  # the next document has none unless its Source says
        return chunks


def page_span(page_starts: tuple[int, ...], chunk: Chunk) -> tuple[int, int]:
    """The first and last page (1-based) of the chunk's text: of its first and last
    character that is not white space (a page break is white space), so that a chunk
    that only touches a page's break does not name that page."""
    text = chunk.text if chunk.propositions is None else ""  # no slice: its span whole
    first = chunk.start + (len(text) - len(text.lstrip()))
    last = chunk.end - 1 - (len(text) - len(text.rstrip()))
    if last < first:  # all white space: where it lies
        first, last = chunk.start, max(chunk.start, chunk.end - 1)
    return bisect_right(page_starts, first), bisect_right(page_starts, last)


class ParentChild:
    """Parent/child chunking (LangChain's ParentDocumentRetriever): the parents are the
    chunks of the document at the parent settings; the children, the chunks of each
    parent's text at the child settings, with document offsets and their parent.
    Children of overlapping parents are kept as they are (they may repeat text).

    Both are recursive splitters (``chunkd.kernel.chosen.RecursiveSplitter``). A chunk joined
    with a dropped separator (``keep_separator`` False) is no slice of its source, so
    they record where its code points come from (``joined``): a child's offsets in its
    parent's text are mapped to the document through that, code point by code point."""

    def __init__(self, parents: DocumentChunker, children: DocumentChunker) -> None:
        self.parents = parents
        self.children = children
        parents.joined = []      # type: ignore[attr-defined]
        children.joined = []     # type: ignore[attr-defined]
        self.next_index = 0

    def _children_of(self, parents: list[Chunk]) -> list[Chunk]:
        made = []
        joined_parents = self._joined(self.parents)
        for parent in parents:
            record = Parent(parent.index, parent.start, parent.end, parent.length, parent.text)
            children = self.children.feed(parent.text) + self.children.finish()
            joined_children = self._joined(self.children)
            joined_parent = joined_parents.get(parent.index)
            # The document offset of each offset in the parent's text.
            place = partial(add, parent.start) if joined_parent is None else joined_parent.offset
            for child in children:
                joined_child = joined_children.get(child.index)
                if joined_child is not None:
                    start = joined_child.offset(0, place)
                    end = joined_child.offset(len(child.text) - 1, place) + 1
                elif joined_parent is None:
                    start, end = parent.start + child.start, parent.start + child.end
                else:
                    start, end = place(child.start), place(child.end - 1) + 1
                made.append(child._replace(index=self.next_index, start=start, end=end,
                                           parent=record))
                self.next_index += 1
        return made

    @staticmethod
    def _joined(splitter: DocumentChunker) -> dict:
        """The joined chunks a splitter made since last asked: index -> ``Joined``."""
        joined = dict(splitter.joined)  # type: ignore[attr-defined]
        splitter.joined.clear()         # type: ignore[attr-defined]
        return joined

    def begin(self, source: Source) -> None:
        begin(self.parents, source)
        begin(self.children, source)

    def feed(self, text: str) -> list[Chunk]:
        return self._children_of(self.parents.feed(text))

    def finish(self) -> list[Chunk]:
        children = self._children_of(self.parents.finish())
        self.next_index = 0
        return children


def chunk_blocks(chunker: DocumentChunker, source: Source,
                 blocks: Iterable[str]) -> Iterator[list[Chunk]]:
    """Chunk one document, ``source``, given as text blocks; yields the chunks that each
    block makes final, then the last ones."""
    begin(chunker, source)
    for block in blocks:
        chunks = chunker.feed(block)
        if chunks:
            yield chunks
    yield chunker.finish()


# The built-in strategies register themselves on import, in this order.
from chunkd.strategies import recursive  # noqa: E402,F401,I001
from chunkd.strategies import windows  # noqa: E402,F401
from chunkd.strategies import markdown  # noqa: E402,F401
from chunkd.strategies import semantic  # noqa: E402,F401
from chunkd.strategies import code  # noqa: E402,F401
from chunkd.strategies import auto  # noqa: E402,F401
from chunkd.strategies import propositions  # noqa: E402,F401
from chunkd.strategies import llm  # noqa: E402,F401
