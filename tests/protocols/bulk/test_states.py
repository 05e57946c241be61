"""Tests for the streams' transition tables and the host protocol between streams and their channel."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from framing import EncodingError
from framing.bulk.wire import ABORT, CANCEL, DONE, END, GRANT
from protocols.bulk import (
    BulkBroker,
    BulkBrokerFactory,
    BulkChannel,
    BulkOptions,
    FlowControlError,
    IllegalTransition,
    IncomingStream,
    Receiver,
    Stream,
    StreamReset,
    bulkOf,
    callingChannel,
)
from protocols.bulk.receiving import RECEIVING_TRANSITIONS, ReceiveEvent, ReceiveState
from protocols.bulk.sending import SENDING_TRANSITIONS, SendEvent, SendState
from protocols.bulk.sinks import CallbackSink
from protocols.bulk.tuning import RoundTrips
from protocols.interfaces import IBrokerExtension
from protocols.rpc import Broker, remote
from protocols.rpc.streams import ObjectStreams

from .support import SMALL, BulkPair, Store, payload

S, SE = SendState, SendEvent
R, RE = ReceiveState, ReceiveEvent

SENDING_EXPECTED = {
    (S.NEW, SE.ANNOUNCE): S.ANNOUNCED,
    (S.ANNOUNCED, SE.TAKE_BACK): S.NEW,
    (S.ANNOUNCED, SE.START): S.SENDING,
    (S.SENDING, SE.ALL_SENT): S.ENDING,
    (S.ENDING, SE.END_SENT): S.ENDED,
    (S.ANNOUNCED, SE.DONE): S.FINISHED,
    (S.SENDING, SE.DONE): S.FINISHED,
    (S.ENDING, SE.DONE): S.FINISHED,
    (S.ENDED, SE.DONE): S.FINISHED,
    (S.NEW, SE.FAIL): S.FINISHED,
    (S.ANNOUNCED, SE.FAIL): S.FINISHED,
    (S.SENDING, SE.FAIL): S.FINISHED,
    (S.ENDING, SE.FAIL): S.FINISHED,
    (S.ENDED, SE.FAIL): S.FINISHED,
}

RECEIVING_EXPECTED = {
    (R.IDLE, RE.START): R.RECEIVING,
    (R.RECEIVING, RE.END): R.ENDED,
    (R.ENDED, RE.ALL_RELEASED): R.VERIFYING,
    (R.VERIFYING, RE.COMPLETED): R.DONE,
    (R.IDLE, RE.FAIL): R.FAILED,
    (R.RECEIVING, RE.FAIL): R.FAILED,
    (R.ENDED, RE.FAIL): R.FAILED,
    (R.VERIFYING, RE.FAIL): R.FAILED,
}


class SendingTableTests(SynchronousTestCase):
    """The sending side's transition table."""

    def test_everyLegalTransition(self) -> None:
        """Each legal (state, event) pair leads to its documented state, and there are no others."""
        for (state, event), after in SENDING_EXPECTED.items():
            self.assertIs(SENDING_TRANSITIONS.next(state, event), after, (state, event))
        self.assertEqual(SENDING_TRANSITIONS.table, SENDING_EXPECTED)

    def test_everyIllegalTransitionRaises(self) -> None:
        """Every pair missing from the table raises IllegalTransition naming the machine, state and event."""
        for state in S:
            for event in SE:
                if (state, event) in SENDING_EXPECTED:
                    continue
                with self.assertRaises(IllegalTransition) as raised:
                    SENDING_TRANSITIONS.next(state, event)
                self.assertEqual(
                    (raised.exception.machine, raised.exception.state, raised.exception.event),
                    ("sending", state.name, event.name),
                )

    def test_finishedIsFinal(self) -> None:
        """Nothing leaves FINISHED: a finished stream cannot be started again."""
        with self.assertRaises(IllegalTransition):
            SENDING_TRANSITIONS.next(S.FINISHED, SE.START)

    def test_sendingTwiceIsIllegal(self) -> None:
        """Announcing a stream that was already sent raises IllegalTransition (a RuntimeError)."""
        stream = Stream(b"abc")
        stream.announce(RecordingHost(), 1)
        with self.assertRaises(IllegalTransition):
            stream.announce(RecordingHost(), 2)
        self.assertIsInstance(IllegalTransition("sending", "A", "B"), RuntimeError)


