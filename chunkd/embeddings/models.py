"""Embedding models, one interface for semantic chunking and for ``chunkd eval``.

An ``Embedder`` has an identity (``name``, recorded with results, so that a result made
with another model is not taken for current) and embeds a list of texts into a float32
array, a row a text. Four kinds:

* a sentence-transformers model folder, or a model name already in the local Hugging
  Face cache (``--embed MODEL``): loaded once a process, offline (chunkd never
  downloads a model), on the CPU unless ``--embed-device`` says otherwise, batched;
* any Python callable from a list of texts to vectors (``FunctionEmbedder``);
* a LangChain ``Embeddings`` object (``LangChainEmbedder``);
* an OpenAI-compatible ``/v1/embeddings`` endpoint (``--embed-url URL --embed-model
  NAME``: OpenAI, Hugging Face TEI, vLLM, Ollama, llama.cpp's server, LM Studio),
  called with batches bounded by count and by tokens, a few requests in flight.

Every front end reaches a model through ``chunkd.embeddings.selection.embedder(settings)``, which
wraps it in a cache by content (``Cached``): each distinct text is embedded once a
process, so a grid of settings, the daemon and a text that recurs do not pay twice (and,
with ``--embed-cache``, once for good: ``chunkd.embeddings.cache``).
"""

from __future__ import annotations

import functools
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from time import monotonic
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from chunkd.model.errors import EmbedError, SettingsError
# The endpoint's tries and waits, as its callers and tests know them here.
from chunkd.net.endpoint import FIRST_WAIT as FIRST_WAIT, LONGEST_WAIT as LONGEST_WAIT, TRIES as TRIES

if TYPE_CHECKING:
    import numpy

#: What ``--embed`` needs beyond chunkd itself.
EXTRA = "pip install 'sentence-transformers>=3'"
#: Texts a model embeds at once.
BATCH = 32


class Embedder(Protocol):
    """An embedding model."""

    #: Its identity as results record it: a folder's name and the SHA-256 of its files,
    #: a function's qualified name, an endpoint's URL and model.
    name: str

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        """A float32 array with a row per text, in order."""
        ...


def as_matrix(vectors: Any, count: int, name: str) -> numpy.ndarray:
    """``vectors`` as a float32 array of ``count`` rows of one length, or ``EmbedError``
    saying what is wrong with them."""
    import numpy

    try:
        matrix = numpy.asarray(vectors, dtype=numpy.float32)
    except (TypeError, ValueError):  # numpy's words quote the values: a message must not
        raise EmbedError(f"{name} returned no vectors of one length, of numbers "
                         "only") from None
    if matrix.ndim != 2 or matrix.shape[0] != count or matrix.shape[1] == 0:
        raise EmbedError(f"{name} returned an array of shape {matrix.shape} for {count} "
                         "texts: expected a row of numbers per text")
    if not numpy.isfinite(matrix).all():
        raise EmbedError(f"{name} returned a vector that is not finite")
    zeros = numpy.flatnonzero(~matrix.any(axis=1))
    if len(zeros):  # no direction: its cosine with anything is 0 / 0
        raise EmbedError(f"{name} returned a vector of zeros only (text {zeros[0] + 1} of "
                         f"{count}): it has no direction to compare")
    return matrix


class EmbeddingTally:
    """How many of one ``embed`` call's texts are embedded so far, told to ``told(done,
    total)`` as it grows (from the threads that embed, one at a time)."""

    def __init__(self, total: int, told: Callable[[int, int], None]) -> None:
        self.total, self.done, self.told = total, 0, told
        self.lock = threading.Lock()
        told(0, total)

    def add(self, count: int) -> None:
        with self.lock:
            self.done = min(self.total, self.done + count)
            self.told(self.done, self.total)

    def finish(self) -> None:
        """All embedded (a model may not count its batches)."""
        self.add(self.total)


#: Who is told of each ``embed`` call's progress (``embedding_progress``); and the
#: tally of the call under way, which the models add their batches to (``embedded``).
_TOLD: ContextVar[Callable[[int, int], None] | None] = ContextVar("told", default=None)
_TALLY: ContextVar[EmbeddingTally | None] = ContextVar("tally", default=None)


