"""``chunkd serve``: the preview page on a local web server.

    chunkd serve                       # http://127.0.0.1:8000/, loopback only
    chunkd serve --tokens 300 --port 8080

The page (``chunkd.web``) posts a document to ``/api/split`` with the settings as query
parameters spelled like the command-line options (``?strategy=recursive&tokens=300&
overlap=15%25&parent-tokens=1200``); they are parsed by the same option parser as the
filter's, so they mean the same and are refused with the same message. The answer is a
report: the filter's records for that document, with exact token counts, and a summary.

Safety, for a page that holds the user's documents: it listens on the loopback
address unless ``--host`` says otherwise; it answers only requests whose Host names
this server (an IP address, ``localhost``, the ``--host`` name or this machine's name:
not a DNS name rebound to 127.0.0.1 by a foreign web page), takes posts only from its
own origin, limits the body (``--max-bytes``), and every answer carries a
Content-Security-Policy that lets the page load nothing but its own files.

Exit status: 0 stopped by Ctrl-C or SIGTERM, 2 bad options or an address it cannot
listen on.
"""

from __future__ import annotations

import argparse
import ipaddress
import signal
import socket
import socketserver
import sys
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

import orjson

from chunkd import __version__
from chunkd.output import EXIT_OK, EXIT_USAGE
from chunkd.readers import InputError, decode_blocks
from chunkd.settings import (CommandParser, Settings, SettingsError, add_settings_options,
                             parse_with_settings, settings_from_args)
from chunkd.strategies import build
from chunkd.web import ASSETS, asset, report, strategy_descriptions, with_token_counts

DEFAULT_PORT = 8000
DEFAULT_MAX_BYTES = 64 * 2**20

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
#: sending, gets the answer rather than a reset connection.
DRAIN_SECONDS = 5.0


class _OptionParser(argparse.ArgumentParser):
    """The settings options of every chunkd command; a bad value raises
    ``SettingsError`` with argparse's message instead of exiting."""

    def error(self, message: str):
        raise SettingsError(message)


def settings_from_query(query: str, fixed: list[str]) -> tuple[Settings, str | None]:
    """The settings and the document name (``doc``) of a split request. Every other
    parameter is a settings option without its dashes (``parent-chars=800``); the
    option parser refuses what is not one. ``fixed``: the server's own arguments for
    the settings the page has no control for (``--language python``...)."""
    argv, name = ["--count-tokens", *fixed], None
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        if key == "doc":
            name = value or None
        else:
            argv += [f"--{key}", value]
    parser = _OptionParser(prog="chunkd serve", add_help=False)
    add_settings_options(parser)
    return settings_from_args(parser.parse_args(argv)), name


# --- who may ask ---------------------------------------------------------------------

def split_host(host: str) -> str:
    """The name in a Host header or an origin's authority, without the port."""
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


class Names:
    """The names under which a browser may reach this server. An IP address and
    ``localhost`` cannot be rebound by a foreign site's DNS; other names are trusted
    only when they are the ``--host`` given or this machine's own name."""

    def __init__(self, host: str) -> None:
        self.names = {"localhost", host.lower().strip("[]"), socket.gethostname().lower()}

    def allowed(self, name: str) -> bool:
        name = name.lower().rstrip(".")
        return (is_ip_address(name) or name in self.names
                or name.endswith(".localhost"))  # browsers resolve these to loopback

    def allowed_origin(self, origin: str) -> bool:
        parts = urlsplit(origin)
        return parts.scheme == "http" and self.allowed(split_host(parts.netloc))


# --- the server ----------------------------------------------------------------------

