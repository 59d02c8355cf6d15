"""An OpenAI-compatible chat endpoint on loopback for the tests of ``--llm-url``: a real
HTTP server in a thread that records every request and answers each chunk's context,
scripted to fail as servers do."""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import threading
import time
from collections.abc import Callable, Iterator

#: How long a gathered request waits for the others (a bound on a hang, not a speed).
GATHER_WAIT = 5.0


def context_of(chunk: str) -> str:
    """The server's context for a chunk: made from its text, so a test can tell that
    each record got its own chunk's."""
    return f"Context of {len(chunk)} code points starting {chunk[:12]!r}."


def chunk_in(prompt: str) -> str:
    """The chunk a prompt asks about (chunkd's prompt, or a test's that keeps the tags)."""
    found = re.search(r"<chunk>\n(.*)\n</chunk>", prompt, re.S)
    assert found, prompt[-300:]
    return found.group(1)


class ChatServer(http.server.ThreadingHTTPServer):
    """``POST /v1/chat/completions`` on loopback. Each request is kept as
    ``(arrived, answered, headers, body)`` (``answered`` set just before its answer goes).
    ``faults``: what the next requests get, in order ("429" with ``Retry-After: 0``,
    "500", "redirect" to ``location``, "slow" (held until ``release``), "drip" (a byte
    at a time, never done), "empty" (an empty completion), "bad json"); ``failing``:
    a chunk (or a prompt without one) holding it always gets 500. ``reply``: the text
    of each answer, from the request's body and its prompt. ``gather``: a request but a
    document's first (by its ``prompt_cache_key``) is held until that many have been in
    flight at once (or ``GATHER_WAIT`` passed), so that concurrency is seen;
    ``in_flight`` and ``peak`` count them. Usage: a token per 4 UTF-8 bytes, those of a
    prompt's part before ``<chunk>`` counted cached when a request with the same
    ``prompt_cache_key`` was answered before. ``models`` and ``props``: what ``GET
    /v1/models`` and ``GET /props`` answer (else 404)."""

    def __init__(self, reply: Callable[[dict, str], str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), ChatHandler)
        #: The completion's text for a request's body and its prompt: by default, the
        #: context of the chunk the prompt asks about (``context_of``).
        self.reply = reply or (lambda body, prompt: context_of(chunk_in(prompt)))
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.requests: list[list] = []
        self.faults: list[str] = []
        self.failing: str | None = None
        self.location = ""
        self.release = threading.Event()
        self.counting = threading.Condition()
        self.in_flight = self.peak = 0
        self.gather: int | None = None
        self.warm: set[str] = set()
        self.models: dict | None = None
        self.props: dict | None = None
        self.gets: list[str] = []
        #: Cached tokens said as llama.cpp's server says them (``timings.cache_n``).
        self.llama = False
        #: The prompt tokens the server reads at most, as Ollama's ``num_ctx`` (it
        #: cuts the rest, and says it read this many).
        self.reads: int | None = None

    def bodies(self) -> list[dict]:
        return [body for _, _, _, body in self.requests]


class ChatHandler(http.server.BaseHTTPRequestHandler):
    server: ChatServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.gets.append(self.path)
        found = {"/v1/models": self.server.models, "/props": self.server.props}.get(self.path)
        if found is None:
            self.send_error(404)
            return
        self.send_json(found)

    def send_json(self, value: object) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.entry = entry = [time.monotonic(), None, dict(self.headers), body]
        server.requests.append(entry)
        fault = server.faults.pop(0) if server.faults else None
        prompt = body["messages"][0]["content"]
        with server.counting:
            server.in_flight += 1
            server.peak = max(server.peak, server.in_flight)
            server.counting.notify_all()
            if server.gather is not None and body.get("prompt_cache_key") in server.warm:
                server.counting.wait_for(lambda: server.peak >= server.gather, GATHER_WAIT)
        try:
            self.answer(fault, body, prompt)
        except OSError:  # the client gave up (a timeout)
            pass
        finally:
            entry[1] = entry[1] or time.monotonic()

    def answer(self, fault: str | None, body: dict, prompt: str) -> None:
        server = self.server
        # (a context's prompt shares the document up to its chunk; another, nothing)
        shared, own = prompt.partition("<chunk>")[0::2] if "<chunk>" in prompt else ("", prompt)
        if fault in ("429", "500") or (server.failing and server.failing in own):
            self.leave()
            self.send_response(int(fault or 500))
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "redirect":
            self.leave()
            self.send_response(307)
            self.send_header("Location", server.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "slow":
            server.release.wait(10)
        if fault == "drip":
            self.leave()
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            while not server.release.wait(0.05):
                self.wfile.write(b" ")
                self.wfile.flush()
            return
        key = body.get("prompt_cache_key", "")
        cached = len(shared.encode()) // 4 if key in server.warm else 0
        server.warm.add(key)
        content = "" if fault == "empty" else server.reply(body, prompt)
        answer = {"id": "x", "object": "chat.completion", "model": body["model"],
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": content}}],
                  "usage": {"prompt_tokens": min(len(prompt.encode()) // 4,
                                                 server.reads or len(prompt)),
                            "completion_tokens": len(content.encode()) // 4,
                            "prompt_tokens_details": {"cached_tokens": cached}}}
        if server.llama:
            del answer["usage"]["prompt_tokens_details"]
            answer["timings"] = {"cache_n": cached, "prompt_n": len(prompt.encode()) // 4 - cached}
        self.leave()
        if fault == "bad json":
            data = b"{not json"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_json(answer)

    def leave(self) -> None:
        """Out of the count, and answered, before the answer goes: the client may send
        its next request as soon as it has it."""
        self.entry[1] = time.monotonic()
        with self.server.counting:
            self.server.in_flight -= 1


@contextlib.contextmanager
def serving(reply: Callable[[dict, str], str] | None = None) -> Iterator[ChatServer]:
    """A chat server on loopback that answers with ``reply`` (by default, a context),
    stopped when the block ends."""
    server = ChatServer(reply)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
