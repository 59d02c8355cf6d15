"""``--strategy propositions`` through the installed ``chunkd`` against a loopback chat
endpoint (``chat_server``) scripted with hostile answers: every span a proposition
points at is a real slice of the document that supports it, failures are said and
never lose text silently, a rerun asks nothing; and, in process, whatever the model
answers, every span lies within the document and within its chunk's start and end."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from types import SimpleNamespace

import orjson
import pytest
from chat_server import serving
from command import ndjson, run_chunkd
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st
from property_examples import examples

from chunkd.llm.client import Completion
from chunkd.model.chunk import NULL
from chunkd.model.errors import SettingsError
from chunkd.settings import Settings
from chunkd.strategies.propositions import (AGAIN, SUMMARY_MOST, SUPPORT, TITLE_MOST,
                                            PropositionSplitter, Session, align, Passage)
from chunkd.strategies.recursive import Recursive

KEY = "sk-props-Very-Secret-77aa"
#: Each passage (a paragraph: --chars 130 keeps them apart; the heading goes with the first) by the word that marks it.
PARAGRAPHS = {
    "Curie": "Marie Curie was a physicist and chemist. She was born in Warsaw in 1867. "
             "She won two Nobel Prizes.",
    "Danube": "The Danube flows through ten countries. It rises in the Black Forest and "
              "ends at the Black Sea.",
    "Darjeeling": "Tea is grown on steep hills in Darjeeling. The leaves are picked by "
                  "hand in spring.",
    "vault": "The vault code is kept in the manager's office. Only two people know it.",
    "Bees": "Bees dance to tell others where flowers are. The angle of the dance points "
            "to the food.",
    "Glaciers": "Glaciers carve valleys over thousands of years. Their meltwater feeds "
                "rivers in summer. Moraines mark where they stopped.",
}
DOCUMENT = "# Notes\n\n" + "\n\n".join(PARAGRAPHS.values()) + "\n"
OTHER = "Owls hunt at night. Their feathers make no sound in flight.\n"
INVENTED = "The moon is made of green cheese."
REPHRASED = "Marie Curie was born in Warsaw in 1867."


def answer(*groups: tuple[str, list[str]]) -> str:
    return json.dumps({"chunks": [{"title": title, "summary": f"About {title}.",
                                   "propositions": propositions}
                                  for title, propositions in groups]})


def hostile(body: dict, prompt: str) -> str:
    """The model's answer: good, rephrased and invented propositions; broken JSON once;
    an empty list and a refusal (twice); prose around the JSON; a passage half left out."""
    again = prompt.endswith(AGAIN)
    if "Curie" in prompt:
        return answer(("Curie", ["Marie Curie was a physicist and chemist.", REPHRASED,
                                 INVENTED]), ("Prizes", ["She won two Nobel Prizes"]))
    if "Danube" in prompt:
        return answer(("Danube", ["The Danube flows through ten countries."])) if again \
            else '{"chunks": [{"title": "Danube", "propositions": ["The Danube'
    if "Darjeeling" in prompt:
        return '{"chunks": []}'
    if "vault" in prompt:
        return "I'm sorry, but I can't help with that."
    if "Bees" in prompt:
        return ("Sure! Here is the JSON:\n```json\n"
                + answer(("Bees", ["Bees dance to tell others where flowers are."]))
                + "\n```\nI hope this helps.")
    if "Glaciers" in prompt:
        return answer(("Glaciers", ["Glaciers carve valleys over thousands of years."]))
    return answer(("Owls", ["Owls hunt at night."]))


def words(text: str) -> list[str]:
    return [word.casefold() for word in re.findall(r"\w+", text)]


@pytest.fixture
def server():
    with serving(hostile) as made:
        yield made


@pytest.fixture
def documents(tmp_path):
    (tmp_path / "notes.md").write_text(DOCUMENT)
    (tmp_path / "owls.txt").write_text(OTHER)
    return [str(tmp_path / "notes.md"), str(tmp_path / "owls.txt")]


def propositions(server, *args: str):
    return run_chunkd("--strategy", "propositions", "--chars", "130", "--llm-url",
                      server.url, "--llm-model", "toy-llm", *args)


def test_hostile_answers_give_spans_that_are_slices_and_failures_said(
        server, documents, monkeypatch):
    monkeypatch.setenv("CHUNKD_LLM_API_KEY", KEY)
    server.gather = 2
    done = propositions(server, "--llm-concurrency", "2", documents[0])
    assert done.returncode == 0, done.stderr
    records = ndjson(done.stdout)
    found = {}
    for record in records:
        assert set(record) >= {"title", "summary", "propositions"}
        assert record["text"] == "\n".join(item["text"] for item in record["propositions"])
        spans = [(item["start"], item["end"]) for item in record["propositions"]
                 if item["start"] is not None]
        if spans:  # the chunk's start and end: its sources' extent
            assert (record["start"], record["end"]) == (min(spans)[0],
                                                        max(end for _, end in spans))
        for item in record["propositions"]:
            found[item["text"]] = item
            if item["match"] is None:
                assert item["start"] is item["end"] is None and "score" not in item
                continue
            source = DOCUMENT[item["start"]:item["end"]]
            assert source == source.strip() and source
            if item["match"] == "exact":  # the same words, in order
                assert words(source) == words(item["text"]) and "score" not in item
            else:  # the words overlap as the score says
                assert item["match"] == "approximate"
                ours, theirs = Counter(words(item["text"])), Counter(words(source))
                dice = 2 * sum((ours & theirs).values()) / (sum(ours.values())
                                                            + sum(theirs.values()))
                assert item["score"] == round(dice, 3) >= SUPPORT
    assert found[REPHRASED]["match"] == "approximate"
    assert DOCUMENT[found[REPHRASED]["start"]:found[REPHRASED]["end"]] == (
        "She was born in Warsaw in 1867.")
    assert found[INVENTED]["match"] is None
    assert found["She won two Nobel Prizes"]["match"] == "exact"
    assert found["Bees dance to tell others where flowers are."]["match"] == "exact"
    assert found["The Danube flows through ten countries."]["match"] == "exact"
    # The empty list and the refusal, twice each: their passages kept as they are.
    kept = [record for record in records if record["title"] is None]
    assert [record["text"] for record in kept] == [PARAGRAPHS["Darjeeling"],
                                                   PARAGRAPHS["vault"]]
    for record in kept:
        assert DOCUMENT[record["start"]:record["end"]] == record["text"]
        assert record["summary"] is None and record["propositions"] == [
            {"text": record["text"], "start": record["start"], "end": record["end"],
             "match": "exact"}]
    # Asked: each of the 6 passages once, and the 3 that failed once more.
    assert len(server.requests) == 9
    assert sum(body["messages"][0]["content"].endswith(AGAIN)
               for body in server.bodies()) == 3
    assert server.peak == 2
    assert all(body["response_format"]["type"] == "json_schema"
               and body["response_format"]["json_schema"]["schema"]["required"] == ["chunks"]
               for body in server.bodies())
    # Said: the passages kept, then coverage (counted here from the records), then cost.
    covered = bytearray(len(DOCUMENT))
    for record in records:
        for item in record["propositions"]:
            if item["start"] is not None:
                covered[item["start"]:item["end"]] = b"\1" * (item["end"] - item["start"])
    visible = [not character.isspace() for character in DOCUMENT]
    missed = sum(1 for shown, hit in zip(visible, covered) if shown and not hit)
    assert DOCUMENT.index("Their meltwater") in [index for index, hit in enumerate(covered)
                                                 if not hit]
    kept_line, coverage, cost = done.stderr.decode().splitlines()
    name = documents[0]
    assert kept_line == (f"chunkd: {name}: 2 of 6 passages kept as their own text: the "
                         "LLM's answer was not the JSON asked for, held no proposition, or "
                         "was too long, twice")
    assert coverage == (f"chunkd: {name}: --strategy propositions: "
                        f"{100 * missed / sum(visible):.1f} % of the document's characters "
                        "(white space aside) covered by no proposition; 1 of "
                        f"{sum(len(record['propositions']) for record in records)} "
                        "propositions supported by no span of it")
    assert cost.startswith(f"chunkd: --strategy propositions: 9 LLM calls to {server.url}"
                           "/v1/chat/completions, ")
    assert KEY not in done.stderr.decode() + done.stdout.decode()


def test_a_rerun_asks_nothing(server, documents, tmp_path):
    cache = str(tmp_path / "cache")
    first = propositions(server, "--llm-cache", cache, *documents)
    asked = len(server.requests)
    again = propositions(server, "--llm-cache", cache, *documents)
    assert first.returncode == again.returncode == 0, again.stderr
    assert len(server.requests) == asked == 10  # 7 passages, 3 asked twice
    assert again.stdout == first.stdout
    assert again.stderr.decode().splitlines()[:-1] == first.stderr.decode().splitlines()[:-1]
    assert again.stderr.decode().splitlines()[-1].endswith("; 10 from --llm-cache")


def test_a_failed_call_fails_its_document_only(server, documents):
    server.failing = "Glaciers"
    done = propositions(server, *documents)
    assert done.returncode == 1
    assert {record["doc"] for record in ndjson(done.stdout)} == {documents[1]}
    lines = done.stderr.decode().splitlines()
    assert lines[0].startswith(f"chunkd: {documents[0]}: --strategy propositions: a "
                               "passage's request failed: ") and "HTTP 500" in lines[0]
    assert lines[1].startswith(f"chunkd: {documents[1]}: --strategy propositions: ")
    assert lines[1].endswith("; 0 of 1 propositions supported by no span of it")
    assert lines[2].startswith("chunkd: --strategy propositions: ") and len(lines) == 3


@pytest.mark.parametrize("args, said", [
    (("--overlap", "10"), "the propositions strategy's passages do not overlap"),
    (("--parent-chars", "1000"), "the propositions strategy has no"),
    (("--llm-window", "4096"), "--llm-window is for --context"),
])
def test_options_that_make_no_sense_are_refused(args, said):
    done = run_chunkd("--strategy", "propositions", "--llm-url", "http://127.0.0.1:9",
                      "--llm-model", "m", *args, input=b"text")
    assert done.returncode == 2
    [line] = done.stderr.decode().splitlines()
    assert said in line


def test_framework_nodes_refuse_it():
    from chunkd.integration import WholeDocumentChunker

    with pytest.raises(SettingsError, match="no slice of the document"):
        WholeDocumentChunker(strategy="propositions", llm_url="http://127.0.0.1:9",
                             llm_model="m")


class Scripted:
    """A client that answers from a list, in turn."""

    name = "scripted@test"
    endpoint = SimpleNamespace(shown="http://scripted.test")  # as messages show it

    def __init__(self, answers: list[str]) -> None:
        self.answers, self.calls, self.lock = answers, 0, threading.Lock()

    def complete(self, prompt, cache_key, max_tokens, given_up, response_format=None):
        with self.lock:
            text = self.answers[self.calls % len(self.answers)]
            self.calls += 1
        return Completion(text, None, None, None)


SETTINGS = Settings.from_keywords(60, 0, strategy="propositions",
                                  llm_url="http://127.0.0.1:9", llm_model="m")
WORDS = st.sampled_from("the cat sat on a mat . , it was red and blue \n\n ! ?".split(" "))


@st.composite
def answers(draw, document: str) -> str:
    """An answer: a piece of the document, rewritten words, or anything at all."""
    def proposition() -> str:
        start = draw(st.integers(0, len(document)))
        end = draw(st.integers(start, len(document)))
        return draw(st.one_of(st.just(document[start:end]), st.text(max_size=30),
                              st.lists(WORDS, max_size=8).map(" ".join)))

    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.text(min_size=1, max_size=40))
    groups = [{"title": draw(st.text(max_size=5)), "summary": "",
               "propositions": [proposition() for _ in range(draw(st.integers(0, 4)))]}
              for _ in range(draw(st.integers(0, 3)))]
    return json.dumps({"chunks": groups})


@hypothesis_settings(max_examples=examples(150), deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_answer_gives_spans_within_the_document_and_their_chunk(data):
    document = data.draw(st.lists(WORDS, min_size=1, max_size=60).map(" ".join))
    replies = data.draw(st.lists(answers(document), min_size=1, max_size=4))
    splitter = PropositionSplitter(Recursive.splitter(SETTINGS),
                                   Session(Scripted(replies), 2, None), SETTINGS.measure)
    splitter.feed(document)
    for chunk in splitter.finish():
        assert 0 <= chunk.start <= chunk.end <= len(document)
        assert chunk.propositions
        for item in chunk.propositions:
            if item["start"] is None:
                assert item["match"] is None
                continue
            assert chunk.start <= item["start"] < item["end"] <= chunk.end
            assert item["match"] in ("exact", "approximate")
            if item["match"] == "exact":
                assert words(document[item["start"]:item["end"]]) == words(item["text"])


def chunked_by(replies: list[str], document: str) -> tuple[list, list[str], int]:
    """The chunks of ``document`` when the model answers ``replies`` in turn, the lines
    said, and the calls made."""
    client = Scripted(replies)
    session = Session(client, 1, None)
    splitter = PropositionSplitter(Recursive.splitter(SETTINGS), session, SETTINGS.measure)
    splitter.feed(document)
    return splitter.finish(), list(session.notes), client.calls


def test_entries_that_are_no_text_are_left_out_and_counted():
    document = "Owls hunt at night."
    reply = json.dumps({"chunks": [{"title": "Owls", "summary": "",
                                    "propositions": ["Owls hunt at night.", 7, None, " ",
                                                     {"text": "x"}]}]})
    chunks, notes, calls = chunked_by([reply], document)
    assert [chunk.text for chunk in chunks] == ["Owls hunt at night."] and calls == 1
    assert notes[0] == ("4 entries of the LLM's lists of propositions left out: not text "
                        "(a number, an object, null) or blank")


@pytest.mark.parametrize("group", [
    {"title": "T" * (TITLE_MOST + 1), "summary": "", "propositions": ["Owls hunt."]},
    {"title": "", "summary": "S" * (SUMMARY_MOST + 1), "propositions": ["Owls hunt."]},
    {"title": "", "summary": "", "propositions": ["Owls hunt at night. " * 400]},
])
def test_an_answer_far_longer_than_asked_is_asked_again_then_the_passage_kept(group):
    """A server that ignores the answer's token bound cannot fill records with a MiB of
    title, summary or propositions: such an answer is asked again, then the passage is
    kept as its own text, and both are said."""
    document = "Owls hunt at night."
    chunks, notes, calls = chunked_by([json.dumps({"chunks": [group]})], document)
    assert calls == 2
    assert [(chunk.text, chunk.title) for chunk in chunks] == [(document, NULL)]
    assert notes[0].startswith("1 of 1 passages kept as their own text")


def test_a_run_says_what_it_asked_not_what_an_earlier_one_did():
    """In one process (a Python caller, a test), a front end's run says the cost of its
    own questions only: a session or the llm strategy's tally that asked in an earlier
    run says nothing (an eval once said a tally another test had left)."""
    from chunkd.llm.ledger import run_lines, start_run

    earlier = chunked_by([json.dumps({"chunks": [{"title": "", "summary": "",
                                                  "propositions": ["Owls hunt."]}]})],
                         "Owls hunt at night.")
    assert earlier[2] == 1
    from chunkd.strategies.llm import TALLY

    TALLY.windows += 1  # as an earlier run of --strategy llm in this process left it
    assert TALLY.lines()
    start_run()
    assert run_lines() == []
    session = Session(Scripted(["{}"]), 1, None)
    [line] = run_lines()
    assert line == session.lines()[0] and " 0 LLM calls " in line


def test_align_prefers_the_words_where_they_are():
    passage = Passage(10, 40, "It rains. The rain, heavy, falls")
    assert align("the RAIN heavy", passage) == {
        "text": "the RAIN heavy", "start": 20, "end": 35, "match": "exact"}
    assert align("...", passage)["match"] is None


@pytest.mark.slow
def test_watch_chunks_with_it_as_the_filter_does(server, inbox, watch):
    from watching import filter_chunks, results

    llm = ("--strategy", "propositions", "--chars", "130", "--llm-url", server.url,
           "--llm-model", "toy-llm")
    (inbox / "notes.md").write_text(DOCUMENT)
    watcher = watch(inbox, *llm)
    watcher.wait_for(lambda: "notes.md" in results(inbox), what="the result")
    assert watcher.stop() == 0
    [processed] = watcher.lines("processed notes.md: ")
    said = run_chunkd(*llm, str(inbox / "notes.md")).stderr.decode().splitlines()[:2]
    assert processed.endswith("".join(f"; {line.split(': ', 2)[2]}" for line in said))
    chunks = results(inbox)["notes.md"]["chunks"]
    assert chunks == filter_chunks(inbox / "notes.md", *llm)
    assert [item["start"] for chunk in chunks for item in chunk["propositions"]
            if item["match"] == "approximate"] == [DOCUMENT.index("She was born")]


@pytest.mark.slow
def test_sync_keeps_the_propositions_spans_in_lancedb_rows(server, tmp_path, endpoint):
    from store_servers import lance_rows, sync

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text(DOCUMENT)
    llm = ("--strategy", "propositions", "--chars", "130", "--llm-url", server.url,
           "--llm-model", "toy-llm")
    url = str(tmp_path / "lance")
    done = sync(folder, url, endpoint, *llm)
    assert done.returncode == 0, done.stderr
    filtered = run_chunkd("--ids", *llm, "notes.md", cwd=folder)
    records = ndjson(filtered.stdout)
    # The filter's lines of the document, then its cost after the summary.
    said, lines = filtered.stderr.decode().splitlines(), done.stderr.decode().splitlines()
    assert lines[:2] == said[:2]
    calls = said[2].removeprefix("chunkd: ").split(" tokens")[0]  # up to its prompt tokens
    assert lines[-1].startswith(f"chunkd sync: {calls} tokens")
    rows = lance_rows(url, "chunkd")
    assert {chunk_id: (text, meta["title"], meta["summary"], [
        {key: value for key, value in item.items() if value is not None or key != "score"}
        for item in meta["propositions"]]) for chunk_id, (text, _, meta) in rows.items()} == {
        record["chunk_id"]: (record["text"], record["title"], record["summary"],
                             record["propositions"]) for record in records}
    checked = sync(folder, url, endpoint, *llm, "--check")
    assert (checked.returncode, checked.stdout) == (0, b""), checked.stderr


def test_a_lone_surrogate_in_an_answer_is_written_as_u_fffd(documents, tmp_path):
    """JSON may escape half a UTF-16 pair ("\\ud800"), which no UTF-8 record can hold: it
    is written as U+FFFD, and every document is chunked (it once ended the run)."""
    lone = '{"chunks": [{"title": "T\\ud800", "summary": "S", "propositions": ' \
           '["Glaciers \\udfff carve valleys."]}]}'
    with serving(lambda body, prompt: lone) as made:
        done = propositions(made, "--llm-cache", str(tmp_path / "cache"), *documents)
        again = propositions(made, "--llm-cache", str(tmp_path / "cache"), *documents)
    for run in (done, again):  # the second from the cache
        assert run.returncode == 0, run.stderr
        records = ndjson(run.stdout)
        assert {record["doc"] for record in records} == set(documents)
        assert all(record["title"] == "T\ufffd" for record in records)
        assert all(record["text"] == "Glaciers \ufffd carve valleys." for record in records)
