"""The preview page in a real browser (Debian's Chromium, driven by Playwright): what
``chunkd serve`` shows and what a ``chunkd preview`` file shows, against what the
installed ``chunkd`` filter writes for the same document and settings.

One browser for the whole module; each test gets a fresh browser context."""

from __future__ import annotations

import bisect
import math
import re
import threading

import pytest
from playwright.sync_api import expect

from browser import Serve
from command import HANG, ndjson, run_chunkd
from oracle import corpus_documents
from tokenizer_files import MINILM_IDENTITY, O200K_FILE, minilm_folder

pytestmark = pytest.mark.browser

#: English with emoji (code points beyond UTF-16's first plane shift JavaScript's offsets).
ENGLISH = next(p for p in corpus_documents() if p.name == "src_ch02-00-guessing-game-tutorial.md")
CHINESE = next(p for p in corpus_documents() if p.name == "src_guide_essentials_conditional.md")
HOSTILE = ('<script>alert(1)</script>\n\n<img src=x onerror="window.pwned=1;alert(2)">\n'
           '<b>bold</b> &amp; &lt;i&gt; </textarea><iframe src="javascript:alert(3)"></iframe>\n'
           '<style>body{display:none}</style><a href="javascript:alert(4)">link</a> 😀\n') * 3
FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
#: The list's rows in the page: index, then the number, range and length shown.
READ_ROWS = """list => [...list.querySelectorAll('.row')].map(row =>
    [Number(row.dataset.index), ...[...row.children].slice(0, 3).map(cell => cell.textContent)])"""
#: The document view's pieces in the page: start, end, kind (c0, c1, overlap, gap), text.
READ_SEGMENTS = """view => [...view.querySelectorAll('.seg')].map(span =>
    [Number(span.dataset.start), Number(span.dataset.end),
     [...span.classList].find(name => ['c0', 'c1', 'overlap', 'gap'].includes(name)),
     span.textContent])"""


@pytest.fixture(scope="module")
def server():
    with Serve() as serve:
        yield serve


class Watch:
    """What a page did that it should not: errors (CSP refusals included) and dialogs.
    The browser logs the server's refusals (400, 413) of what a test sends on purpose."""

    REFUSALS = ("status of 400 (Bad Request)", "status of 413 (Request Entity Too Large)",
                "status of 422 (Unprocessable Entity)")

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", self.console)
        page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))

    def console(self, message) -> None:
        if message.type == "error" and not message.text.endswith(self.REFUSALS):
            self.errors.append(message.text)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, accept_downloads=True)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    watch = Watch(page)
    yield page
    context.close()
    assert watch.errors == [] and watch.dialogs == []


# --- reading the page as a user sees it ---------------------------------------------------

def open_server_page(page, url: str):
    page.goto(url)
    expect(page.locator("#settings")).to_be_visible()


def paste(page, text: str) -> None:
    """Put ``text`` on the clipboard and paste it into the document box (Ctrl+V)."""
    page.evaluate("text => navigator.clipboard.writeText(text)", text)
    if page.is_hidden("#editor"):  # the chunks are shown: back to the text
        page.click("#tab-edit")
    page.click("#editor")
    page.keyboard.press("Control+A")
    page.keyboard.press("Control+V")
    assert page.input_value("#editor") == text


def choose(page, strategy: str = "recursive", unit: str | None = None, size: str = "",
           overlap: str = "") -> None:
    page.select_option("#strategy", strategy)
    if unit:
        page.select_option("#unit", unit)
    page.fill("#size", size)
    page.fill("#overlap", overlap)


def split(page) -> None:
    page.click("#split")
    expect(page.locator("#action-status")).to_contain_text("chunks, shown in")


def scroll_through(page, selector: str, read: str) -> list:
    """Scroll the element from top to bottom a screen at a time, collecting what the
    JavaScript function ``read`` (given the element) returns at each stop, once the page
    has filled in what came into sight."""
    step = f"""async (box, top) => {{
        box.scrollTop = top;
        await ({FRAMES})();
        return [({read})(box), box.scrollHeight, box.clientHeight];
    }}"""
    box = page.locator(selector)
    seen, top = [], 0
    while True:
        found, height, sight = box.evaluate(step, top)
        seen += found
        if top + sight >= height:
            return seen
        top += sight


