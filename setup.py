"""Build the compiled kernels and the pre-tokenizer's character table; the metadata
lives in pyproject.toml."""

import runpy
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

# Computed here once rather than at every run that counts tokens (chunkd/pretoken_classes.py).
classes = runpy.run_path(str(Path(__file__).parent / "chunkd" / "pretoken_classes.py"))
(Path(__file__).parent / "chunkd" / classes["FILE"]).write_bytes(classes["build"]())

#: The compiled modules: the streaming core, and the two kernels built on it.
MODULES = ("_core", "_kernel", "_windows")

# Assertions on the invariants (``assert`` in the .pyx files) are compiled out here.
setup(
    ext_modules=cythonize(
        [Extension(f"chunkd.{name}", [f"chunkd/{name}.pyx"],
                   extra_compile_args=["-O3"], define_macros=[("CYTHON_WITHOUT_ASSERTIONS", None)])
         for name in MODULES],
        compiler_directives={"language_level": "3"},
    ),
)