@contextmanager
def embedding_progress(told: Callable[[int, int], None] | None) -> Iterator[None]:
    """Within it (unless ``told`` is None), each ``embed`` of a model that
    ``chunkd.embeddings.selection.embedder`` made tells ``told(done, total)`` as its texts are
    embedded: 0 at once, then those its caches hold, then a batch at a time as the
    model ends each (all at once where it cannot say), last ``done == total``."""
    token = _TOLD.set(told)
    try:
        yield
    finally:
        _TOLD.reset(token)


def embedded(count: int) -> None:
    """Count ``count`` more texts of the ``embed`` call under way as embedded."""
    tally = _TALLY.get()
    if tally is not None:
        tally.add(count)


@contextmanager
def counting(count: int) -> Iterator[None]:
    """Around a cache's ``embed`` of ``count`` texts: their tally, which the models it
    calls add to, all done at the end; none if nobody is told, or if an outer cache's
    call is counted already (the texts this one holds count there at once)."""
    told = _TOLD.get()
    if told is None or _TALLY.get() is not None:
        yield
        return
    tally = EmbeddingTally(count, told)
    token = _TALLY.set(tally)
    try:
        yield
        tally.finish()
    finally:
        _TALLY.reset(token)


class FunctionEmbedder:
    """Any callable from a list of texts to their vectors (a list of lists, an array),
    called a batch at a time."""

    def __init__(self, function: Callable[[list[str]], Any], name: str | None = None,
                 batch: int = BATCH) -> None:
        self.function = function
        self.name = name or "python:" + getattr(function, "__module__", "?") + "." + getattr(
            function, "__qualname__", type(function).__qualname__)
        self.batch = batch

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy

        if not texts:
            return numpy.zeros((0, 0), dtype=numpy.float32)
        parts = []
        for start in range(0, len(texts), self.batch):
            batch = list(texts[start:start + self.batch])
            parts.append(as_matrix(self.function(batch), len(batch), self.name))
            embedded(len(batch))
        if len({part.shape[1] for part in parts}) > 1:
            raise EmbedError(f"{self.name} returned vectors of different lengths")
        return numpy.concatenate(parts)


class LangChainEmbedder:
    """A LangChain ``Embeddings`` object as chunkd's embedding model: texts go through
    its ``embed_documents`` (duck-typed: nothing of LangChain is imported, so the
    semantic strategy takes one without ``langchain-text-splitters``)."""

    def __init__(self, embeddings: Any) -> None:
        self.embeddings = embeddings
        kind = type(embeddings)
        model = next((getattr(embeddings, name) for name in ("model", "model_name")
                      if isinstance(getattr(embeddings, name, None), str)), None)
        self.name = f"langchain:{kind.__module__}.{kind.__qualname__}" + (
            f"({model})" if model else "")

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        return as_matrix(self.embeddings.embed_documents(list(texts)), len(texts), self.name)


#: The bytes of vectors and texts a ``Cached`` holds: past it, the oldest entries go
#: (down to half), those of the call that passed it kept.
MEMORY_BYTES = 512 << 20


