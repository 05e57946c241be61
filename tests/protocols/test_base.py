"""Tests for protocols._base.TokenProtocol: delivery, refusal, write counts, failure and flow control."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IPushProducer
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger, formatEvent
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from framing import Decoder, EncodingError, Limits, ProtocolError, Violation, dumps
from framing._decoder import DECODING
from framing._encoder import error_token
from framing._errors import Aborted, BodyTooLarge, BufferLimitExceeded, MalformedHeader, PeerError, error_token_text
from framing._ledger import Ledger, LedgerPool
from framing.bulk._errors import FlowControlError, StreamIdReused
from framing.rpc._errors import UnexpectedAnswer
from framing.wire import BYTES, CLOSE, ERROR, OPEN, PING, PONG, PREAMBLE, encode_header
from protocols import CoalescingTransport, TokenProtocol
from protocols.testing import MemoryPair, RecordingTransport, connectedPair

from .helpers import cancelDropTimers, tokenBytes

RESERVED = b"\xe0"
"""A header byte of reserved kind 0xE: a ProtocolError wherever it appears."""


class Recorder(TokenProtocol):
    """A TokenProtocol that records what it is given, and logs into a list."""

    def __init__(self, limits: Limits | None = None, send: list[Any] | None = None) -> None:
        super().__init__(limits)
        self.received: list[Any] = []
        self.refused: list[Violation] = []
        self.lost: list[Failure] = []
        self.events: list[dict[str, Any]] = []
        self.log = Logger(observer=self.events.append)
        self.sendOnConnect = send or []
        self.pauseAfter: int | None = None

    def connectionMade(self) -> None:
        for obj in self.sendOnConnect:
            self.sendObject(obj)

    def objectReceived(self, obj: Any) -> None:
        self.received.append(obj)
        if self.pauseAfter is not None and len(self.received) >= self.pauseAfter:
            self.transport.pauseProducing()

    def objectRefused(self, violation: Violation) -> None:
        self.refused.append(violation)

    def stopReceiving(self, reason: Failure) -> None:
        self.lost.append(reason)


class Dropper(Recorder):
    """A L{Recorder} that drops the connection when it receives C{"drop"}."""

    def objectReceived(self, obj: Any) -> None:
        super().objectReceived(obj)
        if obj == "drop":
            self.dropConnection(UnexpectedAnswer("dropped"))


class Overrider(TokenProtocol):
    """Overrides connectionLost without calling up, as user code often does, and asks why the connection ended."""

    def __init__(self) -> None:
        super().__init__()
        self.log = Logger(observer=lambda event: None)
        self.lost: list[Failure] = []

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.lost.append(self.lossReason(reason))


def connected(protocol: TokenProtocol) -> RecordingTransport:
    """Connect C{protocol} to a recording transport and feed it the peer's preamble."""
    wrapped = RecordingTransport()
    protocol.makeConnection(wrapped)
    protocol.dataReceived(PREAMBLE)
    return wrapped


class ConnectionSetupTests(SynchronousTestCase):
    """The preamble goes out when the connection is made."""

    def test_preambleIsOneWrite(self) -> None:
        """A protocol that sends nothing on connect writes just the preamble, once."""
        wrapped = RecordingTransport()
        Recorder().makeConnection(wrapped)
        self.assertEqual(wrapped.writes, [PREAMBLE])

    def test_preambleJoinsFirstMessage(self) -> None:
        """What connectionMade sends leaves in the same write as the preamble."""
        wrapped = RecordingTransport()
        Recorder(send=[{"hello": 1}]).makeConnection(wrapped)
        self.assertEqual(wrapped.writes, [dumps({"hello": 1})])

    def test_transportIsCoalescing(self) -> None:
        """The protocol's transport is a CoalescingTransport wrapping the real one."""
        wrapped = RecordingTransport()
        protocol = Recorder()
        protocol.makeConnection(wrapped)
        self.assertIsInstance(protocol.transport, CoalescingTransport)
        self.assertIs(protocol.transport.transport, wrapped)


