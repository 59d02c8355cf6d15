"""A Hugging Face tokenizer as a length unit: a ``tokenizer.json`` file, or a model
folder that holds one (the Hugging Face layout, ``tokenizer.json`` at the top, or the
sentence-transformers layout, where ``modules.json`` names the Transformer module's
folder), loaded with the ``tokenizers`` library from local files only.

A text's count is ``len(encode(text, add_special_tokens=False).ids)`` with padding and
truncation off, which is what transformers' ``tokenize`` and LangChain's
``from_huggingface_tokenizer`` count (the file's own padding and truncation settings,
128 in all-MiniLM-L6-v2's, do not apply).

Streaming bound. For the tokenizer families whose pieces are local, a text's tokens
are those of its words (the tokenizer's own pre-tokens, ``word_ids``) one by one, and
appending text changes at most its last two words, so the words followed by two more
are settled: WordPiece, BPE, Unigram or WordLevel models behind ``BertPreTokenizer``,
``Whitespace``, ``WhitespaceSplit``, ``ByteLevel`` (its GPT-2 pattern) or ``Metaspace``,
with no normalizer or one of Unicode normalization forms, ``Lowercase``,
``StripAccents`` and ``BertNormalizer``. A cut also keeps clear of the added tokens
([CLS], ``<|endoftext|>``...: matched in the text before anything else, they could
straddle it) and, where the pre-tokenizer adds a space in front of a text, falls before
a word that starts with one. Any other tokenizer (a ``Split`` pattern, a SentencePiece
``Precompiled`` normalizer, sequences of pre-tokenizers) settles nothing: its pieces
are judged once complete. ``max_chars``: byte-level BPE whose vocabulary holds all 256
bytes, behind a normalizer that never shortens text, covers at most its longest
token's bytes a token; WordPiece's and Unigram's [UNK] cover a word of any length
(None).
"""

from __future__ import annotations

import functools
import hashlib
import json
import string
from pathlib import Path
from typing import Any

from chunkd.model.errors import SettingsError
from chunkd.units.kept import GROUPS, KeptCounts

TOKENIZER_FILE = "tokenizer.json"
#: How to add what reading a Hugging Face tokenizer needs (the huggingface extra).
INSTALL = "pip install 'tokenizers>=0.19'"
#: transformers' placeholder for "no limit" in ``model_max_length`` (``int(1e30)``).
NO_LIMIT = 10 ** 9

#: Components whose effect on a text is local to its words (the module's docstring).
LOCAL_NORMALIZERS = {"BertNormalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents"}
#: Normalizers that never make a text shorter, for ``max_chars``.
LENGTHENING_NORMALIZERS = {"NFD", "NFKD", "Lowercase"}
LOCAL_PRE_TOKENIZERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit", "ByteLevel",
                        "Metaspace"}
LOCAL_MODELS = {"WordPiece", "BPE", "Unigram", "WordLevel"}
#: Pre-tokenizers that end a word at every white space (each word then tokenized alone).
SPACE_SPLITTING = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
#: Normalizers that change a text a character at a time (NFD's reordering of marks
#: never moves one past a starter), so they keep a starter that maps to itself, and a
#: cut before or after it, where they were; NFC and NFKC compose ("=" and U+0338 are "≠").
CHARACTERWISE_NORMALIZERS = {"BertNormalizer", "NFD", "NFKD", "Lowercase", "StripAccents"}


