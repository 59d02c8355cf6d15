"""An OpenAI-compatible embeddings endpoint (``--embed-url``): a real HTTP server on
loopback in the test, serving vectors made from a hash of each text (or the real
all-MiniLM-L6-v2), with injected faults (429 with ``Retry-After``, 500, a slow answer,
bad JSON, wrong dimensions, a closed port, a text refused as too long), counting the
calls in flight and the tokens of each call (with MiniLM's own tokenizer), in process
and through the installed ``chunkd``."""

from __future__ import annotations

import hashlib
import http
import http.server
import json
import os
import pathlib
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable

import numpy
import orjson
import pytest
from browser import Serve, request
from command import HANG, chunkd_command, ndjson, run_chunkd
from embedding import model_folder, oracle_model
from span_metrics import plain_scores
from tokenizer_files import minilm_folder
from watching import results

import chunkd
from chunkd.embeddings.models import (ENDPOINT_BATCH, EmbedError, FunctionEmbedder, EndpointLimits,
                               OpenAIEmbedder, batches, endpoint_url)

EVAL = pathlib.Path(__file__).resolve().parent.parent.parent.parent / "shared" / "eval"
KEY = "sk-test-Very-Secret-9f3a"
DIMENSION = 8
TEXT = ("Rivers carry water to the sea. The sea is salty and deep. Fish swim in it. "
        "Mountains rise above the plains. Snow covers their peaks in winter. Climbers "
        "need ropes and boots. Bread is baked from flour. Yeast makes the dough rise. "
        "An oven bakes it brown. Rivers again meet the sea at the delta.")


def hashed(texts: list[str]) -> list[list[float]]:
    """The test's model: a text's vector from the SHA-256 of its UTF-8 bytes."""
    rows = [numpy.frombuffer(hashlib.sha256(text.encode()).digest()[:DIMENSION], numpy.uint8)
            for text in texts]
    return (numpy.array(rows, dtype=numpy.float32) / 255 - 0.5).tolist()


