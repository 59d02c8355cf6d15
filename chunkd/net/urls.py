"""URLs and connection strings that may hold credentials: one reading of them and one
masking rule, for the stores (``--sink``) and the embedding endpoint (``--embed-url``).

A setting is read from its text, not by a parser that may end early, so that whatever
the driver or ``urllib`` makes of it, no message shows a secret:

* a libpq keyword/value string (``host=db user=rag password='a b' dbname=rag``), when
  the text begins with ``keyword=``, or holds one after white space and has no scheme;
* a URL, ``scheme://...``, or ``scheme:...`` without the slashes (no driver reads that
  form, but its text is masked all the same);
* else a path.

Secrets: a URL's password, read both ways when an ``@`` follows a ``/``, ``?`` or ``#``
(a password written with those raw: up to the first of them, and up to the last
``@``); the value of every query parameter or keyword whose name says it is one
(``password``, ``sslpassword``, ``api-key``, ``access_token``, ``sig``, ``code``...); each
as written and percent-decoded. A message shows a setting as ``public_url`` does (built
from the parts that hold no secret, so never masked again), and only text that may
quote it (a driver's or an endpoint's error) goes through ``quoted``: each secret
masked, or, where one is too short or too common to mask without giving it away
(``postgres`` in ``postgresql://...``, a one-letter password), a generic message.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Sequence
from typing import NamedTuple

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_KEYWORD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*")
_KEYWORD_AFTER_SPACE = re.compile(r"(?:^|\s)[A-Za-z_][A-Za-z0-9_]*\s*=")
#: Schemes whose user is not shown: an http endpoint's user is often the key itself
#: (elsewhere it names a role, such as a database's, and messages show it).
_SECRET_USER = {"http", "https"}


def secret_name(name: str) -> bool:
    """Whether a query parameter or keyword of this name holds a credential."""
    folded = re.sub(r"[-_.\s]", "", name.lower())
    return folded in ("code", "auth", "authorization", "pass") or folded.endswith(
        ("password", "passwd", "pwd", "secret", "token", "key", "sig", "signature"))


def conninfo(text: str) -> bool:
    """Whether ``text`` is a libpq keyword/value string rather than a URL or a path."""
    if _KEYWORD.match(text):
        return True
    return _SCHEME.match(text) is None and _KEYWORD_AFTER_SPACE.search(text) is not None


def scheme(text: str) -> str:
    """The URL's scheme in lower case ("" for a path or a keyword/value string)."""
    found = None if conninfo(text) else _SCHEME.match(text)
    return found.group()[:-1].lower() if found else ""


def slashed(text: str) -> bool:
    """Whether the URL's scheme is followed by ``//`` (the only form drivers read)."""
    return text[len(scheme(text)) + 1:].startswith("//")


class _Parts(NamedTuple):
    user: str
    passwords: tuple[str, ...]  # every reading, as written
    host: str                   # host[:port], as written
    path: str


def ambiguous(url: str) -> bool:
    """Whether an ``@`` follows the URL's host (``http://user:pa/ss@host``): a password
    with an unencoded ``/``, ``?`` or ``#`` cannot be told from a path or query."""
    rest = url[len(scheme(url)) + 1:]
    rest = rest[2:] if rest.startswith("//") else rest
    return "@" in re.sub(r"^[^/?#]*", "", rest)


def _parts(text: str) -> _Parts:
    """A URL's parts, read from its text: the user information ends at the host's
    ``@``; where an ``@`` follows a ``/``, ``?`` or ``#`` (a password holding one raw),
    at the last ``@`` too, and both readings' passwords are kept."""
    rest = text[len(scheme(text)) + 1:]
    rest = rest[2:] if rest.startswith("//") else rest
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    near, _, _ = authority.rpartition("@")
    far, at, after = rest.rpartition("@")
    if not at:
        after = rest
    host_and_path = re.split(r"[?#]", after, maxsplit=1)[0]
    host, slash, path = host_and_path.partition("/")
    users = [reading.partition(":") for reading in (near, far) if reading]
    return _Parts(users[0][0] if users else "",
                  tuple(password for _, colon, password in users if colon),
                  host, slash + path)


def _pairs(text: str) -> tuple[list[tuple[str, str, str]], str]:
    """A keyword/value string's pairs (keyword, value as written, value), read as libpq
    reads them (a value in single quotes, ``\\`` escaping the next character), and what
    is left that is not one."""
    pairs: list[tuple[str, str, str]] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        found = _KEYWORD.match(text, position)
        if found is None:
            return pairs, text[position:]
        position, value = found.end(), []
        quoted = text[position:position + 1] == "'"
        position += quoted
        start = position
        while position < len(text):
            character = text[position]
            if character == "\\" and position + 1 < len(text):
                value.append(text[position + 1])
                position += 2
                continue
            if (quoted and character == "'") or (not quoted and character.isspace()):
                break
            value.append(character)
            position += 1
        written = text[start:position]
        position += quoted and position < len(text)
        pairs.append((found.group(1), written, "".join(value)))


