"""systemd's service notification protocol (sd_notify), without a dependency.

A datagram of ``KEY=value`` lines to the socket named by ``$NOTIFY_SOCKET``; a name
starting with ``@`` is in the abstract namespace. Without ``$NOTIFY_SOCKET`` (not run
by systemd), every call does nothing. The socket never blocks: a receiver that does
not read (systemd hung, as journald once did, systemd issue 1505) must not stop the
daemon, so a datagram that does not fit is dropped.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


class Notifier:
    """Sends READY=1, STATUS=..., WATCHDOG=1, STOPPING=1 to systemd."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        if environ is None:
            environ = os.environ
        name = environ.get("NOTIFY_SOCKET", "")
        self.address = "\0" + name[1:] if name.startswith("@") else name
        usec = environ.get("WATCHDOG_USEC", "")
        pid = environ.get("WATCHDOG_PID", "")
        watched = usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid()))
        #: Seconds between WATCHDOG=1 pings (half of systemd's timeout), or None.
        self.watchdog_interval = int(usec) / 2e6 if watched else None
        self.socket = None
        if self.address:
            self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self.socket.setblocking(False)

    def send(self, *fields: str) -> None:
        """Send the fields in one datagram; errors (a full socket included) are
        ignored, as sd_notify does."""
        if self.socket is None:
            return
        try:
            self.socket.sendto("\n".join(fields).encode("utf-8", "backslashreplace"),
                               self.address)
        except OSError:
            pass

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> None:
        self.send(f"STATUS={status}")

    def watchdog(self) -> None:
        self.send("WATCHDOG=1")

    def stopping(self) -> None:
        self.send("STOPPING=1", "STATUS=stopping")
