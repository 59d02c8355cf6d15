"""One HTTP call to an outside service, bounded in time and in size, that follows nothing.

``call`` sends one request and returns the status, the headers and, for a 2xx answer,
the body. What urllib would do and this does not: follow a redirect (a 3xx comes back
as it is, so that no credentials go to another origin), read an answer of any size (the
body is read a block at a time up to ``limit`` bytes), and let a server that answers a
byte at a time hold a call for ever (``timeout`` bounds the whole call: connecting,
sending, the status, the headers and the whole body; at the deadline the socket is shut
down under the read). Proxies from the environment are not used: the connection goes
to the URL's host.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

#: Bytes read from the socket at a time.
BLOCK = 1 << 16


class NoAnswer(Exception):
    """No whole answer (refused, reset, closed early, timed out): worth another try.
    The message says why, in a few words."""


class ResponseTooLarge(Exception):
    """An answer over the call's limit; the message says how large it was declared or
    found to be."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: http.client.HTTPMessage
    #: The body of a 2xx answer; empty for any other status (never read).
    body: bytes


def call(url: str, method: str, body: bytes | None, headers: Mapping[str, str],
         timeout: float, limit: int) -> Answer:
    """Send one request to ``url`` (http or https) and return its answer, all within
    ``timeout`` seconds; ``NoAnswer`` when there is no whole answer in time,
    ``TooLarge`` when a 2xx body declares or reaches more than ``limit`` bytes."""
    parts = urllib.parse.urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=timeout)
    expired = threading.Event()
    #: The connection's socket, once made: an answer that closes the connection after
    #: it (HTTP/1.0, ``Connection: close``) takes the socket from the connection.
    made: list[socket.socket] = []

    def expire() -> None:
        # Set before the socket is looked at: a connection made just after this sees it.
        expired.set()
        for sock in {id(sock): sock for sock in (connection.sock, *made) if sock}.values():
            try:  # the plain socket's shutdown, under TLS too: it wakes a blocked read
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    deadline = threading.Timer(timeout, expire)
    deadline.daemon = True
    deadline.start()
    try:
        connection.connect()
        if connection.sock is not None:
            made.append(connection.sock)
        if expired.is_set():
            raise NoAnswer("timed out")
        target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        connection.request(method, target, body, dict(headers))
        response = connection.getresponse()
        if not 200 <= response.status < 300:
            return Answer(response.status, response.headers, b"")
        declared = response.getheader("Content-Length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > limit:
            raise ResponseTooLarge(f"{int(declared):,} bytes declared")
        data = bytearray()
        while block := response.read1(min(BLOCK, limit + 1 - len(data))):
            data += block
            if len(data) > limit:
                raise ResponseTooLarge(f"over {limit:,} bytes")
        # The reads end early, without an error, where the deadline shut the socket
        # down or the server closed it before the length it declared.
        if expired.is_set():
            raise NoAnswer("timed out")
        if response.length:
            raise NoAnswer("connection closed before the whole answer")
        return Answer(response.status, response.headers, bytes(data))
    except (OSError, http.client.HTTPException, ValueError) as error:
        # (ValueError: http.client's, for a chunk size that is not a number)
        if expired.is_set() or isinstance(error, TimeoutError):
            raise NoAnswer("timed out") from None
        raise NoAnswer(_reason(error)) from None
    finally:
        deadline.cancel()
        connection.close()


def _reason(error: BaseException) -> str:
    """A failure to get an answer in a few words of our own (a server's words are never
    repeated: they may echo what was sent)."""
    if isinstance(error, ssl.SSLCertVerificationError):  # (a ValueError too)
        return f"TLS: certificate not trusted ({error.verify_message})"
    if isinstance(error, ssl.SSLError):
        return f"TLS: {error.reason or 'failed'}"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, (ConnectionResetError, BrokenPipeError)):
        return "connection reset"
    if isinstance(error, (http.client.RemoteDisconnected, http.client.IncompleteRead)):
        return "connection closed before the whole answer"
    if isinstance(error, (http.client.HTTPException, ValueError)):
        return "not an HTTP answer"
    if isinstance(error, socket.gaierror):
        return "host not found"
    text = " ".join(str(getattr(error, "strerror", None) or error).split())
    return text[:200] or type(error).__name__
