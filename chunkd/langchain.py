"""A drop-in for LangChain's text splitters: change one import.

    # from langchain_text_splitters import RecursiveCharacterTextSplitter
    from chunkd.langchain import RecursiveCharacterTextSplitter

``RecursiveCharacterTextSplitter`` and ``CharacterTextSplitter`` take every argument
LangChain's take and subclass them (``isinstance`` checks pass, ``from_language``,
``get_separators_for_language`` and the rest are LangChain's own); ``split_text``,
``create_documents``, ``split_documents`` and ``transform_documents`` return the same
chunks, computed by chunkd's kernel (``chunkd.kernel.chosen``): ``len`` and cl100k_base tokens
(``from_tiktoken_encoder(encoding_name="cl100k_base")``, counted offline) at compiled
speed; tiktoken's other encodings (``encoding_name="o200k_base"``, when tiktoken's cache
holds it) and fast Hugging Face tokenizers (``from_huggingface_tokenizer``) as chunkd's
units, with their streaming bounds; any other length function through ``chunkd.units.FunctionUnit``, called only
where LangChain calls it (the kernel's pure-Python twin takes one that returns
floats, which the kernel's whole-number counts cannot). With
``add_start_index=True``, ``start_index`` is where the chunk really is: LangChain
finds it with ``str.find``, which can land on an earlier copy of the same text.

Needs LangChain's splitters: ``pip install '.[langchain]'`` from chunkd's folder.
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Callable, Collection, Set
from typing import TYPE_CHECKING, Any, Literal

try:
    import langchain_text_splitters as _langchain
    from langchain_core.documents import Document
except ImportError as error:  # the optional extra is missing
    raise ImportError("chunkd.langchain needs LangChain's text splitters: "
                      "pip install 'langchain-text-splitters>=1.1,<1.2'") from error

from chunkd.model.chunk import Chunk
from chunkd.embeddings.models import LangChainEmbedder
from chunkd.model.errors import SettingsError
from chunkd.units import LengthUnit

if TYPE_CHECKING:
    from typing_extensions import Self

    # _Kernel is a mixin that always comes before one of LangChain's splitters, whose
    # attributes (_chunk_size, _length_function...) and __init__ it uses; to mypy it
    # is that splitter's base. At run time it is a plain class, as it always was.
    _Splitter = _langchain.TextSplitter
else:
    _Splitter = object

__all__ = ["CharacterTextSplitter", "HuggingFaceLength", "LangChainEmbedder",
           "RecursiveCharacterTextSplitter", "TiktokenLength", "embedder"]

#: Separator patterns that CharacterTextSplitter treats as lookarounds: it joins the
#: pieces they cut with nothing, even when the separator is dropped.
LOOKAROUND_PREFIXES = ("(?=", "(?<!", "(?<=", "(?!")


class TiktokenLength:
    """The length function of ``from_tiktoken_encoder``: ``len(encoding.encode(text,
    allowed_special=..., disallowed_special=...))``, as LangChain's. For cl100k_base
    (``encoding_name="cl100k_base"`` or a model that uses it) the encoding is chunkd's
    offline copy, and the kernel counts at compiled speed any text where ``encode``
    and ``encode_ordinary`` agree: one whose special-token text (``<|endoftext|>``...)
    is neither allowed nor disallowed, so that it is ordinary text."""

    def __init__(self, encoding_name: str = "gpt2", model_name: str | None = None,
                 allowed_special: Literal["all"] | Set[str] | None = None,
                 disallowed_special: Literal["all"] | Collection[str] = "all") -> None:
        import tiktoken
        import tiktoken.model

        from chunkd.units import tiktoken_encodings

        name = (tiktoken.model.encoding_name_for_model(model_name) if model_name is not None
                else encoding_name)
        #: The unit chunkd counts this encoding in ("cl100k_base", "o200k_base"...), or
        #: None: tiktoken's own loading, as LangChain does it (network or cache).
        self.unit: str | None = None
        if name == "cl100k_base":
            from chunkd.units.cl100k import encoding
            self.encoding, self.unit = encoding(), name
        elif name in tiktoken_encodings.names():
            try:  # from tiktoken's cache, checked, if it is there
                self.encoding, self.unit = tiktoken_encodings.unit(name).encoding, name
            except SettingsError:
                pass
        if self.unit is None:
            self.encoding = (tiktoken.encoding_for_model(model_name) if model_name is not None
                             else tiktoken.get_encoding(encoding_name))
        self.allowed_special = set() if allowed_special is None else allowed_special
        self.disallowed_special = disallowed_special
        special = self.encoding.special_tokens_set
        self._special = re.compile("|".join(map(re.escape, sorted(special, key=len,
                                                                  reverse=True))))
        # The special tokens that encode does not take as ordinary text (tiktoken's
        # reading of "all"): it counts the allowed as one token, refuses the others.
        allowed = special if allowed_special == "all" else set(self.allowed_special)
        refused = special - allowed if disallowed_special == "all" else set(disallowed_special)
        self._not_ordinary = frozenset(allowed | refused)

    def __call__(self, text: str) -> int:
        return len(self.encoding.encode(text, allowed_special=self.allowed_special,
                                        disallowed_special=self.disallowed_special))

    def counts_in_kernel(self, text: str) -> bool:
        """Whether chunkd's unit gives this function's counts on every part of
        ``text``."""
        return self.unit is not None and self._not_ordinary.isdisjoint(
            self._special.findall(text))


class HuggingFaceLength:
    """The length function of ``from_huggingface_tokenizer``: ``len(tokenizer.tokenize(
    text))``, as LangChain's. A fast tokenizer (one with a ``tokenizers`` backend that
    does not split special tokens) is also a unit that the kernel runs (``unit``)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.unit = None
        if getattr(tokenizer, "is_fast", False) and not getattr(
                tokenizer, "split_special_tokens", False):
            from chunkd.units.huggingface import from_tokenizer

            self.unit = from_tokenizer(tokenizer.backend_tokenizer)

    def __call__(self, text: str) -> int:
        return len(self.tokenizer.tokenize(text))


