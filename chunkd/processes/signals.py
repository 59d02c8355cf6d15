"""What signals asked the daemon for, recorded from the first moment of start-up; the
worker processes' tie to their parent; and the signals that end a command, which PID 1
must handle to be ended by them at all.

Kept apart and light (no imports beyond the standard library's os, signal and
threading) so that ``chunkd watch`` installs its handlers before it imports the rest: a
SIGHUP (``systemctl reload``) or SIGTERM during a slow start must not kill it.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    import queue


class Requests:
    """What signals asked for; installed before anything else at start-up, so that an
    early SIGHUP (``systemctl reload``) cannot kill the daemon."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.rescan = threading.Event()
        self.wake: queue.SimpleQueue | None = None  # the scheduler's, once it runs

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self.stop_soon)
        signal.signal(signal.SIGINT, self.stop_soon)
        signal.signal(signal.SIGHUP, self.rescan_soon)

    def stop_soon(self, *_) -> None:
        self.stop.set()
        self._wake()

    def rescan_soon(self, *_) -> None:
        self.rescan.set()
        self._wake()

    def _wake(self) -> None:
        if self.wake is not None:  # SimpleQueue.put may be called from a signal handler
            self.wake.put(("wake", ""))


def die_with_parent(parent: int) -> None:
    """Called in a worker process of ``parent`` (its process id): it must not outlive
    its parent, the filter or the daemon, when that is killed with SIGKILL (the OOM
    killer): the kernel kills it then (Linux's PR_SET_PDEATHSIG); elsewhere nothing is
    done. The parent is told by its id, not by whether the worker's is 1: a container's
    first process (PID 1) may be the parent itself, and an orphan may go to a
    subreaper instead."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call
        os._exit(1)


def end_as_killed(number: int) -> None:
    """End this process as the signal ``number`` does where nothing handles it: killed
    by it; as PID 1 (a program that runs chunkd in process as a container's first
    process), where the kernel ignores a signal that is not handled, with the status a
    shell gives a process it kills."""
    if os.getpid() == 1:
        os._exit(128 + number)
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)


#: What a container's first process is sent and passes on to the command: ``docker
#: stop`` (SIGTERM), ``docker kill -s``, a terminal's signals.
PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2, signal.SIGWINCH)


def stand_in_for_init() -> None:
    """Called in PID 1 (a container's first process, as ``docker run`` without
    ``--init`` starts it): the command goes on in a child process, where this call
    returns, and this process does an init's work, as tini does, until the command
    ends, then ends with its status. It passes on the signals it is sent (the kernel
    ignores, in PID 1, one that is not handled), and it reaps every process the kernel
    hands it: a worker's child orphaned when the worker was killed stays a zombie, for
    good, in a PID 1 that does not."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, (*PASSED_ON, signal.SIGTTOU))
    try:
        command = os.fork()
    except OSError:  # no memory or process left: the command runs here, as PID 1
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return
    if command == 0:
        _take_the_terminal()
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return

    def pass_on(number: int, _frame: FrameType | None) -> None:
        try:
            os.kill(command, number)
        except ProcessLookupError:  # it ended: reaped below
            pass

    for number in PASSED_ON:
        signal.signal(number, pass_on)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == command:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code)


def _take_the_terminal() -> None:
    """In the command's process: a process group of its own, the terminal's foreground
    one if this process's was (``docker run -it``), so that Ctrl-C reaches the command
    once, from the terminal, not also passed on by PID 1."""
    terminal_had_ours = False
    try:
        terminal_had_ours = os.tcgetpgrp(0) == os.getpgrp()
    except OSError:  # stdin is not a terminal
        pass
    os.setpgid(0, 0)
    if terminal_had_ours:
        try:
            os.tcsetpgrp(0, os.getpgrp())  # SIGTTOU, which it sends, is blocked here
        except OSError:
            pass


def remove_before_ending(remove: Callable[[], None]) -> Callable[[], None]:
    """Until the function returned is called (which restores the handlers): SIGTERM and
    SIGHUP call ``remove`` first (temporary files, which no exit handler removes when a
    signal ends the process), then do what they did before, unless they were ignored.
    Signals are handled in the main thread only: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous: dict[int, Any] = {number: signal.getsignal(number)
                                for number in (signal.SIGTERM, signal.SIGHUP)}
    owner = os.getpid()  # not a worker forked with the handlers (killed by the pool)

    def removing(number: int, frame: FrameType | None) -> None:
        before = previous[number]
        if before == signal.SIG_IGN:
            return
        if os.getpid() == owner:
            remove()
        if callable(before):
            before(number, frame)
        else:
            end_as_killed(number)

    for number in previous:
        signal.signal(number, removing)

    def restore() -> None:
        for number, before in previous.items():
            signal.signal(number, before if before is not None else signal.SIG_DFL)
    return restore