class ReceivingTableTests(SynchronousTestCase):
    """The receiving side's transition table."""

    def test_everyLegalTransition(self) -> None:
        """Each legal (state, event) pair leads to its documented state, and there are no others."""
        for (state, event), after in RECEIVING_EXPECTED.items():
            self.assertIs(RECEIVING_TRANSITIONS.next(state, event), after, (state, event))
        self.assertEqual(RECEIVING_TRANSITIONS.table, RECEIVING_EXPECTED)

    def test_everyIllegalTransitionRaises(self) -> None:
        """Every pair missing from the table raises IllegalTransition naming the machine, state and event."""
        for state in R:
            for event in RE:
                if (state, event) in RECEIVING_EXPECTED:
                    continue
                with self.assertRaises(IllegalTransition) as raised:
                    RECEIVING_TRANSITIONS.next(state, event)
                self.assertEqual(raised.exception.machine, "receiving")


class RecordingHost:
    """
    An L{protocols.bulk.IStreamHost} that records what streams ask of it,
    with no connection behind it.
    """

    def __init__(self, options: BulkOptions = SMALL) -> None:
        self.options = options
        self.clock = Clock()
        self.hashReactor = None
        self.roundTrips = RoundTrips(self.clock, lambda: None)  # type: ignore[arg-type,return-value]
        self.up = True
        self.autotuning = False
        self.readSize = None
        self.protocol = None
        self.calls: list[tuple[Any, ...]] = []

    def sendControl(self, op: int, streamId: Any, *values: Any) -> None:
        self.calls.append(("control", op, streamId, *values))

    def sendData(self, streamId: int, offset: int, data: bytes) -> None:
        self.calls.append(("data", streamId, offset, len(data)))

    def wake(self, stream: Any) -> None:
        self.calls.append(("wake",))
        while stream.sendOne():
            pass

    def wakeSoon(self, stream: Any) -> None:
        self.calls.append(("wakeSoon",))

    def streamOver(self, stream: Any) -> None:
        self.calls.append(("streamOver", stream.streamId))

    def receiverStarted(self, receiver: Any) -> None:
        self.calls.append(("receiverStarted", receiver.streamId))

    def receiverOver(self, receiver: Any) -> None:
        self.calls.append(("receiverOver", receiver.streamId))

    def droppedUnread(self, streamId: int) -> None:
        self.calls.append(("droppedUnread", streamId))

    def cancelledUnread(self, streamId: int) -> None:
        self.calls.append(("cancelledUnread", streamId))

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [call for call in self.calls if call[0] == name]


