"""Faults: connections cut at every point of a call, in both directions, and a server restarted under a
reconnecting client; every call answers or errbacks exactly once."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import DeferredList
from twisted.internet.endpoints import serverFromString
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from framing.rpc._errors import DeadReferenceError
from protocols import rpc
from tests.processes import reservePort

from .helpers import pytestTest, trialTest
from .rpc.services import Service

CALLS = 3
PAYLOAD = b"p" * 40


class _CuttingProxy(Protocol):
    """Forwards bytes to the server until C{cut} bytes have passed in C{direction}, then aborts both sides."""

    def __init__(self, factory: Any) -> None:
        self.f = factory
        self.peer: Any = None
        self.passed = 0

    def connectionMade(self) -> None:
        from twisted.internet import reactor
        from twisted.internet.protocol import ClientCreator

        self.transport.pauseProducing()
        ClientCreator(reactor, _Upstream, self).connectTCP("127.0.0.1", self.f.serverPort).addCallback(self._up)

    def _up(self, upstream: Any) -> None:
        self.peer = upstream
        self.transport.resumeProducing()

    def dataReceived(self, data: bytes) -> None:
        self.forward(data, "up", self.peer.transport)

    def forward(self, data: bytes, direction: str, target: Any) -> None:
        if direction != self.f.direction:
            target.write(data)
            return
        room = self.f.cut - self.passed
        self.passed += len(data)
        target.write(data[: max(0, room)])
        if self.passed >= self.f.cut:
            self.transport.abortConnection()
            self.peer.transport.abortConnection()

    def connectionLost(self, reason: Any) -> None:
        if self.peer is not None:
            self.peer.transport.loseConnection()


class _Upstream(Protocol):
    def __init__(self, down: _CuttingProxy) -> None:
        self.down = down

    def dataReceived(self, data: bytes) -> None:
        self.down.forward(data, "down", self.down.transport)

    def connectionLost(self, reason: Any) -> None:
        self.down.transport.loseConnection()


class _ProxyFactory(Factory):
    def __init__(self, serverPort: int, direction: str, cut: int) -> None:
        self.serverPort, self.direction, self.cut = serverPort, direction, cut

    def buildProtocol(self, addr: Any) -> _CuttingProxy:
        return _CuttingProxy(self)


async def _callThroughCut(reactor: Any, serverPort: int, direction: str, cut: int) -> list[str]:
    """Make CALLS calls through a proxy that cuts at C{cut}; return each call's outcome ('answer' or an error)."""
    proxy = await serverFromString(reactor, "tcp:0:interface=127.0.0.1").listen(
        _ProxyFactory(serverPort, direction, cut)
    )
    outcomes: list[list[str]] = [[] for _ in range(CALLS)]
    try:
        try:
            ref = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={proxy.getHost().port}")
        except Exception as error:
            return [f"connect: {type(error).__name__}"] * CALLS
        calls = []
        for index in range(CALLS):
            call = ref.callRemote("echo", [index, PAYLOAD])
            call.addCallbacks(
                lambda result, i=index: outcomes[i].append("answer" if result == [i, PAYLOAD] else f"wrong {result!r}"),
                lambda failure, i=index: outcomes[i].append(type(failure.value).__name__),
            )
            calls.append(call)
        await DeferredList(calls)
        await deferLater(reactor, 0.01)  # a late second answer would show here
        ref.broker.disconnect()
    finally:
        await proxy.stopListening()
    for index, outcome in enumerate(outcomes):
        assert len(outcome) == 1, f"cut {direction}@{cut}: call {index} fired {outcome}"
    return [outcome[0] for outcome in outcomes]


async def cutEverywhere(reactor: Any) -> None:
    """A connection cut at every third byte of three calls, either way, answers or errbacks each call once."""
    factory = rpc.serverFactory(Service(), clock=reactor)
    port = await serverFromString(reactor, "tcp:0:interface=127.0.0.1").listen(factory)
    seen: dict[str, set[str]] = {"up": set(), "down": set()}
    try:
        for direction in ("up", "down"):
            for cut in range(0, 260, 3):
                for outcome in await _callThroughCut(reactor, port.getHost().port, direction, cut):
                    seen[direction].add(outcome)
    finally:
        await factory.disconnectAll()
        await port.stopListening()
    # Early cuts lose every call and late cuts none, so both outcomes occur in each direction.
    for direction, outcomes in seen.items():
        assert "answer" in outcomes and len(outcomes) > 1, (direction, outcomes)


async def serverRestart(reactor: Any) -> None:
    """A reconnecting client's calls fail with a reason while the server is down and succeed once it is back."""
    factory = rpc.serverFactory(Service(), clock=reactor)
    # The port is held for the test (the server listens on it again after letting it go).
    reservation = reservePort()
    number = reservation.getsockname()[1]
    port = await serverFromString(reactor, f"tcp:{number}:interface=127.0.0.1").listen(factory)
    client = rpc.reconnecting(reactor, f"tcp:host=127.0.0.1:port={number}", retryPolicy=lambda attempt: 0.1)
    try:
        ref = await client.whenConnected()
        assert await ref.callRemote("echo", 1) == 1
        in_flight = ref.callRemote("echo", 2)
        await factory.disconnectAll()
        await port.stopListening()
        failures: list[Any] = []
        await in_flight.addCallbacks(lambda result: failures.append(("answered", result)), failures.append)
        assert len(failures) == 1
        try:
            await client.callRemote("echo", 3)
        except DeadReferenceError:
            pass
        else:
            raise AssertionError("a call while the server is down succeeded")
        port = await serverFromString(reactor, f"tcp:{number}:interface=127.0.0.1").listen(factory)
        ref = await client.whenConnected()
        assert await ref.callRemote("echo", 4) == 4
    finally:
        await client.stopService()
        await factory.disconnectAll()
        await port.stopListening()
        reservation.close()


class FaultTests(TestCase):
    """Faults on real loopback connections, under trial."""

    test_cut_everywhere = trialTest(cutEverywhere)
    test_server_restart = trialTest(serverRestart)


test_cut_everywhere = pytestTest(cutEverywhere)
test_server_restart = pytestTest(serverRestart)
