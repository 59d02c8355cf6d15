"""``--vectors``: each chunk's embedding in its record, batched across documents, through
the embedding cache on disk (``--embed-cache``), in every format and front end.

The models are a loopback OpenAI-compatible endpoint that keeps every text it is sent
(``tests/embedding.py``'s ``CountingEndpoint``, vectors from a hash of the text) and the
real all-MiniLM-L6-v2, whose vectors are checked against sentence-transformers itself.
"""

from __future__ import annotations

import io
import multiprocessing
import sqlite3
import subprocess

import msgpack
import numpy
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from command import HANG, chunkd_command, ndjson, run_chunkd
from embedding import CountingEndpoint, hashed_vectors, model_folder, oracle_model

import chunkd
from chunkd.embeddings.cache import DATABASE, DiskCache, DiskCached, entry_key
from chunkd.embeddings.models import FunctionEmbedder
from chunkd.outputs.vectors import VectorWriter, with_vectors

SENTENCES = [f"Sentence {number} tells of {word} and of nothing else at all."
             for number, word in enumerate(["rivers", "bread", "snow", "stars", "ropes",
                                            "ovens", "deltas", "peaks", "yeast", "fish"])]


def documents(tmp_path, count: int = 6) -> list[str]:
    """``count`` small documents of a few chunks each (at --chars 120), no two chunks
    alike."""
    paths = []
    for number in range(count):
        path = tmp_path / f"doc{number}.txt"
        path.write_text(" ".join(f"{SENTENCES[(number + k) % 10]} So says part {number}."
                                 for k in range(5)) + "\n")
        paths.append(str(path))
    return paths


def endpoint_options(endpoint: CountingEndpoint, cache) -> list[str]:
    return ["--chars", "120", "--overlap", "0", "--vectors", "--embed-url", endpoint.url,
            "--embed-model", "hashed", "--embed-cache", str(cache)]


def expected(record: dict) -> numpy.ndarray:
    text = record.get("embed_text") or record["text"]
    return numpy.array(hashed_vectors([text])[0], dtype=numpy.float32)


def vectors_of(records: list[dict]) -> list[numpy.ndarray]:
    return [numpy.array(record["vector"], dtype=numpy.float32) for record in records]


def test_vectors_are_the_models_and_a_second_run_sends_nothing(tmp_path):
    paths = documents(tmp_path)
    with CountingEndpoint() as endpoint:
        first = run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"), *paths)
        assert first.returncode == 0, first.stderr
        records = ndjson(first.stdout)
        assert len(records) > len(paths)
        for record, vector in zip(records, vectors_of(records)):
            assert numpy.array_equal(vector, expected(record))
        # Each distinct text once, and nothing else.
        assert sorted(endpoint.texts) == sorted({record["text"] for record in records})
        sent = len(endpoint.texts)
        second = run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"), *paths)
        assert second.returncode == 0, second.stderr
        assert len(endpoint.texts) == sent  # all from the cache
        assert second.stdout == first.stdout


def test_after_an_edit_only_the_new_chunks_are_sent(tmp_path):
    paths = documents(tmp_path)
    with CountingEndpoint() as endpoint:
        before = ndjson(run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"),
                                   *paths).stdout)
        with open(paths[2], "a") as stream:
            stream.write("A new closing sentence about lighthouses and their keepers.\n")
        endpoint.calls.clear()
        run = run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"), *paths)
        assert run.returncode == 0, run.stderr
        after = ndjson(run.stdout)
    new = {record["text"] for record in after} - {record["text"] for record in before}
    assert new and sorted(endpoint.texts) == sorted(new)


def test_a_damaged_entry_is_embedded_again(tmp_path):
    paths = documents(tmp_path, 2)
    with CountingEndpoint() as endpoint:
        first = run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"), *paths)
        records = ndjson(first.stdout)
        victim = records[1]["text"]
        key = entry_key(f"hashed@{endpoint.url}/v1/embeddings", victim)
        with sqlite3.connect(tmp_path / "cache" / DATABASE) as database:
            (vector,) = database.execute("SELECT vector FROM vectors WHERE key = ?",
                                         (key,)).fetchone()
            flipped = bytes([vector[0] ^ 0x40]) + vector[1:]  # a wrong number, same size
            database.execute("UPDATE vectors SET vector = ? WHERE key = ?", (flipped, key))
        endpoint.calls.clear()
        second = run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"), *paths)
        assert second.returncode == 0, second.stderr
        assert endpoint.texts == [victim]
        assert second.stdout == first.stdout


