"""Tests for the streams' transition tables and the host protocol between streams and their channel."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from framing import EncodingError
from framing.bulk._connection import StreamTable
from framing.bulk._hello import Hello
from framing.bulk._states import (
    RECEIVING_TRANSITIONS,
    SENDING_TRANSITIONS,
    ReceiveEvent,
    ReceiveState,
    SendEvent,
    SendState,
)
from framing.bulk._streams import IncomingTransfer, SendStream
from framing.bulk._wire import ABORT, CANCEL, DONE, END, GRANT, Control
from protocols._interfaces import IBrokerExtension
from protocols.bulk import (
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
from protocols.bulk._sinks import CallbackSink
from protocols.bulk._tuning import RoundTrips
from protocols.rpc import Broker, BrokerFactory, remote
from protocols.rpc._streams import ObjectStreams

from .support import SMALL, BulkPair, Store, payload

S, SE = SendState, SendEvent


def announce(stream: Stream, host: Any, streamId: int) -> None:
    """As a channel announces C{stream}: it is C{streamId}, sent by C{host}."""
    stream.announcing(streamId, stream.digestName)
    stream.attach(host)


R, RE = ReceiveState, ReceiveEvent

SENDING_EXPECTED = {
    (S.NEW, SE.ANNOUNCE): S.ANNOUNCED,
    (S.ANNOUNCED, SE.TAKE_BACK): S.NEW,
    (S.ANNOUNCED, SE.START): S.SENDING,
    (S.SENDING, SE.ALL_SENT): S.ENDING,
    (S.ENDING, SE.END_SENT): S.ENDED,
    (S.ANNOUNCED, SE.DONE): S.DELIVERED,
    (S.SENDING, SE.DONE): S.DELIVERED,
    (S.ENDING, SE.DONE): S.DELIVERED,
    (S.ENDED, SE.DONE): S.DELIVERED,
    (S.NEW, SE.FAIL): S.FAILED,
    (S.ANNOUNCED, SE.FAIL): S.FAILED,
    (S.SENDING, SE.FAIL): S.FAILED,
    (S.ENDING, SE.FAIL): S.FAILED,
    (S.ENDED, SE.FAIL): S.FAILED,
}

RECEIVING_EXPECTED = {
    (R.ANNOUNCED, RE.START): R.RECEIVING,
    (R.RECEIVING, RE.END): R.ENDED,
    (R.ENDED, RE.ALL_RELEASED): R.VERIFYING,
    (R.VERIFYING, RE.COMPLETED): R.DONE,
    (R.ANNOUNCED, RE.FAIL): R.FAILED,
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

    def test_overIsFinal(self) -> None:
        """Nothing leaves DELIVERED or FAILED: a stream that is over cannot be started again."""
        for over in (S.DELIVERED, S.FAILED):
            for event in SE:
                with self.assertRaises(IllegalTransition):
                    SENDING_TRANSITIONS.next(over, event)

    def test_sendingTwiceIsIllegal(self) -> None:
        """Announcing a stream that was already sent raises IllegalTransition (a RuntimeError); it keeps its id."""
        stream = Stream(b"abc")
        table: StreamTable[Stream, Any] = StreamTable()
        table.reserve(stream, Hello(), ())
        with self.assertRaises(IllegalTransition):
            table.reserve(stream, Hello(), ())
        self.assertEqual((stream.streamId, list(table.sending)), (1, [1]))
        self.assertIsInstance(IllegalTransition("sending", "A", "B"), RuntimeError)


class OneTableTests(SynchronousTestCase):
    """Every shell's streams are in the states of framing.bulk._states, defined there alone."""

    def test_sameStates(self) -> None:
        """A Twisted Stream and a client's SendStream start in the same state object; a Receiver and an
        IncomingTransfer likewise."""
        self.assertIs(Stream(b"abc").state, SendStream(Stream(b"abc").source, 3).state)
        receiver = Receiver(RecordingHost(), 1, 3, None, CallbackSink(lambda data: None), True, None)
        self.assertIs(receiver.state, IncomingTransfer(1, 3, None).state)

    def test_definedOnce(self) -> None:
        """No bulk module but framing.bulk._states defines a state or event class or a transition table."""
        import inspect

        import framing.bulk._streams
        import protocols.bulk._receiving
        import protocols.bulk._sending

        for module in (framing.bulk._streams, protocols.bulk._receiving, protocols.bulk._sending):
            source = inspect.getsource(module)
            self.assertNotIn("class SendState", source)
            self.assertNotIn("class ReceiveState", source)
            self.assertNotIn("Transitions(", source)


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
        """A stream goes NEW, ANNOUNCED, SENDING, ENDED, DELIVERED, sending frames, END and forgetting itself."""
        host = RecordingHost()
        data = payload(40_000)
        stream = Stream(data, digest=None)
        self.assertIs(stream.state, S.NEW)
        announce(stream, host, 5)
        self.assertIs(stream.state, S.ANNOUNCED)
        stream.grantReceived(len(data))
        self.assertIs(stream.state, S.ENDED)
        self.assertEqual(sum(call[3] for call in host.named("data")), len(data))
        self.assertEqual(host.named("control"), [("control", END, 5, len(data), None)])
        stream.doneReceived(None)
        self.assertIs(stream.state, S.DELIVERED)
        self.assertEqual(host.named("streamOver"), [("streamOver", 5)])
        self.assertEqual(self.successResultOf(stream.whenDone()).transferred, len(data))

    def test_creditBoundsFrames(self) -> None:
        """A stream sends no more than its credit, then waits in SENDING for the next grant."""
        host = RecordingHost()
        stream = Stream(payload(100_000), digest=None)
        announce(stream, host, 1)
        stream.grantReceived(20_000)
        self.assertIs(stream.state, S.SENDING)
        sent = sum(call[3] for call in host.named("data"))
        self.assertGreater(sent, 0)
        self.assertLessEqual(sent, 20_000)

    def test_takeBack(self) -> None:
        """A stream taken back is NEW again, with no id, and can be announced anew with a new id."""
        stream = Stream(b"abc")
        table: StreamTable[Stream, Any] = StreamTable()
        table.reserve(stream, Hello(), ())
        table.takeBack(stream, 1)
        self.assertIs(stream.state, S.NEW)
        self.assertIsNone(stream.streamId)
        self.assertEqual(table.sending, {})
        self.assertEqual(table.reserve(stream, Hello(), ()), 2)

    def test_abortTellsReceiver(self) -> None:
        """Aborting an announced stream sends ABORT through the host and fails it with StreamReset."""
        host = RecordingHost()
        stream = Stream(b"abc")
        announce(stream, host, 2)
        stream.abort("no")
        self.assertEqual(host.named("control"), [("control", ABORT, 2, "cancelled", "cancelled: no")])
        self.assertIs(stream.state, S.FAILED)
        self.failureResultOf(stream.whenDone(), StreamReset)

    def test_callCancelled(self) -> None:
        """A cancelled call fails a stream that already started and tells the receiver."""
        host = RecordingHost()
        stream = Stream(payload(100_000), digest=None)
        announce(stream, host, 2)
        stream.grantReceived(10_000)
        stream.callFailed(Failure(CancelledError()))  # type: ignore[no-untyped-call]
        self.assertEqual(host.named("control")[-1][:4], ("control", ABORT, 2, "cancelled"))
        self.assertIsInstance(stream.failure.value, StreamReset)  # type: ignore[union-attr]

    def test_sequentialSourceWakesSoon(self) -> None:
        """What a producer writes to a sending stream asks the host for an end-of-turn send."""
        host = RecordingHost()
        stream = Stream(digest=None)
        announce(stream, host, 1)
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

    def test_grantBeforeHelloIgnored(self) -> None:
        """A GRANT that comes before the peer's HELLO (a peer breaking 5.5.3) starts nothing: the stream waits,
        announced, for the HELLO, and then goes as usual (framing.bulk._connection.dispatch)."""
        pair = BulkPair(Store())
        data = payload(1000)
        stream = Stream(data)
        done = pair.root.callRemote("upload", stream)
        pair.client.bulk.controlReceived(Control((GRANT, 1, 100_000)))  # type: ignore[attr-defined]
        self.assertIs(stream.state, S.ANNOUNCED)
        pair.flush()
        self.assertIs(stream.state, S.DELIVERED)
        self.successResultOf(done)

    def test_controlOpsRouted(self) -> None:
        """The ops a sender receives (GRANT, DONE, CANCEL) and a receiver receives (END, ABORT) are the wire's."""
        self.assertEqual(sorted((GRANT, END, DONE, CANCEL, ABORT)), [0, 1, 2, 3, 4])


class ExtensionTests(SynchronousTestCase):
    """The bulk channel is an extension a plain RPC broker loads."""

    def test_plainBroker(self) -> None:
        """Broker(bulk=...) builds a plain Broker (no subclass) that loaded one BulkChannel (after the object
        streams every broker loads), named by .bulk and bulkOf."""
        broker = Broker(clock=Clock(), bulk=SMALL)
        self.assertIs(type(broker), Broker)
        channel = bulkOf(broker)
        self.assertIsInstance(channel, BulkChannel)
        self.assertEqual([type(extension) for extension in broker.extensions], [ObjectStreams, BulkChannel])
        self.assertIs(broker.extensions[1], channel)
        self.assertIs(broker.bulk, channel)
        self.assertTrue(verifyObject(IBrokerExtension, channel))
        self.assertIsNone(bulkOf(Broker()))
        self.assertIsNone(Broker().bulk)

    def test_factoryBuildsBulkBrokers(self) -> None:
        """A BrokerFactory with bulk settings makes the connections of plain brokers carrying bulk with them."""
        options = BulkOptions(window=64 * 1024)
        factory = BrokerFactory(Store(), clock=Clock(), bulk=options)
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