def shown_rows(page) -> list[list[str]]:
    rows = scroll_through(page, "#list", READ_ROWS)
    by_index = {index: cells for index, *cells in rows}
    assert sorted(by_index) == list(range(len(by_index)))
    return [by_index[i] for i in range(len(by_index))]


def shown_segments(page) -> list[tuple[int, int, str, str]]:
    """The document view's pieces: (start, end, kind, text), kind one of c0, c1,
    overlap, gap."""
    spans = scroll_through(page, "#view", READ_SEGMENTS)
    return sorted({tuple(span) for span in spans})


def details(page) -> dict[str, str]:
    return dict(page.eval_on_selector_all(
        "#details [data-fact]", "facts => facts.map(f => [f.dataset.fact, f.textContent])"))


def number(value: int) -> str:
    return f"{value:,}"


# --- what the filter says ---------------------------------------------------------------

def expected_row(record: dict, unit: str) -> list[str]:
    tokens = "" if unit == "tokens" else f" · {number(record['tokens'])} tok"
    return [f"#{record['index']}", f"{record['start']}–{record['end']}",
            f"{number(record['length'])} {unit}{tokens}"]


def check_segments(segments, text: str, records: list[dict], whole: bool = True) -> None:
    """The view shows the text (``whole``: all of it, once), each piece marked by the
    chunks covering it: alternating colours, overlap where two or more chunks cover
    it, gap where none."""
    if whole:
        assert segments[0][0] == 0 and segments[-1][1] == len(text)
        for (_, end, _, _), (start, _, _, _) in zip(segments, segments[1:]):
            assert end == start
    by_start = sorted(records, key=lambda r: (r["start"], r["index"]))
    starts = [r["start"] for r in by_start]
    boundaries = sorted(starts + [r["end"] for r in records])
    for start, end, kind, shown in segments:
        assert shown == text[start:end]
        assert bisect.bisect_right(boundaries, start) == bisect.bisect_left(boundaries, end)
        begun = by_start[:bisect.bisect_right(starts, start)]
        covering = sorted((r for r in begun[-20:] if end <= r["end"]),  # a few back suffice
                          key=lambda r: r["index"])
        expected = ("gap" if not covering else "overlap" if len(covering) > 1
                    else f"c{covering[0]['index'] % 2}")
        assert kind == expected, (start, end)


def check_details(page, record: dict, unit: str, previous: dict | None,
                  tokenizer: str = "cl100k_base") -> None:
    shared = (max(0, min(previous["end"], record["end"]) - max(previous["start"], record["start"]))
              if previous else 0)
    parent = record.get("parent")
    assert details(page) == {
        "Index": str(record["index"]),
        "Range": f"{record['start']}–{record['end']} "
                 f"({number(record['end'] - record['start'])} code points)",
        "Length": f"{number(record['length'])} {unit}",
        "Tokens": f"{number(record['tokens'])} ({tokenizer})",
        "Estimated tokens": "—",
        **({"Parent": f"#{parent['index']}, {parent['start']}–{parent['end']}"}
           if parent else {}),
        "Shared with the previous": f"{number(shared)} code points" if shared else "nothing",
    }
    assert page.text_content("#details .chunk-text") == record["text"]


def check_jsonl(page, expected: str, filename: str) -> None:
    page.click("#copy")
    expect(page.locator("#action-status")).to_contain_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == expected
    with page.expect_download() as download:
        page.click("#download")
    assert download.value.suggested_filename == filename
    with open(download.value.path(), encoding="utf-8") as saved:
        assert saved.read() == expected


# --- chunkd serve ---------------------------------------------------------------------------

