"""tiktoken's encodings other than cl100k_base as length units: loaded offline (tiktoken's
cache or a named file), checked against tiktoken's hash, exact, with a valid bound."""

from __future__ import annotations

import random

import pytest
import tiktoken
import tiktoken.load
from hypothesis import given, settings

from chunkd.errors import SettingsError
from chunkd.units import tiktoken_encodings
from chunkd.units.tiktoken_encodings import TiktokenUnit, file_unit
from oracle import corpus_documents
from tokenizer_files import O200K_FILE, tiktoken_cache, tricky_text


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


@pytest.mark.parametrize("encoding", ["o200k_base", "o200k_harmony"])
def test_loaded_from_tiktokens_cache(cache, monkeypatch, offline, o200k, encoding):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    unit = TiktokenUnit(encoding)
    assert unit.name == encoding
    text = corpus_documents()[5].read_text(encoding="utf-8")
    assert unit.count(text) == len(o200k.encode_ordinary(text))


def test_missing_file_says_how_to_get_it_without_downloading(tmp_path, monkeypatch, offline):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(SettingsError) as error:
        TiktokenUnit("o200k_base")
    message = str(error.value)
    assert "\n" not in message and str(tmp_path) in message
    assert "tiktoken.get_encoding('o200k_base')" in message and "o200k_base.tiktoken" in message


def test_default_cache_folder_is_tiktokens(monkeypatch, tmp_path, offline):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    tiktoken_cache((tmp_path / "data-gym-cache"))
    assert TiktokenUnit("o200k_base").count("hello world") == 2


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
        TiktokenUnit("o200k_base", corrupted)


def test_corrupted_cached_file_is_refused_and_kept(corrupted, tmp_path, monkeypatch, offline):
    """tiktoken would delete it and download again; chunkd only refuses it."""
    cache = tmp_path / "cache"
    cache.mkdir()
    cached = cache / "fb374d419588a4632f3f557e76b4b70aebbca790"
    corrupted.rename(cached)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    with pytest.raises(SettingsError, match="SHA-256"):
        TiktokenUnit("o200k_base")
    assert cached.exists()


@pytest.mark.parametrize("spec, complaint", [
    ("cl100k_base", "chunkd's own offline copy"),
    ("gpt2", "r50k_base"),
    ("o300k_base", "unknown tiktoken encoding 'o300k_base': give one of .*o200k_base"),
])
def test_names_not_loaded_here(spec, complaint):
    with pytest.raises(SettingsError, match=complaint):
        TiktokenUnit(spec)


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


@settings(max_examples=1000, deadline=None)
@given(text=tricky_text, more=tricky_text)
def test_settled_and_bound_on_tricky_text(unit, o200k, text, more):
    count = len(o200k.encode_ordinary(text))
    assert unit.count(text) == count >= len(text) // unit.max_chars
    end, n = unit.settled(text)
    assert unit.count(text + more) == n + unit.count(text[end:] + more)


def test_settled_at_every_cut_of_corpus_text(unit):
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
                assert unit.count(head + more) == n + unit.count(head[end:] + more)
    assert settled > 0


@settings(max_examples=1000, deadline=None)
@given(text=tricky_text)
def test_pretokens_add_up_to_tiktokens_count(unit, o200k, text):
    """The translated pattern cuts where tiktoken's does: BPE never merges across a
    pre-token, so a wrong cut shows as a different sum."""
    pieces = [match.group() for match in unit.pretokens.finditer(text)]
    assert "".join(pieces) == text
    assert sum(len(o200k.encode_ordinary(piece)) for piece in pieces) == len(
        o200k.encode_ordinary(text))


def test_class_table_agrees_with_cl100k_table():
    """The two build-time tables come from the same Unicode 16.0 database."""
    from chunkd import pretoken_classes

    bits = pretoken_classes.CATEGORY_BITS
    letters = sum(bits[name] for name in ("Lu", "Ll", "Lt", "Lm", "Lo"))

    def cl100k_class(entry: int) -> int:
        if entry & bits["White_Space"]:
            return 4
        return (1 if entry & letters else 0) | (2 if entry & bits["N"] else 0)

    categories = pretoken_classes.load(pretoken_classes.CATEGORIES_FILE)
    assert categories.translate(bytes(map(cl100k_class, range(256)))) == pretoken_classes.load()


@pytest.mark.slow
def test_every_code_point_is_cut_as_tiktoken_cuts(unit, o200k):
    """Each code point in contexts where its class (upper, lower, other letter, mark,
    number, space, other) decides the cut; the classes follow tiktoken's Unicode."""
    encode = o200k.encode_ordinary
    counts: dict[str, int] = {}
    code_points = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    for at in range(0, len(code_points), 256):
        text = "".join(f"a{c}A{c}a {c}1{c}'S\n{c}" for c in code_points[at:at + 256])
        pieces = [match.group() for match in unit.pretokens.finditer(text)]
        for piece in pieces:
            if piece not in counts:
                counts[piece] = len(encode(piece))
        assert sum(counts[piece] for piece in pieces) == len(encode(text)), (
            f"near U+{ord(code_points[at]):04X}")
