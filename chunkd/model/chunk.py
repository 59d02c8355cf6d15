"""The chunk record that every part of chunkd passes around."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy


class RecordField(NamedTuple):
    """An optional field of a chunk record, declared once for every writer (NDJSON,
    JSON, msgpack, Arrow, Parquet): its name, its Arrow type, and what it holds. The
    field is also an attribute of ``Chunk``, of the same name, which types it."""

    name: str
    #: Its Arrow type, made from the ``pyarrow`` module (an extra: not imported here).
    arrow_type: Callable[[Any], Any]
    description: str


#: The optional fields of a chunk, in the order records write them (before ``text``).
RECORD_FIELDS = (
    RecordField("tokens", lambda pa: pa.int64(),
                "the exact count of text in the tokenizer's tokens (count_tokens)"),
    RecordField("estimated_tokens", lambda pa: pa.int64(),
                "ceil(1.05 * CJK code points + other code points / 4) (window strategies)"),
    RecordField("headings", lambda pa: pa.list_(pa.string()),
                "the Markdown headings enclosing the chunk, outermost first"),
    RecordField("parent", lambda pa: pa.struct([("index", pa.int64()), ("start", pa.int64()),
                                                ("end", pa.int64())]),
                "a child's parent chunk: its index, start and end (parent_size)"),
    RecordField("embed_text", lambda pa: pa.string(),
                "the text to embed: a prefix, the heading path, then the text"),
    RecordField("chunk_id", lambda pa: pa.string(),
                "a stable UUID of the chunk in its document (ids)"),
    RecordField("pages", lambda pa: pa.list_(pa.int64()),
                "the first and last page (1-based) of a PDF the chunk's text comes from"),
    RecordField("symbols", lambda pa: pa.list_(pa.string()),
                "the definitions enclosing the chunk's start, outermost first (code)"),
    RecordField("defines", lambda pa: pa.list_(pa.string()),
                "the definitions that start in the chunk, each qualified (code)"),
    RecordField("language", lambda pa: pa.string(),
                "the language its document was parsed as (code)"),
    RecordField("distance", lambda pa: pa.float64(),
                "the cosine distance between the sentence windows at the chunk's end, "
                "where the semantic strategy cut (none after the last chunk or inside a "
                "group cut at the maximum size)"),
    RecordField("context", lambda pa: pa.string(),
                "a short text the LLM wrote from the whole document to situate the chunk "
                "in it (context); null where it gave none (context_on_error keep)"),
    RecordField("title", lambda pa: pa.string(),
                "the title the LLM gave the chunk's propositions (propositions); null "
                "where its passage was kept as its own text"),
    RecordField("summary", lambda pa: pa.string(),
                "the summary the LLM gave the chunk's propositions (propositions); null "
                "where its passage was kept as its own text"),
    RecordField("propositions", lambda pa: pa.list_(pa.struct([
        ("text", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
        ("match", pa.string()), ("score", pa.float64())])),
                "the chunk's propositions, each with the span of the document it was "
                "drawn from: match exact, approximate (with its score) or null (no span) "
                "(propositions)"),
    # A fixed-size list where the model's dimension is known (chunkd.arrow).
    RecordField("vector", lambda pa: pa.list_(pa.float32()),
                "the chunk's embedding (of embed_text, else text), float32 (vectors)"),
)
OPTIONAL_FIELDS = tuple(field.name for field in RECORD_FIELDS)
#: The optional fields an input's own fields (NDJSON keys, Parquet columns) may still be
#: named, as they could before the field was added: they are refused only where the
#: option that writes the field is given (``context``: the filter, with --context).
INPUT_MAY_NAME = ("context",)


class Null:
    """An optional field's value that records write as null, where None leaves the
    field out: a chunk's ``context`` that the LLM did not give (``context_on_error``
    keep), so that a record says it has none rather than seem not to have asked."""

    def __repr__(self) -> str:
        return "NULL"


NULL = Null()


class Parent(NamedTuple):
    """A child's parent chunk (parent/child mode): its number in the document, its
    exact offsets, its length in the unit and its text. Records write a child's parent
    as ``{"index", "start", "end"}``; whole-document formats list each parent once."""

    # A field named like tuple.index: mypy reports the name, not a fault (the records'
    # key is "index").
    index: int  # type: ignore[assignment]
    start: int
    end: int
    length: int
    text: str


class Chunk(NamedTuple):
    """One chunk of a document: ``document[start:end] == text`` (but see below).

    ``start`` and ``end`` are offsets in code points (Python ``str`` indices);
    ``length`` is the size of ``text`` in the strategy's unit (code points, tokens,
    graphemes, words, sentences or sections). The optional fields are None unless the
    strategy or the settings fill them:

    * ``tokens``: the exact count of ``text`` in the tokenizer's tokens (``count_tokens``;
      ``tokenizer``, cl100k_base by default);
    * ``estimated_tokens``: ``ceil(1.05 * CJK code points + other code points / 4)``;
    * ``headings``: the Markdown headings enclosing the chunk, outermost first: at most
      six, each at most 256 code points (a longer heading is cut at its last grapheme
      boundary at or before 255 code points and ends with "…");
    * ``parent``: the parent chunk of a child (``parent_size``), a ``Parent``;
    * ``embed_text``: the text to embed, the heading path, a blank line, then the text
      (``embed_text``). In the markdown strategy it fits the size: the path takes at
      most half of it (outermost headings dropped first, then the innermost cut) and
      the text is split in the rest (``chunkd.strategies.markdown.EmbedPrefix``); a
      pipe table is one chunk if it fits, else cut between rows, and a chunk that
      starts in a table's body has the table's header row and separator row, each
      then a newline, between the path and the text, within the size too (not when
      they and the path would take more than half of it;
      ``chunkd.strategies.markdown.TableSplitter``);
    * ``chunk_id``: a stable UUID of the chunk in its document (``ids``; ``chunkd.model.ids``);
    * ``pages``: the first and last page (1-based) of a PDF that the chunk's text comes
      from (``chunkd.inputs``).
    * ``symbols``: the definitions enclosing the chunk's first code point that is not
      white space, outermost first, each as it reads up to its name ("class Splitter",
      "def feed"); the code strategy;
    * ``defines``: the definitions whose first code point is in the chunk, in order,
      each with the definitions enclosing it ("class Splitter > def feed"); the code
      strategy;
    * ``language``: the language the code strategy parsed the document as (None: cut
      as text).
    * ``distance``: the semantic strategy's cosine distance between the sentence windows
      either side of the chunk's end, where it cut (``chunkd.strategies.semantic``).
    * ``context``: a short text an LLM wrote from the whole document to situate the
      chunk in it (``context``; ``chunkd.llm.context``); ``NULL`` where it gave none.
    * ``title``, ``summary``: what the LLM called a group of propositions (the
      propositions strategy; ``NULL`` where a passage was kept as its own text);
    * ``propositions``: that strategy's statements, each a dict ``{"text", "start",
      "end", "match"}`` (and ``"score"`` where ``match`` is ``"approximate"``): the
      span of the document it was drawn from (``chunkd.strategies.propositions``).
      Its chunks' ``text`` is the propositions, one a line, no slice of the document;
      ``start`` and ``end`` bound their spans.
    * ``vector``: the chunk's embedding, a float32 array (``vectors``; ``chunkd.outputs.vectors``).

    With ``keep_separator`` "none" a chunk joined from pieces may differ from
    ``document[start:end]``: ``start`` and ``end`` then bound the stretch it comes from.
    """

    # A field named like tuple.index: mypy reports the name, not a fault (the records'
    # key is "index").
    index: int  # type: ignore[assignment]
    start: int
    end: int
    length: int
    text: str
    tokens: int | None = None
    estimated_tokens: int | None = None
    headings: tuple[str, ...] | None = None
    parent: Parent | None = None
    embed_text: str | None = None
    chunk_id: str | None = None
    pages: tuple[int, int] | None = None
    symbols: tuple[str, ...] | None = None
    defines: tuple[str, ...] | None = None
    language: str | None = None
    distance: float | None = None
    context: str | Null | None = None
    title: str | Null | None = None
    summary: str | Null | None = None
    propositions: tuple[dict[str, Any], ...] | None = None
    vector: numpy.ndarray | None = None


#: The optional fields' values of a chunk that has none (compiled code builds chunks
#: as plain tuples, the five fields then these).
NO_OPTIONAL_FIELDS = (None,) * len(OPTIONAL_FIELDS)


def name_value(name: object, binary: bool = False) -> object:
    """A document name as records carry it: a name that is valid UTF-8 as itself; a
    file name that is not (Linux names are bytes) as ``{"bytes": "<base64>"}`` in JSON
    (the convention of ripgrep's JSON output), or as bytes where ``binary`` (msgpack),
    so that no name is lost."""
    if not isinstance(name, str):
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        import base64
        import os

        raw = os.fsencode(name)
        return raw if binary else {"bytes": base64.b64encode(raw).decode("ascii")}
