"""Standard output as chunkd's commands write it, and their exit statuses.

A write that fails is one line on stderr naming stdout (a full disk, a closed
descriptor) and exit status 1; a reader that went away (``chunkd ... | head -1``) ends
the command quietly with status 0, as a Unix filter should; Ctrl-C is status 130.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import BinaryIO

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class OutputError(Exception):
    """The output cannot be written (a full disk, a closed descriptor)."""


class Output:
    """stdout as the writers see it: a write that fails is an ``OutputError`` naming
    stdout, except a reader that went away (``BrokenPipeError``), which ends quietly."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def write(self, data: bytes) -> None:
        try:
            self.stream.write(data)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(f"stdout: {error.strerror or error}") from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(f"stdout: {error.strerror or error}") from None


def run_writing(program: str, body: Callable[[Output], int]) -> int:
    """Run a command's ``body`` on stdout; returns its exit status, or the status of
    the output failing (see the module's docstring)."""
    if sys.stdout is None:  # started with stdout closed (>&-)
        print(f"{program}: stdout: not open (Bad file descriptor)", file=sys.stderr)
        return EXIT_FAILED
    try:
        return body(Output(sys.stdout.buffer))
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except OutputError as error:
        print(f"{program}: {error}", file=sys.stderr)
        _silence_stdout()
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _silence_stdout() -> None:
    """Nothing more goes to stdout, not even Python's flush at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
