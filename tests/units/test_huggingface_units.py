"""Hugging Face tokenizers as length units: exact counts (against the tokenizers library
and transformers), a valid streaming bound, the model's limit, and bad files refused."""

from __future__ import annotations

import json
import random
import shutil
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer
from property_examples import examples

from chunkd.model.errors import SettingsError
from chunkd.units.huggingface import unit as huggingface_unit
from chunkd.units.kept import KeptCounts
from oracle import corpus_documents
from tokenizer_files import TRAINED, MINILM_SHA256, minilm_folder, tricky_text

FAMILIES = ["minilm", *TRAINED]
#: The families whose words chunkd vouches for: they must settle something.
STREAMING = {"minilm", "byte-level-bpe", "roberta-bpe", "unigram-metaspace", "cased-wordpiece"}


@pytest.fixture(scope="module")
def tokenizer_files(tmp_path_factory):
    """Each family's tokenizer.json: MiniLM's as shipped, the others trained here."""
    folder = tmp_path_factory.mktemp("tokenizers")
    files = {"minilm": minilm_folder() / "tokenizer.json"}
    for name, build in TRAINED.items():
        files[name] = folder / f"{name}.json"
        build().save(str(files[name]))
    return files


@pytest.fixture(scope="module")
def units(tokenizer_files):
    return {name: huggingface_unit(str(path)) for name, path in tokenizer_files.items()}


@pytest.fixture(scope="module")
def library_counts(tokenizer_files):
    """The count as the tokenizers library gives it, padding and truncation off."""
    counts = {}
    for name, path in tokenizer_files.items():
        tokenizer = Tokenizer.from_file(str(path))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        counts[name] = (lambda t: lambda text: len(t.encode(text, add_special_tokens=False)))(
            tokenizer)
    return counts


@pytest.fixture(scope="module")
def transformers_counts(tokenizer_files):
    """The count as transformers' ``tokenize`` gives it (what LangChain's
    ``from_huggingface_tokenizer`` counts)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    counts = {"minilm": AutoTokenizer.from_pretrained(str(minilm_folder()))}
    for name in TRAINED:
        counts[name] = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_files[name]))
    return {name: (lambda t: lambda text: len(t.tokenize(text)))(tokenizer)
            for name, tokenizer in counts.items()}


def corpus_slices(rng: random.Random, count: int, longest: int = 600) -> list[str]:
    """Random stretches of random corpus documents."""
    documents = corpus_documents()
    slices = []
    for _ in range(count):
        text = rng.choice(documents).read_text(encoding="utf-8")
        start = rng.randrange(len(text))
        slices.append(text[start:start + rng.randint(0, longest)])
    return slices


def sample_texts(family: str) -> list[str]:
    return corpus_slices(random.Random(family), 60) + ["", " ", "[CLS] x [SEP]", "a\x00b"]


@pytest.mark.parametrize("family", FAMILIES)
def test_count_is_the_libraries_count(family, units, library_counts):
    for text in sample_texts(family):
        assert units[family].count(text) == library_counts[family](text), text


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_count_is_transformers_count(family, units, transformers_counts):
    """transformers loads in seconds: slow."""
    for text in sample_texts(family):
        assert units[family].count(text) == transformers_counts[family](text), text


def test_minilm_counts_past_its_padding_and_truncation(units):
    """The file pads and truncates at 128: a long text still counts all its tokens."""
    text = corpus_documents()[0].read_text(encoding="utf-8")
    assert units["minilm"].count(text) > 500
    assert units["minilm"].count("hello") == 1


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=examples(150), deadline=None)
@given(text=tricky_text, more=tricky_text)
def test_count_and_settled_on_tricky_text(family, units, library_counts, text, more):
    unit = units[family]
    assert unit.count(text) == library_counts[family](text)
    end, n = unit.settled(text)
    assert 0 <= end <= len(text)
    assert unit.count(text + more) == n + unit.count(text[end:] + more)
    if unit.max_chars is not None:
        assert unit.count(text) >= len(text) // unit.max_chars


@pytest.mark.parametrize("family", FAMILIES)
def test_settled_at_every_cut_of_corpus_text(family, units):
    """A stretch of a document, cut anywhere, settled, then continued as the document
    goes on or with other text."""
    rng = random.Random(family)
    unit = units[family]
    settled_some = False
    for text in corpus_slices(rng, 12, longest=300):
        for cut in range(0, len(text) + 1, rng.randint(1, 7)):
            head = text[:cut]
            end, n = unit.settled(head)
            settled_some |= end > 0
            for more in (text[cut:], text[cut:cut + 3], " x", "'s", "\u0301", "\n"):
                assert unit.count(head + more) == n + unit.count(head[end:] + more), (head, more)
    assert settled_some == (family in STREAMING)


def test_unvouched_family_settles_nothing_and_has_no_bound(units):
    assert units["qwen-bpe"].settled("Hello there, world. " * 20) == (0, 0)
    assert units["qwen-bpe"].max_chars is None


def test_bounds_by_family(units):
    """WordPiece's and Unigram's [UNK] cover a word of any length; byte-level BPE
    covers at most its longest token's bytes."""
    assert units["minilm"].max_chars is None and units["cased-wordpiece"].max_chars is None
    assert units["unigram-metaspace"].max_chars is None
    longest = units["byte-level-bpe"].max_chars
    assert longest is not None and longest > 1
    assert units["byte-level-bpe"].count("\U0001F600" * 40) >= 40 * 4 // longest


