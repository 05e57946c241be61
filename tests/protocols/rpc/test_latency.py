"""Round trips and send counts of protocols.rpc: over a link adding 50 ms each way, and over plain TCP.

The latent link is simulated twice: in memory on a L{Clock} (exact times, no
reactor; trial and pytest both collect these) and through a TCP delay proxy
on loopback (C{tests.delayproxy}; each reactor test is one C{async def} body
run as a trial C{TestCase} method and as a pytest-twisted function).  One
round trip (RTT) is 100 ms; the TCP tests allow for the reactor's timer
granularity, the benchmark (C{tests.benchmarks.bench_latency}) reports the
real figures.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

from twisted.internet.defer import gatherResults
from twisted.internet.endpoints import clientFromString, serverFromString
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import Decoder, Registry
from framing.rpc._wire import ANSWER, CALL, OPEN_TYPE, MessageUnslicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE
from protocols.rpc import Broker, BrokerFactory, connect, serve

from ...delayproxy import DOWN, UP, DelayedPair, DelayProxy
from ..helpers import pytestTest, trialTest
from .services import Service

DELAY = 0.05
RTT = 2 * DELAY
LISTEN = "tcp:0:interface=127.0.0.1"


def messagesIn(data: bytes, preamble: bool = True) -> list[Any]:
    """Decode raw RPC bytes (with or without the preamble) into messages."""
    registry = Registry(DEFAULT_REGISTRY)
    registry.add_unslicer(OPEN_TYPE, MessageUnslicer)
    return Decoder(registry=registry).feed(data if preamble else PREAMBLE + data)


def delayedPair() -> tuple[DelayedPair, Broker, Broker, Clock]:
    """A server broker exposing a L{Service} and a client broker, joined by a 50 ms in-memory link."""
    clock = Clock()
    server = Broker(Service(), clock=clock)
    client = Broker(clock=clock)
    return DelayedPair(server.connection, client.connection, clock, DELAY), server, client, clock


class LatentLinkInMemoryTests(SynchronousTestCase):
    """Round trips over a simulated 100 ms RTT link, in exact simulated time."""

    def test_firstAnswerOneRoundTripAfterConnecting(self) -> None:
        """A call made as the connection comes up is answered exactly one RTT later, not two."""
        pair, _, client, clock = delayedPair()
        answer = client.rootReference().callRemote("echo", 42)
        pair.runUntil(lambda: answer.called)
        self.assertEqual(self.successResultOf(answer), 42)
        self.assertAlmostEqual(clock.seconds(), RTT, places=9)

    def test_preambleTravelsWithTheFirstCall(self) -> None:
        """The client's first bytes on the wire are its preamble and its first call, sent together at once."""
        pair, _, client, _ = delayedPair()
        client.rootReference().callRemote("echo", "first")
        pair.collect()
        direction, sent_at, data = pair.chunks[0]
        self.assertEqual((direction, sent_at), (UP, 0.0))
        self.assertTrue(data.startswith(PREAMBLE))
        self.assertEqual(messagesIn(data), [(CALL, 1, 0, "echo", ("first",), {})])
        self.assertEqual(pair.clientTransport.writeCalls, 1)

    def test_nothingWaitsForTheServerPreamble(self) -> None:
        """The server answers the first call before its own preamble could have reached the client."""
        pair, _, client, _ = delayedPair()
        answer = client.rootReference().callRemote("echo", 1)
        pair.runUntil(lambda: answer.called)
        down = [(sent_at, data) for direction, sent_at, data in pair.chunks if direction == DOWN]
        self.assertEqual([sent_at for sent_at, _ in down], [0.0, DELAY])
        self.assertEqual(down[0][1], PREAMBLE)
        self.assertEqual(messagesIn(down[1][1], preamble=False), [(ANSWER, 1, 1)])

    def test_sequentialCallsOneRoundTripEach(self) -> None:
        """Twenty sequential calls each take exactly one RTT, and each call and each answer is one write."""
        pair, _, client, clock = delayedPair()
        root = client.rootReference()
        first = root.callRemote("echo", -1)
        pair.runUntil(lambda: first.called)
        for i in range(20):
            started = clock.seconds()
            answer = root.callRemote("echo", i)
            pair.runUntil(lambda answer=answer: answer.called)
            self.assertEqual(self.successResultOf(answer), i)
            self.assertAlmostEqual(clock.seconds() - started, RTT, places=9)
        self.assertEqual(pair.clientTransport.writeCalls, 21)  # the first with the preamble
        self.assertEqual(pair.serverTransport.writeCalls, 1 + 21)  # the preamble, then one per answer

    def test_windowOfCallsOneRoundTrip(self) -> None:
        """A hundred calls sent together are answered one RTT later, with at most one write per call and per answer."""
        pair, _, client, clock = delayedPair()
        root = client.rootReference()
        answers = [root.callRemote("echo", i) for i in range(100)]
        pair.runUntil(lambda: all(d.called for d in answers))
        self.assertEqual([self.successResultOf(d) for d in answers], list(range(100)))
        self.assertAlmostEqual(clock.seconds(), RTT, places=9)
        self.assertLessEqual(pair.clientTransport.writeCalls, 100)
        self.assertLessEqual(pair.serverTransport.writeCalls, 1 + 100)

    def test_stateReturnsToIdle(self) -> None:
        """After 20,000 calls with a hundred in flight, the brokers hold nothing and no objects are left over."""
        pair, server, client, _ = delayedPair()
        pair.record = False
        root = client.rootReference()
        warm = [root.callRemote("echo", i) for i in range(100)]
        pair.runUntil(lambda warm=warm: all(d.called for d in warm))
        del warm
        # Collect earlier tests' cyclic garbage first, so that the count
        # measures this loop and not when the collector happens to run.
        gc.collect()
        before = sys.getallocatedblocks()
        for _ in range(200):
            answers = [root.callRemote("echo", i) for i in range(100)]
            pair.runUntil(lambda answers=answers: all(d.called for d in answers))
        del answers
        self.assertEqual((client.pendingCount, server.runningCount), (0, 0))
        self.assertEqual((client.bufferedBytes, server.bufferedBytes), (0, 0))
        self.assertEqual((len(client.transport.buffer), len(server.transport.buffer)), (0, 0))
        gc.collect()
        self.assertLess(abs(sys.getallocatedblocks() - before), 100)


