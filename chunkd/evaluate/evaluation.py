"""One setting evaluated end to end: chunk every document, retrieve, score."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chunkd.embeddings.selection import LATE, embedder
from chunkd.model.chunk import Chunk
from chunkd.evaluate.grid import Point
from chunkd.evaluate.metrics import (DocumentChunks, Retrieved, Scores, Span, Summary,
                                     scores, summarize)
from chunkd.evaluate.questions import Documents, Resolved
from chunkd.evaluate.retrieval import Retriever
from chunkd.pipeline import DocumentText, Pipeline

if TYPE_CHECKING:
    import numpy


@dataclass(frozen=True)
class Part:
    """What a setting scored over some of the questions, and what its chunks cost."""

    summary: Summary
    chunks: int
    #: The tokens (of the settings' tokenizer) of all the chunks: what embedding them costs.
    tokens: int


@dataclass(frozen=True)
class Result:
    """A setting's scores over all questions, and over each document's."""

    point: Point
    overall: Part
    #: Per document, in the documents' order.
    documents: tuple[Part, ...]
    #: Each question's scores, in the questions' order (for paired comparisons).
    scores: tuple[Scores, ...] = ()


def chunk_documents(point: Point, documents: Documents) -> list[tuple[int, Chunk]]:
    """Every document's chunks, with its document's number, counted in tokens; the
    chunker told each document's ``Source`` (so ``--strategy auto`` chooses by it)."""
    pipeline = Pipeline(point.settings.replace(count_tokens=True), ids=False)
    chunks: list[tuple[int, Chunk]] = []
    for number, (source, text) in enumerate(zip(documents.sources, documents.texts)):
        for ready in pipeline.chunks(DocumentText(source, [text])):
            chunks.extend((number, chunk) for chunk in ready)
    return chunks


def evaluate(point: Point, documents: Documents, questions: Sequence[Resolved],
             retriever: Callable[..., Retriever], k: int,
             budget: int | None = None) -> Result:
    """The scores of ``point``'s settings, with the top ``k`` chunks of ``retriever``,
    or, with a ``budget``, as many of its best chunks as fit in that many tokens."""
    chunks = chunk_documents(point, documents)
    given = {"vectors": late_vectors(point, documents, chunks)} if point.settings[LATE] else {}
    # What is indexed is what would be embedded: embed_text when asked for (--embed-text).
    best = (retriever([chunk.embed_text or chunk.text for _, chunk in chunks], **given).search(
        [question.text for question in questions], k if budget is None else len(chunks))
        if chunks else [[] for _ in questions])
    if budget is not None:
        best = [within(numbers, chunks, budget) for numbers in best]
    stands = [spans(chunk) for _, chunk in chunks]
    each_document = [DocumentChunks(chunk_spans for (document, _), chunk_spans
                                    in zip(chunks, stands) if document == number)
                     for number in range(len(documents.texts))]
    per_question = []
    for question, numbers in zip(questions, best):
        retrieved = [Retrieved(stands[number], chunks[number][0] == question.document)
                     for number in numbers]
        per_question.append(scores(question.references, retrieved,
                                   documents.texts[question.document],
                                   each_document[question.document]))

    count = len(documents.texts)
    chunk_counts, token_counts = [0] * count, [0] * count
    for number, chunk in chunks:
        chunk_counts[number] += 1
        assert chunk.tokens is not None, "chunk_documents counts tokens (count_tokens)"
        token_counts[number] += chunk.tokens
    by_document: list[list] = [[] for _ in range(count)]
    for score, question in zip(per_question, questions):
        by_document[question.document].append(score)
    return Result(point, Part(summarize(per_question), len(chunks), sum(token_counts)),
                  tuple(Part(summarize(by_document[number]), chunk_counts[number],
                             token_counts[number]) for number in range(count)),
                  tuple(per_question))


def spans(chunk: Chunk) -> tuple[Span, ...]:
    """The ranges of the document a chunk stands for: its own, or, for a propositions
    chunk (whose text is the LLM's statements, its range only their bound), its
    propositions' sources (those that have one)."""
    if chunk.propositions is None:
        return ((chunk.start, chunk.end),)
    return tuple((found["start"], found["end"]) for found in chunk.propositions
                 if found["start"] is not None)


def late_vectors(point: Point, documents: Documents,
                 chunks: list[tuple[int, Chunk]]) -> numpy.ndarray:
    """The chunks' late vectors (``--late``), each document read once by the model."""
    import numpy

    from chunkd.embeddings import late

    parts = late.loaded_late_model(embedder(point.settings))
    vectors = numpy.zeros((len(chunks), 0), dtype=numpy.float32)
    for number, text in enumerate(documents.texts):
        mine = [index for index, (document, _) in enumerate(chunks) if document == number]
        if mine:
            made = late.late_vectors(parts, text, [(chunks[index][1].start, chunks[index][1].end)
                                                   for index in mine])
            if vectors.shape[1] == 0:
                vectors = numpy.zeros((len(chunks), made.shape[1]), dtype=numpy.float32)
            vectors[mine] = made
    return vectors


def within(ranked: list[int], chunks: Sequence[tuple[int, Chunk]], budget: int) -> list[int]:
    """The best chunks, in order, up to the first that would take their tokens past
    ``budget``: what a prompt of that many context tokens holds."""
    kept, spent = [], 0
    for number in ranked:
        tokens = chunks[number][1].tokens
        assert tokens is not None, "chunk_documents counts tokens (count_tokens)"
        if spent + tokens > budget:
            break
        kept.append(number)
        spent += tokens
    return kept
