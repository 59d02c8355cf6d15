"""A LangChain ``Embeddings`` object (anything with ``embed_documents``) drives the
semantic strategy without ``langchain-text-splitters``, which it needs nothing from."""

from __future__ import annotations

import subprocess
import sys

from command import HANG

#: Run with LangChain's text splitters made unimportable (None in sys.modules); the
#: embeddings are a plain object with LangChain's method, two topics far apart.
SCRIPT = r"""
import sys
sys.modules["langchain_text_splitters"] = None
import chunkd

class Embeddings:
    model = "two-topics"

    def embed_documents(self, texts):
        return [[1.0, 0.0] if "cat" in text else [0.0, 1.0] for text in texts]

text = ("The cat sat. The cat slept. The cat purred. The cat ate. "
        "Rain fell. Rain poured. Rain stopped. Rain came back.")
chunks = chunkd.split_text(text, strategy="semantic", embed=Embeddings(), chunk_size=1000, min_size=0, buffer_size=0,
                           breakpoint="percentile", breakpoint_amount=50)
print("|".join(chunk.text for chunk in chunks))
try:
    import chunkd.langchain
except ImportError:
    print("splitters missing")
"""


def test_semantic_with_langchain_embeddings_needs_no_text_splitters():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            timeout=HANG)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "The cat sat. The cat slept. The cat purred. The cat ate.|"
        "Rain fell. Rain poured. Rain stopped. Rain came back.",
        "splitters missing"]
