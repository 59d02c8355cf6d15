"""The results: a ranked table for people, records for machines, a chart.

Records (``--format ndjson|json|csv``) are ranked like the table, best first. Each has
the settings (as ``Settings.as_dict()`` records them, less ``errors``, which only says
how the input was decoded), ``k`` or ``budget``, ``questions``, each metric's mean with
its standard deviation and standard error beside it (``recall``, ``recall_std``,
``recall_se``, ...), ``chunks`` and ``tokens``, then ``vs_best``: how far the ranking
metric's mean is below the best setting's, paired over the questions, with its standard
error ``vs_best_se`` and ``within_noise``; then ``documents``, the same per document
(without the comparison). In CSV, a setting's row has an
empty ``doc`` and is followed by a row per document with ``doc`` filled in.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from chunkd.embeddings.selection import LATE
from chunkd.evaluate.evaluation import Part, Result
from chunkd.evaluate.metrics import METRICS, NOISE_ERRORS, Difference, paired_difference

FORMATS = ("table", "ndjson", "json", "csv")
CHARTS = (".png", ".svg", ".html")
#: How the table and the chart call each metric.
TITLES = {"recall": "recall", "precision": "precision", "iou": "IoU",
          "recall_at_k": "recall@k", "mrr": "MRR", "ndcg": "nDCG@k"}


@dataclass(frozen=True)
class Scope:
    """What the results are about: how they were retrieved and ranked, and over what."""

    k: int
    rank: str
    retriever: str
    questions: int
    #: The documents' names, in the order of ``Result.documents``.
    names: tuple[str, ...]
    #: The identity of the tokenizer that counts the ``tokens`` column.
    tokenizer: str = "cl100k_base"
    #: The retriever's model's identity (dense, hybrid).
    model: str | None = None
    #: The context tokens each question's chunks fit in, instead of ``k`` chunks.
    budget: int | None = None

    @property
    def depth(self) -> str:
        """How many chunks a question gets, as recall@ says it."""
        return str(self.k) if self.budget is None else "budget"


def ranked(results: Sequence[Result], metric: str) -> list[Result]:
    """Best first by ``metric``'s mean; ties go to the cheaper setting (fewer tokens),
    then keep the grid's order."""
    return sorted(results, key=lambda result: (
        -getattr(result.overall.summary.means, metric), result.overall.tokens))


def behind_best(results: Sequence[Result], metric: str) -> list[Difference]:
    """How far each ranked result is behind the first on ``metric``, paired over the
    questions, and whether that is within the noise."""
    best = [getattr(scores, metric) for scores in results[0].scores]
    return [paired_difference(best, [getattr(scores, metric) for scores in result.scores])
            for result in results]


def settings_fields(result: Result) -> dict:
    recorded = result.point.settings.as_dict()
    del recorded["errors"]
    return recorded


def _part_fields(part: Part) -> dict:
    fields: dict = {"questions": part.summary.questions}
    for name, mean, deviation, error in zip(METRICS, part.summary.means,
                                            part.summary.deviations, part.summary.errors):
        fields[name], fields[f"{name}_std"], fields[f"{name}_se"] = mean, deviation, error
    fields["chunks"], fields["tokens"] = part.chunks, part.tokens
    return fields


def retrieval_fields(scope: Scope) -> dict:
    """How the chunks were retrieved: ``k`` or ``budget``, and the retriever and its
    model where it is not BM25."""
    fields: dict = {"k": scope.k} if scope.budget is None else {"budget": scope.budget}
    if scope.retriever != "bm25":
        fields.update(retriever=scope.retriever, retriever_model=scope.model)
    return fields


def _behind_fields(behind: Difference) -> dict:
    return {"vs_best": behind.mean, "vs_best_se": behind.error,
            "within_noise": behind.within_noise}


def record(result: Result, scope: Scope, behind: Difference) -> dict:
    """A setting's record: settings, how it retrieved, the overall scores and how far
    behind the best, then per document."""
    return {**settings_fields(result), **retrieval_fields(scope), **_part_fields(result.overall),
            **_behind_fields(behind),
            "documents": [{"doc": name, **_part_fields(part)}
                          for name, part in zip(scope.names, result.documents)]}


