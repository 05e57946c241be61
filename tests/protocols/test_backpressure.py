"""Back-pressure from writes to reads: a connection stops reading while too much waits for a peer that does not read."""

from __future__ import annotations

import time
from typing import Any

from twisted.internet.abstract import FileDescriptor
from twisted.internet.address import IPv4Address
from twisted.internet.defer import gatherResults
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock, deferLater
from twisted.internet.testing import MemoryReactor
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import Limits, dumps
from framing.bulk._wire import dataFramePieces
from framing.wire import PREAMBLE
from protocols import CoalescingTransport, TokenProtocol, rpc
from protocols._guard import GuardPolicy, guard
from protocols._sockets import queuedIn
from protocols.bulk import BulkOptions, FlowControlError
from protocols.echo import EchoClient, EchoServer
from protocols.rpc import Broker
from protocols.rpc._endpoints import connectWith
from protocols.testing import MemoryTransport, connectedPair, loopbackTCP

from .bulk.support import SlowConsumer, Store, payload
from .helpers import TLSPair, cancelDropTimers, pytestTest, trialTest

KiB = 1024
SMALL_MARKS = Limits(send_high_water=10 * KiB, send_low_water=4 * KiB)
"""Marks small enough to reach with a few messages; the memory transports below buffer 1 KiB before pausing."""


def memoryTransport(bufferSize: int = KiB) -> MemoryTransport:
    address = IPv4Address("TCP", "127.0.0.1", 8750)
    return MemoryTransport(Protocol(), address, address, bufferSize)


def peerReads(transport: MemoryTransport, count: int) -> None:
    """
    The peer reads C{count} bytes (whole writes) of what is queued, and the
    transport asks its producer for more (as Twisted's TCP transport does
    once its buffer is empty, and a TLS or pull transport more often).
    """
    while count > 0 and transport.outgoing:
        piece = transport.outgoing.popleft()
        transport.outgoingBytes -= len(piece)
        count -= len(piece)
    if transport.producer is not None:
        transport.producerPaused = False
        transport.producer.resumeProducing()


class Echo(EchoServer):
    """An echo server that records what it answered and logs into a list."""

    def __init__(self, limits: Limits | None = None) -> None:
        super().__init__(limits)
        self.answered = 0
        self.backlogs: list[bool] = []
        self.events: list[dict[str, Any]] = []
        self.log = Logger(observer=self.events.append)

    def objectReceived(self, obj: Any) -> None:
        self.answered += 1
        super().objectReceived(obj)

    def sendBacklogChanged(self, backlogged: bool) -> None:
        self.backlogs.append(backlogged)
        super().sendBacklogChanged(backlogged)


class Collector(TokenProtocol):
    """A client that keeps what it receives."""

    sendBackPressure = False

    def __init__(self) -> None:
        super().__init__()
        self.received: list[Any] = []

    def objectReceived(self, obj: Any) -> None:
        self.received.append(obj)


