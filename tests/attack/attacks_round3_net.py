"""Helpers of the round-three connection-level attack tests (L{tests.attack.test_round3_net}).

Contract: L{Twist} runs one C{twist} plugin as a process listening on
port 0 of the loopback interface (the port it got is read from its log
once it has started: nothing picks a port for it to bind later), its log
in a file (a pipe nobody reads would stall it), with an optional
descriptor limit, and reads its descriptors and RSS from C{/proc};
L{waitFor} waits for a condition under a deadline only a hang misses;
L{honestCalls} makes new honest clients (each its own connection, from a
chosen 127.0.0.N) and counts the correct answers; L{ProxyRelay} is a
stand-in HAProxy (C{send-proxy-v2}) bound to a chosen source address;
L{proxyV2} writes the PROXY v2 header a spoofing client sends by hand, and
L{HeaderFirstEndpoint} makes any client send it before its own bytes.
"""

from __future__ import annotations

import ipaddress
import os
import re
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory

from tests.processes import ENV, ROOT

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


DEADLINE = 60.0
"""Seconds a wait for something the server does may take: long enough that only a hang misses it on a loaded machine."""


async def waitFor(
    reactor: Any, condition: Callable[[], bool], state: Callable[[], Any], timeout: float = DEADLINE
) -> None:
    """Wait, the reactor running, until C{condition()} holds; after C{timeout} s, fail showing C{state()}."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {state()}")
        await deferLater(reactor, 0.05)


def proxyV2(source: tuple[str, int], destination: tuple[str, int]) -> bytes:
    """The PROXY v2 header (PROXY command, TCP over IPv4) claiming C{source} to C{destination}."""
    addresses = (
        ipaddress.IPv4Address(source[0]).packed
        + ipaddress.IPv4Address(destination[0]).packed
        + struct.pack("!HH", source[1], destination[1])
    )
    return V2_SIGNATURE + b"\x21\x11" + struct.pack("!H", len(addresses)) + addresses


class Twist:
    """
    One C{twist} plugin process on port 0 of 127.0.0.1; stopped by L{stop}.

    L{listening} waits until it runs and reads the ports it listens on from
    its log (Twisted's C{NAME starting on PORT} lines): C{--listen}'s in
    L{port}, C{--metrics}'s (if given) in L{metricsPort}.
    """

    port: int
    """The port C{--listen} got (known once L{listening} has returned)."""
    metricsPort: int
    """The port C{--metrics} got (known once L{listening} has returned, if C{--metrics} was given)."""

    def __init__(self, plugin: str, *options: str, nofile: int | None = None, listen: str | None = None) -> None:
        self.directory = tempfile.TemporaryDirectory()
        self.logPath = Path(self.directory.name) / "server.log"
        self._log = open(self.logPath, "wb")  # noqa: SIM115 (closed in stop)
        if listen is None:
            listen = "tcp:0:interface=127.0.0.1:backlog=1024"
        command = [sys.executable, "-m", "twisted", "--log-format", "text", plugin, "--listen", listen, *options]

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.process = subprocess.Popen(
            command, cwd=ROOT, env=ENV, stdout=self._log, stderr=subprocess.STDOUT, preexec_fn=limit
        )
        self.started = time.monotonic()

    def log(self) -> str:
        return self.logPath.read_text(errors="replace")

    async def listening(self, reactor: Any) -> None:
        """Wait until the reactor runs, then set L{port} (and L{metricsPort}) from the log's C{starting on} lines."""
        await self.until(reactor, "Starting reactor")
        for name, port in re.findall(r"\] (.+?) starting on (\d+)", self.log()):
            if name == "Site":
                self.metricsPort = int(port)
            elif not hasattr(self, "port"):
                self.port = int(port)
        assert hasattr(self, "port"), f"no listening port in the log: {self.log()[-3000:]}"

    async def until(self, reactor: Any, pattern: str, timeout: float = DEADLINE) -> re.Match[str]:
        """Wait until the log matches C{pattern}; fail if the process ends or it takes too long."""
        deadline = time.monotonic() + timeout
        while True:
            match = re.search(pattern, self.log())
            if match:
                return match
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not in the log: {self.log()[-3000:]}")
            await deferLater(reactor, 0.05)

    def resources(self) -> dict[str, int]:
        """Open descriptors and RSS (bytes) of the server process."""
        proc = Path(f"/proc/{self.process.pid}")
        rss = re.search(r"VmRSS:\s+(\d+)", (proc / "status").read_text())
        assert rss is not None
        return {"fds": len(os.listdir(proc / "fd")), "rss": int(rss.group(1)) * 1024}

    async def exited(self, reactor: Any, timeout: float) -> float | None:
        """Seconds until the process exits (polled), or C{None} if it still runs after C{timeout}."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.process.poll() is not None:
                return time.monotonic() - start
            await deferLater(reactor, 0.05)
        return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._log.close()
        self.directory.cleanup()


async def honestCalls(reactor: Any, port: int, count: int, bind: str = "127.0.0.1", timeout: float = 30.0) -> int:
    """
    C{count} new honest clients from C{bind}, one after another, each on its
    own connection: a put and a get; how many got the right answer (a client
    refused or dropped fails at once; C{timeout}, per step, only bounds a hang).
    """
    from protocols import rpc

    good = 0
    for number in range(count):
        try:
            connecting = rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}:bindAddress={bind}:timeout={timeout:g}")
            root = await connecting.addTimeout(timeout, reactor)
            key, value = f"honest-{bind}-{number}", f"value-{number}"
            await root.callRemote("put", key, value).addTimeout(timeout, reactor)
            if await root.callRemote("get", key).addTimeout(timeout, reactor) == value:
                good += 1
            await root.broker.disconnect()
        except Exception:
            continue
    return good


class _Pipe(Protocol):
    """One side of a relayed connection: what arrives goes to the other side."""

    def __init__(self) -> None:
        self.peer: _Pipe | None = None
        self.early: list[bytes] = []

    def dataReceived(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)
        else:
            self.early.append(data)

    def connectionLost(self, reason: Any = None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.loseConnection()


class _Front(_Pipe):
    """A client's connection to the relay: connects to the backend from the relay's source, PROXY v2 first."""

    def __init__(self, relay: ProxyRelay) -> None:
        super().__init__()
        self.relay = relay

    def connectionMade(self) -> None:
        assert self.transport is not None
        self.transport.pauseProducing()
        client = self.transport.getPeer()
        relay = self.relay
        endpoint = TCP4ClientEndpoint(relay.reactor, "127.0.0.1", relay.backend, bindAddress=(relay.source, 0))
        back = _Pipe()
        back.peer = self
        header = proxyV2((client.host, client.port), ("127.0.0.1", relay.backend))

        def connected(protocol: _Pipe) -> None:
            assert protocol.transport is not None and self.transport is not None
            protocol.transport.write(header + b"".join(self.early))
            self.early = []
            self.peer = protocol
            self.transport.resumeProducing()

        def failed(_: Any) -> None:
            if self.transport is not None:
                self.transport.loseConnection()

        endpoint.connect(Factory.forProtocol(lambda: back)).addCallbacks(connected, failed)


class ProxyRelay:
    """A stand-in for HAProxy in mode tcp with C{send-proxy-v2}, connecting to the backend from C{source}."""

    def __init__(self, reactor: Any, backend: int, source: str) -> None:
        self.reactor = reactor
        self.backend = backend
        self.source = source
        self.port: Any = None

    async def start(self) -> int:
        factory = Factory.forProtocol(lambda: _Front(self))
        self.port = await TCP4ServerEndpoint(self.reactor, 0, interface="127.0.0.1").listen(factory)
        number: int = self.port.getHost().port
        return number

    def stop(self) -> Deferred[Any]:
        stopped: Deferred[Any] = self.port.stopListening()
        return stopped


def rawConnections(count: int, source: str, port: int, send: bytes = b"") -> list[socket.socket]:
    """C{count} blocking sockets from C{source} to C{port} on 127.0.0.1, each having sent C{send}; failures skipped."""
    sockets = []
    for _ in range(count):
        connection = socket.socket()
        try:
            connection.bind((source, 0))
            connection.connect(("127.0.0.1", port))
            if send:
                connection.sendall(send)
        except OSError:
            connection.close()
            continue
        sockets.append(connection)
    return sockets


def closeAll(sockets: list[socket.socket]) -> None:
    for connection in sockets:
        connection.close()


def closedByServer(sockets: list[socket.socket]) -> int:
    """How many of C{sockets} the server has closed or reset (what it sent is read and thrown away)."""
    closed = 0
    for connection in sockets:
        connection.setblocking(False)
        try:
            while True:
                if not connection.recv(65536):
                    closed += 1
                    break
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


class _HeaderFirst(ProtocolWrapper):
    """Writes the factory's header before anything the wrapped protocol writes."""

    def makeConnection(self, transport: Any) -> None:
        transport.write(self.factory.header)  # type: ignore[attr-defined]
        super().makeConnection(transport)


class _HeaderFirstFactory(WrappingFactory):
    protocol = _HeaderFirst

    def __init__(self, factory: Any, header: bytes) -> None:
        super().__init__(factory)
        self.header = header


class HeaderFirstEndpoint:
    """A client endpoint over C{inner} whose connections send C{header} first (a spoofed PROXY header)."""

    def __init__(self, inner: Any, header: bytes) -> None:
        self.inner = inner
        self.header = header

    def connect(self, factory: Any) -> Deferred[Any]:
        connected: Deferred[Any] = self.inner.connect(_HeaderFirstFactory(factory, self.header))
        return connected
