"""``chunkd serve`` as an HTTP server, run as a subprocess: where it listens, whom it
answers, what it refuses, and that its reports hold the filter's records."""

from __future__ import annotations

import pathlib
import signal
import socket
import subprocess
from urllib.parse import urlencode

import orjson
import pytest

from browser import Serve, request
from command import HANG, chunkd_command, run_chunkd
from oracle import corpus_documents

DOCUMENT = next(p for p in corpus_documents() if p.parent.name == "en-policy")


@pytest.fixture(scope="module")
def server():
    with Serve("--max-bytes", "100000") as serve:
        yield serve


def split(server: Serve, body: bytes, **params) -> tuple[int, dict]:
    status, _, data = request(server, "POST", f"/api/split?{urlencode(params)}", body,
                              host=f"127.0.0.1:{server.port}")
    return status, orjson.loads(data)


def listening(port: int) -> list[tuple[str, str]]:
    """The (table, local address in hex) of every socket listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append((table, address))
    return found


def test_listens_only_on_loopback_by_default(server):
    assert server.host == "127.0.0.1"
    assert server.banner.startswith(f"chunkd serve: open http://127.0.0.1:{server.port}/")
    assert listening(server.port) == [("/proc/net/tcp", "0100007F")]  # 127.0.0.1 only


def test_host_option_binds_where_asked():
    with Serve("--host", "127.0.0.2") as other:
        assert other.host == "127.0.0.2"
        assert listening(other.port) == [("/proc/net/tcp", "0200007F")]
        status, _, _ = request(other, "GET", "/", host=f"127.0.0.2:{other.port}")
        assert status == 200


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_refuses_a_foreign_host(server, method):
    body = b"hello" if method == "POST" else None
    status, headers, data = request(server, method, "/api/split?chars=10" if body else "/",
                                    body, host=f"rebound.example.com:{server.port}")
    assert status == 403
    assert b"Host 'rebound.example.com:" in data and b"not a name of this server" in data
    assert b"split" not in data  # no report
    status, _, _ = request(server, "GET", "/", host=f"localhost:{server.port}")
    assert status == 200
    status, _, data = request(server, "GET", "/")  # no Host at all
    assert (status, data) == (400, b"chunkd serve: no Host header\n")


def test_refuses_a_post_from_a_foreign_page(server):
    status, _, data = request(server, "POST", "/api/split?chars=10", b"hello",
                              host=f"127.0.0.1:{server.port}",
                              headers={"Origin": "http://rebound.example.com"})
    assert status == 403 and b"http://rebound.example.com may not use this server" in data
    status, _, _ = request(server, "POST", "/api/split?chars=10", b"hello",
                           host=f"127.0.0.1:{server.port}",
                           headers={"Origin": f"http://127.0.0.1:{server.port}"})
    assert status == 200


def test_an_oversized_body_gets_a_clear_error(server):
    status, answer = split(server, b"a" * 100_001, chars=100)
    assert status == 413
    assert answer["error"] == ("the document is 100,001 bytes, more than this server takes "
                               "(100,000 bytes); start it with a larger --max-bytes")
    status, answer = split(server, b"a " * 50_000, chars=100)  # exactly the limit
    assert status == 200 and answer["summary"]["code_points"] == 100_000


def test_a_huge_declared_body_is_answered_at_once(server):
    """The refusal does not wait for 10 GB that will never come."""
    connection = socket.create_connection((server.host, server.port), timeout=HANG)
    with connection:
        connection.sendall(f"POST /api/split?chars=10 HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                           f"Content-Length: {10 * 2**30}\r\n\r\n".encode() + b"x" * 1000)
        answer = connection.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.0 413 ")
    assert b'"error":"the document is 10,240.0 MiB, more than' in answer


@pytest.mark.parametrize("options", [("--chars", "500"), ("--tokens", "120", "--overlap", "30"),
                                     ("--chars", "300", "--overlap", "15%"),
                                     ("--chars", "200", "--parent-chars", "900",
                                      "--parent-overlap", "30%")])
def test_a_report_holds_the_filters_records(server, options):
    body = DOCUMENT.read_bytes()
    params = dict(zip((o.lstrip("-") for o in options[::2]), options[1::2]))
    status, report = split(server, body, **params)
    assert status == 200, report
    expected = run_chunkd("--count-tokens", *options, input=body)
    assert expected.returncode == 0
    assert report["jsonl"] == expected.stdout.decode()
    assert report["text"] == body.decode()
    records = [orjson.loads(line) for line in expected.stdout.splitlines()]
    lengths = sorted(r["length"] for r in records)
    summary = report["summary"]
    assert summary["chunks"] == len(records)
    assert (summary["min"], summary["max"]) == (lengths[0], lengths[-1])
    assert summary["tokens"] == sum(r["tokens"] for r in records)
    # The code points in more than one chunk, counted point by point.
    cover = [0] * len(report["text"])
    for r in records:
        for i in range(r["start"], r["end"]):
            cover[i] += 1
    assert summary["repeated"] == sum(c - 1 for c in cover if c > 1)


def test_options_the_page_has_no_control_for_apply_to_every_split():
    """``chunkd serve --language python --keep-separator none``: every split is the
    filter's with those options (the page offers strategies, sizes and overlaps)."""
    body = (pathlib.Path(__file__).parent.parent.parent / "chunkd" / "web" / "serve.py").read_bytes()
    fixed = ("--language", "python", "--keep-separator", "none")
    with Serve(*fixed) as serve:
        status, report = split(serve, body, chars="300", overlap="0")
    expected = run_chunkd("--count-tokens", *fixed, "--chars", "300", "--overlap", "0",
                          input=body)
    plain = run_chunkd("--count-tokens", "--chars", "300", "--overlap", "0", input=body)
    assert status == 200 and report["settings"]["language"] == "python"
    assert report["jsonl"] == expected.stdout.decode() != plain.stdout.decode()


