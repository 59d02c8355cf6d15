"""``chunkd serve``: the preview page on a local web server.

    chunkd serve                       # http://127.0.0.1:8000/, loopback only
    chunkd serve --tokens 300 --port 8080

The page (``chunkd.web``) posts a document to ``/api/split`` with its choices as query
parameters named like the command-line options (``?strategy=recursive&tokens=300&
overlap=15%25&parent-tokens=1200``). A request is never parsed as command-line
arguments: it takes only the flags of the options declared ``request``
(``chunkd.settings``), each value read by its flag's own conversion and the settings
made and checked as the filter's are, so they mean the same and are refused with the
same message; a request that names no strategy gets the server's (``--strategy``), and
one that names a strategy the server cannot split with (semantic, on a server started
without a model) is told what the server lacks. The other options (``--language``, ``--separators``, ...) are the
server's, fixed when it started; so is ``--tokenizer``, loaded once at start: a request
never names a file of the server.
The answer is a report: the filter's records for that document, with exact token
counts, and a summary. A request that accepts ``application/x-ndjson`` (the page's)
gets the split's progress as it goes instead, a line at most every
``PROGRESS_INTERVAL`` seconds (``{"progress": {"of": "sentences", "done": 96,
"total": 431}}``: the document's code points fed to the chunker, the semantic
strategy's sentences embedded), then ``{"status": 200, "answer": REPORT}`` (or the
status and ``{"error": ...}`` the request would have had); a client that closes the
connection meanwhile stops its split, one that only ends its sending (a half-close)
gets its answer (``chunkd.processes.forked.read_until_end`` tells them apart).

Safety, for a page that holds the user's documents: it listens on the loopback
address unless ``--host`` says otherwise; it answers only requests whose Host names
this server as the connection reached it, with its port (the address reached,
``localhost`` on a loopback address, the ``--host`` name, this machine's name when it
listens on every address: never a DNS name rebound to it by a foreign web page);
a post that carries an Origin must come from exactly that origin (a browser always
sends one; a program on the machine such as curl need not). Every answer, errors
included, carries a Content-Security-Policy that lets the page load nothing but its
own files.

Bounds, so that one request cannot take the machine: the body (``--max-bytes``); each
split runs in a process of its own, forked for it, killed after ``--time-limit``
seconds, with at most ``SPLIT_MEMORY`` more memory than the server, giving at most
``--max-chunks`` chunks holding at most four times the document's text
(``MAX_ANSWER`` bytes of answer); ``SPLITS_AT_ONCE`` splits at once;
``MAX_CONNECTIONS`` connections at once, each closed after ``--idle-timeout``
seconds without a byte. A regular expression the server was started with
(``--separators`` with ``--separator-regex``) thus cannot stop it either.

Exit status: 0 stopped by Ctrl-C or SIGTERM, 1 the address could not be written to
stdout, 2 bad options or an address it cannot listen on.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson

from chunkd.model.version import __version__
from chunkd.net.server import MAX_CONNECTIONS, BoundedHandler, BoundedServer
from chunkd.processes.forked import (ANSWER, PROGRESS, ClientGone, keep_only_descriptors, limit_memory,
                          read_until_end, write_all)
from chunkd.inputs import HEAD_BYTES, Limits, add_max_bytes_option
from chunkd.embeddings.selection import MODEL_OPTIONS, VECTORS, takes_model
from chunkd.llm.options import OPTIONS_BY_NAME as LLM_OPTIONS, strategy_reads
from chunkd.processes.stdio import EXIT_FAILED, EXIT_OK, EXIT_USAGE, silence_stdout
from chunkd.inputs.readers import InputError
from chunkd.model.errors import EmbedError, LLMError
from chunkd.pipeline import read_document
from chunkd.settings import (CommandParser, Settings, SettingsError, add_settings_options,
                             flags, given_flags, options, parse_with_settings,
                             settings_from_flags)
from chunkd.strategies import REGISTRY, Source, build
from chunkd.web import (ASSETS, ReportTooLarge, Told, asset, report, strategy_descriptions,
                        with_token_counts)

DEFAULT_PORT = 8000
DEFAULT_MAX_CHUNKS = 100_000
DEFAULT_TIME_LIMIT = 60.0
DEFAULT_IDLE_TIMEOUT = 20.0
#: The most splits at once, a process each (reading the document included); another
#: waits for one to end, up to the time limit.
SPLITS_AT_ONCE = 2
#: The memory (address space) a split's process may take beyond the server's own.
SPLIT_MEMORY = 2 * 2**30
#: The largest answer a split gives (the report as JSON).
MAX_ANSWER = 512 * 2**20
#: The chunks of a document may hold at most this many times its code points (plus a
#: mebibyte, for short documents): more repeats it over and over (the overlap).
REPEAT_BOUND = 4
#: The least time between two progress lines of a split (the first and the last of
#: each count always go).
PROGRESS_INTERVAL = 0.25
#: The media type of an answer with progress lines (the request accepts it).
NDJSON = "application/x-ndjson"

#: The page loads its own script, style and data, nothing else, and cannot be framed.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                           "connect-src 'self'; base-uri 'none'; form-action 'none'; "
                           "frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}

#: How long a refused body is still read (and dropped), so that the client, still
#: sending, gets the answer rather than a reset connection; a connection turned away
#: (more than ``MAX_CONNECTIONS``) too.
DRAIN_SECONDS = 5.0

def settings_from_query(query: str, server: Settings,
                        unavailable: Mapping[str, str] | None = None) -> tuple[Settings, str | None]:
    """The settings and the document name (``doc``) of a split request; the settings
    a request cannot choose are ``server``'s, and so is the strategy where it names
    none. Bad values raise ``SettingsError`` (or ``ValueError``, for a malformed query)
    with the option's message; a strategy in ``unavailable`` (``unavailable_strategies``),
    with what the server lacks."""
    request = {flag.key.replace("_", "-"): flag for option, flag in flags() if option.request}
    values: dict[str, object] = {}
    name = None
    pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query),
                      max_num_fields=len(request) + 1)
    for key, value in pairs:
        if key in values or (key == "doc" and name is not None):
            raise SettingsError(f"{key} is given twice")
        if key == "doc":
            name = value or None
        elif key not in request:
            raise SettingsError(f"unknown parameter {key!r}; a split takes "
                                f"{', '.join(request)} and doc")
        else:
            try:
                values[key] = request[key].read(value)
            except argparse.ArgumentTypeError as error:
                raise SettingsError(f"argument --{key}: {error}") from None
    strategy = str(values.setdefault("strategy", server.strategy))
    if unavailable and strategy in unavailable:
        raise SettingsError(f"this chunkd serve cannot split with --strategy {strategy}: "
                            f"{unavailable[strategy]}, which only the server's own options "
                            "give (start chunkd serve with them)")
    # The server's own settings, less those the requested strategy does not take (a
    # server started with --strategy semantic --embed MODEL, or --strategy propositions
    # --llm-url URL, serves the others too), and less those it did not set (a default
    # implied by its strategy, as the semantic model's tokenizer, is the requested
    # strategy's own).
    asked = REGISTRY.get(strategy)
    uses_model = takes_model({"strategy": strategy, "vectors": server[VECTORS]})
    server_own = {option.name: server[option] for option in server.set_options()
                  if not option.request
                  and (asked is None or option.applies is None or option.applies(asked))
                  and (uses_model or option.name not in MODEL_OPTIONS)
                  and (option.name not in LLM_OPTIONS or strategy_reads(strategy, option.name))}
    return (settings_from_flags({request[key].key: value for key, value in values.items()},
                                base=server_own | {"count_tokens": True}), name)


def unavailable_strategies(server: Settings) -> dict[str, str]:
    """The strategies that no request can split with on this server, whatever else it
    chooses, and why: what the server's own settings lack (a model, for semantic)."""
    refused = {}
    for name in REGISTRY:
        try:
            settings_from_query(urlencode({"strategy": name}), server)
        except SettingsError as error:
            refused[name] = str(error)
    return refused