class WriteCountTests(SynchronousTestCase):
    """One write per message, one per body chunk: the counts the bzr HPSS fix pinned."""

    def setUp(self) -> None:
        self.protocol = Recorder()
        self.wrapped = connected(self.protocol)
        self.wrapped.writes.clear()

    def test_smallMessageIsOneWrite(self) -> None:
        """A small message is one transport write."""
        self.protocol.sendObject(("call", 7, {"arg": [1, 2.5, None]}))
        self.assertEqual(self.wrapped.writes, [tokenBytes(dumps(("call", 7, {"arg": [1, 2.5, None]})))])

    def test_messageWithBodyIsOneWrite(self) -> None:
        """A message carrying a 1 MiB body is one transport write."""
        message = {"id": 1, "body": b"\x01" * (1 << 20), "more": [b"y" * 100_000, "z" * 50_000]}
        self.protocol.sendObject(message)
        self.assertEqual(len(self.wrapped.writes), 1)
        self.assertEqual(self.wrapped.writes[0], tokenBytes(dumps(message)))

    def test_streamIsOneWritePerChunkPlusEnd(self) -> None:
        """A streamed body of N chunks is N writes plus one for its end."""
        chunks = [b"a" * 10, b"b" * 100_000, b"c", b"d" * 70_000]
        done = self.protocol.sendStream(chunks)
        self.successResultOf(done)
        self.assertEqual(len(self.wrapped.writes), len(chunks) + 1)
        decoder = Decoder(preamble=False)
        self.assertEqual(decoder.feed(b"".join(self.wrapped.writes)), [b"".join(chunks)])

    def test_emptyStream(self) -> None:
        """A stream with no chunks is one write (OPEN and CLOSE) and decodes to empty bytes."""
        self.successResultOf(self.protocol.sendStream([]))
        self.assertEqual(len(self.wrapped.writes), 1)
        self.assertEqual(Decoder(preamble=False).feed(self.wrapped.writes[0]), [b""])

    def test_encodingErrorWritesNothing(self) -> None:
        """An object that cannot be encoded raises and writes nothing; the next one goes out whole."""
        self.assertRaises(EncodingError, self.protocol.sendObject, [1, 2, object()])
        self.assertEqual(self.wrapped.writes, [])
        self.protocol.sendObject([3])
        self.assertEqual(self.wrapped.writes, [tokenBytes(dumps([3]))])

    def test_objectsSentCounted(self) -> None:
        """objectsSent counts each object sendObject sent: not one that failed to encode, nor a stream."""
        self.assertEqual(self.protocol.objectsSent, 0)
        self.protocol.sendObject([1, 2])
        self.protocol.sendObject({"body": b"x" * 100_000})
        self.assertRaises(EncodingError, self.protocol.sendObject, [1, object()])
        self.protocol.sendStream([b"not an object sent"])
        self.assertEqual((self.protocol.objectsSent, len(self.wrapped.writes)), (2, 4))

    def test_encodingErrorKeepsPreamble(self) -> None:
        """A failed encode in connectionMade does not lose the preamble waiting to be sent."""
        wrapped = RecordingTransport()

        class Clumsy(Recorder):
            def connectionMade(self) -> None:
                try:
                    self.sendObject(object())
                except EncodingError:
                    pass

        Clumsy().makeConnection(wrapped)
        self.assertEqual(wrapped.writes, [PREAMBLE])

    def test_pingIsAnsweredInOneWrite(self) -> None:
        """PINGs arriving together are answered with PONGs in one write."""
        self.protocol.dataReceived(encode_header(PING, 1) + encode_header(PING, 300))
        self.assertEqual(self.wrapped.writes, [encode_header(PONG, 1) + encode_header(PONG, 300)])

    def test_pingFiresOnItsPong(self) -> None:
        """sendPing writes a PING with a fresh id; the PONG of that id fires its Deferred with the round trip."""
        answers: list[float] = []
        self.protocol.sendPing().addCallback(answers.append)
        self.assertEqual(self.wrapped.writes, [encode_header(PING, 1)])
        self.protocol.dataReceived(encode_header(PONG, 6))
        self.assertEqual(answers, [])
        self.protocol.dataReceived(encode_header(PONG, 1))
        self.assertEqual(len(answers), 1)
        self.assertGreaterEqual(answers[0], 0.0)

    def test_pingFailsWhenLost(self) -> None:
        """A ping still unanswered when the connection is lost fails with the reason."""
        ping = self.protocol.sendPing()
        self.protocol.connectionLost(Failure(ConnectionDone()))
        self.failureResultOf(ping, ConnectionDone)


