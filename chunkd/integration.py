"""What the framework integrations share (``chunkd.llamaindex``, ``chunkd.haystack``):
one document's chunks with their ids and pages, and chunkd's fields as flat metadata.

A framework's document is a whole text with a name; its chunks are the filter's, with
``chunk_id`` always set (``chunkd.model.ids``, scoped by the name given) and ``pages`` where
the text has form feeds (page ``k`` starts after the ``k - 1``-th ``"\\f"``, as a PDF's
text from ``chunkd.inputs`` does and as Haystack's converters write it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chunkd.model.chunk import Chunk, Parent
from chunkd.embeddings.selection import VECTORS
from chunkd.model.ids import ChunkIds
from chunkd.pipeline import DocumentText, Pipeline
from chunkd.settings import Settings, SettingsError
from chunkd.strategies import Source
from chunkd.strategies.recursive import KEEP

#: The flat metadata keys that the chunk fields become, in records' order (see
#: ``metadata``): a vector store's metadata takes strings and numbers, not lists.
METADATA_KEYS = ("index", "length", "tokens", "estimated_tokens", "headings", "page_number",
                 "last_page", "symbols", "defines", "language", "distance")
#: Keys that say where a chunk lies or how big it is: they tell a model nothing about
#: the text, so they are kept out of what is embedded and what a model reads.
POSITION_KEYS = ("index", "length", "tokens", "estimated_tokens", "distance")
#: Keys kept out of what is embedded by default: positions, and the pages.
EMBED_EXCLUDED = (*POSITION_KEYS, "page_number", "last_page")
#: What joins a path (headings, a definition's enclosing definitions): chunkd's
#: ``embed_text`` writes the heading path the same way.
PATH = " > "


class WholeDocumentChunker:
    """Chunks whole documents as the settings (``chunkd.Settings``' keywords, as
    ``chunkd.arrow.Chunker`` takes them) say; builds its splitter once (and again
    when unpickled: it pickles as its settings)."""

    def __init__(self, chunk_size: int | None = None, chunk_overlap: int | None = None,
                 **settings: Any) -> None:
        self.settings = Settings.from_keywords(chunk_size, chunk_overlap, **settings)
        if self.settings[KEEP] == "none":
            raise SettingsError("keep_separator='none' joins pieces without their separator, "
                                "so a chunk would not be its document's text between its "
                                "offsets; write 'end' or 'start'")
        if self.settings.strategy == "propositions":
            raise SettingsError("the propositions strategy's text is the LLM's, no slice of "
                                "the document, and a framework's node is its document's text "
                                "between offsets: use chunkd's records (chunkd.split_text)")
        if self.settings[VECTORS]:
            raise SettingsError("vectors=True: the framework's embedding model embeds the "
                                "chunks; leave vectors out")
        self._pipeline = Pipeline(self.settings, ids=True)

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings}  # the splitter is built again, not pickled

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.settings = state["settings"]
        self._pipeline = Pipeline(self.settings, ids=True)

    def chunks(self, text: str, doc: object, name: object = None,
               media_type: str | None = None) -> list[Chunk]:
        """The chunks of ``text``, with ids scoped by ``doc`` and ``pages`` if it has form
        feeds; ``name`` (a file name, for strategies that choose by extension) and
        ``media_type`` are what the strategies learn of it."""
        document = DocumentText(Source(name, media_type, page_starts(text)), [text])
        return [chunk for ready in self._pipeline.chunks(document, scope=doc)
                for chunk in ready]


def page_starts(text: str) -> tuple[int, ...] | None:
    """Where each page of ``text`` starts, if it has form feeds (None: no pages)."""
    if "\f" not in text:
        return None
    starts = [0]
    at = text.find("\f")
    while at >= 0:
        starts.append(at + 1)
        at = text.find("\f", at + 1)
    return tuple(starts)


def parent_ids(chunks: list[Chunk], doc: object) -> dict[int, str]:
    """Each parent's id, by its index: the id the parent's text has as a chunk of the
    parent settings alone (``chunkd.model.ids`` over the parents, in order)."""
    identify = ChunkIds(doc)
    ids: dict[int, str] = {}
    for chunk in chunks:
        parent = chunk.parent
        if parent is not None and parent.index not in ids:
            ids[parent.index] = identify.identify(as_chunk(parent))
    return ids


def as_chunk(parent: Parent) -> Chunk:
    return Chunk(parent.index, parent.start, parent.end, parent.length, parent.text)


def metadata(chunk: Chunk) -> dict[str, Any]:
    """chunkd's fields of ``chunk`` as flat metadata (strings and numbers): ``index`` and
    ``length`` always, then those the chunk has (an empty list of headings is none): ``headings`` and ``symbols`` as paths
    (``"A > B"``), ``defines`` joined with ``"; "``, ``pages`` as ``page_number`` (the
    first) and ``last_page``. ``text``, offsets, ``chunk_id``, ``parent``, ``embed_text``
    and ``vector`` are not metadata: the integrations carry them their own way."""
    found: dict[str, Any] = {"index": chunk.index, "length": chunk.length}
    for name in ("tokens", "estimated_tokens"):
        if getattr(chunk, name) is not None:
            found[name] = getattr(chunk, name)
    if chunk.headings:  # none or empty: no key
        found["headings"] = PATH.join(chunk.headings)
    if chunk.pages is not None:
        found["page_number"], found["last_page"] = chunk.pages
    if chunk.symbols:  # none or empty: no key
        found["symbols"] = PATH.join(chunk.symbols)
    if chunk.defines:  # none or empty: no key
        found["defines"] = "; ".join(chunk.defines)
    if chunk.language is not None:
        found["language"] = chunk.language
    if chunk.distance is not None:
        found["distance"] = chunk.distance
    return found


def file_name(meta: Mapping[str, Any]) -> str | None:
    """A document's file name from its framework metadata (``file_path``, else
    ``file_name``), for strategies that choose by extension."""
    for key in ("file_path", "file_name"):
        value = meta.get(key)
        if isinstance(value, str) and value:
            return value
    return None
