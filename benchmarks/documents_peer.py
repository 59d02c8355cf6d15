"""What a user would otherwise run on HTML or DOCX files, for timing against the whole
``chunkd`` command: BeautifulSoup (lxml) or python-docx's paragraphs, then LangChain's
RecursiveCharacterTextSplitter at 1000/100 code points, one JSON line a chunk.

    /usr/bin/time python benchmarks/documents_peer.py html DIR/*.html > /dev/null
    /usr/bin/time chunkd -q --jobs 1 --chars 1000 DIR/*.html > /dev/null
"""

from __future__ import annotations

import json
import sys

from langchain_text_splitters import RecursiveCharacterTextSplitter


def text_of(kind: str, path: str) -> str:
    if kind == "html":
        from bs4 import BeautifulSoup

        with open(path, "rb") as stream:
            soup = BeautifulSoup(stream.read(), "lxml")
        for element in soup(["script", "style"]):
            element.decompose()
        return soup.get_text("\n")
    import docx

    return "\n\n".join(paragraph.text for paragraph in docx.Document(path).paragraphs)


def main() -> None:
    kind, paths = sys.argv[1], sys.argv[2:]
    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100)
    for path in paths:
        for index, chunk in enumerate(splitter.split_text(text_of(kind, path))):
            sys.stdout.write(json.dumps({"doc": path, "index": index, "text": chunk}) + "\n")


if __name__ == "__main__":
    main()