class SendingHostTests(SynchronousTestCase):
    """A Stream runs against any IStreamHost, asking it only for what the protocol names."""

    def test_wholeLife(self) -> None:
        """A stream goes NEW, ANNOUNCED, SENDING, ENDED, FINISHED, sending frames, END and forgetting itself."""
        host = RecordingHost()
        data = payload(40_000)
        stream = Stream(data, digest=None)
        self.assertIs(stream.state, S.NEW)
        stream.announce(host, 5)
        self.assertIs(stream.state, S.ANNOUNCED)
        stream.grantReceived(len(data))
        self.assertIs(stream.state, S.ENDED)
        self.assertEqual(sum(call[3] for call in host.named("data")), len(data))
        self.assertEqual(host.named("control"), [("control", END, 5, len(data), None)])
        stream.doneReceived(None)
        self.assertIs(stream.state, S.FINISHED)
        self.assertEqual(host.named("streamOver"), [("streamOver", 5)])
        self.assertEqual(self.successResultOf(stream.whenDone()).transferred, len(data))

    def test_creditBoundsFrames(self) -> None:
        """A stream sends no more than its credit, then waits in SENDING for the next grant."""
        host = RecordingHost()
        stream = Stream(payload(100_000), digest=None)
        stream.announce(host, 1)
        stream.grantReceived(20_000)
        self.assertIs(stream.state, S.SENDING)
        sent = sum(call[3] for call in host.named("data"))
        self.assertGreater(sent, 0)
        self.assertLessEqual(sent, 20_000)

    def test_takeBack(self) -> None:
        """A stream taken back is NEW again, with no id, and can be announced anew."""
        stream = Stream(b"abc")
        stream.announce(RecordingHost(), 3)
        stream.takeBack()
        self.assertIs(stream.state, S.NEW)
        self.assertIsNone(stream.streamId)
        stream.announce(RecordingHost(), 4)
        self.assertEqual(stream.streamId, 4)

    def test_abortTellsReceiver(self) -> None:
        """Aborting an announced stream sends ABORT through the host and fails it with StreamReset."""
        host = RecordingHost()
        stream = Stream(b"abc")
        stream.announce(host, 2)
        stream.abort("no")
        self.assertEqual(host.named("control"), [("control", ABORT, 2, "cancelled", "cancelled: no")])
        self.assertIs(stream.state, S.FINISHED)
        self.failureResultOf(stream.whenDone(), StreamReset)

    def test_callCancelled(self) -> None:
        """A cancelled call fails a stream that already started and tells the receiver."""
        host = RecordingHost()
        stream = Stream(payload(100_000), digest=None)
        stream.announce(host, 2)
        stream.grantReceived(10_000)
        stream.callFailed(Failure(CancelledError()))  # type: ignore[no-untyped-call]
        self.assertEqual(host.named("control")[-1][:4], ("control", ABORT, 2, "cancelled"))
        self.assertIsInstance(stream.failure.value, StreamReset)  # type: ignore[union-attr]

    def test_sequentialSourceWakesSoon(self) -> None:
        """What a producer writes to a sending stream asks the host for an end-of-turn send."""
        host = RecordingHost()
        stream = Stream(digest=None)
        stream.announce(host, 1)
        stream.grantReceived(10_000)
        stream.write(b"x" * 100)
        self.assertEqual(host.named("wakeSoon"), [("wakeSoon",)])


class ReceivingHostTests(SynchronousTestCase):
    """A Receiver runs against any IStreamHost."""

    def receiver(self, host: RecordingHost, size: int, pieces: list[bytes]) -> Receiver:
        return Receiver(host, 9, size, None, CallbackSink(pieces.append), True, None)

    def test_wholeLife(self) -> None:
        """A receiver grants its window, takes pieces, and on END completes: DONE sent, forgotten."""
        host = RecordingHost()
        pieces: list[bytes] = []
        receiver = self.receiver(host, 1000, pieces)
        done = receiver.start()
        self.assertIs(receiver.state, R.RECEIVING)
        self.assertEqual(host.calls[:2], [("receiverStarted", 9), ("control", GRANT, 9, receiver.window)])
        deliver = receiver.frameStarting(0, 1000)
        assert deliver is not None
        deliver(0, b"y" * 1000)
        receiver.endReceived(1000, None)
        self.assertIs(receiver.state, R.DONE)
        self.assertEqual(host.named("control")[-1], ("control", DONE, 9, None))
        self.assertEqual(host.named("receiverOver"), [("receiverOver", 9)])
        self.assertEqual(self.successResultOf(done).size, 1000)
        self.assertEqual(b"".join(pieces), b"y" * 1000)

    def test_pastCredit(self) -> None:
        """A frame past the credit granted raises FlowControlError (the peer broke the protocol)."""
        host = RecordingHost()
        receiver = self.receiver(host, 10 * SMALL.window, [])
        receiver.start()
        self.assertRaises(FlowControlError, receiver.frameStarting, 0, receiver.window + 1)

    def test_repeatedEndIgnored(self) -> None:
        """An END after the first changes nothing (no illegal transition from the peer's doing)."""
        host = RecordingHost()
        receiver = self.receiver(host, 10, [])
        done = receiver.start()
        deliver = receiver.frameStarting(0, 10)
        assert deliver is not None
        deliver(0, b"z" * 10)
        receiver.endReceived(10, None)
        receiver.endReceived(10, None)
        self.assertIs(receiver.state, R.DONE)
        self.assertEqual(len([call for call in host.named("control") if call[1] == DONE]), 1)
        self.successResultOf(done)

    def test_cancelBeforeReceiving(self) -> None:
        """Cancelling an unread incoming stream tells the host and sends CANCEL."""
        host = RecordingHost()
        incoming = IncomingStream(host, 4, 10, None)
        incoming.cancel("nope")
        self.assertEqual(host.calls, [("cancelledUnread", 4), ("control", CANCEL, 4, "cancelled", "nope")])


