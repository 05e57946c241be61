"""Tests for protocols._coalescing.CoalescingTransport: what reaches the wrapped transport, and when."""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address, UNIXAddress
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IConsumer, IPushProducer, ITCPTransport, ITransport
from twisted.internet.protocol import Protocol
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing._blocks import LARGE_PIECE
from protocols import CoalescingTransport
from protocols.testing import MemoryTransport, RecordingTransport


@implementer(IPushProducer)
class Producer:
    """A push producer that records what it is told."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def pauseProducing(self) -> None:
        self.calls.append("pause")

    def resumeProducing(self) -> None:
        self.calls.append("resume")

    def stopProducing(self) -> None:
        self.calls.append("stop")


class PullProducer:
    """A pull producer that writes one piece, through the consumer, per request."""

    def __init__(self, consumer: CoalescingTransport) -> None:
        self.consumer = consumer
        self.sent = 0

    def resumeProducing(self) -> None:
        self.sent += 1
        self.consumer.write(b"piece %d" % self.sent)

    def stopProducing(self) -> None:
        pass


def memoryTransport(bufferSize: int = 64 * 1024) -> MemoryTransport:
    address = IPv4Address("TCP", "127.0.0.1", 8750)
    return MemoryTransport(Protocol(), address, address, bufferSize)


def drain(transport: MemoryTransport) -> None:
    """Pretend the peer read everything queued: the transport asks its producer for more."""
    transport.outgoing.clear()
    transport.outgoingBytes = 0
    transport.drained()


class WriteTests(SynchronousTestCase):
    """Writes wait in the buffer; a flush is one write on the wrapped transport."""

    def test_writesWaitForFlush(self) -> None:
        """Nothing reaches the wrapped transport before flush()."""
        wrapped = RecordingTransport()
        transport = CoalescingTransport(wrapped)
        transport.write(b"a")
        transport.writeSequence([b"b", b"c"])
        self.assertEqual(wrapped.writes, [])
        self.assertEqual(len(transport.buffer), 3)

    def test_flushIsOneWrite(self) -> None:
        """Small writes between flushes reach the wrapped transport as one write."""
        wrapped = RecordingTransport()
        transport = CoalescingTransport(wrapped)
        for piece in (b"a", b"bc", b"def"):
            transport.write(piece)
        transport.flush()
        self.assertEqual(wrapped.writes, [b"abcdef"])

    def test_largePieceIsOneWriteSequence(self) -> None:
        """A large piece is passed on by reference, in the same single call as its neighbours."""
        calls: list[Any] = []
        wrapped = StringTransport()
        wrapped.write = lambda data: calls.append(("write", data))  # type: ignore[method-assign]
        wrapped.writeSequence = lambda data: calls.append(("writeSequence", data))  # type: ignore[method-assign]
        transport = CoalescingTransport(wrapped)
        body = b"x" * LARGE_PIECE
        transport.write(b"header")
        transport.write(body)
        transport.write(b"trailer")
        transport.flush()
        self.assertEqual(len(calls), 1)
        kind, blocks = calls[0]
        self.assertEqual(kind, "writeSequence")
        self.assertIn(body, blocks)
        self.assertTrue(any(block is body for block in blocks))
        self.assertEqual(b"".join(blocks), b"header" + body + b"trailer")

    def test_emptyFlushWritesNothing(self) -> None:
        """flush() with nothing buffered makes no write at all."""
        wrapped = RecordingTransport()
        transport = CoalescingTransport(wrapped)
        transport.flush()
        self.assertEqual(wrapped.writes, [])

    def test_discard(self) -> None:
        """discard() drops what was buffered since the last flush."""
        wrapped = RecordingTransport()
        transport = CoalescingTransport(wrapped)
        transport.write(b"half an object")
        transport.discard()
        transport.write(b"ok")
        transport.flush()
        self.assertEqual(wrapped.writes, [b"ok"])

    def test_seal(self) -> None:
        """seal() writes what was buffered, and nothing written or flushed after it (held or not) is written."""
        wrapped = RecordingTransport()
        transport = CoalescingTransport(wrapped)
        transport.write(b"last words")
        transport.seal()
        self.assertEqual(wrapped.writes, [b"last words"])
        transport.write(b"late")
        transport.flush()
        transport.hold()
        transport.write(b"later")
        transport.release()
        transport.flushNow()
        self.assertEqual(wrapped.writes, [b"last words"])


class WrappingTests(SynchronousTestCase):
    """The wrapper looks like the transport it wraps."""

    def test_noDelayOnTCP(self) -> None:
        """TCP_NODELAY is turned on when the wrapped transport is a TCP transport."""
        wrapped = memoryTransport()
        transport = CoalescingTransport(wrapped)
        self.assertTrue(wrapped.noDelay)
        self.assertTrue(transport.noDelay)
        self.assertTrue(transport.getTcpNoDelay())

    def test_noDelayOnlyOnTCP(self) -> None:
        """A transport that is not TCP (no socket option to set) is left alone."""
        transport = CoalescingTransport(StringTransport())
        self.assertFalse(transport.noDelay)

    def test_noDelayNotOnUNIX(self) -> None:
        """A UNIX-socket transport, which claims ITCPTransport too, is left alone."""
        address = UNIXAddress(b"/tmp/echo.sock")
        wrapped = MemoryTransport(Protocol(), address, address)
        self.assertFalse(CoalescingTransport(wrapped).noDelay)
        self.assertFalse(wrapped.noDelay)

    def test_providesWrappedInterfaces(self) -> None:
        """The wrapper provides what the wrapped transport provides, and is a consumer and producer."""
        transport = CoalescingTransport(memoryTransport())
        for interface in (ITCPTransport, ITransport, IConsumer, IPushProducer):
            self.assertTrue(interface.providedBy(transport), interface)

    def test_passesAttributesThrough(self) -> None:
        """Methods the wrapper does not define are the wrapped transport's."""
        wrapped = StringTransport()
        transport = CoalescingTransport(wrapped)
        self.assertEqual(transport.getPeer(), wrapped.getPeer())
        self.assertEqual(transport.value(), b"")