class PageServer(ThreadingHTTPServer):
    """The HTTP server of one ``chunkd serve``."""

    daemon_threads = True

    def __init__(self, host: str, port: int, initial: dict, max_bytes: int,
                 fixed: Sequence[str] = ()) -> None:
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        self.address_family = family
        self.names = Names(host)
        self.max_bytes = max_bytes
        self.fixed = list(fixed)  # settings arguments the page has no control for
        self.config = orjson.dumps({"chunker": f"chunkd {__version__}",
                                    "strategies": strategy_descriptions(),
                                    "initial": initial, "max_bytes": max_bytes})
        super().__init__(address, PageHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks DNS for the host's full name, which can hang on a
        # machine without a resolver; the name is not needed.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        if ipaddress.ip_address(host).is_unspecified:
            host = socket.gethostname()
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


class PageHandler(BaseHTTPRequestHandler):
    """The page's files, its configuration, and ``POST /api/split``."""

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
        if not self.check_host():
            return
        origin = self.headers.get("Origin")
        if origin is not None and not self.server.names.allowed_origin(origin):
            self.refuse(403, f"a page from {origin} may not use this server")
            return
        parts = urlsplit(self.path)
        if parts.path != "/api/split":
            self.respond(404, b"not found\n", "text/plain; charset=utf-8")
            return
        body = self.read_body()
        if body is None:
            return
        try:
            settings, name = settings_from_query(parts.query, self.server.fixed)
            settings = with_token_counts(settings)
            text = "".join(decode_blocks([body], name or "the document", settings.errors))
        except (SettingsError, InputError, ValueError) as error:
            self.api_error(400, str(error))
            return
        started = time.perf_counter()
        data = orjson.dumps(report(settings, text, name))
        self.respond(200, data, "application/json")
        self.log(f"split {len(body):,} bytes in {time.perf_counter() - started:.2f} s")

    def check_host(self) -> bool:
        """Answer only requests for this server's names (DNS rebinding)."""
        host = self.headers.get("Host")
        if host is None:
            self.refuse(400, "no Host header")
            return False
        if not self.server.names.allowed(split_host(host)):
            self.refuse(403, f"Host {host!r} is not a name of this server (a DNS name "
                             "pointed here by another site?); open "
                             f"{self.server.url} instead")
            return False
        return True

    def read_body(self) -> bytes | None:
        """The request's body, or None once an error has been answered."""
        length_header = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length_header is None:
            self.api_error(411, "send the document with a Content-Length")
            return None
        try:
            length = int(length_header)
        except ValueError:
            length = -1
        if length < 0:
            self.api_error(400, f"bad Content-Length {length_header!r}")
            return None
        if length > self.server.max_bytes:
            self.api_error(413, f"the document is {_size(length)}, more than this server "
                                f"takes ({_size(self.server.max_bytes)}); start it with "
                                "a larger --max-bytes")
            self.drain(length)
            return None
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            return None
        return body

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
        self.respond(status, orjson.dumps({"error": message}), "application/json")

    def refuse(self, status: int, message: str) -> None:
        self.log(f"refused {self.command} {self.path}: {message}")
        self.respond(status, f"chunkd serve: {message}\n".encode(), "text/plain; charset=utf-8")
        self.close_connection = True

    def respond(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for header, value in SECURITY_HEADERS.items():
            self.send_header(header, value)
        self.end_headers()
        self.wfile.write(body)

    def log(self, line: str) -> None:
        print(f"chunkd serve: {line}", file=sys.stderr, flush=True)

    def log_message(self, format: str, *args) -> None:
        """Quiet: one line per split or refusal is written by ``log``."""


def _size(count: int) -> str:
    return f"{count / 2**20:,.1f} MiB" if count >= 2**20 else f"{count:,} bytes"


# --- the command ---------------------------------------------------------------------

#: The settings options that set the page's first choices, as ``/api/config`` gives them.
INITIAL_OPTIONS = ("strategy", "chars", "tokens", "size", "overlap", "parent_chars",
                   "parent_tokens", "parent_overlap", "errors")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="chunkd serve",
        description="Serve a page to try chunkd's settings on your own documents: paste a "
                    "document or open a file, choose a strategy, size and overlap, and see "
                    "each chunk in place, its tokens, the overlap, and the JSONL the filter "
                    "writes. The settings options set the page's first choices; those the page "
                    "has no control for (--language, --separators, --embed-text, ...) apply "
                    "to every split. Nothing "
                    "leaves this machine: the page loads nothing from the network.",
        epilog="Exit status: 0 stopped by Ctrl-C or SIGTERM, 2 bad options or an address "
               "it cannot listen on.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address to listen on (default: 127.0.0.1, this machine "
                             "only); 0.0.0.0 or :: offers the page to the network")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the port (default: {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, metavar="N",
                        help="the largest document it takes, in bytes (default: "
                             f"{DEFAULT_MAX_BYTES}, 64 MiB)")
    add_settings_options(parser)
    return parser


def _stop(signum: int, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    """``chunkd serve``; returns the exit status."""
    parser = build_parser()
    args, settings = parse_with_settings(parser, argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be from 0 to 65535, got {args.port}")
    if args.max_bytes < 1:
        parser.error(f"--max-bytes must be at least 1, got {args.max_bytes}")
    signal.signal(signal.SIGTERM, _stop)
    try:
        return serve(args, settings)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, the way to stop it
        return EXIT_OK


def serve(args: argparse.Namespace, settings: Settings) -> int:
    """Listen and answer until interrupted."""
    build(with_token_counts(settings))  # load the tokenizer now, not at the first split
    initial = {name: getattr(args, name) for name in INITIAL_OPTIONS}
    try:
        server = PageServer(args.host, args.port, initial, args.max_bytes,
                            fixed=settings.other_arguments())
    except (OSError, UnicodeError) as error:
        reason = getattr(error, "strerror", None) or error
        print(f"chunkd serve: cannot listen on {args.host} port {args.port}: {reason}",
              file=sys.stderr)
        return EXIT_USAGE
    with server:
        bound = server.server_address[0]
        everywhere = ipaddress.ip_address(bound).is_unspecified
        print(f"chunkd serve: open {server.url} (Ctrl-C stops it)"
              + (f"; listening on every address ({bound}): anyone who can reach this "
                 "machine can use the page" if everywhere else ""), flush=True)
        server.serve_forever()
    return EXIT_OK