# -- over TCP ---------------------------------------------------------------------------------


async def firstAnswerThroughProxy(reactor: Any) -> None:
    """
    Through a TCP proxy adding 50 ms each way, the first call rides on the
    connection's first bytes, so its answer is one RTT after connect(): the
    proxy's first chunk up holds the preamble and the call (no round trip
    before it), and the answer takes at least the RTT (the delay is there).
    How close to one RTT it comes is C{dev.py attack}'s latency figure.
    """
    port = await serve(reactor, LISTEN, Service())
    proxy = DelayProxy(reactor, port.getHost().port, DELAY)
    proxy_port = await proxy.start()
    root = None
    try:
        started = time.perf_counter()
        root = await connect(reactor, f"tcp:host=127.0.0.1:port={proxy_port}")
        assert await root.callRemote("echo", 42) == 42
        elapsed = time.perf_counter() - started
        assert elapsed >= RTT * 0.98, f"{elapsed / RTT:.3f} RTT"
        first = proxy.links[0].firstChunk(UP)
        assert first is not None and first[1].startswith(PREAMBLE), first
        assert messagesIn(first[1]) == [(CALL, 1, 0, "echo", (42,), {})]
    finally:
        if root is not None:
            await root.broker.disconnect()
        await proxy.stop()
        await port.stopListening()
        await port.factory.disconnectAll()  # type: ignore[attr-defined]


async def sequentialThroughProxy(reactor: Any) -> None:
    """
    Through a TCP proxy adding 50 ms each way, each of ten sequential calls
    is one chunk up and one chunk down (no extra round trip), and takes at
    least the RTT.  The mean in RTTs, against its target, is C{dev.py
    attack}'s latency figure.
    """
    port = await serve(reactor, LISTEN, Service())
    proxy = DelayProxy(reactor, port.getHost().port, DELAY)
    proxy_port = await proxy.start()
    root = await connect(reactor, f"tcp:host=127.0.0.1:port={proxy_port}")
    try:
        assert await root.callRemote("echo", -1) == -1
        link = proxy.links[0]
        seen = len(link.chunks)
        started = time.perf_counter()
        for i in range(10):
            assert await root.callRemote("echo", i) == i
        mean = (time.perf_counter() - started) / 10
        assert mean >= RTT * 0.98, f"{mean / RTT:.3f} RTT per call"
        directions = [direction for direction, _, _ in link.chunks[seen:]]
        assert directions == [UP, DOWN] * 10, directions
    finally:
        await root.broker.disconnect()
        await proxy.stop()
        await port.stopListening()
        await port.factory.disconnectAll()  # type: ignore[attr-defined]


