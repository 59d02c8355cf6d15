"""A hostile OpenAI-compatible endpoint (``--embed-url``): the test endpoint of
test_embed_url.py on 127.0.0.1, made to redirect to a second server (another port,
standing for another host, which records every header it gets), drip its answer a byte
at a time, stay silent, answer hundreds of MB, JSON nested 100,000 deep, a
``Retry-After`` of centuries, a reason phrase that echoes the ``Authorization`` header,
vectors of zeros; in process, through the installed ``chunkd`` filter and through
``chunkd watch``: a call is bounded in time and size, one line says what happened, no
secret is sent elsewhere or shown, a stop is not held up, and no file is lost."""

from __future__ import annotations

import io
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time

import pytest
from command import HANG, chunkd_command, ndjson, run_chunkd
from memory import MEASURE
from test_embed_url import KEY, TEXT, Endpoint, Handler, hashed, quick
from watching import results

import chunkd
from chunkd.embeddings.models import (LONGEST_WAIT, EmbedError, FunctionEmbedder, EndpointLimits,
                               OpenAIEmbedder, endpoint_url)
from chunkd.model.errors import SettingsError

#: A drip: a byte every DRIP_GAP seconds for DRIP_FOR seconds, then the rest at once (a
#: client whose timeout bounds each read only gets its answer after DRIP_FOR).
DRIP_GAP, DRIP_FOR = 0.1, 8.0
#: Seconds of a timed claim's allowance for a loaded machine (a test process waiting for
#: a core): well under what the claims tell apart (a drip's DRIP_FOR, a call's 60 s).
SLACK = 6.0
#: The bytes of a huge answer (the issue's 300 MB).
HUGE = 300 << 20
#: What an echo of the key or the URL's password would contain.
PASSWORD = "pw-Hidden-77"
#: Modes that /info (GET) gets too; the others are about the vectors.
GET_MODES = {"redirect-302", "redirect-307", "redirect-echo", "silence", "drip", "echo",
             "nested", "huge", "huge-declared"}


class Hostile(Endpoint):
    """The test endpoint, hostile while ``mode`` is set (to every call, and to
    ``GET /info`` for GET_MODES) or, by ``markers``, to the calls whose texts hold a
    marker. ``seen``: every request's method, path and headers; ``served``: the hostile
    answers begun, by mode; ``other``: where redirects point; ``heal_after``: hostile
    answers to give before ``mode`` clears (None: until the test clears it)."""

    def __init__(self) -> None:
        super().__init__()
        self.RequestHandlerClass = HostileHandler
        self.mode: str | None = None
        self.markers: dict[str, str] = {}
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.served: dict[str, int] = {}
        self.other: Hostile | None = None
        self.heal_after: int | None = None


