"""Chunk records written out: NDJSON, JSON, msgpack, Parquet, and standard output."""