class TransportMarkTests(SynchronousTestCase):
    """CoalescingTransport: reading stops above the high-water mark and starts again at the low-water mark."""

    def setUp(self) -> None:
        self.wrapped = memoryTransport()
        self.seen: list[bool] = []
        self.transport = CoalescingTransport(self.wrapped, self.seen.append)
        self.transport.setSendLimits(10 * KiB, 4 * KiB)

    def send(self, size: int) -> None:
        self.transport.write(b"x" * size)
        self.transport.flush()

    def test_pausesAboveHighWater(self) -> None:
        """Reading goes on up to the high-water mark and stops once what waits passes it."""
        self.send(6 * KiB)
        self.send(4 * KiB)
        self.assertFalse(self.wrapped.readPaused)
        self.send(1)
        self.assertTrue(self.wrapped.readPaused)
        self.assertTrue(self.transport.sendBacklogged)
        self.assertEqual(self.seen, [True])

    def test_resumesAtLowWater(self) -> None:
        """Reading stays stopped while more than the low-water mark waits, and starts again at it."""
        for _ in range(11):
            self.send(KiB)
        self.assertTrue(self.wrapped.readPaused)
        peerReads(self.wrapped, 6 * KiB)
        self.assertEqual(self.transport.pendingBytes, 5 * KiB)
        self.assertTrue(self.wrapped.readPaused)
        peerReads(self.wrapped, KiB)
        self.assertFalse(self.wrapped.readPaused)
        self.assertEqual(self.seen, [True, False])

    def test_heldMessagesCount(self) -> None:
        """Messages held during a read count: reading stops before they are released."""
        self.transport.hold()
        for _ in range(11):
            self.send(KiB)
        self.assertEqual(self.wrapped.writes, [])
        self.assertTrue(self.wrapped.readPaused)
        self.transport.release()
        self.assertEqual(len(self.wrapped.writes), 1)

    def test_applicationPauseComposes(self) -> None:
        """Reading starts again only when neither the application nor the backlog holds it."""
        self.transport.pauseProducing()
        self.send(11 * KiB)
        self.transport.resumeProducing()
        self.assertTrue(self.wrapped.readPaused)
        peerReads(self.wrapped, 11 * KiB)
        self.assertFalse(self.wrapped.readPaused)
        self.send(11 * KiB)
        self.transport.pauseProducing()
        peerReads(self.wrapped, 11 * KiB)
        self.assertTrue(self.wrapped.readPaused)
        self.transport.resumeProducing()
        self.assertFalse(self.wrapped.readPaused)
        self.assertEqual(self.seen, [True, False, True, False])

    def test_queuedBehindStreamCounts(self) -> None:
        """Messages waiting behind an unfinished stream count as waiting to be sent."""
        self.transport.writeStream(iter([[b"open"], [b"chunk" * 500], [b"close"]]))
        self.assertTrue(self.transport.writePaused)
        self.send(11 * KiB)
        self.assertTrue(self.wrapped.readPaused)
        while self.wrapped.outgoing:
            peerReads(self.wrapped, 64 * KiB)
        self.assertFalse(self.wrapped.readPaused)
        self.assertEqual(self.transport.pendingBytes, 0)

    def test_offWithoutLimits(self) -> None:
        """A transport whose limits were never set keeps reading however much waits."""
        wrapped = memoryTransport()
        transport = CoalescingTransport(wrapped)
        transport.write(b"x" * 100 * KiB)
        transport.flush()
        self.assertFalse(wrapped.readPaused)
        self.assertIsNone(wrapped.producer)

    def test_closingFreesWrappedTransport(self) -> None:
        """loseConnection unregisters the transport's producer, so the wrapped transport can close."""
        self.assertIsNotNone(self.wrapped.producer)
        self.transport.loseConnection()
        self.assertIsNone(self.wrapped.producer)
        self.assertTrue(self.wrapped.disconnecting)

    def test_marksNotBelowTransportBuffer(self) -> None:
        """Both marks are raised to the wrapped transport's buffer size: it reports a drain only past it."""
        transport = CoalescingTransport(memoryTransport(bufferSize=64 * KiB))
        transport.setSendLimits(1024 * KiB, 16 * KiB)
        self.assertEqual((transport.sendHighWater, transport.sendLowWater), (1024 * KiB, 64 * KiB))
        transport.setSendLimits(32 * KiB, 16 * KiB)
        self.assertEqual((transport.sendHighWater, transport.sendLowWater), (64 * KiB, 64 * KiB))

    def test_marksChecked(self) -> None:
        """A low-water mark above the high-water mark is an error, in Limits and on the transport."""
        self.assertRaises(ValueError, self.transport.setSendLimits, 10, 20)
        self.assertRaises(ValueError, Limits, send_high_water=10, send_low_water=20)


class QueuedBytesTests(SynchronousTestCase):
    """What the wrapped transport holds is read from Twisted's own buffers."""

    def test_fileDescriptor(self) -> None:
        """A Twisted socket connection holds its data buffer past the offset, plus its temporary list."""
        connection = FileDescriptor(reactor=MemoryReactor())
        connection.dataBuffer = b"x" * 100
        connection.offset = 30
        connection._tempDataLen = 5
        self.assertEqual(queuedIn(connection), 75)

    def test_tlsOverConnection(self) -> None:
        """A TLS wrapper adds what waits for its handshake to what the connection under it holds."""
        connection = FileDescriptor(reactor=MemoryReactor())
        connection.dataBuffer = b"x" * 10

        class Wrapper:
            transport = connection
            _appSendBuffer = [b"ab", b"cde"]

        self.assertEqual(queuedIn(Wrapper()), 15)

    def test_unknownTransport(self) -> None:
        """A transport that cannot say is counted from what was written since it last paused us."""
        self.assertIsNone(queuedIn(object()))


