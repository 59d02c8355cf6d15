"""PDF, HTML and DOCX files made by real tools from the shared corpus's Markdown, once a
machine (cached in the temporary folder, shared by the test processes under a lock):
the ``markdown`` library makes HTML, LibreOffice (``soffice --headless``, Debian's
``libreoffice-writer-nogui``) makes DOCX and PDF from that HTML in one call each, and
poppler's ``pdftotext`` (``poppler-utils``) gives each page's text, the page oracle.
Nothing here is chunkd's."""

from __future__ import annotations

import fcntl
import hashlib
import html.parser
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import markdown

from oracle import CORPUS

#: Corpus documents of every kind: long legal text, code and tables, Chinese.
SOURCES = ("en-policy/Policies_github-terms_github-terms-of-service.md",
           "en-policy/Policies_privacy-policies_github-general-privacy-statement.md",
           "en-rustbook/src_ch03-02-data-types.md",
           "en-rustbook/src_appendix-02-operators.md",
           "en-rustbook/src_appendix-03-derivable-traits.md",
           "zh-vuedocs/src_guide_essentials_reactivity-fundamentals.md")
#: LibreOffice's profile and the files it makes change with this.
VERSION = "1"


@dataclass(frozen=True)
class Made:
    """One corpus document as Markdown (its source), HTML, DOCX and PDF."""

    stem: str
    markdown: Path
    html: Path
    docx: Path
    pdf: Path


def _sources() -> list[Path]:
    paths = [CORPUS / name for name in SOURCES]
    missing = [str(path) for path in paths if not path.exists()]
    assert not missing, f"shared corpus documents not found: {missing}"
    return paths


def to_html(text: str) -> str:
    """A Markdown document as a whole HTML page, as a Markdown library renders it."""
    body = markdown.markdown(text, extensions=["tables", "fenced_code"])
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>corpus</title>"
            "<style>p { margin: 0 }</style><script>document.title = 'x'</script></head>"
            f"<body>\n{body}\n</body></html>\n")


def soffice(folder: Path, convert_to: str, inputs: list[Path], *extra: str) -> None:
    """LibreOffice converts ``inputs`` into ``folder``, its profile kept there."""
    assert shutil.which("soffice"), "soffice not found: apt-get install libreoffice-writer-nogui"
    profile = (folder / "profile").as_uri()
    subprocess.run(["soffice", f"-env:UserInstallation={profile}", "--headless",
                    "--infilter=HTML (StarWriter)", *extra, "--convert-to", convert_to,
                    "--outdir", str(folder), *map(str, inputs)],
                   check=True, capture_output=True, timeout=600)


def made_documents() -> list[Made]:
    """Every source as Markdown, HTML, DOCX and PDF, made once a machine."""
    sources = _sources()
    digest = hashlib.sha256(VERSION.encode())
    for path in sources:
        digest.update(path.read_bytes())
    folder = Path(tempfile.gettempdir()) / f"chunkd-test-documents-{digest.hexdigest()[:16]}"
    folder.mkdir(exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "done").exists():
            pages = []
            for path in sources:
                page = folder / (path.stem + ".html")
                page.write_text(to_html(path.read_text(encoding="utf-8")), encoding="utf-8")
                pages.append(page)
            soffice(folder, "pdf", pages)
            soffice(folder, "docx:MS Word 2007 XML", pages)
            (folder / "done").touch()
    return [Made(path.stem, path, folder / (path.stem + ".html"),
                 folder / (path.stem + ".docx"), folder / (path.stem + ".pdf"))
            for path in sources]


def encrypted_pdf(source: Path, folder: Path) -> Path:
    """A PDF LibreOffice encrypts with an open password, from an HTML file."""
    options = ('pdf:writer_pdf_Export:{"EncryptFile":{"type":"boolean","value":"true"},'
               '"DocumentOpenPassword":{"type":"string","value":"secret"}}')
    soffice(folder, options, [source])
    return folder / (source.stem + ".pdf")


def poppler_pages(pdf: Path) -> list[str]:
    """Each page's text, by poppler's ``pdftotext -f N -l N``."""
    assert shutil.which("pdftotext"), "pdftotext not found: apt-get install poppler-utils"
    info = subprocess.run(["pdfinfo", str(pdf)], check=True, capture_output=True,
                          text=True).stdout
    count = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    return [subprocess.run(["pdftotext", "-f", str(n), "-l", str(n), "-enc", "UTF-8", str(pdf),
                            "-"], check=True, capture_output=True).stdout.decode("utf-8")
            for n in range(1, count + 1)]


def squeezed(text: str) -> str:
    """Text without white space and hyphens: what two extractors of one page agree on
    (poppler joins a word broken after a hyphen at a line's end and drops the hyphen;
    PDFium keeps it)."""
    return re.sub(r"[\s\-\u00ad]+", "", text)


class _Headings(html.parser.HTMLParser):
    """The h1 to h6 elements of an HTML page, by Python's own parser."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[int, str]] = []
        self.level: int | None = None
        self.words: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if re.fullmatch(r"h[1-6]", tag):
            self.level, self.words = int(tag[1]), []

    def handle_endtag(self, tag: str) -> None:
        if self.level is not None and tag == f"h{self.level}":
            self.found.append((self.level, " ".join("".join(self.words).split())))
            self.level = None

    def handle_data(self, data: str) -> None:
        if self.level is not None:
            self.words.append(data)


def source_headings(markdown_text: str) -> list[tuple[int, str]]:
    """The headings of a Markdown document, (level, text), as the Markdown library
    renders them (its inline markup gone)."""
    parser = _Headings()
    parser.feed(to_html(markdown_text))
    return parser.found


def heading_paths(headings: list[tuple[int, str]]) -> set[tuple[str, ...]]:
    """Every path of enclosing headings a place in the document can have: the empty
    one (before the first heading) and, after each heading, the headings above it of
    lower levels, outermost first."""
    paths: set[tuple[str, ...]] = {()}
    stack: list[tuple[int, str]] = []
    for level, text in headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, text))
        paths.add(tuple(text for _, text in stack))
    return paths