class HostileHandler(Handler):
    server: Hostile

    def do_GET(self) -> None:
        self.server.seen.append(("GET", self.path, dict(self.headers)))
        mode = self.server.mode
        if mode in GET_MODES:
            self.hostile(mode, "GET", [])
        else:
            super().do_GET()

    def do_POST(self) -> None:
        self.server.seen.append(("POST", self.path, dict(self.headers)))
        body = self.rfile.read(int(self.headers["Content-Length"]))
        texts = json.loads(body)["input"]
        mode = self.server.mode or next((mode for marker, mode in self.server.markers.items()
                                         if any(marker in text for text in texts)), None)
        if mode is None:
            self.rfile = io.BytesIO(body)  # the test endpoint reads it again
            super().do_POST()
        else:
            self.hostile(mode, "POST", texts)

    def hostile(self, mode: str, method: str, texts: list[str]) -> None:
        with self.server.counting:
            self.server.served[mode] = self.server.served.get(mode, 0) + 1
            if self.server.heal_after is not None:
                self.server.heal_after -= 1
                if not self.server.heal_after:
                    self.server.mode = None
        try:
            getattr(self, mode.replace("-", "_"))(method, texts)
        except OSError:  # the client gave up: as it should
            pass

    def raw(self, status: str, headers: dict[str, str], body: bytes = b"") -> bytes:
        lines = [f"HTTP/1.1 {status}", *(f"{name}: {value}" for name, value in headers.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def answer_bytes(self, texts: list[str], vectors: list[list[float]] | None = None,
                     indexes: list[int] | None = None) -> bytes:
        vectors = hashed(texts) if vectors is None else vectors
        data = [{"object": "embedding", "index": index, "embedding": vector}
                for index, vector in zip(indexes or range(len(texts)), vectors)]
        body = json.dumps({"object": "list", "data": data}).encode()
        return self.raw("200 OK", {"Content-Type": "application/json",
                                   "Content-Length": str(len(body))}, body)

    def redirect(self, method: str, code: int, location: str) -> None:
        self.wfile.write(self.raw(f"{code} Moved", {"Location": location,
                                                     "Content-Length": "0"}))

    def redirect_302(self, method: str, texts: list[str]) -> None:
        assert self.server.other is not None
        self.redirect(method, 302, self.server.other.url + self.path)

    def redirect_307(self, method: str, texts: list[str]) -> None:
        assert self.server.other is not None
        self.redirect(method, 307, self.server.other.url + self.path)

    def redirect_echo(self, method: str, texts: list[str]) -> None:
        """To a host named after the credentials it was sent."""
        secret = self.headers.get("Authorization", "x y").split()[-1]
        assert self.server.other is not None
        self.redirect(method, 307, f"http://{secret}.localhost:"
                                   f"{self.server.other.server_address[1]}{self.path}")

    def silence(self, method: str, texts: list[str]) -> None:
        self.server.release.wait(120)

    def drip(self, method: str, texts: list[str]) -> None:
        whole = self.answer_bytes(texts) if method == "POST" else self.raw(
            "404 Not Found", {"Content-Length": "0"})
        until = time.monotonic() + DRIP_FOR
        sent = 0
        while sent < len(whole) and time.monotonic() < until:
            self.wfile.write(whole[sent:sent + 1])
            sent += 1
            time.sleep(DRIP_GAP)
        self.wfile.write(whole[sent:])

    def huge(self, method: str, texts: list[str], declared: bool = False) -> None:
        """Spaces (JSON's white space), then the answer: HUGE bytes in all."""
        answer = json.dumps({"object": "list", "data": [
            {"object": "embedding", "index": index, "embedding": vector}
            for index, vector in enumerate(hashed(texts))]}).encode()
        headers = {"Content-Type": "application/json", "Connection": "close"}
        if declared:
            headers["Content-Length"] = str(HUGE)
        self.wfile.write(self.raw("200 OK", headers))
        block = b" " * (1 << 20)
        for _ in range((HUGE - len(answer)) // len(block)):
            self.wfile.write(block)
        self.wfile.write(b" " * ((HUGE - len(answer)) % len(block)) + answer)
        self.close_connection = True

    def huge_declared(self, method: str, texts: list[str]) -> None:
        self.huge(method, texts, declared=True)

    def nested(self, method: str, texts: list[str]) -> None:
        deep = b"[" * 100_000 + b"]" * 100_000
        body = b'{"object": "list", "data": ' + deep + b"}" if method == "POST" else deep
        self.wfile.write(self.raw("200 OK", {"Content-Type": "application/json",
                                             "Content-Length": str(len(body))}, body))

    def retry(self, method: str, texts: list[str], seconds: str = "99999999999999") -> None:
        self.wfile.write(self.raw("429 Too Many Requests", {"Retry-After": seconds,
                                                            "Content-Length": "0"}))

    def retry_long(self, method: str, texts: list[str]) -> None:
        self.retry(method, texts, "1000000000")  # 31 years

    def echo(self, method: str, texts: list[str]) -> None:
        """A reason phrase that repeats the Authorization header."""
        said = self.headers.get("Authorization", "none")
        self.wfile.write(self.raw(f"401 {said}", {"Content-Length": "0"}))

    def zeros(self, method: str, texts: list[str]) -> None:
        vectors = [[0.0] * len(vector) for vector in hashed(texts)]
        self.wfile.write(self.answer_bytes(texts, vectors))

    def duplicate(self, method: str, texts: list[str]) -> None:
        self.wfile.write(self.answer_bytes(texts, indexes=[0] * len(texts)))


def serving() -> Hostile:
    endpoint = Hostile()
    threading.Thread(target=endpoint.serve_forever, args=(0.02,), daemon=True).start()
    return endpoint


def closing(endpoint: Hostile) -> None:
    endpoint.release.set()
    endpoint.shutdown()
    endpoint.server_close()


@pytest.fixture
def hostile():
    """The hostile endpoint, and its ``other``, a second server standing for another
    host."""
    endpoint, other = serving(), serving()
    endpoint.other = other
    yield endpoint
    for server in (endpoint, other):
        closing(server)


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    monkeypatch.delenv("CHUNKD_EMBED_TIMEOUT", raising=False)


def one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message and KEY not in message and PASSWORD not in message
    assert KEY.lower() not in message.lower()
    return message


def called(endpoint: Hostile) -> str:
    return f"{endpoint.url}/v1/embeddings"


# --- in process ------------------------------------------------------------------------

@pytest.mark.parametrize("mode, status", [("redirect-302", "302 Found"),
                                          ("redirect-307", "307 Temporary Redirect")])
@pytest.mark.parametrize("credentials", ["key", "url"])
def test_a_redirect_is_not_followed_and_nothing_goes_to_the_other_origin(
        hostile, monkeypatch, mode, status, credentials):
    url = hostile.url
    if credentials == "key":
        monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    else:
        monkeypatch.delenv("CHUNKD_EMBED_API_KEY", raising=False)
        url = url.replace("http://", f"http://someone:{PASSWORD}@")
    hostile.mode = mode
    with pytest.raises(EmbedError) as error:
        quick(url).embed(["a", "b"])
    assert one_line(error.value) == (
        f"{called(hostile)}: HTTP {status} to {hostile.other.url}: chunkd follows no "
        "redirect (give --embed-url the URL that answers)")
    assert hostile.other.seen == []  # neither the /info probe nor the call went there
    assert [method for method, _, _ in hostile.seen] == ["GET", "POST"]  # not tried again


def test_a_redirect_to_a_host_named_after_the_key_does_not_show_it(hostile, keyed):
    hostile.mode = "redirect-echo"
    with pytest.raises(EmbedError) as error:
        quick(hostile.url).embed(["a"])
    assert one_line(error.value).startswith(
        f"{called(hostile)}: HTTP 307 Temporary Redirect to an address not shown: ")
    assert hostile.other.seen == []


def test_a_drip_times_out_as_a_whole_call(hostile):
    """A byte every 0.1 s: each read is quick, the call is not."""
    hostile.mode = "drip"
    started = time.monotonic()
    with pytest.raises(EmbedError) as error:
        quick(hostile.url, timeout=0.5).embed(["a", "b"])
    took = time.monotonic() - started
    assert one_line(error.value) == f"{called(hostile)}: no answer after 5 tries (last: timed out)"
    # /info and 5 tries of 0.5 s each, the client's waits (0.01 s doubled) between them
    assert hostile.served["drip"] == 6 and took < 6 * 0.5 + SLACK


def test_silence_times_out(hostile):
    hostile.mode = "silence"
    started = time.monotonic()
    with pytest.raises(EmbedError, match=r"no answer after 5 tries \(last: timed out\)$"):
        quick(hostile.url, timeout=0.3).embed(["a"])
    assert time.monotonic() - started < 6 * 0.3 + SLACK


@pytest.mark.parametrize("mode, size", [("huge", "over {limit:,} bytes"),
                                        ("huge-declared", f"{HUGE:,} bytes declared")])
def test_an_answer_larger_than_its_texts_can_need_is_refused_at_once(hostile, mode, size):
    hostile.mode = mode
    client = quick(hostile.url)
    with pytest.raises(EmbedError) as error:
        client.embed(["a", "b"])
    limit = 65536 + 2 * (4096 + 16384 * 64)  # no dimension known yet: the widest assumed
    assert one_line(error.value) == (
        f"{called(hostile)}: an answer of {size.format(limit=limit)} for 2 texts, more "
        "than their vectors can need: refused")
    assert hostile.served[mode] == 2  # /info (its own bound: the defaults) and one try


def test_once_the_vectors_length_is_known_it_bounds_the_answer(hostile):
    client = quick(hostile.url)
    client.embed(["a"])  # vectors of 8
    hostile.mode = "huge"
    with pytest.raises(EmbedError, match=f"an answer of over {65536 + 2 * (4096 + 8 * 64):,} "
                                         "bytes for 2 texts"):
        client.embed(["b", "c"])


@pytest.mark.parametrize("where", ["info", "call"])
def test_json_nested_100000_deep_is_one_line(hostile, where):
    if where == "info":  # the /info probe's answer: the defaults, and the call goes on
        hostile.mode = "nested"
        client = quick(hostile.url, timeout=5)
        assert client.bounds() == (64, 300_000)
        hostile.mode = None
        assert client.embed(["a"]).tolist() == hashed(["a"])
        return
    hostile.markers = {"a": "nested"}
    with pytest.raises(EmbedError) as error:
        quick(hostile.url).embed(["a"])
    assert one_line(error.value) == (f"{called(hostile)}: the answer is not embeddings JSON "
                                     "(nested too deeply)")


@pytest.mark.parametrize("mode", ["retry", "retry-long"])
def test_retry_after_is_capped(hostile, mode):
    hostile.mode = mode
    client = OpenAIEmbedder(hostile.url, "toy-model", EndpointLimits(4), timeout=5, first_wait=0.01,
                            longest_wait=0.2)
    started = time.monotonic()
    with pytest.raises(EmbedError) as error:
        client.embed(["a"])
    assert one_line(error.value) == f"{called(hostile)}: no answer after 5 tries (last: HTTP 429)"
    assert time.monotonic() - started < 4 * 0.2 + SLACK


def posts(endpoint: Hostile) -> int:
    return sum(method == "POST" for method, _, _ in endpoint.seen)


def test_a_call_after_one_that_got_no_answer_gets_one_try(hostile):
    """An endpoint that kept failing a whole call's tries is not given them again by
    the next call (the filter's next batch, or the same texts again), until a call
    is answered."""
    hostile.mode = "retry-long"
    client = OpenAIEmbedder(hostile.url, "toy-model", EndpointLimits(1), timeout=5, first_wait=0.01,
                            longest_wait=0.05)
    with pytest.raises(EmbedError, match=r"no answer after 5 tries \(last: HTTP 429\)$"):
        client.embed(["a"])
    assert posts(hostile) == 5
    with pytest.raises(EmbedError) as error:
        client.embed(["b"])
    assert one_line(error.value) == (f"{called(hostile)}: no answer after 5 tries of an "
                                     "earlier call and 1 of this one (last: HTTP 429)")
    assert posts(hostile) == 6
    hostile.mode = None  # healed: the next call is answered at its one try
    assert client.embed(["c"]).tolist() == hashed(["c"])
    assert posts(hostile) == 7
    hostile.mode = "retry-long"  # and the call after that has its whole tries again
    with pytest.raises(EmbedError, match=r"no answer after 5 tries"):
        client.embed(["d"])
    assert posts(hostile) == 12


def test_a_call_given_up_for_another_calls_failure_leaves_the_next_its_tries(hostile):
    """A call stopped because another call of the batch failed at once (a refusal, not
    an endpoint that keeps failing) does not take the next call's tries."""
    hostile.markers = {"bad": "echo", "slow": "retry-long"}
    client = OpenAIEmbedder(hostile.url, "toy-model", EndpointLimits(2, batch=1), timeout=5,
                            first_wait=0.01, longest_wait=0.3)
    with pytest.raises(EmbedError, match="HTTP 401 Unauthorized"):
        client.embed(["slow", "bad"])
    assert not client.failing
    hostile.markers = {}
    assert client.embed(["x"]).tolist() == hashed(["x"])


def test_the_default_cap_keeps_a_call_of_the_default_tries_within_a_minute():
    from chunkd.embeddings.models import FIRST_WAIT, TRIES

    assert FIRST_WAIT * 2 ** (TRIES - 2) < LONGEST_WAIT <= FIRST_WAIT * 2 ** (TRIES - 2) + 5
    assert (TRIES - 1) * LONGEST_WAIT < 60


@pytest.mark.parametrize("credentials", ["key", "url"])
def test_a_reason_phrase_is_never_repeated(hostile, monkeypatch, credentials):
    url = hostile.url
    if credentials == "key":
        monkeypatch.setenv("CHUNKD_EMBED_API_KEY", KEY)
    else:
        monkeypatch.delenv("CHUNKD_EMBED_API_KEY", raising=False)
        url = url.replace("http://", f"http://someone:{PASSWORD}@")
    hostile.markers = {"a": "echo"}
    with pytest.raises(EmbedError) as error:
        quick(url).embed(["a"])
    assert one_line(error.value) == f"{called(hostile)}: HTTP 401 Unauthorized"
    assert "c29tZW9uZT" not in str(error.value)  # the Basic credentials' base64


def test_vectors_of_zeros_are_refused(hostile):
    hostile.markers = {"b": "zeros"}
    with pytest.raises(EmbedError) as error:
        quick(hostile.url).embed(["a", "b"])
    assert one_line(error.value) == (f"{called(hostile)} returned a vector of zeros only "
                                     "(text 1 of 2): it has no direction to compare")


def test_a_function_returning_zeros_is_refused_too():
    with pytest.raises(EmbedError, match=r"returned a vector of zeros only \(text 2 of 3\)"):
        FunctionEmbedder(lambda texts: [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]).embed("abc")


def test_duplicate_index_values_are_named_as_such(hostile):
    hostile.markers = {"a": "duplicate"}
    with pytest.raises(EmbedError) as error:
        quick(hostile.url).embed(["a", "b", "c"])
    assert one_line(error.value) == (f"{called(hostile)}: the vectors' index values are not "
                                     "0 to 2, once each")


def test_a_vector_of_strings_is_not_quoted():
    with pytest.raises(EmbedError) as error:
        FunctionEmbedder(lambda texts: [[KEY, 1.0]] * len(texts), name="f").embed(["a"])
    assert one_line(error.value) == "f returned no vectors of one length, of numbers only"


@pytest.mark.parametrize("character", ["/", "#", "?"])
def test_a_password_holding_a_delimiter_is_never_shown(character):
    url = f"http://someone:{PASSWORD[:3]}{character}{PASSWORD[3:]}@127.0.0.1:8080/v1"
    with pytest.raises(SettingsError) as error:
        endpoint_url(url)
    message = one_line(error.value)
    assert "percent-encoded" in message
    for part in (PASSWORD[:3], PASSWORD[3:], "someone"):
        assert part not in message


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://127.0.0.1:80x",
                                 "http://[::1", "http://127.0.0.1:8080/a b",
                                 "http://exämple.com"])
def test_a_malformed_url_fails_at_once(url):
    with pytest.raises(SettingsError, match=r"^--embed-url"):
        endpoint_url(url)


@pytest.fixture
def tls(tmp_path, monkeypatch):
    """The hostile endpoint over TLS, its certificate from a test authority that the
    client trusts through SSL_CERT_FILE (OpenSSL's default paths): (endpoint, URL)."""
    import trustme

    authority = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    trusted = tmp_path / "authority.pem"
    authority.cert_pem.write_to_path(str(trusted))
    monkeypatch.setenv("SSL_CERT_FILE", str(trusted))
    endpoint = Hostile()
    endpoint.socket = context.wrap_socket(endpoint.socket, server_side=True)
    threading.Thread(target=endpoint.serve_forever, args=(0.02,), daemon=True).start()
    yield endpoint, endpoint.url.replace("http://", "https://")
    closing(endpoint)


def test_over_tls_a_drip_times_out_as_a_whole_call(tls, keyed):
    endpoint, url = tls
    assert quick(url).embed(["a", "b"]).tolist() == hashed(["a", "b"])
    endpoint.mode = "drip"
    started = time.monotonic()
    with pytest.raises(EmbedError) as error:
        quick(url, timeout=0.5).embed(["c"])
    assert one_line(error.value) == f"{url}/v1/embeddings: no answer after 5 tries (last: timed out)"
    assert time.monotonic() - started < 6 * 0.5 + SLACK


def test_over_tls_an_untrusted_certificate_gets_no_key(tls, keyed, monkeypatch):
    endpoint, url = tls
    monkeypatch.delenv("SSL_CERT_FILE")
    with pytest.raises(EmbedError) as error:
        quick(url).embed(["a"])
    assert "(last: TLS: certificate not trusted (" in one_line(error.value)
    assert endpoint.seen == []  # no request got through: the key was never sent


# --- the filter ------------------------------------------------------------------------

def filter_run(endpoint: Hostile, *options: str, url: str | None = None,
               text: str = TEXT) -> subprocess.CompletedProcess:
    return run_chunkd("--strategy", "semantic", "--chars", "120", "--embed-url",
                      url or endpoint.url, "--embed-model", "toy-model", *options,
                      input=text.encode())


def clean(stderr: bytes) -> str:
    """stderr as one line, with no secret, traceback or warning in it."""
    text = stderr.decode()
    [line] = text.splitlines()
    for word in (KEY, KEY.lower(), PASSWORD, "Traceback", "Warning"):
        assert word not in text
    return line


@pytest.mark.slow
@pytest.mark.parametrize("mode, what", [
    ("redirect-302", "HTTP 302 Found to {other}: chunkd follows no redirect"),
    ("nested", "the answer is not embeddings JSON (nested too deeply)"),
    ("echo", "HTTP 401 Unauthorized"),
    ("zeros", " returned a vector of zeros only (text 1 of "),
    ("duplicate", "the vectors' index values are not 0 to "),
    ("huge-declared", f"an answer of {HUGE:,} bytes declared for "),
])
def test_through_the_filter_each_is_one_line(hostile, keyed, mode, what):
    hostile.mode = mode
    result = filter_run(hostile)
    assert result.returncode == 1
    line = clean(result.stderr)
    assert line.startswith(f"chunkd: stdin: {called(hostile)}")
    assert what.format(other=hostile.other.url) in line
    assert result.stdout == b""
    assert hostile.other.seen == []


@pytest.mark.slow
def test_through_the_filter_a_centuries_retry_after_waits_the_cap_once(hostile, keyed):
    hostile.mode, hostile.heal_after = "retry", 1
    started = time.monotonic()
    result = filter_run(hostile)
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    assert LONGEST_WAIT <= took < LONGEST_WAIT + 6
    assert [(r["start"], r["end"]) for r in ndjson(result.stdout)] == [
        (chunk.start, chunk.end) for chunk in chunkd.split_text(
            TEXT, 120, strategy="semantic", unit="chars", embed=FunctionEmbedder(hashed))]


@pytest.mark.slow
def test_through_the_filter_a_centuries_retry_after_on_every_try_ends_within_35_s(
        hostile, keyed, tmp_path):
    """docs/semantic.md: a call that keeps getting 429 gives up within 35 s, whatever
    Retry-After says; the filter's later calls (the documents' own, after the batch read
    ahead failed) get one try each, not a call's tries again (64 s before)."""
    hostile.mode = "retry-long"
    paths = []
    for number in range(3):
        paths.append(tmp_path / f"doc{number}.txt")
        paths[-1].write_text(f"{TEXT} Document {number}.", encoding="utf-8")
    started = time.monotonic()
    result = run_chunkd("--strategy", "semantic", "--chars", "120", "--embed-url",
                        hostile.url, "--embed-model", "toy-model", *map(str, paths))
    took = time.monotonic() - started
    assert result.returncode == 1 and result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 3 and all("(last: HTTP 429)" in line for line in lines), lines
    assert posts(hostile) == 5 + 3
    assert took < 35, took


@pytest.mark.slow
def test_through_the_filter_a_huge_answer_keeps_memory_bounded(hostile, keyed):
    """300 MB streamed with no length: refused at its bound, the peak far below it (the
    client once held the whole answer: 3.3 GB for 300 MB)."""
    hostile.mode = "huge"
    process = subprocess.run(
        [sys.executable, "-c", MEASURE, chunkd_command(), "--strategy", "semantic",
         "--embed-url", hostile.url, "--embed-model", "toy-model"],
        input=TEXT.encode(), capture_output=True, timeout=HANG)
    *lines, peak_mb = process.stderr.decode().splitlines()
    assert process.returncode == 1 and process.stdout == b""
    assert "an answer of over " in clean("\n".join(lines).encode())
    assert int(peak_mb) < 200, peak_mb


@pytest.mark.slow
def test_a_password_holding_a_slash_through_the_filter(hostile):
    result = filter_run(hostile, url=hostile.url.replace(
        "http://", f"http://someone:{PASSWORD[:3]}/{PASSWORD[3:]}@"))
    assert result.returncode == 2
    line = clean(result.stderr)
    assert PASSWORD[3:] not in line and PASSWORD[:3] not in line
    assert hostile.seen == []


@pytest.mark.parametrize("url", [f"http:someone:{PASSWORD}@127.0.0.1:8080",
                                 f"https:someone:{PASSWORD}@127.0.0.1:8080/v1",
                                 f"http:/someone:{PASSWORD}@127.0.0.1:8080",
                                 f"http:///someone:{PASSWORD}@127.0.0.1:8080"])
def test_a_url_without_its_slashes_never_shows_its_credentials(url):
    result = run_chunkd("--strategy", "semantic", "--embed-url", url, "--embed-model", "m",
                        input=TEXT.encode())
    assert result.returncode == 2
    line = clean(result.stderr)
    assert line.startswith("chunkd: error: --embed-url") and "someone" not in line, line


@pytest.mark.slow
def test_a_bad_port_fails_at_once_through_the_filter():
    started = time.monotonic()
    result = run_chunkd("--strategy", "semantic", "--embed-url", "http://127.0.0.1:99999",
                        "--embed-model", "m", input=TEXT.encode())
    assert result.returncode == 2
    assert "--embed-url http://127.0.0.1:99999: not a valid URL" in clean(result.stderr)
    assert time.monotonic() - started < 30


@pytest.mark.slow
@pytest.mark.parametrize("stop, status", [(signal.SIGINT, 130), (signal.SIGTERM, -15)])
def test_the_filter_stops_at_once_while_a_call_hangs(hostile, stop, status):
    hostile.mode = "silence"
    process = subprocess.Popen(
        [chunkd_command(), "--strategy", "semantic", "--embed-url", hostile.url,
         "--embed-model", "toy-model", "--embed-concurrency", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "CHUNKD_EMBED_TIMEOUT": "60"})
    process.stdin.write(TEXT.encode())
    process.stdin.close()
    deadline = time.monotonic() + HANG
    while not hostile.served and time.monotonic() < deadline:
        time.sleep(0.02)
    assert hostile.served
    stopped = time.monotonic()
    process.send_signal(stop)
    process.wait(timeout=HANG)
    assert time.monotonic() - stopped < 30  # not the call's 60 s, on a loaded machine too
    assert process.returncode == status
    assert b"Traceback" not in process.stderr.read()


# --- the daemon ------------------------------------------------------------------------

def watched(endpoint: Hostile, inbox, watch, **env: str):
    watcher = watch(inbox, "--strategy", "semantic", "--chars", "120", "--embed-url",
                    endpoint.url, "--embed-model", "toy-model",
                    env={**os.environ, "CHUNKD_EMBED_API_KEY": KEY, **env})
    watcher.started()
    return watcher


def expected(text: str) -> list[tuple[int, int, str]]:
    return [(chunk.start, chunk.end, chunk.text) for chunk in chunkd.split_text(
        text, 120, strategy="semantic", unit="chars", embed=FunctionEmbedder(hashed))]


def no_secret_anywhere(inbox, watcher) -> None:
    log = "\n".join(watcher.log())
    for word in (KEY, KEY.lower(), "Traceback", "unexpected"):
        assert word not in log
    for path in inbox.parent.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_sigterm_stops_the_daemon_within_seconds_while_a_call_hangs_and_nothing_is_lost(
        hostile, inbox, watch):
    hostile.mode = "silence"
    watcher = watched(hostile, inbox, watch, CHUNKD_EMBED_TIMEOUT="60")
    (inbox / "doc.txt").write_text(TEXT, encoding="utf-8")
    watcher.wait_for(lambda: hostile.served, what="a call in flight")
    stopped = time.monotonic()
    assert watcher.stop(timeout=HANG) == 0
    # The grace (3 s), then the workers are killed: not the call's 60 s, with room for a
    # loaded machine.
    assert time.monotonic() - stopped < 3 + 4 + SLACK
    assert not results(inbox)
    hostile.mode = None  # the endpoint heals; the next start chunks the file
    watcher = watched(hostile, inbox, watch, CHUNKD_EMBED_TIMEOUT="60")
    watcher.wait_for(lambda: "doc.txt" in results(inbox), what="a result")
    assert [(c["start"], c["end"], c["text"]) for c in results(inbox)["doc.txt"]["chunks"]] \
        == expected(TEXT)
    assert watcher.stop() == 0
    no_secret_anywhere(inbox, watcher)
    assert not list(inbox.glob("*.error.json"))


@pytest.mark.slow
def test_the_daemon_under_hostile_answers_loses_nothing_and_shows_no_secret(
        hostile, inbox, watch):
    """A file a fault: each is tried again (in its call, or by the daemon's back-off)
    until the endpoint heals, and then chunked; no error result, no traceback."""
    modes = ["redirect-302", "drip", "nested", "echo", "zeros", "huge", "retry",
             "duplicate"]
    hostile.markers = {f"Marker{number}": mode for number, mode in enumerate(modes)}
    texts = {f"{mode}.txt": f"{TEXT} Marker{number} ends it."
             for number, mode in enumerate(modes)}
    watcher = watched(hostile, inbox, watch, CHUNKD_EMBED_TIMEOUT="1")
    for name, text in texts.items():
        (inbox / name).write_text(text, encoding="utf-8")
    watcher.wait_for(lambda: set(hostile.served) == set(modes), what="every fault served")
    for mode in ("redirect-302", "nested", "echo", "zeros", "huge", "duplicate"):
        watcher.wait_for(lambda: watcher.lines(f"failed {mode}.txt: embedding failed: "),
                         what=f"{mode} failed")
    hostile.markers = {}
    watcher.wait_for(lambda: set(texts) <= set(results(inbox)), timeout=HANG,
                     what="every result")
    made = results(inbox)
    for name, text in texts.items():
        assert [(c["start"], c["end"], c["text"]) for c in made[name]["chunks"]] == \
            expected(text)
    assert watcher.stop() == 0
    no_secret_anywhere(inbox, watcher)
    assert not list(inbox.glob("*.error.json"))
    assert hostile.other.seen == []
