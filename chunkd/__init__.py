"""chunkd: exact, streaming text chunking for RAG.

    chunkd.split_text(text, chunk_size=300, chunk_overlap=30, unit="tokens")
    splitter = chunkd.Splitter(200, strategy="words")   # feed(block) ... finish()

The recursive strategy is chunk for chunk LangChain's RecursiveCharacterTextSplitter;
the others are described in ``chunkd.strategies`` and docs/strategies.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from chunkd.model.version import __version__

if TYPE_CHECKING:
    from chunkd.model.chunk import Chunk

__all__ = ["Chunk", "Parent", "SEPARATORS", "STRATEGIES", "Settings", "SettingsError",
           "Splitter", "split_text", "__version__"]

#: Names imported when first used, so that ``import chunkd.cli`` loads nothing heavy:
#: the command line installs its signal handlers before the kernel and the tokenizer
#: are imported (a Ctrl-C or a SIGHUP during start-up is then handled, not fatal).
_FROM_MODULE = {"SEPARATORS": "chunkd.kernel.splitting", "Chunk": "chunkd.model.chunk",
                "Parent": "chunkd.model.chunk", "Settings": "chunkd.settings",
                "SettingsError": "chunkd.settings"}


def __getattr__(name: str) -> object:
    if name == "STRATEGIES":  # the strategies' names
        value: object = tuple(importlib.import_module("chunkd.strategies").REGISTRY)
    elif name in _FROM_MODULE:
        value = getattr(importlib.import_module(_FROM_MODULE[name]), name)
    else:
        raise AttributeError(f"module 'chunkd' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class Splitter:
    """An incremental splitter for one document at a time: ``feed`` takes the next
    piece of text and returns the chunks now final, ``finish`` the last ones (and
    readies the splitter for the next document). Memory stays bounded by the chunk
    size, and the chunks do not depend on how the document is cut into pieces.

    The keywords are ``Settings``' (``unit``, ``strategy``, ``count_tokens``, ...);
    ``chunk_size`` and ``chunk_overlap`` default to the strategy's. With ``ids=True``
    each chunk gets its id (``chunkd.model.ids``) in the document ``begin`` names (a document
    without a name if it was not called)."""

    def __init__(self, chunk_size: int | None = None, chunk_overlap: int | None = None,
                 **options) -> None:
        from chunkd.model.ids import ChunkIds
        from chunkd.settings import Settings
        from chunkd.strategies import build

        self.settings = Settings.from_keywords(chunk_size, chunk_overlap, **options)
        self._chunker = build(self.settings)
        self._ids = ChunkIds if self.settings.ids else None
        self._identify = self._ids(None) if self._ids else list

    def begin(self, name: object = None, media_type: str | None = None) -> None:
        """Start a document: its name (as records give it) and media type, for
        strategies that choose by document and for ids; without it, a document is unnamed."""
        from chunkd.strategies import Source, begin

        begin(self._chunker, Source(name, media_type))
        if self._ids:
            self._identify = self._ids(name)

    def feed(self, text: str) -> list[Chunk]:
        """Take the next piece of the document; return the chunks now final."""
        return self._identify(self._chunker.feed(text))

    def finish(self) -> list[Chunk]:
        """End the document; return its remaining chunks."""
        chunks = self._identify(self._chunker.finish())
        if self._ids:  # the next document counts repeated texts afresh
            self._identify = self._ids(None)
        return chunks


def split_text(text: str, chunk_size: int | None = None, chunk_overlap: int | None = None,
               **options) -> list[Chunk]:
    """Split one whole document; the keywords are ``Splitter``'s."""
    splitter = Splitter(chunk_size, chunk_overlap, **options)
    return splitter.feed(text) + splitter.finish()
