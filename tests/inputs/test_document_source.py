"""Every front end tells the chunker which document comes next (``Chunker.begin``)
before its text, as the strategies that choose by document need (a grammar by the
file name's extension, a strategy by the media type). A strategy registered here
records the name it was told in each chunk's ``headings``."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import chunkd
from chunkd.model.chunk import Chunk
from chunkd.strategies import REGISTRY, Source, Strategy

NOT_TOLD = "(not told)"


class NamedWhole:
    """One chunk a document, whose ``headings`` is the name ``begin`` gave."""

    def __init__(self) -> None:
        self.name: object = NOT_TOLD
        self.pieces: list[str] = []

    def begin(self, source: Source) -> None:
        self.name = source.name

    def feed(self, text: str) -> list[Chunk]:
        self.pieces.append(text)
        return []

    def finish(self) -> list[Chunk]:
        text, name = "".join(self.pieces), self.name
        self.pieces, self.name = [], NOT_TOLD
        return [Chunk(0, 0, len(text), len(text), text, headings=[str(name)])]


@pytest.fixture
def named(monkeypatch):
    class Named(Strategy):
        name, units, default_size, window = "test-named", ("documents",), 1, True
        fields = ("headings",)

        @classmethod
        def splitter(cls, settings):
            return NamedWhole()

    monkeypatch.setitem(REGISTRY, "test-named", Named)
    return chunkd.Settings(strategy="test-named")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_filter_tells_each_file_and_each_ndjson_line(named, tmp_path, capsysbinary, jobs):
    from chunkd.cli.filter import main

    paths = [tmp_path / "a.md", tmp_path / "b.py"]
    for path in paths:
        path.write_text(f"text of {path.name}")
    assert main(["--strategy", "test-named", "--jobs", jobs, *map(str, paths)]) == 0
    records = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
    assert [(r["doc"], r["headings"]) for r in records] == [
        (str(path), [str(path)]) for path in paths]
    lines = tmp_path / "docs.ndjson"
    lines.write_text('{"id": "first", "text": "one"}\n{"id": 7, "text": "two"}\n')
    assert main(["--strategy", "test-named", "--jobs", jobs, "--input", "ndjson",
                 str(lines)]) == 0
    records = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
    assert [r["headings"] for r in records] == [["first"], ["7"]]


def test_the_page_the_api_and_arrow_tell_it(named):
    from chunkd.arrow import Chunker
    from chunkd.web import bounded_chunks

    assert [c.headings for c in bounded_chunks(named, "text", "notes.md")] == [["notes.md"]]
    assert [c.headings for c in bounded_chunks(named, "text")] == [["None"]]
    splitter = chunkd.Splitter(strategy="test-named")
    splitter.begin("from-the-api", "text/markdown")
    assert [c.headings for c in splitter.feed("text") + splitter.finish()] == [["from-the-api"]]
    assert [c.headings for c in splitter.feed("text") + splitter.finish()] == [[NOT_TOLD]]
    table = Chunker(strategy="test-named")(pa.table({"id": ["x", "y"], "text": ["1", "2"]}))
    assert table.column("headings").to_pylist() == [["x"], ["y"]]


def test_eval_and_the_daemon_tell_it(named, tmp_path):
    from chunkd.evaluate.evaluation import chunk_documents
    from chunkd.evaluate.grid import Point
    from chunkd.evaluate.questions import Documents
    from chunkd.service.inbox import Inbox, InboxOptions

    documents = Documents()
    documents.add("first.md", "one", is_file=True)
    documents.add("second.md", "two", is_file=True)
    chunks = chunk_documents(Point(named, "0"), documents)
    assert [(number, chunk.headings) for number, chunk in chunks] == [
        (0, ["first.md"]), (1, ["second.md"])]
    (tmp_path / "in.md").write_text("the inbox's file")
    inbox = Inbox(InboxOptions(str(tmp_path), named))
    assert inbox.process("in.md", lambda: False).kind == "processed"
    [result] = tmp_path.glob("in.md.*")
    assert [c["headings"] for c in json.loads(result.read_text())["chunks"]] == [["in.md"]]
