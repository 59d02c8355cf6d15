"""``--strategy llm``: boundaries a loopback chat server (``chat_server``) chooses, as
scripted, hostile answers included; the chunks always exact slices that tile the
document within the sizes, the retry and the fallback said, the calls bounded by the
windows, the cache asking nothing on a rerun, a failed call failing its document."""

from __future__ import annotations

import json
import re
import threading

import pytest
from chat_server import serving
from command import ndjson, run_chunkd
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st
from property_examples import examples

from chunkd.kernel.chosen import SectionScanner
from chunkd.llm.client import Completion
from chunkd.settings import settings_from_flags
from chunkd.strategies.llm import LLMSplitter, parsed, shown
from chunkd.units import resolve

#: Paragraphs of three topics, a code block with a blank line, a table, a long
#: paragraph (cut at its sentences), and a second section.
DOC = ("# Garden notes\n\n"
       "Apples grow on trees. Apple trees need sun.\n\n"
       "Apples are picked in autumn, then stored cold.\n\n"
       "Hammers drive nails. A hammer has a head and a handle.\n\n"
       "```python\nnails = 3\n\nhammer(nails)\n```\n\n"
       "| tool | weight |\n|---|---|\n| hammer | 1 kg |\n\n"
       + " ".join(f"Rain sentence {number} says how rain falls." for number in range(12))
       + "\n\n## Second part\n\nClouds form over hills.\n\nHammers again, briefly.\n")


def lines_of(prompt: str) -> list[str]:
    """The numbered lines a question shows, in order (their text after the number)."""
    found = re.findall(r"^(\d+): (.*)$", prompt, re.M)
    assert [int(number) for number, _ in found] == list(range(1, len(found) + 1))
    return [text for _, text in found]


def topics(body: dict, prompt: str) -> str:
    """A model that starts a topic at every line naming hammers, clouds or rain where
    the line before does not."""
    shown = lines_of(prompt)

    def topic(line: str) -> str | None:
        return next((word for word in ("Hammer", "Cloud", "Rain") if word in line), None)

    return json.dumps({"boundaries": [number for number in range(2, len(shown) + 1)
                                      if topic(shown[number - 1]) and topic(shown[number - 1])
                                      != topic(shown[number - 2])]})


def sections(text: str) -> list[tuple[int, int]]:
    scanner = SectionScanner()
    starts = [start for start, _ in scanner.feed(text) + scanner.finish()]
    return list(zip(starts, starts[1:] + [len(text)]))


def assert_tiled(text: str, records: list[dict], count, size: int, minimum: int) -> None:
    """Exact slices, in order, white space alone between them and around them, none over
    the size, none crossing a section, and one under the minimum only where neither
    neighbour of its section could take it."""
    at = 0
    for number, record in enumerate(records):
        assert record["index"] == number
        assert text[record["start"]:record["end"]] == record["text"]
        assert record["text"] == record["text"].strip() and record["text"]
        assert not text[at:record["start"]].strip()
        assert record["length"] == count(record["text"]) <= size
        at = record["end"]
    assert not text[at:].strip()
    bounds = sections(text)
    section_of = [next(i for i, (start, end) in enumerate(bounds)
                       if start <= record["start"] and record["end"] <= end)
                  for record in records]
    for number, record in enumerate(records):
        if record["length"] >= minimum:
            continue
        for other in (number - 1, number + 1):
            if 0 <= other < len(records) and section_of[other] == section_of[number]:
                first, last = sorted((records[number], records[other]),
                                     key=lambda r: r["start"])
                assert count(text[first["start"]:last["end"]]) > size


@pytest.fixture
def server():
    with serving(topics) as made:
        yield made


@pytest.fixture
def doc(tmp_path):
    path = tmp_path / "garden.md"
    path.write_text(DOC)
    return str(path)


def chunkd_llm(server, *args: str):
    return run_chunkd("--strategy", "llm", "--chars", "200", "--min-chars", "20",
                      "--llm-url", server.url, "--llm-model", "toy-llm", *args)