class ProducerTests(SynchronousTestCase):
    """registerProducer works as on a Twisted transport, fanned out through one registration."""

    def test_pushProducerFollowsWrappedTransport(self) -> None:
        """A push producer is paused and resumed when the wrapped transport's buffer fills and drains."""
        wrapped = memoryTransport(bufferSize=10)
        transport = CoalescingTransport(wrapped)
        producer = Producer()
        transport.registerProducer(producer, True)
        transport.write(b"x" * 11)
        transport.flush()
        self.assertEqual(producer.calls, ["pause"])
        self.assertTrue(transport.writePaused)
        drain(wrapped)
        self.assertEqual(producer.calls, ["pause", "resume"])
        self.assertFalse(transport.writePaused)

    def test_secondProducerRefused(self) -> None:
        """Registering a second producer is an error, as on any transport."""
        transport = CoalescingTransport(memoryTransport())
        transport.registerProducer(Producer(), True)
        self.assertRaises(RuntimeError, transport.registerProducer, Producer(), True)

    def test_unregisterFreesWrappedTransport(self) -> None:
        """Once the producer is unregistered the wrapped transport has no producer, so it can close."""
        wrapped = memoryTransport()
        transport = CoalescingTransport(wrapped)
        transport.registerProducer(Producer(), True)
        self.assertIsNotNone(wrapped.producer)
        transport.unregisterProducer()
        self.assertIsNone(wrapped.producer)

    def test_pullProducerIsFlushedPerRequest(self) -> None:
        """A pull producer is asked for a piece whenever the wrapped transport drained, each piece one write."""
        wrapped = memoryTransport()
        transport = CoalescingTransport(wrapped)
        producer = PullProducer(transport)
        transport.registerProducer(producer, False)
        self.assertEqual(wrapped.writes, [b"piece 1"])
        drain(wrapped)
        self.assertEqual(wrapped.writes, [b"piece 1", b"piece 2"])

    def test_connectionLossStopsProducer(self) -> None:
        """When the wrapped connection is lost the registered producer is stopped."""
        wrapped = memoryTransport()
        transport = CoalescingTransport(wrapped)
        producer = Producer()
        transport.registerProducer(producer, True)
        wrapped.lost(Failure(ConnectionDone()))
        self.assertEqual(producer.calls, ["stop"])

    def test_pauseProducingPausesReading(self) -> None:
        """pauseProducing and resumeProducing control reading and tell the observer."""
        wrapped = memoryTransport()
        seen: list[bool] = []
        transport = CoalescingTransport(wrapped, seen.append)
        transport.pauseProducing()
        self.assertTrue(wrapped.readPaused)
        transport.pauseProducing()
        transport.resumeProducing()
        self.assertFalse(wrapped.readPaused)
        self.assertEqual(seen, [True, False])