def test_identity_is_the_files_name_and_hash(units, tokenizer_files, tmp_path):
    assert units["minilm"].name == f"tokenizer.json@sha256:{MINILM_SHA256}"
    changed = tmp_path / "tokenizer.json"
    config = json.loads(tokenizer_files["cased-wordpiece"].read_text())
    config["model"]["vocab"]["zzzz"] = len(config["model"]["vocab"])
    changed.write_text(json.dumps(config))
    assert huggingface_unit(str(changed)).name != units["cased-wordpiece"].name


def test_model_folder_limit_and_special_tokens():
    """all-MiniLM-L6-v2: sentence-transformers' 256 tokens, two of them [CLS] and [SEP]."""
    unit = huggingface_unit(str(minilm_folder()))
    assert (unit.limit, unit.special, unit.max_size) == (256, 2, 254)
    assert unit.name == f"model/tokenizer.json@sha256:{MINILM_SHA256}"


def test_limit_from_tokenizer_config_without_sentence_transformers(tmp_path):
    """A Hugging Face folder: tokenizer.json and tokenizer_config.json only."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).symlink_to(minilm_folder() / name)
    unit = huggingface_unit(str(tmp_path))
    assert (unit.limit, unit.max_size) == (512, 510)


def test_sentence_transformers_layout_with_a_module_folder(tmp_path):
    """The older layout: modules.json names 0_Transformer, which holds the tokenizer."""
    source = minilm_folder()
    module = tmp_path / "0_Transformer"
    module.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "sentence_bert_config.json"):
        (module / name).symlink_to(source / name)
    (tmp_path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "0_Transformer",
         "type": "sentence_transformers.models.Transformer"}]))
    unit = huggingface_unit(str(tmp_path))
    assert (unit.limit, unit.special) == (256, 2)
    assert unit.count("Hello, world!") == 4


def test_a_lone_tokenizer_file_has_no_limit():
    unit = huggingface_unit(str(minilm_folder() / "tokenizer.json"))
    assert unit.limit is None and unit.max_size is None and unit.special == 2


@pytest.mark.parametrize("content, complaint", [
    (None, "cannot read it"),
    (b"{not json", "not a Hugging Face tokenizer file"),
    (b'{"version": "1.0"}', "not a Hugging Face tokenizer file"),
    (b"\xff\xfe", "not a Hugging Face tokenizer file"),
])
def test_bad_tokenizer_files_are_one_line(tmp_path, content, complaint):
    path = tmp_path / "tokenizer.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SettingsError, match=complaint) as error:
        huggingface_unit(str(path))
    assert "\n" not in str(error.value) and str(path) in str(error.value)


def test_folder_without_a_tokenizer(tmp_path):
    with pytest.raises(SettingsError, match="no tokenizer.json in this model folder"):
        huggingface_unit(str(tmp_path))


def test_malformed_sentence_transformers_config(tmp_path):
    shutil.copy(minilm_folder() / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "sentence_bert_config.json").write_text("{")
    with pytest.raises(SettingsError, match="sentence_bert_config.json: not JSON"):
        huggingface_unit(str(tmp_path))


@settings(max_examples=examples(50), deadline=None)
@given(st.sampled_from(sorted(STREAMING)),
       st.lists(st.sampled_from(["lorem", "ipsum", "日本", "don't", "x.", "(1)"]),
                min_size=8, max_size=40).map(" ".join))
def test_all_words_but_the_last_two_are_settled(units, family, text):
    """So a piece that grows word by word is known long before it ends: all but the
    last two words and the longest added token (13 code points: <|endoftext|>)."""
    end, n = units[family].settled(text)
    assert end >= len(text) - 2 * len(" don't") - 13 - len(" don't")
    assert n == units[family].count(text[:end]) > 0


def test_unit_from_a_loaded_tokenizer_leaves_it_as_it_was(units):
    """The unit works on a copy: the caller's tokenizer keeps padding to 128."""
    from chunkd.units.huggingface import from_tokenizer

    tokenizer = Tokenizer.from_file(str(minilm_folder() / "tokenizer.json"))
    unit = from_tokenizer(tokenizer)
    text = corpus_documents()[3].read_text(encoding="utf-8")
    assert unit.count(text) == units["minilm"].count(text) > 128
    assert len(tokenizer.encode("hello").ids) == 128
    # Its identity is that of the tokenizer's JSON form, the same for the same tokenizer.
    assert unit.name == from_tokenizer(Tokenizer.from_str(tokenizer.to_str())).name