def test_split_shows_what_the_filter_writes(page, server):
    text = ENGLISH.read_text(encoding="utf-8")
    expected = run_chunkd("--count-tokens", "--tokens", "200", "--overlap", "40",
                          input=text.encode())
    records = ndjson(expected.stdout)
    assert any(a["end"] > b["start"] for a, b in zip(records, records[1:])), "no overlap to see"
    assert len(text.encode("utf-16-le")) // 2 > len(text), "no emoji to shift offsets"

    open_server_page(page, server.url)
    paste(page, text)
    choose(page, "recursive", "tokens", "200", "40")
    split(page)

    assert shown_rows(page) == [expected_row(r, "tokens") for r in records]
    segments = shown_segments(page)
    check_segments(segments, text, records)
    assert sum(kind == "overlap" for _, _, kind, _ in segments) >= 1
    check_jsonl(page, expected.stdout.decode(), "document.chunks.jsonl")
    tiles = dict(page.eval_on_selector_all(
        "#totals [data-fact]", "tiles => tiles.map(t => [t.dataset.fact, t.firstChild.textContent])"
    ))
    assert tiles["Chunks"] == number(len(records))
    assert tiles["Tokens"] == number(sum(r["tokens"] for r in records))
    check_histogram(page, records, 200)


def check_histogram(page, records: list[dict], size: int) -> None:
    """Each bar counts the chunks whose length is in its range; bars past the size
    are marked."""
    bars = page.eval_on_selector_all(
        "#histogram rect", "bars => bars.map(bar => [bar.getAttribute('class'), bar.textContent])")
    assert bars
    for kind, title in bars:
        lengths, chunks = re.fullmatch(r"([\d–]+) \w+: ([\d,]+) chunks", title).groups()
        low, _, high = lengths.partition("–")
        low, high = int(low), int(high or low)
        assert int(chunks.replace(",", "")) == sum(low <= r["length"] <= high for r in records)
        assert kind == ("bar over" if low > size else "bar")
    assert sum(int(t.split(": ")[1].split()[0].replace(",", "")) for _, t in bars) == len(records)


def test_selecting_a_chunk_shows_its_details(page, server):
    text = CHINESE.read_text(encoding="utf-8")
    expected = run_chunkd("--count-tokens", "--chars", "200", "--overlap", "15%",
                          input=text.encode())
    records = ndjson(expected.stdout)
    open_server_page(page, server.url)
    paste(page, text)
    choose(page, "recursive", "chars", "200", "15%")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#action-status")).to_contain_text("chunks, shown in")
    check_details(page, records[0], "chars", None)  # the first is selected at once

    page.focus("#list")  # the keyboard moves through the list
    for _ in range(3):
        page.keyboard.press("ArrowDown")
    check_details(page, records[3], "chars", records[2])
    page.keyboard.press("End")
    check_details(page, records[-1], "chars", records[-2])
    assert page.get_attribute("#list", "aria-activedescendant") == f"row-{len(records) - 1}"
    page.keyboard.press("Home")
    check_details(page, records[0], "chars", None)

    page.click("#row-1")  # a click in the list
    check_details(page, records[1], "chars", records[0])
    previous, target = records[4:6]  # a click on the chunk in the document
    assert previous["end"] > target["start"]
    alone = page.locator(f"#view .seg[data-start='{previous['end']}']")
    alone.scroll_into_view_if_needed()
    alone.click()
    check_details(page, target, "chars", previous)
    overlap = page.locator(f"#view .seg[data-start='{target['start']}']")  # shared by both
    assert overlap.get_attribute("class").split() == ["seg", "overlap", "sel"]
    overlap.click()  # the first chunk that covers it, then the next
    check_details(page, previous, "chars", records[3])
    overlap.click()
    check_details(page, target, "chars", previous)
    selected = page.eval_on_selector_all("#view .sel", "s => s.map(x => x.textContent).join('')")
    assert selected == target["text"]


