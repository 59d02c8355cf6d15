"""``chunkd serve`` against a hostile client, run as a subprocess and spoken to over
real sockets: it serves only its own page, never takes options from a request, bounds
what one request can take, and keeps answering (and stops on SIGTERM) meanwhile."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import time
from urllib.parse import urlencode

import orjson
import pytest

from browser import Serve
from command import HANG, chunkd_command
from browser import request

#: A regular expression that backtracks for ever on a run of a's with no b.
RUNAWAY = json.dumps(["(?:a+)+b"])
#: Seconds within which an answer that does not wait for anything must come.
PROMPTLY = 30


@pytest.fixture(scope="module")
def server():
    with Serve() as serve:
        yield serve


def own_host(server: Serve) -> str:
    return f"127.0.0.1:{server.port}"


def post_split(server: Serve, body: bytes, query: str, headers: dict | None = None,
               host: str | None = None) -> tuple[int, dict]:
    status, _, data = request(server, "POST", f"/api/split?{query}", body, headers,
                              host=host or own_host(server))
    return status, orjson.loads(data) if data.startswith(b"{") else {"text": data.decode()}


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def wait_for(condition, what: str, seconds: float = PROMPTLY):
    """``condition()``'s first true value, polled until the deadline."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {seconds} s")


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# --- only its own origin -------------------------------------------------------------

@pytest.mark.parametrize("origin", [
    "http://203.0.113.7", "http://203.0.113.7:{port}", "http://localhost:9999",
    "http://evil.localhost:{port}", "http://127.0.0.1:{other}", "http://[::1]:{port}",
    "http://localhost:{port}",  # the server's too, but not the page this request is for
    "https://127.0.0.1:{port}", "null"])
