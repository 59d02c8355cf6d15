"""``--strategy propositions`` on the page, in a real browser (Debian's Chromium, driven
by Playwright), against a loopback chat server scripted to answer: what the page
highlights for a chunk and for each of its statements is exactly the span the
installed filter's records give for the same document and settings, approximate and
unsupported statements are shown as such, the characters no statement stands for
stand out, and a recursive split in the same page is shown as before."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

import pytest
from chat_server import serving
from playwright.sync_api import expect

from browser import Serve
from command import ndjson, run_chunkd
from test_page import (FRAMES, check_details, check_segments, choose, open_server_page,  # noqa: F401
                       page, paste, shown_segments, split)

pytestmark = pytest.mark.browser

#: An astral character before the sources shifts JavaScript's offsets from the records'.
DOCUMENT = ("# Field notes 🔬\n\nMarie Curie was a physicist and chemist. She was born in "
            "Warsaw in 1867. She won two Nobel Prizes.\n\nThe Danube flows through ten "
            "countries. It rises in the Black Forest and ends at the Black Sea.\n\nThe vault "
            "code is kept in the manager's office. Only two people know it.\n")
SETTINGS = ("--strategy", "propositions", "--chars", "130", "--llm-model", "toy-llm")
#: The document view's pieces: start, end, classes, text.
READ_VIEW = """view => [...view.querySelectorAll('.seg')].map(span =>
    [Number(span.dataset.start), Number(span.dataset.end), span.className, span.textContent])"""


def answer(*groups: tuple[str, list[str]]) -> str:
    return json.dumps({"chunks": [{"title": title, "summary": f"About {title}.",
                                   "propositions": statements}
                                  for title, statements in groups]})


def reply(body: dict, prompt: str) -> str:
    """Statements drawn word for word, rephrased (approximate) and invented
    (unsupported); two groups drawn from the same sentence; a group nothing supports (an
    empty span); a refusal (its passage kept as its own text)."""
    if "Curie" in prompt:
        return answer(("Curie", ["Marie Curie was a physicist and chemist.",
                                 "Marie Curie was born in Warsaw in 1867.",
                                 "The moon is made of green cheese."]),
                      ("Prizes", ["She won two Nobel Prizes", "Marie Curie was a physicist",
                                  "She was born in Warsaw"]))
    if "Danube" in prompt:
        return answer(("Danube", ["The Danube flows through ten countries."]),
                      ("Owls", ["Owls fly at noon."]))
    return "I'm sorry, but I can't help with that."


class Served(NamedTuple):
    serve: Serve
    records: list[dict]  # the filter's for DOCUMENT
    said: list[str]      # and its stderr's lines
    path: Path           # DOCUMENT's file
    llm: str             # the chat server's address


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The chat server, the filter's records and stderr for DOCUMENT, and ``chunkd
    serve`` with the same settings."""
    path = tmp_path_factory.mktemp("doc") / "notes.md"
    path.write_text(DOCUMENT)
    with serving(reply) as chat:
        done = run_chunkd(*SETTINGS, "--llm-url", chat.url, "--count-tokens", str(path))
        assert done.returncode == 0, done.stderr
        with Serve(*SETTINGS, "--llm-url", chat.url) as serve:
            yield Served(serve, ndjson(done.stdout), done.stderr.decode().splitlines(),
                         path, chat.url)


def merged(pieces) -> list[tuple[int, int]]:
    """Touching pieces (start, end, ...) of the view as the ranges they make."""
    ranges: list[list[int]] = []
    for start, end, *_ in sorted(pieces):
        if ranges and ranges[-1][1] == start:
            ranges[-1][1] = end
        else:
            ranges.append([start, end])
    return [(start, end) for start, end in ranges]


def union(spans) -> list[tuple[int, int]]:
    """Spans (start, end) as disjoint ranges, touching ones joined."""
    ranges: list[list[int]] = []
    for start, end in sorted(spans):
        if ranges and start <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], end)
        else:
            ranges.append([start, end])
    return [(start, end) for start, end in ranges]


def view(page) -> list:
    return page.eval_on_selector("#view", READ_VIEW)