def test_cuts_where_the_model_says(server, doc):
    done = chunkd_llm(server, doc)
    assert done.returncode == 0, done.stderr
    records = ndjson(done.stdout)
    assert_tiled(DOC, records, len, 200, 20)
    texts = [record["text"] for record in records]
    # A topic starts a chunk; the heading goes with the paragraph after it; the code
    # block and the table are never cut inside; the sections are never crossed.
    assert texts[0].startswith("# Garden notes\n\nApples grow")
    assert texts[1].startswith("Hammers drive nails.")
    assert "```python\nnails = 3\n\nhammer(nails)\n```" in texts[1]
    assert "| tool | weight |\n|---|---|\n| hammer | 1 kg |" in "".join(texts)
    rain = [text for text in texts if "Rain sentence" in text]
    assert rain[0].startswith("Rain sentence 0") and len(rain) > 1  # cut at sentences
    assert [record["headings"] for record in records][-2:] == [
        ["Garden notes", "Second part"]] * 2
    assert texts[-1] == "Hammers again, briefly."
    bodies = server.bodies()
    # One call a window, each a question of its own.
    questions = [body["messages"][0]["content"] for body in bodies]
    assert len(set(questions)) == len(questions) == 2  # a window a section
    assert not any("Your last answer" in question for question in questions)
    assert all(body["response_format"]["type"] == "json_schema" for body in bodies)
    assert all(body["temperature"] == 0 for body in bodies)
    # Every piece but a section's first is judged by exactly one window.
    [line] = done.stderr.decode().splitlines()
    assert line.startswith(f"chunkd: --strategy llm: {len(bodies)} LLM calls to "
                           f"{server.url}/v1/chat/completions, ")


#: Hostile answers: each is asked again once, then the window falls back.
HOSTILE = {
    "out of range": '{"boundaries": [99]}',
    "zero": '{"boundaries": [0]}',
    "decreasing": '{"boundaries": [3, 2]}',
    "repeated": '{"boundaries": [2, 2]}',
    "prose around the numbers": "The topic changes at lines 2 and 3.",
    "broken JSON": '{"boundaries": [2,',
    "not numbers": '{"boundaries": ["2", 2.0, true]}',
    "another key": '{"cuts": [2]}',
    "a refusal": "I'm sorry, but I can't help with that.",
    "deeply nested": "[" * 100_000,
}


@pytest.fixture(scope="module")
def unguided(tmp_path_factory):
    """The records of ``DOC`` when the model never sees a new topic: the fallback's."""
    path = tmp_path_factory.mktemp("unguided") / "garden.md"
    path.write_text(DOC)
    with serving(lambda body, prompt: '{"boundaries": []}') as made:
        done = chunkd_llm(made, str(path))
    assert done.returncode == 0, done.stderr
    assert "windows cut by size alone" not in done.stderr.decode()
    return [{key: value for key, value in record.items() if key != "doc"}
            for record in ndjson(done.stdout)]


