"""UTF-8 decoding's compiled fast path (``chunkd.kernel._utf8.decode_valid``) and the reader
built on it (``chunkd.inputs.readers.decode_blocks``), against Python's own decoder as the
oracle: the same text, of the same kind, and the same error at the same byte, however
the input is cut into blocks."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from command import HANG

from chunkd.kernel import _utf8

from chunkd.inputs import readers
from chunkd.inputs.readers import InputError, decode_blocks

CORPUS = pathlib.Path(__file__).resolve().parent.parent.parent.parent / "shared" / "corpus"

#: Characters at the edges of each length of UTF-8 and of each kind of str (ASCII,
#: Latin-1, two and four bytes a unit), and bytes that are not UTF-8: continuation and
#: overlong leads, a surrogate, an overlong three-byte form, past U+10FFFF, characters
#: cut short.
VALID = ["a", "\x00", "\n", "\x7f", "\x80", "é", "\xff", "\u0100", "\u07ff", "\u0800", "語",
         "\u2019", "\ud7ff", "\ue000", "\uffff", "\U00010000", "😀", "\U0010ffff"]
INVALID = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2", b"\xe0\x80\x80", b"\xe0\xa0",
           b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x9f\x98",
           b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xe4\xb8"]
PIECES = st.lists(st.sampled_from([c.encode() for c in VALID]) | st.just(b"ascii text, " * 3)
                  | st.sampled_from(INVALID), max_size=40)


def cut(data: bytes, cuts: list[int], view: str) -> list:
    """``data`` in blocks ending at ``cuts``, as bytes, bytearrays, or views of bytes
    or of signed bytes (as Arrow's buffers give them)."""
    ends = sorted({min(at, len(data)) for at in cuts} | {len(data)})
    blocks = [data[start:end] for start, end in zip([0, *ends], ends)]
    if view in ("bytes", "bytearray"):
        return [bytearray(block) if view == "bytearray" else block for block in blocks]
    whole = memoryview(data) if view == "unsigned" else memoryview(data).cast("b")
    return [whole[start:end] for start, end in zip([0, *ends], ends)]


def same_str(text: str, expected: str) -> bool:
    """The same characters in the same form: CPython's == compares the kinds (one, two
    or four bytes a character) too, and ``isascii`` reads the str's ASCII flag."""
    return text == expected and text.isascii() == expected.isascii()


def decoded(blocks: list[bytes | memoryview], errors: str) -> str:
    try:
        return "".join(decode_blocks(blocks, "input", errors))
    except InputError as error:
        return f"error: {error}"


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PIECES, st.lists(st.integers(min_value=0, max_value=400), max_size=8),
       st.sampled_from(["bytes", "bytearray", "unsigned", "signed"]),
       st.sampled_from(["strict", "replace"]))
def test_the_same_text_or_error_as_the_codec_however_the_input_is_cut(pieces, cuts, view,
                                                                     errors):
    data = b"".join(pieces)
    fast = decoded(cut(data, cuts, view), errors)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(readers, "decode_valid", None)
        assert decoded(cut(data, cuts, view), errors) == fast
    try:
        expected = data.decode("utf-8", errors)
    except UnicodeDecodeError as error:
        assert fast.startswith(f"error: input: invalid UTF-8 at byte {error.start} (")
    else:
        assert same_str(fast, expected)


@settings(max_examples=examples(600), deadline=None)
@given(PIECES, st.integers(min_value=0, max_value=50))
def test_decode_valid_takes_the_longest_run_of_valid_characters(pieces, start):
    data = b"".join(pieces)
    start = min(start, len(data))
    text, end = _utf8.decode_valid(data, start)
    assert start <= end <= len(data)
    expected = data[start:end].decode()
    assert same_str(text, expected)
    if end < len(data):  # what follows does not begin with a whole character
        with pytest.raises(UnicodeDecodeError) as raised:
            data[end:].decode()
        assert raised.value.start == 0


def test_every_kind_of_str_and_a_start_outside_the_bytes():
    for text in ["plain", "café ÿ", "語 and ’", "😀 and 語"]:
        data = b"x" + text.encode()
        decoded, end = _utf8.decode_valid(data, 1)
        assert same_str(decoded, text) and end == len(data)
    assert _utf8.decode_valid(b"abc", 3) == ("", 3)
    with pytest.raises(IndexError):
        _utf8.decode_valid(b"abc", 4)


def test_an_input_larger_than_the_kept_room_has_room_of_its_own():
    for text in ["x" * 99 + "語", "x" * 99 + "é", "x" * 99 + "😀", "x" * 100]:
        data = (text * 3000).encode()  # 300 KB and more: past the 128 Ki units kept
        for start in (0, 1):
            decoded, end = _utf8.decode_valid(data, start)
            assert same_str(decoded, data[start:].decode()) and end == len(data)


def test_a_large_input_takes_no_more_memory_than_its_text():
    """A whole request's body decoded at once: its str, and nothing of its size beside
    it (room of two bytes a byte once took the peak to twice the text)."""
    script = ("import resource, sys\n"
              "from chunkd.kernel._utf8 import decode_valid\n"
              "data = ('x' * 99 + '語').encode() * (1 << 19)\n"
              "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
              "text, end = decode_valid(data, 0)\n"
              "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
              "assert end == len(data) and text == data.decode()\n"
              "print(grown * 1024 / (2 * len(text)))\n")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=HANG)
    assert ran.returncode == 0, ran.stderr
    assert float(ran.stdout) < 1.3  # the two-byte text itself, 105 MB, and little more


def test_the_corpus_read_in_blocks_is_the_codecs_text():
    paths = sorted(CORPUS.rglob("*.md"))
    assert len(paths) > 100
    for path in paths:
        data = path.read_bytes()
        blocks = [data[start:start + 4093] for start in range(0, len(data), 4093)]
        assert "".join(decode_blocks(blocks, str(path))) == data.decode(), path


def test_the_readers_use_the_fast_path_where_the_core_is_compiled():
    from chunkd.kernel.chosen import IMPLEMENTATION

    assert (readers.decode_valid is _utf8.decode_valid) == (IMPLEMENTATION == "compiled")
