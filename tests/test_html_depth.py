"""HTML nested far deeper than Python's recursion limit, as unclosed tags make it
(browsers render it): extracted, not refused, and walked in time linear in its depth."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("selectolax")

from chunkd.documents.html import html_text  # noqa: E402


@pytest.mark.parametrize(("data", "text"), [
    (b"<div>" * 1000 + b"unclosed", "unclosed"),
    (b"<b>" * 1000 + b"bold" + b"</b>" * 1000, "bold"),
    (b"<span>" * 5000 + b"inline" + b"</span>" * 5000, "inline"),
    (b"<ul><li>item" * 1000, None),
])
def test_deep_html_is_extracted(data, text):
    extracted = html_text(data)
    if text is None:   # a list nested 1,000 deep: an item a line, indented by depth
        lines = extracted.splitlines()
        assert len(lines) == 1000 and lines[-1] == "  " * 999 + "- item"
    else:
        assert extracted.strip() == text


def test_deep_html_walk_is_linear():
    """Walking 20,000 nested elements takes about twice the time of 10,000 (the walk
    after the parse: Lexbor's HTML5 tree building is itself quadratic in the depth of
    unclosed elements, see docs)."""
    from selectolax.lexbor import LexborHTMLParser

    from chunkd.documents.html import _Walk
    from chunkd.documents.markdown import MarkdownText

    times = []
    for depth in (10000, 20000):
        tree = LexborHTMLParser(b"<span><div>" * depth + b"deep")
        began = time.perf_counter()
        out = MarkdownText()
        _Walk(out).block(tree.root)
        times.append(time.perf_counter() - began)
        assert out.text().strip() == "deep"
    assert times[1] < 4 * times[0] + 0.05
