"""chunkd.ray on a local Ray cluster (2 CPUs, one for the session): the corpus chunked
through Ray Data equals, row for row, what the installed filter writes; so does the
semantic strategy with the real model, loaded once in each worker process."""

from __future__ import annotations

import os

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunkd.settings import SettingsError
from command import ndjson, run_chunkd
from embedding import model_folder
from tables import corpus_rows, filter_records, write_corpus_parquet
from tokenizer_files import minilm_folder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """A local cluster; nothing it does reaches the network (usage stats off)."""
    saved = os.environ.get("RAY_USAGE_STATS_ENABLED")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray
    import ray.data

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=512 << 20)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()
    if saved is None:
        del os.environ["RAY_USAGE_STATS_ENABLED"]
    else:
        os.environ["RAY_USAGE_STATS_ENABLED"] = saved


@pytest.fixture(scope="module")
def corpus_parquet(tmp_path_factory):
    # Row groups of 32 documents: Ray reads them as several blocks.
    return write_corpus_parquet(tmp_path_factory.mktemp("corpus") / "corpus.parquet", 32)


def collect(ray, dataset) -> pa.Table:
    """The dataset's blocks as one table (which requires one schema for them all)."""
    return pa.concat_tables(ray.get(dataset.to_arrow_refs()))


def in_order(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: (row["doc"], row["index"]))


@pytest.mark.parametrize("arguments,options", [
    ({}, []),
    ({"chunk_size": 200, "chunk_overlap": 20, "unit": "tokens", "count_tokens": True},
     ["--tokens", "200", "--overlap", "20", "--count-tokens"]),
    # The model folder's tokenizer (filled in below): its limit, 254, is the size.
    ({"tokenizer": "MINILM", "count_tokens": True}, ["--tokenizer", "MINILM", "--count-tokens"]),
    ({"ids": True}, ["--ids"]),  # the same chunk_id as the filter's
], ids=["defaults", "tokens", "minilm", "chunk ids"])
def test_the_corpus_through_ray_equals_the_filters_records(ray_cluster, corpus_parquet,
                                                           arguments, options):
    from chunkd.ray import chunk_dataset

    folder = str(minilm_folder())
    arguments = {key: folder if value == "MINILM" else value for key, value in arguments.items()}
    options = [folder if option == "MINILM" else option for option in options]
    documents = ray_cluster.data.read_parquet(str(corpus_parquet))
    chunks = collect(ray_cluster, chunk_dataset(documents, **arguments))
    rows = chunks.to_pylist()
    assert in_order(rows) == in_order(filter_records(*options))
    texts = {row["id"]: row["text"] for row in corpus_rows()}
    assert all(texts[row["doc"]][row["start"]:row["end"]] == row["text"] for row in rows)
    assert chunks.schema.field("number").type == pa.int32()


def test_parquet_to_parquet_through_ray_equals_the_filters_parquet(ray_cluster, corpus_parquet,
                                                                   tmp_path):
    """The README's pipeline: read Parquet, chunk, write Parquet."""
    from chunkd.ray import chunk_dataset

    folder = tmp_path / "chunks"
    documents = ray_cluster.data.read_parquet(str(corpus_parquet))
    chunk_dataset(documents, chunk_size=500, chunk_overlap=50).write_parquet(str(folder))
    through_ray = pq.read_table(folder)
    out = tmp_path / "filter.parquet"
    result = run_chunkd("--input", "parquet", str(corpus_parquet), "--chars", "500",
                        "--overlap", "50", "--format", "parquet", "--output", str(out))
    assert result.returncode == 0, result.stderr
    through_filter = pq.read_table(out)
    assert through_ray.schema == through_filter.schema
    assert in_order(through_ray.to_pylist()) == in_order(through_filter.to_pylist())


def test_bad_settings_fail_before_anything_runs(ray_cluster):
    from chunkd.ray import chunk_dataset

    documents = ray_cluster.data.from_items([{"text": "x"}])
    with pytest.raises(SettingsError, match="overlap"):
        chunk_dataset(documents, chunk_size=10, chunk_overlap=10)


def test_semantic_through_ray_equals_the_filter_and_loads_the_model_once_a_worker(
        ray_cluster, tmp_path):
    from chunkd.ray import chunk_dataset

    def model_loads(batch: pa.Table) -> pa.Table:
        """Each chunk row's process and how many models that process has loaded (run
        in the chunking task, which Ray fuses with it; defined here, so that Ray sends
        it by value: the workers cannot import the tests)."""
        from chunkd.embeddings.models import model

        rows = batch.num_rows
        return batch.append_column("pid", pa.array([os.getpid()] * rows, pa.int64())) \
            .append_column("loads", pa.array([model.cache_info().misses] * rows, pa.int64()))

    # Short copies of corpus documents, English and Chinese: the model embeds every
    # sentence. Row groups of 2: several blocks, so several tasks.
    rows = [dict(row, text=row["text"][:1500]) for row in corpus_rows()[::25]][:8]
    path = tmp_path / "documents.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2)
    folder = model_folder()
    documents = ray_cluster.data.read_parquet(str(path))
    chunks = chunk_dataset(documents, chunk_size=60, unit="tokens", strategy="semantic",
                           embed=folder).map_batches(model_loads, batch_format="pyarrow")
    table = collect(ray_cluster, chunks)
    assert set(table.column("loads").to_pylist()) == {1}  # every process loaded it once
    through_ray = table.drop_columns(["pid", "loads"]).to_pylist()
    result = run_chunkd("--input", "ndjson", "--strategy", "semantic", "--embed", folder,
                        "--tokens", "60", input=b"".join(orjson.dumps(row) + b"\n"
                                                         for row in rows))
    assert result.returncode == 0, result.stderr
    expected = ndjson(result.stdout)
    assert {row["folder"] for row in rows} >= {"zh-vuedocs", "en-policy"}
    assert any("distance" in record for record in expected)
    # The same cuts; the distances within float noise, since the filter batches the
    # sentences of several documents together, and Ray those of its block.
    through_ray, expected = in_order(through_ray), in_order(
        [dict(record, distance=record.get("distance")) for record in expected])
    distances = [record.pop("distance") for record in through_ray]
    assert through_ray == [{k: v for k, v in record.items() if k != "distance"}
                           for record in expected]
    assert distances == [pytest.approx(record["distance"], abs=1e-5) for record in expected]