def test_resolve_knows_every_kind_of_spec(tmp_path, monkeypatch):
    from chunkd.units import resolve
    from tokenizer_files import O200K_FILE, tiktoken_cache

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tiktoken_cache(tmp_path / "cache")))
    assert resolve("o200k_base").name == "o200k_base"
    assert resolve(str(O200K_FILE)).name == "o200k_base"
    assert resolve(str(minilm_folder())).max_size == 254
    assert resolve(str(minilm_folder() / "tokenizer.json")).name.startswith("tokenizer.json@")
    with pytest.raises(SettingsError, match="unknown tokenizer 'nope': give chars, .*o200k_base"):
        resolve("nope")


#: The families whose pre-tokenizer ends a word at every white space: their counts
#: add up over the runs between spaces, and are kept by run.
ADDITIVE = {"minilm", "cased-wordpiece"}


def test_counts_add_up_by_word_only_where_the_pre_tokenizer_splits_at_spaces(units):
    assert {family for family in FAMILIES if units[family].additive} == ADDITIVE


@pytest.mark.parametrize("family", sorted(ADDITIVE))
@settings(max_examples=examples(150), deadline=None)
@given(words=st.lists(st.tuples(tricky_text, st.sampled_from(
    [" ", "\t", "\n", "\r\n", "  ", "\u00a0", "\u3000", "\u2028", "\x85", "\x1c", "\x0b", ""])),
    max_size=12))
def test_kept_word_counts_are_the_libraries_count(family, units, library_counts, words):
    """Texts made of the same words again and again, between every kind of white
    space (those the groups end at and those they do not): the count from kept words
    is the library's, first and again."""
    unit = units[family]
    text = "".join(word + space for word, space in words)
    for _ in range(2):
        assert unit.count(text) == library_counts[family](text)
        assert unit.count(text + text) == library_counts[family](text + text)


def test_kept_word_counts_are_bounded(units, library_counts, monkeypatch):
    """Past ``CACHE_POINTS`` code points of words the unit starts afresh; a text
    whose new words alone pass it is counted by the library whole."""
    from chunkd.units import huggingface, kept

    monkeypatch.setattr(kept, "CACHE_POINTS", 200)
    unit = huggingface.HuggingFaceUnit((minilm_folder() / "tokenizer.json").read_bytes(),
                                       "tokenizer.json", "test")
    rng = random.Random(7)
    for text in corpus_slices(rng, 40, longest=300):
        assert unit.count(text) == library_counts["minilm"](text)
        assert unit.kept.points <= 200
        assert unit.kept.points == sum(map(len, unit.kept.counts))


def test_an_added_token_with_a_space_counts_whole(tmp_path, library_counts):
    """An added token that holds a space is matched across the groups: such a
    tokenizer is counted by the library, whole."""
    path = tmp_path / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(minilm_folder() / "tokenizer.json"))
    tokenizer.add_tokens(["new york"])
    tokenizer.save(str(path))
    unit = huggingface_unit(str(path))
    assert not unit.additive
    tokenizer.no_padding()
    tokenizer.no_truncation()
    assert unit.count("I love new york .") == len(
        tokenizer.encode("I love new york .", add_special_tokens=False).ids) == 4


