"""HTML nested far deeper than Python's recursion limit, as unclosed tags make it
(browsers render it): extracted, not refused, and walked in time linear in its depth;
parsed within a bound on its depth (Lexbor's tree building takes time that grows with
its square), its text kept."""

from __future__ import annotations

import os
import subprocess

import orjson
import pytest

pytest.importorskip("selectolax")

from command import HANG, chunkd_command

from chunkd.inputs.html import (MAX_ATTRIBUTES, MAX_DEPTH, MAX_SCANNED, html_extracted,
                                   within_bounds)


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

    from chunkd.inputs.html import _Walk
    from chunkd.inputs.markdown import MarkdownText

    tree = LexborHTMLParser(b"<span><div>" * 20000 + b"deep")
    out = MarkdownText()
    Counted.reached = 0
    _Walk(out).block(Counted(tree.root))
    assert out.text().strip() == "deep"
    assert Counted.reached == 1 + descendants(tree.root) > 40000


# --- the bound on depth ------------------------------------------------------------

def tree_depth(data: bytes) -> int:
    """The depth of the tree Lexbor builds from ``data`` once within its bounds."""
    from selectolax.lexbor import LexborHTMLParser

    deepest, stack = 0, [(LexborHTMLParser(within_bounds(data)).root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.iter())
    return deepest


N = 3000
#: Ways to nest deep: plain, through the elements an end tag cannot close, self-closing
#: tags (HTML ignores the slash), SVG left by an HTML tag, table cells, lists, the
#: formatting elements HTML5 makes again inside every later block, tags outside a table
#: or inside a select (ignored) and a tokenizer's corner cases that hide tags from a
#: scan that reads them otherwise.
NESTED = {
    "divs": b"<div>" * N,
    "an end tag stopped by a div": b"<span><div></span>" * N,
    "self-closing": b"<div/>" * N,
    "svg left by a div": b"<svg><div/>" * N,
    "svg": b"<svg>" + b"<g>" * N + b"<div>" * N,
    "table cells": b"<table><td>" * N,
    "lists": b"<ul><li>" * N,
    "paragraphs closed by divs": b"<p><div>" * N,
    "formatting made again": b"".join(b"<div><b id=%d></div>" % n for n in range(N)),
    "formatting nested": b"".join(b"<b id=%d>" % n for n in range(N)),
    "cells outside a table": b"<td><span></td>" * N + b"<div>" * N,
    "tags ignored in a select": b"<select><p><option></p>" * N + b"<div>" * N,
    "an = that opens no value": b'<div =">' + b"<div>" * N + b'"',
    "an abrupt comment": b"<!--->" + b"<div>" * N,
    "integration points": b"<svg><foreignObject>" * N,
    "objects": b"<object><div>" * N,
    "divs in a select": b"<select>" + b"<div>x" * N,
    "cells in a select": b"<select>" + b"<table><td>" * N,
    "a select closed only in its scope": b"<select><table><td></select>" * N,
}


@pytest.mark.parametrize("data", NESTED.values(), ids=NESTED.keys())
def test_the_tree_built_stays_within_the_bound(data):
    # A table's implied <tbody> and <tr> may double it; the document alone, thousands.
    assert tree_depth(data) <= 2 * MAX_DEPTH + 4


def attribute_counts(data: bytes) -> tuple[int, int]:
    """The most attributes on one element of the tree Lexbor builds from ``data`` once
    within its bounds, and how many elements it has."""
    from selectolax.lexbor import LexborHTMLParser

    nodes = list(LexborHTMLParser(within_bounds(data)).root.traverse())
    return max(len(node.attributes) for node in nodes), len(nodes)


def names(count: int, value: bytes = b"") -> bytes:
    return b"".join(b" a%d%s" % (number, value) for number in range(count))


#: Lexbor compares each attribute with those before it on the element: many on one
#: tag, or on repeated ``<html>`` and ``<body>`` tags (whose attributes HTML5 merges
#: into the first one's element), take time that grows with the square of their number.
ATTRIBUTES = {
    "one tag": b"<div" + names(5000) + b">x" + b"<p>y" * 3000,
    "an end tag": b"<p>" * 3000 + b"</p" + names(5000) + b">x",
    "repeated body": b"".join(b"<body a%d>x" % number for number in range(5000)),
    "repeated html": b"".join(b"<html a%d>x" % number for number in range(5000)),
    "repeated with many": b"<body" + names(800) + b"><p>x" * 3000,
    "values": b"<div" + names(5000, b"='v>' b = v") + b"/>x" + b"<p>y" * 3000,
}


@pytest.mark.parametrize("data", ATTRIBUTES.values(), ids=ATTRIBUTES.keys())
def test_attributes_are_bounded(data, monkeypatch):
    most, _ = attribute_counts(data)
    assert most <= MAX_ATTRIBUTES
    text = html_extracted(data).text
    monkeypatch.setattr("chunkd.inputs.html.within_bounds", lambda data: data)
    assert text == html_extracted(data).text and "x" in text  # as unbounded


def test_a_self_closing_tag_keeps_its_slash_when_its_attributes_are_dropped():
    data = b"<p>" * 3000 + b"<svg><g" + names(3000, b"=v") + b" /><rect/></svg>"
    bounded = within_bounds(data)
    assert bounded.endswith(b" a%d=v /><rect/></svg>" % (MAX_ATTRIBUTES - 1))
    from selectolax.lexbor import LexborHTMLParser

    g = LexborHTMLParser(bounded).css_first("g")
    assert g is not None and g.child is None  # self-closed: <rect> is its sibling


def test_formatting_made_again_in_every_paragraph_stays_linear():
    """Each of the formatting elements left open is made again in every paragraph:
    within ``MAX_FORMATTING``, at most that many elements a paragraph."""
    from chunkd.inputs.html import MAX_FORMATTING

    data = b"".join(b"<b id=%d><p>x" % number for number in range(N))
    _, elements = attribute_counts(data)
    assert elements <= N * (MAX_FORMATTING + 3) < 12 * N
    assert html_extracted(data).text.split() == ["x"] * N


def ordinary_html() -> bytes:
    """A long page as they are written: unclosed paragraphs, list items and cells,
    formatting, tables, a select, SVG, comments and scripts."""
    part = (b"<h2>Part %d</h2><p>Some <b>bold</b> and <a href='/x?a=1&b=2'>a link</a>"
            b"<p>unclosed <i>italic <u>under</u></i><ul><li>one<li>two<ul><li>in</ul></ul>"
            b"<table><tr><td>cell<td>cell<tr><th>head</table><select><option>a<option>b"
            b"</select><svg><g><path d='M0 0'/></g></svg><!-- a <div> comment -->"
            b"<script>if (a < b) { document.write('<div>'); }</script><dl><dt>t<dd>d</dl>")
    return b"<!doctype html><html><head><title>t</title></head><body>" + b"".join(
        part % number for number in range(400)) + b"</body></html>"


def test_ordinary_html_is_parsed_as_it_is():
    data = ordinary_html()
    assert data.count(b"<") > 10_000
    assert within_bounds(data) is data
    sample = os.path.join(os.path.dirname(os.path.dirname(__file__)), "languages", "sample.html")
    with open(sample, "rb") as stream:
        page = stream.read()
    repeated = page * 50
    assert repeated.count(b"<") > 2048 and within_bounds(repeated) is repeated


def test_a_document_over_the_scanned_size_is_left_to_the_extractions_bounds():
    """Past ``MAX_SCANNED`` the pass would cost more than the parse it guards (2.5 us a
    tag): the document goes to Lexbor as it is, however deep, and the time and memory
    bounds of the extraction hold it."""
    deep = b"<div>" * (MAX_DEPTH * 4)
    within = b"<!doctype html><html><body>" + deep + b"x" * (MAX_SCANNED - len(deep) - 27)
    assert len(within) == MAX_SCANNED and within_bounds(within) is not within
    over = within + b" "
    assert within_bounds(over) is over


def test_deep_html_through_the_command_keeps_its_text(tmp_path):
    """200,000 nested elements, each with a paragraph of its own (2.2 MB; a minute and
    more before the bound): each paragraph kept, in order; and the other documents."""
    levels = 200_000
    (tmp_path / "deep.html").write_bytes(
        b"<!doctype html><html><body>" + b"".join(b"<div>level %d" % n for n in range(levels)))
    (tmp_path / "bold.html").write_bytes(
        b"<!doctype html><body>" + b"".join(b"<div><b id=%d></div>" % n for n in range(50_000))
        + b"the end")
    (tmp_path / "select.html").write_bytes(
        b"<!doctype html><body><p>before</p><select>" + b"<option>a</option>" * 100_000
        + b"</select><p>after</p>")
    (tmp_path / "small.html").write_bytes(b"<!doctype html><h1>Title</h1><p>text</p>")
    # The time limit guards against a hang only (each takes about a second).
    result = subprocess.run([chunkd_command(), "-q", "--format", "json", "--chars", "100000",
                             "--extract-timeout", "30", "deep.html", "bold.html", "select.html",
                             "small.html"], capture_output=True, timeout=HANG, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, b"")
    texts = {record["doc"]: record["text"] for record in map(orjson.loads,
                                                             result.stdout.splitlines())}
    assert texts["deep.html"].split("\n\n") == [f"level {n}" for n in range(levels)]
    assert texts["bold.html"] == "the end"
    assert texts["select.html"] == "before\n\nafter"
    assert texts["small.html"] == "# Title\n\ntext"


def test_wide_html_through_the_command_keeps_its_text(tmp_path):
    """Tags with 200,000 attributes and 100,000 repeated ``<html>`` and ``<body>``, a
    select of 200,000 divs (each past the 30 s limit below before the bounds, the
    first three past a minute), paragraphs each with formatting made again: their
    text kept."""
    pages = {
        "attributes.html": b"<div" + names(200_000) + b">x" + b"<p>y" * 3000,
        "body.html": b"".join(b"<body a%d>x" % number for number in range(100_000)),
        "html.html": b"".join(b"<html a%d>x" % number for number in range(100_000)),
        "select.html": b"<p>before<select>" + b"<div>x" * 200_000 + b"</select><p>after",
        "formatting.html": b"".join(b"<b id=%d><p>x%d" % (n, n) for n in range(20_000)),
    }
    for name, page in pages.items():
        (tmp_path / name).write_bytes(b"<!doctype html><html><body>" + page)
    # The time limit guards against a hang only (each takes a second or two).
    result = subprocess.run([chunkd_command(), "-q", "--format", "json", "--chars", "1000000",
                             "--extract-timeout", "30", *pages], capture_output=True,
                            timeout=HANG, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, b"")
    texts = {record["doc"]: record["text"] for record in map(orjson.loads,
                                                             result.stdout.splitlines())}
    assert texts["attributes.html"].split() == ["x"] + ["y"] * 3000
    assert texts["body.html"] == texts["html.html"] == "x" * 100_000
    assert texts["select.html"] == "before\n\nafter"
    assert texts["formatting.html"].split() == [f"x{n}" for n in range(20_000)]
