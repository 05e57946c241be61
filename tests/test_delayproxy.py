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
            assert time.perf_counter() - sent < 60, collector.received  # only a hang takes that long
        assert collector.received[0][0] - sent >= 2 * DELAY * 0.98
        (link,) = proxy.links
        # In order; how the pieces were cut into reads is the kernel's (a loaded machine may join two).
        assert b"".join(data for direction, _, data in link.chunks if direction == UP) == b"one two three"
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


class RateLimitTests(SynchronousTestCase):
    """The proxy's rate limit makes each direction a serial link of that bandwidth, on a simulated clock."""

    def test_chunksCrossOneAfterAnother(self) -> None:
        """Chunks sent together leave len/rate apart, each delay after it has crossed the link."""
        from .delayproxy import _Queue

        clock = Clock()
        forwarded: list[tuple[float, bytes]] = []
        queue = _Queue(clock, 0.5, lambda data: forwarded.append((clock.seconds(), data)), lambda: None, rate=1000.0)
        queue.open()
        for piece in (b"a" * 1000, b"b" * 500, b"c" * 1000):
            queue.push(piece)

        def runTo(end: float) -> None:
            # From one due call to the next, so each forward is recorded at its due time.
            while clock.getDelayedCalls():
                due = min(call.getTime() for call in clock.getDelayedCalls())
                if due > end:
                    break
                clock.advance(due - clock.seconds())
            clock.advance(end - clock.seconds())

        runTo(2.75)
        queue.push(b"d" * 100)  # the link has been idle since 2.5: this one crosses at once, in 0.1 s
        runTo(10)
        times = [(round(t, 6), data[:1]) for t, data in forwarded]
        self.assertEqual(times, [(1.5, b"a"), (2.0, b"b"), (3.0, b"c"), (3.35, b"d")])

    def test_noRateMeansDelayOnly(self) -> None:
        """Without a rate, every chunk leaves exactly the delay after it arrived."""
        from .delayproxy import _Queue

        clock = Clock()
        forwarded: list[float] = []
        queue = _Queue(clock, 0.5, lambda data: forwarded.append(clock.seconds()), lambda: None)
        queue.open()
        queue.push(b"x" * 10_000)
        queue.push(b"y" * 10_000)
        clock.advance(0.5)
        self.assertEqual(forwarded, [0.5, 0.5])

    def test_badRate(self) -> None:
        """A rate that is not positive is refused."""
        self.assertRaises(ValueError, DelayProxy, None, 1, 0.05, rate=0)