def test_a_garbled_cache_file_is_set_aside(tmp_path):
    paths = documents(tmp_path, 2)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / DATABASE).write_bytes(b"not a database at all " * 300)
    with CountingEndpoint() as endpoint:
        run = run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"), *paths)
    assert run.returncode == 0, run.stderr
    assert b"damaged" in run.stderr and b"set aside" in run.stderr
    for record, vector in zip(ndjson(run.stdout), vectors_of(ndjson(run.stdout))):
        assert numpy.array_equal(vector, expected(record))
    assert (tmp_path / "cache" / (DATABASE + ".damaged")).exists()



def test_a_cache_folder_given_as_a_link_is_followed_once(tmp_path, capsys):
    """The user's own link (a cache kept on another disk) is the folder it names, on the
    command line; a link put in that folder's place later is never written through: the
    cache is then all misses, said once, and the vectors are still the model's."""
    paths = documents(tmp_path, 2)
    disk = tmp_path / "other-disk"
    disk.mkdir()
    (tmp_path / "cache").symlink_to(disk)
    with CountingEndpoint() as endpoint:
        run = run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"), *paths)
    assert run.returncode == 0, run.stderr
    assert (disk / DATABASE).exists()

    cache = DiskCache(str(disk))
    key, vector = entry_key("m", "text"), numpy.ones(4, numpy.float32).tobytes()
    cache.put([(key, vector)])
    assert cache.get([key]) == {key: vector}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    disk.rename(tmp_path / "moved")
    disk.symlink_to(elsewhere)
    cache._connection = None   # as a forked process: it connects anew
    assert cache.get([key]) == {}
    cache.put([(key, vector)])
    assert list(elsewhere.iterdir()) == []
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and "a symbolic link, not followed" in said[0]

def test_two_processes_sharing_the_cache_agree(tmp_path):
    paths = documents(tmp_path, 10)
    with CountingEndpoint() as endpoint:
        command = [chunkd_command(), *endpoint_options(endpoint, tmp_path / "cache"), *paths]
        runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for _ in range(3)]
        outputs = [run.communicate(timeout=HANG) for run in runs]
    assert all(run.returncode == 0 for run in runs), outputs
    assert outputs[0][0] == outputs[1][0] == outputs[2][0]
    for record, vector in zip(ndjson(outputs[0][0]), vectors_of(ndjson(outputs[0][0]))):
        assert numpy.array_equal(vector, expected(record))


def test_batches_fill_across_documents_with_the_same_records(tmp_path):
    paths = documents(tmp_path, 12)
    with CountingEndpoint() as endpoint:
        options = [*endpoint_options(endpoint, tmp_path / "cache"), "--embed-batch", "8"]
        together = run_chunkd(*options, *paths)
        assert together.returncode == 0, together.stderr
        sizes = [len(call) for call in endpoint.calls]
        alone = b"".join(run_chunkd(*endpoint_options(endpoint, tmp_path / f"c{number}"),
                                    path).stdout for number, path in enumerate(paths))
    records = ndjson(together.stdout)
    chunks_a_document = len(records) / len(paths)
    assert chunks_a_document < 8  # so a full call holds several documents' chunks
    # Full calls but one (requests in flight at once arrive in any order).
    assert len(sizes) > 1 and sorted(sizes)[1:] == [8] * (len(sizes) - 1), sizes
    assert sum(sizes) == len({record["text"] for record in records})
    # One document at a time, the same records (each run names its one document).
    assert [{**record, "doc": None} for record in ndjson(alone)] == \
        [{**record, "doc": None} for record in records]


def test_vectors_of_embed_text(tmp_path):
    path = tmp_path / "doc.md"
    path.write_text("# Rivers\n\n" + " ".join(SENTENCES[:4]) + "\n\n## Deltas\n\n"
                    + " ".join(SENTENCES[4:8]) + "\n")
    with CountingEndpoint() as endpoint:
        run = run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"), "--strategy",
                         "markdown", "--embed-text", str(path))
    assert run.returncode == 0, run.stderr
    records = ndjson(run.stdout)
    assert all(record["embed_text"] != record["text"] for record in records)
    for record, vector in zip(records, vectors_of(records)):
        assert numpy.array_equal(vector, expected(record))