def marked(page, name: str) -> list[tuple[int, int]]:
    return merged(piece for piece in view(page) if name in piece[2].split())


def check_view(pieces, records: list[dict]) -> None:
    """The view shows the whole document once, cut at every source's start and end;
    each piece marked by the statements whose sources cover it: a chunk's colour, two
    chunks' where statements of two cover it, hatched where only approximate ones do,
    underlined where none does (white space aside)."""
    assert pieces[0][0] == 0 and pieces[-1][1] == len(DOCUMENT)
    for (_, end, _, _), (start, _, _, _) in zip(pieces, pieces[1:]):
        assert end == start
    sources = [(item["start"], item["end"], index, item["match"])
               for index, record in enumerate(records) for item in record["propositions"]
               if item["start"] is not None]
    for start, end, classes, text in pieces:
        assert text == DOCUMENT[start:end]
        assert not any(start < at < end for source in sources for at in source[:2])
        covering = [source for source in sources if source[0] <= start and end <= source[1]]
        chunks = {source[2] for source in covering}
        kind = ("gap" if not chunks else "overlap" if len(chunks) > 1
                else f"c{min(chunks) % 2}")
        expected = {"seg", kind}
        if not covering and text.strip():
            expected.add("uncovered")
        if covering and all(source[3] == "approximate" for source in covering):
            expected.add("approx")
        assert set(classes.split()) - {"sel", "focus"} == expected, (start, end, classes)


def test_a_chunks_statements_highlight_exactly_their_sources(page, served):
    serve, records, said = served.serve, served.records, served.said
    matches = [item["match"] for record in records for item in record["propositions"]]
    assert {"exact", "approximate", None} <= set(matches)  # the reply gives each kind
    assert any(record["title"] is None for record in records)  # and a passage kept
    assert any(record["start"] == record["end"] for record in records)  # and no source
    open_server_page(page, serve.url)
    paste(page, DOCUMENT)
    split(page)
    pieces = view(page)
    check_view(pieces, records)
    # Two chunks' statements drawn from the same text; an approximate source partly
    # also an exact one's (hatched only where no exact one covers it).
    assert [piece for piece in pieces if "overlap" in piece[2].split()] != []
    assert [piece for piece in pieces if "approx" in piece[2].split()] != []
    assert [piece for piece in pieces if "approx" not in piece[2].split()
            and piece[0] >= DOCUMENT.index("She was born")
            and piece[1] <= DOCUMENT.index(" in 1867")] != []
    assert page.is_visible("#legend-sources") and page.is_hidden("#legend-chunks")
    # The totals: the statements by match, and the share of the document no statement
    # stands for, as the filter says it on stderr; the filter's lines about the document.
    [coverage] = [line for line in said if "covered by no proposition" in line]
    share = re.search(r"([\d.]+) % of the document's characters", coverage).group(1)
    assert page.text_content("[data-fact='Uncovered'] .value") == f"{float(share):g} %"
    assert page.text_content("[data-fact='Statements'] .label") == (
        f"{matches.count('exact')} exact, {matches.count('approximate')} approximate, "
        f"{matches.count(None)} unsupported")
    notes = page.eval_on_selector_all("#notes li", "items => items.map(item => item.textContent)")
    assert [f"chunkd: {served.path}: {note}" for note in notes] == said[:-1]
    for index, record in enumerate(records):
        # The row's own click event: the list renders only the rows in sight, anew as
        # it scrolls, so a click at the row's coordinates may meet the row before it.
        page.dispatch_event(f"#row-{index}", "click")
        expect(page.locator("#details [data-fact='Index']")).to_have_text(str(index))
        title = record["title"] if record["title"] is not None else "No title"
        assert page.text_content("#details .chunk-title").startswith(title)
        assert page.text_content("#details [data-fact='Sources']") == (
            f"within {record['start']}–{record['end']} "
            f"({record['end'] - record['start']} code points)"
            if record["start"] < record["end"] else "none")
        assert marked(page, "sel") == union((item["start"], item["end"])
                                            for item in record["propositions"]
                                            if item["start"] is not None)
        statements = page.locator("#details .statement")
        expect(statements).to_have_count(len(record["propositions"]))
        for k, item in enumerate(record["propositions"]):
            statement = statements.nth(k)
            statement.hover()
            page.evaluate(FRAMES)
            assert statement.locator(".statement-text").text_content() == item["text"]
            kind = {"exact": "exact", "approximate": "approximate", None: "unsupported"}
            assert kind[item["match"]] in statement.get_attribute("class").split()
            source = statement.locator(".statement-source").text_content()
            if item["start"] is None:
                assert source == "no source in the document" and marked(page, "focus") == []
                continue
            assert source.startswith(f"{item['start']}–{item['end']} {item['match']}")
            assert marked(page, "focus") == [(item["start"], item["end"])]
            if item["match"] == "approximate":
                assert f"({item['score']})" in source


