"""Late chunking (``--late``; Günther et al. 2024, arXiv 2409.04701): the model reads the
whole document once, and each chunk's vector is the mean of the output vectors of the
tokens inside it, so that it carries what the document says around it.

The rules (docs/cli.md, "Late chunking", says them to users):

* The document is tokenised once, with offsets; a token belongs to every chunk its
  character span overlaps (a token that straddles a boundary counts for both chunks).
  A token of no width (offsets ``(i, i)``) belongs to none.
* The special tokens the tokenizer adds at the document's start (``[CLS]``) count for
  the chunks that hold its first token, those at its end (``[SEP]``) for the chunks
  that hold its last: a chunk that is the whole document gets exactly the model's own
  mean-pooled embedding of it.
* A document longer than the model's window (``max_seq_length`` less the special
  tokens) is read in windows of that many tokens, each with its own special tokens,
  each starting half a window after the one before (the last one ending at the
  document's end); each token's vector comes from the window whose middle is nearest
  to it, so that it sees at least a quarter window of context on either side (except
  at the document's ends). The windows' own special tokens count for no chunk but the
  document's first and last, as above.
* A chunk that no token falls in (one of characters the tokenizer drops) gets the
  mean of the nearest tokens, the one before it and the one after; in a document
  without any token, the special tokens'.
* The mean is normalized when the model ends with ``Normalize``.

Only a model that is a transformer followed by mean pooling (and perhaps
``Normalize``) is taken: one that pools its ``[CLS]`` token or the maximum, or a
static model (no transformer, so no token sees another), is refused, never embedded
chunk by chunk instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from chunkd.embeddings.models import BATCH, LocalModel, _one_line
from chunkd.model.errors import EmbedError, SettingsError

if TYPE_CHECKING:
    import numpy

    from chunkd.embeddings.models import Embedder


class LateModel(NamedTuple):
    """The parts of a sentence-transformers model late chunking uses: its transformer
    module (``auto_model``, ``tokenizer``), the window in tokens with the special
    tokens, and whether its vectors are normalized."""

    transformer: Any
    window: int
    normalize: bool


def late_model(model: Any, shown: str) -> LateModel:
    """The parts of the loaded ``SentenceTransformer`` ``model`` (``shown``: how messages
    name it); ``SettingsError`` unless it is a transformer with mean pooling and an
    optional ``Normalize``, whose tokenizer gives offsets."""
    modules = list(model)
    kinds = [type(module).__name__ for module in modules]
    _check_modules(kinds, _pooling(modules[1].get_config_dict()) if kinds[1:2] == ["Pooling"]
                   else "none", shown)
    transformer = modules[0]
    if not getattr(transformer.tokenizer, "is_fast", False):
        raise SettingsError(f"--late: {shown} has no fast tokenizer (tokenizer.json), which "
                            "late chunking needs for its tokens' offsets")
    window = model.max_seq_length or transformer.tokenizer.model_max_length
    return LateModel(transformer, int(window), len(kinds) > 2)


def _check_modules(kinds: list[str], pooling: str, shown: str) -> None:
    """``SettingsError`` unless the modules (their class names) are a transformer, a
    pooling by ``pooling`` that is the mean, and ``Normalize`` only after it."""
    if not kinds or kinds[0] != "Transformer":
        raise SettingsError(f"--late: {shown} is a static model "
                            f"({kinds[0] if kinds else 'no modules'}), not a transformer: "
                            "its tokens see no context, so late chunking gives it nothing")
    if pooling != "mean":
        raise SettingsError(f"--late: {shown} pools its tokens by {pooling}, not mean: late "
                            "chunking needs a model trained with mean pooling")
    if any(kind != "Normalize" for kind in kinds[2:]):
        raise SettingsError(f"--late: {shown} has {', '.join(kinds[2:])} after its pooling: "
                            "late chunking takes a transformer, mean pooling and Normalize "
                            "only")


def _pooling(config: Any) -> str:
    """A pooling module's mode from its configuration, as sentence-transformers 3 to 6
    write it ("mean", "cls", "max", ...)."""
    if not isinstance(config, dict):
        return "an unreadable configuration"
    if isinstance(config.get("pooling_mode"), str):  # sentence-transformers 6
        return str(config["pooling_mode"])
    modes = [key[len("pooling_mode_"):].removesuffix("_tokens").removesuffix("_token")
             for key, value in config.items() if key.startswith("pooling_mode_") and value is True]
    return "+".join(modes) or "no mode"


def check_folder(folder: str, shown: str) -> None:
    """What ``late_model`` refuses, found in the model folder's ``modules.json`` and its
    pooling's ``config.json`` before the model is loaded (seconds later): a
    ``SettingsError`` at once. A folder without ``modules.json`` is a plain transformer,
    which sentence-transformers pools by the mean."""
    import json
    import os

    try:
        with open(os.path.join(folder, "modules.json"), encoding="utf-8") as file:
            modules = json.load(file)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as error:
        raise SettingsError(f"--late: {shown}: modules.json cannot be read: "
                            f"{_one_line(error)}") from None
    if not isinstance(modules, list) or not all(isinstance(entry, dict) for entry in modules):
        raise SettingsError(f"--late: {shown}: modules.json is not a list of modules")
    kinds = [str(entry.get("type", "")).rsplit(".", 1)[-1] for entry in modules]
    pooling = "none"
    if kinds[1:2] == ["Pooling"]:
        try:
            with open(os.path.join(folder, str(modules[1].get("path", "")), "config.json"),
                      encoding="utf-8") as file:
                pooling = _pooling(json.load(file))
        except (OSError, ValueError):
            pooling = "an unreadable configuration"
    _check_modules(kinds, pooling, shown)


def loaded_late_model(model: Embedder) -> LateModel:
    """The late-chunking parts of the local model behind ``model``'s caches (loaded now);
    ``SettingsError`` if it is not a local sentence-transformers model, or not one late
    chunking takes (``late_model``)."""
    inner: Any = model
    while not isinstance(inner, LocalModel) and hasattr(inner, "inner"):
        inner = inner.inner
    if not isinstance(inner, LocalModel):
        raise SettingsError("--late needs --embed MODEL, a local sentence-transformers "
                            "model: only it gives its tokens' vectors")
    return late_model(inner.model, f"--embed {inner.folder}")


class Tokens(NamedTuple):
    """A document tokenised once: the ids of its special tokens at the start and at the
    end, its own tokens' ids and their character spans."""

    lead: list[int]
    trail: list[int]
    ids: list[int]
    spans: list[tuple[int, int]]


