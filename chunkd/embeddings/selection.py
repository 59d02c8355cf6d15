"""Choosing the embedding model, in one place: the options that name it and say how it
runs, declared once for every command that embeds (the semantic strategy, ``--vectors``,
``chunkd eval``'s dense retriever), and ``embedder``, which makes it from them.

The model is ``--embed MODEL`` (a sentence-transformers folder, or a name in the local
Hugging Face cache) or ``--embed-url URL --embed-model NAME`` (an OpenAI-compatible
endpoint), or, from Python, an embedder, a LangChain ``Embeddings`` object or a
function of texts. Each is loaded once a process, behind a cache by content in memory
and, with ``--embed-cache DIR``, on disk (``chunkd.embeddings.cache``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from chunkd.model.errors import SettingsError
from chunkd.options import (Flag, Option, Record, choice, number_value, register_option,
                            supported, switch, whole)

if TYPE_CHECKING:
    from chunkd.embeddings.models import Cached, Embedder

#: The numbers a local model computes in: float16 and bfloat16 run on CUDA only (on the
#: CPU PyTorch computes them slower than float32, where it computes them at all).
DTYPES = ("float32", "float16", "bfloat16")


def takes_model(values: Mapping[str, Any]) -> bool:
    """Whether settings (values by option name) use a model: the semantic strategy
    embeds, and ``vectors`` adds each chunk's vector."""
    return values.get("strategy") == "semantic" or bool(values.get("vectors"))


def model_tokenizer(values: Mapping[str, Any]) -> tuple[str, str] | None:
    """The tokenizer of the ``--embed`` model, where its folder holds one: a spec for
    ``chunkd.units.resolve`` and the option that names the model; None for a model with
    none on disk (an endpoint, a Python object, a model not found: its check says so)."""
    from chunkd.embeddings.models import tokenizer_folder

    model = values.get("embed")
    if not isinstance(model, str):
        return None
    try:
        folder = tokenizer_folder(model)
    except SettingsError:
        return None
    return None if folder is None else (folder, "embed")


def served_window(values: Mapping[str, Any]) -> int | None:
    """The window of the ``--embed-url`` endpoint's model in ``--tokenizer``'s tokens:
    the most tokens the server takes in one text (``input_limit``, TEI's ``/info``) less
    the special tokens the tokenizer's model adds. None without an endpoint, where the
    server does not say, or where the tokenizer is no Hugging Face model's: the server
    counts in its model's tokens, which only that model's tokenizer counts."""
    url, name, tokenizer = values.get("embed_url"), values.get("embed_model"), \
        values.get("tokenizer")
    if url is None or name is None or tokenizer is None:
        return None
    from chunkd.embeddings.models import EndpointLimits, OpenAIEmbedder, endpoint
    from chunkd.units import special_tokens

    special = special_tokens(tokenizer)
    if special is None:
        return None
    served = endpoint(url, name, EndpointLimits(ENDPOINT_CONCURRENCY))  # asked its window alone
    limit = served.inner.input_limit() if isinstance(served.inner, OpenAIEmbedder) else None
    return None if limit is None else limit - special


def _check_model(value: Any, name: str) -> Any:
    """A model: a folder (a string or a path, as ``os.fspath`` takes it) or cached name,
    or, from Python, an ``Embedder``, a LangChain ``Embeddings`` object or any callable
    from texts to vectors (each kept behind the cache by content)."""
    from chunkd.embeddings.models import Cached, FunctionEmbedder, LangChainEmbedder

    if isinstance(value, os.PathLike):  # a model package's path, such as a pathlib.Path
        value = os.fspath(value)
    if isinstance(value, str):
        if not value:
            raise SettingsError(f"{name} must name a model")
        return value
    if isinstance(value, Cached):
        return value
    if hasattr(value, "embed_documents"):
        return Cached(LangChainEmbedder(value))
    if hasattr(value, "embed") and isinstance(getattr(value, "name", None), str):
        return Cached(value)
    if callable(value):
        return Cached(FunctionEmbedder(value))
    raise SettingsError(f"{name} must be a model folder or name, an embedder, a LangChain "
                        f"Embeddings object or a function of texts, not {value!r}")


