"""The semantic strategy's distance curve on the preview page (Greg Kamradt's plot:
the distance between neighbouring sentence windows at each sentence boundary, the
threshold, the cuts and the chunks' spans), with the real all-MiniLM-L6-v2.

The reference is made here, not by chunkd: the windows are embedded by
sentence-transformers itself, their cosine distances and the threshold computed with
numpy as LangChain's ``SemanticChunker`` does; the cuts are the chunk starts of the
installed filter's records. The report's data is checked in process; the page, drawn in
Debian's Chromium, from ``chunkd serve`` and from a ``chunkd preview`` file."""

from __future__ import annotations

import hashlib

import numpy
import orjson
import pytest
from playwright.sync_api import expect

import chunkd
from browser import Serve
from command import HANG, ndjson, run_chunkd
from embedding import model_folder, oracle_model
from oracle import corpus_documents
from test_page import page  # noqa: F401  (the page tests' page, on conftest.py's browser)

from chunkd.settings import settings_from_flags
from chunkd.strategies.semantic import BREAKPOINTS
from chunkd.web import report, standalone_html, with_token_counts

#: English prose with headings and lists: some cuts by meaning, some at the size.
DOCUMENT = next(p for p in corpus_documents() if p.name == "CODE_OF_CONDUCT.md")
TOKENS = "120"
#: The model's vectors may differ in their last bits from batch to batch.
NOISE = 1e-5


@pytest.fixture(scope="module")
def text() -> str:
    return DOCUMENT.read_text(encoding="utf-8")[:4000]


@pytest.fixture(scope="module")
def reference(text):
    """The sentences (chunkd's ``sentences`` units, the strategy's contract), and the
    distances between their windows (one neighbour on each side) from the model's own
    embeddings."""

    sentences = [(chunk.start, chunk.end) for chunk in
                 chunkd.split_text(text, 1, 0, strategy="sentences")]
    last = len(sentences) - 1
    windows = [text[sentences[max(0, i - 1)][0]:sentences[min(last, i + 1)][1]]
               for i in range(len(sentences))]
    model = oracle_model()
    vectors = model.encode(windows, batch_size=32, show_progress_bar=False).astype(numpy.float64)
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    distances = 1 - (vectors[:-1] * vectors[1:]).sum(axis=1)
    return sentences, distances


def report_of(text: str, **flags) -> dict:
    """The page's report for ``text`` with the flags' settings, as the page reads it."""
    return orjson.loads(orjson.dumps(report(with_token_counts(settings_from_flags(flags)), text)))


def langchain_threshold(distances, rule: str, amount: float) -> tuple[numpy.ndarray, float]:
    """LangChain's ``_calculate_breakpoint_threshold``: what is compared, and with what."""
    if rule == "percentile":
        return distances, numpy.percentile(distances, amount)
    if rule == "standard_deviation":
        return distances, numpy.mean(distances) + amount * numpy.std(distances)
    if rule == "interquartile":
        q1, q3 = numpy.percentile(distances, [25, 75])
        return distances, numpy.mean(distances) + amount * (q3 - q1)
    gradients = numpy.gradient(distances, range(len(distances)))
    return gradients, numpy.percentile(gradients, amount)


def check_cuts(curve: dict, records: list[dict]) -> None:
    """A cut at every chunk start but the first: where the previous chunk records the
    distance, at the sentence boundary with that distance, above the threshold; else
    (a group over the size cut inside) at no boundary."""
    assert [at for at, _ in curve["cuts"]] == [r["start"] for r in records[1:]]
    values = curve["gradients"] or [distance for _, distance in curve["points"]]
    for (at, point), before in zip(curve["cuts"], records):
        if before.get("distance") is None:
            assert point is None
        else:
            assert curve["points"][point] == [at, pytest.approx(before["distance"], abs=1e-12)]
            assert values[point] > curve["threshold"]


# --- the report's data, in process ------------------------------------------------------------

@pytest.mark.parametrize("rule", list(BREAKPOINTS))
def test_the_report_holds_the_strategys_distances_threshold_and_cuts(minilm, text, reference,
                                                                     rule):
    sentences, distances = reference
    data = report_of(text, strategy="semantic", embed=minilm[0], tokens=int(TOKENS),
                     breakpoint=rule)
    curve, records = data["curve"], ndjson(data["jsonl"].encode())
    # One point per distance, each at the start of the sentence after its boundary.
    assert [at for at, _ in curve["points"]] == [start for start, _ in sentences[1:]]
    assert curve["first"] == sentences[0][0]
    assert numpy.allclose([d for _, d in curve["points"]], distances, rtol=0, atol=NOISE)
    values, threshold = langchain_threshold(distances, rule, BREAKPOINTS[rule])
    assert (curve["rule"], curve["amount"]) == (rule, BREAKPOINTS[rule])
    assert curve["threshold"] == pytest.approx(threshold, abs=NOISE)
    if rule == "gradient":
        assert numpy.allclose(curve["gradients"], values, rtol=0, atol=NOISE)
    else:
        assert curve["gradients"] is None
    check_cuts(curve, records)
    if rule == "percentile":  # the document has both kinds of cut to draw
        assert {point is None for _, point in curve["cuts"]} == {True, False}


