"""Regular expressions compiled where they are first used, not when their module is
imported: the modules a plain run imports declare some twenty, and compiling them
took 2 ms of every start (55.5 against 57.5 ms on empty input), for expressions that
most runs never use (HTML's charset, PDF's line breaks, a code file's shebang)."""

from __future__ import annotations

import re
from typing import Any, AnyStr, cast


class _Deferred:
    """Stands for ``re.compile(source, flags)``: compiles it at the first use of any
    attribute, then keeps each attribute it was asked for (a bound method, mostly) as
    its own, so that later uses cost what the compiled expression's cost."""

    def __init__(self, source: str | bytes, flags: int) -> None:
        self._source, self._flags = source, flags
        self._compiled: re.Pattern[Any] | None = None

    def __getattr__(self, name: str) -> Any:  # only for attributes not kept yet
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        value = getattr(self._compiled, name)
        self.__dict__[name] = value
        return value


def deferred(source: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile(source, flags)``, compiled when first used; for its methods and
    attributes only (``re.sub(pattern, ...)`` takes a compiled expression)."""
    return cast("re.Pattern[AnyStr]", _Deferred(source, flags))