def _model_identity(value: Any) -> str:
    """A model as results record it: its identity (``chunkd.embeddings.models``)."""
    from chunkd.embeddings.models import identity

    return identity(value) if isinstance(value, str) else value.name


def _model_shown(settings: Any) -> list[str]:
    value = settings[EMBED]
    return ["--embed", value] if isinstance(value, str) else []


def _check_url(value: Any, name: str) -> str:
    from chunkd.embeddings.models import endpoint_url

    endpoint_url(str(value))  # a URL that is not http(s) is a settings error
    return str(value)


def _public_url(value: str) -> str:
    from chunkd.net.urls import identity_url

    return identity_url(value)


#: The options that choose the model and how it is called, by name.
MODEL_OPTIONS = ("embed", "embed_device", "embed_dtype", "embed_url", "embed_model",
                 "embed_concurrency", "embed_batch", "embed_batch_tokens", "embed_cache")


def one_model(values: Mapping[str, Any], spell: Callable[[str], str]) -> None:
    """A model is ``--embed`` or an endpoint, never both; an endpoint names its model;
    a dtype other than float32 is for a local model on CUDA."""
    if values["embed_url"] is not None and values["embed"] is not None:
        raise SettingsError(f"{spell('embed')} and {spell('embed_url')} exclude each other: "
                            "give one")
    if (values["embed_url"] is None) != (values["embed_model"] is None):
        raise SettingsError(f"{spell('embed_url')} and {spell('embed_model')} go together: "
                            "an endpoint and the model it serves")
    dtype = values["embed_dtype"]
    if dtype != "float32":
        if values["embed_url"] is not None:
            raise SettingsError(f"{spell('embed_dtype')} is for --embed models: an endpoint "
                                "computes in its own precision")
        if not str(values["embed_device"]).startswith("cuda"):
            raise SettingsError(f"{spell('embed_dtype')} {dtype} is for CUDA devices "
                                f"({spell('embed_device')} cuda); on "
                                f"{values['embed_device']} the model runs in float32")


def _model_used(values: Mapping[str, Any], spell: Callable[[str], str]) -> None:
    """The model's options are for the settings that use one (``takes_model``)."""
    given = [name for name in MODEL_OPTIONS if OPTIONS_BY_NAME[name].is_set(values)]
    if given and not takes_model(values):
        raise SettingsError(f"{spell(given[0])} is for --strategy semantic or --vectors, "
                            f"not --strategy {values['strategy']} without --vectors")


#: Whether the settings checks leave a local model unloaded (``loading_deferred``).
_LOADING_DEFERRED: ContextVar[bool] = ContextVar("loading_deferred", default=False)


@contextmanager
def loading_deferred() -> Iterator[None]:
    """Within it, settings checks check a local model without loading it (its folder,
    files and identity: ``chunkd.embeddings.models.LocalModel``): it loads when it first
    embeds, and a model that fails then fails that embedding (``EmbedError``). For a
    front end that may have nothing to embed (``chunkd sync`` of a folder the store
    holds as it is), where loading PyTorch and the model would be most of its time."""
    token = _LOADING_DEFERRED.set(True)
    try:
        yield
    finally:
        _LOADING_DEFERRED.reset(token)


def checked_model(values: Any) -> Embedder:
    """The model settings name (``embedder``), checked: made (a local model's folder
    and files checked, its identity computed) and, unless within ``loading_deferred``,
    loaded, so that a model that cannot be loaded is a settings error before any input
    is read (where loading costs nothing: the command embeds at once)."""
    from chunkd.embeddings.models import load

    made = embedder(values)
    if not _LOADING_DEFERRED.get():
        load(made)
    return made


def _needs_model(values: Mapping[str, Any], spell: Callable[[str], str]) -> None:
    """``--vectors`` needs a model (``checked_model``)."""
    if values["vectors"]:
        if values["embed"] is None and values["embed_url"] is None:
            raise SettingsError(f"{spell('vectors')} needs a model: --embed MODEL or "
                                "--embed-url URL --embed-model NAME")
        checked_model(values)