class Endpoint(http.server.ThreadingHTTPServer):
    """``/v1/embeddings`` on loopback. ``faults`` is what the next requests get, in
    order ("429", "500", "slow", "bad json", "dimensions", "count", "short"; then
    answers); ``poison``: texts containing it get bad JSON, always. Each request is kept
    with its arrival time and headers. ``in_flight`` and ``peak`` count the requests
    being answered; with ``gather`` set, a request is held until that many have been in
    flight at once (or ``GATHER_WAIT`` has passed), then for ``HOLD`` more (or
    ``delay``), so that a client that sends them concurrently is seen to. ``info``: what ``GET /info``
    answers (Hugging Face TEI's route), else 404; ``infos`` counts those calls;
    ``info_stalls``: they wait for ``release`` first."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.faults: list[str] = []
        self.poison: str | None = None
        self.down = False  # every request gets 503, Retry-After: 0
        self.requests: list[tuple[float, dict[str, str], dict]] = []
        self.release = threading.Event()  # ends the slow answers
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.counting = threading.Condition()
        self.in_flight = self.peak = 0
        self.gather: int | None = None
        self.delay = 0.0
        self.refuse_over = 0  # a text longer than this gets 413
        self.model: Callable[[list[str]], list[list[float]]] = hashed
        self.info: dict | None = None
        self.infos = 0
        self.info_stalls = False  # GET is answered only once ``release`` is set

    def enter(self) -> None:
        with self.counting:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.counting.notify_all()
            if self.gather is not None:
                self.counting.wait_for(lambda: self.peak >= self.gather, GATHER_WAIT)
        if self.gather is not None or self.delay:
            time.sleep(self.delay or HOLD)

    def leave(self) -> None:
        with self.counting:
            self.in_flight -= 1


#: How long a gathered request waits for the others, and is held after.
GATHER_WAIT, HOLD = 5.0, 0.05


class Handler(http.server.BaseHTTPRequestHandler):
    server: Endpoint

    def do_GET(self) -> None:
        self.server.infos += 1
        if self.server.info_stalls:
            self.server.release.wait(GATHER_WAIT)
        if self.server.down:
            self.send_error(503)
            return
        if self.path != "/info" or self.server.info is None:
            self.send_error(404)
            return
        data = json.dumps(self.server.info).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.answering = True
        self.server.enter()
        try:
            self.answer()
        finally:
            self.left()

    def send_response(self, code: int, message: str | None = None) -> None:
        # A request stops counting as in flight before its answer goes out: the client
        # may send its next request as soon as it has the answer, and counting this one
        # until the handler returns would see one more in flight than the client has.
        self.left()
        super().send_response(code, message)

    def left(self) -> None:
        if getattr(self, "answering", False):
            self.answering = False
            self.server.leave()

    def answer(self) -> None:
        arrived = time.monotonic()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((arrived, dict(self.headers), body))
        if self.path.partition("?")[0] != "/v1/embeddings":
            self.send_error(404)
            return
        fault = self.server.faults.pop(0) if self.server.faults else None
        if self.server.down:
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        texts = body["input"]
        if self.server.refuse_over and any(len(text) > self.server.refuse_over
                                           for text in texts):
            self.send_error(413, "Input too long")
            return
        if fault in ("429", "500"):
            self.send_response(int(fault))
            if fault == "429":
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "slow":
            self.server.release.wait(10)
        vectors = self.server.model(texts)
        if fault == "dimensions":
            vectors[-1] = vectors[-1][:-1]
        if fault == "count":
            vectors = vectors[:-1]
        if fault == "short":
            vectors = [vector[:-1] for vector in vectors]
        answer = {"object": "list", "model": body["model"],
                  "data": [{"object": "embedding", "index": index, "embedding": vector}
                           for index, vector in reversed(list(enumerate(vectors)))]}
        poisoned = self.server.poison and any(self.server.poison in text for text in texts)
        data = b"{not json" if fault == "bad json" or poisoned else json.dumps(answer).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (a slow answer)
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server():
    endpoint = Endpoint()
    thread = threading.Thread(target=endpoint.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield endpoint
    endpoint.release.set()
    endpoint.shutdown()
    endpoint.server_close()


def quick(url: str, timeout: float = 5, **limits) -> OpenAIEmbedder:
    """An endpoint client that waits little between tries (unless told by the server),
    within ``limits`` (``Limits``' fields; the options' defaults otherwise)."""
    return OpenAIEmbedder(url, "toy-model", timeout=timeout, first_wait=0.01,
                          limits=EndpointLimits(**{"concurrency": 4, **limits}))


def sent(server: Endpoint) -> list[list[str]]:
    """The texts of each request, in the order of the texts (requests in flight at once
    arrive in any order)."""
    return sorted((body["input"] for _, _, body in server.requests),
                  key=lambda texts: int(texts[0].split()[-1]))


@pytest.mark.parametrize("given, called", [
    ("http://h:1", "http://h:1/v1/embeddings"),
    ("http://h:1/", "http://h:1/v1/embeddings"),
    ("http://h:1/v1", "http://h:1/v1/embeddings"),
    ("http://h:1/v1/", "http://h:1/v1/embeddings"),
    ("https://h/v1/embeddings", "https://h/v1/embeddings"),
    ("http://h/openai", "http://h/openai/v1/embeddings"),
    ("http://h/x/v1?api-version=2", "http://h/x/v1/embeddings?api-version=2"),
])
def test_the_url_rule(given, called):
    assert endpoint_url(given) == called


def test_vectors_in_index_order_in_batches_of_64_with_the_key(server, monkeypatch):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    texts = [f"text number {number}" for number in range(150)]
    vectors = quick(server.url + "/v1").embed(texts)
    assert vectors.dtype == numpy.float32
    assert vectors.tolist() == hashed(texts)
    assert sent(server) == [texts[:64], texts[64:128], texts[128:]]
    assert server.infos == 1  # asked once for the server's limits; 404: the defaults
    assert {body["model"] for _, _, body in server.requests} == {"toy-model"}
    assert {headers["Authorization"] for _, headers, _ in server.requests} == {f"Bearer {KEY}"}


def test_no_key_no_authorization(server, monkeypatch):
    monkeypatch.delenv("CHUNKD_EMBED_API_KEY", raising=False)
    quick(server.url).embed(["a"])
    [(_, headers, _)] = server.requests
    assert "Authorization" not in headers


@pytest.mark.slow
def test_429_waits_as_retry_after_says(server):
    server.faults = ["429"]
    assert quick(server.url).embed(["a", "b"]).tolist() == hashed(["a", "b"])
    [(first, _, _), (second, _, _)] = server.requests
    assert second - first >= 1.0  # the client's own wait would be 0.01 s


def test_500_is_tried_again(server):
    server.faults = ["500", "500"]
    assert quick(server.url).embed(["a"]).tolist() == hashed(["a"])
    assert len(server.requests) == 3


def test_500_five_times_is_one_line_naming_the_url_and_status(server):
    server.faults = ["500"] * 5 + []  # a sixth request would succeed: there is none
    with pytest.raises(EmbedError) as error:
        quick(server.url).embed(["a"])
    assert str(error.value) == (f"{server.url}/v1/embeddings: no answer after 5 tries "
                                "(last: HTTP 500)")
    assert len(server.requests) == 5


@pytest.mark.slow
def test_a_slow_answer_times_out(server):
    server.faults = ["slow"] * 5
    with pytest.raises(EmbedError, match=r"no answer after 5 tries \(last: timed out\)$"):
        quick(server.url, timeout=0.2).embed(["a"])
    assert len(server.requests) == 5


@pytest.mark.parametrize("fault, message", [
    ("bad json", "the answer is not embeddings JSON"),
    ("dimensions", "returned no vectors of one length"),
    ("count", "1 vectors for 2 texts"),
])
def test_a_malformed_answer_fails_at_once(server, fault, message):
    server.faults = [fault]
    with pytest.raises(EmbedError, match=message):
        quick(server.url).embed(["a", "b"])
    assert len(server.requests) == 1


def test_vectors_that_change_length_between_calls(server):
    client = quick(server.url)
    client.embed(["a"])
    server.faults = ["dimensions"]
    with pytest.raises(EmbedError, match="vectors of 7 numbers after vectors of 8"):
        client.embed(["b"])


def test_a_client_error_is_not_tried_again(server):
    with pytest.raises(EmbedError, match=r"/elsewhere/v1/embeddings: HTTP 404 Not Found$"):
        quick(server.url + "/elsewhere").embed(["a"])
    assert len(server.requests) == 1


def closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_a_closed_port(monkeypatch):
    url = closed_port()
    with pytest.raises(EmbedError) as error:
        quick(url).embed(["a"])
    message = str(error.value)
    assert message.startswith(f"{url}/v1/embeddings: no answer after 5 tries (last: ")
    assert "refused" in message and "\n" not in message


def test_credentials_and_query_are_in_no_identity_or_message(server, monkeypatch):
    monkeypatch.delenv("CHUNKD_EMBED_API_KEY", raising=False)
    url = server.url.replace("http://", "http://someone:pass-word@") + "/v1?token=qsecret"
    client = quick(url)
    assert client.name == f"toy-model@{server.url}/v1/embeddings"
    client.embed(["a"])
    [(_, headers, _)] = server.requests
    assert headers["Authorization"] == "Basic c29tZW9uZTpwYXNzLXdvcmQ="  # someone:pass-word
    server.faults = ["bad json"]
    with pytest.raises(EmbedError) as error:
        client.embed(["b"])
    assert "pass-word" not in str(error.value) and "qsecret" not in str(error.value)


def test_endpoints_that_differ_by_their_query_are_two_identities(server):
    """The identity is the whole URL, its query too (another deployment may be another
    model), never its credentials: the user information and the query's secrets."""
    small, large = (quick(server.url.replace("http://", "http://someone:pass-word@")
                          + f"/v1/embeddings?deployment={size}&api-key=qsecret&sig=s1g")
                    for size in ("small", "large"))
    assert small.name == (f"toy-model@{server.url}/v1/embeddings?deployment=small")
    assert large.name == (f"toy-model@{server.url}/v1/embeddings?deployment=large")
    assert quick(server.url + "/v1?deployment=small&api-key=other").name == small.name
    assert small.shown == f"{server.url}/v1/embeddings"  # messages: no query at all
    # Results record the URL given, as a whole but for its credentials.
    from chunkd.settings import settings_from_flags

    recorded = settings_from_flags({
        "strategy": "semantic", "embed_model": "toy-model",
        "embed_url": server.url.replace("http://", "http://someone:pass-word@")
        + "/v1?deployment=small&api-key=qsecret"}).as_dict()
    assert recorded["embed_url"] == f"{server.url}/v1?deployment=small"


