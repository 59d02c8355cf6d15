"""A LlamaIndex node parser: chunkd's chunks as ``TextNode``s, with exact offsets and
ids that survive edits.

    from chunkd.llamaindex import ChunkdNodeParser
    parser = ChunkdNodeParser(chunk_size=300, chunk_overlap=30, unit="tokens")
    nodes = parser.get_nodes_from_documents(documents)

The settings are ``chunkd.arrow.Chunker``'s keywords (``chunk_size``, ``chunk_overlap``,
``unit``, ``strategy``, ``parent_size``, ``count_tokens``, ...). Each node's
``text == source.text[start_char_idx:end_char_idx]``; its ``id_`` is the chunk's
``chunk_id`` (``chunkd.model.ids``) in a document named by the source's ``id_`` (its
``doc_id``): unique per document, the same in every run, and kept by every chunk whose
text an edit did not touch. Nodes have ``SOURCE``, ``PREVIOUS`` and ``NEXT``
relationships; with ``parent_size`` the parents come too, each before its children,
with ``CHILD`` and ``PARENT`` relationships (``get_leaf_nodes`` gives the children).
chunkd's fields are flat metadata (``chunkd.integration.metadata``); by default the
position fields (``index``, ``length``, ``tokens``, ...) are kept out of the embedded
text and the model's, and the pages out of the embedded text.

LlamaIndex's ``IngestionPipeline`` runs an edited document through every
transformation again, and its cache is keyed by the whole list of nodes: the embedding
model sees every node of the document. ``EmbedChangedNodes`` wraps the model and keeps
each node's embedding by its id, so that only nodes whose embedded text is new are
embedded.

Needs LlamaIndex: ``pip install '.[llamaindex]'`` from chunkd's folder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import Field, PrivateAttr, SerializeAsAny
    from llama_index.core.node_parser import NodeParser
    from llama_index.core.schema import (BaseNode, Document, MetadataMode, NodeRelationship,
                                         RelatedNodeInfo, TextNode, TransformComponent)
    from llama_index.core.storage.kvstore import SimpleKVStore
    from llama_index.core.storage.kvstore.types import BaseKVStore
    from llama_index.core.utils import get_tqdm_iterable
except ImportError as error:  # the optional extra is missing
    raise ImportError("chunkd.llamaindex needs LlamaIndex: pip install 'llama-index-core>=0.14'",
                      name=error.name) from None

from chunkd.integration import (EMBED_EXCLUDED, POSITION_KEYS, WholeDocumentChunker, file_name,
                                metadata, parent_ids)

__all__ = ["ChunkdNodeParser", "EmbedChangedNodes"]


class ChunkdNodeParser(NodeParser):
    """chunkd's chunks as LlamaIndex nodes (see the module's docstring).

    ``excluded_embed_metadata_keys`` and ``excluded_llm_metadata_keys`` name the
    metadata keys kept out of the embedded text and out of the model's; each node
    excludes its document's too. None (the default): chunkd's position fields, and for
    embedding the pages as well. ``id_func`` is not used: the ids are chunkd's."""

    chunk_size: int | None = Field(default=None, description="chunkd's chunk_size")
    chunk_overlap: int | None = Field(default=None, description="chunkd's chunk_overlap")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="chunkd's other settings (unit, strategy, ...)")
    excluded_embed_metadata_keys: list[str] | None = Field(
        default=None, description="metadata keys kept out of the embedded text")
    excluded_llm_metadata_keys: list[str] | None = Field(
        default=None, description="metadata keys kept out of the model's text")
    _chunker: WholeDocumentChunker = PrivateAttr()

    def __init__(self, chunk_size: int | None = None, chunk_overlap: int | None = None, *,
                 settings: dict[str, Any] | None = None,
                 excluded_embed_metadata_keys: list[str] | None = None,
                 excluded_llm_metadata_keys: list[str] | None = None,
                 include_metadata: bool = True, include_prev_next_rel: bool = True,
                 **options: Any) -> None:
        """``options``: chunkd's settings by keyword; ``settings``, the same as a dict
        (as ``to_dict`` writes them). A bad setting raises ``chunkd.SettingsError``."""
        # to_dict writes id_func as its name, which cannot be read back: the ids are
        # chunkd's, so it is not used.
        options.pop("id_func", None)
        options.pop("class_name", None)
        known = {"callback_manager": options.pop("callback_manager")} \
            if "callback_manager" in options else {}
        given = {**(settings or {}), **options}
        chunker = WholeDocumentChunker(chunk_size, chunk_overlap, **given)
        fields: dict[str, Any] = {
            "chunk_size": chunk_size, "chunk_overlap": chunk_overlap, "settings": given,
            "excluded_embed_metadata_keys": excluded_embed_metadata_keys,
            "excluded_llm_metadata_keys": excluded_llm_metadata_keys,
            "include_metadata": include_metadata,
            "include_prev_next_rel": include_prev_next_rel, **known}
        super().__init__(**fields)
        self._chunker = chunker

    @classmethod
    def class_name(cls) -> str:
        return "ChunkdNodeParser"

    def get_nodes_from_documents(self, documents: Sequence[Document],
                                 show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        """The nodes of every document, in order (LlamaIndex's own post-processing,
        which finds each node's offsets again with ``str.find``, is not run: the
        offsets are the chunks')."""
        from llama_index.core.callbacks import CBEventType, EventPayload

        with self.callback_manager.event(
                CBEventType.NODE_PARSING, payload={EventPayload.DOCUMENTS: documents}) as event:
            nodes = self._parse_nodes(documents, show_progress=show_progress)
            event.on_end({EventPayload.NODES: nodes})
        return nodes

    async def aget_nodes_from_documents(self, documents: Sequence[Document],
                                        show_progress: bool = False,
                                        **kwargs: Any) -> list[BaseNode]:
        return self.get_nodes_from_documents(documents, show_progress, **kwargs)

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False,
                     **kwargs: Any) -> list[BaseNode]:
        parsed: list[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Parsing nodes"):
            parsed += self._nodes_of(node)
        return parsed

    def _nodes_of(self, source: BaseNode) -> list[BaseNode]:
        """The nodes of one document (or node): parents before their children."""
        text = source.get_content(metadata_mode=MetadataMode.NONE)
        media_type = source.metadata.get("file_type")
        chunks = self._chunker.chunks(
            text, source.id_, file_name(source.metadata) or source.id_,
            media_type if isinstance(media_type, str) and "/" in media_type else None)
        source_info = source.as_related_node_info()
        inherited = dict(source.metadata) if self.include_metadata else {}
        embed_excluded = _union(source.excluded_embed_metadata_keys,
                                self.excluded_embed_metadata_keys, EMBED_EXCLUDED)
        llm_excluded = _union(source.excluded_llm_metadata_keys,
                              self.excluded_llm_metadata_keys, POSITION_KEYS)

        # A TextNode's own template, else LlamaIndex's default (a node without text).
        template = {"text_template": source.text_template} \
            if isinstance(source, TextNode) else {}

        def node(node_id: str, start: int, end: int, fields: dict[str, Any]) -> TextNode:
            return TextNode(**template,
                id_=node_id, text=text[start:end], start_char_idx=start, end_char_idx=end,
                metadata={**inherited, **fields}, excluded_embed_metadata_keys=embed_excluded,
                excluded_llm_metadata_keys=llm_excluded,
                metadata_separator=source.metadata_separator,
                metadata_template=source.metadata_template,
                relationships={NodeRelationship.SOURCE: source_info})

        parents = parent_ids(chunks, source.id_)
        children: list[TextNode] = []
        family: dict[str, TextNode] = {}  # each parent's node, by its id
        made: list[BaseNode] = []
        for chunk in chunks:
            assert chunk.chunk_id is not None
            child = node(chunk.chunk_id, chunk.start, chunk.end, metadata(chunk))
            if chunk.parent is not None:
                parent_id = parents[chunk.parent.index]
                if parent_id not in family:
                    parent = chunk.parent
                    family[parent_id] = node(parent_id, parent.start, parent.end,
                                             {"index": parent.index, "length": parent.length})
                    family[parent_id].relationships[NodeRelationship.CHILD] = []
                    made.append(family[parent_id])
                parent_node = family[parent_id]
                child.relationships[NodeRelationship.PARENT] = parent_node.as_related_node_info()
                children_of = parent_node.relationships[NodeRelationship.CHILD]
                assert isinstance(children_of, list)
                children_of.append(RelatedNodeInfo(node_id=child.id_))
            children.append(child)
            made.append(child)
        if self.include_prev_next_rel:
            for level in (children, list(family.values())):
                _chain(level)
        return made


def _union(*lists: Sequence[str] | None) -> list[str]:
    """The keys of the source's list and of the first given of the others, in order."""
    source, *choices = lists
    chosen = next((keys for keys in choices if keys is not None), ())
    return list(dict.fromkeys([*(source or ()), *chosen]))


def _chain(nodes: list[TextNode]) -> None:
    """``PREVIOUS`` and ``NEXT`` between neighbours."""
    for before, after in zip(nodes, nodes[1:]):
        before.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=after.id_)
        after.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=before.id_)


