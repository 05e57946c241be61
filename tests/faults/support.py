"""What the fault tests share: the example bulk server as a process, and a proxy that cuts connections.

Contract: L{BulkServerProcess} runs C{examples/bulk_server.py} on an
ephemeral loopback port (optionally with a file-size limit, so that the
server's own disk writes fail with C{EFBIG}, a real OS error) and stops it
within seconds.  L{CuttingProxy} forwards loopback TCP connections and
aborts the Nth connection (both sides) once C{cuts[N]} bytes have passed in
one direction; later connections pass untouched.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol

from tests.processes import ENV, ROOT, readUntil, stop

# Run the example server with RLIMIT_FSIZE set and SIGXFSZ ignored: a write
# past the limit then fails with EFBIG instead of killing the process.
_LIMITED = (
    "import resource, runpy, signal, sys\n"
    "limit = int(sys.argv.pop(1))\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
    "sys.argv[0] = 'examples/bulk_server.py'\n"
    # As when the script is run directly: its own folder first on the path.
    "sys.path.insert(0, 'examples')\n"
    "runpy.run_path('examples/bulk_server.py', run_name='__main__')\n"
)


class BulkServerProcess:
    """
    C{examples/bulk_server.py} serving C{directory} on 127.0.0.1.

    @ivar port: the port it listens on.
    """

    def __init__(self, directory: Path, fileSizeLimit: int | None = None) -> None:
        # --grace 0: stopped while this process (blocked in stop()) holds connections, it must not wait for them.
        arguments = ["--listen", "tcp:0:interface=127.0.0.1", "--dir", str(directory), "--grace", "0"]
        if fileSizeLimit is None:
            command = [sys.executable, "examples/bulk_server.py", *arguments]
        else:
            command = [sys.executable, "-c", _LIMITED, str(fileSizeLimit), *arguments]
        self.process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            self.port = int(readUntil(self.process, rb"bulk server listening on .* port=(\d+)\)").group(1))
        except BaseException:
            stop(self.process)
            raise

    @property
    def description(self) -> str:
        return f"tcp:host=127.0.0.1:port={self.port}"

    def stop(self) -> None:
        stop(self.process)


class _Side(Protocol):
    """One end of a proxied connection; C{other} is the far end once it is connected."""

    def __init__(self, link: _Link, direction: str) -> None:
        self.link, self.direction = link, direction

    def dataReceived(self, data: bytes) -> None:
        self.link.forward(self.direction, data)

    def connectionLost(self, reason: Any = None) -> None:
        self.link.lost()


class _Link:
    """One accepted connection and its upstream twin."""

    def __init__(self, proxy: CuttingProxy, cut: int | None) -> None:
        self.proxy, self.cut, self.passed = proxy, cut, 0
        self.client = _Side(self, "up")
        self.server = _Side(self, "down")
        self.pending: list[bytes] = []

    def connected(self, _: Any) -> None:
        self.server.transport.write(b"".join(self.pending))
        self.pending = []

    def forward(self, direction: str, data: bytes) -> None:
        if direction == self.proxy.direction and self.cut is not None:
            room = self.cut - self.passed
            self.passed += len(data)
            if self.passed >= self.cut:
                self._send(direction, data[: max(room, 0)])
                self.proxy.cutsMade += 1
                self.client.transport.abortConnection()
                self.server.transport.abortConnection()
                return
        self._send(direction, data)

    def _send(self, direction: str, data: bytes) -> None:
        if direction == "down":
            self.client.transport.write(data)
        elif self.server.transport is None:
            self.pending.append(data)
        else:
            self.server.transport.write(data)

    def lost(self) -> None:
        for side in (self.client, self.server):
            if side.transport is not None:
                side.transport.loseConnection()


class CuttingProxy:
    """
    A loopback proxy to C{targetPort} that cuts connection N after
    C{cuts[N]} bytes in C{direction} (C{"up"}: client to server).

    @ivar cutsMade: how many connections it has cut so far.
    """

    def __init__(self, reactor: Any, targetPort: int, cuts: list[int], direction: str = "up") -> None:
        self.reactor, self.targetPort = reactor, targetPort
        self.cuts, self.direction = list(cuts), direction
        self.cutsMade = 0
        self.accepted = 0
        self.port: Any = None

    @property
    def description(self) -> str:
        return f"tcp:host=127.0.0.1:port={self.port.getHost().port}"

    async def start(self) -> CuttingProxy:
        proxy = self

        class _Factory(Factory):
            def buildProtocol(self, addr: Any) -> Protocol:
                cut = proxy.cuts[proxy.accepted] if proxy.accepted < len(proxy.cuts) else None
                proxy.accepted += 1
                link = _Link(proxy, cut)
                endpoint = TCP4ClientEndpoint(proxy.reactor, "127.0.0.1", proxy.targetPort)
                connecting = connectProtocol(endpoint, link.server)
                connecting.addCallbacks(link.connected, lambda _: link.client.transport.loseConnection())
                return link.client

        self.port = await TCP4ServerEndpoint(self.reactor, 0, interface="127.0.0.1").listen(_Factory())
        return self

    async def stop(self) -> None:
        await self.port.stopListening()
