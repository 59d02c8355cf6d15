"""Questions with their reference excerpts, read from JSON lines or the public CSV.

JSON lines (one question a line)::

    {"question": "...", "doc": "a.md", "references": [{"start": 10, "end": 52}, {"text": "..."}]}

``start``/``end`` are code-point offsets (Python ``str`` indices); a reference may give
its ``text`` instead, found in the document (it must occur exactly once), or both, which
must agree. The CSV layout of the public chunking evaluation (brandonstarxel/
chunking_evaluation) has the columns ``question``, ``references`` (a JSON list of
``{"content", "start_index", "end_index"}``) and ``corpus_id``.

A question names its document by the path given on the command line, the file name,
the file name without its suffix (as the public CSV's ``corpus_id`` does), or the
``id`` of an NDJSON input line. Every problem is a ``QuestionError`` naming the file,
the line and the question.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

from chunkd.evaluate.metrics import Span
from chunkd.inputs.readers import display_name
from chunkd.model.chunker import Source


class QuestionError(Exception):
    """A question that cannot be evaluated; the message says which and why."""


@dataclass(frozen=True)
class Reference:
    """A reference as written: offsets, a text to find, or both."""

    start: int | None
    end: int | None
    text: str | None


@dataclass(frozen=True)
class Question:
    """A question as read, before its document is found."""

    where: str          # "questions.jsonl: line 7 (What did...)" for messages
    text: str
    doc: str
    references: tuple[Reference, ...]


@dataclass(frozen=True)
class Resolved:
    """A question ready to evaluate: its document's number and its reference ranges."""

    text: str
    document: int
    references: tuple[Span, ...]


class Unreadable(QuestionError):
    """A question on a document that could not be read (reported once, with a count)."""


class Documents:
    """The evaluated documents' texts, what their chunkers are told of them (``Source``:
    name, media type, page starts, as the filter tells its own), and the names
    questions may call them by."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.texts: list[str] = []
        self.sources: list[Source] = []
        self._called: dict[str, set[int]] = {}
        self._unreadable: dict[str, str] = {}

    def add(self, name: object, text: str, is_file: bool, source: Source | None = None) -> None:
        """A document; ``source``: what its chunker is told (by default its name alone)."""
        number = len(self.texts)
        self.names.append(_shown(name))
        self.texts.append(text)
        self.sources.append(Source(name) if source is None else source)
        for call in _calls(name, is_file):
            self._called.setdefault(call, set()).add(number)

    def add_unreadable(self, name: object, is_file: bool) -> None:
        """A document that could not be read: its questions raise ``Unreadable``."""
        for call in _calls(name, is_file):
            self._unreadable[call] = _shown(name)

    def find(self, name: str) -> int:
        numbers = self._called.get(name, set())
        if len(numbers) == 1:
            return next(iter(numbers))
        if not numbers and name in self._unreadable:
            raise Unreadable(self._unreadable[name])
        if not numbers:
            raise QuestionError(f"unknown document {name!r} (documents: "
                                f"{_listed(self.names)})")
        raise QuestionError(f"document {name!r} is ambiguous: "
                            f"{_listed(self.names[n] for n in sorted(numbers))}; "
                            "name it by its path")

    def resolve(self, question: Question) -> Resolved:
        """The question's document and ranges; ``QuestionError`` naming it if not."""
        try:
            document = self.find(question.doc)
            text = self.texts[document]
            spans = tuple(_locate(reference, text, self.names[document], number)
                          for number, reference in enumerate(question.references, start=1))
        except Unreadable:
            raise
        except QuestionError as error:
            raise QuestionError(f"{question.where}: {error}") from None
        return Resolved(question.text, document, spans)


def _shown(name: object) -> str:
    return display_name(name) if isinstance(name, str) else str(name)


def _calls(name: object, is_file: bool) -> set[str]:
    """The names a question may call a document by."""
    calls = {str(name)}
    if is_file:
        assert isinstance(name, str), "a file is named by its path"
        base = os.path.basename(name)
        calls |= {base, os.path.splitext(base)[0]}
    return calls


def _listed(names) -> str:
    names = list(names)
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _locate(reference: Reference, text: str, name: str, number: int) -> Span:
    where = f"reference {number}"
    if reference.start is not None:
        start, end = reference.start, reference.end
        assert end is not None, "_reference gives both offsets or neither"
        if not 0 <= start < end <= len(text):
            raise QuestionError(f"{where}: offsets {start}..{end} out of range: {name} has "
                                f"{len(text)} code points (0 <= start < end <= length)")
        if reference.text is not None and text[start:end] != reference.text:
            raise QuestionError(f"{where}: the text at {start}..{end} in {name} differs from "
                                f"its \"text\" {_quote(reference.text)}")
        return start, end
    wanted = reference.text
    assert wanted is not None, "_reference gives a text where it gives no offsets"
    first = text.find(wanted)
    if first < 0:
        raise QuestionError(f"{where}: text not found in {name}: {_quote(wanted)}")
    second = text.find(wanted, first + 1)
    if second >= 0:
        raise QuestionError(f"{where}: text found more than once in {name} (at {first} and "
                            f"{second}): {_quote(wanted)}; give its offsets")
    return first, first + len(wanted)


