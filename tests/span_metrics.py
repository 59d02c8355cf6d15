"""The span metrics of ``chunkd eval``, written plainly from the contract: recall,
precision and IoU over sets of code points."""

from __future__ import annotations

import numpy


def plain_scores(questions, chunks, ranked):
    """The mean recall, precision and IoU of each question's retrieved chunks
    (``ranked``: chunk numbers), from sets of code points."""
    totals = numpy.zeros(3)
    for question, numbers in zip(questions, ranked):
        wanted = {(question["doc"], point) for reference in question["references"]
                  for point in range(reference["start"], reference["end"])}
        got = {(chunks[n][0], point) for n in numbers
               for point in range(chunks[n][1].start, chunks[n][1].end)}
        cost = sum(chunks[n][1].end - chunks[n][1].start for n in numbers)
        hits = len(wanted & got)
        totals += (hits / len(wanted), hits / cost if cost else 0.0,
                   hits / (cost + len(wanted - got)))
    return totals / len(questions)


def plain_ndcg(questions, chunks, ranked):
    """Each question's nDCG@k from its definition: a retrieved chunk is relevant if it is
    of the question's document and shares a code point with its references; the ideal
    puts min(k, the relevant chunks among all of that document's) relevant chunks first."""
    found = []
    for question, numbers in zip(questions, ranked):
        wanted = {point for reference in question["references"]
                  for point in range(reference["start"], reference["end"])}

        def relevant(number):
            name, chunk = chunks[number]
            return name == question["doc"] and bool(wanted & set(range(chunk.start, chunk.end)))

        dcg = sum(1 / numpy.log2(rank + 1)
                  for rank, number in enumerate(numbers, 1) if relevant(number))
        count = sum(map(relevant, range(len(chunks))))
        ideal = sum(1 / numpy.log2(rank + 1) for rank in range(1, min(len(numbers), count) + 1))
        found.append(dcg / ideal if ideal else 0.0)
    return found
