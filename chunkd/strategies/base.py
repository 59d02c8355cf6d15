"""What a strategy is: the ``Strategy`` base class, which builds a ``DocumentChunker``
(``chunkd.model.chunker``), the registry from a name to its class, and what a strategy
reads of its settings (``SettingsView``, ``DraftView``: protocols that
``chunkd.settings.Settings`` and ``chunkd.settings.Draft`` fulfil). The strategies
sit below ``chunkd.settings``, which imports them and never the other way, not even
for types; their modules import this one, never the package, so that the package can
import them without a circle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from chunkd.model.chunker import DocumentChunker
from chunkd.model.errors import SettingsError

if TYPE_CHECKING:
    from chunkd.options import Option
    from chunkd.model.chunk import Chunk
    from chunkd.model.length import LengthUnit

T = TypeVar("T")


class SettingsView(Protocol):
    """What a strategy reads of ``chunkd.settings.Settings``."""

    @property
    def strategy(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def overlap(self) -> int: ...
    @property
    def tokenizer(self) -> str: ...
    @property
    def parent_size(self) -> int | None: ...
    @property
    def embed_text(self) -> bool: ...
    @property
    def count_tokens(self) -> bool: ...
    @property
    def chunk_size(self) -> int: ...
    @property
    def chunk_overlap(self) -> int: ...
    @property
    def length_unit(self) -> str: ...
    @property
    def measure(self) -> LengthUnit: ...
    @property
    def token_measure(self) -> LengthUnit: ...
    def __getitem__(self, option: Option[T]) -> T: ...
    def set_options(self) -> list[Option[Any]]: ...
    def replace(self, **changes: Any) -> SettingsView: ...
    def parent_settings(self) -> SettingsView: ...


class DraftView(Protocol):
    """What a strategy's option reads and updates of ``chunkd.settings.Draft``, the
    settings being made from flags."""

    given: Mapping[str, Any]
    values: dict[str, Any]

    @property
    def strategy(self) -> str: ...
    @property
    def kind(self) -> type[Strategy]: ...


class Strategy:
    """A way to cut documents; subclasses register themselves with ``@register``."""

    name: ClassVar[str]
    #: The units its size may be given in; the first is the default.
    units: ClassVar[tuple[str, ...]]
    default_size: ClassVar[int]
    #: A window strategy takes ``--size``; the others ``--chars`` or ``--tokens``.
    window: ClassVar[bool] = False
    #: Whether its chunks may overlap (``overlap``); if not, it takes none but 0.
    overlaps: ClassVar[bool] = True
    #: Whether it cuts as the text streams, in memory bounded by its size; if not, it
    #: holds each document whole until ``finish``.
    streams: ClassVar[bool] = True
    #: Optional chunk fields (``chunkd.model.chunk.OPTIONAL_FIELDS``) its records always carry.
    fields: ClassVar[tuple[str, ...]] = ()
    #: Whether it has a parent/child mode (``parent_size``): children are this strategy's
    #: chunks of each of its chunks at the parent size.
    parents: ClassVar[bool] = False
    #: Whether its splitter fills ``embed_text`` itself (fitted to the size); for the
    #: others ``build`` adds it (``EmbedText``).
    embeds: ClassVar[bool] = False
    #: The file names ``chunkd watch`` takes by default besides text files (globs).
    include: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def default_overlap(cls, size: int) -> int:
        return 0

    @classmethod
    def model_tokenizer(cls, values: Mapping[str, Any]) -> tuple[str, str] | None:
        """The tokenizer of the model these settings (``values``, by option name) embed
        the chunks with, where the strategy embeds them itself and the model has one on
        disk: a spec for ``chunkd.units.resolve`` and the option that names the model.
        Sizes then count in its tokens, within its window, unless ``--tokenizer`` says
        otherwise. By default, the model ``--vectors`` embeds the chunks with."""
        from chunkd.embeddings.selection import model_tokenizer

        return model_tokenizer(values) if values.get("vectors") else None

    @classmethod
    def check(cls, settings: SettingsView) -> None:
        """Refuse settings this strategy cannot honour (``SettingsError``)."""

    @classmethod
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        raise NotImplementedError


class DocumentAtOnce:
    """A ``DocumentChunker`` for a strategy that cuts a document only once it has all of
    it (it compares the whole, or asks about it): ``feed`` holds the text, ``finish``
    gives it to ``chunks``."""

    def __init__(self) -> None:
        self.held: list[str] = []

    def feed(self, text: str) -> list[Chunk]:
        self.held.append(text)
        return []

    def finish(self) -> list[Chunk]:
        text = "".join(self.held)
        self.held = []
        return self.chunks(text)

    def chunks(self, text: str) -> list[Chunk]:
        """The chunks of one whole document."""
        raise NotImplementedError


REGISTRY: dict[str, type[Strategy]] = {}


def register(kind: type[Strategy]) -> type[Strategy]:
    REGISTRY[kind.name] = kind
    return kind


def strategy_class(name: str) -> type[Strategy]:
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise SettingsError(f"unknown strategy {name!r}; choose one of "
                            f"{', '.join(REGISTRY)}") from None
