"""``chunkd watch`` and ``chunkd sync``: a folder kept chunked, and a store kept equal to it."""
