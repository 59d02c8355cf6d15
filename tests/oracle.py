"""The reference: LangChain's RecursiveCharacterTextSplitter, called as the contract says."""

from __future__ import annotations

import functools
import pathlib
import random

from langchain_text_splitters import RecursiveCharacterTextSplitter

from chunkd import SEPARATORS, Splitter
from chunkd.units import encoding

CORPUS = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def corpus_documents() -> list[pathlib.Path]:
    """Every document of the shared corpus; fails loudly if the corpus is missing."""
    paths = sorted(p for p in CORPUS.glob("*/*.md"))
    assert len(paths) > 200, f"shared corpus not found or incomplete at {CORPUS}"
    return paths


@functools.lru_cache(maxsize=None)
def langchain_splitter(chunk_size: int, chunk_overlap: int, unit: str):
    if unit == "chars":
        length = len
    else:
        encode = encoding().encode_ordinary
        length = lambda s: len(encode(s))  # noqa: E731
    return RecursiveCharacterTextSplitter(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=list(SEPARATORS),
        keep_separator="end", length_function=length)


def langchain_chunks(text: str, chunk_size: int, chunk_overlap: int, unit: str) -> list[str]:
    return langchain_splitter(chunk_size, chunk_overlap, unit).split_text(text)


def random_cuts(text: str, rng: random.Random, max_piece: int = 200) -> list[str]:
    """``text`` cut into pieces of random sizes (1 to ``max_piece`` code points)."""
    pieces, i = [], 0
    while i < len(text):
        step = rng.randint(1, max_piece)
        pieces.append(text[i:i + step])
        i += step
    return pieces


def chunkd_chunks(pieces: list[str], chunk_size: int, chunk_overlap: int, unit: str):
    splitter = Splitter(chunk_size, chunk_overlap, unit=unit)
    chunks = []
    for piece in pieces:
        chunks += splitter.feed(piece)
    return chunks + splitter.finish()


def check_against_langchain(text: str, pieces: list[str], chunk_size: int,
                            chunk_overlap: int, unit: str) -> None:
    """chunkd's chunks equal LangChain's, with exact offsets, indices and lengths."""
    chunks = chunkd_chunks(pieces, chunk_size, chunk_overlap, unit)
    expected = langchain_chunks(text, chunk_size, chunk_overlap, unit)
    assert [c.text for c in chunks] == expected
    length = len if unit == "chars" else (lambda s: len(encoding().encode_ordinary(s)))
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert text[chunk.start:chunk.end] == chunk.text
        assert chunk.length == length(chunk.text)