class ReceiveTests(SynchronousTestCase):
    """Objects and refusals reach their hooks in order; the connection stays up after a refusal."""

    def test_objectsInOrder(self) -> None:
        """Objects arrive in order, whatever the chunking."""
        protocol = Recorder()
        connected(protocol)
        data = b"".join(tokenBytes(dumps(obj)) for obj in (1, "two", [3], {4: b"5"}))
        for i in range(len(data)):
            protocol.dataReceived(data[i : i + 1])
        self.assertEqual(protocol.received, [1, "two", [3], {4: b"5"}])

    def test_refusedObjectKeepsConnection(self) -> None:
        """A refused object reaches objectRefused in its place and the next object still arrives."""
        protocol = Recorder(Limits(max_bytes_length=10))
        wrapped = connected(protocol)
        protocol.dataReceived(tokenBytes(dumps(1)) + tokenBytes(dumps([b"x" * 11])) + tokenBytes(dumps(2)))
        self.assertEqual(protocol.received, [1, 2])
        self.assertEqual([type(v) for v in protocol.refused], [BodyTooLarge])
        self.assertEqual(protocol.refused[0].where, "[0]")
        self.assertFalse(wrapped.disconnecting)

    def test_refusalIsLoggedByDefault(self) -> None:
        """The default objectRefused logs the refusal with its code."""
        events: list[dict[str, Any]] = []
        protocol = TokenProtocol(Limits(max_string_length=1))
        protocol.log = Logger(observer=events.append)
        connected(protocol)
        protocol.dataReceived(tokenBytes(dumps("long")))
        self.assertEqual(len(events), 1)
        self.assertIn("body-too-large", formatEvent(events[0]))