def test_other_strategies_have_no_curve(text):
    assert report_of(text, strategy="recursive", chars=300)["curve"] is None


def test_a_document_of_one_sentence_has_a_curve_without_points(minilm):
    curve = report_of("Only one sentence here.", strategy="semantic", embed=minilm[0])["curve"]
    assert (curve["points"], curve["threshold"], curve["cuts"]) == ([], None, [])


# --- the page, in Debian's Chromium -------------------------------------------------------------

#: The curve as drawn: points (offset, value), the threshold, cut marks (offset, kind).
READ_CURVE = """box => ({
    points: [...box.querySelectorAll('circle.point')].map(c =>
        [Number(c.dataset.at), Number(c.dataset.value), c.classList.contains('above')]),
    threshold: box.querySelector('.threshold') && Number(box.querySelector('.threshold').dataset.threshold),
    label: box.querySelector('.threshold-label') && box.querySelector('.threshold-label').textContent,
    cuts: [...box.querySelectorAll('.cut')].map(c =>
        [Number(c.dataset.at), c.classList.contains('meaning') ? 'meaning' : 'size',
         Number(c.getAttribute('x1'))]),
    spans: [...box.querySelectorAll('rect.span')].map(r =>
        [Number(r.getAttribute('x')), Number(r.getAttribute('x')) + Number(r.getAttribute('width'))]),
    title: box.querySelector('svg title').textContent,
    desc: box.querySelector('svg desc').textContent,
})"""


def filter_records(text: str, *options: str) -> list[dict]:
    made = run_chunkd("--count-tokens", "--strategy", "semantic", "--embed", model_folder(),
                      "--tokens", TOKENS, *options, input=text.encode())
    assert made.returncode == 0, made.stderr
    return ndjson(made.stdout)


def check_drawn(page, text: str, reference, records: list[dict]) -> dict:
    """The curve on the page against the reference and the filter's records."""
    sentences, distances = reference
    expect(page.locator("#curve")).to_be_visible()
    drawn = page.locator("#curve").evaluate(READ_CURVE)
    # A point per distance, at its sentence, with the model's distance.
    assert [at for at, _, _ in drawn["points"]] == [start for start, _ in sentences[1:]]
    assert numpy.allclose([value for _, value, _ in drawn["points"]], distances, rtol=0, atol=NOISE)
    # The threshold line at LangChain's percentile of those distances, labelled so.
    threshold = numpy.percentile(distances, 95)
    assert drawn["threshold"] == pytest.approx(threshold, abs=NOISE)
    assert drawn["label"] == f"percentile 95 = {drawn['threshold']:.3f}"
    assert [above for _, value, above in drawn["points"]] == [
        value > drawn["threshold"] for _, value, _ in drawn["points"]]
    # A mark at each chunk start but the first: by meaning where the chunk before records
    # the distance it was cut at, else at the size.
    assert [(at, kind) for at, kind, _ in drawn["cuts"]] == [
        (r["start"], "size" if before.get("distance") is None else "meaning")
        for before, r in zip(records, records[1:])]
    # Each mark where its chunk's span begins; the spans in order, one per chunk.
    assert len(drawn["spans"]) == len(records)
    for (_, _, x), (begins, _) in zip(drawn["cuts"], drawn["spans"][1:]):
        assert x == pytest.approx(begins)
    assert all(a[1] <= b[0] + 1e-6 for a, b in zip(drawn["spans"], drawn["spans"][1:]))
    assert drawn["title"] and f"{len(distances)} distances" in drawn["desc"]
    return drawn