#: Per thread, kernel splitters already built, by their arguments: one is ready for the
#: next document after ``finish``, and building one costs more than splitting a page.
_built = threading.local()
CACHED_SPLITTERS = 32


def _reused(key: tuple, build: Callable[[], object]):
    """The kernel splitter for ``key``, taken out of this thread's cache while in use
    (an exception midway drops it); ``_put_back`` returns it."""
    splitters = _built.__dict__.setdefault("splitters", {})
    splitter = splitters.pop(key, None)
    return build() if splitter is None else splitter


def _put_back(key: tuple, splitter: object) -> None:
    splitters = _built.__dict__.setdefault("splitters", {})
    if len(splitters) >= CACHED_SPLITTERS:
        splitters.clear()
    splitters[key] = splitter


def _keep(keep_separator: bool | str) -> bool | str:
    """LangChain's reading of keep_separator: "end", else any true value is "start"."""
    return "end" if keep_separator == "end" else "start" if keep_separator else False


class _Kernel(_Splitter):
    """What chunkd changes in LangChain's splitters: the chunks come from its splitter,
    with their offsets."""

    def _separator_settings(self) -> tuple:
        """The attributes that choose the separators, as a hashable key."""
        raise NotImplementedError

    def _separator_arguments(self) -> dict:
        """The splitter's separator arguments for this LangChain splitter."""
        raise NotImplementedError

    def _chunks(self, text: str) -> list[Chunk]:
        """``text``'s chunks, with offsets, as LangChain would split it."""
        from chunkd.units import CountError

        size, overlap, length = self._chunk_size, self._chunk_overlap, self._length_function
        if isinstance(size, int) and isinstance(overlap, int):
            if length is len:
                unit: str | LengthUnit | Callable[[str], int] = "chars"
            elif isinstance(length, TiktokenLength) and length.counts_in_kernel(text):
                assert length.unit is not None
                unit = length.unit
            elif isinstance(length, HuggingFaceLength) and length.unit is not None:
                unit = length.unit
            else:
                unit = length
            # A function by its identity: the cached splitter keeps it alive.
            key = (type(self), unit if isinstance(unit, str) else id(unit), size, overlap,
                   self._strip_whitespace, self._separator_settings())
            try:
                splitter = _reused(key, lambda: self._splitter(unit))
                chunks = splitter.feed(text) + splitter.finish()
            except CountError:
                pass  # a length that is no whole number: the twin's Python numbers take it
            else:
                _put_back(key, splitter)
                return chunks
        from chunkd.kernel.chosen import PythonRecursiveSplitter
        from chunkd.units import FunctionUnit

        splitter = PythonRecursiveSplitter(
            size, overlap, unit=FunctionUnit(length), measure_chunks=False,
            strip_whitespace=self._strip_whitespace, **self._separator_arguments())
        return splitter.feed(text) + splitter.finish()

    def _splitter(self, unit: str | LengthUnit | Callable[[str], int]):
        """The kernel splitter for ``unit``: a unit or its name, or a length
        function, which is called only where LangChain calls it (on the pieces it
        merges and the separators it joins them with, never on a whole chunk: a chunk
        can hold what the function refuses, a disallowed special token that the
        separators cut, ``"x<|endoftext|>y"`` split on ``"|"``)."""
        from chunkd.kernel.chosen import RecursiveSplitter
        from chunkd.units import FunctionUnit, resolve

        length_unit = (resolve(unit) if isinstance(unit, str) else
                       unit if isinstance(unit, LengthUnit) else FunctionUnit(unit))
        return RecursiveSplitter(self._chunk_size, self._chunk_overlap, unit=length_unit,
                                 measure_chunks=not isinstance(length_unit, FunctionUnit),
                                 strip_whitespace=self._strip_whitespace,
                                 **self._separator_arguments())

    def split_text(self, text: str) -> list[str]:
        """Split ``text`` into chunks (LangChain's, one for one)."""
        return [chunk.text for chunk in self._chunks(text)]

    def create_documents(self, texts: list[str],
                         metadatas: list[dict[Any, Any]] | None = None) -> list[Document]:
        """A ``Document`` per chunk of each text, with a copy of the text's metadata and,
        with ``add_start_index``, the chunk's exact offset as ``start_index``."""
        metadatas_ = metadatas or [{}] * len(texts)
        documents = []
        for i, text in enumerate(texts):
            for chunk in self._chunks(text):
                metadata = copy.deepcopy(metadatas_[i])
                if self._add_start_index:
                    metadata["start_index"] = chunk.start
                documents.append(Document(page_content=chunk.text, metadata=metadata))
        return documents

    @staticmethod
    def _tiktoken_length_function(
            encoding_name: str = "gpt2", model_name: str | None = None,
            allowed_special: Literal["all"] | Set[str] | None = None,
            disallowed_special: Literal["all"] | Collection[str] = "all") -> TiktokenLength:
        return TiktokenLength(encoding_name, model_name, allowed_special, disallowed_special)

    @classmethod
    def from_tiktoken_encoder(cls, encoding_name: str = "gpt2", model_name: str | None = None,
                              allowed_special: Literal["all"] | Set[str] | None = None,
                              disallowed_special: Literal["all"] | Collection[str] = "all",
                              **kwargs: Any) -> Self:
        """A splitter counting tiktoken tokens, as LangChain's; cl100k_base is counted
        offline and, on text without special tokens, by the kernel."""
        return cls(length_function=TiktokenLength(encoding_name, model_name, allowed_special,
                                                  disallowed_special), **kwargs)


    @classmethod
    def from_huggingface_tokenizer(cls, tokenizer: Any, **kwargs: Any) -> Self:
        """A splitter counting a Hugging Face tokenizer's tokens, as LangChain's; a fast
        tokenizer is counted by the kernel."""
        from transformers import PreTrainedTokenizerBase

        if not isinstance(tokenizer, PreTrainedTokenizerBase):
            raise ValueError("Tokenizer received was not an instance of PreTrainedTokenizerBase")
        return cls(length_function=HuggingFaceLength(tokenizer), **kwargs)