def _components(config: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A normalizer or pre-tokenizer as the list of its parts (a Sequence's)."""
    if not config:
        return []
    return config.get("normalizers") or config.get("pretokenizers") or [config]


def _local(config: dict[str, Any]) -> bool:
    """Whether ``settled`` is valid for this tokenizer's parts (see the docstring)."""
    pre_tokenizer = config.get("pre_tokenizer") or {}
    normalizers = {part.get("type") for part in _components(config.get("normalizer"))}
    return (pre_tokenizer.get("type") in LOCAL_PRE_TOKENIZERS
            and pre_tokenizer.get("use_regex", True) and pre_tokenizer.get("split", True)
            and normalizers <= LOCAL_NORMALIZERS
            and (config.get("model") or {}).get("type") in LOCAL_MODELS
            and not any(token.get("lstrip") or token.get("rstrip") or token.get("single_word")
                        or token.get("normalized") for token in config.get("added_tokens") or []))


def _byte_level_max_chars(config: dict[str, Any], added: list[str]) -> int | None:
    """The longest token in code points, for byte-level BPE (None for any other)."""
    from tokenizers.pre_tokenizers import ByteLevel

    model = config.get("model") or {}
    normalizers = {part.get("type") for part in _components(config.get("normalizer"))}
    vocab = model.get("vocab")
    if (model.get("type") != "BPE" or not isinstance(vocab, dict)
            or (config.get("pre_tokenizer") or {}).get("type") != "ByteLevel"
            or not normalizers <= LENGTHENING_NORMALIZERS
            or not set(ByteLevel.alphabet()) <= vocab.keys()):
        return None
    # Each byte-level symbol is one byte of the normalized text, which has at least as
    # many bytes as the text has code points.
    return max([len(token) for token in vocab] + [len(text) for text in added])


def _word_cuts(config: dict[str, Any], added: list[str]) -> tuple[str, bool] | None:
    """Cuts finer than the white space, for ``BertPreTokenizer`` behind character-wise
    normalizers (``KeptCounts``' ``marks`` and ``ideographs``): the ASCII punctuation
    marks and (with ``handle_chinese_chars``, which puts spaces around them) the CJK
    ideographs U+4E00 to U+9FFF, which each stay a word of their own whatever is around
    them; none a character of an added token, so that no added token's match straddles
    a cut. None for any other tokenizer."""
    normalizers = _components(config.get("normalizer"))
    if ((config.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer"
            or not {part.get("type") for part in normalizers} <= CHARACTERWISE_NORMALIZERS):
        return None
    in_added = set("".join(added))
    marks = "".join(mark for mark in string.punctuation if mark not in in_added)
    ideographs = (any(part.get("type") == "BertNormalizer"
                      and part.get("handle_chinese_chars") is True for part in normalizers)
                  and not any("\u4e00" <= char <= "\u9fff" for char in in_added))
    return (marks, ideographs) if marks or ideographs else None


#: The JSON files of a model folder (and of its modules' folders) that chunkd,
#: sentence-transformers or transformers read as objects.
CONFIG_FILES = ("config.json", "sentence_bert_config.json", "tokenizer_config.json",
                "config_sentence_transformers.json", "special_tokens_map.json")


def model_file(spec: Path) -> Path:
    """The ``tokenizer.json`` of a file or model folder ``spec``."""
    if not spec.is_dir():
        return spec
    if (spec / TOKENIZER_FILE).is_file():
        return spec / TOKENIZER_FILE
    for module in modules(spec):
        if module.get("type", "").endswith(".Transformer"):
            candidate = spec / module.get("path", "") / TOKENIZER_FILE
            if candidate.is_file():
                return candidate
    raise SettingsError(f"{spec}: no {TOKENIZER_FILE} in this model folder (nor in the "
                        f"Transformer module's folder that modules.json names)")


def modules(folder: Path) -> list[dict[str, str]]:
    """The modules a sentence-transformers folder's ``modules.json`` lists (none
    without one), each an object whose ``path`` and ``type`` are strings."""
    path = folder / "modules.json"
    listed = read_json(path, list, default=[])
    if not all(isinstance(module, dict) and all(isinstance(module.get(key, ""), str)
                                                for key in ("path", "type"))
               for module in listed):
        raise SettingsError(f"{path}: not a list of modules (objects whose path and type "
                            "are strings)")
    return listed


def check_model_folder(folder: Path) -> None:
    """``SettingsError`` naming the file, in one line, if a JSON file of a model folder
    (``modules.json``, ``CONFIG_FILES`` in it and in its modules' folders) is not JSON,
    is nested too deeply to read, or is not what it must be, so that no library's
    traceback (or its words for a wrong type) reaches the user."""
    folders = [folder, *(folder / module.get("path", "") for module in modules(folder)
                         if not Path(module.get("path", "")).is_absolute())]
    for each in dict.fromkeys(folders):
        for name in CONFIG_FILES:
            read_json(each / name, dict)


def read_json(path: Path, kind: type[Any], default: Any = None) -> Any:
    """A JSON file's value, which must be a ``kind`` (``dict``: an object, ``list``: an
    array); ``default`` when the file does not exist; else ``SettingsError``."""
    from chunkd.inputs.readers import open_regular

    try:  # a FIFO in a model folder must not block the command
        with open_regular(str(path)) as stream:
            text = stream.read().decode("utf-8")
    except FileNotFoundError:
        return default
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"{path}: cannot read it: {getattr(error, 'strerror', None) or error}"
                            ) from None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise SettingsError(f"{path}: not JSON: {error}") from None
    except RecursionError:  # Python's decoder recurses: a value nested thousands deep
        raise SettingsError(f"{path}: nested too deeply to read") from None
    if not isinstance(value, kind):
        raise SettingsError(f"{path}: not a JSON {'object' if kind is dict else 'array'}")
    return value


def _positive(value: Any, below: int | None = None) -> int | None:
    """``value`` if it is a whole number above 0 (and under ``below``), else None."""
    whole = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if whole and (below is None or value < below) else None


def _limit(folder: Path, transformer_folder: Path) -> int | None:
    """The model's maximum sequence length: sentence-transformers' ``max_seq_length``,
    else the tokenizer's ``model_max_length`` (None when neither says)."""
    for folder_ in dict.fromkeys((folder, transformer_folder)):
        value = _positive(read_json(folder_ / "sentence_bert_config.json", dict, default={}
                                    ).get("max_seq_length"))
        if value is not None:
            return value
    return _positive(read_json(transformer_folder / "tokenizer_config.json", dict, default={}
                               ).get("model_max_length"), below=NO_LIMIT)


class HuggingFaceUnit:
    """A Hugging Face tokenizer as a length unit (``chunkd.units.LengthUnit``).

    ``limit``: the model's maximum sequence length, when a model folder says it;
    ``special``: the tokens the model adds to every input ([CLS] and [SEP]); so a chunk
    fits when its count is at most ``max_size`` (``limit - special``)."""

    def __init__(self, data: bytes, label: str, where: str, limit: int | None = None) -> None:
        """``data``: the ``tokenizer.json`` text; ``label``: its name in the unit's
        identity; ``where``: where it comes from, for messages."""
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise SettingsError(f"{where}: reading a Hugging Face tokenizer needs the "
                                f"tokenizers package: {INSTALL}") from None

        try:
            config = json.loads(data)
            self.tokenizer = Tokenizer.from_str(data.decode("utf-8"))
        except Exception as error:  # the library raises a bare Exception on bad files
            first_line = (str(error).splitlines() or [type(error).__name__])[0]
            raise SettingsError(f"{where}: not a Hugging Face tokenizer file: {first_line}"
                                ) from None
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.name = f"{label}@sha256:{hashlib.sha256(data).hexdigest()}"
        self.special = self.tokenizer.num_special_tokens_to_add(False)
        self.limit = limit
        self.local = _local(config)
        added = [token.get("content", "") for token in config.get("added_tokens") or []]
        #: No added token straddles a cut this far from the end.
        self.added_reach = max((len(text) for text in added), default=0)
        pre_tokenizer = config.get("pre_tokenizer") or {}
        #: Whether the pre-tokenizer puts a space in front of a text that has none.
        self.adds_space = bool(pre_tokenizer.get("add_prefix_space")) or (
            pre_tokenizer.get("type") == "Metaspace"
            and pre_tokenizer.get("prepend_scheme", "always") != "never")
        self.max_chars: int | None = _byte_level_max_chars(config, added)
        #: Whether a text's count is the sum of its groups' (``count``).
        self.additive = (self.local and pre_tokenizer.get("type") in SPACE_SPLITTING
                         and not any(GROUPS.fullmatch(text) is None for text in added))
        cuts = _word_cuts(config, added)
        #: The counts of its groups (and of their finer pieces, where it has them), for
        #: ``count``: most groups the splitter counts again, and a new group is mostly
        #: made of pieces seen before ("words," and "(words").
        self.kept = KeptCounts(self.encoded if cuts is None
                               else KeptCounts(self.encoded, *cuts))

    @property
    def max_size(self) -> int | None:
        """The most tokens a chunk can have and still fit the model."""
        return None if self.limit is None else self.limit - self.special

    def count(self, text: str) -> int:
        """The number of tokens; for an ``additive`` tokenizer, the sum of the counts
        of its groups (the runs between spaces, tabs, CR and LF), kept
        (``chunkd.units.kept``), a new group's the sum of its finer pieces' where it
        has them (``_word_cuts``)."""
        # Exact: the pre-tokenizer splits at these four, which every local normalizer
        # keeps as they are (a starter, which composes with nothing), and no added
        # token holds one; so each group's words, and so its tokens, are its own. The
        # same holds of the finer pieces' cuts, for the normalizers they are made for.
        return self.kept(text) if self.additive else self.encoded(text)

    def encoded(self, text: str) -> int:
        """The number of tokens, from the tokenizer itself."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def settled(self, text: str) -> tuple[int, int]:
        """The words followed by two more (a cut clear of the added tokens, before a
        space where the tokenizer adds one), and their count; (0, 0) for a tokenizer
        whose words are not known to be local."""
        if not self.local:
            return 0, 0
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        # Each word's first token: its index and where the word starts in text.
        firsts: list[tuple[int, int]] = []
        previous = None
        for index, (word, (start, _)) in enumerate(zip(encoding.word_ids, encoding.offsets)):
            if word is None or word != previous:
                firsts.append((index, start))
            previous = word
        reach = len(text) - self.added_reach
        for index, start in reversed(firsts[1:-1]):
            if self.adds_space and text[start] != " ":
                # Byte-level words start after the space that their first token holds.
                start -= 1
            if 0 < start <= reach and (not self.adds_space or text[start] == " "):
                break
        else:
            return 0, 0
        # The count of the rest on its own must be the rest of the count; it always is
        # for the families above, and a cut that failed would settle nothing.
        if self.encoded(text[start:]) != len(encoding.ids) - index:
            return 0, 0
        return start, index


@functools.lru_cache(maxsize=None)
def unit(spec: str) -> HuggingFaceUnit:
    """The unit for a ``tokenizer.json`` file or a model folder, loaded once."""
    given = Path(spec)
    path = model_file(given)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SettingsError(f"{path}: cannot read it: {error.strerror or error}") from None
    if given.is_dir():
        return HuggingFaceUnit(data, path.relative_to(given.parent).as_posix(), str(path),
                               _limit(given, path.parent))
    return HuggingFaceUnit(data, path.name, str(path))


def from_tokenizer(tokenizer: Any) -> HuggingFaceUnit:
    """The unit for a loaded ``tokenizers.Tokenizer`` (a transformers fast tokenizer's
    ``backend_tokenizer``), from its JSON form; a copy, so the caller's padding and
    truncation settings stay as they are."""
    data = tokenizer.to_str().encode("utf-8")
    return HuggingFaceUnit(data, "tokenizer.json", "the tokenizer")
