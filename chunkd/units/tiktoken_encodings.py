"""tiktoken's encodings other than cl100k_base (``o200k_base``, ``r50k_base``,
``p50k_base``...) as length units, loaded offline and checked.

The ranks come from tiktoken's cache (``TIKTOKEN_CACHE_DIR``, else
``DATA_GYM_CACHE_DIR``, else ``data-gym-cache`` in the temporary folder, under the
SHA-1 of the download address: where one online run of tiktoken leaves them) or from a
``.tiktoken`` file the user names after its encoding (``o200k_base.tiktoken``); either
is checked against the SHA-256 that tiktoken publishes for the encoding. Nothing is
ever downloaded: tiktoken's own constructors (which define each encoding's pattern,
special tokens, address and hash) run with a loader that reads only local files.

Streaming bound. ``count`` is ``len(encode_ordinary(text))``, which is additive over
the pre-tokens that the encoding's pattern cuts. Appending text changes at most the
last two pre-tokens (a run of white space up to its last newline, then the rest, or a
word and an apostrophe that becomes its contraction), so the pre-tokens followed by two
more are settled. That is read only for the encodings whose pattern the tests check on
every code point (``SETTLING``: o200k_base's, the one file the tests have); the others
settle nothing, and ``max_chars`` alone bounds their pieces. The pattern runs here on Python's ``re`` with every class
(``\\p{L}``, ``\\p{Lu}``, ``\\s``...) spelled out from the Unicode 16.0 table that
chunkd builds (the version of tiktoken's Rust tables) and ``$`` as ``\\Z`` (the end of
the text, as in Rust); the tests compare it with tiktoken on every code point. A token
covers at most the longest token's bytes, so at most that many code points:
``max_chars``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import re
import tempfile
import types
from pathlib import Path
from typing import Any

from chunkd.errors import SettingsError

#: Encodings whose pre-tokens ``settled`` reads (their pattern is tested on every code
#: point against tiktoken; o200k_harmony has o200k_base's pattern and ranks).
SETTLING = ("o200k_base", "o200k_harmony")
#: The suffix of a ranks file named after its encoding.
SUFFIX = ".tiktoken"
#: Encodings that chunkd counts in its kernel (``chunkd.units.cl100k``) or that tiktoken
#: builds from two files of another format (gpt2: r50k_base is the same encoding).
NOT_HERE = {"cl100k_base": "cl100k_base is counted by chunkd's own offline copy",
            "gpt2": "gpt2 is not loaded offline: use r50k_base, the same encoding"}


def names() -> list[str]:
    """The encodings this module loads: tiktoken's, but those in ``NOT_HERE``."""
    from tiktoken_ext import openai_public

    return [name for name in openai_public.ENCODING_CONSTRUCTORS if name not in NOT_HERE]


def cache_dir() -> Path | None:
    """tiktoken's cache folder, as ``tiktoken.load.read_file_cached`` chooses it
    (None: caching is switched off with an empty ``TIKTOKEN_CACHE_DIR``)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            return Path(os.environ[variable]) if os.environ[variable] else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _read_ranks(encoding: str, address: str, expected_sha256: str,
                ranks_file: Path | None) -> dict[bytes, int]:
    """The ranks of ``encoding`` from ``ranks_file`` or tiktoken's cache, checked."""
    if ranks_file is None:
        folder = cache_dir()
        path = None if folder is None else folder / hashlib.sha1(address.encode()).hexdigest()
        if path is None or not path.is_file():
            where = "tiktoken's cache is off" if path is None else f"not in tiktoken's cache ({path})"
            raise SettingsError(
                f"{encoding}: {where}; run tiktoken once online (python -c \"import tiktoken; "
                f"tiktoken.get_encoding('{encoding}')\") or give the path of its "
                f"{encoding}{SUFFIX} file")
    else:
        path = ranks_file
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SettingsError(f"{path}: cannot read it: {error.strerror or error}") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise SettingsError(f"{path}: not tiktoken's {encoding} file (its SHA-256 is {actual}, "
                            f"tiktoken's is {expected_sha256})")
    # tiktoken.load.load_tiktoken_bpe's parsing, without its cache (which would copy
    # a file the user names into tiktoken's cache folder).
    return {base64.b64decode(token): int(rank)
            for token, rank in (line.split() for line in data.splitlines() if line)}


def _definition(encoding: str, ranks_file: Path | None) -> dict[str, Any]:
    """tiktoken's keyword arguments for ``tiktoken.Encoding`` for ``encoding``, built by
    its own constructor, rebound to a namespace where loading the ranks reads only
    local files (the module itself is left as it is: other code may use tiktoken)."""
    from tiktoken_ext import openai_public

    constructors = openai_public.ENCODING_CONSTRUCTORS
    if encoding in NOT_HERE or encoding not in constructors:
        raise SettingsError(NOT_HERE.get(encoding) or f"unknown tiktoken encoding {encoding!r}: "
                            f"give one of {', '.join(names())}")

    def load_ranks(address: str, expected_hash: str) -> dict[bytes, int]:
        return _read_ranks(encoding, address, expected_hash, ranks_file)

    namespace = dict(vars(openai_public), load_tiktoken_bpe=load_ranks)
    for constructor in constructors.values():  # o200k_harmony calls o200k_base
        namespace[constructor.__name__] = types.FunctionType(
            constructor.__code__, namespace, constructor.__name__)
    return namespace[constructors[encoding].__name__]()


