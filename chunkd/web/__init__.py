"""The preview page that ``chunkd serve`` serves and ``chunkd preview`` writes to a file.

One page (``index.html``, ``style.css``, ``app.js`` beside this module, shipped as
package data) shows one *report*: a document, the records the ``chunkd`` filter writes
for it with the given settings (as NDJSON text, byte for byte, so that "Copy JSONL"
copies exactly the filter's output), and a summary. The report is computed here, from
``chunkd.pipeline`` and ``chunkd.outputs.writers``; the page's JavaScript only lays it
out. A semantic split's report also holds its distance ``curve`` (``curve_data``); a
propositions split's summary, its statements and what they leave uncovered
(``sources_summary``); every report, what the filter says of the document (``notes``).
``chunkd serve`` sends reports as JSON; ``chunkd preview`` inlines one report,
the styles and the script into a single HTML file.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import io
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterator

import orjson

from chunkd.model.version import __version__
from chunkd.model.chunk import Chunk
from chunkd.embeddings.models import embedding_progress
from chunkd.llm.ledger import document_lines
from chunkd.settings import Settings
from chunkd.pipeline import DocumentText, Pipeline
from chunkd.strategies import REGISTRY, Source
from chunkd.strategies.semantic import Curve, curves
from chunkd.model.chunk import name_value
from chunkd.outputs.writers import make_writer

#: The page's files, as the server serves them.
ASSETS = {"/": ("index.html", "text/html; charset=utf-8"),
          "/style.css": ("style.css", "text/css; charset=utf-8"),
          "/app.js": ("app.js", "text/javascript; charset=utf-8")}

#: Where index.html declares its encoding (a policy follows it in a standalone page), and
#: loads its style and script (``standalone_html`` inlines them there).
_CHARSET = b'<meta charset="utf-8">'
_STYLE_LINK = b'<link rel="stylesheet" href="style.css">'
_SCRIPT_TAG = b'<script src="app.js"></script>'


def asset(name: str) -> bytes:
    """One of the page's files, from the installed package."""
    return importlib.resources.files(__name__).joinpath(name).read_bytes()


def with_token_counts(settings: Settings) -> Settings:
    """The page always shows each chunk's exact token count (of the tokenizer)."""
    return settings.replace(count_tokens=True)


#: reST inline markup in a docstring: ``literal``, `interpreted`, :role:`target`.
_REST_MARKUP = re.compile(r"(?::\w+:)?``?([^`]+?)``?")

#: White space, which a statement's source need not cover.
_SPACE = re.compile(r"\s+")

#: Code points fed to the chunker at a time, so that a bound stops a split early.
FEED_POINTS = 1 << 14

#: What a split's progress is told: how many of the document's "code points" are fed to
#: the chunker, or of its "sentences" are embedded (the semantic strategy), of how many.
Told = Callable[[str, int, int], None]


class ReportTooLarge(ValueError):
    """A report over the bound its caller set; the message says which and what to do."""


def plain_summary(docstring: str | None) -> str:
    """A docstring's first paragraph as plain text on one line (a tooltip shows
    markup as written)."""
    first = (docstring or "").split("\n\n")[0]
    return " ".join(_REST_MARKUP.sub(r"\1", first).split())


def strategy_descriptions() -> list[dict]:
    """Every registered strategy as the page's settings form offers it: a window
    strategy takes a size in its own unit, the others in one of their units; a
    strategy with ``parents`` also takes a parent size."""
    return [{"name": name, "units": list(kind.units), "window": kind.window,
             "default_size": kind.default_size, "parents": kind.parents,
             "summary": plain_summary(kind.__doc__)}
            for name, kind in REGISTRY.items()]