def records_bytes(results: Sequence[Result], format: str, scope: Scope) -> bytes:
    """The ranked results as NDJSON, JSON (an array) or CSV."""
    behind = behind_best(results, scope.rank)
    if format == "csv":
        rows = []
        for result, difference in zip(results, behind):
            # A document's row repeats its setting's, and its comparison with the best.
            head = {**settings_fields(result), **retrieval_fields(scope),
                    **_behind_fields(difference)}
            rows.append({**head, "doc": "", **_part_fields(result.overall)})
            rows.extend({**head, "doc": name, **_part_fields(part)}
                        for name, part in zip(scope.names, result.documents))
        out = io.StringIO(newline="")
        # Every key of every row: strategies may record settings of their own.
        writer = csv.DictWriter(out, fieldnames=list(dict.fromkeys(key for row in rows
                                                                   for key in row)),
                                restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue().encode("utf-8")
    records = [record(result, scope, difference) for result, difference in zip(results, behind)]
    if format == "json":
        return orjson.dumps(records, option=orjson.OPT_INDENT_2) + b"\n"
    return b"".join(orjson.dumps(item) + b"\n" for item in records)


# --- the table -----------------------------------------------------------------------------

def _overlap(result: Result) -> str:
    point = result.point
    given = point.overlap
    return given if given == str(point.settings.overlap) else f"{point.settings.overlap} ({given})"


def _strategy(result: Result) -> str:
    """The strategy, and "late" where the chunks' vectors are late chunking's."""
    settings = result.point.settings
    return settings.strategy + (" late" if settings[LATE] else "")


def _unit(result: Result) -> str:
    unit = result.point.settings.unit
    assert unit is not None, "Settings fills in its unit (__post_init__)"
    return unit


def _size(result: Result) -> int:
    size = result.point.settings.size
    assert size is not None, "Settings fills in its size (__post_init__)"
    return size


def table_rows(results: Sequence[Result], scope: Scope) -> list[list[str]]:
    """The ranked table's cells, a header row first: each metric's mean ± its standard
    error, then how far behind the best on the ranking metric (≈: within the noise)."""
    header = ["#", "strategy", "unit", "size", "overlap",
              *(TITLES[name].replace("@k", f"@{scope.depth}") for name in METRICS), "chunks",
              "tokens", f"vs best ({TITLES[scope.rank].replace('@k', f'@{scope.depth}')})"]
    rows = [header]
    for place, (result, behind) in enumerate(zip(results, behind_best(results, scope.rank)),
                                             start=1):
        summary = result.overall.summary
        settings = result.point.settings
        rows.append([str(place), _strategy(result), _unit(result), str(settings.size),
                     _overlap(result),
                     *(f"{mean:.3f} ±{error:.3f}"
                       for mean, error in zip(summary.means, summary.errors)),
                     str(result.overall.chunks), f"{result.overall.tokens:,}",
                     "best" if place == 1 else
                     f"{'≈ ' if behind.within_noise else ''}{0.0 - behind.mean:+.3f} ±{behind.error:.3f}"])
    return rows


def headline(scope: Scope) -> str:
    model = (scope.model or "").partition("@")[0]  # its name; records hold the identity
    retriever = {"bm25": "BM25", "dense": f"dense ({model})",
                 "hybrid": f"hybrid (BM25 + {model})"}[scope.retriever]
    depth = (f"top {scope.k}" if scope.budget is None
             else f"the best chunks within {scope.budget:,} tokens")
    return (f"{_count(scope.questions, 'question')} over "
            f"{_count(len(scope.names), 'document')}, {retriever} {depth}, ranked by "
            f"{TITLES[scope.rank]} (mean ±standard error over the questions; ≈: within "
            f"{NOISE_ERRORS} standard errors of the best, question by question)"
            + ("" if scope.tokenizer == "cl100k_base" else f"; tokens of {scope.tokenizer}"))


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'s' * (number != 1)}"


def best_line(results: Sequence[Result], scope: Scope) -> str:
    """The first of the ranked results, named by the filter's options, and whether the
    questions tell it from the others."""
    best = results[0]
    means, errors = best.overall.summary.means, best.overall.summary.errors
    line = (f"best by {TITLES[scope.rank]}: {best.point.options()} (recall "
            f"{means.recall:.3f} ±{errors.recall:.3f}, IoU {means.iou:.3f} ±{errors.iou:.3f}, "
            f"{best.overall.tokens:,} tokens to embed)")
    close = [result for result, behind in zip(results[1:], behind_best(results, scope.rank)[1:])
             if behind.within_noise]
    if not close:
        return line + "; ahead of every other setting by more than the noise"
    cheapest = min(close, key=lambda result: result.overall.tokens)
    return (line + f"; within the noise of {_count(len(close), 'other setting')} (≈), so these "
            f"questions do not settle the choice" + (
                f": the cheapest of those is {cheapest.point.options()} "
                f"({cheapest.overall.tokens:,} tokens)"
                if cheapest.overall.tokens < best.overall.tokens else ""))