@pytest.mark.parametrize("answer", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_answer_is_asked_again_then_cut_by_size(server, doc, unguided, answer):
    server.reply = lambda body, prompt: answer
    done = chunkd_llm(server, doc)
    assert done.returncode == 0, done.stderr
    # Every window fell back: the chunks of a model that saw no new topic.
    assert [{key: value for key, value in record.items() if key != "doc"}
            for record in ndjson(done.stdout)] == unguided
    prompts = [body["messages"][0]["content"] for body in server.bodies()]
    again = [prompt for prompt in prompts if "Your last answer could not be used" in prompt]
    assert len(prompts) == 2 * len(again)
    [cost, fallback] = done.stderr.decode().splitlines()
    assert cost.startswith(f"chunkd: --strategy llm: {len(prompts)} LLM calls")
    assert fallback.startswith(f"chunkd: --strategy llm: {len(again)} of {len(again)} "
                               "windows cut by size alone: the model's answer failed twice (")
    with pytest.raises(ValueError):
        parsed(answer, 3)


def test_what_answers_are_taken():
    assert parsed('{"boundaries": []}', 3) == []
    assert parsed('Sure! ```json\n{"boundaries": [2, 3]}\n```', 3) == [2, 3]
    assert parsed('{"boundaries": [1, 3]}', 3) == [1, 3]


def test_asked_again_once_then_cut_by_size(server, doc, tmp_path):
    answers = iter(["broken {", '{"boundaries": [2]}'])  # the first window: fixed on retry
    server.reply = lambda body, prompt: next(answers, "I cannot do that.")
    done = chunkd_llm(server, "--chars", "120", doc)
    assert done.returncode == 0, done.stderr
    records = ndjson(done.stdout)
    assert_tiled(DOC, records, len, 120, 20)
    prompts = [body["messages"][0]["content"] for body in server.bodies()]
    questions = [prompt for prompt in prompts if "Your last answer" not in prompt]
    again = [prompt for prompt in prompts if "Your last answer" in prompt]
    # Each window asked once, and again once, saying why: never more.
    assert len(again) == len(questions) and len(prompts) == 2 * len(questions)
    assert "(not JSON)" in again[0]
    [cost, fallback] = done.stderr.decode().splitlines()
    assert cost.startswith(f"chunkd: --strategy llm: {len(prompts)} LLM calls")
    assert fallback == (f"chunkd: --strategy llm: {len(questions) - 1} of {len(questions)} "
                        "windows cut by size alone: the model's answer failed twice "
                        "(not JSON)")
    # The window the retry fixed: its own line 2 starts a chunk.
    first = lines_of(questions[0])
    assert any(record["text"].replace("\n", "\\n").startswith(first[1][:30])
               for record in records)


def test_a_rerun_with_the_cache_asks_nothing(server, doc, tmp_path):
    cache = str(tmp_path / "cache")
    first = chunkd_llm(server, "--llm-cache", cache, doc)
    asked = len(server.requests)
    assert first.returncode == 0 and asked
    again = chunkd_llm(server, "--llm-cache", cache, doc)
    assert again.returncode == 0, again.stderr
    assert len(server.requests) == asked and again.stdout == first.stdout
    [line] = again.stderr.decode().splitlines()
    assert line.startswith("chunkd: --strategy llm: 0 LLM calls") \
        and line.endswith(f"; {asked} from --llm-cache")
    # Another model is another decision: asked again.
    other = run_chunkd("--strategy", "llm", "--chars", "200", "--min-chars", "20",
                       "--llm-url", server.url, "--llm-model", "other-llm", "--llm-cache",
                       cache, doc)
    assert other.returncode == 0 and len(server.requests) == 2 * asked


def test_windows_asked_at_once_within_the_bound(server, tmp_path):
    text = "".join(f"Paragraph {number} on its own subject, {number} times over.\n\n"
                   for number in range(150))
    (tmp_path / "long.md").write_text(text)
    server.gather = 3
    done = chunkd_llm(server, "--llm-window", "1024", "--llm-concurrency", "3",
                      str(tmp_path / "long.md"))
    assert done.returncode == 0, done.stderr
    assert_tiled(text, ndjson(done.stdout), len, 200, 20)
    assert len(server.requests) >= 4 and server.peak == 3
    # Every paragraph but the first is judged by one window (each shown after its lead).
    owned = [len(lines_of(body["messages"][0]["content"])) for body in server.bodies()]
    leads = [1] + [2] * (len(owned) - 1)
    assert sum(owned) - sum(leads) == 149


def test_a_failed_call_fails_its_document_only(server, doc, tmp_path):
    (tmp_path / "other.md").write_text("One topic here.\n\nAnother topic there.\n")
    server.failing = "Hammers drive nails"
    done = chunkd_llm(server, doc, str(tmp_path / "other.md"))
    assert done.returncode == 1
    assert {record["doc"] for record in ndjson(done.stdout)} == {str(tmp_path / "other.md")}
    [failed, cost] = done.stderr.decode().splitlines()
    assert failed.startswith(f"chunkd: {doc}: ") and "HTTP 500" in failed
    assert cost.startswith("chunkd: --strategy llm: ")


def test_needs_an_llm_and_refuses_overlap(server, doc):
    done = run_chunkd("--strategy", "llm", doc)
    assert done.returncode == 2 and not done.stdout
    assert "--strategy llm needs an LLM: --llm-url URL --llm-model NAME" in done.stderr.decode()
    done = chunkd_llm(server, "--overlap", "10", doc)
    assert done.returncode == 2 and "do not overlap" in done.stderr.decode()
    done = chunkd_llm(server, "--context-on-error", "keep", doc)
    assert done.returncode == 2 and "--context-on-error is for --context" in done.stderr.decode()
    assert not server.requests


# --- whatever the model answers, the chunks tile the document within the sizes -------

WORDS = st.sampled_from(["alpha", "beta", "Gamma.", "delta!", "x", "#", "|", "-", "```",
                         "\n", "\n\n", " ", "## Head\n", "\n## Long. Heading. Here.\n\n",
                         "| a | b |\n|---|---|\n"])
#: Paragraphs of those words (blocks), some long enough to be cut at sentences.
TEXTS = st.lists(st.lists(WORDS, max_size=14).map(" ".join), max_size=30).map("\n\n".join)
ANSWERS = st.one_of(
    st.lists(st.integers(-3, 70), max_size=8).map(lambda ns: json.dumps({"boundaries": ns})),
    st.lists(st.integers(1, 12), max_size=8, unique=True).map(
        lambda ns: json.dumps({"boundaries": sorted(ns)})),
    st.text(max_size=40))


@pytest.fixture(scope="module")
def made_splitter():
    """A splitter whose model answers from a list a test sets (no server is called),
    in windows of 64 tokens (pieces shown cut to 8), so that a document makes many."""
    def make(unit: str, size: int, minimum: int, answers: list[str]) -> LLMSplitter:
        flags = {"strategy": "llm", unit: size, f"min_{unit}": minimum,
                 "llm_url": "http://127.0.0.1:9", "llm_model": "toy", "llm_window": 1024}
        splitter = LLMSplitter(settings_from_flags(flags))
        given = iter(answers)
        lock = threading.Lock()

        def complete(prompt, cache_key, max_tokens, given_up, response_format=None):
            with lock:
                return Completion(next(given, '{"boundaries": []}'), 1, 0, 1)

        splitter.client.complete = complete  # type: ignore[method-assign]
        splitter.budget = lambda: 64  # type: ignore[method-assign]  # many small windows
        return splitter
    return make


@hypothesis_settings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS, answers=st.lists(ANSWERS, max_size=12),
       unit=st.sampled_from(["chars", "tokens"]), size=st.integers(8, 80),
       share=st.integers(0, 4))
def test_any_answers_tile_the_document(made_splitter, text, answers, unit, size, share):
    minimum = size * share // 8
    splitter = made_splitter(unit, size, minimum, answers)
    chunks = splitter.feed(text) + splitter.finish()
    count = len if unit == "chars" else resolve("cl100k_base").count
    assert_tiled(text, [chunk._asdict() for chunk in chunks], count, size, minimum)


@hypothesis_settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=st.sampled_from("ab\\\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029 ")))
def test_a_piece_is_one_line_of_the_question_and_can_be_read_back(piece):
    """Every line break (as ``str.splitlines`` knows them, U+2028 among them) is written
    escaped, so each piece is one line, and nothing but carriage returns is lost."""
    line = shown(piece, 10**6, len)
    assert len(line.splitlines()) <= 1
    assert line.encode().decode("unicode_escape") == piece.replace("\r", "")