class ProtocolTests(SynchronousTestCase):
    """A TokenProtocol server holds no more for a peer than that peer reads, and loses no answer."""

    def setUp(self) -> None:
        self.server = Echo(SMALL_MARKS)
        self.client = Collector()
        self.pair = connectedPair(self.server, self.client, bufferSize=KiB)
        self.pair.flush()

    def test_stopsReadingThenDeliversEveryAnswerInOrder(self) -> None:
        """A client that does not read stops the server reading; when it reads, every answer arrives once, in order."""
        self.client.transport.pauseProducing()
        for i in range(200):
            self.client.sendObject([i, b"v" * 500])
        self.pair.flush()
        self.assertLess(self.server.answered, 40)
        self.assertEqual(self.server.backlogs, [True])
        self.assertLessEqual(self.pair.serverTransport.outgoingBytes, 10 * KiB + 600)
        self.client.transport.resumeProducing()
        self.pair.flush()
        self.assertEqual([item[0] for item in self.client.received], list(range(200)))
        self.assertEqual(self.server.answered, 200)
        self.assertEqual(self.server.backlogs[-1], False)

    def test_waitingBytesChargedToLedger(self) -> None:
        """What waits for a peer that does not read is on the ledger ("send"), and leaves it as it drains."""
        self.client.transport.pauseProducing()
        for i in range(200):
            self.client.sendObject([i, b"v" * 500])
        self.pair.flush()
        pending = self.server.transport.pendingBytes
        self.assertGreater(pending, 10 * KiB)
        self.assertEqual(self.server.ledger.holding("send"), pending)
        self.assertEqual(self.server.ledger.held, pending)
        self.client.transport.resumeProducing()
        self.pair.flush()
        self.assertEqual(self.server.ledger.holding("send"), self.server.transport.pendingBytes)
        self.assertEqual(self.server.ledger.holding("send"), 0)

    def test_oneReadIsNotDispatchedPastTheMark(self) -> None:
        """Requests that arrived in one read wait undispatched once the answers pass the mark."""
        self.client.transport.pauseProducing()
        self.client.transport.hold()
        for i in range(200):
            self.client.sendObject([i, b"v" * 500])
        self.client.transport.release()
        self.pair.flush()
        self.assertLess(self.server.answered, 40)
        self.client.transport.resumeProducing()
        self.pair.flush()
        self.assertEqual([item[0] for item in self.client.received], list(range(200)))

    def test_backlogIsLogged(self) -> None:
        """Stopping and resuming reading for a backlog is logged at debug level with the bytes waiting."""
        self.client.transport.pauseProducing()
        for _ in range(40):
            self.client.sendObject(b"v" * 500)
        self.pair.flush()
        self.client.transport.resumeProducing()
        self.pair.flush()
        texts = [event["log_format"] for event in self.server.events if event["log_level"].name == "debug"]
        self.assertEqual(len([t for t in texts if "wait to be sent" in t]), 2)

    def test_clientsKeepReading(self) -> None:
        """Client protocols keep reading whatever waits, so two ends never wait on each other."""
        self.assertFalse(EchoClient.sendBackPressure)
        self.assertIsNone(self.client.transport.sendHighWater)
        factory = rpc.BrokerFactory(None)
        connectWith(MemoryReactor(), "tcp:host=127.0.0.1:port=1", factory)
        self.assertFalse(factory.buildProtocol(None).sendBackPressure)
        self.assertTrue(rpc.BrokerFactory(None).buildProtocol(None).sendBackPressure)

    def test_limitOff(self) -> None:
        """With send_high_water None a server keeps reading for a peer that does not read."""
        server = Echo(Limits(send_high_water=None))
        client = Collector()
        pair = connectedPair(server, client, bufferSize=KiB)
        client.transport.pauseProducing()
        for _ in range(200):
            client.sendObject(b"v" * 500)
        pair.flush()
        self.assertEqual(server.answered, 200)


