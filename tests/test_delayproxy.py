"""Tests for tests.delayproxy: the TCP delay proxy and the in-memory delayed pair.

The reactor test is one C{async def} body run as a trial C{TestCase} method and
as a pytest-twisted function (see C{tests/protocols/helpers.py}).
"""

from __future__ import annotations

import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock, deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase

from .delayproxy import DOWN, UP, DelayedPair, DelayProxy
from .protocols.helpers import pytestTest, trialTest

DELAY = 0.02


class Echo(Protocol):
    def dataReceived(self, data: bytes) -> None:
        self.transport.write(data)


class Collector(Protocol):
    """Keeps what it receives, with the time; fires C{lost} when the connection ends."""

    def __init__(self) -> None:
        self.received: list[tuple[float, bytes]] = []
        self.lost: Deferred[None] = Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.received.append((time.perf_counter(), data))

    def connectionLost(self, reason: Any = None) -> None:
        self.lost.callback(None)


async def proxyDelaysAndKeepsOrder(reactor: Any) -> None:
    """Bytes through the proxy come back in order, each round trip no sooner than twice the delay."""
    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(Factory.forProtocol(Echo))
    proxy = DelayProxy(reactor, port.getHost().port, DELAY)
    proxy_port = await proxy.start()
    collector = Collector()
    await connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", proxy_port), collector)
    try:
        sent = time.perf_counter()
        for piece in (b"one ", b"two ", b"three"):
            collector.transport.write(piece)
            await deferLater(reactor, 0.005)
        while b"".join(data for _, data in collector.received) != b"one two three":
            await deferLater(reactor, 0.005)
            assert time.perf_counter() - sent < 5, collector.received
        assert collector.received[0][0] - sent >= 2 * DELAY * 0.98
        (link,) = proxy.links
        assert [data for direction, _, data in link.chunks if direction == UP] == [b"one ", b"two ", b"three"]
        collector.transport.loseConnection()
        await collector.lost
    finally:
        await proxy.stop()
        await port.stopListening()


class DelayProxyTests(TestCase):
    """The TCP delay proxy (trial runs this; pytest runs the twin below)."""

    timeout = 30
    test_proxy_delays_and_keeps_order = trialTest(proxyDelaysAndKeepsOrder)


test_proxy_delays_and_keeps_order = pytestTest(proxyDelaysAndKeepsOrder)


class DelayedPairTests(SynchronousTestCase):
    """The in-memory delayed pair, on a simulated clock."""

    def test_deliversAfterTheDelay(self) -> None:
        """A write reaches the other side exactly the delay later, and the answer the delay after that."""
        clock = Clock()
        server, client = Echo(), Collector()
        pair = DelayedPair(server, client, clock, delay=0.05)
        client.transport.write(b"ping")
        pair.runUntil(lambda: bool(client.received))
        self.assertEqual(clock.seconds(), 0.1)
        self.assertEqual([(d, t) for d, t, _ in pair.chunks], [(UP, 0.0), (DOWN, 0.05)])
        self.assertEqual(client.received[0][1], b"ping")