class ProtocolErrorTests(SynchronousTestCase):
    """A broken stream drops the connection: logged, told to the peer, passed to connectionLost."""

    def setUp(self) -> None:
        self.addCleanup(cancelDropTimers)

    def test_garbageDropsConnection(self) -> None:
        """Bytes that are not chunkwire drop the connection, with the reason logged and sent."""
        protocol = Recorder()
        wrapped = RecordingTransport()
        protocol.makeConnection(wrapped)
        protocol.dataReceived(b"GET / HTTP/1.1\r\n\r\n")
        self.assertTrue(wrapped.disconnecting)
        self.assertEqual(len(protocol.events), 1)
        message = formatEvent(protocol.events[0])
        self.assertIn("bad-preamble", message)
        self.assertIn("an HTTP request", message)
        peer = Decoder()
        with self.assertRaises(PeerError) as raised:
            peer.feed(b"".join(wrapped.writes))
        self.assertIn("an HTTP request", str(raised.exception))
        # The ERROR's text begins with the code (wire format, section 4.8).
        self.assertTrue(str(raised.exception).startswith("the peer reported: bad-preamble: "), raised.exception)

    def test_errorTextStartsWithCode(self) -> None:
        """
        Every ERROR a dropped connection sends begins with its code and a
        colon (section 4.8): a bulk stream id reused, a flow-control break;
        an error whose text already begins so (the RPC layer's) is not
        prefixed twice.
        """
        reused = StreamIdReused("stream id 0 announced after stream id 0")
        self.assertEqual(error_token_text(reused), "stream-id-reused: stream id 0 announced after stream id 0")
        flow = FlowControlError("stream 1: 9 bytes sent, 8 granted")
        self.assertEqual(error_token_text(flow), "flow-control: stream 1: 9 bytes sent, 8 granted")
        rule = UnexpectedAnswer("an answer to call 7, which was never made")
        self.assertEqual(error_token_text(rule), "unexpected-answer: an answer to call 7, which was never made")
        protocol = Recorder()
        wrapped = RecordingTransport()
        protocol.makeConnection(wrapped)
        protocol.dropConnection(reused)
        with self.assertRaises(PeerError) as raised:
            Decoder().feed(b"".join(wrapped.writes))
        self.assertEqual(
            str(raised.exception), "the peer reported: stream-id-reused: stream id 0 announced after stream id 0"
        )

    def test_reasonReachesStopReceiving(self) -> None:
        """The receiver's stopReceiving gets the ProtocolError, not the transport's clean-close reason."""
        protocol = Recorder()
        pair = connectedPair(protocol, Recorder())
        protocol.dataReceived(RESERVED)
        pair.flush()
        self.assertEqual(len(protocol.lost), 1)
        protocol.lost[0].trap(MalformedHeader)
        self.assertIsInstance(protocol.failure.value, ProtocolError)  # type: ignore[union-attr]

    def test_reasonReachesOverridingConnectionLost(self) -> None:
        """
        A subclass that overrides connectionLost without calling up gets the
        ProtocolError from lossReason; no method was replaced on the instance for it.
        """
        protocol = Overrider()
        pair = connectedPair(protocol, Recorder())
        protocol.dataReceived(RESERVED)
        pair.flush()
        self.assertEqual(len(protocol.lost), 1)
        self.assertIsInstance(protocol.lost[0].value, ProtocolError)
        self.assertEqual([name for name in ("connectionLost", "dataReceived") if name in vars(protocol)], [])

    def test_objectsBeforeBreakDelivered(self) -> None:
        """Objects completed by the same chunk before the break are delivered before the connection drops."""
        protocol = Recorder()
        wrapped = connected(protocol)
        protocol.dataReceived(tokenBytes(dumps(1)) + tokenBytes(dumps([2])) + RESERVED + tokenBytes(dumps(3)))
        self.assertEqual(protocol.received, [1, [2]])
        self.assertTrue(wrapped.disconnecting)

    def test_nothingDeliveredAfterDropBeforeBreak(self) -> None:
        """
        Of the objects completed before a break, none after one for which
        the receiver dropped the connection is delivered (as without the
        break): a dropped connection acts on nothing more.
        """
        protocol = Dropper()
        wrapped = connected(protocol)
        protocol.dataReceived(tokenBytes(dumps(1)) + tokenBytes(dumps("drop")) + tokenBytes(dumps(3)) + RESERVED)
        self.assertEqual(protocol.received, [1, "drop"])
        self.assertEqual(protocol.failure.value.code, "unexpected-answer")  # type: ignore[union-attr]
        self.assertTrue(wrapped.disconnecting)

    def test_nothingWrittenAfterTheError(self) -> None:
        """
        What is sent after a drop (an answer finishing late, a reply) is
        dropped, not written: the ERROR stays the last token (wire format 4.8).
        """
        protocol = Dropper()
        wrapped = connected(protocol)
        protocol.dataReceived(tokenBytes(dumps("drop")))
        written = b"".join(wrapped.writes)
        self.assertTrue(written.endswith(error_token(UnexpectedAnswer("dropped"))), written)
        protocol.sendObject("late")
        protocol.transport.write(b"raw")
        protocol.transport.flush()
        self.assertEqual(b"".join(wrapped.writes), written)

    def test_nothingDeliveredAfterDrop(self) -> None:
        """(The same read without the break: nothing after the object that dropped the connection.)"""
        protocol = Dropper()
        connected(protocol)
        protocol.dataReceived(tokenBytes(dumps(1)) + tokenBytes(dumps("drop")) + tokenBytes(dumps(3)))
        self.assertEqual(protocol.received, [1, "drop"])

    def test_refusalStillSkippedIsNotReported(self) -> None:
        """A ProtocolError while a refused object is still skipped is the one error the receiver sees."""
        protocol = Recorder(Limits(max_bytes_length=10))
        pair = connectedPair(protocol, Recorder())
        pair.flush()
        skipping = encode_header(OPEN, 4) + b"list" + encode_header(BYTES, 20) + b"x" * 20
        protocol.dataReceived(tokenBytes(dumps(1)) + skipping + encode_header(ERROR, 3) + b"bye")
        pair.flush()
        self.assertEqual((protocol.received, protocol.refused), ([1], []))
        protocol.lost[0].trap(PeerError)

    def test_endedRefusalComesBeforeTheBreak(self) -> None:
        """A refused object that ended before a ProtocolError is refused first, then the connection is dropped."""
        protocol = Recorder(Limits(max_bytes_length=10))
        order: list[str] = []
        protocol.objectRefused = lambda violation: order.append(violation.code)  # type: ignore[method-assign]
        protocol.stopReceiving = lambda reason: order.append(reason.value.code)  # type: ignore[method-assign, union-attr]
        pair = connectedPair(protocol, Recorder())
        pair.flush()
        ended = encode_header(OPEN, 4) + b"list" + encode_header(BYTES, 20) + b"x" * 20 + encode_header(CLOSE, 0)
        protocol.dataReceived(ended + encode_header(ERROR, 3) + b"bye")
        pair.flush()
        self.assertEqual(order, ["body-too-large", "peer-error"])

    def test_peerErrorIsNotAnswered(self) -> None:
        """An ERROR from the peer drops the connection without sending an ERROR back."""
        protocol = Recorder()
        wrapped = connected(protocol)
        wrapped.writes.clear()
        protocol.dataReceived(encode_header(ERROR, 3) + b"bye")
        self.assertEqual(wrapped.writes, [])
        self.assertTrue(wrapped.disconnecting)
        self.assertIn("the peer reported: bye", formatEvent(protocol.events[0]))

    def test_nothingDeliveredAfterError(self) -> None:
        """After a ProtocolError, later data is ignored and nothing more is logged."""
        protocol = Recorder()
        connected(protocol)
        protocol.dataReceived(RESERVED + tokenBytes(dumps(1)))
        protocol.dataReceived(tokenBytes(dumps(2)))
        self.assertEqual(protocol.received, [])
        self.assertEqual(len(protocol.events), 1)

    def test_peerSeesErrorEndToEnd(self) -> None:
        """Over a pair, the peer of a dropped connection learns the reason as a PeerError."""
        server, client = Recorder(), Recorder()
        pair = connectedPair(server, client)
        client.transport.write(encode_header(OPEN, 200) + b"x" * 200)  # an over-long OPEN name is refused, no more
        client.transport.write(RESERVED)  # a reserved token kind breaks the stream
        client.transport.flush()
        pair.flush()
        client.lost[0].trap(PeerError)
        server.lost[0].trap(ProtocolError)