def test_the_chunk_cards_never_spill_over_each_other(page, server):
    """At every screen size the list stays inside its card, no card covers another,
    and the selected chunk keeps some height; a screen too short for them all scrolls
    the column (or, narrow, the page)."""
    open_server_page(page, server.url)
    paste(page, ENGLISH.read_text(encoding="utf-8"))
    split(page)
    page.click("#row-3")
    start = page.text_content("#row-3 .range").split("–")[0]
    for width, height in ((1280, 1000), (1280, 700), (900, 900), (900, 600), (420, 900)):
        page.set_viewport_size({"width": width, "height": height})
        page.evaluate(FRAMES)
        cards, in_card, list_box = page.evaluate("""() => {
            const box = e => { const r = e.getBoundingClientRect();
                               return [r.top, r.bottom, r.left, r.right]; };
            const card = document.querySelector(".list-card");
            return [[...document.querySelectorAll(".side > .card")].map(box), box(card),
                    box(document.querySelector("#list"))];
        }""")
        where = (width, height)
        assert all(upper[1] <= lower[0] for upper, lower in zip(cards, cards[1:])), where
        assert in_card[0] <= list_box[0] and list_box[1] <= in_card[1], (where, in_card, list_box)
        assert list_box[1] - list_box[0] >= 100, where
        assert cards[-1][1] - cards[-1][0] >= 100, where  # the selected chunk's card
        page.locator("#details").scroll_into_view_if_needed()
        expect(page.locator("#details")).to_contain_text(start)


def test_children_show_their_parent(page, server):
    text = CHINESE.read_text(encoding="utf-8")
    options = ("--chars", "120", "--parent-chars", "500", "--parent-overlap", "40%")
    expected = run_chunkd("--count-tokens", *options, input=text.encode())
    records = ndjson(expected.stdout)
    assert len({r["parent"]["index"] for r in records}) > 2
    open_server_page(page, server.url)
    paste(page, text)
    choose(page, "recursive", "chars", "120", "")
    page.fill("#parent-size", "500")
    page.fill("#parent-overlap", "40%")
    split(page)
    assert shown_rows(page) == [expected_row(r, "chars") for r in records]
    check_segments(shown_segments(page), text, records)
    page.focus("#list")
    page.keyboard.press("Home")
    for index in range(1, 8):
        page.keyboard.press("ArrowDown")
        check_details(page, records[index], "chars", records[index - 1])
    check_jsonl(page, expected.stdout.decode(), "document.chunks.jsonl")


def test_an_overlap_not_smaller_than_the_size_is_refused_on_the_page(page, server):
    refused = run_chunkd("--chars", "100", "--overlap", "100", input=b"text")
    assert refused.returncode == 2
    open_server_page(page, server.url)
    paste(page, "Some text to split.")
    choose(page, "recursive", "chars", "100", "100")
    page.click("#split")
    expect(page.locator("#message")).to_be_visible()
    message = refused.stderr.decode().splitlines()[-1]
    assert f"chunkd: error: {page.text_content('#message')}" == message
    assert page.text_content("#message") == ("--overlap 100 is not smaller than the size (100 "
                                             "chars); write --overlap 99 or less, or a larger --chars")
    assert page.locator(".row").count() == 0


def test_strategy_tooltips_are_plain_text(page, server):
    open_server_page(page, server.url)
    titles = dict(page.eval_on_selector_all("#strategy option",
                                            "o => o.map(x => [x.value, x.title])"))
    assert titles["recursive"].endswith("merged greedily up to the size (LangChain's "
                                        "_merge_splits).")
    assert titles["markdown"].endswith("; headings on every chunk.")
    assert not any("`" in title for title in titles.values())


def test_a_split_over_the_servers_bounds_is_refused_on_the_page(page):
    with Serve("--max-chunks", "50") as serve:
        open_server_page(page, serve.url)
        paste(page, "a" * 200)
        choose(page, "recursive", "chars", "1", "0")
        page.click("#split")
        expect(page.locator("#message")).to_have_text(
            "these settings cut the document into more than 50 chunks, the most this server "
            "shows; choose a larger size")
        assert page.locator(".row").count() == 0
        paste(page, "a" * 50)  # within the bound: split and shown
        split(page)
        assert page.locator("#message").is_hidden() and page.locator(".row").count() > 0