class EmbedChangedNodes(TransformComponent):
    """An embedding model as a pipeline step that embeds only the nodes whose embedded
    text is new: each node's embedding is kept in ``kvstore`` under its id with a hash
    of that text (and of the model's settings), and a node with the same id and hash
    gets the kept one. With ``ChunkdNodeParser``'s ids, an edited document's unchanged
    chunks keep theirs; the entries of a document's nodes that are gone are dropped
    when it is embedded again, so the store holds the current nodes only.

    ``kvstore``: any LlamaIndex key-value store (``SimpleKVStore`` in memory, the
    default, which ``persist`` writes to a file; Redis, PostgreSQL, ... from their
    packages). Put it where the embedding model would go in ``transformations``."""

    embed_model: SerializeAsAny[BaseEmbedding]
    kvstore: BaseKVStore = Field(default_factory=SimpleKVStore, exclude=True)
    collection: str = Field(default="chunkd_embeddings",
                            description="the store's collection of kept embeddings")

    @classmethod
    def class_name(cls) -> str:
        return "EmbedChangedNodes"

    def _model_key(self) -> str:
        """The model's settings, as the hash of each kept embedding includes them."""
        return self.embed_model.to_json()

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        model = self._model_key()
        texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
        hashes = [hashlib.sha256(f"{model}\n{text}".encode()).hexdigest() for text in texts]
        new = []
        for i, node in enumerate(nodes):
            kept = self.kvstore.get(node.id_, collection=self.collection)
            if kept is not None and kept["hash"] == hashes[i]:
                node.embedding = list(kept["embedding"])
            else:
                new.append(i)
        if new:
            vectors = self.embed_model.get_text_embedding_batch([texts[i] for i in new],
                                                                **kwargs)
            for i, vector in zip(new, vectors):
                nodes[i].embedding = vector
                self.kvstore.put(nodes[i].id_, {"hash": hashes[i], "embedding": vector},
                                 collection=self.collection)
        self._forget_gone(nodes)
        return nodes

    def _forget_gone(self, nodes: Sequence[BaseNode]) -> None:
        """Drop the kept embeddings of each document's nodes that it no longer has."""
        by_document: dict[str, list[str]] = {}
        for node in nodes:
            if node.ref_doc_id is not None:
                by_document.setdefault(node.ref_doc_id, []).append(node.id_)
        documents = f"{self.collection}/documents"
        for document, ids in by_document.items():
            before = self.kvstore.get(document, collection=documents)
            for gone in set(before["ids"] if before else ()) - set(ids):
                self.kvstore.delete(gone, collection=self.collection)
            self.kvstore.put(document, {"ids": ids}, collection=documents)