@pytest.mark.parametrize("format", ["json", "msgpack", "parquet"])
def test_each_format_carries_the_vectors(tmp_path, format):
    paths = documents(tmp_path, 3)
    with CountingEndpoint() as endpoint:
        options = endpoint_options(endpoint, tmp_path / "cache")
        reference = ndjson(run_chunkd(*options, *paths).stdout)
        output = tmp_path / "out.parquet"
        run = run_chunkd(*options, "--format", format, *paths,
                         *(["--output", str(output)] if format == "parquet" else []))
    assert run.returncode == 0, run.stderr
    if format == "json":
        records = [chunk for line in run.stdout.splitlines()
                   for chunk in orjson.loads(line)["chunks"]]
        vectors = vectors_of(records)
    elif format == "msgpack":
        records = list(msgpack.Unpacker(io.BytesIO(run.stdout), raw=False))
        assert all(isinstance(record["vector"], bytes) for record in records)
        vectors = [numpy.frombuffer(record["vector"], "<f4") for record in records]
    else:
        table = pq.read_table(output)
        kind = table.schema.field("vector").type
        assert pa.types.is_fixed_size_list(kind) and kind.list_size == 8
        assert kind.value_type == pa.float32()
        records = table.to_pylist()
        vectors = [numpy.array(record["vector"], dtype=numpy.float32) for record in records]
    assert [record["text"] for record in records] == [record["text"] for record in reference]
    for record, vector in zip(reference, vectors):
        assert numpy.array_equal(vector, expected(record))


def test_a_failing_model_fails_the_documents_of_its_batch_only(tmp_path):
    paths = documents(tmp_path, 4)
    (tmp_path / "bad.txt").write_text("POISON " + SENTENCES[0] + "\n")
    with CountingEndpoint() as endpoint:
        endpoint.refuse = "POISON"
        run = run_chunkd(*endpoint_options(endpoint, tmp_path / "cache"), "--embed-batch",
                         "4", paths[0], paths[1], str(tmp_path / "bad.txt"), paths[2],
                         paths[3])
    assert run.returncode == 1
    problems = run.stderr.decode().splitlines()
    assert problems and all(line.startswith("chunkd: ") and "HTTP 400" in line
                            for line in problems)
    assert any("bad.txt" in line for line in problems)
    written = {record["doc"] for record in ndjson(run.stdout)}
    failed = {path for path in [*paths, str(tmp_path / "bad.txt")]
              if any(path in line for line in problems)}
    # Every document is written or said to have failed (one whose first chunks went
    # out in the batch before, as a document that fails while it streams, both); the
    # last one, in a batch after the failure, is written whole.
    assert written | failed == {*paths, str(tmp_path / "bad.txt")}
    assert str(tmp_path / "bad.txt") not in written
    assert paths[3] in written and paths[3] not in failed
    whole = ndjson(run_chunkd("--chars", "120", "--overlap", "0", paths[3]).stdout)
    assert [record["text"] for record in ndjson(run.stdout) if record["doc"] == paths[3]] \
        == [record["text"] for record in whole]


@pytest.mark.parametrize("arguments, message", [
    (["--vectors"], "--vectors needs a model"),
    (["--embed", "X"], "--embed is for --strategy semantic or --vectors"),
    (["--vectors", "--embed", "MINILM", "--embed-dtype", "float16"],
     "--embed-dtype float16 is for CUDA devices"),
    (["--vectors", "--embed-url", "http://127.0.0.1:9", "--embed-model", "m",
      "--embed-dtype", "bfloat16"], "--embed-dtype is for --embed models"),
])
def test_settings_that_cannot_embed_are_usage_errors(arguments, message):
    arguments = [model_folder() if argument == "MINILM" else argument for argument in arguments]
    run = run_chunkd(*arguments, input=b"text")
    assert run.returncode == 2
    assert message in run.stderr.decode()
    assert len(run.stderr.decode().splitlines()) == 1


# --- the real model ----------------------------------------------------------------------

