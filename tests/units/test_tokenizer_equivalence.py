"""Chunks counted in a real tokenizer's tokens are LangChain's, one for one, with exact
offsets: ``from_huggingface_tokenizer`` (transformers' tokenizer) and
``from_tiktoken_encoder(encoding_name="o200k_base")``, with chunkd's separators and
``keep_separator="end"``, on the shared corpus, whole and fed in random pieces."""

from __future__ import annotations

import random

import pytest
from langchain_text_splitters import RecursiveCharacterTextSplitter

from chunkd.units.huggingface import unit as huggingface_unit
from chunkd.units.tiktoken_encodings import file_unit
from cores import Kernel, Twin, chunks_of
from oracle import SEPARATORS, corpus_documents, random_cuts
from tokenizer_files import (O200K_FILE, TRAINED, huggingface_langchain, minilm_folder,
                             tiktoken_cache)


def chunkd_chunks(unit, pieces: list[str], size: int, overlap: int):
    """Both cores' chunks on ``unit``, fed ``pieces``: the kernel's, after checking
    that the twin's are the same."""
    made = [chunks_of(core(size, overlap, separators=SEPARATORS, keep_separator="end",
                           unit=unit), pieces) for core in (Kernel, Twin)]
    assert made[0] == made[1]
    return made[0]


def check(unit, langchain, text: str, size: int, overlap: int, rng: random.Random) -> None:
    expected = langchain.split_text(text)
    for pieces in ([text], random_cuts(text, rng, max_piece=rng.choice([3, 50, 700]))):
        chunks = chunkd_chunks(unit, pieces, size, overlap)
        assert [chunk.text for chunk in chunks] == expected
        for chunk in chunks:
            assert text[chunk.start:chunk.end] == chunk.text
            # LangChain sums its pieces' counts, so a chunk's own count may pass the size.
            assert chunk.length == unit.count(chunk.text)


@pytest.fixture(scope="module")
def o200k_langchain(tmp_path_factory):
    """LangChain's from_tiktoken_encoder, with tiktoken's o200k_base from a cache."""
    cache = tiktoken_cache(tmp_path_factory.mktemp("tiktoken-cache"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        return RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name="o200k_base", chunk_size=200, chunk_overlap=30,
            separators=SEPARATORS, keep_separator="end", disallowed_special=())


def documents(step: int) -> list[str]:
    return [path.read_text(encoding="utf-8") for path in corpus_documents()[::step]]


def test_o200k_on_some_documents(o200k_langchain):
    rng = random.Random(1)
    unit = file_unit(str(O200K_FILE))
    for text in documents(25):
        check(unit, o200k_langchain, text, 200, 30, rng)


def test_minilm_on_some_documents():
    rng = random.Random(2)
    unit = huggingface_unit(str(minilm_folder()))
    langchain = huggingface_langchain(minilm_folder(), 254, 25)
    for text in documents(25):
        check(unit, langchain, text, 254, 25, rng)


@pytest.mark.slow
def test_o200k_on_every_document(o200k_langchain):
    rng = random.Random(3)
    unit = file_unit(str(O200K_FILE))
    for text in documents(1):
        check(unit, o200k_langchain, text, 200, 30, rng)


@pytest.mark.slow
@pytest.mark.parametrize("size, overlap, step", [(254, 25, 1), (40, 0, 3)])
def test_minilm_on_every_document(size, overlap, step):
    """At the model's size on every document; small chunks (many more calls to
    LangChain's length function) on every third."""
    rng = random.Random(size)
    unit = huggingface_unit(str(minilm_folder()))
    langchain = huggingface_langchain(minilm_folder(), size, overlap)
    for text in documents(step):
        check(unit, langchain, text, size, overlap, rng)


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(TRAINED))
def test_trained_families(tmp_path, family):
    path = tmp_path / "tokenizer.json"
    TRAINED[family]().save(str(path))
    rng = random.Random(family)
    unit = huggingface_unit(str(path))
    langchain = huggingface_langchain(path, 100, 10)
    for text in documents(4):
        check(unit, langchain, text, 100, 10, rng)


def test_dropin_from_huggingface_tokenizer_runs_the_unit():
    """chunkd.langchain's from_huggingface_tokenizer counts with chunkd's unit and gives
    LangChain's chunks."""
    from transformers import AutoTokenizer

    from chunkd.langchain import HuggingFaceLength
    from chunkd.langchain import RecursiveCharacterTextSplitter as Dropin

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_folder()))
    dropin = Dropin.from_huggingface_tokenizer(tokenizer, chunk_size=60, chunk_overlap=10)
    langchain = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        tokenizer, chunk_size=60, chunk_overlap=10)
    length = dropin._length_function
    assert isinstance(length, HuggingFaceLength) and length.unit is not None
    for text in documents(40):
        assert dropin.split_text(text) == langchain.split_text(text)
    with pytest.raises(ValueError, match="PreTrainedTokenizerBase"):
        Dropin.from_huggingface_tokenizer(object(), chunk_size=60)


def test_dropin_from_tiktoken_encoder_o200k(tmp_path, monkeypatch, o200k_langchain):
    """o200k_base from tiktoken's cache runs as chunkd's unit."""
    from chunkd.langchain import RecursiveCharacterTextSplitter as Dropin

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tiktoken_cache(tmp_path)))
    dropin = Dropin.from_tiktoken_encoder(
        encoding_name="o200k_base", chunk_size=200, chunk_overlap=30,
        separators=SEPARATORS, keep_separator="end", disallowed_special=())
    assert dropin._length_function.unit == "o200k_base"
    for text in documents(40):
        assert dropin.split_text(text) == o200k_langchain.split_text(text)
