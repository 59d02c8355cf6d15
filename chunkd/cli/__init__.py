"""The ``chunkd`` command: the filter, and the subcommands in one table.

    chunkd [OPTIONS] [FILE...]      the filter (chunkd.cli.filter)
    chunkd COMMAND [OPTIONS] ...    a subcommand (chunkd.cli.commands)

A subcommand module has ``main(argv) -> int`` (the exit status) and is imported only
when it runs. A file named like a subcommand is given to the filter as ``./watch``.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from types import ModuleType

from chunkd.cli.commands import COMMANDS
from chunkd.processes.stdio import EXIT_BUG, EXIT_INTERRUPTED, bug_line


#: The bytes the command's C heap grows beyond its need and keeps when memory is freed
#: (``chunkd.kernel.chosen.pad_heap``): the benchmarks' 43 MB book in English and Chinese costs
#: 160 page faults past the start-up's, not 6,100 (a 0.25 s run: 0.01 s less), for at
#: most 16 MiB more memory held.
HEAP_PAD = 16 << 20


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    _occupy_closed_standard_descriptors()
    command = argv is None  # this process is the command (else a caller's, in process)
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "watch":
        # Before anything heavy is imported: a signal during start-up is recorded.
        from chunkd.processes.signals import Requests
        requests = Requests()
        requests.install()
        _first_process(command)
        return _imported(COMMANDS["watch"][0], command).main(argv[1:], requests)
    if argv == ["--version"]:  # at once: the filter's modules take ten times as long to load
        from chunkd.about import version_report

        sys.stdout.write(version_report())
        return 0
    _first_process(command)
    try:
        if argv and argv[0] in COMMANDS:
            module, _ = COMMANDS[argv[0]]
            return _imported(module, command).main(argv[1:])
        return _imported("chunkd.cli.filter", command).main(argv)
    except KeyboardInterrupt:  # Ctrl-C while the command's modules were imported
        return EXIT_INTERRUPTED
    except Exception as error:
        if not command:  # a caller in process sees the exception itself
            raise
        print(f"chunkd: {bug_line(error)}", file=sys.stderr, flush=True)
        return EXIT_BUG


def _first_process(command: bool) -> None:
    """As a container's first process (PID 1), the command runs in a child process
    behind an init (``chunkd.processes.signals.stand_in_for_init``)."""
    if command and os.getpid() == 1:
        from chunkd.processes.signals import stand_in_for_init

        stand_in_for_init()


def _imported(module: str, command: bool) -> ModuleType:
    """Import a command's module; where this process is the ``command``, with the
    garbage collector paused, then frozen: start-up makes some twenty thousand objects
    (modules, classes, functions, option declarations) that live as long as the
    process, so collections that walk them, during start-up and after, are time lost
    (about 10 of the 100 ms the filter took to start on empty input). Then the C
    heap is padded (``HEAP_PAD``, ``chunkd.kernel.chosen.pad_heap``). A caller in process keeps
    its collector and allocator as they were."""
    if not command:
        return importlib.import_module(module)
    gc.disable()
    try:
        imported = importlib.import_module(module)
    finally:
        gc.freeze()
        gc.enable()
    from chunkd.kernel.chosen import pad_heap

    if pad_heap is not None:
        pad_heap(HEAP_PAD)
    return imported


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
