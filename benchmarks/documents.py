"""PDF, HTML and DOCX: chunkd's extraction and chunking against what a user would run
before LangChain's splitter, on the same files.

    python benchmarks/documents.py            # pages/s and documents/s, median of 5 runs
    python benchmarks/documents.py --runs 1   # a quick look

The files are the ones the tests make from the shared corpus with the Markdown library
and LibreOffice (``tests/document_files.py``; LibreOffice and poppler-utils must be
installed). Every contestant reads each file from disk, extracts its text and chunks it
with LangChain's RecursiveCharacterTextSplitter at 1000/100 code points (chunkd: its own
recursive strategy, the same chunks as LangChain's on a given text). chunkd's time
includes forking the bounded extraction process of every document. PDF: pypdf and
pdfminer.six; HTML: BeautifulSoup (html.parser and lxml); DOCX: python-docx's
paragraphs. Peers that cannot be imported are reported as such.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
from collections.abc import Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from document_files import made_documents  # noqa: E402

import chunkd  # noqa: E402
from chunkd.documents import Limits, extract  # noqa: E402

SIZE, OVERLAP = 1000, 100


def langchain_split(text: str) -> int:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return len(RecursiveCharacterTextSplitter(chunk_size=SIZE, chunk_overlap=OVERLAP)
               .split_text(text))


def chunkd_split(kind: str) -> Callable[[pathlib.Path], int]:
    def run(path: pathlib.Path) -> int:
        extracted = extract(path.read_bytes(), kind, path.name, Limits())
        return len(chunkd.split_text(extracted.text, SIZE, OVERLAP))
    return run


def pypdf_text(path: pathlib.Path) -> str:
    from pypdf import PdfReader

    return "\n".join(page.extract_text() for page in PdfReader(path).pages)


def pdfminer_text(path: pathlib.Path) -> str:
    from pdfminer.high_level import extract_text

    return extract_text(path)


def soup_text(parser: str) -> Callable[[pathlib.Path], str]:
    def text(path: pathlib.Path) -> str:
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(path.read_bytes(), parser)
        for element in soup(["script", "style"]):
            element.decompose()
        return soup.get_text("\n")
    return text


def python_docx_text(path: pathlib.Path) -> str:
    import docx

    return "\n\n".join(paragraph.text for paragraph in docx.Document(str(path)).paragraphs)


def peer(text: Callable[[pathlib.Path], str]) -> Callable[[pathlib.Path], int]:
    return lambda path: langchain_split(text(path))


def timed(run: Callable[[pathlib.Path], int], paths: list[pathlib.Path], runs: int) -> float:
    """The median seconds to read, extract and chunk every file once."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        for path in paths:
            run(path)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    made = made_documents()
    import pypdfium2 as pdfium

    pdfs = [document.pdf for document in made]
    pages = sum(len(pdfium.PdfDocument(str(path))) for path in pdfs)
    groups = {
        "PDF": (pdfs, pages, "pages/s", [("chunkd (pypdfium2)", chunkd_split("pdf")),
                                         ("pypdf + LangChain", peer(pypdf_text)),
                                         ("pdfminer.six + LangChain", peer(pdfminer_text))]),
        "HTML": ([document.html for document in made], len(made), "documents/s",
                 [("chunkd (selectolax)", chunkd_split("html")),
                  ("BeautifulSoup html.parser + LangChain", peer(soup_text("html.parser"))),
                  ("BeautifulSoup lxml + LangChain", peer(soup_text("lxml")))]),
        "DOCX": ([document.docx for document in made], len(made), "documents/s",
                 [("chunkd (python-docx)", chunkd_split("docx")),
                  ("python-docx + LangChain", peer(python_docx_text))]),
    }
    print(f"{len(made)} corpus documents as PDF ({pages} pages), HTML and DOCX; "
          f"chunks of {SIZE}/{OVERLAP} code points; median of {args.runs} runs\n")
    print(f"| format | contestant | {'rate':>12} | ratio to chunkd |")
    print("| --- | --- | ---: | ---: |")
    for name, (paths, count, unit, contestants) in groups.items():
        base = None
        for label, run in contestants:
            try:
                seconds = timed(run, paths, args.runs)
            except ImportError as error:
                print(f"| {name} | {label} | not installed ({error.name}) | |")
                continue
            rate = count / seconds
            base = base or rate
            print(f"| {name} | {label} | {rate:8.1f} {unit} | {rate / base:.2f} |")


if __name__ == "__main__":
    main()
