"""``chunkd serve``'s progress for a page that accepts it (``Accept:
application/x-ndjson``): progress lines while the split runs, then its status and
answer, asked for with real HTTP requests of a real ``chunkd serve``; the semantic
strategy's sentences counted as the loopback embedding endpoint, answering slowly,
embeds them; a client that goes away stops its split, and the server keeps no thread
or process of it."""

from __future__ import annotations

import http.client
import os
import re
import signal
import time

import orjson
import pytest

from browser import Serve, request
from command import HANG
from test_embed_url import Endpoint

from chunkd.web.serve import PROGRESS_INTERVAL

#: What the page sends to ask for progress.
STREAMED = {"Accept": "application/x-ndjson"}
#: Each request to the endpoint is answered after this long: longer than the server's
#: least time between two progress lines, so that every batch's count is a line of its own.
SLOW = 0.4
assert SLOW > PROGRESS_INTERVAL


def sentences(count: int, seed: str = "") -> str:
    """``count`` sentences, each different (each its own window, none held twice)."""
    return " ".join(f"Sentence {seed}{number} says that river {number % 7} runs to sea "
                    f"{number % 5}." for number in range(count))


def streamed_split(server: Serve, query: str, body: bytes) -> tuple[list[dict], dict, float]:
    """The progress lines of a streamed split, its last line, and how long it took."""
    connection = http.client.HTTPConnection(server.host, server.port, timeout=HANG)
    began = time.monotonic()
    try:
        connection.request("POST", f"/api/split?{query}", body=body, headers=STREAMED)
        answer = connection.getresponse()
        assert (answer.status, answer.getheader("Content-Type")) == (200, "application/x-ndjson")
        assert answer.getheader("Content-Length") is None
        lines = [orjson.loads(line) for line in answer.read().splitlines()]
    finally:
        connection.close()
    assert all(set(line) == {"progress"} for line in lines[:-1]), lines[:-1]
    return [line["progress"] for line in lines[:-1]], lines[-1], time.monotonic() - began


def post(server: Serve, path: str, body: bytes | None = None,
         headers: dict | None = None) -> tuple[int, dict, bytes]:
    return request(server, "POST" if body is not None else "GET", path, body, headers,
                   host=f"127.0.0.1:{server.port}")


def counts_of(progress: list[dict], of: str) -> list[tuple[int, int]]:
    return [(line["done"], line["total"]) for line in progress if line["of"] == of]


@pytest.fixture
def slow_endpoint(endpoint: Endpoint) -> Endpoint:
    """The loopback embedding endpoint, answering each request after ``SLOW`` s."""
    endpoint.delay = SLOW
    return endpoint


def semantic_server(endpoint: Endpoint) -> Serve:
    """A server whose semantic splits embed 8 sentences a request, one request at a
    time: a batch at least every ``SLOW`` seconds."""
    return Serve("--strategy", "semantic", "--embed-url", endpoint.url, "--embed-model",
                 "hashed", "--embed-batch", "8", "--embed-concurrency", "1",
                 "--tokens", "60")


def test_a_split_tells_the_code_points_read_then_answers_as_without_progress():
    text = "".join(f"Paragraph {number}: a few words, then a few more words.\n\n"
                   for number in range(40_000))
    with Serve() as server:
        progress, last, _ = streamed_split(server, "chars=200", text.encode())
        status, _, plain = post(server, "/api/split?chars=200", text.encode())
    assert status == 200 and last["status"] == 200
    assert last["answer"] == orjson.loads(plain)
    counts = counts_of(progress, "code points")
    assert counts and counts == sorted(counts) and counts[-1] == (len(text), len(text))
    assert {line["of"] for line in progress} == {"code points"}


def test_a_semantic_split_tells_the_sentences_embedded_as_batches_end(slow_endpoint):
    text = sentences(48)
    with semantic_server(slow_endpoint) as server:
        sent = sum(len(body["input"]) for _, _, body in slow_endpoint.requests)
        progress, last, took = streamed_split(server, "", text.encode())
    assert last["status"] == 200, last
    records = [orjson.loads(line) for line in last["answer"]["jsonl"].splitlines()]
    assert len(records) > 1
    embedded = sum(len(body["input"]) for _, _, body in slow_endpoint.requests) - sent
    assert embedded == 48  # a window a sentence, each embedded once
    counts = counts_of(progress, "sentences")
    # 0 first, then each batch of 8 as it ends (SLOW > PROGRESS_INTERVAL: none held
    # back), the last at the total.
    assert counts == [(done, 48) for done in range(0, 49, 8)], counts
    # Throttled: at most a line an interval, besides the first and last of each count.
    assert len(progress) <= took / PROGRESS_INTERVAL + 4