class FlowControlTests(SynchronousTestCase):
    """Pausing the transport holds received objects back, within the buffering limit."""

    def setUp(self) -> None:
        self.addCleanup(cancelDropTimers)

    def test_pauseStopsDelivery(self) -> None:
        """Objects that arrive after the application paused wait until it resumes, in order."""
        protocol = Recorder()
        connected(protocol)
        protocol.pauseAfter = 2
        data = b"".join(tokenBytes(dumps(i)) for i in range(5))
        protocol.dataReceived(data)
        self.assertEqual(protocol.received, [0, 1])
        protocol.dataReceived(tokenBytes(dumps(5)))
        self.assertEqual(protocol.received, [0, 1])
        self.assertEqual(protocol.bufferedBytes, 1)
        protocol.pauseAfter = None
        protocol.transport.resumeProducing()
        self.assertEqual(protocol.received, [0, 1, 2, 3, 4, 5])
        self.assertEqual(protocol.bufferedBytes, 0)

    def test_heldBytesAreBounded(self) -> None:
        """A transport that keeps delivering while paused gets the connection dropped past max_buffered_bytes."""
        protocol = Recorder(Limits(max_buffered_bytes=100))
        wrapped = connected(protocol)
        protocol.transport.pauseProducing()
        protocol.dataReceived(b"\x00" * 100)
        self.assertFalse(wrapped.disconnecting)
        protocol.dataReceived(b"\x00")
        self.assertTrue(wrapped.disconnecting)
        self.assertIsInstance(protocol.failure.value, BufferLimitExceeded)  # type: ignore[union-attr]
        self.assertEqual(protocol.bufferedBytes, 0)

    def test_heldReadsCharged(self) -> None:
        """Reads held while paused are charged to the connection's ledger, and released once decoded."""
        protocol = Recorder()
        connected(protocol)
        protocol.transport.pauseProducing()
        protocol.dataReceived(b"\x00" * 100)
        self.assertEqual(protocol.ledger.holding("held-reads"), 100)
        protocol.transport.resumeProducing()
        self.assertEqual(protocol.ledger.holding("held-reads"), 0)

    def test_resumeInsideObjectReceived(self) -> None:
        """Pausing and resuming inside objectReceived delivers the rest without reordering."""
        order: list[Any] = []

        class Bouncy(Recorder):
            def objectReceived(self, obj: Any) -> None:
                order.append(obj)
                self.transport.pauseProducing()
                self.transport.resumeProducing()

        protocol = Bouncy()
        connected(protocol)
        protocol.dataReceived(b"".join(tokenBytes(dumps(i)) for i in range(4)))
        self.assertEqual(order, [0, 1, 2, 3])

    def test_backPressureReachesSender(self) -> None:
        """A receiver that pauses stops the sender pulling stream chunks; resuming completes the stream."""
        receiver = Recorder()
        sender = Recorder()
        pair = connectedPair(receiver, sender, bufferSize=64 * 1024)
        receiver.transport.pauseProducing()
        pulled: list[int] = []

        def chunks() -> Any:
            for i in range(100):
                pulled.append(i)
                yield bytes([i]) * 16 * 1024

        done = sender.sendStream(chunks())
        pair.flush()
        self.assertLess(len(pulled), 10)
        self.assertLessEqual(receiver.bufferedBytes, receiver.decoder.limits.max_buffered_bytes)
        self.assertNoResult(done)
        receiver.transport.resumeProducing()
        pair.flush()
        self.successResultOf(done)
        self.assertEqual(receiver.received, [b"".join(bytes([i]) * 16 * 1024 for i in range(100))])


