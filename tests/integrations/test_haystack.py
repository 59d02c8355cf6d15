"""chunkd.haystack: Documents with exact split_idx_start, pages, chunkd's ids and fields;
a YAML round trip of a pipeline that holds the splitter, and a real indexing pipeline.

Haystack's own splitter tests check its DocumentSplitter's particular splits (words,
sentences, passages), not a splitter interface, so they are not run here; these tests
hold chunkd's component to the meta fields Haystack's splitters promise, on the shared
corpus and on generated text."""

from __future__ import annotations

import os
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_examples import examples

# Haystack sends usage statistics unless told not to when it is imported.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"
from haystack import Document, Pipeline, component  # noqa: E402
from haystack.components.preprocessors import DocumentSplitter  # noqa: E402
from haystack.components.writers import DocumentWriter  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402
from haystack.document_stores.types import DuplicatePolicy  # noqa: E402

from chunkd import SettingsError  # noqa: E402
from chunkd.haystack import ChunkdDocumentSplitter  # noqa: E402
from command import run_chunkd, ndjson  # noqa: E402
from oracle import corpus_documents  # noqa: E402

CORPUS = corpus_documents()


def check_splits(source: Document, splits: list[Document]) -> None:
    """What every chunk of ``source`` must be (without parents)."""
    text = source.content
    assert len({split.id for split in splits}) == len(splits)
    for number, split in enumerate(splits):
        start = split.meta["split_idx_start"]
        assert split.content == text[start:start + len(split.content)]
        assert split.meta["source_id"] == source.id
        assert split.meta["split_id"] == number
        for key, value in source.meta.items():
            assert split.meta[key] == value
        if "\f" in text:  # the page of its first character that is not white space
            first = start + len(split.content) - len(split.content.lstrip())
            assert split.meta["page_number"] == 1 + text.count("\f", 0, first)
        else:
            assert "page_number" not in split.meta


@pytest.mark.parametrize("options", [
    {"chunk_size": 200, "chunk_overlap": 40},
    {"chunk_size": 120, "chunk_overlap": 10, "unit": "tokens", "count_tokens": True},
    {"strategy": "markdown", "chunk_size": 400},
    {"strategy": "sentences", "chunk_size": 4},
])
def test_corpus_splits_are_exact_with_unique_ids(options):
    splitter = ChunkdDocumentSplitter(**options)
    sources = [Document(content=path.read_text(encoding="utf-8"),
                        meta={"file_path": path.name, "lang": path.parent.name})
               for path in random.Random(52).sample(CORPUS, 12)]
    splits = splitter.run(documents=sources)["documents"]
    for source in sources:
        check_splits(source, [split for split in splits if split.meta["source_id"] == source.id])
    assert len({split.id for split in splits}) == len(splits)