def _query_secrets(text: str) -> list[str]:
    """The values, as written, of the parameters whose names say they are secrets (a
    URL's query, any part of it that reads as one)."""
    return [value for name, value in re.findall(r"[?&;]([^=&#?;]*)=([^&#;]*)", text)
            if secret_name(urllib.parse.unquote(name))]


def secrets(text: str) -> tuple[str, ...]:
    """Every spelling of every credential ``text`` holds, longest first: what a message
    that may quote the setting must mask (``masked``)."""
    if conninfo(text):
        pairs, left = _pairs(text)
        found = [spelling for name, written, value in pairs if secret_name(name)
                 for spelling in (written, value)]
        # What follows a secret's keyword in the part that did not read as pairs (a
        # path before them, say): to its end, and to the next white space or quote.
        for keyword in re.finditer(r"([A-Za-z_]\w*)\s*=\s*'?", left):
            if secret_name(keyword.group(1)):
                value = left[keyword.end():]
                found += [value, re.split(r"[\s']", value)[0]]
    elif scheme(text):
        found = [*_parts(text).passwords, *_query_secrets(text)]
    else:
        found = _query_secrets(text)
    spellings = {spelling for raw in found for spelling in (raw, urllib.parse.unquote(raw))}
    return tuple(sorted(spellings - {""}, key=len, reverse=True))


def in_credentials(text: str, value: str) -> bool:
    """Whether ``value`` (what a driver read from ``text``: a host, a port) may be part of
    the URL's credentials, as when a password holding a raw ``/`` ends them early for
    the driver: what follows is read as the port, the database..."""
    if not value or conninfo(text) or not scheme(text):
        return False
    rest = text[len(scheme(text)) + 1:]
    return value in rest.rpartition("@")[0].partition(":")[2]


#: A secret shorter than this is not masked in a text that holds it: the text is not
#: shown (``quoted``), as ``***`` in place of each "e" or "ab" would mangle the text
#: and tell the secret.
MASKABLE = 6


def masked(text: str, hidden: tuple[str, ...] | list[str]) -> str:
    """``text`` with each of ``hidden`` (``secrets``: longest first) as ``***``."""
    for secret in hidden:
        text = text.replace(secret, "***")
    return text


def quoted(text: str, hidden: Sequence[str], public: str, generic: str) -> str:
    """A text that may quote a setting (a driver's message), as a message may show it:
    with each of ``hidden`` (its secrets) masked; but ``generic`` (the kind of error,
    in chunkd's words) where the text holds a secret that cannot be masked without
    telling it: one under ``MASKABLE`` characters, or one that occurs in ``public``
    (the setting's public form, as the password ``postgres`` in
    ``postgresql://postgres@/postgres``: masked, the rest of the text would say it)."""
    if any(secret in text and (len(secret) < MASKABLE or secret in public)
           for secret in hidden):
        return generic
    return masked(text, list(hidden))


def public_url(text: str) -> str:
    """A setting as messages show it, never with a credential: a URL as
    ``scheme://host/path`` (the user too, but an http endpoint's), without query
    or fragment; one without ``//`` as ``scheme:...``; a keyword/value string without
    its secret keywords; a path as it is."""
    if conninfo(text):
        pairs, left = _pairs(text)
        shown = " ".join(f"{name}={written}" if not any(c.isspace() for c in written)
                         and "'" not in written else f"{name}='...'"
                         for name, written, _ in pairs if not secret_name(name))
        shown = f"{shown} ..." if left.strip() else shown
        return shown.strip()
    found = scheme(text)
    if not found:
        return text
    if not slashed(text):
        return f"{found}:..."
    parts = _parts(text)
    # Each part is shown only where it cannot be a piece of a secret: a user read across
    # a "/", "?" or "#" (the last "@" in a query: ``db/rag?password=x@y``), a host and
    # path after an "@" that a secret parameter's value holds, a part holding a "=" (a
    # parameter, ``;password=x``, that ``secrets`` reads as one) are "...".
    after_secret = any("@" in value for value in _query_secrets(text))
    user = "..." if re.search(r"[/?#=&;]", parts.user) else parts.user
    host = "..." if after_secret or "=" in parts.host else parts.host
    path = "/..." if parts.path and (after_secret or "=" in parts.path) else parts.path
    user = f"{user}@" if user and found not in _SECRET_USER else ""
    return f"{text[:len(found)]}://{user}{host}{path}"


def identity_url(url: str) -> str:
    """A URL as results record it, to tell one endpoint from another: the whole of it
    (scheme, host, port, path and query) but its credentials: the user information,
    and the parameters whose names say they are secrets. Same as ``public_url`` for a
    URL without a query."""
    if not scheme(url) or not slashed(url) or ambiguous(url):
        return public_url(url)
    query = re.split(r"#", url.partition("?")[2], maxsplit=1)[0]
    kept = [pair for pair in re.split(r"[&;]", query)
            if pair and not secret_name(urllib.parse.unquote(pair.partition("=")[0]))]
    shown = public_url(url)
    if scheme(url) not in _SECRET_USER:
        shown = re.sub(r"^([^:]*://)[^@/]*@", r"\1", shown)
    return shown + ("?" + "&".join(kept) if kept else "")
