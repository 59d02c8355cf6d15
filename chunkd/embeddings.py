"""Embedding models, one interface for semantic chunking and for ``chunkd eval``.

An ``Embedder`` has an identity (``name``, recorded with results, so that a result made
with another model is not taken for current) and embeds a list of texts into a float32
array, a row a text. Three kinds:

* a sentence-transformers model folder, or a model name already in the local Hugging
  Face cache (``--embed MODEL``): loaded once a process, offline (chunkd never
  downloads a model), on the CPU unless ``--embed-device`` says otherwise, batched;
* any Python callable from a list of texts to vectors (``FunctionEmbedder``);
* a LangChain ``Embeddings`` object (``chunkd.langchain.embedder``).

Every front end reaches a model through ``model(spec, device)``, which wraps it in a
cache by content (``Cached``): each distinct text is embedded once a process, so a grid
of settings, the daemon and a text that recurs do not pay twice.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from chunkd.errors import SettingsError

if TYPE_CHECKING:
    import numpy

#: What ``--embed`` needs beyond chunkd itself.
EXTRA = "pip install 'sentence-transformers>=3'"
#: Texts a model embeds at once.
BATCH = 32


class EmbedError(Exception):
    """A model that failed while embedding (an endpoint that answered wrong, or not at
    all); the message says what, in one line."""


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
    except (TypeError, ValueError) as error:
        raise EmbedError(f"{name} returned no vectors of one length: {error}") from None
    if matrix.ndim != 2 or matrix.shape[0] != count or matrix.shape[1] == 0:
        raise EmbedError(f"{name} returned an array of shape {matrix.shape} for {count} "
                         "texts: expected a row of numbers per text")
    if not numpy.isfinite(matrix).all():
        raise EmbedError(f"{name} returned a vector that is not finite")
    return matrix


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
        parts = [as_matrix(self.function(list(texts[start:start + self.batch])),
                           len(texts[start:start + self.batch]), self.name)
                 for start in range(0, len(texts), self.batch)]
        if len({part.shape[1] for part in parts}) > 1:
            raise EmbedError(f"{self.name} returned vectors of different lengths")
        return numpy.concatenate(parts)


class Cached:
    """An embedder that embeds each distinct text once, however often it is asked."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.vectors: dict[str, numpy.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy

        missing = list(dict.fromkeys(text for text in texts if text not in self.vectors))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing)):
                self.vectors[text] = vector
        if not texts:
            return numpy.zeros((0, 0), dtype=numpy.float32)
        return numpy.stack([self.vectors[text] for text in texts])


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a folder on disk, on ``device``."""

    def __init__(self, folder: str, device: str, batch: int = BATCH) -> None:
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
        self.name = folder_identity(folder)
        self.batch = batch

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy

        if not texts:
            return numpy.zeros((0, 0), dtype=numpy.float32)
        vectors = self.model.encode(list(texts), batch_size=self.batch, convert_to_numpy=True,
                                    show_progress_bar=False)
        return numpy.asarray(vectors, dtype=numpy.float32)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def model_folder(spec: str) -> str:
    """The folder of the model ``spec`` names: a folder, or a name in the local Hugging
    Face cache (``sentence-transformers/all-MiniLM-L6-v2``); ``SettingsError`` if it is
    on disk nowhere (chunkd never downloads one)."""
    if os.path.isdir(spec):
        if not any(os.path.exists(os.path.join(spec, name))
                   for name in ("modules.json", "config.json")):
            raise SettingsError(f"--embed {spec}: not a model folder (it has no modules.json "
                                "or config.json)")
        return os.path.abspath(spec)
    if os.path.exists(spec):
        raise SettingsError(f"--embed {spec}: not a folder: give a sentence-transformers "
                            "model folder or a model name in the Hugging Face cache")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise SettingsError(f"--embed needs sentence-transformers: {EXTRA}") from None
    for name in (spec, f"sentence-transformers/{spec}") if "/" not in spec else (spec,):
        try:
            return snapshot_download(name, local_files_only=True)
        except Exception:  # noqa: BLE001 (not cached, or not a valid name)
            continue
    raise SettingsError(f"--embed {spec}: no such model folder, and no model of that name "
                        "in the Hugging Face cache (chunkd downloads nothing: download it "
                        "once, or give its folder)")


def folder_identity(folder: str) -> str:
    """A model folder's identity: its name and the SHA-256 of its files (names and
    contents), so that another model, or the same one changed, is another identity."""
    files = []
    for root, folders, names in os.walk(folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            if not name.startswith(".") and name != "README.md":
                path = os.path.join(root, name)
                status = os.stat(path)
                files.append((os.path.relpath(path, folder), path, status.st_size,
                              status.st_mtime_ns))
    return f"{_display_name(folder)}@sha256:{_digest(tuple(files))}"


def _display_name(folder: str) -> str:
    """A folder's name as its identity shows it: a Hugging Face cache's snapshot is
    named by its repository (``models--org--name/snapshots/HASH``)."""
    parts = os.path.normpath(folder).split(os.sep)
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3][len("models--"):].replace("--", "/")
    return parts[-1]


@functools.lru_cache(maxsize=16)
def _digest(files: tuple[tuple[str, str, int, int], ...]) -> str:
    """The SHA-256 of the files' relative names and contents (cached while their sizes
    and times stay the same)."""
    digest = hashlib.sha256()
    for relative, path, _, _ in files:
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def model(spec: str, device: str = "cpu") -> Cached:
    """The model ``spec`` names, loaded once a process, behind its content cache: a
    folder or cached name (``model_folder``). ``SettingsError`` if it cannot be loaded."""
    return Cached(SentenceTransformerEmbedder(model_folder(spec), device))


def identity(spec: str) -> str:
    """The identity of the model ``spec`` names, without loading it."""
    return folder_identity(model_folder(spec))
