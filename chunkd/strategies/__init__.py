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

from collections.abc import Iterable, Iterator
from functools import partial
from operator import add
from typing import TYPE_CHECKING

from chunkd.chunk import Chunk, Parent
from chunkd.strategies.base import REGISTRY, Chunker, Strategy, register, strategy_class

__all__ = ["REGISTRY", "Chunker", "Strategy", "build", "chunk_blocks", "register",
           "strategy_class"]

if TYPE_CHECKING:
    from chunkd.settings import Settings


def build(settings: Settings) -> Chunker:
    """The splitter for ``settings``: the strategy's, as children of parents if asked,
    with exact token counts added if asked."""
    kind = strategy_class(settings.strategy)
    chunker = kind.splitter(settings)
    if settings.parent_size is not None:
        chunker = ParentChild(kind.splitter(settings.parent_settings()), chunker)
    if settings.embed_text and not kind.embeds:
        chunker = EmbedText(chunker)
    if settings.count_tokens:
        chunker = TokenCounting(chunker, same_as_length=settings.length_unit == "tokens")
    return chunker


class EmbedText:
    """Adds ``embed_text``, what to embed for a chunk of a headed document: its heading
    path (``A > B > C``), a blank line, then its text (the text alone where there are
    no headings); ``text`` stays the exact document slice. For strategies whose size
    does not count what the path adds (sections); the markdown strategy fits the path
    into its size itself (``embeds``)."""

    def __init__(self, chunker: Chunker) -> None:
        self.chunker = chunker

    @staticmethod
    def _with_headings(chunks: list[Chunk]) -> list[Chunk]:
        return [chunk._replace(embed_text=" > ".join(chunk.headings) + "\n\n" + chunk.text
                               if chunk.headings else chunk.text) for chunk in chunks]

    def feed(self, text: str) -> list[Chunk]:
        return self._with_headings(self.chunker.feed(text))

    def finish(self) -> list[Chunk]:
        return self._with_headings(self.chunker.finish())


class TokenCounting:
    """Adds ``tokens``, the exact cl100k_base count of each chunk's text."""

    def __init__(self, chunker: Chunker, same_as_length: bool) -> None:
        from chunkd.units import resolve

        self.chunker = chunker
        self.count = resolve("cl100k_base").count
        self.same_as_length = same_as_length  # the length is already that count

    def _counted(self, chunks: list[Chunk]) -> list[Chunk]:
        if self.same_as_length:
            return [chunk._replace(tokens=chunk.length) for chunk in chunks]
        count = self.count
        return [chunk._replace(tokens=count(chunk.text)) for chunk in chunks]

    def feed(self, text: str) -> list[Chunk]:
        return self._counted(self.chunker.feed(text))

    def finish(self) -> list[Chunk]:
        return self._counted(self.chunker.finish())


class ParentChild:
    """Parent/child chunking (LangChain's ParentDocumentRetriever): the parents are the
    chunks of the document at the parent settings; the children, the chunks of each
    parent's text at the child settings, with document offsets and their parent.
    Children of overlapping parents are kept as they are (they may repeat text).

    Both are recursive splitters (``chunkd.core.RecursiveSplitter``). A chunk joined
    with a dropped separator (``keep_separator`` False) is no slice of its source, so
    they record where its code points come from (``joined``): a child's offsets in its
    parent's text are mapped to the document through that, code point by code point."""

    def __init__(self, parents: Chunker, children: Chunker) -> None:
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
    def _joined(splitter: Chunker) -> dict:
        """The joined chunks a splitter made since last asked: index -> ``Joined``."""
        joined = dict(splitter.joined)  # type: ignore[attr-defined]
        splitter.joined.clear()         # type: ignore[attr-defined]
        return joined

    def feed(self, text: str) -> list[Chunk]:
        return self._children_of(self.parents.feed(text))

    def finish(self) -> list[Chunk]:
        children = self._children_of(self.parents.finish())
        self.next_index = 0
        return children


def chunk_blocks(chunker: Chunker, blocks: Iterable[str]) -> Iterator[list[Chunk]]:
    """Chunk one document given as text blocks; yields the chunks that each block
    makes final, then the last ones."""
    for block in blocks:
        chunks = chunker.feed(block)
        if chunks:
            yield chunks
    yield chunker.finish()


# The built-in strategies register themselves on import, in this order.
from chunkd.strategies import recursive  # noqa: E402,F401,I001
from chunkd.strategies import windows  # noqa: E402,F401
from chunkd.strategies import markdown  # noqa: E402,F401
