"""tiktoken's encodings other than cl100k_base (``o200k_base``, ``r50k_base``,
``p50k_base``...) as length units, loaded offline and checked.

The ranks come from tiktoken's cache (``TIKTOKEN_CACHE_DIR``, else
``DATA_GYM_CACHE_DIR``, else ``data-gym-cache`` in the temporary folder, under the
SHA-1 of the download address: where one online run of tiktoken leaves them) or from a
``.tiktoken`` file the user names after its encoding (``o200k_base.tiktoken``); either
is checked against the SHA-256 that tiktoken publishes for the encoding. Nothing is
ever downloaded: tiktoken's own constructors (which define each encoding's pattern,
special tokens, address and hash) run with a loader that reads only local files.

Counting. ``count`` is ``len(encode_ordinary(text))``. For the encodings with
o200k_base's pattern (``COUNTED``) the unit is chunkd's token counter
(``chunkd.kernel.chosen.TokenCounter``, as for cl100k_base): the pattern hand translated over
chunkd's Unicode 16.0 class table (the version of tiktoken's Rust tables), each
distinct pre-token encoded once and its count cached, which is exact because tiktoken
runs BPE within a pre-token; the kernel runs it directly. The counter has the
encoding's ranks and runs tiktoken's BPE over them itself (a pre-token that is one
token is one look-up), calling tiktoken only for a pre-token over 256 bytes (or one
with a lone surrogate), so tiktoken's ``Encoding`` is built only then
(``LazyEncoding``). Appending text changes at
most the last two pre-tokens (a run of white space up to its last newline, then the
rest, or a word and an apostrophe that becomes its contraction), so the pre-tokens
followed by two more are settled. The other encodings (``TiktokenUnit``) call
``encode_ordinary`` for every count and settle nothing: ``max_chars`` alone bounds
their pieces. A token covers at most the longest token's bytes, so at most that many
code points: ``max_chars``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from chunkd.model.errors import SettingsError

if TYPE_CHECKING:
    import tiktoken

    from chunkd.kernel.chosen import TokenCounter

#: Encodings that chunkd's token counter counts, and the pattern (a key of
#: ``pretoken_classes.PATTERNS``) each cuts pre-tokens by: o200k_harmony has
#: o200k_base's pattern (the tests check both against tiktoken).
COUNTED = {"o200k_base": "o200k_base", "o200k_harmony": "o200k_base"}
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
    import tempfile  # here: chunkd's own encodings never read the cache

    return Path(tempfile.gettempdir()) / "data-gym-cache"


#: The ranks files chunkd ships, by the SHA-256 tiktoken publishes for them: o200k_base's
#: (o200k_harmony's too), so that it works offline out of the box, and cl100k_base's
#: (``chunkd.units.cl100k``), read in 15 ms where parsing tiktoken's file took 0.1 s at
#: every start of ``--tokens``. Packed: each token's bytes after a byte of its length, in
#: rank order, compressed with zlib (1.0 MB for o200k_base's 3.6 MB file; xz's 0.8 MB
#: took 0.1 s more to unpack at every start); the SHA-256 is of the packed bytes, which
#: are tiktoken's file exactly (tests/units/test_tiktoken_encodings.py rebuilds each file from
#: them and checks tiktoken's hash). Each entry: the file, its SHA-256, its longest token.
SHIPPED = {
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d": (
        "o200k_base.ranks.zlib",
        "bac143fe7fe950090c6e4ed9a2f80de5412a92495758b52becbbe5a7eea25ecb", 128),
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7": (
        "cl100k_base.ranks.zlib",
        "6bfd43f7b31b50b645b3228413547e662af1ae4801e9b192b9791680a71d650c", 128),
}


class Packed(NamedTuple):
    """Ranks as chunkd ships them: packed (``unpack_ranks``'s input), and the length of
    their longest token. The token counter reads them in place; tiktoken's
    ``Encoding``, where one is built, gets them unpacked (``encoding_of``)."""

    data: bytes
    longest: int


def shipped_ranks(expected_sha256: str) -> Packed | None:
    """The ranks of the file tiktoken publishes with ``expected_sha256``, from chunkd's
    own copy, checked; None if chunkd ships no copy of it."""
    if expected_sha256 not in SHIPPED:
        return None
    import zlib

    name, packed_sha256, longest = SHIPPED[expected_sha256]
    packed = zlib.decompress((Path(__file__).parent.parent / name).read_bytes())
    if hashlib.sha256(packed).hexdigest() != packed_sha256:
        raise SettingsError(f"chunkd's copy of {name} is damaged (its SHA-256 differs): "
                            "install chunkd again")
    return Packed(packed, longest)


def _read_ranks(encoding: str, address: str, expected_sha256: str,
                ranks_file: Path | None) -> dict[bytes, int] | Packed:
    """The ranks of ``encoding`` from ``ranks_file``, chunkd's own copy or tiktoken's
    cache, checked."""
    shipped = None if ranks_file is not None else shipped_ranks(expected_sha256)
    if shipped is not None:
        return shipped
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
    import base64

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

    def load_ranks(address: str, expected_hash: str) -> dict[bytes, int] | Packed:
        return _read_ranks(encoding, address, expected_hash, ranks_file)

    namespace = dict(vars(openai_public), load_tiktoken_bpe=load_ranks)
    for constructor in constructors.values():  # o200k_harmony calls o200k_base
        namespace[constructor.__name__] = types.FunctionType(
            constructor.__code__, namespace, constructor.__name__)
    return namespace[constructors[encoding].__name__]()


class TiktokenUnit:
    """A tiktoken encoding whose pattern chunkd does not translate, as a length unit
    (``chunkd.units.LengthUnit``): every count is tiktoken's."""

    def __init__(self, encoding: tiktoken.Encoding, max_chars: int) -> None:
        self.encoding = encoding
        self.name = encoding.name
        self.max_chars: int | None = max_chars
        self.max_size: int | None = None  # an encoding, not one model's tokenizer

    def count(self, text: str) -> int:
        """``len(encode_ordinary(text))``: special-token text counts as plain text."""
        return len(self.encoding.encode_ordinary(text))

    def settled(self, text: str) -> tuple[int, int]:
        """Nothing: the pattern's pre-tokens are not cut here."""
        return 0, 0


class LazyEncoding:
    """tiktoken's ``Encoding`` of a definition, built when first used: chunkd's token
    counter runs BPE itself and needs tiktoken only for a rare pre-token (over 256
    bytes), so a process that never meets one never pays for building it (a third of
    loading o200k_base). Its attributes are the ``Encoding``'s."""

    def __init__(self, definition: dict[str, Any]) -> None:
        self._definition = definition

    @functools.cached_property
    def built(self) -> tiktoken.Encoding:
        return encoding_of(self._definition)

    def encode_ordinary(self, text: str) -> list[int]:
        return self.built.encode_ordinary(text)

    def __getattr__(self, name: str) -> Any:
        if "_definition" not in vars(self):  # a copy being made, not yet set
            raise AttributeError(name)
        return getattr(self.built, name)


def load(encoding: str, ranks_file: Path | None = None) -> TokenCounter | TiktokenUnit:
    """The unit of ``encoding``, its ranks from ``ranks_file`` or tiktoken's cache:
    chunkd's token counter for the encodings in ``COUNTED``, else a ``TiktokenUnit``.
    Either has ``encoding``, the ``tiktoken.Encoding`` (for the counter, a
    ``LazyEncoding``)."""
    definition = _definition(encoding, ranks_file)
    ranks: dict[bytes, int] | Packed = definition["mergeable_ranks"]
    longest = ranks.longest if isinstance(ranks, Packed) else max(map(len, ranks))
    pattern = COUNTED.get(encoding)
    if pattern is None:
        return TiktokenUnit(encoding_of(definition), longest)
    from chunkd.kernel import pretoken_classes
    from chunkd.kernel.chosen import TokenCounter

    # With the ranks, the counter runs tiktoken's BPE on a new pre-token itself.
    return TokenCounter(LazyEncoding(definition).encode_ordinary,
                        pretoken_classes.table(pattern), longest, name=encoding,
                        pattern=pattern,
                        ranks=ranks.data if isinstance(ranks, Packed) else ranks)


def encoding_of(definition: dict[str, Any]) -> tiktoken.Encoding:
    """tiktoken's ``Encoding`` of a definition, its ranks unpacked if packed."""
    import tiktoken

    ranks = definition["mergeable_ranks"]
    if isinstance(ranks, Packed):
        from chunkd.kernel.chosen import unpack_ranks

        definition = {**definition, "mergeable_ranks": unpack_ranks(ranks.data)}
    return tiktoken.Encoding(**definition)


@functools.lru_cache(maxsize=None)
def unit(encoding: str) -> TokenCounter | TiktokenUnit:
    """The unit for an encoding's name, its ranks from tiktoken's cache."""
    return load(encoding)


@functools.lru_cache(maxsize=None)
def file_unit(path: str) -> TokenCounter | TiktokenUnit:
    """The unit for a ``.tiktoken`` file named after its encoding
    (``o200k_base.tiktoken``)."""
    file = Path(path)
    encoding = file.name[:-len(SUFFIX)] if file.name.endswith(SUFFIX) else ""
    if encoding not in names():
        raise SettingsError(f"{path}: a tiktoken file is named after its encoding "
                            f"({', '.join(name + SUFFIX for name in names())})")
    return load(encoding, file)
