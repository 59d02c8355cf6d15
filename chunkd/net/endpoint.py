"""An OpenAI-compatible HTTP endpoint as chunkd calls one: the embeddings of
``--embed-url`` and the chat completions of ``--llm-url`` keep the same promises, written
once here.

* The URL is checked once (http or https, ASCII, no ``@`` after its host) and its route
  added where it is not given (``api_url``).
* The key comes from the environment only and is sent as ``Authorization: Bearer`` to
  the URL's own origin (credentials in the URL, without a key, as Basic authentication);
  no redirect is followed, so it goes nowhere else; no message shows it or them.
* Each try is one request within the timeout as a whole, with an answer bounded in size
  (``chunkd.net.client``). A 429, a 5xx or no answer is tried again after a wait (the
  server's ``Retry-After`` in seconds, at most ``LONGEST_WAIT``, else ``FIRST_WAIT``
  doubled each try), ``TRIES`` times in all; any other status, a redirect or an answer
  too large fails at once. No message repeats what a server wrote.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from typing import NoReturn

from chunkd.model.errors import SettingsError

#: Tries of a call, and the first wait between tries (doubled each time) unless the
#: server's ``Retry-After`` says how long.
TRIES, FIRST_WAIT = 5, 0.5
#: The longest a server's ``Retry-After`` makes a try wait (the client's own waits are
#: 4 s at most): with the default tries, a call that keeps being told to wait ends
#: within a minute whatever the server says.
LONGEST_WAIT = 8.0


def api_url(url: str, option: str, route: str) -> str:
    """The URL of an endpoint's ``route`` (``embeddings``, ``chat/completions``): ``URL``
    as given when it ends in ``/v1/ROUTE``, ``URL/ROUTE`` when it ends in ``/v1``, else
    ``URL/v1/ROUTE`` (a trailing ``/`` is ignored); ``SettingsError`` naming ``option``
    unless a well-formed http(s) URL (checked here, once, rather than failing each call)."""
    import urllib.parse

    from chunkd.net.urls import ambiguous, public_url

    if not url.isascii() or re.search(r"[\x00-\x20\x7f]", url):
        raise SettingsError(f"{option}: white space, a control character or a character "
                            "beyond ASCII in the URL: write it percent-encoded (a host "
                            "in its ASCII form, xn--...)")
    if ambiguous(url):
        raise SettingsError(f"{option}: an @ after the host, as a password holding /, ? "
                            "or # would leave it: write those characters in credentials "
                            "(and any @ after the host) percent-encoded: %2F, %3F, %23, %40")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # raises for a port that is not a number from 0 to 65535
    except ValueError:
        raise SettingsError(f"{option} {public_url(url)}: not a valid URL (its host "
                            "or port)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{option} {public_url(url)}: not an http:// or https:// URL")
    path = parts.path.rstrip("/")
    if not path.endswith(f"/v1/{route}"):
        path += f"/{route}" if path.endswith("/v1") else f"/v1/{route}"
    return urllib.parse.urlunsplit(parts._replace(path=path))


#: The longest timeout a call may be given, in seconds.
LONGEST_TIMEOUT = 86_400


def seconds_from(variable: str, default: str) -> float:
    """A call's timeout: the environment's ``variable`` in seconds, else ``default``."""
    value = os.environ.get(variable, default)
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0
    # (at most a day: a larger one, or infinity, would overflow the socket's clock)
    if not 0 < seconds <= LONGEST_TIMEOUT:
        raise SettingsError(f"{variable}={value}: not a number of seconds above 0 and at "
                            f"most {LONGEST_TIMEOUT:,}")
    return seconds


def status_text(code: int) -> str:
    """A status as messages show it: its number and its standard phrase, never the
    server's (which may echo what was sent, the key included)."""
    import http

    try:
        return f"HTTP {code} {http.HTTPStatus(code).phrase}"
    except ValueError:
        return f"HTTP {code}"