@functools.lru_cache(maxsize=None)
def _class_ranges(bit: int) -> str:
    """The code points whose category table entry has ``bit``, as the inside of a
    character class (``\\U...-\\U...`` ranges)."""
    from chunkd import pretoken_classes

    table = pretoken_classes.load(pretoken_classes.CATEGORIES_FILE)
    flags = table.translate(bytes(1 if value & bit else 0 for value in range(256)))
    return "".join(f"\\U{run.start():08X}-\\U{run.end() - 1:08X}"
                   for run in re.finditer(b"\x01+", flags))


#: ``\p{...}`` names in tiktoken's patterns, as bits of the category table.
_PROPERTY_BITS = {"L": ("Lu", "Ll", "Lt", "Lm", "Lo"), "Lu": ("Lu",), "Ll": ("Ll",),
                  "Lt": ("Lt",), "Lm": ("Lm",), "Lo": ("Lo",), "M": ("M",), "N": ("N",)}
_TOKEN = re.compile(r"\\p\{(\w+)\}|\\[sS]|\\.|\[\^?|\]|\$|.", re.DOTALL)


def translated_pattern(pattern: str) -> str:
    """tiktoken's (Rust) ``pattern`` for Python's ``re`` (or ``regex``): each class that
    depends on the Unicode version spelled out from chunkd's Unicode 16.0 table, and
    ``$`` (the end of the text in Rust) as ``\\Z``."""
    from chunkd import pretoken_classes

    bits = pretoken_classes.CATEGORY_BITS

    def ranges(names: tuple[str, ...]) -> str:
        return "".join(_class_ranges(bits[name]) for name in names)

    out, in_class = [], False
    for token in _TOKEN.finditer(pattern):
        text, name = token.group(), token.group(1)
        if name is not None:
            if name not in _PROPERTY_BITS:
                raise ValueError(f"unknown class {text} in a tiktoken pattern")
            inner = ranges(_PROPERTY_BITS[name])
            out.append(inner if in_class else f"[{inner}]")
        elif text in ("\\s", "\\S"):
            negated = text == "\\S"
            if in_class and negated:
                raise ValueError("\\S inside a class in a tiktoken pattern")
            inner = ranges(("White_Space",))
            out.append(inner if in_class else f"[^{inner}]" if negated else f"[{inner}]")
        elif text.startswith("[") and not in_class:
            in_class = True
            out.append(text)
        elif text == "]" and in_class:
            in_class = False
            out.append(text)
        elif text == "$" and not in_class:
            out.append("\\Z")
        else:
            out.append(text)
    return "".join(out)


class TiktokenUnit:
    """A tiktoken encoding as a length unit (``chunkd.units.LengthUnit``)."""

    def __init__(self, encoding: str, ranks_file: Path | None = None) -> None:
        import tiktoken

        self.encoding = tiktoken.Encoding(**_definition(encoding, ranks_file))
        self.name = encoding
        self.max_chars: int | None = max(len(token) for token in self.encoding.token_byte_values())

    def count(self, text: str) -> int:
        """``len(encode_ordinary(text))``: special-token text counts as plain text."""
        return len(self.encoding.encode_ordinary(text))

    @functools.cached_property
    def pretokens(self) -> Any:
        """The encoding's pattern, compiled by Python's ``re`` (ten times faster than
        ``regex`` on these large classes), or by ``regex`` where ``re`` lacks a
        construct (possessive quantifiers before Python 3.11)."""
        pattern = translated_pattern(self.encoding._pat_str)
        try:
            return re.compile(pattern)
        except re.error:
            import regex

            return regex.compile(pattern)

    def settled(self, text: str) -> tuple[int, int]:
        """The pre-tokens followed by two more, and their count."""
        if self.name not in SETTLING:
            return 0, 0
        starts = [match.start() for match in self.pretokens.finditer(text)]
        if len(starts) < 3:
            return 0, 0
        end = starts[-2]
        return end, self.count(text) - self.count(text[end:])


@functools.lru_cache(maxsize=None)
def unit(encoding: str) -> TiktokenUnit:
    """The unit for an encoding's name, its ranks from tiktoken's cache."""
    return TiktokenUnit(encoding)


@functools.lru_cache(maxsize=None)
def file_unit(path: str) -> TiktokenUnit:
    """The unit for a ``.tiktoken`` file named after its encoding
    (``o200k_base.tiktoken``)."""
    file = Path(path)
    encoding = file.name[:-len(SUFFIX)] if file.name.endswith(SUFFIX) else ""
    if encoding not in names():
        raise SettingsError(f"{path}: a tiktoken file is named after its encoding "
                            f"({', '.join(name + SUFFIX for name in names())})")
    return TiktokenUnit(encoding, file)
