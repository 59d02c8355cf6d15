"""The shared corpus as a table of documents, and the filter's records for it: what the
Arrow, Parquet and Ray tests compare with."""

from __future__ import annotations

import functools
import pathlib

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from command import ndjson, run_chunkd
from oracle import CORPUS, corpus_documents


@functools.lru_cache(maxsize=None)
def corpus_rows() -> tuple[dict, ...]:
    """Every corpus document as a row: an id, its text, and two columns to carry."""
    return tuple({"id": str(path.relative_to(CORPUS)), "text": path.read_text(encoding="utf-8"),
                  "folder": path.parent.name, "number": number}
                 for number, path in enumerate(corpus_documents()))


def corpus_table() -> pa.Table:
    """The rows as Arrow, ``number`` as int32 (a type the output must keep)."""
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("folder", pa.string()),
                        ("number", pa.int32())])
    return pa.Table.from_pylist(list(corpus_rows()), schema=schema)


def write_corpus_parquet(path: pathlib.Path, row_group_size: int = 64) -> pathlib.Path:
    pq.write_table(corpus_table(), path, row_group_size=row_group_size)
    return path


def filter_records(*args: str) -> list[dict]:
    """What the installed filter writes for the corpus given as NDJSON lines."""
    lines = b"".join(orjson.dumps(row) + b"\n" for row in corpus_rows())
    result = run_chunkd("--input", "ndjson", *args, input=lines)
    assert result.returncode == 0, result.stderr
    return ndjson(result.stdout)