def test_a_refused_split_gives_the_same_status_and_message_streamed():
    text = "word " * 5000
    with Serve("--max-chunks", "10") as server:
        progress, last, _ = streamed_split(server, "chars=20", text.encode())
        status, _, plain = post(server, "/api/split?chars=20", text.encode())
        bad, headers, refused = post(server, "/api/split?chars=0", b"text", STREAMED)
    assert (last["status"], last["answer"]) == (status, orjson.loads(plain)) == (
        422, {"error": "these settings cut the document into more than 10 chunks, the most "
                       "this server shows; choose a larger size"})
    assert all(line["of"] == "code points" for line in progress)
    # A request refused before its split starts gets the plain answer.
    assert (bad, headers["Content-Type"]) == (400, "application/json")
    assert orjson.loads(refused) == {"error": "the size must be at least 1, got 0"}


def threads_and_children(pid: int) -> tuple[int, list[int]]:
    """The threads of the process ``pid`` and its child processes."""
    with open(f"/proc/{pid}/status") as status:
        threads = int(re.search(r"^Threads:\s+(\d+)", status.read(), re.M).group(1))
    children: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listed:
            children += [int(child) for child in listed.read().split()]
    return threads, children


def wait_for(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.05)
    return found


def test_a_client_that_goes_away_stops_its_split(slow_endpoint):
    """A page that replaces its split closes the connection: the server stops the
    split at once (its process ended, the endpoint asked no more) and keeps no thread
    of it, however many come and go."""
    with semantic_server(slow_endpoint) as server:
        pid = server.process.pid
        idle = wait_for(lambda: (found := threads_and_children(pid))[1] == [] and found,
                        30, "the server idle")
        for attempt in range(5):
            before = len(slow_endpoint.requests)
            connection = http.client.HTTPConnection(server.host, server.port, timeout=HANG)
            connection.request("POST", "/api/split", body=sentences(400, f"{attempt}-").encode(),
                               headers=STREAMED)
            answer = connection.getresponse()
            first = orjson.loads(answer.readline())
            assert first["progress"]["of"] in ("code points", "sentences")
            wait_for(lambda: len(slow_endpoint.requests) > before, 30, "a batch asked for")
            answer.close()  # the page went away: 400 sentences would take 20 s more
            connection.close()
            wait_for(lambda: server.stderr().count("its page went away") == attempt + 1, 10,
                     "the split stopped")
        # Every split's process is gone and its thread ended: nothing is left to ask
        # the endpoint more than the requests in flight when each split stopped.
        wait_for(lambda: threads_and_children(pid) == idle, 10,
                 f"back to {idle} threads and no split's process")
        wait_for(lambda: slow_endpoint.in_flight == 0, 10, "the endpoint answered all")
        assert len(slow_endpoint.requests) <= 5 * 2  # the one seen, and one in flight
        status, _, _ = post(server, "/api/config")
        assert status == 200
        code, stderr = server.stop(signal.SIGTERM)
    assert code == 0
    assert len(re.findall(r"stopped a split of .* after [\d.]+ s: its page went away",
                          stderr)) == 5


# --- in process: what the models and their caches count ----------------------------------

def progress_of(model, texts: list[str]) -> list[tuple[int, int]]:
    """What ``embedding_progress`` is told while ``model`` embeds ``texts``, each
    change once."""
    from chunkd.embeddings.models import embedding_progress

    told: list[tuple[int, int]] = []
    with embedding_progress(lambda done, total: told.append((done, total))):
        model.embed(texts)
    return [step for number, step in enumerate(told) if not number or step != told[number - 1]]


def test_a_local_model_counts_each_batch_and_its_caches_what_they_hold(minilm, tmp_path):
    from chunkd.embeddings.selection import embedder

    texts = sentences(100, "local-").split(". ")
    assert len(set(texts)) == 100
    model = embedder({"embed": minilm[0]})
    # The real all-MiniLM-L6-v2 embeds 32 texts a batch.
    assert progress_of(model, texts) == [(0, 100), (32, 100), (64, 100), (96, 100), (100, 100)]
    # Held in memory: counted at once; a repeated text with the one it repeats.
    more = sentences(10, "more-").split(". ")
    assert progress_of(model, texts + more + more[:3]) == [(0, 113), (103, 113), (113, 113)]
    # A cache on disk between the two: one count, its total the texts asked for; those
    # it has stored counted at once.
    from chunkd.embeddings.models import Cached

    stored = embedder({"embed": minilm[0], "embed_cache": str(tmp_path / "cache")})
    fresh = sentences(40, "disk-").split(". ")
    assert progress_of(stored, fresh + texts[:10]) == [(0, 50), (32, 50), (50, 50)]
    newer = sentences(8, "newer-").split(". ")
    assert progress_of(Cached(stored.inner), newer + fresh) == [(0, 48), (40, 48), (48, 48)]