def test_clicking_a_source_selects_its_chunk_and_statement(page, served):
    serve, records = served.serve, served.records
    open_server_page(page, serve.url)
    paste(page, DOCUMENT)
    split(page)
    [rephrased] = [(index, k, item) for index, record in enumerate(records)
                   for k, item in enumerate(record["propositions"])
                   if item["match"] == "approximate"]
    index, k, item = rephrased
    only = next(piece for piece in view(page) if piece[2].split()[1:2] == [f"c{index % 2}"]
                and item["start"] <= piece[0] and piece[1] <= item["end"])
    page.click(f"#view .seg[data-start='{only[0]}']")
    expect(page.locator("#details [data-fact='Index']")).to_have_text(str(index))
    expect(page.locator("#details .statement.pinned")).to_have_attribute("data-item", str(k))
    page.mouse.move(0, 0)
    page.evaluate(FRAMES)
    assert marked(page, "focus") == [(item["start"], item["end"])]
    # Where two chunks' statements share a source, a click again selects the other.
    shared = next(piece for piece in view(page) if "overlap" in piece[2].split())
    owners = sorted({i for i, record in enumerate(records) for found in record["propositions"]
                     if found["start"] is not None
                     and found["start"] <= shared[0] and shared[1] <= found["end"]})
    assert len(owners) == 2
    chosen = []
    for _ in owners:
        page.click(f"#view .seg[data-start='{shared[0]}']")
        page.evaluate(FRAMES)
        chosen.append(int(page.text_content("#details [data-fact='Index']")))
    assert sorted(chosen) == owners


def test_a_recursive_split_after_it_is_shown_as_before(page, served):
    open_server_page(page, served.serve.url)
    paste(page, DOCUMENT)
    split(page)
    expect(page.locator("#details .statement").first).to_be_visible()
    # A server started with the LLM's options serves every other strategy too (but
    # semantic, which needs a model).
    refused = page.eval_on_selector_all("#strategy option:disabled", "os => os.map(o => o.value)")
    assert refused == ["semantic"]
    choose(page, "recursive", "chars", "60")
    split(page)
    records = ndjson(run_chunkd("--chars", "60", "--count-tokens", str(served.path)).stdout)
    check_segments(shown_segments(page), DOCUMENT, records)
    check_details(page, records[0], "chars", None)
    assert page.locator("#view .uncovered, #view .approx, #view .focus").count() == 0
    assert page.is_visible("#legend-chunks") and page.is_hidden("#legend-sources")
    assert page.is_visible("[data-fact='Repeated']") and page.is_hidden("#notes")


def test_a_preview_file_shows_the_same_sources(page, served, tmp_path):
    out = tmp_path / "report.html"
    done = run_chunkd("preview", *SETTINGS, "--llm-url", served.llm, str(served.path),
                      "-o", str(out))
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    page.goto(out.as_uri())
    expect(page.locator("#details .statement").first).to_be_visible()
    check_view(view(page), served.records)
    notes = page.eval_on_selector_all("#notes li", "items => items.map(item => item.textContent)")
    assert [f"chunkd: {served.path}: {note}" for note in notes] == served.said[:-1]
    assert page.locator("#row-1 .text").text_content().startswith(
        f"{served.records[1]['title']} · {served.records[1]['text'][:20]}")