class Endpoint:
    """One endpoint's URL (``api_url``'s, credentials taken out of it), its key's
    variable, and the calls to it with their retries. ``option`` names the setting in
    messages (``--embed-url``); a failure raises ``error`` with the message."""

    def __init__(self, url: str, option: str, key_variable: str,
                 error: Callable[[str], Exception], timeout: float,
                 first_wait: float = FIRST_WAIT, longest_wait: float = LONGEST_WAIT) -> None:
        import base64
        import urllib.parse

        from chunkd.net.urls import public_url, secrets

        called = urllib.parse.urlsplit(url)
        # Credentials in the URL go as Basic authentication, never in the request line.
        self.url = urllib.parse.urlunsplit(called._replace(netloc=called.netloc.rpartition("@")[2]))
        #: The user and password the URL holds, and its query's secrets: never shown.
        self.credentials = tuple(urllib.parse.unquote(part) for part in (
            called.username, called.password) if part) + secrets(self.url)
        self.basic = (None if called.username is None else base64.b64encode(
            f"{urllib.parse.unquote(called.username)}:"
            f"{urllib.parse.unquote(called.password or '')}".encode()).decode())
        self.shown = public_url(self.url)
        self.option, self.key_variable, self.error = option, key_variable, error
        self.timeout = timeout
        self.first_wait, self.longest_wait = first_wait, longest_wait
        #: Whether the last call that ended found no answer after all its tries: until
        #: a call is answered, each gets one try, so that a run meeting an endpoint
        #: that keeps failing is not held up a whole call's tries for every request.
        self.failing = False

    def at(self, path: str) -> str:
        """The URL of another route of the server: this one's with its path's end
        ``/v1/...`` replaced by ``path`` (``/info``, ``/v1/models``)."""
        import urllib.parse

        parts = urllib.parse.urlsplit(self.url)
        return urllib.parse.urlunsplit(parts._replace(
            path=parts.path[:parts.path.rindex("/v1/")] + path))

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.key_variable)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif self.basic:
            headers["Authorization"] = f"Basic {self.basic}"
        return headers

    def post(self, body: bytes, limit: int, given_up: threading.Event, what: str) -> bytes:
        """The body of a successful answer to one call, after retries; ``given_up``
        (another call failed) ends the tries. ``what``: the call's texts, as a message
        about an answer too large for them names them ("for 3 texts")."""
        from chunkd.net.client import NoAnswer, ResponseTooLarge, call

        headers = self.headers()
        last = ""
        tries = 1 if self.failing else TRIES
        for attempt in range(tries):
            wait = self.first_wait * 2 ** attempt
            try:
                answer = call(self.url, "POST", body, headers, self.timeout, limit)
            except NoAnswer as error:  # (chunkd's words, a TLS check's may name the host)
                last = self.quoted(str(error), type(error).__name__)
            except ResponseTooLarge as error:
                self.fail(f"an answer of {error} {what}: refused")
            else:
                if 200 <= answer.status < 300:
                    self.failing = False
                    return answer.body
                last = f"HTTP {answer.status}"
                if 300 <= answer.status < 400:
                    self.fail(f"{status_text(answer.status)} to "
                              f"{self.where(answer.headers.get('Location'))}: chunkd follows "
                              f"no redirect (give {self.option} the URL that answers)")
                if answer.status != 429 and answer.status < 500:
                    self.fail(status_text(answer.status))
                told = (answer.headers.get("Retry-After") or "").strip()
                if told.isascii() and told.isdigit():
                    wait = min(float(told), self.longest_wait)
            if attempt + 1 < tries and given_up.wait(wait):
                break
        else:  # every try made (not given up for another call's failure)
            self.failing = True
        if tries == 1:
            self.fail(f"no answer after {TRIES} tries of an earlier call and 1 of this one "
                      f"(last: {last})")
        self.fail(f"no answer after {attempt + 1} tries (last: {last})")

    def fail(self, message: str) -> NoReturn:
        """Raise the endpoint's error: ``message`` after the URL as messages show it."""
        raise self.error(f"{self.shown}: {message}") from None

    def secrets(self) -> list[str]:
        """What no message may show: the key, and the URL's credentials."""
        return sorted({secret for secret in (os.environ.get(self.key_variable), self.basic,
                                             *self.credentials) if secret},
                      key=len, reverse=True)

    def quoted(self, text: str, kind: str) -> str:
        """Text that may quote the URL, as messages show it (``chunkd.net.urls.quoted``)."""
        from chunkd.net.urls import quoted

        return quoted(text, self.secrets(), self.shown, f"{kind}: its words are not shown, "
                                                        "as they may quote a credential")

    def where(self, location: str | None) -> str:
        """Where a redirect points, as a message may show it: its origin (scheme, host,
        port), when that is plainly one and holds none of the credentials sent (a
        server may echo them); else without it."""
        import urllib.parse

        try:
            target = urllib.parse.urlsplit(urllib.parse.urljoin(self.url, location or ""))
            port = target.port
        except ValueError:
            return "an address not shown"
        host = target.hostname or ""
        secrets = [secret.lower() for secret in self.secrets()]
        if (location is None or target.scheme not in ("http", "https")
                or not re.fullmatch(r"[a-z0-9.-]{1,253}|[0-9a-f:.]{2,45}", host)
                or any(secret in host for secret in secrets)):
            return "an address not shown"
        shown = f"[{host}]" if ":" in host else host
        return f"{target.scheme}://{shown}" + ("" if port is None else f":{port}")