# --- who may ask ---------------------------------------------------------------------

def parse_authority(authority: str) -> tuple[str, int | None] | None:
    """The (name, port) in a Host header or an origin's authority: the name in lower
    case, an IP address written as ``ipaddress`` writes it; None if malformed."""
    if authority.startswith("["):
        name, bracket, rest = authority[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
    else:
        name, colon, port = authority.partition(":")
        port = port if colon else None
    if port is not None and not (port.isascii() and port.isdigit() and int(port) < 65536):
        return None
    return canonical(name), None if port is None else int(port)


def canonical(name: str) -> str:
    """A host name in lower case; an IP address written one way (an IPv4 address
    mapped into IPv6 as IPv4)."""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return name.lower()
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


class Names:
    """The names under which a browser reaches this server: the address the
    connection reached (it cannot be rebound by a foreign site's DNS), ``localhost``
    on a loopback address, the ``--host`` given, and this machine's name when it
    listens on every address. Another IP address, another port or any other name
    (``evil.localhost`` too) is not this server."""

    def __init__(self, host: str, everywhere: bool) -> None:
        self.given = {canonical(host.strip("[]"))}
        if everywhere:
            self.given.add(socket.gethostname().lower())

    def of(self, local_address: str) -> set[str]:
        """The names of this server for a connection that reached ``local_address``."""
        local = canonical(local_address)
        names = self.given | {local}
        if ipaddress.ip_address(local).is_loopback:
            names.add("localhost")
        return names


# --- splits, each in a process of its own --------------------------------------------

class Splits:
    """Runs each split in a process forked for it, so that nothing a request runs (a
    regular expression that backtracks for ever, a setting that makes millions of
    chunks) can hold the server: the process is killed at the time limit, its memory
    is bounded, and the server goes on answering and stops at once on SIGTERM."""

    def __init__(self, time_limit: float, max_chunks: int, max_bytes: int) -> None:
        self.time_limit = time_limit
        self.max_chunks = max_chunks
        self.max_bytes = max_bytes
        self.slots = threading.BoundedSemaphore(SPLITS_AT_ONCE)
        self.running: set[int] = set()
        self.lock = threading.Lock()

    def split(self, settings: Settings, body: bytes, name: str | None,
              told: Callable[[dict], None] | None = None,
              client: socket.socket | None = None) -> tuple[int, bytes]:
        """The status and JSON answer of a split (run within a slot: see ``slots``);
        ``told`` is given its progress as it goes. ``ClientGone`` (the split stopped)
        once ``client``, the connection that asked for it, has closed."""
        read_end, write_end = os.pipe()
        with self.lock:  # stop() sees every process
            try:
                pid = os.fork()
            except OSError as error:  # out of processes or memory: the machine is busy
                os.close(read_end)
                os.close(write_end)
                return 503, _error(f"cannot start a split: {error.strerror or error}; "
                                   "try again")
            if pid == 0:
                os.close(read_end)
                _split_in_child(write_end, settings, body, name, self.max_chunks,
                                self.max_bytes, self.time_limit, told is not None)
            self.running.add(pid)
        os.close(write_end)
        try:
            answer = read_until_end(read_end, time.monotonic() + self.time_limit, told, client)
        finally:
            os.close(read_end)
            with self.lock:  # a pid stop() may kill is never one reaped (and reused)
                os.kill(pid, signal.SIGKILL)  # at the limit; or a process already ending
                self.running.discard(pid)
            _, ended = os.waitpid(pid, 0)
        if answer is None:
            return 422, _error(f"the split took more than {self.time_limit:g} s, the most "
                               "this server gives one (--time-limit); choose a larger size, "
                               "or split a smaller document")
        if len(answer) < 2:
            how = (f"signal {signal.Signals(os.WTERMSIG(ended)).name}"
                   if os.WIFSIGNALED(ended) else f"status {os.WEXITSTATUS(ended)}")
            return 500, _error(f"the split failed: its process ended with {how} (a split "
                               f"may take {SPLIT_MEMORY // 2**30} GiB of memory)")
        return int.from_bytes(answer[:2], "big"), answer[2:]

    def stop(self) -> None:
        """Kill the splits still running (the server is stopping)."""
        with self.lock:
            for pid in self.running:
                os.kill(pid, signal.SIGKILL)


class _ProgressLines:
    """Tells a split's progress (``chunkd.web.Told``) on its pipe: the first and the
    last of each count, and others at most every ``PROGRESS_INTERVAL`` seconds."""

    def __init__(self, out: int) -> None:
        self.out = out
        self.sent: tuple[str, int, int] | None = None
        self.when = -math.inf

    def __call__(self, of: str, done: int, total: int) -> None:
        now, sent = time.monotonic(), self.sent
        if sent == (of, done, total) or (sent is not None and sent[0] == of and done < total
                                          and now - self.when < PROGRESS_INTERVAL):
            return
        self.sent, self.when = (of, done, total), now
        write_all(self.out, PROGRESS + orjson.dumps({"of": of, "done": done,
                                                      "total": total}) + b"\n")


def _split_in_child(out: int, settings: Settings, body: bytes, name: str | None,
                    max_chunks: int, max_bytes: int, time_limit: float,
                    progress: bool) -> NoReturn:
    """A split's process: write its progress (if asked), then ``ANSWER``, the status
    (two bytes) and the answer, to ``out``."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the server kills it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(math.ceil(time_limit) + 5)  # ends it even if the server was killed
        keep_only_descriptors({0, 1, 2, out})  # the listening socket and connections too
        limit_memory(SPLIT_MEMORY)
        status, answer = _split(settings, body, name, max_chunks, max_bytes,
                                _ProgressLines(out) if progress else None)
        write_all(out, ANSWER + status.to_bytes(2, "big") + answer)
    finally:
        os._exit(0)


def _split(settings: Settings, body: bytes, name: str | None, max_chunks: int,
           max_bytes: int, told: Told | None) -> tuple[int, bytes]:
    """The status and JSON answer of one split (in its own process)."""
    try:
        text, source = _document(body, name, settings, max_bytes)
        data = orjson.dumps(report(settings, text, name, max_chunks=max_chunks,
                                   max_points=REPEAT_BOUND * len(text) + 2**20,
                                   source=source, told=told))
    except InputError as error:
        return 400, _error(str(error))
    except ReportTooLarge as error:
        return 422, _error(str(error))
    except (EmbedError, LLMError) as error:  # the server's model or LLM failed: said as
        return 502, _error(str(error))      # the filter says it, not as chunkd's fault
    except MemoryError:
        return 422, _error(f"the split needs more than the {SPLIT_MEMORY // 2**30} GiB of "
                           "memory a split may take; choose a larger size, or split a "
                           "smaller document")
    except Exception as error:  # a fault in a strategy: said, not a silent empty answer
        return 500, _error(f"the split failed: {type(error).__name__}: {error}")
    if len(data) > MAX_ANSWER:
        return 422, _error(f"the answer would be {_size(len(data))}, more than this server "
                           f"sends ({_size(MAX_ANSWER)}); choose a larger size or a smaller "
                           "overlap")
    return 200, data


def _document(body: bytes, name: str | None, settings: Settings,
              max_bytes: int) -> tuple[str, Source | None]:
    """The text of a posted document and what is known of it: a document of a
    registered format (by its content, then its name) is extracted here, in the split's
    bounded process, its text at most ``max_bytes`` (the server's ``--max-bytes``);
    anything else is UTF-8 text."""
    document = read_document(name, body[:HEAD_BYTES], [body], name or "the document",
                             settings.errors, Limits(max_bytes), here=True)
    return "".join(document.blocks), document.source if document.extracted is not None else None


def _error(message: str) -> bytes:
    return orjson.dumps({"error": message})


# --- the server ----------------------------------------------------------------------

class PageServer(BoundedServer):
    """The HTTP server of one ``chunkd serve``: ``MAX_CONNECTIONS`` connections at
    once, each closed after its idle timeout (``chunkd.net.server``)."""

    drain_seconds = DRAIN_SECONDS
    busy_message = ("chunkd serve: {max_connections} connections are open, the most it "
                    "takes; try again\n")
    busy_headers = SECURITY_HEADERS

    def __init__(self, host: str, port: int, initial: dict, max_bytes: int,
                 settings: Settings | None = None, max_chunks: int = DEFAULT_MAX_CHUNKS,
                 time_limit: float = DEFAULT_TIME_LIMIT,
                 idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> None:
        self.max_bytes = max_bytes
        self.settings = settings or Settings()  # those the page has no control for
        self.splits = Splits(time_limit, max_chunks, max_bytes)
        #: The strategies no request can split with here, and why (a model it lacks).
        self.unavailable = unavailable_strategies(self.settings)
        self.config = orjson.dumps({"chunker": f"chunkd {__version__}",
                                    "tokenizer": self.settings.token_measure.name,
                                    "strategies": [
                                        kind | {"unavailable": self.unavailable.get(kind["name"])}
                                        for kind in strategy_descriptions()],
                                    "initial": initial, "max_bytes": max_bytes})
        super().__init__(host, port, PageHandler, idle_timeout)
        self.names = Names(host, self.everywhere)

    @property
    def bound_host(self) -> str:
        """The address it listens on (``server_address[0]``), an IP address."""
        host = self.server_address[0]
        assert isinstance(host, str), "bound to getaddrinfo's (host, port...), host a str"
        return host

    @property
    def everywhere(self) -> bool:
        """Whether it listens on every address (0.0.0.0 or ::)."""
        return ipaddress.ip_address(self.bound_host).is_unspecified

    @property
    def url(self) -> str:
        host, port = self.bound_host, self.server_address[1]
        if self.everywhere:
            host = socket.gethostname()
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    def connection_ended(self, line: str) -> None:
        """On stderr, as every line of ``chunkd serve``."""
        log(line)


class PageHandler(BoundedHandler):
    """The page's files, its configuration, and ``POST /api/split``. Its request's
    line and headers have the server's idle timeout as deadline
    (``BoundedHandler``); its body, one of its own (``read_body``)."""

    server: PageServer
    server_version = "chunkd"
    sys_version = ""

    def do_GET(self) -> None:
        if not self.check_host():
            return
        path = urlsplit(self.path).path
        if path == "/api/config":
            self.respond(200, self.server.config, "application/json")
        elif path in ASSETS:
            name, content_type = ASSETS[path]
            self.respond(200, asset(name), content_type)
        else:
            self.respond(404, b"not found\n", "text/plain; charset=utf-8")

    def do_POST(self) -> None:
        if not self.check_host() or not self.check_origin():
            return
        parts = urlsplit(self.path)
        if parts.path != "/api/split":
            self.respond(404, b"not found\n", "text/plain; charset=utf-8")
            return
        length = self.body_length()
        if length is None:
            return
        splits = self.server.splits
        if not splits.slots.acquire(timeout=splits.time_limit):
            self.api_error(503, f"{SPLITS_AT_ONCE} splits are running, the most this server "
                                "runs at once; try again")
            self.drain(length)
            return
        streamed = self.accepts(NDJSON)
        try:
            started = time.perf_counter()
            body = self.read_body(length, time.monotonic() + splits.time_limit)
            if body is None:
                return
            try:
                settings, name = settings_from_query(parts.query, self.server.settings,
                                                     self.server.unavailable)
            except (SettingsError, ValueError) as error:
                self.api_error(400, str(error))
                return
            if streamed:
                self.send_head(200, NDJSON, None)
                self.close_connection = True  # the answer ends with the connection
                try:
                    status, data = splits.split(settings, body, name, self.progress_line,
                                                self.connection)
                except ClientGone:
                    self.close_connection = True
                    self.log(f"stopped a split of {_size(len(body))} after "
                             f"{time.perf_counter() - started:.2f} s: its page went away")
                    return
            else:
                status, data = splits.split(settings, body, name)
        finally:
            splits.slots.release()
        if streamed:
            self.wfile.write(b'{"status":%d,"answer":%b}\n' % (status, data))
        else:
            self.respond(status, data, "application/json")
        if status == 200:
            self.log(f"split {_size(len(body))} in {time.perf_counter() - started:.2f} s")
        else:
            self.log(f"refused a split of {_size(len(body))}: "
                     f"{orjson.loads(data)['error']}")

    def accepts(self, media_type: str) -> bool:
        """Whether the request's Accept names ``media_type``."""
        accept = ",".join(self.headers.get_all("Accept", []))
        return media_type in (part.split(";")[0].strip().lower() for part in accept.split(","))

    def progress_line(self, progress: dict) -> None:
        """A split's progress, a line of the streamed answer; ``ClientGone`` if it
        cannot be written (the page went away, or stopped reading)."""
        try:
            self.wfile.write(orjson.dumps({"progress": progress}) + b"\n")
        except OSError:
            raise ClientGone from None

    def check_host(self) -> bool:
        """Answer only requests for this server's names and port (DNS rebinding)."""
        host = self.headers.get("Host")
        if host is None:
            self.refuse(400, "no Host header")
            return False
        if len(self.headers.get_all("Host", [])) > 1:  # which one would a proxy have read?
            self.refuse(400, "more than one Host header")
            return False
        if self.own_authority(host) is None:
            self.refuse(403, f"Host {host!r} is not a name of this server (a DNS name "
                             "pointed here by another site?); open "
                             f"{self.server.url} instead")
            return False
        return True

    def own_authority(self, authority: str) -> tuple[str, int] | None:
        """``authority`` (``name:port``) parsed, if it names this server as this
        connection reached it; else None."""
        parsed = parse_authority(authority)
        if parsed is None:
            return None
        name, port = parsed
        local = self.connection.getsockname()[0]
        if name not in self.server.names.of(local) or (port or 80) != self.server.server_port:
            return None
        return name, port or 80

    def check_origin(self) -> bool:
        """A post that carries an Origin comes from exactly this server's page, as
        reached (the Host): another port, name or address is another site."""
        origin = self.headers.get("Origin")
        site = self.headers.get("Sec-Fetch-Site")
        if origin is None and site in (None, "same-origin"):
            return True  # not a browser: curl, a script on this machine
        if origin is not None and site in (None, "same-origin"):
            parts = urlsplit(origin)
            reached = self.own_authority(self.headers["Host"])  # checked: not None
            if (parts.scheme == "http" and not parts.path and not parts.query
                    and self.own_authority(parts.netloc) == reached):
                return True
        sender = origin or f"another site (Sec-Fetch-Site: {site})"
        self.refuse(403, f"a page from {sender} may not use this server; open "
                         f"{self.server.url} instead")
        return False

    def body_length(self) -> int | None:
        """The request's Content-Length, or None once an error has been answered."""
        length_header = self.headers.get("Content-Length")
        if len(self.headers.get_all("Content-Length", [])) > 1:  # request smuggling's way
            self.api_error(400, "more than one Content-Length header")
            return None
        if self.headers.get("Transfer-Encoding") or length_header is None:
            self.api_error(411, "send the document with a Content-Length")
            return None
        # Digits only: int() also takes "1_6", " +16" and other digits than ASCII's.
        digits = length_header.strip()
        length = int(digits) if digits.isascii() and digits.isdigit() else -1
        if length < 0:
            self.api_error(400, f"bad Content-Length {length_header!r}")
            return None
        if length > self.server.max_bytes:
            self.api_error(413, f"the document is {_size(length)}, more than this server "
                                f"takes ({_size(self.server.max_bytes)}); start it with "
                                "a larger --max-bytes")
            self.drain(length)
            return None
        return length

    def read_body(self, length: int, deadline: float) -> bytes | None:
        """The request's body, read by the deadline; None once the client stalled, went
        away or missed the deadline (answered, if it can still be)."""
        parts, left = [], length
        while left and time.monotonic() < deadline:
            try:
                data = self.rfile.read1(min(left, 1 << 20))
            except TimeoutError:   # nothing more within --idle-timeout: a body cut short
                break
            if not data:
                self.close_connection = True
                return None
            parts.append(data)
            left -= len(data)
        if left:
            self.api_error(408, "the document did not arrive within the time limit")
            self.close_connection = True
            return None
        return b"".join(parts)

    def drain(self, length: int) -> None:
        """Read and drop a refused body for a while: closing a socket with unread
        data resets the connection, and the client might lose the answer."""
        deadline = time.monotonic() + DRAIN_SECONDS
        self.connection.settimeout(1.0)
        try:
            while length > 0 and time.monotonic() < deadline:
                data = self.rfile.read1(min(length, 1 << 16))
                if not data:
                    break
                length -= len(data)
        except OSError:
            pass
        self.close_connection = True

    def api_error(self, status: int, message: str) -> None:
        self.respond(status, _error(message), "application/json")

    def refuse(self, status: int, message: str) -> None:
        self.log(f"refused {self.command} {self.path}: {message}")
        self.respond(status, f"chunkd serve: {message}\n".encode(), "text/plain; charset=utf-8")
        self.close_connection = True

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """http.server's own errors (a method it lacks, a request line too long or
        malformed): one line of text, with the security headers as every answer."""
        if self.request_version in ("", "HTTP/0.9"):
            self.request_version = "HTTP/1.0"  # headers, for a malformed request line too
        self.close_connection = True
        message = message or HTTPStatus(code).phrase
        self.log(f"refused {self.requestline[:200]!r}: {code} {message}")
        self.respond(code, f"chunkd serve: {message}\n".encode(), "text/plain; charset=utf-8",
                     body_too=self.command != "HEAD")

    def respond(self, status: int, body: bytes, content_type: str, *,
                body_too: bool = True) -> None:
        self.send_head(status, content_type, len(body))
        if body_too:
            self.wfile.write(body)

    def send_head(self, status: int, content_type: str, length: int | None) -> None:
        """The status line and headers; without a length, the answer ends with the
        connection (HTTP/1.0)."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length is not None:
            self.send_header("Content-Length", str(length))
        for header, value in SECURITY_HEADERS.items():
            self.send_header(header, value)
        self.end_headers()

    def log(self, line: str) -> None:
        log(line)

    def log_message(self, format: str, *args) -> None:
        """Quiet: one line per split or refusal is written by ``log``."""


def log(line: str) -> None:
    """One line on stderr; nothing if stderr cannot be written (nowhere to say so)."""
    try:
        print(f"chunkd serve: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _size(count: int) -> str:
    return f"{count / 2**20:,.1f} MiB" if count >= 2**20 else f"{count:,} bytes"


# --- the command ---------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="chunkd serve",
        description="Serve a page to try chunkd's settings on your own documents: paste a "
                    "document or open a file, choose a strategy, size and overlap, and see "
                    "each chunk in place, its tokens, the overlap (with --strategy semantic, the "
                    "distance curve, the threshold and the cuts), and the JSONL the filter "
                    "writes. The settings options set the page's first choices; those the page "
                    "has no control for (--language, --separators, --embed-text, ...) apply "
                    "to every split. Nothing "
                    "leaves this machine: the page loads nothing from the network.",
        epilog="Exit status: 0 stopped by Ctrl-C or SIGTERM, 1 the address could not be "
               "written to stdout, 2 bad options or an address it cannot listen on.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address to listen on (default: 127.0.0.1, this machine "
                             "only); 0.0.0.0 or :: offers the page to the network")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the port (default: {DEFAULT_PORT}; 0 picks a free one)")
    add_max_bytes_option(parser, "the largest document it takes, in bytes")
    parser.add_argument("--max-chunks", type=int, default=DEFAULT_MAX_CHUNKS, metavar="N",
                        help="the most chunks a split gives; settings that make more are "
                             f"refused (default: {DEFAULT_MAX_CHUNKS:,})")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="S",
                        help="the longest a split may take, in seconds, before it is "
                             f"stopped and refused (default: {DEFAULT_TIME_LIMIT:g})")
    parser.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT,
                        metavar="S", help="a connection that sends or takes nothing for S "
                                          "seconds, or whose request line and headers take "
                                          "longer, is closed (default: "
                                          f"{DEFAULT_IDLE_TIMEOUT:g})")
    add_settings_options(parser)
    return parser


def _stop(signum: int, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    """``chunkd serve``; returns the exit status."""
    parser = build_parser()
    args, settings = parse_with_settings(parser, argv)
    if settings[VECTORS]:
        parser.error("--vectors is for chunkd, chunkd watch and the Python API (chunkd.arrow, "
                     "chunkd.outputs.vectors)")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be from 0 to 65535, got {args.port}")
    for option in ("max_bytes", "max_chunks"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be at least 1, "
                         f"got {getattr(args, option)}")
    for option in ("time_limit", "idle_timeout"):
        if not 0 < getattr(args, option) <= 86400:
            parser.error(f"--{option.replace('_', '-')} must be more than 0 and at most "
                         f"86400 seconds, got {getattr(args, option):g}")
    signal.signal(signal.SIGTERM, _stop)
    try:
        return serve(args, settings)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, the way to stop it
        return EXIT_OK


def serve(args: argparse.Namespace, settings: Settings) -> int:
    """Listen and answer until interrupted."""
    build(with_token_counts(settings))  # load the tokenizer now, not at the first split
    # The page's first choices: the flags a request may give, as the server was started.
    given = given_flags(args)
    initial = {flag.key: given.get(flag.key) for option, flag in flags() if option.request}
    if settings.unit == "tokens" and initial.get("tokens") is None:  # a tokenizer's default
        initial["tokens"] = settings.size
    try:
        server = PageServer(args.host, args.port, initial, args.max_bytes, settings,
                            max_chunks=args.max_chunks, time_limit=args.time_limit,
                            idle_timeout=args.idle_timeout)
    except (OSError, UnicodeError) as error:
        reason = getattr(error, "strerror", None) or error
        print(f"chunkd serve: cannot listen on {args.host} port {args.port}: {reason}",
              file=sys.stderr)
        return EXIT_USAGE
    with server:
        bound = server.bound_host
        if sys.stdout is None:  # started with stdout closed (>&-)
            log("stdout: not open (Bad file descriptor): nobody would learn the address")
            return EXIT_FAILED
        try:
            print(f"chunkd serve: open {server.url} (Ctrl-C stops it)"
                  + (f"; listening on every address ({bound}): anyone who can reach this "
                     "machine can use the page" if server.everywhere else ""), flush=True)
        except (OSError, ValueError) as error:  # nobody would learn where the page is
            log(f"stdout: {getattr(error, 'strerror', None) or error}")
            silence_stdout()
            return EXIT_FAILED
        try:
            server.serve_forever()
        finally:
            server.splits.stop()
    return EXIT_OK
