"""The ``chunkd`` command: the filter, and the subcommands in one table.

    chunkd [OPTIONS] [FILE...]      the filter (chunkd.filter)
    chunkd COMMAND [OPTIONS] ...    a subcommand (chunkd.commands)

A subcommand module has ``main(argv) -> int`` (the exit status) and is imported only
when it runs. A file named like a subcommand is given to the filter as ``./watch``.
"""

from __future__ import annotations

import importlib
import os
import sys

from chunkd.commands import COMMANDS
from chunkd.output import EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    _occupy_closed_standard_descriptors()
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "watch":
        # Before anything heavy is imported: a signal during start-up is recorded.
        from chunkd.signals import Requests
        requests = Requests()
        requests.install()
        return importlib.import_module(COMMANDS["watch"][0]).main(argv[1:], requests)
    try:
        if argv and argv[0] in COMMANDS:
            module, _ = COMMANDS[argv[0]]
            return importlib.import_module(module).main(argv[1:])
        from chunkd.filter import main as filter_main
        return filter_main(argv)
    except KeyboardInterrupt:  # Ctrl-C while the command's modules were imported
        return EXIT_INTERRUPTED


def _occupy_closed_standard_descriptors() -> None:
    """Started with stdin, stdout or stderr closed (``2>&-``), the process would hand
    that number to the next file it opens, and write into it: put /dev/null there.
    Python already set a closed stream to None; stderr then discards what is said,
    stdin and stdout are reported as not open when used."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")


if __name__ == "__main__":
    sys.exit(main())