def test_markup_in_a_document_is_shown_as_text(page, server):
    open_server_page(page, server.url)
    paste(page, HOSTILE)
    choose(page, "recursive", "chars", "60", "0")
    split(page)
    check_hostile_text_shown(page, HOSTILE)


def check_hostile_text_shown(page, text: str) -> None:
    page.evaluate(FRAMES)
    shown = page.eval_on_selector_all("#view .seg", "s => s.map(x => x.textContent).join('')")
    assert shown == text
    markup = page.eval_on_selector_all(
        "#view *, #list *, #details *, #totals *, #fixed-settings *",
        "nodes => nodes.map(n => n.tagName.toLowerCase())")
    assert not {"script", "img", "b", "iframe", "style", "a", "textarea"} & set(markup)
    page.keyboard.press("End")
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.evaluate("getComputedStyle(document.body).display") != "none"


class Lines:
    """A test window strategy: windows of ``size`` lines, with every optional field a
    strategy may fill. Written here, from scratch, so that the page is shown to take a
    strategy it has never heard of."""

    def __init__(self, size: int, overlap: int) -> None:
        self.size, self.step, self.text = size, size - overlap, ""

    def feed(self, text: str) -> list:
        self.text += text
        return []

    def finish(self) -> list:
        from chunkd.model.chunk import Chunk

        starts, at = [], 0
        for line in self.text.splitlines(keepends=True):
            starts.append(at)
            at += len(line)
        chunks = []
        for first in range(0, max(1, len(starts) - self.size + self.step), self.step):
            lines = starts[first:first + self.size]
            if not lines:
                break
            start = lines[0]
            end = starts[first + len(lines)] if first + len(lines) < len(starts) else len(self.text)
            headings = tuple(line.lstrip("# ").strip() for line in self.text[:start].splitlines()
                             if line.startswith("#"))
            chunks.append(Chunk(len(chunks), start, end, len(lines), self.text[start:end],
                                estimated_tokens=math.ceil((end - start) / 4), headings=headings))
        self.text = ""
        return chunks


@pytest.fixture
def lines_strategy():
    from chunkd.strategies import REGISTRY, Strategy, register

    @register
    class LinesStrategy(Strategy):
        """Windows of whole lines (a strategy the page was not written for)."""

        name, units, default_size, window = "test-lines", ("lines",), 4, True
        fields = ("estimated_tokens", "headings")

        @classmethod
        def splitter(cls, settings):
            return Lines(settings.size, settings.overlap)

    yield LinesStrategy
    del REGISTRY["test-lines"]


def test_a_new_window_strategy_needs_no_change_to_the_page(page, lines_strategy, tmp_path):
    from chunkd.web.serve import PageServer

    server = PageServer("127.0.0.1", 0, {"strategy": None, "chars": None, "tokens": None,
                                         "size": None, "overlap": None, "errors": "strict"},
                        max_bytes=10_000)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        open_server_page(page, f"http://127.0.0.1:{server.server_address[1]}/")
        offered = page.eval_on_selector_all("#strategy option", "o => o.map(x => x.value)")
        assert "test-lines" in offered
        page.select_option("#strategy", "test-lines")
        assert page.input_value("#size") == "4"  # its default
        assert page.eval_on_selector_all("#unit option", "o => o.map(x => x.value)") == ["lines"]
        assert page.is_disabled("#unit")
        assert page.is_hidden("#parent-size")  # it has no parent/child mode
        text = "# Guide\nintro\n## Setup\none\ntwo\nthree\n## Use\nfour\nfive\n"
        paste(page, text)
        page.fill("#size", "3")
        page.fill("#overlap", "1")
        split(page)
        splitter = Lines(3, 1)
        chunks = splitter.feed(text) + splitter.finish()
        assert [row[0] for row in shown_rows(page)] == [f"#{c.index}" for c in chunks]
        page.click("#row-2")
        facts = details(page)
        assert facts["Length"] == f"{chunks[2].length} lines"
        assert facts["Estimated tokens"] == str(chunks[2].estimated_tokens)
        assert facts["Heading path"] == " › ".join(chunks[2].headings) == "Guide › Setup"
        tiles = page.eval_on_selector_all("#totals [data-fact]", "t => t.map(x => x.dataset.fact)")
        assert "Estimated tokens" in tiles
        check_histogram(page, [{"length": chunk.length} for chunk in chunks], 3)

        paste(page, "x" * 10_001)  # more than this server's --max-bytes
        page.click("#split")
        expect(page.locator("#message")).to_have_text(
            "the document is 10,001 bytes, more than this server takes (10,000 bytes); "
            "start it with a larger --max-bytes")
        (tmp_path / "large.txt").write_text("y" * 2**20)  # a file is not even sent
        page.set_input_files("#file", str(tmp_path / "large.txt"))
        expect(page.locator("#message")).to_have_text(
            "large.txt is 1.0 MiB, more than this chunkd serve takes (10,000 bytes); start it "
            "with a larger --max-bytes")
    finally:
        server.shutdown()
        server.server_close()