class SendTransactionTests(SynchronousTestCase):
    """A stream registers on the message's send transaction."""

    def test_outsideSendRefused(self) -> None:
        """Encoding a Stream outside a send (no encoder.outgoing) is refused with EncodingError."""
        pair = BulkPair(Store())
        with self.assertRaises(EncodingError):
            pair.client.connection.encoder.encode(Stream(b"abc"))

    def test_rolledBackStreamIsNew(self) -> None:
        """A message that fails to encode leaves its stream NEW, with no id and nothing in the channel."""
        pair = BulkPair(Store())
        stream = Stream(b"abc")
        self.failureResultOf(pair.root.callRemote("keep", [stream, object()]), EncodingError)
        self.assertIs(stream.state, S.NEW)
        self.assertEqual(pair.client.bulk.streamCount, 0)

    def test_controlOpsRouted(self) -> None:
        """The ops a sender receives (GRANT, DONE, CANCEL) and a receiver receives (END, ABORT) are the wire's."""
        self.assertEqual(sorted((GRANT, END, DONE, CANCEL, ABORT)), [0, 1, 2, 3, 4])


class ExtensionTests(SynchronousTestCase):
    """The bulk channel is an extension a plain RPC broker loads."""

    def test_plainBroker(self) -> None:
        """BulkBroker builds a plain Broker (no subclass) that loaded one BulkChannel (after the object streams
        every broker loads), named by .bulk and bulkOf."""
        broker = BulkBroker(clock=Clock(), options=SMALL)
        self.assertIs(type(broker), Broker)
        channel = bulkOf(broker)
        self.assertIsInstance(channel, BulkChannel)
        self.assertEqual([type(extension) for extension in broker.extensions], [ObjectStreams, BulkChannel])
        self.assertIs(broker.extensions[1], channel)
        self.assertIs(broker.bulk, channel)  # type: ignore[attr-defined]
        self.assertTrue(verifyObject(IBrokerExtension, channel))
        self.assertIsNone(bulkOf(Broker()))

    def test_factoryBuildsBulkBrokers(self) -> None:
        """BulkBrokerFactory's connections are those of plain brokers carrying bulk, with the factory's options."""
        options = BulkOptions(window=64 * 1024)
        factory = BulkBrokerFactory(Store(), clock=Clock(), options=options)
        connection = factory.buildProtocol(None)
        channel = bulkOf(connection.receiver)
        assert channel is not None
        self.assertIs(channel.options, options)
        self.assertIs(connection.receiver.factory, factory)

    def test_callingChannel(self) -> None:
        """Inside a remote method, callingChannel names the channel of the connection that called it."""
        seen: list[Any] = []

        class Root(Store):
            @remote
            def where(self) -> None:
                seen.append(callingChannel())

        pair = BulkPair(Root())
        pair.root.callRemote("where")
        pair.flush()
        self.assertEqual(seen, [pair.server.bulk])  # type: ignore[attr-defined]
        self.assertIsNone(callingChannel())
