"""Property tests on generated text: equality with LangChain and tiktoken, exact offsets."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from chunkd.units import resolve
from cores import twin_token_counter
from oracle import (check_against_langchain, chunkd_chunks, cut_in_pieces, encoding,
                    generated_documents, langchain_chunks, token_length)

cut_document = cut_in_pieces(generated_documents)


@st.composite
def size_and_overlap(draw, max_size):
    size = draw(st.integers(1, max_size))
    return size, draw(st.integers(0, size - 1))


SETTINGS = settings(max_examples=examples(400), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(cut_document, size_and_overlap(60))
def test_chars_equal_langchain(doc, sizes):
    text, pieces = doc
    check_against_langchain(text, pieces, *sizes, "chars")


@SETTINGS
@given(cut_document, size_and_overlap(40))
def test_tokens_equal_langchain(doc, sizes):
    text, pieces = doc
    check_against_langchain(text, pieces, *sizes, "tokens")


@SETTINGS
@given(generated_documents, size_and_overlap(40), st.sampled_from(["chars", "tokens"]))
def test_sizes_within_limit_wherever_langchain_is(text, sizes, unit):
    size, overlap = sizes
    chunks = chunkd_chunks([text], size, overlap, unit)
    expected = langchain_chunks(text, size, overlap, unit)
    length = len if unit == "chars" else token_length
    for chunk, theirs in zip(chunks, expected, strict=True):
        if length(theirs) <= size:
            assert chunk.length <= size


#: The cl100k_base counters of both cores: the compiled one and its pure-Python twin.
COUNTERS = {"compiled": lambda: resolve("cl100k_base"), "twin": twin_token_counter}


@pytest.mark.parametrize("core", COUNTERS)
@settings(max_examples=examples(1000), deadline=None)
@given(text=generated_documents)
def test_token_count_equals_tiktoken(core, text):
    assert COUNTERS[core]().count(text) == len(encoding().encode_ordinary(text))


@pytest.mark.parametrize("core", COUNTERS)
@settings(max_examples=examples(1000), deadline=None)
@given(head=generated_documents, tail=generated_documents)
def test_pretokens_but_the_last_two_survive_appending(core, head, tail):
    """What the kernel's lower bound on an unfinished piece's count relies on."""
    pretokens = COUNTERS[core]().pretokens
    stable = pretokens(head)[:-2]
    assert pretokens(head + tail)[:len(stable)] == stable


@pytest.mark.parametrize("core", COUNTERS)
@settings(max_examples=examples(1000), deadline=None)
@given(head=generated_documents, tail=generated_documents)
def test_settled_prefix_keeps_its_count_whatever_follows(core, head, tail):
    """The length-unit protocol's ``settled``, with tiktoken as the judge."""
    end, count = COUNTERS[core]().settled(head)
    assert 0 <= end <= len(head) and count >= 0
    assert token_length(head + tail) == count + token_length(head[end:] + tail)


@pytest.mark.slow
def test_every_code_point_is_classified_as_tiktoken_does():
    """Each code point in the contexts where letter, number, space and other differ
    (its class must follow tiktoken's Unicode version, not Python's)."""
    count, encode = resolve("cl100k_base").count, encoding().encode_ordinary
    code_points = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    for at in range(0, len(code_points), 512):
        text = "".join(f"x{c}{{{c} {c}!{c}1{c}{c}'s\n" for c in code_points[at:at + 512])
        assert count(text) == len(encode(text)), f"near U+{ord(code_points[at]):04X}"