#: Fragments of words where the finer pieces (ASCII punctuation, CJK ideographs) cut:
#: added tokens' text (which holds "[" and "]"), marks after punctuation (U+0338 after
#: "=" composes under NFC), accents BertNormalizer strips, controls, U+2028, NUL.
fragments = st.sampled_from(
    list(string.punctuation) + ["[CLS]", "[SEP]", "[UNK]", "[MASK]", "CLS", "日本語", "中",
                                "文", "。", "，", "\u0301", "\u0338", "e\u0301", "É", "İ", "ß",
                                "ﬁ", "\x00", "\x1f", "\x7f", "\u2028", "\u00a0", "\ufeff",
                                "😀", "👍🏽", "👨‍👩‍👧", "don", "hello", "Hello", "x", "12",
                                "\u3000", "한", "\U00020000"]
) | st.characters(codec="utf-8")
fine_words = st.lists(fragments, min_size=1, max_size=8).map("".join)


@pytest.mark.parametrize("family", sorted(ADDITIVE))
@settings(max_examples=examples(200), deadline=None)
@given(words=st.lists(fine_words, min_size=1, max_size=10),
       spaces=st.lists(st.sampled_from([" ", "\n", "\t", "\r\n", "  ", "\u00a0"]),
                       min_size=10, max_size=10))
def test_counts_kept_by_finer_piece_are_the_libraries_count(family, units, library_counts,
                                                            words, spaces):
    """Words cut at punctuation and CJK ideographs, their pieces met again in other
    words and texts: every count is the library's, first and again."""
    unit = units[family]
    text = "".join(word + space for word, space in zip(words, spaces))
    for sample in (*words, text, "".join(reversed(words)), text):
        assert unit.count(sample) == library_counts[family](sample), sample


def test_finer_pieces_where_they_are_words_whatever_is_around(units):
    """BertPreTokenizer behind BertNormalizer: a group is cut at punctuation and CJK
    ideographs, but not at a character of an added token ([CLS]'s brackets)."""
    pieces = units["minilm"].kept.count.pieces
    assert pieces("(hello,world)中文") == ["(", "hello", ",", "world", ")", "中", "文"]
    assert pieces("[CLS]x") == ["[CLS]x"]
    assert pieces("[CLS]!") == ["[CLS]", "!"]


@pytest.mark.parametrize("normalizer", ["NFC", "NFKC"])
def test_composing_normalizers_keep_groups_whole(tmp_path, normalizer):
    """Under NFC "=" and U+0338 compose into "≠", which is no punctuation (and, accents
    kept, is not taken apart again): "a=\u0338b" is one word, which a cut at "=" would
    count as three; such a tokenizer keeps whole groups."""
    from tokenizers import normalizers

    tokenizer = Tokenizer.from_file(str(minilm_folder() / "tokenizer.json"))
    tokenizer.normalizer = normalizers.Sequence([getattr(normalizers, normalizer)(),
                                                 normalizers.BertNormalizer(strip_accents=False)])
    tokenizer.no_padding()
    tokenizer.no_truncation()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    unit = huggingface_unit(str(path))
    assert unit.additive and not isinstance(unit.kept.count, KeptCounts)
    for text in ("a=\u0338b", "x a=\u0338b a= \u0338b", "a=\u0338b"):
        assert unit.count(text) == len(tokenizer.encode(text, add_special_tokens=False).ids)
    assert unit.count("a=\u0338b") == 1 < unit.count("a") + unit.count("=") + unit.count("\u0338b")


@settings(max_examples=examples(200), deadline=None)
@given(texts=st.lists(tricky_text | fine_words, max_size=8),
       limit=st.sampled_from([8, 40, 1 << 22]),
       cuts=st.sampled_from([("", False), (string.punctuation, True), ("[,.", False),
                             ("", True)]))
def test_compiled_piece_sum_is_its_twins(texts, limit, cuts):
    """chunkd.kernel._kept's sums of kept pieces, and what it keeps, are the pure-Python
    ``pieces_sum``'s, with and without finer cuts, also where the bound is passed."""
    from chunkd.kernel._kept import piece_sum
    from chunkd.units.kept import pieces_sum

    compiled, twin = KeptCounts(len, *cuts), KeptCounts(len, *cuts)
    for text in texts + texts:
        assert (piece_sum(compiled, text, limit, *cuts) == pieces_sum(twin, text, limit)), text
        assert (compiled.counts, compiled.points) == (twin.counts, twin.points)
