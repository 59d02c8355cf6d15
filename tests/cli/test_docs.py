"""The documentation holds together: every relative link and ``#anchor`` in README.md
and docs/*.md resolves, and docs/options.md is what ``python -m chunkd.cli.docs`` generates
from the commands' parsers today."""

from __future__ import annotations

import io
import pathlib
import re
from contextlib import redirect_stdout

import pytest

from chunkd.cli import docs

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^ {0,3}(```+|~~~+)")
#: [text](target) and ![alt](target); the target ends at white space or ")".
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


def outside_fences(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks."""
    lines, fence = [], None
    for line in text.split("\n"):
        opened = FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        lines.append(line)
    return lines


def prose(text: str) -> list[str]:
    """The lines outside fenced code, with inline code blanked out (a link or a ``#``
    written as code is no link nor heading)."""
    return [re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)
            for line in outside_fences(text)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped but for hyphens
    and spaces (letters, digits and underscores stay), spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)             # code spans keep their text
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    """Every heading's anchor in a Markdown file; a repeated one gets -1, -2, ..."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in outside_fences(path.read_text(encoding="utf-8")):  # headings keep their code
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2) or "")
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: pathlib.Path) -> list[str]:
    """The links of one page that lead nowhere, each as ``target: why``."""
    problems = []
    for line in prose(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, mailto:, ...
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                problems.append(f"{target}: no file {file}")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                problems.append(f"{target}: no heading with the anchor #{anchor} in "
                                f"{file.relative_to(ROOT)}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_resolves(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)}: " + "; ".join(broken_links(page))


def test_a_broken_link_or_anchor_is_found(tmp_path, monkeypatch):
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    (tmp_path / "other.md").write_text(
        "# Title\n\n## A `code` heading: here\n\n## Twice\n## Twice\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n[ok](other.md#a-code-heading-here) [ok](other.md#twice-1) "
                    "[ok](#page) [web](https://example.com/x#y) `[code](missing.md)`\n"
                    "```\n[fenced](missing.md)\n```\n"
                    "[gone](missing.md) [bad](other.md#nothing) [self](#nowhere)\n",
                    encoding="utf-8")
    assert [problem.split(":")[0] for problem in broken_links(page)] == [
        "missing.md", "other.md#nothing", "#nowhere"]


def test_the_slug_rule():
    assert slug("Measuring retrieval: `chunkd eval`") == "measuring-retrieval-chunkd-eval"
    assert slug("Past one machine: Arrow, Parquet, Ray Data, Spark") == (
        "past-one-machine-arrow-parquet-ray-data-spark")
    assert slug("Parent/child chunks") == "parentchild-chunks"


def test_the_option_reference_is_current():
    out = io.StringIO()
    with redirect_stdout(out):
        assert docs.main([]) == 0
    committed = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert out.getvalue() == committed, (
        f"docs/options.md is stale: the parsers changed. Run: {docs.COMMAND}")
