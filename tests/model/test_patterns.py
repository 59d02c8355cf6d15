"""Regular expressions compiled where first used (``chunkd.model.patterns.deferred``): the
compiled expression's answers, compiled once, at the first use and not before."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from chunkd.model.patterns import deferred


@given(st.text(alphabet="ab\n |\\`~-:x", max_size=40))
def test_a_deferred_expression_answers_as_the_compiled_one(text):
    for source, flags in ((r"(?<!\\)\|", 0), (r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE),
                          (r"[ \t]*\|?[ \t]*:?-+:?[ \t]*", 0)):
        compiled, late = re.compile(source, flags), deferred(source, flags)
        assert late.split(text) == compiled.split(text)
        assert [m.span() for m in late.finditer(text)] == [m.span() for m in compiled.finditer(text)]
        assert late.sub("*", text) == compiled.sub("*", text)
        assert (late.match(text) is None) == (compiled.match(text) is None)
        assert late.pattern == source and late.flags == compiled.flags


def test_it_compiles_at_the_first_use_once(monkeypatch):
    compiled = []
    real = re.compile
    monkeypatch.setattr(re, "compile", lambda *args: compiled.append(args) or real(*args))
    late = deferred(rb"charset=(\w+)", re.IGNORECASE)
    assert compiled == []
    assert late.search(b"CHARSET=utf-8").group(1) == b"utf"
    assert late.search(b"charset=x").group(1) == b"x"
    assert late.findall(b"charset=a charset=b") == [b"a", b"b"]
    assert compiled == [(rb"charset=(\w+)", re.IGNORECASE)]
