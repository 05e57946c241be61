"""Servers of the failover tests, as processes (tests/protocols/failoverserver.py), for all three clients' tests."""

from __future__ import annotations

import os
import re
import select
import signal
import time
from typing import Any

from tests import zygote
from tests.processes import readUntil, startPython, stop

PRELOAD = ("tests.protocols.failoverserver",)
"""What the servers' zygote imports: the server's module, whose import leaves the reactor to each child."""

HANG = 60.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""


class Server:
    """One failover server process: its name, its port, and what it printed so far."""

    def __init__(self, name: str) -> None:
        self.name = name
        arguments = ("-m", "tests.protocols.failoverserver", name)
        # Forked from a warm zygote (milliseconds) where it can be, else a new interpreter (~0.6 s of CPU).
        self.process: Any
        if zygote.available():
            self.process = zygote.Zygote.shared(PRELOAD).start(*arguments)
        else:
            self.process = startPython(*arguments)
        self.port = int(readUntil(self.process, rb"port=(\d+)").group(1))
        self.address = f"127.0.0.1:{self.port}"
        self.description = f"tcp:127.0.0.1:{self.port}"
        self.output = b""

    def waitFor(self, line: str) -> None:
        """Read the server's output until C{line} is printed (at most L{HANG} seconds)."""
        pattern = re.escape(line.encode()) + rb"\n"
        if re.search(pattern, self.output):
            return
        self.output += readUntil(self.process, pattern, HANG).string

    def received(self) -> bytes:
        """Everything the server printed by now (without waiting)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self.output += chunk
        return self.output

    def kill(self) -> float:
        """Kill the process (SIGKILL) and reap it: its sockets are closed.  The time it was gone (monotonic)."""
        self.process.kill()
        self.process.wait(HANG)
        return time.monotonic()

    def drain(self) -> None:
        """SIGTERM: the server sends GOAWAY to every client; return once it says so."""
        self.process.send_signal(signal.SIGTERM)
        self.waitFor("draining")

    def pause(self) -> None:
        """SIGSTOP: the process stops answering; its connections stay open and silent, as a host cut off."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT: the paused process runs again."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def release(self) -> None:
        """Answer every C{held} call so far (SIGUSR1)."""
        self.process.send_signal(signal.SIGUSR1)

    def stop(self) -> None:
        stop(self.process)


def startServers(count: int = 3) -> list[Server]:
    """C{count} servers named C{s0}, C{s1}, ..., each on a port of its own."""
    return [Server(f"s{n}") for n in range(count)]


def stopAll(servers: list[Server]) -> None:
    for server in servers:
        server.stop()


def wasRecorded(server: Server, token: str) -> bool:
    """Whether C{server} printed C{record TOKEN} (it received a call with C{token})."""
    return bool(re.search(rb"record " + re.escape(token.encode()) + rb"\n", server.received()))