@pytest.mark.browser
def test_the_served_page_draws_the_curve_the_strategy_cut_by(page, text, reference):
    records = filter_records(text)
    with Serve("--strategy", "semantic", "--embed", model_folder()) as serve:
        page.goto(serve.url)
        expect(page.locator("#settings")).to_be_visible()
        assert page.input_value("#strategy") == "semantic"
        page.evaluate("text => navigator.clipboard.writeText(text)", text)
        page.click("#editor")
        page.keyboard.press("Control+V")
        page.select_option("#unit", "tokens")
        page.fill("#size", TOKENS)
        page.click("#split")
        # The model embeds on a CPU shared with other tests: seconds, not milliseconds.
        expect(page.locator("#action-status")).to_contain_text("chunks, shown in", timeout=HANG * 1000)
        drawn = check_drawn(page, text, reference, records)

        # Hovering a point gives its numbers; clicking it selects the chunk that holds
        # its sentence.
        above = next(i for i, (_, _, high) in enumerate(drawn["points"]) if high)
        point = page.locator(f"#curve circle.point[data-point='{above}']")
        point.hover()
        at, value, _ = drawn["points"][above]
        expect(page.locator("#curve-readout")).to_contain_text(
            f"Boundary {above + 1} of {len(drawn['points'])}, before code point {at:,}")
        expect(page.locator("#curve-readout")).to_contain_text(f"distance {value:.3f}")
        point.click()
        holder = next(r for r in records if r["start"] <= at < r["end"])
        expect(page.locator("#details [data-fact='Index']")).to_have_text(str(holder["index"]))
        assert page.get_attribute(f"#curve rect.span[data-index='{holder['index']}']",
                                  "class").split() == ["span", f"c{holder['index'] % 2}", "sel"]

        # Another strategy: no curve.
        page.click("#tab-edit")
        assert page.is_hidden("#curve")
        page.select_option("#strategy", "recursive")
        page.click("#split")
        expect(page.locator("#action-status")).to_contain_text("chunks, shown in")
        assert page.is_hidden("#curve")


@pytest.mark.browser
def test_a_preview_file_draws_the_curve_and_loads_nothing(page, text, reference, tmp_path):
    (tmp_path / "doc.md").write_text(text, encoding="utf-8")
    made = run_chunkd("preview", "doc.md", "--strategy", "semantic", "--embed", model_folder(),
                      "--tokens", TOKENS, "-o", "report.html", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    asked: list[str] = []
    page.on("request", lambda sent: asked.append(sent.url))
    page.goto((tmp_path / "report.html").as_uri())
    check_drawn(page, text, reference, filter_records(text))
    page.locator("#curve svg").focus()  # the keyboard moves along the boundaries
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    expect(page.locator("#curve-readout")).to_contain_text("Boundary 2 of")
    assert asked == [(tmp_path / "report.html").as_uri()]


@pytest.mark.browser
def test_a_server_without_a_model_offers_no_semantic_strategy(page):
    with Serve() as serve:
        page.goto(serve.url)
        expect(page.locator("#settings")).to_be_visible()
        option = page.locator("#strategy option", has_text="semantic")
        assert option.is_disabled()
        assert option.get_attribute("title").startswith(
            "This server cannot: --strategy semantic needs a model: --embed MODEL")


def hashed_vectors(texts: list[str]) -> numpy.ndarray:
    """A stand-in model: each text's vector from its SHA-256, so distances vary."""
    return numpy.array([numpy.frombuffer(hashlib.sha256(text.encode()).digest(), numpy.uint8)
                        for text in texts], dtype=numpy.float64)


@pytest.mark.browser
def test_a_long_documents_curve_has_every_distance_and_dots_only_above(page, tmp_path):
    """6,000 sentences: the line goes through every distance, a dot marks each one above
    the threshold (not thousands of others), and hovering still gives any point."""
    words = "alpha beta gamma delta epsilon zeta eta theta".split()
    text = " ".join(f"{words[i % 8]} {words[i * 7 % 8]} {words[i * 3 % 8]} {i}." for i in range(6000))
    settings = with_token_counts(settings_from_flags(
        {"strategy": "semantic", "embed": hashed_vectors, "chars": 2000}))
    data = orjson.loads(orjson.dumps(report(settings, text)))
    curve = data["curve"]
    assert len(curve["points"]) == 5999
    (tmp_path / "report.html").write_bytes(standalone_html(data))
    page.goto((tmp_path / "report.html").as_uri())
    expect(page.locator("#curve")).to_be_visible()
    line = page.get_attribute("#curve polyline.values", "points").split()
    assert len(line) == len(curve["points"])
    above = [at for at, distance in curve["points"] if distance > curve["threshold"]]
    dots = page.eval_on_selector_all("#curve circle.point", "c => c.map(d => Number(d.dataset.at))")
    assert dots == above and 0 < len(above) < 1000
    assert "Dots mark only the distances above the threshold" in page.text_content("#curve desc")
    box = page.locator("#curve svg").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(page.locator("#curve-readout")).to_contain_text("Boundary ")