def _quote(text: str, most: int = 40) -> str:
    return repr(text if len(text) <= most else text[:most] + "…")


# --- reading -----------------------------------------------------------------------------

def read_questions(path: str) -> Iterator[Question | QuestionError]:
    """The questions in ``path`` (JSON lines, or the public CSV layout if it ends in
    ``.csv``), a bad one as a ``QuestionError``; an unreadable file raises ``OSError``."""
    with open(path, "rb") as stream:
        data = stream.read()
    shown = display_name(path)
    if path.lower().endswith(".csv"):
        yield from _csv_questions(data, shown)
    else:
        yield from _jsonl_questions(data, shown)


def _jsonl_questions(data: bytes, shown: str) -> Iterator[Question | QuestionError]:
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{shown}: line {number}"
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            yield QuestionError(f"{where}: {_json_problem(line, error)}")
            continue
        try:
            yield _question(record, where, ("question", "doc", "references"),
                            ("start", "end", "text"))
        except QuestionError as error:
            yield error


def _json_problem(line: bytes, error: orjson.JSONDecodeError) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"invalid UTF-8 at byte {bad.start} of the line"
    return f"malformed JSON at column {error.colno}: {error.msg}"


def _csv_questions(data: bytes, shown: str) -> Iterator[Question | QuestionError]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        yield QuestionError(f"{shown}: invalid UTF-8 at byte {error.start}")
        return
    # The file is in memory already, so no field can cost more than it: a long field is
    # read whole. strict: a quote that does not end its field, or is never closed, is
    # an error naming the line where its row starts, not rows made of what follows.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    rows = csv.reader(io.StringIO(text, newline=""), strict=True)
    line = 1                            # where the row being read starts
    try:
        header = next(rows, None)
        columns = ("question", "references", "corpus_id")
        if header is None or not set(columns) <= set(header):
            yield QuestionError(f"{shown}: expected a header with the columns "
                                f"{', '.join(columns)}")
            return
        place = {name: header.index(name) for name in columns}
        line = rows.line_num + 1
        for row in rows:
            where, line = f"{shown}: line {line}", rows.line_num + 1
            yield from _csv_question(row, header, place, where)
    except csv.Error as error:
        yield QuestionError(f"{shown}: line {line}: malformed CSV ({error}): is a quote "
                            "unbalanced? The lines after it were not read")


def _csv_question(row: list[str], header: list[str], place: dict[str, int],
                  where: str) -> Iterator[Question | QuestionError]:
    """The question of one CSV row, if it is not blank."""
    if not any(row):
        return
    if len(row) != len(header):
        yield QuestionError(f"{where}: {len(row)} fields, the header has {len(header)}")
        return
    try:
        references = orjson.loads(row[place["references"]])
    except orjson.JSONDecodeError as error:
        yield QuestionError(f"{where}: references: malformed JSON at column "
                            f"{error.colno}: {error.msg}")
        return
    record = {"question": row[place["question"]], "corpus_id": row[place["corpus_id"]],
              "references": references}
    try:
        yield _question(record, where, ("question", "corpus_id", "references"),
                        ("start_index", "end_index", "content"))
    except QuestionError as error:
        yield error


def _question(record: object, where: str, keys: tuple[str, str, str],
              reference_keys: tuple[str, str, str]) -> Question:
    """A question from a parsed record, with the layout's key names."""
    question_key, doc_key, references_key = keys
    if not isinstance(record, dict):
        raise QuestionError(f"{where}: expected a JSON object")
    text = record.get(question_key)
    if not isinstance(text, str):
        raise QuestionError(f"{where}: expected a {question_key!r} field holding a string")
    where = f"{where} ({_quote(text)})"
    doc = record.get(doc_key)
    if isinstance(doc, bool) or not isinstance(doc, (str, int)):
        raise QuestionError(f"{where}: expected a {doc_key!r} field naming a document")
    references = record.get(references_key)
    if not isinstance(references, list) or not references:
        raise QuestionError(f"{where}: expected a {references_key!r} field holding a "
                            "non-empty list")
    return Question(where, text, str(doc), tuple(
        _reference(item, f"{where}: reference {number}", reference_keys)
        for number, item in enumerate(references, start=1)))


def _reference(item: object, where: str, keys: tuple[str, str, str]) -> Reference:
    start_key, end_key, text_key = keys
    if not isinstance(item, dict):
        raise QuestionError(f"{where}: expected a JSON object")
    start, end, text = item.get(start_key), item.get(end_key), item.get(text_key)
    if text is not None and (not isinstance(text, str) or not text):
        raise QuestionError(f"{where}: {text_key!r} must be a non-empty string")
    if start is None and end is None:
        if text is None:
            raise QuestionError(f"{where}: expected {start_key!r} and {end_key!r} offsets, "
                                f"or a {text_key!r} to find")
        return Reference(None, None, text)
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in (start, end)):
        raise QuestionError(f"{where}: {start_key!r} and {end_key!r} must both be whole "
                            "numbers")
    return Reference(start, end, text)