def test_a_post_from_any_other_origin_is_refused(server, origin):
    origin = origin.format(port=server.port, other=server.port + 1)
    status, answer = post_split(server, b"x", "chars=10", {"Origin": origin})
    assert status == 403
    assert answer["text"] == (f"chunkd serve: a page from {origin} may not use this server; "
                              f"open {server.url} instead\n")


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_its_own_page_and_a_program_without_an_origin_may_split(server, name):
    host = f"{name}:{server.port}"
    for headers in ({"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}, {}):
        status, answer = post_split(server, b"some text", "chars=10", headers, host=host)
        assert status == 200 and answer["text"] == "some text"


def test_a_cross_site_request_without_an_origin_is_refused(server):
    status, answer = post_split(server, b"x", "chars=10", {"Sec-Fetch-Site": "cross-site"})
    assert status == 403
    assert answer["text"].startswith("chunkd serve: a page from another site "
                                     "(Sec-Fetch-Site: cross-site) may not use this server")


@pytest.mark.parametrize("host", ["203.0.113.7:{port}", "127.0.0.2:{port}", "[::1]:{port}",
                                  "evil.localhost:{port}", "127.0.0.1:9999", "127.0.0.1",
                                  "localhost", "127.0.0.1:{port}:1", "[::1"])
def test_a_host_that_is_not_this_server_as_reached_is_refused(server, host):
    """Bound to 127.0.0.1, the server is reached as 127.0.0.1 or localhost, at its port:
    any other address (::1 included, another socket) or port is another server."""
    host = host.format(port=server.port)
    for method, body in (("GET", None), ("POST", b"x")):
        status, _, data = request(server, method, "/api/split?chars=10" if body else "/",
                                  body, host=host)
        assert status == 403, (method, host)
        refusal = f"chunkd serve: Host {host!r} is not a name of this server"
        assert data.startswith(refusal.encode())


def test_on_the_ipv6_loopback_it_is_reached_as_its_address_or_localhost():
    with Serve("--host", "::1") as serve:
        assert serve.url == f"http://[::1]:{serve.port}/"
        for host, status in ((f"[::1]:{serve.port}", 200), (f"localhost:{serve.port}", 200),
                             (f"[0:0::1]:{serve.port}", 200), (f"127.0.0.1:{serve.port}", 403),
                             (f"[::1]:{serve.port + 1}", 403)):
            assert request(serve, "GET", "/", host=host)[0] == status, host
        origin = {"Origin": f"http://[::1]:{serve.port}"}
        for host, status in ((f"[::1]:{serve.port}", 200), (f"localhost:{serve.port}", 403)):
            assert post_split(serve, b"x", "chars=10", origin, host=host)[0] == status, host


# --- a request is never command-line arguments ---------------------------------------

@pytest.mark.parametrize("query, message", [
    ({"count-tokens": "--separator-regex", "separators": RUNAWAY, "chars": "10"},
     "unknown parameter 'count-tokens'; a split takes strategy, chars, tokens, size, overlap, "
     "parent-chars, parent-tokens, parent-overlap, errors and doc"),
    ({"chars": "--separator-regex"}, "argument --chars: not a whole number: '--separator-regex'"),
    ({"chars": "10", "overlap": "--separators"},
     "argument --overlap: not a whole number: '--separators'"),
    ({"strategy": "--language=python", "chars": "10"},
     "--strategy --language=python: unknown; choose one of recursive, graphemes, words, "
     "sentences, sections, markdown, semantic, code, auto, propositions, llm"),
    ({"chars": "10", "errors": "--no-strip"},
     "argument --errors: invalid choice: '--no-strip' (choose from 'strict', 'replace')"),
])
def test_a_query_value_is_never_an_option(server, query, message):
    status, answer = post_split(server, b"a" * 34, urlencode(query))
    assert (status, answer) == (400, {"error": message})


def test_a_parameter_given_twice_is_refused(server):
    status, answer = post_split(server, b"text", "chars=10&chars=20")
    assert (status, answer) == (400, {"error": "chars is given twice"})


def test_the_servers_own_settings_cannot_be_overridden():
    with Serve("--language", "python", "--keep-separator", "none") as serve:
        for parameter, value in (("language", "markdown"), ("keep-separator", "start"),
                                 ("separators", '[" "]'), ("separator-regex", ""),
                                 ("no-strip", ""), ("embed-text", "")):
            status, answer = post_split(serve, b"def f():\n    pass\n",
                                        urlencode({"chars": "10", parameter: value}))
            assert status == 400, parameter
            assert answer["error"].startswith(f"unknown parameter {parameter!r}")
        status, report = post_split(serve, b"def f():\n    pass\n", "chars=10")
        assert status == 200
        assert (report["settings"]["language"], report["settings"]["keep_separator"]) == \
            ("python", "none")


# --- nothing a request runs stops the server ----------------------------------------

def test_a_runaway_regex_neither_stops_the_server_nor_its_sigterm():
    """A split that backtracks for ever runs in a process of its own: meanwhile the
    server answers, and SIGTERM stops the server and that process at once."""
    serve = Serve("--separators", RUNAWAY, "--separator-regex")
    try:
        stuck = socket.create_connection((serve.host, serve.port), timeout=PROMPTLY)
        body = b"a" * 34
        stuck.sendall(f"POST /api/split?chars=10 HTTP/1.1\r\nHost: {own_host(serve)}\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        [split] = wait_for(lambda: children(serve.process.pid), "a split process")
        _, _, config = request(serve, "GET", "/api/config", host=own_host(serve))
        assert orjson.loads(config)["max_bytes"] == 64 * 2**20
        status, report = post_split(serve, b"one ab two ab", "chars=6&overlap=0")
        assert status == 200 and report["text"] == "one ab two ab"
        assert not gone(split)  # still backtracking
        status, stderr = serve.stop(signal.SIGTERM)
        assert status == 0
        wait_for(lambda: gone(split), "the split process killed")
        stuck.close()
    finally:
        if serve.process.poll() is None:
            serve.process.kill()


def test_a_split_past_the_time_limit_is_refused_and_the_next_is_served():
    with Serve("--separators", RUNAWAY, "--separator-regex", "--time-limit", "1") as serve:
        status, answer = post_split(serve, b"a" * 34, "chars=10")
        assert (status, answer) == (422, {"error": (
            "the split took more than 1 s, the most this server gives one (--time-limit); "
            "choose a larger size, or split a smaller document")})
        assert children(serve.process.pid) == []
        status, report = post_split(serve, b"ab", "chars=10")
        assert status == 200 and report["text"] == "ab"
    assert "refused a split of 34 bytes: the split took more than 1 s" in serve.stderr()


# --- one request's work is bounded --------------------------------------------------

def vm_peak(pid: int) -> int:
    """The peak resident memory of a process, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


@pytest.mark.parametrize("query", ["chars=1", "strategy=graphemes&size=1"])
def test_a_split_into_too_many_chunks_is_refused_and_stays_light(query):
    """A mebibyte cut into a million chunks would take hundreds of MB; it is refused
    past 100,000 chunks, and the server itself does not grow by the split."""
    with Serve() as serve:
        before = vm_peak(serve.process.pid)
        status, answer = post_split(serve, b"a" * 2**20, query)
        assert (status, answer) == (422, {"error": (
            "these settings cut the document into more than 100,000 chunks, the most this "
            "server shows; choose a larger size")})
        assert vm_peak(serve.process.pid) - before < 32 * 2**20


def test_chunks_that_repeat_the_document_over_and_over_are_refused(server):
    status, answer = post_split(server, b"a" * 100_000, "chars=1000&overlap=999")
    assert (status, answer) == (422, {"error": (
        "the chunks hold more than 1,448,576 code points together, the most this server "
        "shows for this document; choose a smaller overlap or a larger size")})


def test_max_chunks_sets_the_bound():
    with Serve("--max-chunks", "3") as serve:
        assert post_split(serve, b"one two six", "chars=4&overlap=0")[0] == 200
        status, answer = post_split(serve, b"one two six ten", "chars=4&overlap=0")
    assert status == 422 and answer["error"].startswith(
        "these settings cut the document into more than 3 chunks")


# --- its own errors, its output, its connections -------------------------------------

def raw_exchange(server: Serve, data: bytes) -> bytes:
    with socket.create_connection((server.host, server.port), timeout=PROMPTLY) as connection:
        connection.sendall(data)
        return connection.makefile("rb").read()


@pytest.mark.parametrize("sent, status", [
    (b"PUT / HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n", 501),
    (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: {host}\r\n\r\n", 414),
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET / HTTP/9.9.9\r\nHost: {host}\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\n" + b"X-Many: 1\r\n" * 120 + b"\r\n", 431),
])
def test_the_http_servers_own_errors_carry_the_security_headers(server, sent, status):
    answer = raw_exchange(server, sent.replace(b"{host}", own_host(server).encode()))
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0].split()[1] == str(status)
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert headers["Content-Security-Policy"].startswith("default-src 'none'; script-src 'self'")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["X-Frame-Options"] == "DENY"
    assert body.startswith(b"chunkd serve: ") and body.count(b"\n") == 1


@pytest.mark.parametrize("stdout, reason", [("full", "No space left on device"),
                                            ("reader gone", "Broken pipe")])
def test_stdout_that_cannot_be_written_is_one_line_and_status_1(stdout, reason):
    """Nobody would learn where the page is: it says why, and stops."""
    if stdout == "full":
        target = os.open("/dev/full", os.O_WRONLY)
    else:
        reader, target = os.pipe()
        os.close(reader)
    try:
        result = subprocess.run([chunkd_command(), "serve", "--port", "0"], stdout=target,
                                stderr=subprocess.PIPE, timeout=HANG)
    finally:
        os.close(target)
    assert (result.returncode, result.stderr) == (1, f"chunkd serve: stdout: {reason}\n".encode())


def test_a_client_that_goes_away_mid_document_costs_one_line():
    with Serve() as serve:
        connection = socket.create_connection((serve.host, serve.port), timeout=PROMPTLY)
        connection.sendall(f"POST /api/split?chars=10 HTTP/1.1\r\nHost: {own_host(serve)}\r\n"
                           "Content-Length: 100000\r\n\r\nsome of it".encode())
        # Closed with a reset, as a browser tab that is shut: the read fails.
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
        logged = wait_for(serve.stderr, "a line on stderr")
        status, _, _ = request(serve, "GET", "/", host=own_host(serve))
        assert status == 200
    assert logged == "chunkd serve: connection from 127.0.0.1 ended: Connection reset by peer\n"


@pytest.mark.parametrize("length", ["1_6", "+16", " 16x", "\u0661\u0666"])
def test_a_content_length_of_anything_but_digits_is_refused(server, length):
    """Python's int() takes "1_6", "+16" and Arabic-Indic digits; HTTP, ASCII digits."""
    sent = (f"POST /api/split?chars=5 HTTP/1.1\r\nHost: {own_host(server)}\r\n"
            f"Content-Length: {length}\r\n\r\nhello world text").encode()
    answer = raw_exchange(server, sent)
    assert answer.startswith(b"HTTP/1.0 400 "), answer[:40]
    assert b"bad Content-Length" in answer


def test_a_body_cut_short_is_answered_408_at_the_idle_timeout():
    with Serve("--idle-timeout", "2") as serve:
        began = time.monotonic()
        answer = raw_exchange(serve, (f"POST /api/split?chars=5 HTTP/1.1\r\nHost: "
                                      f"{own_host(serve)}\r\nContent-Length: 100\r\n\r\n"
                                      "abc").encode())
        assert time.monotonic() - began >= 2
        assert answer.startswith(b"HTTP/1.0 408 "), answer[:40]
        assert b"the document did not arrive within the time limit" in answer


def test_stalled_connections_time_out_and_do_not_keep_others_waiting():
    with Serve("--idle-timeout", "2") as serve:
        began = time.monotonic()
        stalled = [socket.create_connection((serve.host, serve.port), timeout=PROMPTLY)
                   for _ in range(40)]
        for number, connection in enumerate(stalled[::2]):  # half say a little, then stall
            connection.sendall(b"POST /api/split HTTP/1.1\r\nHost: " if number % 2 else b"GE")
        status, _, _ = request(serve, "GET", "/", host=own_host(serve))
        assert status == 200
        for connection in stalled:
            assert connection.recv(1) == b""  # closed by the server, within the recv timeout
            connection.close()
        assert time.monotonic() - began >= 2


def test_headers_trickled_byte_by_byte_do_not_hold_a_connection_past_the_timeout():
    """The idle timeout restarts with every byte: a request whose headers come one line
    every half second must still be cut at the timeout, or 64 such clients would hold
    the server for as long as they like."""
    with Serve("--idle-timeout", "2") as serve:
        began = time.monotonic()
        trickling = [socket.create_connection((serve.host, serve.port), timeout=PROMPTLY)
                     for _ in range(10)]
        for connection in trickling:
            connection.sendall(f"GET / HTTP/1.1\r\nHost: {own_host(serve)}\r\n".encode())
        open_ones = list(trickling)
        while open_ones and time.monotonic() - began < PROMPTLY:
            time.sleep(0.5)
            still = []
            for connection in open_ones:
                try:
                    connection.sendall(b"X-Slow: 1\r\n")
                    still.append(connection)
                except OSError:  # reset or closed by the server
                    connection.close()
            open_ones = still
        assert not open_ones, "a connection trickling its headers stayed open"
        assert time.monotonic() - began >= 2
        status, _, _ = request(serve, "GET", "/", host=own_host(serve))
        assert status == 200


def test_connections_beyond_the_bound_get_a_503_at_once():
    from chunkd.web.serve import MAX_CONNECTIONS

    with Serve("--idle-timeout", "600") as serve:
        stalled = [socket.create_connection((serve.host, serve.port), timeout=PROMPTLY)
                   for _ in range(MAX_CONNECTIONS)]
        get = f"GET / HTTP/1.1\r\nHost: {own_host(serve)}\r\n\r\n".encode()
        answer = raw_exchange(serve, get)
        assert answer.startswith(b"HTTP/1.0 503 Service Unavailable\r\n")
        assert b"\r\nContent-Security-Policy: default-src 'none';" in answer
        assert answer.endswith(f"chunkd serve: {MAX_CONNECTIONS} connections are open, the "
                               "most it takes; try again\n".encode())
        for connection in stalled:
            connection.close()

        def served() -> bool:
            status, _, _ = request(serve, "GET", "/", host=own_host(serve))
            return status == 200
        wait_for(served, "a request served once the stalled connections are closed")


def test_sigterm_stops_it_at_once_with_connections_stalled():
    serve = Serve()
    stalled = [socket.create_connection((serve.host, serve.port), timeout=PROMPTLY)
               for _ in range(10)]
    stalled[0].sendall(b"POST /api/split HTTP/1.1\r\n")
    assert request(serve, "GET", "/", host=own_host(serve))[0] == 200  # all accepted
    try:
        assert serve.stop(signal.SIGTERM) == (0, "")  # Serve.stop waits 30 s at most
    finally:
        for connection in stalled:
            connection.close()


def test_serve_with_stdout_closed_says_so_and_exits_1():
    result = subprocess.run([chunkd_command(), "serve", "--port", "0"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, timeout=HANG, preexec_fn=lambda: os.close(1))
    assert result.returncode == 1
    assert result.stderr == (b"chunkd serve: stdout: not open (Bad file descriptor): nobody "
                             b"would learn the address\n")


@pytest.mark.parametrize("sent, error", [
    (b"GET / HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
     b"more than one Host header"),
    (b"POST /api/split HTTP/1.1\r\nHost: {host}\r\nContent-Length: 1\r\nContent-Length: 40"
     b"\r\nConnection: close\r\n\r\nx", b"more than one Content-Length header"),
])
def test_a_repeated_host_or_length_header_is_refused(server, sent, error):
    """Two Host headers (RFC 9112: answer 400) or two lengths: a proxy in front may have
    read the other one."""
    answer = raw_exchange(server, sent.replace(b"{host}", own_host(server).encode()))
    assert answer.startswith(b"HTTP/1.0 400 ") or answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert error in answer


# --- a client that ends its sending still gets its answer ------------------------------

def half_closed_exchange(server: Serve, body: bytes, query: str,
                         headers: str = "") -> tuple[bytes, bytes]:
    """A request sent, then the client's sending ended (``shutdown(SHUT_WR)``, a
    half-close: legal HTTP, it still reads); the answer's head and body, read to the
    end of the connection."""
    with socket.create_connection((server.host, server.port), timeout=PROMPTLY) as connection:
        connection.sendall(f"POST /api/split?{query} HTTP/1.1\r\nHost: {own_host(server)}\r\n"
                           f"{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        connection.shutdown(socket.SHUT_WR)
        answer = connection.makefile("rb").read()
    head, _, data = answer.partition(b"\r\n\r\n")
    return head, data


def test_a_client_that_half_closes_after_its_request_gets_the_whole_answer():
    """The end of a client's input is not its going away: the split goes on and its
    answer is sent, streamed (progress lines, then status and answer) or plain."""
    text = "".join(f"Paragraph {number}: a few words, then a few more words.\n\n"
                   for number in range(40_000)).encode()
    with Serve() as serve:
        head, plain = half_closed_exchange(serve, text, "chars=200")
        assert head.startswith(b"HTTP/1.0 200 ") and b"Content-Type: application/json" in head
        report = orjson.loads(plain)
        assert report["text"] == text.decode()
        head, streamed = half_closed_exchange(serve, text, "chars=200",
                                              "Accept: application/x-ndjson\r\n")
        assert head.startswith(b"HTTP/1.0 200 ") and b"application/x-ndjson" in head
        lines = [orjson.loads(line) for line in streamed.splitlines()]
        assert lines, "an empty streamed answer"
        assert lines[-1] == {"status": 200, "answer": report}
        counts = [(line["progress"]["done"], line["progress"]["total"]) for line in lines[:-1]]
        assert counts and counts == sorted(counts) and counts[-1] == (len(text), len(text))
        stderr = serve.stderr()
    assert "went away" not in stderr
    assert stderr.count(f"split {len(text) / 2**20:,.1f} MiB in ") == 2, stderr


def test_a_client_that_closes_still_stops_a_split_that_says_no_more():
    """A closed connection looks like a half-closed one until something is written to
    it: a split stuck after its first progress line (a regular expression that
    backtracks for ever) is stopped when its client closes, before the time limit; a
    half-closed client of the same split gets the time limit's answer."""
    with Serve("--separators", RUNAWAY, "--separator-regex", "--time-limit", "3") as serve:
        head, data = half_closed_exchange(serve, b"a" * 34, "chars=10",
                                          "Accept: application/x-ndjson\r\n")
        assert orjson.loads(data.splitlines()[-1]) == {"status": 422, "answer": {"error": (
            "the split took more than 3 s, the most this server gives one (--time-limit); "
            "choose a larger size, or split a smaller document")}}
        connection = socket.create_connection((serve.host, serve.port), timeout=PROMPTLY)
        connection.sendall(f"POST /api/split?chars=10 HTTP/1.1\r\nHost: {own_host(serve)}\r\n"
                           "Accept: application/x-ndjson\r\nContent-Length: 34\r\n\r\n".encode()
                           + b"a" * 34)
        reader = connection.makefile("rb")
        while not reader.readline().startswith(b'{"progress"'):
            pass
        [split] = wait_for(lambda: children(serve.process.pid), "a split process")
        reader.close()
        connection.close()  # a FIN, as a page that goes away: no reset
        wait_for(lambda: gone(split), "the split process stopped")
        stderr = serve.stderr()
    # Stopped for its client (at the time limit, it would have been refused).
    assert stderr.count("refused a split of 34 bytes: the split took more than 3 s") == 1
    assert re.search(r"stopped a split of 34 bytes after [\d.]+ s: its page went away", stderr)