def test_ids_and_offsets_are_the_command_lines(tmp_path):
    source = CORPUS[5]
    (tmp_path / "page.md").write_bytes(source.read_bytes())
    result = run_chunkd("--ids", "--strategy", "markdown", "--chars", "500", "page.md",
                        cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = Document(content=source.read_text(encoding="utf-8"),
                        meta={"file_path": "page.md"})
    splits = ChunkdDocumentSplitter(strategy="markdown", chunk_size=500).run([document])
    assert [(s.id, s.meta["split_idx_start"], s.content, s.meta.get("headings"))
            for s in splits["documents"]] == [
        (r["chunk_id"], r["start"], r["text"], " > ".join(r["headings"] or []) or None)
        for r in ndjson(result.stdout)]


@settings(max_examples=examples(60), deadline=None)
@given(pages=st.lists(st.text(st.sampled_from("ab \n\f"), max_size=60), min_size=1,
                      max_size=8),
       size=st.integers(5, 80))
def test_page_numbers_count_form_feeds(pages, size):
    text = "\f".join(pages)
    source = Document(content=text, meta={"file_path": "p.txt"})
    splits = ChunkdDocumentSplitter(chunk_size=size, chunk_overlap=0).run([source])
    check_splits(source, splits["documents"])


def test_page_number_agrees_with_haystacks_splitter():
    text = "\f".join(f"Page {n} has words in it. " * 8 for n in range(1, 6))
    source = Document(content=text)
    ours = ChunkdDocumentSplitter(chunk_size=60, chunk_overlap=0,
                                  separators=[" "]).run([source])["documents"]
    theirs = DocumentSplitter(split_by="word", split_length=1, split_overlap=0) \
        .run([source])["documents"]
    # Every split that starts with a word: the page Haystack's splitter gives the word there.
    page_at = {d.meta["split_idx_start"]: d.meta["page_number"] for d in theirs}
    compared = [split for split in ours if split.meta["split_idx_start"] in page_at]
    assert len(compared) > 10
    for split in compared:
        assert split.meta["page_number"] == page_at[split.meta["split_idx_start"]]


def test_parents_come_with_haystacks_hierarchy_fields():
    source = Document(content=CORPUS[0].read_text(encoding="utf-8"), meta={"file_path": "a"})
    made = ChunkdDocumentSplitter(chunk_size=150, chunk_overlap=0, parent_size=600) \
        .run([source])["documents"]
    parents = [d for d in made if d.meta["__level"] == 1]
    children = [d for d in made if d.meta["__level"] == 2]
    assert parents and len(parents) + len(children) == len(made)
    by_id = {d.id: d for d in made}
    for child in children:
        parent = by_id[child.meta["__parent_id"]]
        assert child.id in parent.meta["__children_ids"]
        assert parent.content.find(child.content) >= 0
    for document in made:
        start = document.meta["split_idx_start"]
        assert document.content == source.content[start:start + len(document.content)]
    check_splits(source, children)


def test_bad_settings_are_refused():
    with pytest.raises(TypeError, match="sizes"):
        ChunkdDocumentSplitter(chunk_size=100, sizes=3)
    with pytest.raises(SettingsError, match="keep_separator"):
        ChunkdDocumentSplitter(chunk_size=100, keep_separator="none")
    with pytest.raises(ValueError, match="no text content"):
        ChunkdDocumentSplitter(chunk_size=100).run([Document(content=None)])
    assert ChunkdDocumentSplitter(chunk_size=100).run([Document(content="")]) == \
        {"documents": []}


@component
class CountingEmbedder:
    """Gives each document an embedding and records the texts it embedded."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        self.texts += [document.content for document in documents]
        return {"documents": [replace(document, embedding=[float(len(document.content)), 1.0])
                              for document in documents]}


def test_yaml_round_trip_and_an_indexing_pipeline():
    splitter = ChunkdDocumentSplitter(chunk_size=160, chunk_overlap=0, unit="chars",
                                      name_field="url")
    saved = Pipeline()
    saved.add_component("split", splitter)
    text = saved.dumps()
    assert "chunkd.haystack.ChunkdDocumentSplitter" in text and "name_field: url" in text
    loaded = Pipeline.loads(text, allowed_modules=["chunkd.haystack"])
    assert loaded.get_component("split").to_dict() == splitter.to_dict()

    store = InMemoryDocumentStore()
    embedder = CountingEmbedder()
    loaded.add_component("embed", embedder)
    loaded.add_component("write", DocumentWriter(store, policy=DuplicatePolicy.OVERWRITE))
    loaded.connect("split", "embed")
    loaded.connect("embed", "write")
    paragraphs = [f"Paragraph {i} tells of topic {i} at some length. " * 3 for i in range(12)]
    first = Document(content="\n\n".join(paragraphs), meta={"url": "https://x/notes"})
    loaded.run({"split": {"documents": [first]}})
    stored = {d.id: d for d in store.filter_documents()}
    assert len(stored) == 12 == len(embedder.texts)
    check_splits(first, sorted(stored.values(), key=lambda d: d.meta["split_id"]))

    paragraphs[5] = "A rewritten fifth paragraph, about something else. " * 3
    edited = Document(content="\n\n".join(paragraphs), meta={"url": "https://x/notes"})
    again = splitter.run([edited])["documents"]
    # The source's id (a hash of its content) changed; its chunks' ids did not, but one.
    assert edited.id != first.id
    assert len({d.id for d in again} - set(stored)) == 1