def test_a_named_document_is_a_file_to_the_filter(server, tmp_path):
    (tmp_path / "notes.md").write_bytes(DOCUMENT.read_bytes())
    status, report = split(server, DOCUMENT.read_bytes(), chars=400, doc="notes.md")
    expected = run_chunkd("--count-tokens", "--chars", "400", "notes.md", cwd=tmp_path)
    assert status == 200 and report["doc"] == "notes.md"
    assert report["jsonl"] == expected.stdout.decode()


@pytest.mark.parametrize("params, filter_options", [
    ({"chars": "100", "overlap": "100"}, ["--chars", "100", "--overlap", "100"]),
    ({"chars": "10", "tokens": "10"}, ["--chars", "10", "--tokens", "10"]),
    ({"chars": "ten"}, ["--chars", "ten"]),
    ({"strategy": "nonesuch", "chars": "10"}, ["--strategy", "nonesuch", "--chars", "10"]),
    ({"chars": "100", "parent-tokens": "400"}, ["--chars", "100", "--parent-tokens", "400"]),
])
def test_bad_settings_get_the_filters_message(server, params, filter_options):
    status, answer = split(server, b"some text", **params)
    refused = run_chunkd(*filter_options, input=b"some text")
    assert refused.returncode == 2
    message = refused.stderr.decode().splitlines()[-1]
    assert status == 400 and f"chunkd: error: {answer['error']}" == message


def test_invalid_utf8_gets_the_filters_message(server, tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"ok \xff then")
    status, answer = split(server, b"ok \xff then", chars=10, doc="bad.txt")
    refused = run_chunkd("--chars", "10", "bad.txt", cwd=tmp_path)
    assert status == 400 and f"chunkd: {answer['error']}\n" == refused.stderr.decode()
    status, report = split(server, b"ok \xff then", chars=10, errors="replace")
    assert status == 200 and report["text"] == "ok \ufffd then"


