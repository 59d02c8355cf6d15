"""Make the README's picture of the preview page with the test tooling:

    python tests/screenshot.py docs/preview.png

It runs ``chunkd serve``, pastes a shared-corpus document into the page in Debian's
Chromium, splits it and selects a chunk, as tests/web/test_page.py does."""

from __future__ import annotations

import sys

from playwright.sync_api import expect, sync_playwright

from browser import Serve, launch
from oracle import CORPUS

DOCUMENT = CORPUS / "en-rustbook" / "src_ch10-03-lifetime-syntax.md"


def main(path: str) -> None:
    with Serve() as serve, sync_playwright() as playwright:
        browser = launch(playwright)
        context = browser.new_context(viewport={"width": 1360, "height": 820},
                                      color_scheme="light")
        context.grant_permissions(["clipboard-read", "clipboard-write"])
        page = context.new_page()
        page.goto(serve.url)
        expect(page.locator("#settings")).to_be_visible()
        page.evaluate("text => navigator.clipboard.writeText(text)",
                      DOCUMENT.read_text(encoding="utf-8"))
        page.click("#editor")
        page.keyboard.press("Control+V")
        page.select_option("#unit", "tokens")
        page.fill("#size", "80")
        page.fill("#overlap", "20")
        page.click("#split")
        expect(page.locator("#action-status")).to_contain_text("chunks, shown in")
        page.click("#row-2")
        page.mouse.move(0, 0)
        page.screenshot(path=path)
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1])
