"""Chunk a Ray Data dataset of documents.

    import ray
    from chunkd.ray import chunk_dataset
    documents = ray.data.read_parquet("s3://bucket/documents/")
    chunks = chunk_dataset(documents, chunk_size=300, unit="tokens")
    chunks.write_parquet("s3://bucket/chunks/")

Each block goes through ``chunkd.arrow.Chunker`` as an Arrow table
(``map_batches(..., batch_format="pyarrow")``) in Ray tasks, which Ray fuses with the
read before them: no actor pool to size, no copy between the two steps. Each worker
process builds its splitter (and loads the tokenizer, for tokens) once.
"""

from __future__ import annotations

from chunkd.arrow import Chunker

try:
    import ray.data
except ImportError as error:  # pragma: no cover - depends on the installation
    raise ImportError("chunkd.ray needs Ray Data: pip install 'pyarrow>=16' 'ray[data]>=2.9'",
                      name=error.name) from None


def chunk_dataset(dataset: ray.data.Dataset, text_column: str = "text",
                  id_column: str | None = "id", **settings) -> ray.data.Dataset:
    """A dataset of the chunks of ``dataset``'s documents: a row per chunk, with the
    columns of ``chunkd.arrow`` (``doc``, the carried columns, ``index``, ``start``,
    ``end``, ``length``, the settings' optional fields, ``text``). The arguments are
    ``chunkd.arrow.Chunker``'s (the settings by keyword); bad settings fail here,
    before anything runs. For other ``map_batches`` options (``batch_size``,
    ``num_cpus``, ...), call it yourself:
    ``dataset.map_batches(Chunker(...), batch_format="pyarrow", ...)``."""
    chunker = Chunker(text_column, id_column, **settings)
    return dataset.map_batches(chunker, batch_format="pyarrow")
