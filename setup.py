"""Build the compiled kernels and the pre-tokenizer's character table; the metadata
lives in pyproject.toml."""

import runpy
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

# Computed here once rather than at every run that counts tokens (chunkd/pretoken_classes.py).
classes = runpy.run_path(str(Path(__file__).parent / "chunkd" / "pretoken_classes.py"))
(Path(__file__).parent / "chunkd" / classes["FILE"]).write_bytes(classes["build"]())
(Path(__file__).parent / "chunkd" / classes["CATEGORIES_FILE"]).write_bytes(
    classes["build_categories"]())

setup(
    ext_modules=cythonize(
        [Extension("chunkd._kernel", ["chunkd/_kernel.pyx"], extra_compile_args=["-O3"]),
         Extension("chunkd._windows", ["chunkd/_windows.pyx"], extra_compile_args=["-O3"])],
        compiler_directives={"language_level": "3"},
    ),
)
