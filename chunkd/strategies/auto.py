"""The auto strategy: a strategy chosen per document, for a mixed inbox. Markdown files,
and documents whose text is Markdown-like (HTML, DOCX: ``chunkd.inputs``), go to
the markdown strategy, code files to the ``code`` strategy when it is registered,
everything else (text, PDF) to the recursive strategy; each at the same size and
overlap. The choice is made at ``begin`` from the document's ``Source``: its media
type, else its name's extension; a document without either is text."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from chunkd.model.chunk import Chunk
from chunkd.model.chunker import DocumentChunker, Source, begin
from chunkd.strategies.base import REGISTRY, Strategy, register
from chunkd.strategies.markdown import Markdown
from chunkd.strategies.recursive import Recursive

if TYPE_CHECKING:
    from chunkd.strategies.base import SettingsView

MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown", ".mdx", ".mkd"})


def chosen(source: Source, code_files: tuple[str, ...]) -> str:
    """The strategy for a document: "markdown", "code" (a name that matches one of
    ``code_files``, the code strategy's ``include`` patterns) or "recursive"."""
    if source.media_type == "text/markdown":
        return "markdown"
    if source.media_type is not None:
        from chunkd.inputs import markdown_like  # the formats' registry: only when asked

        if markdown_like(source.media_type):
            return "markdown"
    if source.media_type is None and isinstance(source.name, str):
        extension = os.path.splitext(source.name)[1].lower()
        if extension in MARKDOWN_EXTENSIONS:
            return "markdown"
        import fnmatch  # here: a plain run does not choose

        if any(fnmatch.fnmatch(source.name.lower(), pattern) for pattern in code_files):
            return "code"
    return "recursive"


@register
class Auto(Markdown):
    """Per document: markdown for Markdown, HTML and DOCX, code for code files (when
    the code strategy exists), recursive for the rest; in code points or tokens. It
    takes what markdown takes (sizes, ``--strip-headings``, ``embed_text`` fitted)."""

    name = "auto"
    #: Its markdown documents' chunks get their fitted ``embed_text`` from the markdown
    #: splitter; ``build`` adds it to the others' (``EmbedText`` keeps the first).
    embeds = False

    @classmethod
    def check(cls, settings: SettingsView) -> None:
        for kind in cls.choices():
            kind.check(settings)

    @staticmethod
    def choices() -> list[type[Strategy]]:
        return [Markdown, Recursive, *([REGISTRY["code"]] if "code" in REGISTRY else [])]

    @classmethod
    def splitter(cls, settings: SettingsView) -> DocumentChunker:
        return AutoChunker({kind.name: kind.splitter(settings) for kind in cls.choices()})


class AutoChunker:
    """The chunker of the strategy chosen for the document ``begin`` announced."""

    def __init__(self, chunkers: dict[str, DocumentChunker]) -> None:
        self.chunkers = chunkers
        self.current = chunkers["recursive"]

    def begin(self, source: Source) -> None:
        code = REGISTRY.get("code")
        self.current = self.chunkers[chosen(source, code.include if code else ())]
        begin(self.current, source)

    def feed(self, text: str) -> list[Chunk]:
        return self.current.feed(text)

    def finish(self) -> list[Chunk]:
        chunks = self.current.finish()
        self.current = self.chunkers["recursive"]  # a document without begin is text
        return chunks
