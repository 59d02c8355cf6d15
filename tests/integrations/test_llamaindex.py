"""chunkd.llamaindex: nodes with exact offsets and chunkd's ids, their relationships and
metadata, and an IngestionPipeline in which an edit re-embeds only the changed nodes.

LlamaIndex's own node-parser tests check each of its splitters' particular chunks (a
SentenceSplitter's sentences, ...), not the NodeParser interface as such, so they are
not run here; these tests hold chunkd's parser to what that interface promises, on the
shared corpus and on generated text."""

from __future__ import annotations

import pickle
import random
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

from llama_index.core import Document
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import get_leaf_nodes, get_root_nodes
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores import SimpleVectorStore

from chunkd import SettingsError
from chunkd.llamaindex import ChunkdNodeParser, EmbedChangedNodes
from command import HANG, chunkd_command, ndjson
from oracle import corpus_documents

CORPUS = corpus_documents()


def check_nodes(document: Document, nodes: list) -> None:
    """What every node of ``document`` must be: its exact slice, a unique id, its
    source, and a chain of neighbours among the nodes of one level."""
    text = document.text
    assert len({node.id_ for node in nodes}) == len(nodes)
    for node in nodes:
        assert isinstance(node, TextNode)
        assert node.text == text[node.start_char_idx:node.end_char_idx]
        assert node.ref_doc_id == document.id_
    leaves = [node for node in nodes if NodeRelationship.CHILD not in node.relationships]
    for before, after in zip(leaves, leaves[1:]):
        assert before.next_node.node_id == after.id_
        assert after.prev_node.node_id == before.id_
    if leaves:
        assert leaves[0].prev_node is None and leaves[-1].next_node is None


def test_ids_and_offsets_are_the_command_lines(tmp_path):
    source = CORPUS[3]
    (tmp_path / "notes.md").write_bytes(source.read_bytes())
    result = subprocess.run([chunkd_command(), "--ids", "--chars", "300", "--overlap", "30",
                             "notes.md"], cwd=tmp_path, capture_output=True, timeout=HANG)
    assert result.returncode == 0, result.stderr
    records = ndjson(result.stdout)
    document = Document(text=source.read_text(encoding="utf-8"), doc_id="notes.md")
    nodes = ChunkdNodeParser(chunk_size=300, chunk_overlap=30).get_nodes_from_documents(
        [document])
    assert [(n.id_, n.start_char_idx, n.end_char_idx, n.text) for n in nodes] == [
        (r["chunk_id"], r["start"], r["end"], r["text"]) for r in records]
    check_nodes(document, nodes)


@pytest.mark.parametrize("options", [
    {"chunk_size": 200, "chunk_overlap": 40},
    {"chunk_size": 120, "chunk_overlap": 10, "unit": "tokens"},
    {"strategy": "markdown", "chunk_size": 400},
    {"chunk_size": 100, "chunk_overlap": 0, "parent_size": 500},
])
def test_corpus_nodes_are_exact_slices_with_unique_ids(options):
    parser = ChunkdNodeParser(**options)
    documents = [Document(text=path.read_text(encoding="utf-8"), doc_id=path.name)
                 for path in random.Random(52).sample(CORPUS, 12)]
    nodes = parser.get_nodes_from_documents(documents)
    for document in documents:
        check_nodes(document, [node for node in nodes if node.ref_doc_id == document.id_])
    assert len({node.id_ for node in nodes}) == len(nodes)  # unique across documents too


@settings(max_examples=examples(60), deadline=None)
@given(paragraphs=st.lists(st.sampled_from(["Alpha beta gamma.", "Delta epsilon.",
                                            "Zeta eta theta iota kappa.", "Lambda mu.\f"]),
                           min_size=1, max_size=40),
       at=st.integers(0, 39), size=st.integers(20, 120))
def test_an_edit_keeps_the_ids_of_untouched_chunks(paragraphs, at, size):
    """Repeated paragraphs and form feeds (pages) included: ids stay unique, offsets
    exact, and a chunk whose text an edit of one paragraph leaves alone keeps its id."""
    parser = ChunkdNodeParser(chunk_size=size, chunk_overlap=0)
    before = Document(text="\n\n".join(paragraphs), doc_id="doc")
    edited = list(paragraphs)
    edited[at % len(edited)] = "An edited paragraph."
    after = Document(text="\n\n".join(edited), doc_id="doc")
    old, new = (parser.get_nodes_from_documents([d]) for d in (before, after))
    check_nodes(before, old)
    check_nodes(after, new)
    for node in old + new:
        text = (before if node in old else after).text
        assert node.metadata["page_number"] == 1 + text.count("\f", 0, node.start_char_idx + (
            len(node.text) - len(node.text.lstrip()))) if "\f" in text else \
            "page_number" not in node.metadata
    old_ids = {node.text: node.id_ for node in old}
    for node in new:  # the first chunk of a text that occurs once in each keeps its id
        if [n.text for n in old].count(node.text) == [n.text for n in new].count(node.text) == 1:
            assert node.id_ == old_ids[node.text]