def _linked_folder(text: str) -> str:
    """A folder given on the command line, the folder it links to if it is a link: the
    user's own link is followed once, as given (a cache kept on another disk); the cache
    then refuses a link put in the folder's place."""
    return os.path.realpath(text) if os.path.islink(text) else text


def _check_folder(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise SettingsError(f"{name} takes a folder")
    return value


#: The embedding model (``chunkd.embeddings.models``); recorded by its identity.
EMBED = register_option(Option[Any](
    None, "the embedding model", name="embed", check=_check_model, to_json=_model_identity,
    check_with=one_model, flags=(
        Flag("--embed", "semantic, --vectors: the embedding model, a sentence-transformers "
                        "model folder or a model name in the local Hugging Face cache (never "
                        "downloaded); results record its identity (name and SHA-256)",
             metavar="MODEL", parse=str, shown=_model_shown),)), after="errors")
#: Where the model runs; the same model gives the same vectors anywhere (up to float
#: noise), so results do not record it.
EMBED_DEVICE = register_option(Option[str](
    "cpu", "where the embedding model runs", name="embed_device", record=Record.NEVER,
    check_with=_model_used,
    flags=(Flag("--embed-device", "where the --embed model runs, as PyTorch names it (cpu, "
                                  "cuda, cuda:1, mps; default: cpu)", metavar="DEVICE",
                parse=str),)), after="embed")
#: The numbers the model computes in: other vectors (and perhaps other cuts), so
#: results record it when it is not float32.
EMBED_DTYPE = register_option(Option[str](
    "float32", "the numbers an --embed model computes in", name="embed_dtype",
    check=choice(*DTYPES), flags=(
        Flag("--embed-dtype", "the numbers the --embed model computes in: float32 "
                              "(default), or on CUDA float16 or bfloat16 (faster; the "
                              "vectors differ a little)", choices=DTYPES),)),
    after="embed_device")
#: An OpenAI-compatible endpoint and the model it serves (``chunkd.embeddings.models``); results
#: record the URL without credentials (its query too, but for its secret parameters),
#: and the model's name.
EMBED_URL = register_option(Option[str](
    None, "an OpenAI-compatible embeddings endpoint", name="embed_url", check=_check_url,
    to_json=_public_url, flags=(
        Flag("--embed-url", "an OpenAI-compatible embeddings endpoint, instead of --embed: "
                            "URL/v1/embeddings is called (a URL ending in /v1 or "
                            "/v1/embeddings is taken as it is); the API key comes from "
                            "CHUNKD_EMBED_API_KEY, the timeout of a call from "
                            "CHUNKD_EMBED_TIMEOUT (seconds, default 30)", metavar="URL",
             parse=str),)), after="embed_dtype")
EMBED_MODEL = register_option(Option[str](
    None, "the model an embeddings endpoint serves", name="embed_model", flags=(
        Flag("--embed-model", "the model --embed-url serves, as the endpoint names it",
             metavar="NAME", parse=str),)), after="embed_url")
#: Requests to an endpoint in flight at once, unless ``--embed-concurrency`` says.
ENDPOINT_CONCURRENCY = 4
#: How the endpoint is called (``chunkd.embeddings.models.EndpointLimits``): the vectors are the same,
#: so results do not record it. The batch bounds' defaults are the server's (``/info``).
EMBED_CONCURRENCY = register_option(Option[int](
    ENDPOINT_CONCURRENCY, "requests in flight to an embeddings endpoint",
    name="embed_concurrency", check=whole(1), record=Record.NEVER,
    flags=(Flag("--embed-concurrency", "requests to --embed-url in flight at once "
                f"(default: {ENDPOINT_CONCURRENCY}; 1: one after another)", metavar="N",
                parse=number_value),)), after="embed_model")
EMBED_BATCH = register_option(Option[int](
    None, "texts a request to an embeddings endpoint", name="embed_batch", check=whole(1),
    record=Record.NEVER,
    flags=(Flag("--embed-batch", "texts a request to --embed-url at most (default: the "
                                 "server's max_client_batch_size on GET /info, as Hugging "
                                 "Face TEI gives it, else 64); --vectors embeds chunks of "
                                 "several documents together, up to this many", metavar="N",
                parse=number_value),)), after="embed_concurrency")
EMBED_BATCH_TOKENS = register_option(Option[int](
    None, "tokens a request to an embeddings endpoint", name="embed_batch_tokens",
    check=whole(1), record=Record.NEVER,
    flags=(Flag("--embed-batch-tokens", "tokens a request to --embed-url at most, summed "
                                        "over its texts: counted by --tokenizer when one is "
                                        "given, else as UTF-8 bytes (never fewer); a longer "
                                        "text goes alone (default: the server's "
                                        "max_batch_tokens on GET /info, else 300000, "
                                        "OpenAI's bound)", metavar="N",
                parse=number_value),)), after="embed_batch")
#: A cache of vectors on disk (``chunkd.embeddings.cache``): the same vectors, so results
#: do not record it.
EMBED_CACHE = register_option(Option[str](
    None, "a folder of embeddings cached on disk", name="embed_cache", check=_check_folder,
    record=Record.NEVER, flags=(
        Flag("--embed-cache", "keep every text's vector in DIR (made if missing; shared "
                              "safely by commands and processes; least recently used out "
                              "past 2 GiB): a text embedded before by the same model is not "
                              "sent to it again", metavar="DIR", parse=_linked_folder),)),
    after="embed_batch_tokens")
#: Add each chunk's vector (of its ``embed_text``, else its text) as ``vector``.
VECTORS = register_option(Option[bool](
    False, "add vector", name="vectors", check=switch, check_with=_needs_model,
    fields=("vector",), flags=(
        Flag("--vectors", "add \"vector\": each chunk's embedding (of its embed_text where "
                          "there is one, else its text) by --embed or --embed-url, "
                          "batched across documents"),)), after="embed_cache")

def _late_model(values: Mapping[str, Any], spell: Callable[[str], str]) -> None:
    """``--late`` is for ``--vectors`` by a local model of mean pooling
    (``chunkd.embeddings.late``), checked on disk before it loads (a refusal at once),
    then loaded; and for a front end
    that makes late vectors; the chunks' vectors are then of their document's text, so
    ``--embed-text`` and ``--embed-prefix`` (a heading path, a prefix before each chunk)
    cannot be what is embedded."""
    if not values["late"]:
        return
    late = spell("late")
    if not supported("late"):
        raise SettingsError(f"{late} is for the chunkd filter and chunkd eval: this command "
                            "would give plain vectors")
    if not values["vectors"]:
        raise SettingsError(f"{late} needs {spell('vectors')} and --embed MODEL")
    if values["embed_url"] is not None:
        raise SettingsError(f"{late} needs --embed MODEL, a local model: {spell('embed_url')} "
                            "returns one vector a text, not its tokens' vectors")
    if not isinstance(values["embed"], str):
        raise SettingsError(f"{late} needs --embed MODEL, a sentence-transformers model "
                            "folder or name")
    for name, what in (("embed_text", "heading path"), ("embed_prefix", "prefix"),
                       ("context", "context")):
        if values.get(name):
            raise SettingsError(f"{late} embeds each chunk within its document's text, "
                                f"which {spell(name)}'s {what} is not part of: give one")
    from chunkd.embeddings.late import check_folder, loaded_late_model
    from chunkd.embeddings.models import model_folder

    check_folder(model_folder(values["embed"]), f"--embed {values['embed']}")
    loaded_late_model(checked_model(values))  # what the folder does not say (its tokenizer)


#: Each chunk's vector made within its whole document (``chunkd.embeddings.late``):
#: other vectors, so results record it.
LATE = register_option(Option[bool](
    False, "late chunking", name="late", check=switch, check_with=_late_model, flags=(
        Flag("--late", "late chunking: each chunk's vector the mean of its tokens' "
                       "vectors in its whole document, read once by the model (in "
                       "overlapping windows where it is longer than the model's), each "
                       "document embedded when it ends; the filter, with --vectors and "
                       "--embed MODEL (mean pooling), and chunkd eval --retriever dense "
                       "or hybrid (each setting also with late vectors)"),)),
    after="embed_cache")

OPTIONS_BY_NAME = {option.name: option for option in (
    EMBED, EMBED_DEVICE, EMBED_DTYPE, EMBED_URL, EMBED_MODEL, EMBED_CONCURRENCY, EMBED_BATCH,
    EMBED_BATCH_TOKENS, EMBED_CACHE)}


def embedder(values: Any) -> Embedder:
    """The model that settings name (``Settings``, or values by option name), made
    once a process (a local one loaded when it first embeds: ``checked_model`` loads
    it at once), behind its caches (in memory; on disk with ``embed_cache``).
    ``SettingsError`` if none is named or it is not a model."""
    get = getattr(values, "_values", values).get  # Settings hold their values by name
    url, value, cache = get("embed_url"), get("embed"), get("embed_cache")
    if url is not None:
        from chunkd.embeddings.models import EndpointLimits

        return _endpoint(url, get("embed_model"), EndpointLimits(
            get("embed_concurrency") or ENDPOINT_CONCURRENCY, get("embed_batch"),
            get("embed_batch_tokens"), get("tokenizer")), cache)
    if value is None:
        raise SettingsError("a model is needed: --embed MODEL (a sentence-transformers "
                            "folder, or a name in the Hugging Face cache) or --embed-url URL "
                            "--embed-model NAME")
    if isinstance(value, str):
        return _local(value, get("embed_device") or "cpu", get("embed_dtype") or "float32",
                      cache)
    return value if cache is None else _on_disk(value, cache)


def texts_sent(model: Any) -> int | None:
    """How many texts the model behind ``model``'s caches has been sent in this process,
    when a cache on disk counts them (``chunkd.embeddings.cache.DiskCached``), else None."""
    sent = getattr(getattr(model, "inner", None), "sent", None)
    return sent if isinstance(sent, int) else None


def batch_size(values: Any) -> int:
    """Texts to gather before a call to the model: ``--embed-batch`` if given, else
    the endpoint's default, else enough for a local model's batches to fill."""
    from chunkd.embeddings.models import BATCH, ENDPOINT_BATCH

    get = getattr(values, "_values", values).get
    given = get("embed_batch")
    if given:
        return int(given)
    return ENDPOINT_BATCH if get("embed_url") is not None else 8 * BATCH


@functools.lru_cache(maxsize=None)
def _local(spec: str, device: str, dtype: str, cache: str | None) -> Cached:
    from chunkd.embeddings.models import model

    loaded = model(spec, device, dtype)
    return loaded if cache is None else _on_disk(loaded, cache)


@functools.lru_cache(maxsize=None)
def _endpoint(url: str, name: str, limits: Any, cache: str | None) -> Cached:
    from chunkd.embeddings.models import endpoint

    called = endpoint(url, name, limits)
    return called if cache is None else _on_disk(called, cache)


@functools.lru_cache(maxsize=None)
def _on_disk(model: Cached, folder: str) -> Cached:
    """``model`` (behind its cache in memory) with a cache on disk between the two,
    once a process for each."""
    from chunkd.embeddings.cache import DiskCached
    from chunkd.embeddings.models import Cached

    return Cached(DiskCached(model.inner, _disk_cache(folder)))


@functools.lru_cache(maxsize=None)
def _disk_cache(folder: str) -> Any:
    """The cache in ``folder``: one not to be trusted is a settings error in the process
    a command starts (said before any work), all misses in its worker processes, which
    rebuild the settings (the daemon's, started again after one died: a producer who
    swapped the folder meanwhile must not stop them)."""
    from chunkd.embeddings.cache import DiskCache

    return DiskCache(folder, refuse=not _in_a_worker())


def _in_a_worker() -> bool:
    """Whether this process is a multiprocessing worker: its parent known, or (spawned)
    still unpickling what its parent sent, before that: multiprocessing's own mark of
    that moment, ``_inheriting``, is all there is to tell it by."""
    import multiprocessing

    return (multiprocessing.parent_process() is not None
            or bool(getattr(multiprocessing.current_process(), "_inheriting", False)))