def test_unknown_paths_and_parameters(server):
    status, answer = split(server, b"text", chars=10, colour="red")
    assert status == 400 and answer["error"] == (
        "unknown parameter 'colour'; a split takes strategy, chars, tokens, size, overlap, "
        "parent-chars, parent-tokens, parent-overlap, errors and doc")
    for path in ("/../../etc/passwd", "/chunkd/serve.py", "/web/app.js", "/api/split"):
        status, _, _ = request(server, "GET", path, host=f"127.0.0.1:{server.port}")
        assert status == 404, path


def test_every_answer_carries_the_security_headers(server):
    for path, content_type in [("/", "text/html"), ("/app.js", "text/javascript"),
                               ("/style.css", "text/css"), ("/api/config", "application/json"),
                               ("/nonesuch", "text/plain")]:
        _, headers, _ = request(server, "GET", path, host=f"127.0.0.1:{server.port}")
        assert headers["Content-Type"].startswith(content_type)
        policy = headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "connect-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert headers["X-Content-Type-Options"] == "nosniff"


def test_config_offers_every_strategy(server):
    _, _, data = request(server, "GET", "/api/config", host=f"127.0.0.1:{server.port}")
    config = orjson.loads(data)
    recursive = next(s for s in config["strategies"] if s["name"] == "recursive")
    assert recursive["units"] == ["chars", "tokens"] and not recursive["window"]
    assert config["max_bytes"] == 100000


def test_a_strategy_the_server_has_no_model_for_is_refused_saying_so(server):
    """semantic needs a model, which only the server's --embed gives: the page does not
    offer it, and a request for it gets a 400 that says what the server lacks."""
    _, _, data = request(server, "GET", "/api/config", host=f"127.0.0.1:{server.port}")
    unavailable = {s["name"]: s["unavailable"] for s in orjson.loads(data)["strategies"]}
    refusal = run_chunkd("--strategy", "semantic", input=b"text").stderr.decode()
    reason = refusal.splitlines()[-1].removeprefix("chunkd: error: ")
    assert reason.startswith("--strategy semantic needs a model: --embed MODEL")
    assert unavailable.pop("semantic") == reason
    for asking in ("llm", "propositions"):  # nor those that ask an LLM, which it has not
        said = run_chunkd("--strategy", asking, input=b"text").stderr.decode()
        assert unavailable.pop(asking) == said.splitlines()[-1].removeprefix("chunkd: error: ")
    assert set(unavailable.values()) == {None}
    for params in ({"strategy": "semantic"}, {"strategy": "semantic", "tokens": "50"}):
        status, answer = split(server, b"One sentence. Another one.", **params)
        assert status == 400 and answer["error"] == (
            f"this chunkd serve cannot split with --strategy semantic: {reason}, which only "
            "the server's own options give (start chunkd serve with them)")


def test_a_request_that_names_no_strategy_gets_the_servers():
    body = DOCUMENT.read_bytes()
    with Serve("--strategy", "markdown", "--chars", "300") as serve:
        status, report = split(serve, body, chars="500")
        _, other = split(serve, body, strategy="recursive", chars="500")
    expected = run_chunkd("--count-tokens", "--strategy", "markdown", "--chars", "500", input=body)
    assert status == 200 and report["settings"]["strategy"] == "markdown"
    assert report["jsonl"] == expected.stdout.decode()
    assert other["settings"]["strategy"] == "recursive"