def tokenised(tokenizer: Any, text: str) -> Tokens:
    """``text`` tokenised once, with the special tokens its tokenizer adds; those are the
    ones of no width at either end (a document that holds ``[SEP]`` as text holds a
    token with a width)."""
    encoded = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True,
                        return_special_tokens_mask=True, truncation=False, verbose=False)
    ids, spans, special = (encoded["input_ids"], [tuple(span) for span in encoded["offset_mapping"]],
                           encoded["special_tokens_mask"])

    def added(index: int) -> bool:
        return bool(special[index]) and spans[index][0] == spans[index][1]

    lead = 0
    while lead < len(ids) and added(lead):
        lead += 1
    trail = 0
    while trail < len(ids) - lead and added(len(ids) - 1 - trail):
        trail += 1
    end = len(ids) - trail
    return Tokens(ids[:lead], ids[end:], ids[lead:end], spans[lead:end])


def windows(count: int, window: int) -> tuple[list[int], list[int]]:
    """The first token of each window of ``window`` tokens over ``count`` tokens (each
    half a window after the one before, the last ending at the end), and the first token
    each window gives its vector to (the token nearest its middle go to it; a tie to
    the earlier window)."""
    if count <= window:
        return [0], [0]
    stride = max(1, window // 2)
    starts = list(range(0, count - window, stride)) + [count - window]
    # Token p is nearer window k + 1's middle than window k's when 2p + 1 > s_k + s_k+1 + W.
    firsts = [0] + [(left + right + window + 1) // 2 for left, right in zip(starts, starts[1:])]
    return starts, firsts


def token_ranges(tokens: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]
                 ) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """The tokens (character spans) with a width, by their index among ``tokens``
    (``kept``), and each span's: ``kept[low[i]:high[i]]``, those ending after it starts
    and starting before it ends. ``EmbedError`` for offsets out of order."""
    import numpy

    kept = numpy.array([index for index, (start, end) in enumerate(tokens) if end > start],
                       dtype=numpy.int64)
    kept_starts = numpy.array([tokens[index][0] for index in kept], dtype=numpy.int64)
    kept_ends = numpy.array([tokens[index][1] for index in kept], dtype=numpy.int64)
    if (numpy.diff(kept_starts) < 0).any() or (numpy.diff(kept_ends) < 0).any():
        raise EmbedError("--late: the tokenizer's offsets are not in order")
    low = numpy.searchsorted(kept_ends, [start for start, _ in spans], side="right")
    high = numpy.searchsorted(kept_starts, [end for _, end in spans], side="left")
    return kept, low, numpy.maximum(low, high)


def late_vectors(parts: LateModel, text: str, spans: Sequence[tuple[int, int]],
                 window: int | None = None) -> numpy.ndarray:
    """Each span's (``start``, ``end``: code-point offsets in ``text``) late vector, a row
    a span, float32 (the module's rules). ``window``: the tokens a window holds without
    its special tokens (default: the model's window less them). ``EmbedError`` if the
    model fails."""
    import numpy

    if not spans:  # a document without chunks: nothing to read it for
        return numpy.zeros((0, 0), dtype=numpy.float32)
    import torch

    tokens = tokenised(parts.transformer.tokenizer, text)
    specials = len(tokens.lead) + len(tokens.trail)
    window = window or max(1, parts.window - specials)
    starts, firsts = windows(len(tokens.ids), window)
    kept, low, high = token_ranges(tokens.spans, spans)
    empty = high == low
    # A span without a token: the nearest ones, before and after it.
    nearest = {int(kept[index]) for number in numpy.flatnonzero(empty)
               for index in (low[number] - 1, low[number]) if 0 <= index < len(kept)}
    found: dict[int, numpy.ndarray] = {}
    sums = numpy.zeros((len(spans), 0))
    counts = (high - low).astype(numpy.float64)
    module = parts.transformer
    device = next(module.auto_model.parameters()).device
    ends = firsts[1:] + [len(tokens.ids)]
    plan = list(zip(starts, firsts, ends))
    first_of_document = (high > low) & (low == 0)
    last_of_document = (high > low) & (high == len(kept))
    lead_vectors = trail_vectors = None
    for batch_start in range(0, len(plan), BATCH):
        batch = plan[batch_start:batch_start + BATCH]
        ids = [tokens.lead + tokens.ids[start:start + window] + tokens.trail
               for start, _, _ in batch]
        try:
            with torch.inference_mode():
                given = torch.tensor(ids, device=device)
                made = module.auto_model(input_ids=given, attention_mask=torch.ones_like(given))
                outputs = made.last_hidden_state.float().cpu().numpy().astype(numpy.float64)
        except Exception as error:  # noqa: BLE001 (PyTorch's kernels raise anything)
            raise EmbedError(f"--late: the model cannot run: {_one_line(error)}") from None
        if sums.shape[1] == 0:
            sums = numpy.zeros((len(spans), outputs.shape[2]))
        for (start, first, end), output in zip(batch, outputs):
            if first == 0:
                lead_vectors = output[:len(tokens.lead)]
            if end == len(tokens.ids):
                trail_vectors = output[len(output) - len(tokens.trail):]
            given_from, given_to = numpy.searchsorted(kept, [first, end])
            # The vectors of the kept tokens this window gives, summed cumulatively.
            rows = output[len(tokens.lead) + kept[given_from:given_to] - start]
            summed = numpy.concatenate([numpy.zeros((1, rows.shape[1])), rows.cumsum(axis=0)])
            top = numpy.clip(high - given_from, 0, len(rows))
            bottom = numpy.minimum(numpy.clip(low - given_from, 0, len(rows)), top)
            sums += summed[top] - summed[bottom]
            for index in nearest:
                if first <= index < end:
                    found[index] = output[len(tokens.lead) + index - start]
    assert lead_vectors is not None and trail_vectors is not None
    sums[first_of_document] += lead_vectors.sum(axis=0)
    counts[first_of_document] += len(lead_vectors)
    sums[last_of_document] += trail_vectors.sum(axis=0)
    counts[last_of_document] += len(trail_vectors)
    for number in numpy.flatnonzero(empty):
        near = [found[int(kept[index])] for index in (low[number] - 1, low[number])
                if 0 <= index < len(kept)]
        if not near:  # a document without a token: what the model makes of it
            near = [*lead_vectors, *trail_vectors]
        sums[number], counts[number] = numpy.sum(near, axis=0), len(near)
    vectors = sums / counts[:, None]
    if parts.normalize:
        vectors /= numpy.maximum(numpy.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors.astype(numpy.float32)
