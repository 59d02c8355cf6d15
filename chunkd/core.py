"""The splitting core, chosen once at import: the compiled modules (``chunkd._kernel``,
``chunkd._windows``) or their pure-Python twin (``chunkd._pure``).

The twin runs when ``CHUNKD_PUREPYTHON=1`` asks for it, or when the compiled modules
cannot be imported (a machine without a C compiler installed chunkd); the latter is
said once on stderr. Every other module takes its splitters from here, never from the
modules behind it, so that both cores serve every front end alike. The code strategy's
compiled walk (``chunkd._code``, ``CodeWalk``) is chosen here too; its twin is
``chunkd.strategies.code.Document``. The window strategies' module and the code walk
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

from chunkd.splitting import SEPARATORS, literal_text

if TYPE_CHECKING:
    from chunkd._code import CodeWalk as _CodeWalk
    from chunkd._pure.recursive import RecursiveSplitter as PythonRecursiveSplitter
    from chunkd._windows import (CONJUNCT_BREAK_VALUES, ELLIPSIS, GRAPHEME_BREAK_VALUES,
                                 HEADING_LIMIT, PICTOGRAPHIC_BIT, GraphemeWindows,
                                 SectionScanner, SectionWindows, SentenceWindows,
                                 WordWindows, cut_heading)

#: The names of the window strategies' module (``chunkd._windows``, or the twin's).
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
        from chunkd._pure.recursive import RecursiveSplitter
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
        from chunkd._kernel import RecursiveSplitter, TokenCounter, unpack_ranks
        IMPLEMENTATION = "compiled"
    except ImportError as error:
        print(f"chunkd: the compiled core is not built ({error}); running the pure-Python "
              "core, slower", file=sys.stderr)
        IMPLEMENTATION = "python"

#: The command's allocator setting (``chunkd._core.pad_heap``): None where the twin runs.
pad_heap: Callable[[int], bool] | None = None
if IMPLEMENTATION == "compiled":
    from chunkd._core import pad_heap

if IMPLEMENTATION == "python":
    # To mypy the names are the compiled modules' (their .pyi stubs): the twin has their API.
    from chunkd._pure.recursive import RecursiveSplitter  # type: ignore[assignment]
    from chunkd._pure.tokens import TokenCounter  # type: ignore[assignment]
    from chunkd._pure.tokens import unpack_ranks


def _windows_module() -> Any:
    """``chunkd._windows``, or the twin's where it runs or where that module alone
    cannot be imported (said once on stderr, as for the core)."""
    if IMPLEMENTATION == "compiled":
        try:
            import chunkd._windows
            return chunkd._windows
        except ImportError as error:
            print(f"chunkd: the window strategies' compiled module is not built ({error}); "
                  "they run in Python, slower", file=sys.stderr)
    import chunkd._pure.windows
    return chunkd._pure.windows


#: The code strategy's compiled walk (chunkd._code); None where the twin runs, or where
#: it alone is not built (tree-sitter's runtime did not compile).
CodeWalk: type[_CodeWalk] | None


def _code_walk() -> type[_CodeWalk] | None:
    if IMPLEMENTATION == "python":
        return None
    try:
        from chunkd._code import CodeWalk
    except ImportError as error:
        print(f"chunkd: the code strategy's compiled walk is not built ({error}); it runs "
              "in Python, slower", file=sys.stderr)
        return None
    return CodeWalk
