"""Build the compiled core and the pre-tokenizer's character table; the metadata lives
in pyproject.toml.

``CHUNKD_DEBUG_BUILD=1`` builds the debug variant that a slow test runs the kernel-level
tests against: bounds and wraparound checks, the assertions on the invariants, ``-O0 -g``
and ``NDEBUG`` undefined. The release build leaves the checks and the assertions out.
"""

import hashlib
import os
import runpy
import shutil
import sys
import sysconfig
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

# Computed here once rather than at every run that counts tokens (chunkd/kernel/pretoken_classes.py).
KERNEL = Path(__file__).parent / "chunkd" / "kernel"
classes = runpy.run_path(str(KERNEL / "pretoken_classes.py"))
(KERNEL / classes["FILE"]).write_bytes(classes["build"]())
(KERNEL / classes["CATEGORIES_FILE"]).write_bytes(classes["build_categories"]())


class OptionalBuildExt(build_ext):
    """Each compiled module is built if it can be: where none can (no C compiler),
    chunkd still installs and runs the modules' pure-Python twin (chunkd.kernel.chosen), as
    msgpack's setup.py does; one line says so."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # the modules compiled side by side, on every core
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        self.not_built: list[str] = []
        super().run()
        if self.not_built:  # in the modules' order, whichever finished first
            names = [ext.name for ext in self.extensions if ext.name in self.not_built]
            print(f"chunkd: {', '.join(names)} not compiled ({self.reason}); "
                  "chunkd runs its pure-Python twin, slower", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        target = self.get_ext_fullpath(ext.name)
        kept = BUILT / built_key(ext) / os.path.basename(target)
        if kept.is_file():  # built before from the same C, flags and Python
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(kept, target)
            return
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as error:
            self.not_built.append(ext.name)
            self.reason = type(error).__name__
            return
        kept.parent.mkdir(parents=True, exist_ok=True)
        staging = kept.with_name(f"{kept.name}.{os.getpid()}")
        shutil.copy2(target, staging)
        os.replace(staging, kept)


#: The modules built before, by ``built_key``: pip builds each install in a fresh
#: folder, so that without them the README's second install compiles everything again.
BUILT = Path(__file__).parent / "build" / "modules"


def built_key(ext: Extension) -> str:
    """What a compiled module is made from: its C sources and the folders they include from
    (the generated C holds the Cython source it came from), the flags, the compiler and
    linker, and the Python it is built for."""
    digest = hashlib.sha256(repr((ext.name, ext.extra_compile_args, ext.define_macros,
                                  ext.include_dirs, sys.version,
                                  [os.environ.get(name, sysconfig.get_config_var(name))
                                   for name in ("CC", "CFLAGS", "LDSHARED")])).encode())
    for path in sorted(ext.sources) + sorted(ext.depends) + sorted(
            str(file) for folder in ext.include_dirs for file in Path(folder).rglob("*")
            if file.is_file()):
        digest.update(f"{path}\0".encode())
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


#: The compiled modules: the streaming core, the two kernels built on it, the kept
#: counts' hot path (chunkd/units/kept.py), the NDJSON writer's (chunkd/outputs/writers.py) and
#: UTF-8 decoding's (chunkd/inputs/readers.py).
MODULES = ("_core", "_kernel", "_windows", "_kept", "_records", "_utf8")
#: The code strategy's walk (chunkd/kernel/_code.pyx), built with tree-sitter's C runtime,
#: vendored (chunkd/kernel/_vendor/tree_sitter: lib.c includes the rest).
TREE_SITTER = "chunkd/kernel/_vendor/tree_sitter"

DEBUG = os.environ.get("CHUNKD_DEBUG_BUILD") == "1"
if DEBUG:
    checks = {"boundscheck": True, "wraparound": True}
    compile_args, macros = ["-O0", "-g", "-UNDEBUG"], [("CHUNKD_DEBUG_BUILD", "1")]
else:
    checks = {"boundscheck": False, "wraparound": False}
    compile_args, macros = ["-O3"], [("CYTHON_WITHOUT_ASSERTIONS", None)]

setup(
    ext_modules=cythonize(
        [Extension(f"chunkd.kernel.{name}", [f"chunkd/kernel/{name}.pyx"], extra_compile_args=compile_args,
                   define_macros=macros) for name in MODULES]
        # The runtime's symbols hidden: the tree-sitter package's module holds its own copy.
        + [Extension("chunkd.kernel._code", ["chunkd/kernel/_code.pyx"], depends=[f"{TREE_SITTER}/src/lib.c"],
                     include_dirs=[f"{TREE_SITTER}/include", f"{TREE_SITTER}/src"],
                     extra_compile_args=[*compile_args, "-std=c11", "-fvisibility=hidden"],
                     define_macros=[*macros, ("_DEFAULT_SOURCE", None)])],
        compiler_directives={"language_level": "3", **checks},
        nthreads=os.cpu_count() or 1,
        # The debug build's C files apart, so that neither build reuses the other's.
        build_dir="build/debug" if DEBUG else None,
    ),
    cmdclass={"build_ext": OptionalBuildExt},
)