class Cached:
    """An embedder that embeds each distinct text once, however often it is asked,
    within ``MEMORY_BYTES``; the texts it does not hold go to the model in one call,
    longest first (a batch of like lengths pads least)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.vectors: dict[str, numpy.ndarray] = {}  # in order of use, the oldest first
        self.held = 0  # bytes

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy

        vectors = self.vectors
        missing = list(dict.fromkeys(text for text in texts if text not in vectors))
        with counting(len(texts)):
            embedded(len(texts) - len(missing))  # those held, and repeats of the others
            if missing:
                missing.sort(key=len, reverse=True)
                for text, vector in zip(missing, self.inner.embed(missing)):
                    vectors[text] = vector
                    self.held += vector.nbytes + len(text)
        if not texts:
            return numpy.zeros((0, 0), dtype=numpy.float32)
        made = numpy.stack([vectors[text] for text in texts])
        if self.held > MEMORY_BYTES:
            for text in texts:  # used now: the last to go
                vectors[text] = vectors.pop(text)
            while self.held > MEMORY_BYTES // 2 and vectors:
                text = next(iter(vectors))
                self.held -= vectors.pop(text).nbytes + len(text)
        return made


#: The environment variable an endpoint's API key comes from (never the command line).
KEY_VARIABLE = "CHUNKD_EMBED_API_KEY"
#: The environment variable of an endpoint call's timeout in seconds (default 30).
TIMEOUT_VARIABLE = "CHUNKD_EMBED_TIMEOUT"
#: Texts an endpoint is sent at once and tokens summed over them (OpenAI's limit per
#: request), unless the user or the server's ``/info`` (Hugging Face TEI) says other.
ENDPOINT_BATCH, ENDPOINT_BATCH_TOKENS = 64, 300_000
#: The bytes an answer may hold: a vector's number (as JSON, indented), a text's own
#: (its object and index), the answer's own (model, usage); and the widest vector
#: assumed while no answer has told their length.
NUMBER_BYTES, TEXT_BYTES, ANSWER_BYTES, WIDEST = 64, 4096, 1 << 16, 16_384
#: The bytes ``GET /info`` may answer.
INFO_BYTES = 1 << 20
#: Seconds a ``GET /info`` that got no answer is remembered by the settings checks that
#: ask for the server's window (``OpenAIEmbedder.input_limit``): each ask may wait the
#: whole timeout, and ``chunkd serve`` builds settings for every request, so a server
#: that does not answer would hold up each one; a server that was starting is asked
#: again after this.
UNANSWERED_INFO_KEPT = 30.0


def endpoint_url(url: str) -> str:
    """The embeddings URL of an endpoint: ``URL`` as given when it ends in
    ``/v1/embeddings``, ``URL/embeddings`` when it ends in ``/v1``, else
    ``URL/v1/embeddings`` (a trailing ``/`` is ignored); ``SettingsError`` unless a
    well-formed http(s) URL (``chunkd.net.endpoint.api_url``)."""
    from chunkd.net.endpoint import api_url

    return api_url(url, "--embed-url", "embeddings")


class EndpointLimits(NamedTuple):
    """How an endpoint is called: at most ``concurrency`` requests in flight, each of at
    most ``batch`` texts whose tokens sum to at most ``batch_tokens`` (None: what the
    server's ``/info`` says, else ``ENDPOINT_BATCH``, ``ENDPOINT_BATCH_TOKENS``), tokens
    counted by ``tokenizer`` (a ``chunkd.units.resolve`` spec; None or the default,
    cl100k_base: UTF-8 bytes, never fewer than the tokens of byte-level BPE, WordPiece or
    SentencePiece, special tokens aside)."""

    concurrency: int
    batch: int | None = None
    batch_tokens: int | None = None
    tokenizer: str | None = None


def batches(counts: Sequence[int], batch: int, batch_tokens: int) -> Iterator[tuple[int, int]]:
    """The ``(start, end)`` of each batch of texts of these token ``counts``, in order:
    as many texts as fit ``batch`` and ``batch_tokens``; a text over ``batch_tokens``
    goes alone."""
    start, total = 0, 0
    for end, count in enumerate(counts):
        if end > start and (end - start == batch or total + count > batch_tokens):
            yield start, end
            start, total = end, 0
        total += count
    if len(counts) > start:
        yield start, len(counts)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint, called with batches bounded by
    count and by tokens, at most ``limits.concurrency`` at once (``Limits``); the
    vectors come back in the texts' order. Each try of a call is one request within
    the timeout as a whole, with an answer bounded by what its texts can need
    (``chunkd.net.client``). A call that gets 429, a 5xx or no answer (refused, reset,
    timed out) is tried again after a wait (the server's ``Retry-After`` in seconds, at
    most ``LONGEST_WAIT``, else ``FIRST_WAIT`` doubled each try), ``TRIES`` times in
    all; a redirect (never followed), any other status, an answer too large or not
    embeddings JSON, a wrong number of vectors, vectors of zeros or whose length
    differs (within a call or from earlier calls) is an ``EmbedError`` at once, and the
    calls not yet answered are given up. No message repeats what a server wrote (a
    status's reason phrase, a redirect's path). The key comes
    from ``CHUNKD_EMBED_API_KEY`` only and is sent as ``Authorization: Bearer``
    (credentials in the URL, without a key, as Basic authentication); no message or
    record shows them. Where ``limits`` leaves a batch bound open, the first
    ``embed`` asks the server's ``/info`` (Hugging Face TEI's ``max_client_batch_size``
    and ``max_batch_tokens``): any other answer leaves the defaults; no answer (within
    the timeout), a 429 or a 5xx leaves them for this call, and the next asks again.
    The same answer gives the model's window (``input_limit``, TEI's
    ``max_input_length``), which the settings checks ask for: to them no answer is
    remembered for ``UNANSWERED_INFO_KEPT`` seconds."""

    def __init__(self, url: str, model: str, limits: EndpointLimits, timeout: float | None = None,
                 first_wait: float = FIRST_WAIT, longest_wait: float = LONGEST_WAIT) -> None:
        from chunkd.net.endpoint import Endpoint
        from chunkd.net.urls import identity_url

        self.endpoint = Endpoint(endpoint_url(url), "--embed-url", KEY_VARIABLE, EmbedError,
                                 endpoint_timeout() if timeout is None else timeout,
                                 first_wait, longest_wait)
        self.shown = self.endpoint.shown
        self.model = model
        # The whole URL (its query too: a deployment, an API version), never its
        # credentials: the vectors of another query may be another model's.
        self.name = f"{model}@{identity_url(self.endpoint.url)}"
        self.limits = limits
        self.dimension: int | None = None
        self._told: dict[str, int] | None = None
        #: When ``/info`` last got no answer (``monotonic``), while none has answered.
        self._unanswered_at: float | None = None
        self._asking = threading.Lock()

    @property
    def failing(self) -> bool:
        """Whether the endpoint's last call found no answer (``Endpoint.failing``)."""
        return self.endpoint.failing

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy

        if not texts:
            return numpy.zeros((0, 0), dtype=numpy.float32)
        batch, batch_tokens = self.bounds()
        calls = [list(texts[start:end])
                 for start, end in batches(self.counts(texts), batch, batch_tokens)]
        if self.limits.concurrency == 1 or len(calls) == 1:
            parts = []
            for call in calls:
                parts.append(self._batch(call, threading.Event()))
                embedded(len(call))
        else:
            parts = self._in_flight(calls, _TALLY.get())
        for part in parts:
            if self.dimension is None:
                self.dimension = part.shape[1]
            elif part.shape[1] != self.dimension:
                raise EmbedError(f"{self.shown}: vectors of {part.shape[1]} numbers after "
                                 f"vectors of {self.dimension}")
        return numpy.concatenate(parts)

    def _in_flight(self, calls: list[list[str]], tally: EmbeddingTally | None) -> list[numpy.ndarray]:
        """The vectors of each call's texts, up to ``limits.concurrency`` calls in flight,
        from daemon threads (each call's texts counted in ``tally`` as it ends): after a
        failure or an interrupt, the calls not yet sent are dropped, those in flight end
        at their next try, and none holds up the exit."""
        given_up = threading.Event()
        lock = threading.Lock()
        waiting = iter(range(len(calls)))
        parts: list[numpy.ndarray | None] = [None] * len(calls)
        failures: list[BaseException] = []  # the first is the one that gave the others up

        def work() -> None:
            while not given_up.is_set():
                with lock:
                    number = next(waiting, None)
                if number is None:
                    return
                try:
                    parts[number] = self._batch(calls[number], given_up)
                    if tally is not None:
                        tally.add(len(calls[number]))
                except BaseException as error:  # noqa: BLE001 (raised in the caller)
                    with lock:
                        failures.append(error)
                    given_up.set()

        threads = [threading.Thread(target=work, daemon=True, name="chunkd-embed")
                   for _ in range(min(self.limits.concurrency, len(calls)))]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:  # an interrupt in join: the threads stop at their next try
            given_up.set()
        if failures:
            raise failures[0]
        return [part for part in parts if part is not None]

    def counts(self, texts: Sequence[str]) -> list[int]:
        """Each text's tokens, as ``limits.tokenizer`` counts them (else UTF-8 bytes: the
        default tokenizer is the filter's, not a guess at the endpoint's)."""
        if self.limits.tokenizer in (None, "cl100k_base"):
            return [len(text.encode("utf-8", "surrogatepass")) for text in texts]
        from chunkd.units import resolve

        count = resolve(str(self.limits.tokenizer)).count
        return [count(text) for text in texts]

    def bounds(self) -> tuple[int, int]:
        """Texts and tokens a request: the limits given, else the server's (``told``),
        else the defaults."""
        given = self.limits
        told = {} if given.batch and given.batch_tokens else self.told()
        return (given.batch or told.get("max_client_batch_size", ENDPOINT_BATCH),
                given.batch_tokens or told.get("max_batch_tokens", ENDPOINT_BATCH_TOKENS))

    def input_limit(self) -> int | None:
        """The most tokens of its model the server takes in one text, the special
        tokens the model adds included (TEI's ``max_input_length``); None where the
        server does not say, or did not answer within ``UNANSWERED_INFO_KEPT`` seconds
        (not asked again until then)."""
        return self.told(UNANSWERED_INFO_KEPT).get("max_input_length")

    def told(self, unanswered_kept: float = 0.0) -> dict[str, int]:
        """What the server's ``/info`` says of its limits (``_info``), asked on first
        use, and again on the next while it does not answer (a server starting, or
        down, may later), unless its last ask got no answer less than
        ``unanswered_kept`` seconds ago."""
        with self._asking:
            if self._told is None:
                if self._unanswered_at is not None \
                        and monotonic() - self._unanswered_at < unanswered_kept:
                    return {}
                told = self._info()
                if told is None:
                    self._unanswered_at = monotonic()
                    return {}
                self._told = told
            return self._told

    def _info(self) -> dict[str, int] | None:
        """The limits the server's ``GET /info`` gives (Hugging Face TEI's): none
        from a server that answers otherwise (most have no ``/info``), None from one
        that does not answer, or answers 429 or a 5xx. One call, no retry, quiet."""
        import json  # as http and ssl: for endpoints only, never at the command's start

        from chunkd.net.client import NoAnswer, ResponseTooLarge, call

        try:
            answer = call(self.endpoint.at("/info"), "GET", None, self.endpoint.headers(),
                          self.endpoint.timeout, INFO_BYTES)
        except NoAnswer:
            return None
        except ResponseTooLarge:
            return {}
        if answer.status == 429 or answer.status >= 500:
            return None
        try:  # (a redirect is not followed: no body, so the defaults)
            info = json.loads(answer.body)
        except (ValueError, RecursionError):  # not JSON
            return {}
        if not isinstance(info, dict):
            return {}
        return {key: value for key, value in info.items()
                if key in ("max_client_batch_size", "max_batch_tokens", "max_input_length")
                and isinstance(value, int) and not isinstance(value, bool) and value > 0}

    def _batch(self, texts: list[str], given_up: threading.Event) -> numpy.ndarray:
        # (the messages name Python's exception, never an answer's words)
        try:
            items = sorted(_json_value(self._post(texts, given_up))["data"],
                           key=lambda item: item["index"])
            indexes = [item["index"] for item in items]
            vectors = [item["embedding"] for item in items]
        except RecursionError:
            raise EmbedError(f"{self.shown}: the answer is not embeddings JSON (nested "
                             "too deeply)") from None
        except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as error:
            raise EmbedError(f"{self.shown}: the answer is not embeddings JSON "
                             f"({_one_line(error)})") from None
        if len(items) != len(texts):
            raise EmbedError(f"{self.shown}: {len(items)} vectors for {len(texts)} texts")
        if indexes != list(range(len(texts))):
            raise EmbedError(f"{self.shown}: the vectors' index values are not 0 to "
                             f"{len(texts) - 1}, once each")
        return as_matrix(vectors, len(texts), self.shown)

    def _post(self, texts: list[str], given_up: threading.Event) -> bytes:
        """The body of a successful answer to one call, after retries; ``given_up``
        (another call failed) ends the tries."""
        import json

        body = json.dumps({"model": self.model, "input": texts}).encode()
        limit = ANSWER_BYTES + len(texts) * (TEXT_BYTES + (self.dimension or WIDEST)
                                             * NUMBER_BYTES)
        return self.endpoint.post(body, limit, given_up, f"for {len(texts)} texts, more "
                                                         "than their vectors can need")


def _json_value(body: bytes) -> Any:
    """An answer's JSON: read by orjson, ten times as fast on a batch of vectors; an
    answer it refuses (NaN, nesting past its bound, an integer past 64 bits) by Python's
    reader, which says what is wrong as the messages name it."""
    import orjson

    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        import json

        return json.loads(body)


def endpoint_timeout() -> float:
    """An endpoint call's timeout: ``CHUNKD_EMBED_TIMEOUT`` seconds, else 30."""
    from chunkd.net.endpoint import seconds_from

    return seconds_from(TIMEOUT_VARIABLE, "30")


@functools.lru_cache(maxsize=None)
def endpoint(url: str, name: str, limits: EndpointLimits) -> Cached:
    """The endpoint model ``name`` at ``url``, called within ``limits``, behind its
    content cache, once a process."""
    return Cached(OpenAIEmbedder(url, name, limits))


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a folder on disk, on ``device``. It embeds
    one short text as it loads: a model that cannot run here (PyTorch's CPU kernels
    under ``MemoryDenyWriteExecute=yes``, a device it cannot use) is a ``SettingsError``
    before any input is read, not a failure on every document."""

    def __init__(self, folder: str, device: str, batch: int = BATCH,
                 dtype: str = "float32") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never a download, even of a config
        try:
            import transformers
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise SettingsError(f"--embed needs sentence-transformers: {EXTRA}") from None
        # stderr is for chunkd's one-line messages: no progress bars, no advice.
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        try:
            self.model = SentenceTransformer(folder, device=device, local_files_only=True)
        except Exception as error:  # noqa: BLE001 (a broken folder raises anything)
            raise SettingsError(f"--embed {folder}: cannot load the model: "
                                f"{_one_line(error)}") from None
        if dtype != "float32":  # half precision: other vectors, so another identity
            import torch

            self.model.to(getattr(torch, dtype))
        self.name = local_identity(folder, dtype)
        self.batch = batch
        self.shown = f"--embed {folder}"
        # Each batch counted as its last module ends it (``encode`` batches on its own).
        self.model[-1].register_forward_hook(_count_batch)
        # A probe that the model runs, counted in no caller's progress: a model loaded
        # when first used loads within an ``embed`` whose texts are being counted.
        tally = _TALLY.set(None)
        try:
            self.embed(["chunkd"])
        except EmbedError as error:
            raise SettingsError(str(error)) from None
        finally:
            _TALLY.reset(tally)

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy

        if not texts:
            return numpy.zeros((0, 0), dtype=numpy.float32)
        try:
            vectors = self.model.encode(list(texts), batch_size=self.batch,
                                        convert_to_numpy=True, show_progress_bar=False)
        except Exception as error:  # noqa: BLE001 (PyTorch's kernels raise anything)
            denied = (" (this process may not make memory executable, which PyTorch's CPU "
                      "kernels need: systemd's MemoryDenyWriteExecute=yes; for the daemon, "
                      "add the drop-in systemd/embed.conf, docs/daemon.md)"
                      if _executable_memory_denied() else "")
            raise EmbedError(f"{self.shown}: the model cannot run: {_one_line(error)}"
                             f"{denied}") from None
        return numpy.asarray(vectors, dtype=numpy.float32)


def _count_batch(module: Any, given: Any, made: Any) -> None:
    """A sentence-transformers model's batch of embeddings, counted as embedded (one it
    cannot count is counted when ``embed`` returns)."""
    vectors = made.get("sentence_embedding") if isinstance(made, Mapping) else None
    if vectors is not None:
        embedded(len(vectors))


def _executable_memory_denied() -> bool:
    """Whether this process runs with memory-deny-write-execute (Linux's
    ``PR_GET_MDWE``, which systemd's ``MemoryDenyWriteExecute=yes`` sets on kernels that
    have it)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_GET_MDWE, 0, 0, 0, 0) > 0)
    except (OSError, AttributeError):  # not Linux, or no prctl
        return False


