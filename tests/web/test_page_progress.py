"""The page while a split runs, in a real browser (Debian's Chromium, driven by
Playwright) against a real ``chunkd serve``: past a second, how far the split is (the
semantic strategy's sentences embedded, as the loopback embedding endpoint answers
slowly), no stale progress once a split is replaced; and a long tokenizer name that
fits its card."""

from __future__ import annotations

import re
import shutil
import time

import pytest
from playwright.sync_api import expect

from browser import Serve
from command import HANG
from test_page import open_server_page, page, paste  # noqa: F401  (the page tests')
from test_serve_progress import semantic_server, sentences, slow_endpoint  # noqa: F401
from tokenizer_files import MINILM_SHA256, minilm_folder

pytestmark = pytest.mark.browser

#: Every text the status line shows from now on, in order (each one a node it adds).
#: Records each text of the status line, and its aria-busy then (``window.busy``).
RECORD_STATUS = """() => {
  window.statuses = [];
  window.busy = [];
  const line = document.getElementById("action-status");
  new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.addedNodes) {
        window.statuses.push(node.textContent);
        window.busy.push(line.getAttribute("aria-busy"));
      }
    }
  }).observe(line, { childList: true });
}"""
EMBEDDING = re.compile(r"Embedding: ([\d,]+) of ([\d,]+) sentences · ([\d.]+) s")
#: Any line of a split under way past its first second.
PROGRESS = re.compile(r"(Splitting…|Splitting: [\d,]+ of [\d,]+ code points read ·|"
                      r"Embedding: [\d,]+ of [\d,]+ sentences ·) [\d.]+ s")
SHOWN = re.compile(r"[\d,]+ chunks, shown in [\d.]+ s\.")


def number(text: str) -> int:
    return int(text.replace(",", ""))


def embedded(endpoint) -> int:
    return sum(len(body["input"]) for _, _, body in endpoint.requests)


def test_a_long_split_shows_the_sentences_embedded_so_far(page, slow_endpoint):
    """48 sentences, 8 a request, each answered after 0.4 s: the split takes 2.4 s at
    least, and every batch ending after the first second shows: at least 4 counts, in
    order, the last the total."""
    with semantic_server(slow_endpoint) as serve:
        open_server_page(page, serve.url)
        assert page.input_value("#strategy") == "semantic"
        paste(page, sentences(48))
        page.evaluate(RECORD_STATUS)
        before = embedded(slow_endpoint)
        page.click("#split")
        expect(page.locator("#action-status")).to_contain_text("chunks, shown in",
                                                               timeout=HANG * 1000)
        statuses, busy = page.evaluate("[window.statuses, window.busy]")
    assert embedded(slow_endpoint) - before == 48
    # A screen reader hears the outcome, not each tick: the line is busy meanwhile.
    assert busy[1:-1] == ["true"] * (len(busy) - 2) and busy[-1] is None, (statuses, busy)
    assert statuses[0] == "Splitting…" and SHOWN.fullmatch(statuses[-1]), statuses
    between = statuses[1:-1]
    # Past a second, each line says how far the split is and for how long: the code
    # points read (at once, in a semantic split) or the sentences embedded.
    assert all(PROGRESS.fullmatch(text) for text in between), between
    shown = [EMBEDDING.fullmatch(text) for text in between]
    counts = [(number(found[1]), number(found[2]), float(found[3])) for found in shown if found]
    assert len({done for done, _, _ in counts}) >= 4, between
    assert [done for done, _, _ in counts] == sorted(done for done, _, _ in counts)
    assert {total for _, total, _ in counts} == {48} and counts[-1][0] == 48
    seconds = [taken for _, _, taken in counts]
    assert seconds == sorted(seconds) and seconds[0] >= 1.0


def test_a_replaced_split_leaves_no_stale_progress(page, slow_endpoint):
    """A split replaced by another (here, of another strategy) is stopped: the server
    says so, and nothing of it shows on the page afterwards."""
    with semantic_server(slow_endpoint) as serve:
        open_server_page(page, serve.url)
        paste(page, sentences(400))
        page.evaluate(RECORD_STATUS)
        page.click("#split")
        status = page.locator("#action-status")
        expect(status).to_contain_text(re.compile(r"Embedding: [\d,]+ of 400 sentences"),
                                       timeout=HANG * 1000)
        page.select_option("#strategy", "recursive")
        since = page.evaluate("window.statuses.length")
        page.keyboard.press("Control+Enter")  # the Split button waits for the split
        expect(status).to_contain_text("chunks, shown in", timeout=HANG * 1000)
        deadline = time.monotonic() + HANG
        while "its page went away" not in serve.stderr():
            assert time.monotonic() < deadline, serve.stderr()
            time.sleep(0.05)
        # A second more of the page's own clock: four ticks of its progress line.
        page.wait_for_function("until => performance.now() > until",
                               arg=page.evaluate("performance.now()") + 1000)
        statuses = page.evaluate("window.statuses").copy()
        # From the replacement's first line: until the key is pressed, the first split
        # runs on, and a tick of it may show before the replacement starts.
        after = statuses[statuses.index("Splitting…", since):]
        assert page.is_enabled("#split")
    assert not any("sentences" in text for text in after), after
    assert SHOWN.fullmatch(after[-1]) and SHOWN.fullmatch(status.text_content() or "")
    assert re.search(r"stopped a split of .* its page went away", serve.stderr())


#: Whether each tokenizer name on the page is on one line, cut with an ellipsis, inside
#: its card; with its full identity as its tooltip.
READ_NAMES = """() => [...document.querySelectorAll(".card .unit-name")].map(name => {
  const box = name.getBoundingClientRect(), card = name.closest(".card");
  const style = getComputedStyle(name);
  return {
    lines: name.getClientRects().length,
    height: box.height, fontSize: parseFloat(style.fontSize),
    cut: name.scrollWidth > name.clientWidth && style.textOverflow === "ellipsis",
    inside: box.right <= card.getBoundingClientRect().right + 0.5
            && card.scrollWidth <= card.clientWidth + 1,
    title: name.title, fact: name.closest("[data-fact]").dataset.fact,
  };
})"""


def test_a_long_tokenizer_name_fits_its_card(page, tmp_path):
    folder = tmp_path / ("paraphrase-multilingual-mpnet-base-v2-finetuned-on-our-own-"
                         "support-tickets-and-the-whole-handbook-2026-12-05-checkpoint-4800")
    shutil.copytree(minilm_folder(), folder)
    identity = f"{folder.name}/tokenizer.json@sha256:{MINILM_SHA256}"
    with Serve("--tokenizer", str(folder)) as serve:
        open_server_page(page, serve.url)
        paste(page, sentences(60))
        page.click("#split")
        expect(page.locator("#action-status")).to_contain_text("chunks, shown in")
        for width in (1280, 900, 420):
            page.set_viewport_size({"width": width, "height": 900})
            names = page.evaluate(READ_NAMES)
            # The totals' tokens and the selected chunk's.
            assert sorted(name["fact"] for name in names) == ["Tokens", "Tokens"], names
            for name in names:
                assert name["lines"] == 1 and name["height"] < 2 * name["fontSize"], name
                assert name["cut"] and name["inside"] and name["title"] == identity, name
