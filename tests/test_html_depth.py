"""HTML nested far deeper than Python's recursion limit, as unclosed tags make it
(browsers render it): extracted, not refused, and walked in time linear in its depth."""

from __future__ import annotations

import pytest

pytest.importorskip("selectolax")

from chunkd.documents.html import html_extracted


@pytest.mark.parametrize(("data", "text"), [
    (b"<div>" * 1000 + b"unclosed", "unclosed"),
    (b"<b>" * 1000 + b"bold" + b"</b>" * 1000, "bold"),
    (b"<span>" * 5000 + b"inline" + b"</span>" * 5000, "inline"),
    (b"<ul><li>item" * 1000, None),
])
def test_deep_html_is_extracted(data, text):
    extracted = html_extracted(data).text
    if text is None:   # a list nested 1,000 deep: an item a line, indented by depth to 8
        lines = extracted.splitlines()
        assert len(lines) == 1000
        assert lines[:10] == ["  " * min(depth, 8) + "- item" for depth in range(10)]
        assert set(lines[8:]) == {"  " * 8 + "- item"}
    else:
        assert extracted.strip() == text


class Counted:
    """A tree node that counts how many times the walk reaches a node."""

    reached = 0

    def __init__(self, node) -> None:
        self.node = node
        Counted.reached += 1

    def __getattr__(self, name: str):
        return getattr(self.node, name)

    def iter(self, **options):
        return (Counted(child) for child in self.node.iter(**options))


def descendants(node) -> int:
    """How many nodes, text included, are below ``node`` (a plain count, with a stack)."""
    count, stack = 0, [node]
    while stack:
        children = list(stack.pop().iter(include_text=True))
        count += len(children)
        stack.extend(children)
    return count


def test_deep_html_walk_reaches_each_node_once():
    """20,000 nested elements: walked without recursion, each node reached once, so in
    linear time (the walk after the parse: Lexbor's HTML5 tree building is itself
    quadratic in the depth of unclosed elements, see docs)."""
    from selectolax.lexbor import LexborHTMLParser

    from chunkd.documents.html import _Walk
    from chunkd.documents.markdown import MarkdownText

    tree = LexborHTMLParser(b"<span><div>" * 20000 + b"deep")
    out = MarkdownText()
    Counted.reached = 0
    _Walk(out).block(Counted(tree.root))
    assert out.text().strip() == "deep"
    assert Counted.reached == 1 + descendants(tree.root) > 40000