#: Linux's prctl option that reads the memory-deny-write-execute flags.
PR_GET_MDWE = 66


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def model_folder(spec: str) -> str:
    """The folder of the model ``spec`` names: a folder, or a name in the local Hugging
    Face cache (``sentence-transformers/all-MiniLM-L6-v2``); ``SettingsError`` if it is
    on disk nowhere (chunkd never downloads one), or if its JSON files are not what a
    model's are (``check_model_folder``)."""
    if os.path.isdir(spec):
        if not any(os.path.exists(os.path.join(spec, name))
                   for name in ("modules.json", "config.json")):
            raise SettingsError(f"--embed {spec}: not a model folder (it has no modules.json "
                                "or config.json)")
        return _checked(spec, os.path.abspath(spec))
    if os.path.exists(spec):
        raise SettingsError(f"--embed {spec}: not a folder: give a sentence-transformers "
                            "model folder or a model name in the Hugging Face cache")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise SettingsError(f"--embed needs sentence-transformers: {EXTRA}") from None
    for name in (spec, f"sentence-transformers/{spec}") if "/" not in spec else (spec,):
        try:
            return _checked(spec, snapshot_download(name, local_files_only=True))
        except SettingsError:
            raise
        except Exception:  # noqa: BLE001 (not cached, or not a valid name)
            continue
    raise SettingsError(f"--embed {spec}: no such model folder, and no model of that name "
                        "in the Hugging Face cache (chunkd downloads nothing: download it "
                        "once, or give its folder)")


