"""A real HAProxy (mode tcp, send-proxy-v2, a chunkwire PING health check) in front of two chunkwire backends.

The configuration is the one C{docs/howto/scaling.rst} shows (ports
replaced).  The backends are C{tests/protocols/serving/backend.py}
processes on Twisted's C{haproxy:} endpoint.  Skipped, with the reason,
where HAProxy is not installed and cannot be (see L{haproxy.haproxyPath}).
C{CHUNKWIRE_ROLLING_CALLS} sets the rolling restart's least number of calls
(10,000 by default: a few seconds).
"""

from __future__ import annotations

import csv
import io
import os
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from protocols import rpc
from tests.processes import ENV, ROOT, figure, readUntil, reservePort, stop

from ..helpers import pytestTest, trialTest
from .haproxy import haproxyPath, scalingConfig

ROLLING_CALLS = int(os.environ.get("CHUNKWIRE_ROLLING_CALLS", "10000"))


class Cluster:
    """
    HAProxy, two backends and a decoy that never answers a PING; stopped by L{stop}.

    HAProxy's configuration names the backends' ports before they start, and
    a backend restarts on its port: the three ports are reserved
    (L{reservePort}) from the start to the end, so nothing else takes one
    while no server listens on it.
    """

    def __init__(self, directory: str, decoy: int) -> None:
        self.directory = Path(directory)
        self.reservations = [reservePort() for _ in range(3)]
        self.front, self.first, self.second = (reservation.getsockname()[1] for reservation in self.reservations)
        self.ports = {"kv1": self.first, "kv2": self.second}
        self.backends: dict[str, subprocess.Popen[bytes]] = {}
        self.socket = self.directory / "haproxy.sock"
        config = scalingConfig(self.front, self.first, self.second)
        config = config.replace("global\n", f"global\n    stats socket {self.socket} mode 600 level admin\n", 1)
        config += f"    server decoy 127.0.0.1:{decoy}\n"
        (self.directory / "haproxy.cfg").write_text(config)
        self.log = open(self.directory / "haproxy.log", "wb")  # noqa: SIM115
        command = [haproxyPath(), "-f", str(self.directory / "haproxy.cfg"), "-db"]
        self.haproxy = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            for name in self.ports:
                self.startBackend(name)
        except BaseException:
            self.stop()
            raise

    @property
    def address(self) -> str:
        return f"tcp:host=127.0.0.1:port={self.front}"

    def startBackend(self, name: str) -> int:
        """Start backend C{name} on its port; its pid once it serves."""
        listen = f"haproxy:tcp:{self.ports[name]}:interface=127.0.0.1"
        record = self.directory / f"{name}.numbers"
        command = [sys.executable, "-m", "tests.protocols.serving.backend", "--listen", listen, "--record", str(record)]
        process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.backends[name] = process
        readUntil(process, rb"serving", timeout=60)
        return process.pid

    def status(self) -> dict[str, str]:
        """Each server's status as HAProxy's stats socket reports it (UP, DOWN, ...)."""
        with socket.socket(socket.AF_UNIX) as stats:
            stats.connect(str(self.socket))
            stats.sendall(b"show stat\n")
            data = b"".join(iter(lambda: stats.recv(65536), b""))
        rows = csv.DictReader(io.StringIO(data.decode(errors="replace").lstrip("# ")))
        servers = (row for row in rows if row["pxname"] == "kv" and row["svname"] != "BACKEND")
        return {row["svname"]: row["status"].split()[0] for row in servers}

    def numbersRun(self) -> Counter[int]:
        """How many times each number was run, over every backend's record."""
        counts: Counter[int] = Counter()
        for path in self.directory.glob("*.numbers"):
            counts.update(int(line) for line in path.read_text().split())
        return counts

    def stop(self) -> None:
        for process in [*self.backends.values(), self.haproxy]:
            stop(process)
        self.log.close()
        for reservation in self.reservations:
            reservation.close()


async def until(reactor: Any, condition: Any, what: str, timeout: float = 60.0) -> None:
    """Wait until C{condition()} is true, looking every 50 ms (only a hang misses C{timeout})."""
    for _ in range(int(timeout / 0.05)):
        try:
            if condition():
                return
        except OSError:
            pass
        await deferLater(reactor, 0.05)
    raise AssertionError(f"not in {timeout} s: {what}")


class Silent(Protocol):
    """Accepts and never answers: a server that is up but not a chunkwire server."""


async def started(reactor: Any, directory: str) -> tuple[Cluster, Any]:
    decoy = await _listenDecoy(reactor)
    try:
        cluster = Cluster(directory, decoy.getHost().port)
    except BaseException:
        await decoy.stopListening()
        raise
    try:
        await until(reactor, lambda: cluster.status() == {"kv1": "UP", "kv2": "UP", "decoy": "DOWN"}, "health checks")
    except BaseException:
        # Nothing may outlive a failed test: the processes are stopped here.
        cluster.stop()
        await decoy.stopListening()
        raise
    return cluster, decoy


