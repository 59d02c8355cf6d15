"""An OpenAI-compatible embeddings endpoint (``--embed-url``): a real HTTP server on
loopback in the test, serving vectors made from a hash of each text, with injected
faults (429 with ``Retry-After``, 500, a slow answer, bad JSON, wrong dimensions, a
closed port), in process and through the installed ``chunkd``."""

from __future__ import annotations

import hashlib
import http.server
import json
import pathlib
import socket
import threading
import time

import numpy
import orjson
import pytest
from browser import Serve, request
from command import ndjson, run_chunkd
from span_metrics import plain_scores
from watching import results

import chunkd
from chunkd.embeddings import EmbedError, FunctionEmbedder, OpenAIEmbedder, endpoint_url

EVAL = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "eval"
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
    order ("429", "500", "slow", "bad json", "dimensions", "count"; then answers);
    ``poison``: texts containing it get bad JSON, always. Each request is kept with its
    arrival time and headers."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.faults: list[str] = []
        self.poison: str | None = None
        self.down = False  # every request gets 503, Retry-After: 0
        self.requests: list[tuple[float, dict[str, str], dict]] = []
        self.release = threading.Event()  # ends the slow answers
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class Handler(http.server.BaseHTTPRequestHandler):
    server: Endpoint

    def do_POST(self) -> None:
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
        if fault in ("429", "500"):
            self.send_response(int(fault))
            if fault == "429":
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "slow":
            self.server.release.wait(10)
        vectors = hashed(texts)
        if fault == "dimensions":
            vectors[-1] = vectors[-1][:-1]
        if fault == "count":
            vectors = vectors[:-1]
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


def quick(url: str, timeout: float = 5) -> OpenAIEmbedder:
    """An endpoint client that waits little between tries (unless told by the server)."""
    return OpenAIEmbedder(url, "toy-model", timeout=timeout, first_wait=0.01)


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
    assert [len(body["input"]) for _, _, body in server.requests] == [64, 64, 22]
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


def in_process(size: int) -> list[chunkd.Chunk]:
    """TEXT's chunks with the test's model as a function in this process."""
    return chunkd.split_text(TEXT, size, strategy="semantic", unit="chars",
                             embed=FunctionEmbedder(hashed))


@pytest.mark.slow
def test_the_filter_gives_the_records_of_the_same_function_in_process(server, monkeypatch,
                                                                      tmp_path):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    path = tmp_path / "doc.txt"
    path.write_text(TEXT, encoding="utf-8")
    result = run_chunkd("--strategy", "semantic", "--chars", "120", "--embed-url",
                        server.url, "--embed-model", "toy-model", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == b"" and KEY.encode() not in result.stdout
    expected = in_process(120)
    records = ndjson(result.stdout)
    assert len(expected) > 2
    assert [(r["start"], r["end"], r["text"], r.get("distance")) for r in records] == [
        (chunk.start, chunk.end, chunk.text, chunk.distance) for chunk in expected]
    assert {headers["Authorization"] for _, headers, _ in server.requests} == {f"Bearer {KEY}"}


@pytest.mark.slow
def test_a_failing_document_is_one_line_and_the_others_are_chunked(server, monkeypatch,
                                                                   tmp_path):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text(TEXT, encoding="utf-8")
    bad.write_text("This one is POISON. It gets bad JSON back.", encoding="utf-8")
    server.poison = "POISON"
    result = run_chunkd("--strategy", "semantic", "--embed-url", server.url,
                        "--embed-model", "toy-model", str(bad), str(good))
    assert result.returncode == 1
    [line] = result.stderr.decode().splitlines()
    assert line.startswith(f"chunkd: {bad}: {server.url}/v1/embeddings: the answer is not "
                           "embeddings JSON")
    assert KEY not in line and KEY.encode() not in result.stdout
    records = ndjson(result.stdout)
    assert records and {record["doc"] for record in records} == {str(good)}
    assert "".join(record["text"] for record in records) == TEXT


@pytest.mark.slow
def test_the_records_settings_name_the_endpoint_not_the_key(server, monkeypatch, tmp_path):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    url = server.url.replace("http://", "http://user:pw-secret@") + "/v1?q=qsecret"
    result = run_chunkd("--strategy", "semantic", "--embed-url", url, "--embed-model",
                        "toy-model", "--format", "json", input=TEXT.encode())
    assert result.returncode == 0, result.stderr
    for secret in (KEY, "pw-secret", "qsecret"):
        assert secret.encode() not in result.stdout + result.stderr
    assert orjson.loads(result.stdout)


@pytest.mark.slow
def test_the_daemon_tries_a_file_again_once_the_endpoint_is_back(server, monkeypatch,
                                                                 inbox, watch):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    server.down = True
    (inbox / "doc.txt").write_text(TEXT, encoding="utf-8")
    watcher = watch(inbox, "--strategy", "semantic", "--chars", "120", "--embed-url",
                    server.url, "--embed-model", "toy-model")
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
                        "--tokens", "256", "--overlap", "0", "--format", "ndjson", "-q")
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
