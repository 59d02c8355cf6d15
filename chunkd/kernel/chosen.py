"""The splitting core, chosen once at import: the compiled modules (``chunkd.kernel._kernel``,
``chunkd.kernel._windows``) or their pure-Python twin (``chunkd.kernel.twin``).

The twin runs when ``CHUNKD_PUREPYTHON=1`` asks for it, or when the compiled modules
cannot be imported (a machine without a C compiler installed chunkd); the latter is
said once on stderr. Every other module takes its splitters from here, never from the
modules behind it, so that both cores serve every front end alike. The code strategy's
compiled walk (``chunkd.kernel._code``, ``CodeWalk``) is chosen here too; its twin is
``chunkd.strategies.code.CodeDocument``. The window strategies' module and the code walk
are imported when first asked for: a run that uses neither does not load them.
"""

from __future__ import annotations

import os
import sys

__all__ = ["CONJUNCT_BREAK_VALUES", "CodeWalk", "ELLIPSIS", "GRAPHEME_BREAK_VALUES", "HEADING_LIMIT",
           "IMPLEMENTATION", "PICTOGRAPHIC_BIT", "SEPARATORS", "GraphemeWindows",
           "PythonRecursiveSplitter", "RecursiveSplitter", "SectionScanner", "SectionWindows", "SentenceWindows",
           "TokenCounter", "WordWindows", "cut_heading", "literal_text", "pad_heap", "unpack_ranks"]

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chunkd.kernel.splitting import SEPARATORS, literal_text

if TYPE_CHECKING:
    from chunkd.kernel._code import CodeWalk as _CodeWalk
    from chunkd.kernel.twin.recursive import RecursiveSplitter as PythonRecursiveSplitter
    from chunkd.kernel._windows import (CONJUNCT_BREAK_VALUES, ELLIPSIS, GRAPHEME_BREAK_VALUES,
                                 HEADING_LIMIT, PICTOGRAPHIC_BIT, GraphemeWindows,
                                 SectionScanner, SectionWindows, SentenceWindows,
                                 WordWindows, cut_heading)

#: The names of the window strategies' module (``chunkd.kernel._windows``, or the twin's).
WINDOWS_NAMES = ("CONJUNCT_BREAK_VALUES", "ELLIPSIS", "GRAPHEME_BREAK_VALUES", "HEADING_LIMIT",
                 "PICTOGRAPHIC_BIT", "GraphemeWindows", "SectionScanner", "SectionWindows",
                 "SentenceWindows", "WordWindows", "cut_heading")


def __getattr__(name: str) -> Any:
    """The names imported when first asked for (then kept as this module's own):
    ``PythonRecursiveSplitter``, the twin's recursive splitter in either core (its
    counts are Python numbers, so it takes a length function that returns floats: the
    drop-in's, its only user), the window strategies' names and ``CodeWalk``."""
    value: Any
    if name in WINDOWS_NAMES:  # all at once: the module is looked for once
        module = _windows_module()
        globals().update((each, getattr(module, each)) for each in WINDOWS_NAMES)
        return getattr(module, name)
    if name == "PythonRecursiveSplitter":
        from chunkd.kernel.twin.recursive import RecursiveSplitter
        value = RecursiveSplitter
    elif name == "CodeWalk":
        value = _code_walk()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


#: "compiled" or "python": which core runs.
IMPLEMENTATION: str

if os.environ.get("CHUNKD_PUREPYTHON") == "1":
    IMPLEMENTATION = "python"
else:
    try:
        from chunkd.kernel._kernel import RecursiveSplitter, TokenCounter, unpack_ranks
        IMPLEMENTATION = "compiled"
    except ImportError as error:
        print(f"chunkd: the compiled core is not built ({error}); running the pure-Python "
              "core, slower", file=sys.stderr)
        IMPLEMENTATION = "python"

#: The command's allocator setting (``chunkd.kernel._core.pad_heap``): None where the twin runs.
pad_heap: Callable[[int], bool] | None = None
if IMPLEMENTATION == "compiled":
    from chunkd.kernel._core import pad_heap

if IMPLEMENTATION == "python":
    # To mypy the names are the compiled modules' (their .pyi stubs): the twin has their API.
    from chunkd.kernel.twin.recursive import RecursiveSplitter  # type: ignore[assignment]
    from chunkd.kernel.twin.tokens import TokenCounter  # type: ignore[assignment]
    from chunkd.kernel.twin.tokens import unpack_ranks


def _windows_module() -> Any:
    """``chunkd.kernel._windows``, or the twin's where it runs or where that module alone
    cannot be imported (said once on stderr, as for the core)."""
    if IMPLEMENTATION == "compiled":
        try:
            import chunkd.kernel._windows
            return chunkd.kernel._windows
        except ImportError as error:
            print(f"chunkd: the window strategies' compiled module is not built ({error}); "
                  "they run in Python, slower", file=sys.stderr)
    import chunkd.kernel.twin.windows
    return chunkd.kernel.twin.windows


#: The code strategy's compiled walk (chunkd.kernel._code); None where the twin runs, or where
#: it alone is not built (tree-sitter's runtime did not compile).
CodeWalk: type[_CodeWalk] | None


def _code_walk() -> type[_CodeWalk] | None:
    if IMPLEMENTATION == "python":
        return None
    try:
        from chunkd.kernel._code import CodeWalk
    except ImportError as error:
        print(f"chunkd: the code strategy's compiled walk is not built ({error}); it runs "
              "in Python, slower", file=sys.stderr)
        return None
    return CodeWalk