def test_parents_and_children_are_related():
    document = Document(text=CORPUS[0].read_text(encoding="utf-8"), doc_id="a.md")
    nodes = ChunkdNodeParser(chunk_size=150, chunk_overlap=0, parent_size=600) \
        .get_nodes_from_documents([document])
    by_id = {node.id_: node for node in nodes}
    parents, leaves = get_root_nodes(nodes), get_leaf_nodes(nodes)
    assert parents and leaves and len(parents) + len(leaves) == len(nodes)
    for leaf in leaves:
        parent = by_id[leaf.parent_node.node_id]
        assert parent.start_char_idx <= leaf.start_char_idx <= leaf.end_char_idx <= \
            parent.end_char_idx
        assert leaf.id_ in [child.node_id for child in parent.child_nodes]
    for before, after in zip(parents, parents[1:]):
        assert before.next_node.node_id == after.id_
    check_nodes(document, nodes)


def test_metadata_and_what_is_embedded():
    text = "# Guide\n\n## Install\n\nRun the installer.\f\n\nThen restart.\n"
    document = Document(text=text, doc_id="guide.md", metadata={"author": "ann"},
                        excluded_embed_metadata_keys=["author"])
    title, node = ChunkdNodeParser(strategy="markdown", chunk_size=1000, count_tokens=True) \
        .get_nodes_from_documents([document])
    assert title.text == "# Guide" and title.metadata["headings"] == "Guide"
    assert node.metadata == {"author": "ann", "index": 1, "length": 46, "tokens": 12,
                             "headings": "Guide > Install", "page_number": 1, "last_page": 2}
    embedded = node.get_content(metadata_mode=MetadataMode.EMBED)
    assert "headings: Guide > Install" in embedded
    for key in ("author", "index", "length", "tokens", "page_number"):
        assert f"{key}:" not in embedded
    read = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "author: ann" in read and "page_number: 1" in read and "tokens:" not in read
    _, chosen = ChunkdNodeParser(strategy="markdown", chunk_size=1000,
                                 excluded_embed_metadata_keys=["headings"],
                                 excluded_llm_metadata_keys=[]) \
        .get_nodes_from_documents([document])
    assert chosen.excluded_embed_metadata_keys == ["author", "headings"]
    assert "index: 1" in chosen.get_content(metadata_mode=MetadataMode.LLM)


def test_settings_are_chunkds_and_round_trip():
    parser = ChunkdNodeParser(chunk_size=200, chunk_overlap=20, strategy="markdown",
                              excluded_llm_metadata_keys=["index"])
    again = ChunkdNodeParser.from_dict(parser.to_dict())
    assert again.to_dict() == parser.to_dict()
    assert pickle.loads(pickle.dumps(parser)).to_dict() == parser.to_dict()
    document = Document(text=CORPUS[1].read_text(encoding="utf-8"), doc_id="x")
    assert [n.id_ for n in again.get_nodes_from_documents([document])] == \
        [n.id_ for n in parser.get_nodes_from_documents([document])]
    with pytest.raises(TypeError, match="sizes"):
        ChunkdNodeParser(chunk_size=100, sizes=3)
    with pytest.raises(SettingsError, match="keep_separator"):
        ChunkdNodeParser(chunk_size=100, keep_separator="none")
    with pytest.raises(SettingsError):
        ChunkdNodeParser(chunk_size=100, chunk_overlap=100)


class CountingEmbedding(BaseEmbedding):
    """Records every text it embeds."""

    _texts: list[str] = PrivateAttr(default_factory=list)

    def _vector(self, text: str) -> list[float]:
        self._texts.append(text)
        return [float(len(text)), float(sum(map(ord, text)) % 997)]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


PARAGRAPHS = [f"Paragraph {i} tells of topic {i} at some length. " * 3 for i in range(12)]


def pipeline(step) -> tuple[IngestionPipeline, SimpleVectorStore]:
    store = SimpleVectorStore()
    return IngestionPipeline(
        transformations=[ChunkdNodeParser(chunk_size=160, chunk_overlap=0), step],
        docstore=SimpleDocumentStore(), vector_store=store,
        docstore_strategy=DocstoreStrategy.UPSERTS), store


def notes(paragraphs: list[str]) -> Document:
    return Document(text="\n\n".join(paragraphs), doc_id="notes.md")


def test_an_edit_re_embeds_only_the_changed_nodes():
    edited = list(PARAGRAPHS)
    edited[5] = "A rewritten fifth paragraph, about something else. " * 3

    # LlamaIndex alone: the edited document goes through every step again, and its
    # embedding model sees every node.
    model = CountingEmbedding()
    plain, _ = pipeline(model)
    assert len(plain.run(documents=[notes(PARAGRAPHS)])) == 12 == len(model._texts)
    model._texts.clear()
    plain.run(documents=[notes(edited)])
    assert len(model._texts) == 12

    model = CountingEmbedding()
    kept, store = pipeline(EmbedChangedNodes(embed_model=model))
    first = kept.run(documents=[notes(PARAGRAPHS)])
    assert len(model._texts) == 12
    model._texts.clear()
    second = kept.run(documents=[notes(edited)])
    changed = [node for node in second if node.id_ not in {n.id_ for n in first}]
    assert len(changed) == 1 and model._texts == [
        changed[0].get_content(metadata_mode=MetadataMode.EMBED)]
    # The store holds the edited document's nodes, each with its text's embedding.
    assert set(store.data.embedding_dict) == {node.id_ for node in second}
    check = CountingEmbedding()
    for node in second:
        assert store.data.embedding_dict[node.id_] == check._vector(
            node.get_content(metadata_mode=MetadataMode.EMBED))
    model._texts.clear()
    assert kept.run(documents=[notes(edited)]) == [] and model._texts == []
    # The kept embeddings are the current nodes' only.
    assert set(kept.transformations[1].kvstore.get_all(collection="chunkd_embeddings")) == \
        {node.id_ for node in second}