def test_minilm_vectors_are_sentence_transformers(tmp_path, minilm):

    paths = documents(tmp_path, 3)
    run = run_chunkd("--tokens", "50", "--overlap", "0", "--vectors", "--embed", minilm[0],
                     "--embed-cache", str(tmp_path / "cache"), *paths)
    assert run.returncode == 0, run.stderr
    records = ndjson(run.stdout)
    oracle = oracle_model().encode(
        [record["text"] for record in records], convert_to_numpy=True)
    vectors = numpy.array([record["vector"] for record in records], dtype=numpy.float32)
    assert vectors.shape == (len(records), 384)
    assert numpy.allclose(vectors, oracle, atol=1e-5)
    again = run_chunkd("--tokens", "50", "--overlap", "0", "--vectors", "--embed", minilm[0],
                       "--embed-cache", str(tmp_path / "cache"), *paths)
    assert again.stdout == run.stdout


def test_minilm_vectors_fit_its_window_by_default(tmp_path, minilm):
    """Counted in the model's own tokens, at most its window less its special tokens (as
    its own tokenizer counts them, with them); a size in code points is refused."""
    from transformers import AutoTokenizer

    path = tmp_path / "long.md"
    path.write_text(" ".join(SENTENCES * 40) + " " + "漢字と仮名の文。" * 300, encoding="utf-8")
    run = run_chunkd("--vectors", "--embed", minilm[0], str(path))
    assert run.returncode == 0, run.stderr
    tokenizer = AutoTokenizer.from_pretrained(minilm[0])
    counts = [len(tokenizer(record["text"])["input_ids"]) for record in ndjson(run.stdout)]
    window = oracle_model().max_seq_length
    assert window == 256 and window - 10 <= max(counts) <= window
    refused = run_chunkd("--vectors", "--embed", minilm[0], "--chars", "500", str(path))
    assert refused.returncode == 2 and refused.stdout == b""
    assert b"reads 254 tokens a chunk" in refused.stderr


def test_float32_unless_asked(minilm):
    import torch

    from chunkd.embeddings.selection import embedder
    from chunkd.settings import Settings

    model = embedder(Settings(vectors=True, embed=minilm[0]))
    assert {parameter.dtype for parameter in model.inner.model.parameters()} == {torch.float32}
    assert "#" not in model.name
    assert "embed_dtype" not in Settings(vectors=True, embed=minilm[0]).as_dict()


def test_arrow_table_of_vectors(minilm):
    import pyarrow as pa

    from chunkd.arrow import Chunker

    table = pa.table({"id": ["a", "b", "c"], "text": [" ".join(SENTENCES[:4]), "",
                                                     " ".join(SENTENCES[4:])]})
    chunker = Chunker(chunk_size=150, chunk_overlap=0, vectors=True, embed=minilm[0])
    chunks = chunker(table)
    assert chunks.schema.field("vector").type == pa.list_(pa.float32(), 384)
    assert chunker.schema(table.schema) == chunks.schema
    oracle = oracle_model().encode(
        chunks.column("text").to_pylist(), convert_to_numpy=True)
    assert numpy.allclose(numpy.array(chunks.column("vector").to_pylist()), oracle, atol=1e-5)
    empty = chunker(table.slice(1, 1))
    assert empty.num_rows == 0 and empty.schema == chunks.schema


# --- in process: the daemon's call, the writer, the cache --------------------------------

def counting_model(calls: list[list[str]]) -> FunctionEmbedder:
    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return hashed_vectors(texts)
    return FunctionEmbedder(embed, name="hashed-test", batch=1000)


def test_with_vectors_regroups_a_documents_chunks():
    chunks = chunkd.split_text(" ".join(SENTENCES * 3), 90, 0)
    calls: list[list[str]] = []
    batches = [chunks[start:start + 3] for start in range(0, len(chunks), 3)]
    made = [chunk for part in with_vectors(batches, counting_model(calls), 4) for chunk in part]
    assert [len(call) for call in calls] == [4] * (len(chunks) // 4) + (
        [len(chunks) % 4] if len(chunks) % 4 else [])
    assert [chunk._replace(vector=None) for chunk in made] == chunks
    for chunk in made:
        assert numpy.array_equal(chunk.vector, hashed_vectors([chunk.text])[0])


def test_vector_writer_keeps_order_and_bounds_what_it_holds():
    from chunkd.outputs.writers import make_writer

    out = io.BytesIO()
    calls: list[list[str]] = []
    held: list[int] = []
    writer = VectorWriter(make_writer("ndjson", out, True, {}), counting_model(calls), 5,
                          lambda name, error: None)
    texts = [" ".join(SENTENCES[number:number + 3]) for number in range(7)]
    for number, text in enumerate(texts):
        writer.begin(f"d{number}", {})
        writer.write(chunkd.split_text(text, 80, 0))
        held.append(writer.count)
        writer.end()
    writer.close()
    records = ndjson(out.getvalue())
    assert [record["doc"] for record in records] == sorted(
        (record["doc"] for record in records), key=lambda doc: int(doc[1:]))
    assert max(held) < 5 + 4  # at most a batch, plus one call's chunks
    assert sum(len(call) for call in calls) == len(records)
    assert all(len(call) >= 5 for call in calls[:-1])


