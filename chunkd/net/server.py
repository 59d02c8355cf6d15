"""An HTTP server that a flood of connections cannot take the machine with: at most
``max_connections`` open at once, a thread each (one more is answered 503 at once,
without a thread); a request's line and headers must all arrive within the idle timeout
(a client trickling a byte at a time cannot hold a thread), and a connection is closed
after the idle timeout without a byte. ``chunkd serve`` (``PageServer``) serves its
page with it, ``chunkd watch`` and ``chunkd sync`` their ``--metrics``; a subclass sets
what differs (the class attributes, ``connection_ended``).
"""

from __future__ import annotations

import logging
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger("chunkd")

#: The most connections open at once, a thread each.
MAX_CONNECTIONS = 64
#: Seconds a connection turned away is given to read its 503 before it is closed.
DRAIN_SECONDS = 2.0


class BoundedServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` with a bound on its connections and their idle time;
    its handler must be a ``BoundedHandler``. Call ``serve_forever`` from a thread."""

    daemon_threads = True
    max_connections = MAX_CONNECTIONS
    request_queue_size = MAX_CONNECTIONS
    #: Seconds a connection turned away is given to read its 503 (a client still
    #: sending a large body needs longer than a scraper's GET).
    drain_seconds = DRAIN_SECONDS
    #: The 503's text, ``{max_connections}`` filled in.
    busy_message = ("{max_connections} connections are open, the most this server takes; "
                    "try again\n")
    #: Headers the 503 carries besides its own (those of every answer of the server).
    busy_headers: Mapping[str, str] = {}

    def __init__(self, host: str, port: int, handler: type[BoundedHandler],
                 idle_timeout: float) -> None:
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        assert isinstance(address[0], str), "a stream socket's address is (host, port...)"
        self.address_family = family
        self.idle_timeout = idle_timeout
        self.connections = threading.BoundedSemaphore(self.max_connections)
        self.closing: list[tuple[float, socket.socket]] = []  # turned away, closing
        #: Connections reading a request's line and headers, and when they must be done.
        self.heading: dict[socket.socket, float] = {}
        self.heading_lock = threading.Lock()
        super().__init__(address, handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks DNS for the host's full name, which can hang on a
        # machine without a resolver; the name is not needed.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    def process_request(self, request: socket.socket | tuple[bytes, socket.socket],
                        client_address: tuple) -> None:
        """A thread for the connection, unless ``max_connections`` are open: then a
        503 at once, without a thread (see ``turn_away``)."""
        assert isinstance(request, socket.socket), "a TCP server's request is its socket"
        if not self.connections.acquire(blocking=False):
            self.turn_away(request)
            return
        try:
            super().process_request(request, client_address)
        except RuntimeError:  # no thread could be started: the connection is dropped
            self.connections.release()
            self.shutdown_request(request)

    def turn_away(self, request: socket.socket) -> None:
        """Answer 503 (it fits in the socket's buffer) and end the sending; the
        connection is closed once the client has closed it or within
        ``drain_seconds``, its request read and dropped meanwhile (closing a socket
        with unread data resets the connection, and the client might lose the 503)."""
        message = self.busy_message.format(max_connections=self.max_connections).encode()
        head = [f"HTTP/1.0 503 {HTTPStatus(503).phrase}", "Connection: close",
                "Content-Type: text/plain; charset=utf-8", f"Content-Length: {len(message)}",
                *(f"{header}: {value}" for header, value in self.busy_headers.items())]
        try:
            request.setblocking(False)
            request.send("\r\n".join(head).encode() + b"\r\n\r\n" + message)
            request.shutdown(socket.SHUT_WR)
        except OSError:
            request.close()
            return
        if len(self.closing) >= self.max_connections:  # turned away in a flood: no waiting
            request.close()
        else:
            self.closing.append((time.monotonic() + self.drain_seconds, request))

    def service_actions(self) -> None:
        """Between requests (at least twice a second): end the connections whose
        request's line and headers are not in by their deadline (the idle timeout
        restarts with every byte, so a client trickling headers would hold a thread for
        ever); close the connections turned away whose client has closed, or whose time
        is up."""
        super().service_actions()
        now, waiting = time.monotonic(), []
        with self.heading_lock:
            late = [connection for connection, deadline in self.heading.items() if now > deadline]
        for connection in late:
            try:
                connection.shutdown(socket.SHUT_RDWR)  # its thread's read ends at once
            except OSError:
                pass
        for deadline, connection in self.closing:
            try:
                while connection.recv(1 << 16):
                    pass
            except BlockingIOError:
                if now < deadline:
                    waiting.append((deadline, connection))
                    continue
            except OSError:
                pass
            connection.close()
        self.closing = waiting

    def process_request_thread(self, request: socket.socket | tuple[bytes, socket.socket],
                               client_address: tuple) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.release()

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket],
                     client_address: tuple) -> None:
        """One line (``connection_ended``), never a traceback: most often a client that
        went away or stalled."""
        error = sys.exc_info()[1]
        reason = (error.strerror or type(error).__name__ if isinstance(error, OSError)
                  else f"{type(error).__name__}: {error}")
        self.connection_ended(f"connection from {client_address[0]} ended: {reason}")

    def connection_ended(self, line: str) -> None:
        """Says that a connection ended on an error: only with --verbose."""
        log.debug("%s", line)

    def serve_in_thread(self, name: str) -> threading.Thread:
        """``serve_forever`` in a daemon thread, started."""
        thread = threading.Thread(target=self.serve_forever, name=name, daemon=True)
        thread.start()
        return thread


class BoundedHandler(BaseHTTPRequestHandler):
    """A handler whose request's line and headers have a deadline, and whose socket
    the server's idle timeout."""

    server: BoundedServer

    def handle_one_request(self) -> None:
        # The request's line and headers must all arrive within the idle timeout
        # (BoundedServer.service_actions ends the connection otherwise).
        with self.server.heading_lock:
            self.server.heading[self.connection] = time.monotonic() + self.server.idle_timeout
        try:
            super().handle_one_request()
        finally:
            self._headers_read()

    def parse_request(self) -> bool:
        try:
            return super().parse_request()
        finally:
            self._headers_read()

    def _headers_read(self) -> None:
        with self.server.heading_lock:
            self.server.heading.pop(self.connection, None)

    def setup(self) -> None:
        # StreamRequestHandler sets it on the socket. typeshed declares timeout a ClassVar,
        # but setup() reads it from the instance: this connection's own, the server's.
        self.timeout = self.server.idle_timeout  # type: ignore[misc]
        super().setup()