@pytest.mark.slow
def test_the_cache_and_a_sync_tell_endpoints_apart_by_their_query(server, tmp_path):
    """Through the installed chunkd: vectors cached for one deployment are not served
    for another, and a store synced with one is stale for another (--check, then a sync
    embeds again)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(TEXT, encoding="utf-8")
    cache, store = tmp_path / "cache", str(tmp_path / "lance")

    def vectors(size: str) -> subprocess.CompletedProcess:
        return run_chunkd("--chars", "120", "--vectors", "--embed-url",
                          f"{server.url}/v1?deployment={size}", "--embed-model", "toy-model",
                          "--embed-cache", str(cache), str(folder / "a.md"))

    def sync(size: str, *options: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [chunkd_command(), "sync", str(folder), "--sink", store, "--chars", "120",
             "--embed-url", f"{server.url}/v1?deployment={size}", "--embed-model",
             "toy-model", *options], capture_output=True, timeout=HANG)

    assert vectors("small").returncode == 0
    asked = len(server.requests)
    assert asked and vectors("small").returncode == 0
    assert len(server.requests) == asked  # the same endpoint: from the cache
    assert vectors("large").returncode == 0
    assert len(server.requests) > asked  # another: asked again
    assert {body["input"][0] for _, _, body in server.requests[asked:]}

    done = sync("small")
    assert done.returncode == 0, done.stderr
    assert sync("small", "--check").returncode == 0
    checked = sync("large", "--check")
    assert checked.returncode == 1 and b"stale a.md" in checked.stdout, checked
    asked = len(server.requests)
    done = sync("large")
    assert done.returncode == 0 and b"1 applied" in done.stderr, done.stderr
    assert len(server.requests) > asked


# --- batches by count and by tokens, requests in flight ---------------------------------

def numbered(count: int, words: int = 3) -> list[str]:
    """``count`` texts of about ``words`` words, each ending in its number."""
    return [" ".join(["sea"] * (words + number % 5)) + f" {number}" for number in range(count)]


@pytest.mark.parametrize("counts, batch, tokens, spans", [
    ([], 4, 100, []),
    ([5, 5, 5, 5, 5], 2, 100, [(0, 2), (2, 4), (4, 5)]),
    ([40, 40, 40], 8, 100, [(0, 2), (2, 3)]),
    ([40, 60, 1], 8, 100, [(0, 2), (2, 3)]),  # exactly the bound fits
    ([50, 200, 10], 8, 100, [(0, 1), (1, 2), (2, 3)]),  # over the bound: alone
    ([200], 8, 100, [(0, 1)]),
])
def test_the_batches(counts, batch, tokens, spans):
    assert list(batches(counts, batch, tokens)) == spans


@pytest.mark.parametrize("concurrency", [2, 3])
def test_at_most_n_requests_in_flight_and_more_than_one(server, concurrency):
    # Each request is held until `concurrency` are in flight at once: a client that
    # sent one at a time would leave the peak at 1 (after GATHER_WAIT), never above.
    server.gather = concurrency
    texts = numbered(40)
    vectors = quick(server.url, concurrency=concurrency, batch=4).embed(texts)
    assert vectors.tolist() == hashed(texts)
    assert server.peak == concurrency
    assert sent(server) == [texts[start:start + 4] for start in range(0, 40, 4)]


def test_concurrency_1_is_one_request_at_a_time(server):
    server.delay = HOLD  # requests sent at once would be in flight together
    texts = numbered(12)
    assert quick(server.url, concurrency=1, batch=3).embed(texts).tolist() == hashed(texts)
    assert server.peak == 1
    assert [body["input"] for _, _, body in server.requests] == [
        texts[start:start + 3] for start in range(0, 12, 3)]  # in order, one after another


def test_the_vectors_are_the_same_whatever_the_concurrency(server):
    texts = numbered(50) + ["sea 3"] * 3  # a repeat: the cache by content keeps one
    one = chunkd.embeddings.models.Cached(quick(server.url, concurrency=1, batch=7)).embed(texts)
    asked = len(server.requests)
    four = chunkd.embeddings.models.Cached(quick(server.url, concurrency=4, batch=7)).embed(texts)
    assert one.tolist() == four.tolist() == hashed(texts)
    assert len(server.requests) == 2 * asked
    assert sum(len(body["input"]) for _, _, body in server.requests[:asked]) == 51


def minilm_tokens() -> Callable[[str], int]:
    """The test server's count: MiniLM's tokenizer.json, read by Hugging Face
    ``tokenizers`` itself, without special tokens (as chunkd counts a chunk), padding
    or truncation (the file pads to 128)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(minilm_folder() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def test_batches_bounded_by_the_tokenizers_tokens(server):
    count = minilm_tokens()
    texts = [f"{' '.join(['Rivers carry water to the sea.'] * (number % 7))} text {number}"
             for number in range(60)]
    texts[30] = "A text longer than the bound on its own, " * 10 + "text 30"
    bound = 60
    client = quick(server.url, concurrency=3, batch=50, batch_tokens=bound,
                   tokenizer=str(minilm_folder()))
    assert client.embed(texts).tolist() == hashed(texts)
    requests = sent(server)
    assert [text for request in requests for text in request] == texts
    for number, request in enumerate(requests):
        total = sum(map(count, request))
        if len(request) > 1:
            assert total <= bound
        else:  # alone only when it is over the bound, or the next would not fit
            assert total > bound or total + count(requests[number + 1][0]) > bound
        if number + 1 < len(requests):  # full: the next text would not fit
            assert total + count(requests[number + 1][0]) > bound
    assert [texts[30]] in requests and count(texts[30]) > bound


def test_without_a_tokenizer_utf8_bytes_bound_the_tokens(server):
    count = minilm_tokens()
    texts = [f"{'Éclair à la crème, 東京 ' * (number % 4)}text {number}" for number in range(40)]
    quick(server.url, batch_tokens=120).embed(texts)
    requests = sent(server)
    assert len(requests) > 3
    for request in requests:
        assert sum(len(text.encode()) for text in request) <= 120
        assert sum(map(count, request)) <= 120


def test_a_text_over_the_servers_limit_is_sent_alone_and_its_refusal_is_one_line(server):
    server.refuse_over = 100
    texts = numbered(20)
    texts[13] = "sea " * 40 + "13"
    with pytest.raises(EmbedError) as error:
        quick(server.url, concurrency=2, batch=8, batch_tokens=100).embed(texts)
    # The standard phrase, not the server's own ("Input too long"): a server's words may
    # echo what was sent.
    assert str(error.value) == (f"{server.url}/v1/embeddings: HTTP 413 "
                                f"{http.HTTPStatus(413).phrase}")
    refused = [body["input"] for _, _, body in server.requests if texts[13] in body["input"]]
    assert refused == [[texts[13]]]


@pytest.mark.parametrize("bounds, sizes", [
    ({"max_client_batch_size": 5, "max_batch_tokens": 16384}, [5, 5, 2, 5, 5, 5, 3]),
    ({"max_client_batch_size": 32, "max_batch_tokens": 13}, [3, 3, 3, 3, 3, 3, 3, 3, 3, 3]),
])
def test_the_servers_info_gives_the_bounds_once(server, bounds, sizes):
    server.info = {"model_id": "toy", "max_input_length": 512, **bounds}
    client = quick(server.url)
    texts = [f"t {number}" for number in range(10, 40)]  # 4 bytes each
    assert client.embed(texts[:12]).tolist() == hashed(texts[:12])
    assert client.embed(texts[12:]).tolist() == hashed(texts[12:])
    assert server.infos == 1
    assert [len(request) for request in sent(server)] == sizes


def test_a_server_that_is_down_is_asked_again_for_its_bounds(server):
    server.info = {"max_client_batch_size": 5, "max_batch_tokens": 16384}
    server.down = True
    client = quick(server.url)
    with pytest.raises(EmbedError, match="HTTP 503"):
        client.embed(numbered(10))
    server.down = False
    server.requests.clear()
    client.embed(numbered(10))
    assert server.infos == 2
    assert [len(request) for request in sent(server)] == [5, 5]
    client.embed(numbered(20)[10:])
    assert server.infos == 2


@pytest.mark.parametrize("fault", ["refused", "stalled"])
def test_settings_checks_remember_an_info_that_got_no_answer(server, monkeypatch, fault):
    """The server's window is asked for while settings are checked (``chunkd serve``
    checks them for every request): an ``/info`` that got no answer (a 503, or nothing
    within the timeout) is not asked again for ``UNANSWERED_INFO_KEPT`` seconds, then
    is (the server, now up, tells its window)."""
    from chunkd.embeddings import models as embeddings
    from chunkd.settings import settings_from_flags

    now = [1000.0]
    monkeypatch.setattr(embeddings, "monotonic", lambda: now[0], raising=False)
    monkeypatch.setenv("CHUNKD_EMBED_TIMEOUT", "0.3")
    server.info = {"max_input_length": 40}
    server.down, server.info_stalls = fault == "refused", fault == "stalled"
    flags = {"vectors": True, "embed_url": server.url, "embed_model": f"toy-{fault}",
             "tokenizer": str(minilm_folder() / "tokenizer.json")}
    unknown = settings_from_flags(flags)
    assert server.infos == 1
    now[0] += embeddings.UNANSWERED_INFO_KEPT - 1
    assert settings_from_flags(flags).chunk_size == unknown.chunk_size
    assert server.infos == 1
    server.down = server.info_stalls = False
    now[0] += 1
    assert settings_from_flags(flags).chunk_size == 38  # the window less [CLS] and [SEP]
    assert server.infos == 2
    assert unknown.chunk_size != 38


def test_given_bounds_are_not_asked_for_and_win(server):
    server.info = {"max_client_batch_size": 5, "max_batch_tokens": 100}
    texts = numbered(20)
    quick(server.url, batch=8, batch_tokens=10_000).embed(texts)
    assert server.infos == 0
    assert [len(request) for request in sent(server)] == [8, 8, 4]


def served_window_run(server: Endpoint, path: pathlib.Path, *flags: str):
    """The installed ``chunkd --vectors`` through the endpoint on ``path``, counting in
    MiniLM's tokenizer file (which says no window of its own) unless ``flags`` say."""
    return run_chunkd("--vectors", "--embed-url", server.url, "--embed-model", "toy-model",
                      *(flags or ("--tokenizer", str(minilm_folder() / "tokenizer.json"))),
                      str(path))


@pytest.mark.slow
def test_the_servers_window_bounds_the_default_size_and_a_larger_one_is_refused(server,
                                                                                tmp_path):
    """TEI's ``/info`` says ``max_input_length``, in its model's tokens with [CLS] and
    [SEP]: counted in that model's tokenizer, the chunks fit it less those two by
    default, and a larger ``--tokens`` is a usage error naming the endpoint's model."""
    count = minilm_tokens()
    path = tmp_path / "doc.txt"
    path.write_text(TEXT * 6, encoding="utf-8")
    server.info = {"max_input_length": 40}
    fitted = served_window_run(server, path)
    assert fitted.returncode == 0, fitted.stderr
    counts = [count(record["text"]) for record in ndjson(fitted.stdout)]
    assert len(counts) > 5 and max(counts) <= 38 and max(counts) > 30
    assert server.infos >= 1
    refused = served_window_run(server, path, "--tokens", "39", "--tokenizer",
                                str(minilm_folder() / "tokenizer.json"))
    assert refused.returncode == 2 and refused.stdout == b""
    assert refused.stderr.decode().count("\n") == 1
    assert "38 tokens" in refused.stderr.decode() and "toy-model" in refused.stderr.decode()
    assert served_window_run(server, path, "--tokens", "38", "--tokenizer",
                             str(minilm_folder() / "tokenizer.json")).returncode == 0


@pytest.mark.slow
def test_the_servers_window_is_not_applied_to_another_tokenizers_counts(server, tmp_path):
    """In cl100k_base's tokens (the default tokenizer), the endpoint's window, in its
    model's tokens, promises nothing: the default size stays, and so do the chunks."""
    path = tmp_path / "doc.txt"
    path.write_text(TEXT * 30, encoding="utf-8")
    server.info = {"max_input_length": 40}
    told = served_window_run(server, path, "--tokenizer", "cl100k_base")
    server.info = None
    untold = served_window_run(server, path, "--tokenizer", "cl100k_base")
    assert told.returncode == untold.returncode == 0, told.stderr
    from chunkd.units import resolve

    count = resolve("cl100k_base").count
    assert told.stdout == untold.stdout
    assert max(count(record["text"]) for record in ndjson(told.stdout)) > 100


@pytest.mark.parametrize("info", [{"max_client_batch_size": "many"}, [1, 2],
                                  {"max_client_batch_size": 0}, None])
def test_an_info_that_says_nothing_leaves_the_defaults(server, info):
    server.info = info
    texts = numbered(ENDPOINT_BATCH + 1)
    quick(server.url).embed(texts)
    assert [len(request) for request in sent(server)] == [ENDPOINT_BATCH, 1]


def many_batches(server: Endpoint, **limits) -> OpenAIEmbedder:
    return quick(server.url, **{"concurrency": 3, "batch": 4, **limits})


@pytest.mark.slow
def test_with_n_requests_a_429_waits_as_retry_after_says(server):
    server.faults = ["429"]
    texts = numbered(24)
    started = time.monotonic()
    assert many_batches(server).embed(texts).tolist() == hashed(texts)
    assert time.monotonic() - started >= 1.0
    assert len(server.requests) == 7


def test_with_n_requests_500s_are_tried_again(server):
    server.faults = ["500", "500", "500"]
    texts = numbered(24)
    assert many_batches(server).embed(texts).tolist() == hashed(texts)
    assert len(server.requests) == 9


@pytest.mark.slow
def test_with_n_requests_a_slow_answer_is_tried_again(server):
    server.faults = ["slow"]
    texts = numbered(24)
    assert many_batches(server, timeout=0.5).embed(texts).tolist() == hashed(texts)
    assert len(server.requests) == 7


@pytest.mark.parametrize("fault, message", [
    ("bad json", "the answer is not embeddings JSON"),
    ("dimensions", "returned no vectors of one length"),
    ("count", "3 vectors for 4 texts"),
    ("short", r"vectors of [78] numbers after vectors of [78]$"),
])
def test_with_n_requests_a_malformed_answer_fails_the_call(server, fault, message):
    server.faults = [fault]
    with pytest.raises(EmbedError, match=message) as error:
        many_batches(server).embed(numbered(24))
    assert "\n" not in str(error.value)


def test_with_n_requests_a_poisoned_batch_fails_and_the_rest_is_given_up(server):
    server.poison = "sea 13"
    server.gather = 3
    with pytest.raises(EmbedError, match="the answer is not embeddings JSON"):
        many_batches(server).embed(numbered(400))
    time.sleep(0.2)  # any call still in flight ends
    assert len(server.requests) < 100  # not the 100 batches


def test_with_n_requests_a_closed_port():
    url = closed_port()
    with pytest.raises(EmbedError) as error:
        quick(url, concurrency=3, batch=2).embed(numbered(12))
    message = str(error.value)
    assert message.startswith(f"{url}/v1/embeddings: no answer after 5 tries (last: ")
    assert "refused" in message and "\n" not in message


@pytest.mark.parametrize("option, value, message", [
    ("--embed-concurrency", "0", "must be at least 1"),
    ("--embed-batch", "0", "must be at least 1"),
    ("--embed-batch-tokens", "x", "not a whole number"),
])
def test_bad_limits_are_usage_errors(option, value, message):
    result = run_chunkd("--strategy", "semantic", "--embed-url", "http://127.0.0.1:9",
                        "--embed-model", "m", option, value, input=b"x")
    assert result.returncode == 2
    [line] = result.stderr.decode().splitlines()
    assert message in line and option in line


def test_the_limits_are_for_the_semantic_strategy():
    result = run_chunkd("--embed-concurrency", "2", input=b"x")
    assert result.returncode == 2
    assert "--embed-concurrency is for --strategy semantic" in result.stderr.decode()


def in_process(size: int) -> list[chunkd.Chunk]:
    """TEXT's chunks with the test's model as a function in this process."""
    return chunkd.split_text(TEXT, size, strategy="semantic", unit="chars",
                             embed=FunctionEmbedder(hashed))


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_the_filter_gives_the_records_of_the_same_function_in_process(server, monkeypatch,
                                                                      tmp_path, concurrency):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    path = tmp_path / "doc.txt"
    path.write_text(TEXT, encoding="utf-8")
    server.gather = int(concurrency)
    result = run_chunkd("--strategy", "semantic", "--chars", "120", "--embed-url",
                        server.url, "--embed-model", "toy-model", "--embed-concurrency",
                        concurrency, "--embed-batch", "2", str(path))
    assert server.peak == int(concurrency) and len(server.requests) > 3
    assert result.returncode == 0, result.stderr
    assert result.stderr == b"" and KEY.encode() not in result.stdout
    expected = in_process(120)
    records = ndjson(result.stdout)
    assert len(expected) > 2
    assert [(r["start"], r["end"], r["text"], r.get("distance")) for r in records] == [
        (chunk.start, chunk.end, chunk.text, chunk.distance) for chunk in expected]
    assert {headers["Authorization"] for _, headers, _ in server.requests} == {f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def minilm():
    """The real all-MiniLM-L6-v2 as the server's model, one request at a time (the
    server's threads share it)."""
    model = oracle_model()
    lock = threading.Lock()

    def vectors(texts: list[str]) -> list[list[float]]:
        with lock:
            return model.encode(texts, batch_size=32, show_progress_bar=False).tolist()
    return vectors


@pytest.mark.slow
def test_the_real_model_served_gives_the_records_of_the_model_folder(server, minilm, tmp_path):
    """The filter through the endpoint, serving the real model, at concurrency 1 and 4:
    the same bytes; and the cuts the filter makes with the model folder itself (the
    distances within float noise: the server embeds other batches than the folder's).
    The folder makes its tokenizer the unit, so the endpoint's run is given it."""
    server.model = minilm
    path = tmp_path / "doc.md"
    source = sorted((EVAL / "docs").glob("*.md"))[0]
    path.write_text(source.read_text(encoding="utf-8")[:6000], encoding="utf-8")
    through = {concurrency: run_chunkd(
        "--strategy", "semantic", "--tokens", "120", "--tokenizer", model_folder(),
        "--embed-url", server.url,
        "--embed-model", "all-MiniLM-L6-v2", "--embed-concurrency", concurrency,
        "--embed-batch", "8", str(path)) for concurrency in ("1", "4")}
    assert through["1"].returncode == through["4"].returncode == 0, through["4"].stderr
    assert through["1"].stdout == through["4"].stdout
    local = run_chunkd("--strategy", "semantic", "--tokens", "120", "--embed",
                       model_folder(), str(path))
    assert local.returncode == 0, local.stderr
    served, folder = ndjson(through["4"].stdout), ndjson(local.stdout)
    assert len(folder) > 5 and sum("distance" in record for record in folder) >= 2
    assert [(r["start"], r["end"]) for r in served] == [(r["start"], r["end"]) for r in folder]
    assert [r.get("distance") for r in served] == pytest.approx(
        [r.get("distance") for r in folder], abs=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_a_failing_document_is_one_line_and_the_others_are_chunked(server, monkeypatch,
                                                                   tmp_path, concurrency):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text(TEXT, encoding="utf-8")
    bad.write_text("One. Two. Three. Four. Five. This one is POISON. Six. Seven. Eight.",
                   encoding="utf-8")
    server.poison = "POISON"
    result = run_chunkd("--strategy", "semantic", "--embed-url", server.url,
                        "--embed-model", "toy-model", "--embed-concurrency", concurrency,
                        "--embed-batch", "2", str(bad), str(good))
    assert result.returncode == 1
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(f"chunkd: {bad}: {server.url}/v1/embeddings: the answer is not "
                           "embeddings JSON")
    assert KEY not in line and KEY.encode() not in result.stdout
    records = ndjson(result.stdout)
    assert records and {record["doc"] for record in records} == {str(good)}
    assert "".join(record["text"] for record in records) == TEXT


@pytest.mark.slow
def test_ctrl_c_with_calls_in_flight_ends_the_filter_at_once(server, tmp_path):
    server.faults = ["slow"] * 100  # each answer waits for the release (10 s at most)
    path = tmp_path / "doc.txt"
    path.write_text(TEXT, encoding="utf-8")
    process = subprocess.Popen(
        [chunkd_command(), "--strategy", "semantic", "--embed-url", server.url,
         "--embed-model", "toy-model", "--embed-concurrency", "3", "--embed-batch", "2",
         str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "CHUNKD_EMBED_TIMEOUT": "60"})
    deadline = time.monotonic() + HANG
    while server.in_flight < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.in_flight == 3
    interrupted = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=HANG)
    assert process.returncode == 130
    # Not held up by the calls in flight (60 s each), with room for a loaded machine.
    assert time.monotonic() - interrupted < 30
    assert b"Traceback" not in stderr


@pytest.mark.slow
def test_the_records_settings_name_the_endpoint_not_the_key(server, monkeypatch, tmp_path):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    url = (server.url.replace("http://", "http://user:pw-secret@")
           + "/v1?deployment=small&api-key=qsecret&access_token=tsecret")
    result = run_chunkd("--strategy", "semantic", "--embed-url", url, "--embed-model",
                        "toy-model", "--format", "json", input=TEXT.encode())
    assert result.returncode == 0, result.stderr
    for secret in (KEY, "pw-secret", "qsecret", "tsecret", "user"):
        assert secret.encode() not in result.stdout + result.stderr
    assert orjson.loads(result.stdout)


@pytest.mark.slow
def test_the_daemon_tries_a_file_again_once_the_endpoint_is_back(server, monkeypatch,
                                                                 inbox, watch):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    server.down = True
    (inbox / "doc.txt").write_text(TEXT, encoding="utf-8")
    watcher = watch(inbox, "--strategy", "semantic", "--chars", "120", "--embed-url",
                    server.url, "--embed-model", "toy-model", "--embed-concurrency", "3",
                    "--embed-batch", "2")
    watcher.started()
    watcher.wait_for(lambda: watcher.lines("failed doc.txt: embedding failed: "),
                     what="a failure logged")
    assert not results(inbox)  # no error result: the file is not the one at fault
    tried = len(server.requests)
    server.down = False
    watcher.wait_for(lambda: "doc.txt" in results(inbox), what="a result")
    assert len(server.requests) > tried
    result = results(inbox)["doc.txt"]
    assert result["settings"]["embed_url"] == server.url
    assert result["settings"]["embed_model"] == "toy-model"
    assert "embed_concurrency" not in result["settings"]  # how it was called is no result
    assert [(chunk["start"], chunk["end"], chunk["text"]) for chunk in result["chunks"]] == [
        (chunk.start, chunk.end, chunk.text) for chunk in in_process(120)]
    assert watcher.stop() == 0
    assert KEY not in "\n".join(watcher.log())
    assert KEY.encode() not in (inbox / "doc.txt.chunks.json").read_bytes()


@pytest.mark.slow
def test_dense_eval_through_the_endpoint_equals_a_plain_reimplementation(server, tmp_path):
    document = EVAL / "docs" / "state_of_the_union.md"
    questions = [question for question in map(json.loads, (EVAL / "questions.jsonl")
                                              .read_text().splitlines())
                 if question["doc"] == document.name]
    asked = tmp_path / "questions.jsonl"
    asked.write_text("".join(json.dumps(question) + "\n" for question in questions))
    result = run_chunkd("eval", str(document), "--questions", str(asked), "--retriever",
                        "dense", "--embed-url", server.url, "--embed-model", "toy-model",
                        "--tokens", "256", "--overlap", "0", "-k", "5", "--format", "ndjson",
                        "-q")
    assert result.returncode == 0, result.stderr
    [record] = ndjson(result.stdout)
    chunks = [(document.name, chunk) for chunk in chunkd.split_text(
        document.read_text(encoding="utf-8"), 256, 0, unit="tokens")]
    vectors = numpy.array(hashed([chunk.text for _, chunk in chunks]))
    questioned = numpy.array(hashed([question["question"] for question in questions]))
    similarity = ((questioned / numpy.linalg.norm(questioned, axis=1, keepdims=True))
                  @ (vectors / numpy.linalg.norm(vectors, axis=1, keepdims=True)).T)
    ranked = [sorted(range(len(chunks)), key=lambda n: -row[n])[:5] for row in similarity]
    assert record["retriever_model"] == f"toy-model@{server.url}/v1/embeddings"
    assert (record["recall"], record["precision"], record["iou"]) == pytest.approx(
        plain_scores(questions, chunks, ranked), abs=1e-9)


def test_dense_evals_retriever_calls_within_the_limits_given(server, tmp_path):
    # The default strategy (recursive) takes no endpoint options: eval's retriever does.
    document = tmp_path / "doc.md"
    document.write_text("".join(f"Paragraph {n} is about topic {n % 7}.\n\n" for n in range(60)))
    asked = tmp_path / "questions.jsonl"
    asked.write_text(json.dumps({"question": "topic 3?", "doc": "doc.md",
                                 "references": [{"start": 0, "end": 10}]}) + "\n")
    server.gather = 2
    result = run_chunkd("eval", str(document), "--questions", str(asked), "--retriever",
                        "dense", "--embed-url", server.url, "--embed-model", "toy-model",
                        "--chars", "60", "--overlap", "0", "--embed-concurrency", "2",
                        "--embed-batch", "3", "-q")
    assert result.returncode == 0, result.stderr
    assert len(server.requests) > 2
    assert max(len(body["input"]) for _, _, body in server.requests) == 3
    assert server.peak == 2


@pytest.mark.slow
def test_serve_uses_its_endpoint_and_a_request_cannot_choose_one(server, monkeypatch):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    with Serve("--strategy", "semantic", "--chars", "120", "--embed-url", server.url,
               "--embed-model", "toy-model") as served:
        def split(query: str) -> tuple[int, bytes]:
            status, _, data = request(served, "POST", f"/api/split?{query}", TEXT.encode(),
                                      host=f"127.0.0.1:{served.port}")
            return status, data

        status, data = split("strategy=semantic&chars=120&doc=d")
        refused, message = split("strategy=semantic&embed-url=http%3A%2F%2F127.0.0.1%3A9")
    assert status == 200, data
    assert [(chunk["start"], chunk["end"]) for chunk in map(orjson.loads, orjson.loads(
        data)["jsonl"].splitlines())] == [(chunk.start, chunk.end) for chunk in in_process(120)]
    assert KEY.encode() not in data
    assert refused == 400 and b"unknown parameter 'embed-url'" in message