def test_least_recently_used_entries_leave_first(tmp_path):
    cache = DiskCache(str(tmp_path), max_bytes=256 << 10)
    model = DiskCached(counting_model([]), cache)
    model.embed(["kept"])
    for start in range(0, 4000, 200):
        model.embed([f"text {number} " + "x" * 200 for number in range(start, start + 200)])
        model.embed(["kept"])  # used again each time: never the least recent
    with sqlite3.connect(cache.path) as database:
        count = database.execute("SELECT count(*) FROM vectors").fetchone()[0]
        pages = database.execute("PRAGMA page_count").fetchone()[0]
    assert count < 4001
    assert pages * 4096 < 2 * (256 << 10) + (1 << 20)
    sent = model.sent
    model.embed(["kept"])
    assert model.sent == sent


def in_processes(context, count: int, target, *args) -> list:
    """What each of ``count`` processes running ``target(*args, queue)`` put on the
    queue."""
    queue = context.Queue()
    children = [context.Process(target=target, args=(*args, queue)) for _ in range(count)]
    for child in children:
        child.start()
    answers = [queue.get(timeout=HANG) for _ in children]
    for child in children:
        child.join(60)
    return answers


def _embed_in_child(folder: str, texts: list[str], queue) -> None:
    model = DiskCached(counting_model([]), DiskCache(folder))
    queue.put((model.embed(texts).tobytes(), model.sent))


def test_processes_share_one_cache(tmp_path):
    texts = [f"shared text {number}" for number in range(300)]
    answers = in_processes(multiprocessing.get_context("spawn"), 4, _embed_in_child,
                           str(tmp_path), texts)
    assert len({vectors for vectors, _ in answers}) == 1
    assert numpy.array_equal(numpy.frombuffer(answers[0][0], numpy.float32).reshape(300, 8),
                             numpy.array(hashed_vectors(texts), dtype=numpy.float32))
    # Whoever came later found some of them there.
    model = DiskCached(counting_model([]), DiskCache(str(tmp_path)))
    model.embed(texts)
    assert model.sent == 0


def _open_at_once(folder: str, ready, answers) -> None:
    ready.wait(30)  # all at once
    try:
        DiskCache(folder)
        answers.put("opened")
    except Exception as error:  # noqa: BLE001 (the answer the test reads)
        answers.put(str(error))


def test_processes_that_make_one_cache_at_once_all_open_it(tmp_path):
    """Eight processes open a new cache folder at the same moment, ten times over: while
    one makes the database WAL, SQLite answers the others "database is locked" without
    waiting (about one round in three failed so), and the cache waits on it instead."""
    context = multiprocessing.get_context("fork")
    for round_ in range(10):
        folder = str(tmp_path / f"cache{round_}")
        said = in_processes(context, 8, _open_at_once, folder, context.Barrier(8))
        assert said == ["opened"] * 8, said


def test_the_semantic_strategy_batches_windows_across_documents(tmp_path):
    """The command reads documents ahead and embeds their windows together: the same
    records as one document at a time, in fewer, fuller calls."""
    paths = documents(tmp_path, 12)
    options = ["--strategy", "semantic", "--chars", "200"]
    with CountingEndpoint() as endpoint:
        url = ["--embed-url", endpoint.url, "--embed-model", "hashed", "--embed-batch", "16"]
        together = run_chunkd(*options, *url, *paths)
        assert together.returncode == 0, together.stderr
        batched = [len(call) for call in endpoint.calls]
        endpoint.calls.clear()
        alone = [run_chunkd(*options, *url, path) for path in paths]
        single = [len(call) for call in endpoint.calls]
    assert sum(batched) == sum(single)  # the same windows, each once
    assert sorted(batched)[1:] == [16] * (len(batched) - 1), batched  # in any order
    assert len(batched) < len(single)
    assert [{**record, "doc": None} for record in ndjson(together.stdout)] == \
        [{**record, "doc": None} for run in alone for record in ndjson(run.stdout)]