POLICY = GuardPolicy(
    preambleTimeout=5.0,
    stallTimeout=None,
    keepaliveInterval=None,
    idleTimeout=None,
    maxConnections=None,
    maxPerPeer=None,
    sendStallTimeout=60.0,
)


class SendStallTests(SynchronousTestCase):
    """The guard drops a peer that takes none of what waits for it, and only such a peer."""

    def setUp(self) -> None:
        self.addCleanup(cancelDropTimers)
        self.clock = Clock()
        self.server: Any = guard(Echo(), POLICY, None, self.clock)
        self.wrapped = memoryTransport()
        self.server.makeConnection(self.wrapped)
        self.server.dataReceived(PREAMBLE + b"".join(dumps(b"v" * 500)[len(PREAMBLE) :] for _ in range(8)))

    def test_peerThatReadsNothingIsDropped(self) -> None:
        """Bytes waiting for sendStallTimeout with none taken drop the connection as send-stalled."""
        self.assertGreater(self.server.transport.pendingBytes, 0)
        self.clock.advance(5)
        self.clock.advance(50)
        self.assertIsNone(self.server.failure)
        self.clock.advance(15)
        self.assertEqual(self.server.failure.value.code, "send-stalled")
        self.assertTrue(any(event.get("code") == "send-stalled" for event in self.server.events))

    def test_slowReaderIsNotStalled(self) -> None:
        """A peer that takes a little every so often is slow, not stalled, and stays connected."""
        for _ in range(20):
            self.clock.advance(10)
            peerReads(self.wrapped, 100)
            self.server.dataReceived(dumps(b"w" * 500)[len(PREAMBLE) :])
        self.assertIsNone(self.server.failure)

    def test_backlogStartsTheWatch(self) -> None:
        """A connection that stops reading for a backlog is watched from then, without waiting for another rule."""
        clock = Clock()
        server: Any = guard(Echo(SMALL_MARKS), POLICY, None, clock)
        wrapped = memoryTransport()
        server.makeConnection(wrapped)
        server.dataReceived(PREAMBLE)
        peerReads(wrapped, len(PREAMBLE))
        clock.advance(6)  # past the preamble rule, with nothing waiting: no timer is pending now
        self.assertEqual(clock.getDelayedCalls(), [])
        server.dataReceived(b"".join(dumps(b"v" * 500)[len(PREAMBLE) :] for _ in range(30)))
        self.assertEqual(server.backlogs, [True])
        clock.advance(61)
        self.assertEqual(server.failure.value.code, "send-stalled")

    def test_pausedTimeIsNotCountedAsAStall(self) -> None:
        """An object in progress while reading was stopped for a backlog is not dropped as stalled when it resumes."""
        clock = Clock()
        policy = GuardPolicy(stallTimeout=3.0, minRate=100.0, keepaliveInterval=None, idleTimeout=None)
        server: Any = guard(Echo(SMALL_MARKS), policy, None, clock)
        wrapped = memoryTransport()
        server.makeConnection(wrapped)
        partial = dumps(b"p" * 500)[len(PREAMBLE) : -100]
        server.dataReceived(PREAMBLE + b"".join(dumps(b"v" * 500)[len(PREAMBLE) :] for _ in range(30)) + partial)
        self.assertEqual(server.backlogs, [True])
        clock.advance(20)
        while server.backlogs[-1]:
            peerReads(wrapped, 64 * KiB)
        clock.advance(1)
        self.assertIsNone(server.failure)
        clock.advance(200)  # the stall rule still holds the object to its allowance from then on
        self.assertEqual(server.failure.value.code, "stalled")

    def test_nothingWaitingIsNotStalled(self) -> None:
        """With nothing waiting to be sent a silent peer is not send-stalled."""
        peerReads(self.wrapped, 64 * KiB)
        self.clock.advance(600)
        self.assertIsNone(self.server.failure)