def test_a_10_mb_document_stays_light(page, server, tmp_path):
    corpus = [p.read_text(encoding="utf-8") + "\n\n" for p in corpus_documents()]
    parts, size = [], 0
    for document in corpus * 8:  # the corpus is 2.8 MB
        if size >= 10 * 2**20:
            break
        parts.append(document)
        size += len(document.encode())
    text = "".join(parts)
    (tmp_path / "big.md").write_text(text, encoding="utf-8")
    expected = run_chunkd("--count-tokens", "--chars", "300", "big.md", cwd=tmp_path)
    records = ndjson(expected.stdout)
    assert len(records) > 30_000

    open_server_page(page, server.url)
    choose(page, "recursive", "chars", "300", "")
    page.set_input_files("#file", str(tmp_path / "big.md"))  # opening a file splits it
    expect(page.locator("#action-status")).to_contain_text(
        f"{number(len(records))} chunks, shown in", timeout=HANG * 1000)

    def light() -> None:  # only what is in sight is in the page
        assert page.locator(".row").count() < 60
        assert page.locator("#view .seg").count() < 3000
        assert page.evaluate("document.getElementsByTagName('*').length") < 5000
    light()
    page.focus("#list")
    page.keyboard.press("End")
    check_details(page, records[-1], "chars", records[-2])
    page.evaluate(FRAMES)
    selected = page.eval_on_selector_all("#view .sel", "s => s.map(x => x.textContent).join('')")
    assert selected == records[-1]["text"]
    light()

    # The middle of the list and of the document, as a user scrolls there.
    rows = scroll_to_middle(page, "#list", READ_ROWS)
    assert any(0.4 * len(records) < index < 0.6 * len(records) for index, *_ in rows)
    assert all(cells == expected_row(records[index], "chars") for index, *cells in rows)
    segments = scroll_to_middle(page, "#view", READ_SEGMENTS)
    assert any(0.4 * len(text) < start < 0.6 * len(text) for start, *_ in segments)
    check_segments(segments, text, records, whole=False)
    light()
    check_jsonl(page, expected.stdout.decode(), "big.md.chunks.jsonl")


def scroll_to_middle(page, selector: str, read: str) -> list:
    page.locator(selector).evaluate("box => { box.scrollTop = box.scrollHeight / 2; }")
    page.evaluate(FRAMES)
    page.evaluate(FRAMES)  # a page built in sight may move the rest: let it settle
    return page.locator(selector).evaluate(read)


# --- a chunkd preview file, opened from disk -----------------------------------------------