class SendFlowControlTests(SynchronousTestCase):
    """An application that sends many objects is paused through the transport when the peer reads slowly."""

    def test_applicationProducerPaused(self) -> None:
        """A producer registered with the protocol's transport is paused by a slow peer and resumed after."""
        receiver, sender = Recorder(), Recorder()
        pair = connectedPair(receiver, sender, bufferSize=1024)
        receiver.transport.pauseProducing()

        @implementer(IPushProducer)
        class Sender:
            paused = False
            sent = 0

            def pauseProducing(self) -> None:
                self.paused = True

            def resumeProducing(self) -> None:
                self.paused = False
                self.pump()

            def stopProducing(self) -> None:
                pass

            def pump(self) -> None:
                while not self.paused and self.sent < 100:
                    self.sent += 1
                    sender.sendObject(b"x" * 100)

        producer = Sender()
        sender.transport.registerProducer(producer, True)
        producer.pump()
        pair.flush()
        self.assertTrue(producer.paused)
        self.assertLess(producer.sent, 20)
        receiver.transport.resumeProducing()
        pair.flush()
        self.assertEqual(producer.sent, 100)
        self.assertEqual(len(receiver.received), 100)


class StreamTests(SynchronousTestCase):
    """Streams end cleanly, abort cleanly, and never interleave with other messages."""

    def test_objectsSentDuringStreamFollowIt(self) -> None:
        """An object sent while a stream is unfinished reaches the peer after the stream."""
        receiver, sender = Recorder(), Recorder()
        pair = connectedPair(receiver, sender, bufferSize=1)
        sender.sendStream([b"a", b"b", b"c"])
        sender.sendObject("after")
        pair.flush()
        self.assertEqual(receiver.received, [b"abc", "after"])

    def test_failingSourceAborts(self) -> None:
        """A chunk source that raises fails sendStream, and the peer refuses the half-sent object as aborted."""
        receiver, sender = Recorder(), Recorder()
        pair = connectedPair(receiver, sender)

        def chunks() -> Any:
            yield b"first"
            raise OSError("disk gone")

        done = sender.sendStream(chunks())
        self.failureResultOf(done, OSError)
        sender.sendObject("next")
        pair.flush()
        self.assertEqual([type(v) for v in receiver.refused], [Aborted])
        self.assertEqual(receiver.received, ["next"])

    def test_lostConnectionFailsStream(self) -> None:
        """A stream still waiting for the peer fails when the connection is lost."""
        receiver, sender = Recorder(), Recorder()
        pair = connectedPair(receiver, sender, bufferSize=1)
        receiver.transport.pauseProducing()
        done: Deferred[None] = sender.sendStream(iter([b"x"] * 10))
        pair.flush()
        pair.serverTransport.abortConnection()
        pair.flush()
        self.failureResultOf(done)

    def test_loseConnectionAfterStream(self) -> None:
        """loseConnection right after sendStream still delivers the whole stream first."""
        receiver, sender = Recorder(), Recorder()
        pair: MemoryPair = connectedPair(receiver, sender, bufferSize=1)
        sender.sendStream([b"1", b"2", b"3"])
        sender.transport.loseConnection()
        pair.flush()
        self.assertEqual(receiver.received, [b"123"])
        receiver.lost[0].trap(ConnectionDone)


