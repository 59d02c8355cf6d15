"""The pure-Python twin of chunkd's compiled splitting core.

Each module here does what one compiled module does (``windows`` for
``chunkd.kernel._windows``, ``recursive`` for ``chunkd.kernel._kernel``, ``tokens`` for its
cl100k_base counter), with the same classes and
the same records, field for field, on every input, however the text is cut into
pieces. It is written to be read, not to be fast: it is what runs where the compiled
modules could not be built (no C compiler), or when ``CHUNKD_PUREPYTHON=1`` asks for
it, and it is a second, plain statement of what the compiled code computes, which the
tests hold the two to. This is msgpack-python's arrangement: a C extension and a
``fallback`` module with one API, chosen once at import (``chunkd.kernel.chosen``).

Nothing in the compiled code imports this package, and nothing outside ``chunkd.kernel.chosen``
and the tests should: other modules take their splitters from ``chunkd.kernel.chosen``.
"""