def _listenDecoy(reactor: Any) -> Deferred[Any]:
    from twisted.internet.endpoints import serverFromString

    listening: Deferred[Any] = serverFromString(reactor, "tcp:0:interface=127.0.0.1").listen(
        Factory.forProtocol(Silent)
    )
    return listening


async def peerAndHealth(reactor: Any) -> None:
    """Through HAProxy: PING health checks mark the backends up and a silent server down; getPeer shows the client."""
    haproxyPath()
    with tempfile.TemporaryDirectory() as directory:
        cluster, decoy = await started(reactor, directory)
        try:
            root = await rpc.connect(reactor, cluster.address)
            mine = root.broker.transport.getHost()
            assert await root.callRemote("peer") == f"{mine.host}:{mine.port}"
            await root.broker.disconnect()
            pids = set()
            for _ in range(6):
                other = await rpc.connect(reactor, cluster.address)
                pids.add(await other.callRemote("pid"))
                await other.broker.disconnect()
            assert pids == {process.pid for process in cluster.backends.values()}, pids
        finally:
            cluster.stop()
            await decoy.stopListening()


class Load:
    """Clients calling C{number(n)} through HAProxy, each n once, some always in flight, until told to stop."""

    def __init__(self, clients: list[Any], inflight: int) -> None:
        self.clients = clients
        self.inflight = inflight
        self.next = 0
        self.answers: Counter[int] = Counter()
        self.failures: list[Any] = []
        self.stopping = False
        self.running = 0
        self.done: Deferred[None] = Deferred()

    def start(self) -> None:
        for client in self.clients:
            for _ in range(self.inflight):
                self._call(client)

    def _call(self, client: Any) -> None:
        number = self.next
        self.next += 1
        self.running += 1
        client.callRemote("number", number).addCallbacks(
            self._answered, self._failed, callbackArgs=(number, client), errbackArgs=(number, client)
        )

    def _answered(self, value: int, number: int, client: Any) -> None:
        self.answers[number] += 1
        if value != number:
            self.failures.append((number, f"answered {value}"))
        self._next(client)

    def _failed(self, failure: Any, number: int, client: Any) -> None:
        self.failures.append((number, failure.value))
        self._next(client)

    def _next(self, client: Any) -> None:
        self.running -= 1
        if not self.stopping:
            self._call(client)
        elif self.running == 0 and not self.done.called:
            self.done.callback(None)

    async def stop(self) -> None:
        self.stopping = True
        if self.running:
            await self.done


async def rollingRestart(reactor: Any) -> None:
    """Clients call through HAProxy while each backend drains and restarts: no call fails or is lost, each runs once."""
    haproxyPath()
    with tempfile.TemporaryDirectory() as directory:
        cluster, decoy = await started(reactor, directory)
        clients = [rpc.reconnecting(reactor, cluster.address, retryPolicy=lambda attempt: 0.05) for _ in range(4)]
        try:
            await gatherResults([client.whenConnected() for client in clients])
            load = Load(clients, 16)
            load.start()
            moved = 0
            for name in ("kv1", "kv2"):
                target = moved + ROLLING_CALLS // 4
                await until(reactor, lambda t=target: load.next >= t, "calls before the restart", 60)
                process = cluster.backends[name]
                process.terminate()  # SIGTERM: the backend drains
                await until(reactor, lambda p=process: p.poll() is not None, f"{name} drained and exited")
                assert process.returncode in (0, -15), process.returncode
                process.stdout.close()  # type: ignore[union-attr]
                cluster.startBackend(name)
                await until(reactor, lambda n=name: cluster.status()[n] == "UP", f"{name} up again")
                moved = load.next
            await until(reactor, lambda: load.next >= ROLLING_CALLS, "all the calls", 120)
            await load.stop()
        finally:
            for client in clients:
                await client.stopService()
            cluster.stop()
            await decoy.stopListening()
        made = load.next
        lost = [n for n in range(made) if load.answers[n] == 0]
        twice = [n for n in range(made) if load.answers[n] > 1]
        runs = cluster.numbersRun()
        ranTwice = [n for n, count in runs.items() if count > 1]
        notRun = [n for n in range(made) if runs[n] == 0]
        moves = sum(client.goAways for client in clients)
        figure(
            f"rolling restart through HAProxy: {made} calls, {len(load.failures)} failed, {len(lost)} lost, "
            f"{len(twice)} answered twice, {len(ranTwice)} run twice, {len(notRun)} never run; "
            f"{moves} GOAWAYs followed"
        )
        # Each restart moves the clients of the backend drained: at least one each time.
        assert moves >= 2, moves
        assert made >= ROLLING_CALLS
        assert load.failures == [], load.failures[:5]
        assert lost == [] and twice == [], (lost[:5], twice[:5])
        assert ranTwice == [] and notRun == [], (ranTwice[:5], notRun[:5])


class HAProxyTests(TestCase):
    """HAProxy in front of chunkwire, under trial."""

    test_peer_and_health = trialTest(peerAndHealth, 60)
    test_rolling_restart = trialTest(rollingRestart, 180)


test_peer_and_health = pytestTest(peerAndHealth, 60)
test_rolling_restart = pytestTest(rollingRestart, 180)
