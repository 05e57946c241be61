"""What the bulk tests of the clients without Twisted share: the example bulk server as a process, and a cutting proxy.

L{BulkServerCase} starts C{examples/bulk_server.py} on a directory of its
own (once per class under pytest, per test under trial, as
L{tests.processes.ClassProcessesCase} does).  L{CuttingProxy} forwards one
connection to it through two threads and cuts both sides once C{limit}
bytes went one way: a connection lost mid-transfer, as a network would
lose it, at a byte count the test chooses.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

from framing.bulk._digests import availableDigests, newHash
from tests.processes import ClassProcessesCase, readUntil, startExample, stop

HANG = 30.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""
MiB = 1024 * 1024
CHUNK = 1 * MiB
"""The senders' frame size: a resume resends less than two of these."""
SIZE = 8 * MiB + 12345
"""The files moved: several chunks and windows, not a whole number of chunks."""


def digestOf(data: bytes, algorithm: str) -> bytes:
    """C{data}'s digest under C{algorithm}, computed here."""
    hasher = newHash(algorithm)
    hasher.update(data)
    return hasher.digest()  # type: ignore[no-any-return]


class CuttingProxy:
    """
    Accepts one connection on 127.0.0.1 and forwards it to C{target}; once
    C{limit} bytes went in direction C{cut} (C{"up"}: client to server,
    C{"down"}: server to client) it closes both sockets.

    @ivar forwarded: bytes forwarded each way, C{{"up": n, "down": n}}.
    """

    def __init__(self, target: tuple[str, int], cut: str, limit: int) -> None:
        self.target, self.cut, self.limit = target, cut, limit
        self.forwarded = {"up": 0, "down": 0}
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._sockets: list[socket.socket] = []
        self._cutDone = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        server = socket.create_connection(self.target)
        self._sockets = [client, server]
        threading.Thread(target=self._pump, args=(client, server, "up"), daemon=True).start()
        threading.Thread(target=self._pump, args=(server, client, "down"), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, direction: str) -> None:
        try:
            while not self._cutDone.is_set():
                data = source.recv(64 * 1024)
                if not data:
                    break
                if direction == self.cut:
                    data = data[: max(self.limit - self.forwarded[direction], 0)]
                sink.sendall(data)
                self.forwarded[direction] += len(data)
                if direction == self.cut and self.forwarded[direction] >= self.limit:
                    break
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        """Cut: close both sides (the peers see the connection lost) and stop listening."""
        self._cutDone.set()
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self._listener.close()


class BulkServerCase(ClassProcessesCase):
    """
    Cases against C{examples/bulk_server.py} serving a directory of its own;
    each case uses file names of its own.

    @ivar served: the served directory.
    @ivar address: C{"127.0.0.1:PORT"}.
    """

    server: Any  # a zygote child or a Popen (tests.processes.startExample)
    served: Path
    address: str
    port: int

    @classmethod
    def startProcesses(cls) -> None:
        cls.served = Path(tempfile.mkdtemp(prefix="chunkwire-bulkclients-"))
        cls.server = startExample("bulk_server.py", "--listen", "tcp:0:interface=127.0.0.1", "--dir", str(cls.served))
        cls.port = int(readUntil(cls.server, rb"bulk server listening on .* port=(\d+)\)").group(1))
        cls.address = f"127.0.0.1:{cls.port}"

    @classmethod
    def stopProcesses(cls) -> None:
        try:
            stop(cls.server)
        finally:
            shutil.rmtree(cls.served, ignore_errors=True)

    def localFile(self, name: str, size: int = SIZE) -> tuple[Path, bytes]:
        """A file of C{size} random bytes in a directory of this test's: its path and its bytes."""
        directory = Path(self.mktemp())
        directory.mkdir(parents=True)
        data = os.urandom(size)
        path = directory / name
        path.write_bytes(data)
        return path, data

    def cuttingProxy(self, cut: str, limit: int) -> CuttingProxy:
        """A L{CuttingProxy} to the server, closed at the test's end."""
        proxy = CuttingProxy(("127.0.0.1", self.port), cut, limit)
        self.addCleanup(proxy.close)
        return proxy

    def expectedAlgorithm(self) -> str:
        """The digest the service and this side settle: the first this side computes (BLAKE3 if installed)."""
        return availableDigests()[0]