class LedgerTests(SynchronousTestCase):
    """Each connection has one ledger, made from its limits; over it, the connection stops reading."""

    def test_overBudgetStopsReading(self) -> None:
        """A charge past Limits.max_connection_memory pauses the wrapped transport; its release resumes it."""
        protocol = TokenProtocol(limits=Limits(max_connection_memory=1000))
        wrapped = RecordingTransport()
        protocol.makeConnection(wrapped)
        self.assertEqual(protocol.ledger.budget, 1000)
        protocol.ledger.charge("test", 1001)
        self.assertEqual(wrapped.producerState, "paused")
        protocol.ledger.release("test", 1001)
        self.assertEqual(wrapped.producerState, "producing")

    def test_objectWithoutRoomRefused(self) -> None:
        """
        An object part-way read when its listener's pool fills is refused
        (resource-exhausted), its charge let go, and the connection reads
        on: never paused, its next object received; another connection of
        the pool that holds nothing reads its objects meanwhile.
        """
        pool = LedgerPool(4 << 20)
        first, second = Recorder(), Recorder()
        for protocol in (first, second):
            protocol.ledgerPool = pool
        transport, _ = connected(first), connected(second)
        whole = tokenBytes(dumps([[index] * 1000 for index in range(40)]))
        first.dataReceived(whole[:30_000])
        self.assertGreater(first.ledger.holding(DECODING), 30_000)
        filler = Ledger(None, pool=pool)
        filler.charge("answers", 4 << 20)
        first.dataReceived(whole[30_000:31_000])
        second.dataReceived(tokenBytes(dumps("other")))
        first.dataReceived(whole[31_000:] + tokenBytes(dumps("next")))
        self.assertEqual([violation.code for violation in first.refused], ["resource-exhausted"])
        self.assertEqual(first.received, ["next"])
        self.assertEqual(second.received, ["other"])
        self.assertEqual(transport.producerState, "producing")
        self.assertEqual(first.ledger.holding(DECODING), 0)
        self.assertIsNone(first.failure)

    def test_closedAtTheEnd(self) -> None:
        """The connection's end lets go of everything its ledger held."""
        protocol = TokenProtocol()
        protocol.makeConnection(RecordingTransport())
        ledger = protocol.ledger
        ledger.charge("test", 10)
        protocol.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(ledger.held, 0)