@pytest.mark.slow
def test_a_semantic_server_serves_requests_that_name_no_or_another_strategy():
    """chunkd serve --strategy semantic --embed MODEL: a request with no strategy gets
    semantic chunks and their curve, one for another strategy gets that strategy (the
    model is dropped), and a semantic request's bad choice gets the filter's message."""
    from embedding import model_folder

    body = DOCUMENT.read_bytes()[:3000]
    model = model_folder()
    with Serve("--strategy", "semantic", "--embed", model) as serve:
        status, semantic = split(serve, body, tokens="100")
        _, recursive = split(serve, body, strategy="recursive", chars="400")
        _, sentences = split(serve, body, strategy="sentences", size="3")
        refused, answer = split(serve, body, overlap="10")
    assert status == 200 and semantic["settings"]["strategy"] == "semantic"
    assert semantic["jsonl"] == run_chunkd("--count-tokens", "--strategy", "semantic", "--embed",
                                           model, "--tokens", "100", input=body).stdout.decode()
    assert len(semantic["curve"]["points"]) > 10
    assert recursive["jsonl"] == run_chunkd("--count-tokens", "--chars", "400",
                                            input=body).stdout.decode()
    assert sentences["jsonl"] == run_chunkd("--count-tokens", "--strategy", "sentences", "--size",
                                            "3", input=body).stdout.decode()
    assert recursive["curve"] is None and sentences["curve"] is None
    filtered = run_chunkd("--strategy", "semantic", "--embed", model, "--overlap", "10",
                          input=body)
    assert refused == 400 and filtered.returncode == 2
    assert f"chunkd: error: {answer['error']}" == filtered.stderr.decode().splitlines()[-1]


def test_an_llm_server_serves_the_other_strategies_and_says_the_llms_failure(monkeypatch):
    """chunkd serve --strategy llm --llm-url URL --llm-window N: a request for the
    propositions strategy gets the filter's records without the window it does not
    read, one for recursive none of the LLM's options; an endpoint that fails is said
    as the filter says it (502), never with the key."""
    from chat_server import serving

    key = "sk-serve-Very-Secret-1234"
    monkeypatch.setenv("CHUNKD_LLM_API_KEY", key)
    body = b"Owls hunt at night. Their feathers make no sound in flight.\n"
    statement = orjson.dumps({"chunks": [{"title": "Owls", "summary": "About owls.",
                                          "propositions": ["Owls hunt at night."]}]})
    with serving(lambda request, prompt: statement.decode()) as chat:
        llm = ("--llm-url", chat.url, "--llm-model", "toy-llm")
        expected = run_chunkd("--count-tokens", "--strategy", "propositions", "--chars", "200",
                              *llm, input=body)
        with Serve("--strategy", "llm", *llm, "--llm-window", "4096") as serve:
            status, propositions = split(serve, body, strategy="propositions", chars="200")
            _, recursive = split(serve, body, strategy="recursive", chars="30")
            chat.failing = "Owls"
            failed, answer = split(serve, body, strategy="propositions", chars="200")
            log = serve.stop()[1]
        filtered = run_chunkd("--strategy", "propositions", *llm, input=body)
    assert status == 200 and propositions["jsonl"] == expected.stdout.decode()
    assert propositions["notes"] == [line.split(": ", 2)[2] for line in
                                     expected.stderr.decode().splitlines()[:-1]]
    assert propositions["summary"]["statements"] == {"exact": 1, "approximate": 0,
                                                     "unsupported": 0}
    assert recursive["jsonl"] == run_chunkd("--count-tokens", "--chars", "30",
                                            input=body).stdout.decode()
    assert failed == 502 and filtered.returncode == 1
    assert filtered.stderr.decode().splitlines()[0].endswith(f": {answer['error']}")
    assert "HTTP 500" in answer["error"] and key not in answer["error"] + log


def test_a_busy_port_is_a_clear_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([chunkd_command(), "serve", "--port", str(port)],
                                capture_output=True, timeout=HANG)
    assert result.returncode == 2
    assert result.stderr.decode() == (f"chunkd serve: cannot listen on 127.0.0.1 port {port}: "
                                      "Address already in use\n")


def test_bad_options_are_usage_errors():
    for options in (["--port", "70000"], ["--max-bytes", "0"], ["--chars", "5", "--overlap", "9"],
                    ["--max-chunks", "0"], ["--time-limit", "0"], ["--idle-timeout", "nan"]):
        result = run_chunkd("serve", *options)
        assert result.returncode == 2, options
        assert result.stderr.decode().splitlines()[-1].startswith("chunkd serve: error: ")


def test_ctrl_c_stops_it():
    serve = Serve()
    status, stderr = serve.stop(signal.SIGINT)
    assert (status, stderr) == (0, "")