class CountingSocket:
    """Wraps a socket and counts C{send} and C{sendmsg} calls: one each is one system call."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self.sends = 0

    def send(self, data: Any, *args: Any) -> int:
        self.sends += 1
        sent: int = self._sock.send(data, *args)
        return sent

    def sendmsg(self, *args: Any) -> int:
        self.sends += 1
        sent: int = self._sock.sendmsg(*args)
        return sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class CountingFactory(BrokerFactory):
    """Makes brokers whose TCP transport's socket counts its sends from the very first, in C{sockets}."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sockets: dict[Broker, CountingSocket] = {}

    def buildProtocol(self, addr: Any) -> Any:
        connection = super().buildProtocol(addr)
        broker, makeConnection = connection.receiver, connection.makeConnection

        def countingMakeConnection(transport: Any) -> None:
            self.sockets[broker] = transport.socket = CountingSocket(transport.socket)
            makeConnection(transport)

        connection.makeConnection = countingMakeConnection  # type: ignore[method-assign]
        return connection


async def oneSendPerMessage(reactor: Any) -> None:
    """Over TCP each sequential call and each answer is one send() system call, and a window needs no more."""
    factory = CountingFactory(Service(), clock=reactor)
    port = await serverFromString(reactor, LISTEN).listen(factory)
    address = f"tcp:host=127.0.0.1:port={port.getHost().port}"
    clientFactory = CountingFactory(clock=reactor)
    client = (await clientFromString(reactor, address).connect(clientFactory)).receiver
    try:
        root = client.rootReference()
        assert await root.callRemote("echo", -1) == -1
        (server,) = factory.brokers
        clientSocket, serverSocket = clientFactory.sockets[client], factory.sockets[server]
        assert clientSocket.sends == 1, "the preamble and the first call leave in one send"
        clientSocket.sends = serverSocket.sends = 0
        for i in range(50):
            assert await root.callRemote("echo", i) == i
        assert (clientSocket.sends, serverSocket.sends) == (50, 50)
        clientSocket.sends = serverSocket.sends = 0
        assert await gatherResults([root.callRemote("echo", i) for i in range(100)]) == list(range(100))
        assert 1 <= clientSocket.sends <= 100 and 1 <= serverSocket.sends <= 100
    finally:
        await client.disconnect()
        await port.stopListening()
        await factory.disconnectAll()


async def stateReturnsToIdleOverTCP(reactor: Any) -> None:
    """Over TCP, after ten thousand calls with a thousand in flight, both brokers hold nothing."""
    factory = BrokerFactory(Service(), clock=reactor)
    port = await serverFromString(reactor, LISTEN).listen(factory)
    root = await connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
    client = root.broker
    try:
        for _ in range(10):
            assert await gatherResults([root.callRemote("echo", i) for i in range(1000)]) == list(range(1000))
        (server,) = factory.brokers
        assert (client.pendingCount, server.runningCount) == (0, 0)
        assert (client.bufferedBytes, server.bufferedBytes) == (0, 0)
        assert (len(client.transport.buffer), len(server.transport.buffer)) == (0, 0)
    finally:
        await client.disconnect()
        await port.stopListening()
        await factory.disconnectAll()


# -- trial -----------------------------------------------------------------------------------


class RpcLatencyOverTCPTests(TestCase):
    """protocols.rpc round trips and sends over real TCP (trial runs these; pytest runs the twins below)."""

    timeout = 30
    test_first_answer_through_proxy = trialTest(firstAnswerThroughProxy)
    test_sequential_through_proxy = trialTest(sequentialThroughProxy)
    test_one_send_per_message = trialTest(oneSendPerMessage)
    test_state_returns_to_idle = trialTest(stateReturnsToIdleOverTCP)


# -- pytest-twisted ----------------------------------------------------------------------------

test_first_answer_through_proxy = pytestTest(firstAnswerThroughProxy)
test_sequential_through_proxy = pytestTest(sequentialThroughProxy)
test_one_send_per_message = pytestTest(oneSendPerMessage)
test_state_returns_to_idle = pytestTest(stateReturnsToIdleOverTCP)