def bounded_chunks(settings: Settings, text: str, name: str | None = None,
                   max_chunks: int | None = None, max_points: int | None = None,
                   source: Source | None = None, told: Told | None = None) -> list[Chunk]:
    """The chunks of the document ``name`` (``source``, when more is known of it: a
    PDF's page starts); over ``max_chunks`` chunks, or over ``max_points`` code
    points in all chunks together (the overlap repeats text), ``ReportTooLarge`` as
    soon as a block of the text shows it, before the rest is cut. ``told``: told of
    the progress (see ``Told``)."""
    pipeline = Pipeline(settings, ids=False)
    fed = told_at = 0  # the code points fed to the chunker, and those told of

    def tell() -> None:
        nonlocal told_at
        if told is not None and told_at < fed:
            told("code points", fed, len(text))
            told_at = fed

    def texts() -> Iterator[str]:
        nonlocal fed
        for at in range(0, len(text), FEED_POINTS):
            fed = min(len(text), at + FEED_POINTS)
            yield text[at:fed]
            tell()  # its block made no chunk final: told before the next is fed

    chunks: list[Chunk] = []
    points = 0
    sentences = None if told is None else (
        lambda done, total: told("sentences", done, total))
    with embedding_progress(sentences):
        for block in pipeline.chunks(DocumentText(source or Source(name), texts())):
            tell()  # told of the block that made these final before they are bounded
            chunks += block
            points += sum(chunk.end - chunk.start for chunk in block)
            if max_chunks is not None and len(chunks) > max_chunks:
                raise ReportTooLarge(f"these settings cut the document into more than "
                                     f"{max_chunks:,} chunks, the most this server shows; "
                                     "choose a larger size")
            if max_points is not None and points > max_points:
                raise ReportTooLarge(f"the chunks hold more than {max_points:,} code "
                                     "points together, the most this server shows for "
                                     "this document; choose a smaller overlap or a "
                                     "larger size")
    return chunks


def report(settings: Settings, text: str, name: str | None = None,
           max_chunks: int | None = None, max_points: int | None = None,
           source: Source | None = None, told: Told | None = None) -> dict:
    """The page's data for one document: ``jsonl`` is what ``chunkd`` writes for the
    same settings (with ``doc`` when the document has a ``name``, as for a FILE);
    ``tokenizer``, the identity of the tokenizer its tokens count in.
    ``max_chunks`` and ``max_points`` bound it (``bounded_chunks``); ``source``: what
    is known of a PDF, HTML or DOCX document whose ``text`` was extracted; ``curve``,
    the semantic strategy's distances, threshold and cuts (None for the others);
    ``notes``, what the filter says of the document on stderr (an LLM strategy's lines);
    ``told``: told of the split's progress as it goes (see ``Told``)."""
    with curves() as seen:
        chunks = bounded_chunks(settings, text, name, max_chunks, max_points, source, told)
    fields = list(settings.record_fields())
    if source is not None and source.page_starts is not None:
        fields.append("pages")
    out = io.BytesIO()
    writer = make_writer("ndjson", out, named=name is not None)
    writer.begin(name, {})
    writer.write(chunks)
    writer.end()
    totals = summary(chunks, len(text))
    if "propositions" in fields:
        totals |= sources_summary(chunks, text)
    return {"chunker": f"chunkd {__version__}", "doc": name_value(name),
            "tokenizer": settings.token_measure.name, "settings": settings.as_dict(),
            "fields": fields,
            "summary": totals, "text": text,
            "jsonl": out.getvalue().decode("utf-8"),
            "curve": curve_data(seen[0]) if seen else None,
            "notes": list(document_lines())}


def curve_data(curve: Curve) -> dict:
    """A document's distance curve as the page draws it: ``points`` (offset, distance),
    each at the start of the sentence after the boundary, where a cut there would begin
    the next chunk; ``gradients`` where the rule compares them rather than the
    distances; ``cuts`` (offset, the point cut at, or None: at the maximum size)."""
    return {"rule": curve.rule, "amount": curve.amount, "threshold": curve.threshold,
            "points": list(zip(curve.starts[1:], curve.distances)),
            "gradients": curve.values if curve.rule == "gradient" else None,
            "first": curve.starts[0] if curve.starts else 0,
            "cuts": curve.cuts}


