"""What every front end hands a chunker: the ``Source`` of the document whose text comes
next, and the ``DocumentChunker`` protocol every strategy's splitter fulfils."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from chunkd.model.chunk import Chunk


class Source(NamedTuple):
    """What a chunker learns of a document before its text (``begin``): its name as
    the records give it (any JSON value; None: unnamed, as stdin or the API's text),
    its media type when one is known (None: not known), and for a PDF the offset in its
    text where each page starts (``chunkd.inputs``: chunks then carry ``pages``)."""

    name: Any = None
    media_type: str | None = None
    page_starts: tuple[int, ...] | None = None


class DocumentChunker(Protocol):
    """What a strategy builds: an incremental splitter of one document at a time. A
    splitter that chooses by document (a grammar by the file name's extension, a
    strategy by the media type) has also ``begin(source: Source)``, which every front
    end calls before each document's text, through ``begin``."""

    def feed(self, text: str) -> list[Chunk]: ...
    def finish(self) -> list[Chunk]: ...


def begin(chunker: DocumentChunker, source: Source) -> None:
    """Tell ``chunker`` the document whose text comes next, if it asks (``begin``)."""
    learn = getattr(chunker, "begin", None)
    if learn is not None:
        learn(source)