def table(results: Sequence[Result], scope: Scope) -> str:
    """The terminal table, ranked, with the best setting named under it."""
    rows = table_rows(results, scope)
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    left = {1, 2}  # the text columns; numbers are right-aligned
    lines = ["  ".join(cell.ljust(width) if column in left else cell.rjust(width)
                       for column, (cell, width) in enumerate(zip(row, widths))).rstrip()
             for row in rows]
    return "\n".join([headline(scope), "", *lines, "", best_line(results, scope)]) + "\n"


# --- the chart -----------------------------------------------------------------------------

def figure(results: Sequence[Result], scope: Scope):
    """Recall and IoU against size: a column per unit, a line per strategy and overlap."""
    from matplotlib.figure import Figure

    units = list(dict.fromkeys(result.point.settings.unit for result in results))
    figure = Figure(figsize=(4.2 * len(units) + 1.8, 6.4), layout="constrained")
    axes = figure.subplots(2, len(units), squeeze=False, sharey="row")
    for column, unit in enumerate(units):
        lines: dict[tuple[str, str], list[Result]] = {}
        for result in results:
            if result.point.settings.unit == unit:
                lines.setdefault((_strategy(result), result.point.overlap),
                                 []).append(result)
        for row, metric in enumerate(("recall", "iou")):
            plot = axes[row][column]
            for (strategy, overlap), line in lines.items():
                line = sorted(line, key=_size)
                plot.plot([result.point.settings.size for result in line],
                          [getattr(result.overall.summary.means, metric) for result in line],
                          marker="o", label=f"{strategy}, overlap {overlap}")
            plot.set_xscale("log", base=2)
            sizes = sorted({_size(result) for line in lines.values()
                            for result in line})
            plot.set_xticks(sizes, labels=[str(size) for size in sizes])
            plot.minorticks_off()
            plot.grid(True, alpha=0.3)
            plot.set_ylabel(f"{TITLES[metric]} (mean)" if column == 0 else "")
            if row == 1:
                plot.set_xlabel(f"size ({unit})")
        axes[0][column].legend(fontsize="small")
    depth = (f"top {scope.k} chunks" if scope.budget is None
             else f"chunks within {scope.budget:,} tokens")
    figure.suptitle(f"chunkd eval: {depth}, "
                    f"{results[0].overall.summary.questions} questions")
    return figure


def chart_bytes(results: Sequence[Result], kind: str, scope: Scope) -> bytes:
    """The chart as PNG or SVG (``kind``, one of ``CHARTS``), or an HTML page holding
    it (as SVG) and the tables."""
    import matplotlib

    drawn = figure(results, scope)
    out = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "chunkd", "svg.fonttype": "none"}):
        if kind == ".png":
            drawn.savefig(out, format="png", dpi=120, metadata={"Software": None})
            return out.getvalue()
        drawn.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    if kind == ".svg":
        return out.getvalue()
    svg = out.getvalue().decode("utf-8")
    return page(results, svg[svg.index("<svg"):], scope).encode("utf-8")


def page(results: Sequence[Result], svg: str, scope: Scope) -> str:
    """A self-contained HTML page (no script, no link): the headline, the best setting,
    the chart, the ranked table and each setting's scores per document."""
    rows = table_rows(results, scope)
    cells = "\n".join(
        "<tr>" + "".join(f"<{tag}>{html.escape(cell)}</{tag}>" for cell in row) + "</tr>"
        for tag, row in [("th", rows[0])] + [("td", row) for row in rows[1:]])
    documents = ["<tr><th>setting</th><th>document</th><th>questions</th>"
                 + "".join(f"<th>{cell}</th>" for cell in rows[0][5:5 + len(METRICS)])
                 + "</tr>"]
    for result in results:
        for name, part in zip(scope.names, result.documents):
            documents.append(
                f"<tr><td>{html.escape(result.point.options())}</td><td>{html.escape(name)}"
                f"</td><td>{part.summary.questions}</td>" + "".join(
                    f"<td>{mean:.3f} ±{error:.3f}</td>" for mean, error
                    in zip(part.summary.means, part.summary.errors)) + "</tr>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>chunkd eval</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:right;white-space:nowrap}}
.settings td:nth-child(2),.settings td:nth-child(3),.documents td:nth-child(1),
.documents td:nth-child(2){{text-align:left}}</style></head>
<body><h1>chunkd eval</h1>
<p>{html.escape(headline(scope))}</p>
<p><strong>{html.escape(best_line(results, scope))}</strong></p>
{svg}
<h2>Settings, best first</h2>
<table class="settings">
{cells}
</table>
<h2>Per document</h2>
<table class="documents">
{chr(10).join(documents)}
</table>
</body></html>
"""