def summary(chunks: list[Chunk], text_length: int) -> dict:
    """Totals over a document's chunks: their count; the least, median and greatest
    length (in the unit); the token counts they carry, summed; and ``repeated``, the
    code points that the overlap puts in more than one chunk (the chunks' sizes added
    up, less the size of the text they cover)."""
    lengths = [chunk.length for chunk in chunks]
    covered, reach = 0, 0
    for chunk in sorted(chunks, key=lambda chunk: chunk.start):
        covered += max(0, chunk.end - max(chunk.start, reach))
        reach = max(reach, chunk.end)
    return {
        "chunks": len(chunks),
        "min": min(lengths, default=None),
        "median": statistics.median(lengths) if lengths else None,
        "max": max(lengths, default=None),
        "tokens": _total(chunk.tokens for chunk in chunks),
        "estimated_tokens": _total(chunk.estimated_tokens for chunk in chunks),
        "repeated": sum(chunk.end - chunk.start for chunk in chunks) - covered,
        "code_points": text_length,
    }


def sources_summary(chunks: list[Chunk], text: str) -> dict:
    """The propositions strategy's totals, in place of an overlap it never has: its
    ``statements`` by match (``exact``, ``approximate``, ``unsupported``: no span), the
    document's ``visible`` code points (white space aside, as the filter's coverage
    line counts them) and those of them no statement's span covers (``uncovered``)."""
    found = [item for chunk in chunks for item in chunk.propositions or ()]
    matches = Counter(item["match"] for item in found)
    covered = reach = 0
    for start, end in sorted((item["start"], item["end"]) for item in found
                             if item["start"] is not None):
        if end > max(start, reach):
            covered += _visible(text[max(start, reach):end])
        reach = max(reach, end)
    visible = _visible(text)
    return {"statements": {"exact": matches["exact"], "approximate": matches["approximate"],
                           "unsupported": matches[None]},
            "visible": visible, "uncovered": visible - covered}


def _visible(text: str) -> int:
    """The code points of ``text`` that are not white space (``str.isspace``)."""
    return len(text) - sum(len(run) for run in _SPACE.findall(text))


def _total(counts) -> int | None:
    """The sum of counts the chunks carry; None when they carry none."""
    counts = [count for count in counts if count is not None]
    return sum(counts) if counts else None


def script_json(data: object) -> bytes:
    """``data`` as JSON that can sit inside a ``<script>`` element: ``<`` occurs in
    JSON only inside strings, where ``\\u003c`` means the same to ``JSON.parse``, and
    without it no ``</script>`` or ``<!--`` in a document can end the element."""
    return orjson.dumps(data).replace(b"<", b"\\u003c")


def standalone_html(data: dict) -> bytes:
    """The page with its style, script and one report inline: a single file that
    opens from disk, loads nothing and sends nothing (its Content-Security-Policy
    allows only these inline style and script, by hash)."""
    style, script = asset("style.css"), asset("app.js")
    for code, markup in ((style, b"</style"), (script, b"</script"), (script, b"<!--")):
        if markup in code.lower():  # it would end its element early, or hide its end
            raise ValueError(f"the page's asset contains {markup.decode()}")
    policy = ("default-src 'none'; "
              f"style-src '{_sha256(style)}'; script-src '{_sha256(script)}'; "
              "base-uri 'none'; form-action 'none'").encode()
    meta = b'<meta http-equiv="Content-Security-Policy" content="' + policy + b'">'
    page = _replace_once(asset("index.html"), _CHARSET, _CHARSET + b"\n" + meta)
    page = _replace_once(page, _STYLE_LINK, b"<style>" + style + b"</style>")
    return _replace_once(page, _SCRIPT_TAG,
                         b'<script id="report" type="application/json">' + script_json(data)
                         + b"</script>\n<script>" + script + b"</script>")


def _sha256(code: bytes) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(code).digest()).decode("ascii")


def _replace_once(page: bytes, old: bytes, new: bytes) -> bytes:
    if page.count(old) != 1:
        raise ValueError(f"index.html must hold {old.decode()} once")
    return page.replace(old, new)