class StreamTests(SynchronousTestCase):
    """writeStream: one write per unit, pulled only while the wrapped transport keeps up."""

    def test_oneWritePerUnit(self) -> None:
        """Each unit of a stream is exactly one write."""
        wrapped = RecordingTransport()
        transport = CoalescingTransport(wrapped)
        done = transport.writeStream([[b"a", b"b"], [b"c"], [b"d", b"e", b"f"]])
        self.assertEqual(wrapped.writes, [b"ab", b"c", b"def"])
        self.assertIsNone(self.successResultOf(done))

    def test_pausedTransportStopsPulling(self) -> None:
        """While the wrapped transport is paused no further unit is pulled from the iterator."""
        wrapped = memoryTransport(bufferSize=10)
        transport = CoalescingTransport(wrapped)
        pulled: list[int] = []

        def units() -> Any:
            for i in range(5):
                pulled.append(i)
                yield [b"%d" % i * 8]

        done = transport.writeStream(units())
        self.assertEqual(pulled, [0, 1])
        self.assertNoResult(done)
        drain(wrapped)
        self.assertEqual(pulled, [0, 1, 2, 3])
        drain(wrapped)
        drain(wrapped)
        self.assertEqual(pulled, [0, 1, 2, 3, 4])
        self.assertIsNone(self.successResultOf(done))
        self.assertIsNone(wrapped.producer)

    def test_flushDuringStreamWaits(self) -> None:
        """What is flushed while a stream is unfinished is written after the stream's last unit."""
        wrapped = memoryTransport(bufferSize=1)
        transport = CoalescingTransport(wrapped)
        transport.writeStream([[b"open"], [b"chunk"], [b"close"]])
        transport.write(b"message")
        transport.flush()
        while wrapped.producer is not None:
            drain(wrapped)
        self.assertEqual(wrapped.writes, [b"open", b"chunk", b"close", b"message"])

    def test_iteratorErrorFailsStream(self) -> None:
        """An exception from the stream's iterator fails its Deferred; later writes still go out."""
        wrapped = RecordingTransport()
        transport = CoalescingTransport(wrapped)

        def units() -> Any:
            yield [b"a"]
            raise ValueError("source failed")

        done = transport.writeStream(units())
        self.failureResultOf(done, ValueError)
        transport.write(b"next")
        transport.flush()
        self.assertEqual(wrapped.writes, [b"a", b"next"])

    def test_loseConnectionWaitsForStream(self) -> None:
        """loseConnection() closes the wrapped transport only after queued streams are written."""
        wrapped = memoryTransport(bufferSize=1)
        transport = CoalescingTransport(wrapped)
        done = transport.writeStream([[b"a"], [b"b"]])
        transport.loseConnection()
        self.assertFalse(wrapped.disconnecting)
        drain(wrapped)
        drain(wrapped)
        self.successResultOf(done)
        self.assertTrue(wrapped.disconnecting)

    def test_connectionClosedFailsStreams(self) -> None:
        """Streams still queued when the connection is lost fail with the reason."""
        wrapped = memoryTransport(bufferSize=1)
        transport = CoalescingTransport(wrapped)
        done = transport.writeStream([[b"a"], [b"b"]])
        transport.connectionClosed(Failure(ConnectionDone()))
        self.failureResultOf(done, ConnectionDone)

    def test_abortFailsStreams(self) -> None:
        """abortConnection() drops queued units and fails their streams."""
        wrapped = memoryTransport(bufferSize=1)
        transport = CoalescingTransport(wrapped)
        done = transport.writeStream([[b"a"], [b"b"]])
        transport.abortConnection()
        self.failureResultOf(done, ConnectionDone)
        self.assertTrue(wrapped.aborted)

    def test_streamAfterCloseFails(self) -> None:
        """A stream queued after loseConnection() fails at once."""
        transport = CoalescingTransport(RecordingTransport())
        transport.loseConnection()
        self.failureResultOf(transport.writeStream([[b"a"]]), ConnectionDone)