def _checked(spec: str, folder: str) -> str:
    """``folder``, once its JSON files are checked (a message naming ``--embed spec``)."""
    from pathlib import Path

    from chunkd.units.huggingface import check_model_folder

    try:
        check_model_folder(Path(folder))
    except SettingsError as error:
        raise SettingsError(f"--embed {spec}: {error}") from None
    return folder


def folder_identity(folder: str) -> str:
    """A model folder's identity: its name and the SHA-256 of its files (names and
    contents), so that another model, or the same one changed, is another identity.
    Links are followed (a Hugging Face cache's snapshot links to its blobs); a link to
    nothing, or a file that is not a regular file (a FIFO, a device), is a
    ``SettingsError`` naming it."""
    files = []
    for root, folders, names in os.walk(folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            if not name.startswith(".") and name != "README.md":
                path = os.path.join(root, name)
                relative = os.path.relpath(path, folder)
                try:
                    status = os.stat(path)
                except OSError as error:
                    raise _unreadable(folder, relative, "a symbolic link to nothing"
                                      if os.path.islink(path) and isinstance(
                                          error, FileNotFoundError) else error) from None
                if not stat.S_ISREG(status.st_mode):  # a FIFO would block, /dev/zero never end
                    raise _unreadable(folder, relative, "not a regular file")
                files.append((relative, path, status.st_size, status.st_mtime_ns))
    return f"{_display_name(folder)}@sha256:{_digest(folder, tuple(files))}"


def _display_name(folder: str) -> str:
    """A folder's name as its identity shows it: a Hugging Face cache's snapshot is
    named by its repository (``models--org--name/snapshots/HASH``)."""
    parts = os.path.normpath(folder).split(os.sep)
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--"):].replace("--", "/")
    return parts[-1]


@functools.lru_cache(maxsize=16)
def _digest(folder: str, files: tuple[tuple[str, str, int, int], ...]) -> str:
    """The SHA-256 of the files' relative names and contents (cached while their sizes
    and times stay the same)."""
    import hashlib

    from chunkd.inputs.readers import open_regular

    digest = hashlib.sha256()
    for relative, path, _, _ in files:
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open_regular(path) as file:
                for block in iter(lambda: file.read(1 << 20), b""):
                    digest.update(block)
        except OSError as error:
            raise _unreadable(folder, relative, error) from None
    return digest.hexdigest()


def _unreadable(folder: str, relative: str, problem: OSError | str) -> SettingsError:
    """The one line for a file of a model folder that cannot be hashed."""
    from chunkd.inputs.readers import display_name

    what = problem if isinstance(problem, str) else problem.strerror or str(problem)
    return SettingsError(f"--embed {folder}: {display_name(relative)}: {what}")


def local_identity(folder: str, dtype: str) -> str:
    """A model folder's identity as it computes in ``dtype``: half precision gives
    other vectors, so another identity."""
    return folder_identity(folder) + ("" if dtype == "float32" else f"#{dtype}")


class LocalModel:
    """The sentence-transformers model ``spec`` names, checked at once without
    loading it (its folder or cached name, its JSON files: ``model_folder``; the
    package it needs; its identity), and loaded (PyTorch and all,
    ``SentenceTransformerEmbedder``) on its first ``load`` or ``embed``: a command
    that has nothing to embed never pays for it. A load that fails is remembered:
    ``load`` raises its ``SettingsError`` again, ``embed`` an ``EmbedError`` saying
    the same, without trying again."""

    def __init__(self, spec: str, device: str, dtype: str) -> None:
        import importlib.util

        self.folder = model_folder(spec)
        if importlib.util.find_spec("sentence_transformers") is None:
            raise SettingsError(f"--embed needs sentence-transformers: {EXTRA}")
        self.device, self.dtype = device, dtype
        self.name = local_identity(self.folder, dtype)
        self._loaded: SentenceTransformerEmbedder | None = None
        self._failure: str | None = None
        self._loading = threading.Lock()

    def load(self) -> SentenceTransformerEmbedder:
        """The model, loaded now if it is not yet; ``SettingsError`` if it cannot be."""
        with self._loading:
            if self._loaded is None:
                if self._failure is not None:
                    raise SettingsError(self._failure)
                try:
                    self._loaded = SentenceTransformerEmbedder(self.folder, self.device,
                                                               dtype=self.dtype)
                except SettingsError as error:
                    self._failure = str(error)
                    raise
                except Exception as error:  # noqa: BLE001 (torch, a dtype, a device)
                    self._failure = (f"--embed {self.folder}: cannot load the model: "
                                     f"{_one_line(error)}")
                    raise SettingsError(self._failure) from None
            return self._loaded

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer``."""
        return self.load().model

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        try:
            loaded = self.load()
        except SettingsError as error:  # found only now: this embedding fails
            raise EmbedError(str(error)) from None
        return loaded.embed(texts)


@functools.lru_cache(maxsize=None)
def model(spec: str, device: str = "cpu", dtype: str = "float32") -> Cached:
    """The model ``spec`` names, on ``device``, computing in ``dtype``, behind its
    content cache, once a process: checked now, loaded when first used
    (``LocalModel``). ``SettingsError`` if it is not a model."""
    return Cached(LocalModel(spec, device, dtype))


def load(embedder: Embedder) -> None:
    """Load now the local model behind ``embedder``'s caches, if it is one
    (``LocalModel``); ``SettingsError`` if it cannot be loaded."""
    inner: Any = embedder
    while not isinstance(inner, LocalModel) and hasattr(inner, "inner"):
        inner = inner.inner
    if isinstance(inner, LocalModel):
        inner.load()


def tokenizer_folder(spec: str) -> str | None:
    """The folder of the model ``spec`` names, if its tokenizer is there (a
    ``tokenizer.json``, as a fast tokenizer saves it), so that chunks can be counted in
    the model's own tokens; None for a model without one."""
    from pathlib import Path

    from chunkd.units.huggingface import model_file

    folder = model_folder(spec)
    try:
        model_file(Path(folder))
    except SettingsError:
        return None
    return folder


def identity(spec: str) -> str:
    """The identity of the model ``spec`` names, without loading it."""
    return folder_identity(model_folder(spec))
