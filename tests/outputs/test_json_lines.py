"""The compiled NDJSON writer (``chunkd.kernel._records``) against its twin, the writer's
Python loop (``write_batches`` over ``_json_records``), and both against orjson as the
oracle of each record: the same bytes, cut into the same writes."""

from __future__ import annotations

import json

import numpy
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from chunkd.kernel import _records
from chunkd.model.chunk import Chunk, Parent
from chunkd.outputs.writers import Writer, _json_records, write_batches

#: Text with every kind of byte the escaping treats apart: controls, quote, backslash,
#: DEL, the JSON-unsafe separators U+2028/9, and characters of 2, 3 and 4 UTF-8 bytes.
ALPHABET = st.sampled_from(['"', "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
                            "\u2028", "é", "語", "😀", " ", "a", "/"]) | st.characters(
    blacklist_categories=("Cs",))
TEXTS = st.text(ALPHABET, max_size=80)
NUMBERS = st.integers(min_value=-2**63, max_value=2**63 - 1)


def compiled_writes(chunks: list[Chunk], opening: bytes, batch: int) -> list[bytes]:
    writes: list[bytes] = []
    _records.write_json_lines(writes.append, chunks, opening,
                              lambda chunk: next(_json_records((chunk,), opening, b"}\n")),
                              batch)
    return writes


def twin_writes(chunks: list[Chunk], opening: bytes, batch: int,
                monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    writes: list[bytes] = []
    with monkeypatch.context() as patch:
        patch.setattr("chunkd.outputs.writers.BATCH_BYTES", batch)
        write_batches(writes.append, _json_records(chunks, opening, b"}\n"))
    return writes


def oracle_lines(chunks: list[Chunk], header: dict) -> bytes:
    """Each record as orjson writes the dict, a line each."""
    return b"".join(orjson.dumps({**header, "index": c.index, "start": c.start, "end": c.end,
                                  "length": c.length, "text": c.text}) + b"\n" for c in chunks)


def chunk(index: int, start: int, end: int, length: int, text: str) -> Chunk:
    return Chunk(index, start, end, length, text)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(NUMBERS, NUMBERS, NUMBERS, NUMBERS, TEXTS), max_size=12),
       st.sampled_from([{}, {"doc": 'a "name"\n'}, {"doc": "x", "line": 3}]),
       st.integers(min_value=1, max_value=400))
def test_same_bytes_and_writes_as_the_twin_and_orjson(fields, header, batch):
    chunks = [chunk(*values) for values in fields]
    opening = b"{" + (orjson.dumps(header)[1:-1] + b"," if header else b"")
    with pytest.MonkeyPatch.context() as patch:
        expected = twin_writes(chunks, opening, batch, patch)
    assert compiled_writes(chunks, opening, batch) == expected
    assert b"".join(expected) == oracle_lines(chunks, header)


def test_every_byte_value_escaped_as_orjson_escapes_it():
    # In a str of two bytes a character (encoded here) and of four (encoded by Python).
    two = "".join(map(chr, range(0x100))) + "\u2028\u2029\ufeff"
    texts = [two, two + "\U0010ffff", ""]
    chunks = [chunk(i, 0, len(text), len(text), text) for i, text in enumerate(texts)]
    written = b"".join(compiled_writes(chunks, b"{", 1 << 20))
    assert written == oracle_lines(chunks, {})
    assert [json.loads(line)["text"] for line in written.splitlines()] == texts


def test_long_texts_cross_the_word_reads_at_every_offset():
    # An escape (or a character beyond ASCII, or one at an edge of the plain range) at
    # each position of two 16-byte steps and of an 8-byte word, and texts of every
    # length around it. Each in the three kinds of str: one byte a character, two (a
    # CJK character in it) and four (an emoji).
    texts = [kind + "a" * before + special + "b" * after
             for kind in ("", "語", "😀")
             for special in ('"', "\\", "\n", "\x01", "\x1f", " ", "\x7f", "\x80", "é", "語",
                             "\u0100", "\u7fff", "\u8000", "\uffff")
             for before in range(36) for after in range(18)]
    chunks = [chunk(i, i, i + len(text), len(text), text) for i, text in enumerate(texts)]
    assert b"".join(compiled_writes(chunks, b"{", 1 << 20)) == oracle_lines(chunks, {})


def test_chunks_with_optional_fields_or_odd_numbers_go_through_the_twin(monkeypatch):
    vector = numpy.arange(3, dtype=numpy.float32)
    chunks = [
        chunk(0, 0, 3, 3, "abc"),
        Chunk(1, 3, 6, 2, "def", tokens=2, headings=["A", 'B "q"']),
        Chunk(2, 6, 9, 3, "ghi", parent=Parent(0, 0, 9, 9, "abcdefghi"), vector=vector),
        chunk(3, 9, 12, 3.0, "jkl"),  # type: ignore[arg-type]  # a float length (a drop-in's)
        chunk(True, 2**70, 2**70 + 3, 3, "mno"),  # type: ignore[arg-type]  # beyond 64 bits
        chunk(5, 12, 15, 3, "pqr"),
    ]
    expected = twin_writes(chunks, b"{", 1 << 20, monkeypatch)
    assert compiled_writes(chunks, b"{", 1 << 20) == expected
    lines = b"".join(expected).splitlines()
    assert json.loads(lines[1])["headings"] == ["A", 'B "q"']
    assert json.loads(lines[2])["vector"] == [0.0, 1.0, 2.0]
    assert json.loads(lines[4])["start"] == 2**70


def test_a_lone_surrogate_fails_as_in_the_twin():
    chunks = [chunk(0, 0, 1, 1, "a"), chunk(1, 1, 2, 1, "\udc80")]
    with pytest.raises(TypeError) as twin_error:
        write_batches(lambda data: None, _json_records(chunks, b"{", b"}\n"))
    with pytest.raises(TypeError) as compiled_error:
        compiled_writes(chunks, b"{", 1 << 20)
    assert str(compiled_error.value) == str(twin_error.value)


def test_the_writer_uses_the_compiled_loop_where_the_core_is_compiled():
    from chunkd.kernel import chosen
    from chunkd.outputs import writers

    assert (writers.write_json_lines is _records.write_json_lines) == \
        (chosen.IMPLEMENTATION == "compiled")
    out: list[bytes] = []

    class Stream:
        def write(self, data: bytes) -> int:
            out.append(bytes(data))
            return len(data)

    writer = Writer(Stream(), named=True)  # type: ignore[arg-type]
    writer.begin("a.md", {"source": "x"})
    chunks = [chunk(0, 0, 2, 2, "é\n"), Chunk(1, 2, 4, 2, "zz", tokens=1)]
    writer.write(chunks)
    assert [json.loads(line) for line in b"".join(out).splitlines()] == [
        {"doc": "a.md", "source": "x", "index": 0, "start": 0, "end": 2, "length": 2,
         "text": "é\n"},
        {"doc": "a.md", "source": "x", "index": 1, "start": 2, "end": 4, "length": 2,
         "tokens": 1, "text": "zz"}]


def test_any_iterable_of_chunks_is_written_as_a_list_is(monkeypatch):
    """A strategy's ``feed`` may return a tuple or a generator of chunks."""
    chunks = [chunk(i, i, i + 1, 1, "é\"x") for i in range(5)]
    expected = twin_writes(chunks, b"{", 1 << 20, monkeypatch)
    assert compiled_writes(tuple(chunks), b"{", 1 << 20) == expected  # type: ignore[arg-type]
    assert compiled_writes(iter(chunks), b"{", 1 << 20) == expected  # type: ignore[arg-type]
