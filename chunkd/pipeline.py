"""The path of one document, written once for every front end: its bytes to its text (a
PDF, HTML or DOCX document extracted, any other decoded as UTF-8), that text to the
strategy's chunks, and each chunk to its id.

    pipeline = Pipeline(settings, limits)
    document = pipeline.read(name, head, blocks, where)
    for chunks in pipeline.chunks(document):
        ...

What surrounds it stays with each front end: where the bytes come from and how much of
them may be read (the daemon's folders, sync's files, the filter's inputs, Arrow's
columns), and where the chunks go (a result, a store, a writer, a table).

One chunker serves a front end's documents one after another. A document that fails
anywhere (its bytes, its extraction, the strategy, the model, or whatever the front end
does with its chunks meanwhile) leaves that chunker in the middle of it: the next
document gets a new one, so that nothing of the failed one carries over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from chunkd.inputs import FORMATS, Extracted, Limits, detect, extract_source
from chunkd.inputs.readers import decode_blocks
from chunkd.model.chunk import Chunk
from chunkd.model.chunker import Source
from chunkd.settings import Settings
from chunkd.strategies import build, chunk_blocks


#: ``Pipeline.chunks``' default scope of the ids: the document's source's name.
SOURCE_NAME: object = object()


class DocumentText(NamedTuple):
    """A document as a chunker reads it: what it learns first (``source``), its text in
    blocks, and what the extraction of a PDF, HTML or DOCX file gave (None for text)."""

    source: Source
    blocks: Iterable[str]
    extracted: Extracted | None = None


class Pipeline:
    """A front end's documents to their chunks, with their ids if ``ids`` (by default,
    if the settings ask); a PDF, HTML or DOCX document is extracted within ``limits``."""

    def __init__(self, settings: Settings, limits: Limits = Limits(),
                 ids: bool | None = None) -> None:
        self.settings, self.limits = settings, limits
        self.ids = settings.ids if ids is None else ids
        self._chunker = build(settings)
        #: False while a document is chunked, and after one that did not finish.
        self._between_documents = True

    def read(self, name: object, head: bytes, blocks: Iterable[bytes], where: str,
             beat: Callable[[], None] | None = None) -> DocumentText:
        """The document ``name`` (any JSON value) whose bytes ``blocks`` gives, and whose
        first ``HEAD_BYTES`` are ``head``: one of a registered format is read whole and
        extracted (``beat`` is called while that runs), any other decoded as its blocks
        come. Its extraction or decoding fails with an ``InputError`` naming ``where``."""
        return read_document(name, head, blocks, where, self.settings.errors, self.limits, beat)

    def chunks(self, document: DocumentText, scope: object = SOURCE_NAME
               ) -> Iterator[list[Chunk]]:
        """The document's chunks, those that each block of its text makes final, then
        the last ones; their ids are scoped by ``scope``, by default the source's name
        (a framework integration scopes them by its own ``doc``)."""
        if not self._between_documents:  # the last document failed half-way
            self._chunker = build(self.settings)
        identify: Callable[[list[Chunk]], list[Chunk]] | None = None
        if self.ids:
            from chunkd.model.ids import ChunkIds  # only here: hashing and orjson start slowly

            identify = ChunkIds(document.source.name if scope is SOURCE_NAME else scope)
        self._between_documents = False
        for chunks in chunk_blocks(self._chunker, document.source, document.blocks):
            yield identify(chunks) if identify is not None else chunks
        self._between_documents = True


def read_document(name: object, head: bytes, blocks: Iterable[bytes], where: str,
                  errors: str, limits: Limits, beat: Callable[[], None] | None = None,
                  here: bool = False) -> DocumentText:
    """``Pipeline.read`` without a pipeline (its text decoded with ``errors``, the
    settings' ``errors``): for a front end that reads a document apart from chunking it
    (``chunkd serve``, which extracts ``here``, in the split's bounded process)."""
    if detect(head, name if isinstance(name, str) else None, None) in FORMATS:
        data = b"".join(blocks)
        found = extract_source(data, name, where, limits, beat, here)
        if found is not None:
            source, extracted = found
            return DocumentText(source, [extracted.text], extracted)
        blocks = [data]  # its head looked like a format (any ZIP does), the whole not
    return DocumentText(Source(name), decode_blocks(blocks, where, errors))
