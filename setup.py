"""Build the compiled kernels and the pre-tokenizer's character table; the metadata
lives in pyproject.toml."""

import runpy
import sys
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

# Computed here once rather than at every run that counts tokens (chunkd/pretoken_classes.py).
classes = runpy.run_path(str(Path(__file__).parent / "chunkd" / "pretoken_classes.py"))
(Path(__file__).parent / "chunkd" / classes["FILE"]).write_bytes(classes["build"]())


class OptionalBuildExt(build_ext):
    """Each compiled module is built if it can be: where none can (no C compiler),
    chunkd still installs and runs the modules' pure-Python twin (chunkd.core), as
    msgpack's setup.py does; one line says so."""

    def run(self) -> None:
        self.not_built: list[str] = []
        super().run()
        if self.not_built:
            print(f"chunkd: {', '.join(self.not_built)} not compiled ({self.reason}); "
                  "chunkd runs its pure-Python twin, slower", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as error:
            self.not_built.append(ext.name)
            self.reason = type(error).__name__


setup(
    ext_modules=cythonize(
        [Extension("chunkd._kernel", ["chunkd/_kernel.pyx"], extra_compile_args=["-O3"]),
         Extension("chunkd._windows", ["chunkd/_windows.pyx"], extra_compile_args=["-O3"])],
        compiler_directives={"language_level": "3"},
    ),
    cmdclass={"build_ext": OptionalBuildExt},
)