class BulkTests(SynchronousTestCase):
    """Bulk streams: waiting for credit is not a stall, and credit overrun drops either side."""

    def test_streamWaitingForCreditIsNotStalled(self) -> None:
        """A guarded server whose stream waits for the client's credit for minutes is not dropped."""
        clock = Clock()
        options = BulkOptions(chunkSize=4 * KiB, window=8 * KiB, grantStep=2 * KiB, hashing="inline")
        server: Any = guard(Broker(Store(), clock=clock, bulk=options), POLICY, None, clock)
        client = Broker(clock=clock, bulk=options)
        pair = connectedPair(server, client)
        data = payload(64 * KiB)
        incoming = client.rootReference().callRemote("download", data)
        consumer = SlowConsumer(pauseEvery=1)

        def flush() -> None:
            for _ in range(1000):
                clock.advance(0)
                if not pair.flush() and not any(c.getTime() <= clock.seconds() for c in clock.getDelayedCalls()):
                    return

        flush()
        receiving = self.successResultOf(incoming).receive(consumer)
        flush()
        for _ in range(30):
            clock.advance(10)
            flush()
        self.assertIsNone(server.failure)
        self.assertNoResult(receiving)
        while not receiving.called:
            consumer.drain()
            flush()
        self.assertEqual(self.successResultOf(receiving).size, len(data))
        self.assertEqual(consumer.data, data)

    def test_serverPushingPastCreditDropsClient(self) -> None:
        """A server that sends a client more stream data than its initial window and grants: the client drops it."""
        clock = Clock()
        server, client = Broker(Store(), clock=clock, bulk=BulkOptions()), Broker(clock=clock, bulk=BulkOptions())
        client.connection.log = Logger(observer=lambda event: None)
        pair = connectedPair(server, client)
        # HELLO both ways first (the client's, answered by the server's): a stream announced before its
        # sender's HELLO is refused with HelloMissing (wire-format 5.5), not the flow-control error under test.
        client.bulk.sayHello()
        pair.flush()
        incoming = client.bulk.announcementReceived((7, 64 * KiB, None))  # type: ignore[arg-type]
        receiving = incoming.receive(lambda data: None, window=100)
        pair.flush()
        server.transport.writeSequence(dataFramePieces(7, 0, b"x" * (BulkOptions().startWindow + 1)))
        server.transport.flush()
        pair.flush()
        self.assertIsInstance(client.failure.value, FlowControlError)  # type: ignore[union-attr]
        self.failureResultOf(receiving, FlowControlError)


class TLSTests(SynchronousTestCase):
    """Over TLS the bytes the TLS layer passed on to the connection under it count as waiting."""

    def test_tlsServerStopsReading(self) -> None:
        """A TLS server stops reading for a peer that does not read, and every answer arrives once it does."""
        server, client = Echo(SMALL_MARKS), Collector()
        tls = TLSPair(server, client, buffering=False)
        client.transport.pauseProducing()
        for i in range(400):
            client.sendObject([i, b"v" * 1000])
        tls.flush()
        # Marks below the 64 KiB the connection under TLS buffers are raised to it.
        self.assertLess(server.answered, 100)
        self.assertEqual(server.backlogs, [True])
        client.transport.resumeProducing()
        tls.flush()
        self.assertEqual([item[0] for item in client.received], list(range(400)))


async def overTCP(reactor: Any) -> None:
    """Over loopback TCP a server stops reading for a client that does not read, then answers everything in order."""
    high = 256 * KiB
    server = Echo(Limits(send_high_water=high, send_low_water=64 * KiB))
    client = EchoClient()
    pair = await loopbackTCP(reactor, server, client)
    try:
        client.transport.pauseProducing()
        answers = gatherResults([client.echo([i, b"x" * 8192]) for i in range(2000)])
        deadline = time.monotonic() + 60  # only a hang takes that long
        while not server.transport.sendBacklogged and time.monotonic() < deadline:
            await deferLater(reactor, 0.05)
        await deferLater(reactor, 0.3)  # (a while longer: the server must stay stopped, not just stop once)
        assert server.transport.sendBacklogged
        assert server.answered < 2000, server.answered
        assert server.transport.pendingBytes <= high + 9000, server.transport.pendingBytes
        client.transport.resumeProducing()
        got = await answers
        assert [item[0] for item in got] == list(range(2000))
        assert server.answered == 2000
        assert not server.transport.sendBacklogged
    finally:
        await pair.close()


class SocketTests(TestCase):
    """Back-pressure over real sockets (trial runs these; pytest runs the twins below)."""

    timeout = 30
    test_over_tcp = trialTest(overTCP)


test_over_tcp = pytestTest(overTCP)
