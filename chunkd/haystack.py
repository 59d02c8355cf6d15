"""A Haystack document splitter: chunkd's chunks as Haystack ``Document``s, with exact
offsets and ids that survive edits.

    from chunkd.haystack import ChunkdDocumentSplitter
    splitter = ChunkdDocumentSplitter(chunk_size=300, chunk_overlap=30, unit="tokens")
    chunks = splitter.run(documents=documents)["documents"]

The settings are ``chunkd.arrow.Chunker``'s keywords (``chunk_size``, ``chunk_overlap``,
``unit``, ``strategy``, ``parent_size``, ``count_tokens``, ...). Each chunk's ``meta``
has its source's meta, then ``source_id`` (the source's ``id``), ``split_id`` (its
number in the source), ``split_idx_start`` (``content == source.content[
split_idx_start:split_idx_start + len(content)]``, always), ``page_number`` (the page of
its first character that is not white space, counting form feeds, as Haystack's
splitters do) and ``last_page`` where the source has form feeds, and chunkd's fields
(``chunkd.integration.metadata``). Its ``id`` is the chunk's ``chunk_id``
(``chunkd.model.ids``) in the document that the source's ``meta["file_path"]`` names (the
field Haystack's converters fill; ``name_field``), else its ``id``: the same in every
run, and kept by every chunk whose text an edit did not touch, so that a
``DocumentWriter`` with ``DuplicatePolicy.OVERWRITE`` replaces only what changed. With
``parent_size``, the parents come too, each before its children, with the meta fields
of Haystack's ``HierarchicalDocumentSplitter`` (``__parent_id``, ``__children_ids``,
``__level``, ``__block_size``).

The component serialises as its settings (``to_dict``/``from_dict``), so a pipeline
that holds it is saved and loaded as YAML (``Pipeline.dumps``/``Pipeline.loads``).

Needs Haystack: ``pip install '.[haystack]'`` from chunkd's folder.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as error:  # the optional extra is missing
    raise ImportError("chunkd.haystack needs Haystack: pip install 'haystack-ai>=3.4'",
                      name=error.name) from None

from chunkd.integration import WholeDocumentChunker, metadata, parent_ids

__all__ = ["ChunkdDocumentSplitter"]


@component
class ChunkdDocumentSplitter:
    """Splits documents into chunkd's chunks (see the module's docstring).

    ``name_field``: the meta field that names a document for its chunks' ids (None: the
    document's ``id``, which Haystack makes from its content unless it is given, so
    that an edit changes every id); a document without it is named by its ``id``. A
    document whose content is empty gives no chunk; one without content is a
    ``ValueError``."""

    def __init__(self, chunk_size: int | None = None, chunk_overlap: int | None = None, *,
                 name_field: str | None = "file_path", **settings: Any) -> None:
        self.chunk_size, self.chunk_overlap = chunk_size, chunk_overlap
        self.name_field = name_field
        self.settings = settings
        self._chunker = WholeDocumentChunker(chunk_size, chunk_overlap, **settings)

    def to_dict(self) -> dict[str, Any]:
        """The component as its settings, for a pipeline's YAML."""
        return default_to_dict(self, chunk_size=self.chunk_size,
                               chunk_overlap=self.chunk_overlap, name_field=self.name_field,
                               **self.settings)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChunkdDocumentSplitter:
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """The chunks of every document, in order."""
        if not isinstance(documents, list) or not all(
                isinstance(document, Document) for document in documents):
            raise TypeError("ChunkdDocumentSplitter takes a list of Haystack Documents")
        chunks: list[Document] = []
        for document in documents:
            if document.content is None:
                raise ValueError(f"document {document.id} has no text content "
                                 "(ChunkdDocumentSplitter splits text)")
            chunks += self._split(document)
        return {"documents": chunks}

    def _split(self, source: Document) -> list[Document]:
        text = source.content
        assert text is not None
        named = source.meta.get(self.name_field) if self.name_field is not None else None
        name = named if named is not None else source.id
        found = self._chunker.chunks(text, name, name if isinstance(name, str) else None,
                                     source.meta.get("mime_type"))
        parents = parent_ids(found, name)
        made: list[Document] = []
        family: dict[int, Document] = {}  # each parent's Document, by its index
        for number, chunk in enumerate(found):
            assert chunk.chunk_id is not None
            meta = {**deepcopy(source.meta), "source_id": source.id, "split_id": number,
                    "split_idx_start": chunk.start, **metadata(chunk)}
            parent = chunk.parent
            if parent is not None:
                if parent.index not in family:
                    family[parent.index] = Document(
                        id=parents[parent.index], content=text[parent.start:parent.end],
                        meta={**deepcopy(source.meta), "source_id": source.id,
                              "split_id": parent.index, "split_idx_start": parent.start,
                              "index": parent.index, "length": parent.length,
                              "__parent_id": None, "__children_ids": [], "__level": 1,
                              "__block_size": self._chunker.settings.parent_size})
                    made.append(family[parent.index])
                family[parent.index].meta["__children_ids"].append(chunk.chunk_id)
                meta.update({"__parent_id": parents[parent.index], "__children_ids": [],
                             "__level": 2, "__block_size": self._chunker.settings.chunk_size})
            made.append(Document(id=chunk.chunk_id, content=text[chunk.start:chunk.end],
                                 meta=meta))
        return made
