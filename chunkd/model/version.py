"""chunkd's version, in one place: the package, its records and ``--version`` read it."""

__version__ = "0.4.0"
