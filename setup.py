"""Build the compiled kernels; the metadata lives in pyproject.toml."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("chunkd._kernel", ["chunkd/_kernel.pyx"], extra_compile_args=["-O3"]),
         Extension("chunkd._windows", ["chunkd/_windows.pyx"], extra_compile_args=["-O3"])],
        compiler_directives={"language_level": "3"},
    ),
)