class RecursiveCharacterTextSplitter(_Kernel, _langchain.RecursiveCharacterTextSplitter):
    """LangChain's ``RecursiveCharacterTextSplitter``, compiled and streaming."""

    def _separator_settings(self) -> tuple:
        return tuple(self._separators), self._is_separator_regex, _keep(self._keep_separator)

    def _separator_arguments(self) -> dict:
        regex = self._is_separator_regex
        return {"separators": [re.compile(s) if regex and s else s for s in self._separators],
                "keep_separator": _keep(self._keep_separator)}


class CharacterTextSplitter(_Kernel, _langchain.CharacterTextSplitter):
    """LangChain's ``CharacterTextSplitter``, compiled: one separator, every piece merged."""

    def _separator_settings(self) -> tuple:
        return self._separator, self._is_separator_regex, _keep(self._keep_separator)

    def _separator_arguments(self) -> dict:
        separator, regex = self._separator, self._is_separator_regex
        lookaround = regex and separator.startswith(LOOKAROUND_PREFIXES)
        return {"separators": [re.compile(separator) if regex and separator else separator],
                "keep_separator": _keep(self._keep_separator), "merge_long": True,
                "join": "" if lookaround else None}


def embedder(embeddings: Any) -> LangChainEmbedder:
    """chunkd's embedding model for a LangChain ``Embeddings`` object (what the
    ``embed`` setting takes): ``chunkd.split_text(text, strategy="semantic",
    embed=HuggingFaceEmbeddings(...))`` works with the object itself too."""
    return LangChainEmbedder(embeddings)