def test_a_preview_file_shows_what_the_filter_writes(page, tmp_path):
    options = ("--chars", "300", "--overlap", "60")
    made = run_chunkd("preview", str(ENGLISH), *options, "-o", str(tmp_path / "report.html"))
    assert made.returncode == 0, made.stderr
    expected = run_chunkd("--count-tokens", str(ENGLISH), *options)
    records = ndjson(expected.stdout)
    text = ENGLISH.read_text(encoding="utf-8")

    page.goto((tmp_path / "report.html").as_uri())
    expect(page.locator("#action-status")).to_have_text("")
    expect(page.locator("#fixed-settings")).to_contain_text("recursive, 300 chars, overlap 60")
    assert page.is_hidden("#settings") and page.is_hidden("#editor")
    assert shown_rows(page) == [expected_row(r, "chars") for r in records]
    segments = shown_segments(page)
    check_segments(segments, text, records)
    assert sum(kind == "overlap" for _, _, kind, _ in segments) >= 1
    page.focus("#list")
    page.keyboard.press("Home")
    page.click("#row-2")
    check_details(page, records[2], "chars", records[1])
    check_jsonl(page, expected.stdout.decode(), f"{ENGLISH.name}.chunks.jsonl")


def test_the_page_names_the_tokenizer_that_counts(page, tmp_path):
    """A preview file and the server's page say which tokenizer counts the tokens: in
    the settings line, each chunk's details, the totals and the unit to choose."""
    options = ("--tokenizer", str(O200K_FILE), "--tokens", "60", "--overlap", "6")
    made = run_chunkd("preview", str(ENGLISH), *options, "-o", str(tmp_path / "report.html"))
    assert made.returncode == 0, made.stderr
    records = ndjson(run_chunkd("--count-tokens", str(ENGLISH), *options).stdout)
    page.goto((tmp_path / "report.html").as_uri())
    expect(page.locator("#fixed-settings")).to_contain_text(
        "recursive, 60 tokens (o200k_base), overlap 6")
    expect(page.locator("#totals")).to_contain_text(
        f"{number(sum(r['tokens'] for r in records))}o200k_base tokens in all chunks")
    page.click("#row-1")
    check_details(page, records[1], "tokens", records[0], tokenizer="o200k_base")

    # A file's identity is long (its SHA-256): the page shows its name and the digest's
    # start, the whole in a tooltip, and every card holds what it shows.
    short = MINILM_IDENTITY.replace("sha256:", "")[:len("model/tokenizer.json@") + 8]
    with Serve("--tokenizer", str(minilm_folder())) as serve:
        open_server_page(page, serve.url)
        assert page.eval_on_selector_all(
            "#unit option", "o => o.map(x => [x.value, x.text, x.title])") == [
            ["chars", "chars", ""], ["tokens", f"tokens ({short})",
                                     f"tokens of {MINILM_IDENTITY}"]]
        assert (page.input_value("#unit"), page.input_value("#size")) == ("tokens", "254")
        paste(page, ENGLISH.read_text(encoding="utf-8"))
        split(page)
        shown = ndjson(run_chunkd("--count-tokens", "--tokenizer", str(minilm_folder()),
                                  input=ENGLISH.read_bytes()).stdout)
        check_details(page, shown[0], "tokens", None, tokenizer=short)
        expect(page.locator("#totals")).to_contain_text(f"{short} tokens in all chunks")
        for width in (1280, 900, 420):
            page.set_viewport_size({"width": width, "height": 900})
            overflowing = page.evaluate("""() => [...document.querySelectorAll(
                ".card, .stat, .settings label")].filter(box => {
                  const outer = box.getBoundingClientRect();
                  return [...box.querySelectorAll("*")].some(inner => {
                    const r = inner.getBoundingClientRect();
                    return r.width && r.right > outer.right + 1;
                  }) || box.scrollWidth > box.clientWidth + 1;
                }).map(box => box.className || box.textContent.slice(0, 40))""")
            assert overflowing == [], (width, overflowing)


def test_a_preview_file_shows_markup_as_text(page, tmp_path):
    name = '<img src=x onerror="alert(5)">.md'
    hostile = HOSTILE + "</script><script>window.pwned=1</script>"
    (tmp_path / name).write_text(hostile, encoding="utf-8")
    made = run_chunkd("preview", name, "--chars", "60", "-o", "report.html", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    page.goto((tmp_path / "report.html").as_uri())
    expect(page.locator("#fixed-settings strong")).to_have_text(name)
    assert page.title() == f"{name} — chunkd preview"
    check_hostile_text_shown(page, hostile)
