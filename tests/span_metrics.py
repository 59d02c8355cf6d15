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
