"""Tests for the parts of a CoalescingTransport: Outlet, StreamQueue, WriteGate, ReadGate, sockets, Forwarded."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from twisted.internet import tcp
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

import protocols
from protocols import CoalescingTransport
from protocols import _coalescing as coalescing
from protocols import _sockets as sockets
from protocols._forwarding import Forwarded
from protocols._outlet import Outlet
from protocols._readgate import ReadGate
from protocols._streamqueue import StreamQueue
from protocols._writegate import PULL, WriteGate
from protocols.testing import RecordingTransport

from .test_coalescing import Producer


class Calls(Producer):
    """A wrapped transport: a producer (for reading) that also records the producers registered with it."""

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self.calls.append(("register", streaming))

    def unregisterProducer(self) -> None:
        self.calls.append("unregister")


class Owner:
    """Stands in for the transport that owns a gate: records what the gate tells it."""

    def __init__(self) -> None:
        self.told: list[str] = []
        self.gate = WriteGate(self.resumed, self.stopped)

    def resumed(self) -> None:
        self.told.append("resumed")

    def stopped(self) -> None:
        self.told.append("stopped")


def newGate() -> WriteGate:
    """A gate whose owner is gone: its callbacks do nothing."""
    return Owner().gate


def units(*items: bytes, seen: list[bytes] | None = None) -> Iterator[list[bytes]]:
    """A stream whose units are single pieces, noting each one as it is pulled."""
    for item in items:
        if seen is not None:
            seen.append(item)
        yield [item]


def recording(written: list[list[bytes]]) -> Callable[[list[bytes], int], None]:
    """A stream queue's write that notes each write's blocks, once it has checked the size it came with."""

    def write(blocks: list[bytes], size: int) -> None:
        assert size == sum(map(len, blocks)), (blocks, size)
        written.append(blocks)

    return write


class StreamQueueTests(SynchronousTestCase):
    """Streams and the messages behind them leave in order, one unit per write, only while the gate is open."""

    def test_orderAndOneWritePerUnit(self) -> None:
        """A message queued behind a stream is written after the stream's last unit; each unit is one write."""
        queue = StreamQueue(newGate())
        written: list[list[bytes]] = []
        done = queue.addStream(units(b"open", b"chunk", b"close"))
        queue.addMessage([b"after"], 5)
        self.assertEqual(queue.queuedBytes, 5)
        self.assertTrue(queue.pump(recording(written)))
        self.assertEqual(written, [[b"open"], [b"chunk"], [b"close"], [b"after"]])
        self.assertIsNone(self.successResultOf(done))
        self.assertEqual(queue.queuedBytes, 0)

    def test_pausedGatePullsNothing(self) -> None:
        """While the gate is paused no unit is pulled from the stream's iterator."""
        gate = newGate()
        gate.paused = True
        queue = StreamQueue(gate)
        seen: list[bytes] = []
        queue.addStream(units(b"a", b"b", seen=seen))
        self.assertFalse(queue.pump(lambda blocks, size: None))
        self.assertEqual(seen, [])
        self.assertTrue(queue.items)

    def test_pullModeWritesOneUnitPerRequest(self) -> None:
        """Registered as a pull producer, the gate closes after each unit until the consumer asks again."""
        gate = newGate()
        gate.attach(Producer(), False)
        gate.switch(Calls(), False)
        self.assertEqual(gate.mode, PULL)
        queue = StreamQueue(gate)
        written: list[list[bytes]] = []
        queue.addStream(units(b"a", b"b"))
        queue.pump(recording(written))
        self.assertEqual(written, [[b"a"]])
        gate.resumeProducing()
        queue.pump(recording(written))
        self.assertEqual(written, [[b"a"], [b"b"]])

    def test_reentrantPumpDoesNothing(self) -> None:
        """A pump started from inside a write returns at once; the outer pump writes everything in order."""
        queue = StreamQueue(newGate())
        written: list[list[bytes]] = []
        inner: list[bool] = []

        def write(blocks: list[bytes], size: int) -> None:
            written.append(blocks)
            inner.append(queue.pump(write))

        queue.addStream(units(b"a", b"b"))
        self.assertTrue(queue.pump(write))
        self.assertEqual(written, [[b"a"], [b"b"]])
        self.assertEqual(inner, [False, False])

    def test_iteratorErrorFailsStreamOnly(self) -> None:
        """A stream whose iterator raises fails with that error; what is queued after it is still written."""

        def broken() -> Iterator[list[bytes]]:
            yield [b"a"]
            raise ValueError("the source broke")

        queue = StreamQueue(newGate())
        written: list[list[bytes]] = []
        done = queue.addStream(broken())
        queue.addMessage([b"next"], 4)
        queue.pump(recording(written))
        self.failureResultOf(done, ValueError)
        self.assertEqual(written, [[b"a"], [b"next"]])

    def test_abandonFailsStreamsAndDropsMessages(self) -> None:
        """abandon() fails every queued stream with the reason and forgets the queued messages and their bytes."""
        gate = newGate()
        gate.paused = True
        queue = StreamQueue(gate)
        first, second = queue.addStream(units(b"a")), queue.addStream(units(b"b"))
        queue.addMessage([b"message"], 7)
        queue.abandon(ConnectionDone("gone"))
        self.failureResultOf(first, ConnectionDone)
        self.failureResultOf(second, ConnectionDone)
        self.assertEqual((len(queue.items), queue.queuedBytes), (0, 0))

    def test_abandonDuringPumpStopsPulling(self) -> None:
        """A stream abandoned from inside a write is pulled no further, and its Deferred fires once."""
        queue = StreamQueue(newGate())
        seen: list[bytes] = []
        done = queue.addStream(units(b"a", b"b", b"c", seen=seen))
        queue.pump(lambda blocks, size: queue.abandon(ConnectionDone("abandoned")))
        self.assertEqual(seen, [b"a"])
        self.failureResultOf(done, ConnectionDone)


class WriteGateTests(SynchronousTestCase):
    """The gate is registered only while needed, and passes the wrapped transport's word on."""

    def test_registeredOnlyWhileNeeded(self) -> None:
        """switch() registers the gate as a push producer when needed and unregisters it after, once each."""
        gate, wrapped = newGate(), Calls()
        gate.switch(wrapped, True)
        gate.switch(wrapped, True)
        gate.switch(wrapped, False)
        self.assertEqual(wrapped.calls, [("register", True), "unregister"])
        self.assertIsNone(gate.mode)

    def test_producerDecidesMode(self) -> None:
        """With a pull producer attached the gate is registered as a pull producer, needed or not."""
        gate, wrapped = newGate(), Calls()
        gate.attach(Producer(), False)
        gate.switch(wrapped, False)
        self.assertEqual((wrapped.calls, gate.mode), ([("register", False)], PULL))

    def test_pausePassesToPushProducerOnly(self) -> None:
        """A pause from the wrapped transport pauses a push producer; a pull producer is not told."""
        for streaming, expected in ((True, ["pause"]), (False, [])):
            gate, producer = newGate(), Producer()
            gate.attach(producer, streaming)
            gate.pauseProducing()
            self.assertTrue(gate.paused)
            self.assertEqual(producer.calls, expected)

    def test_resumeTellsOwner(self) -> None:
        """A resume opens the gate and tells the owner, which then asks the producer for more."""
        owner, producer = Owner(), Producer()
        owner.gate.attach(producer, False)
        owner.gate.pauseProducing()
        owner.gate.resumeProducing()
        self.assertFalse(owner.gate.paused)
        self.assertEqual(owner.told, ["resumed"])
        self.assertTrue(owner.gate.resumeProducer())
        self.assertEqual(producer.calls, ["resume"])

    def test_stopForgetsRegistration(self) -> None:
        """A stop from the wrapped transport counts the gate unregistered and tells the owner."""
        owner, wrapped = Owner(), Calls()
        owner.gate.switch(wrapped, True)
        owner.gate.stopProducing()
        self.assertEqual((owner.gate.mode, owner.told), (None, ["stopped"]))

    def test_secondProducerRefused(self) -> None:
        """Attaching a second producer raises RuntimeError; detach() returns the first."""
        gate, first = newGate(), Producer()
        gate.attach(first, True)
        self.assertRaises(RuntimeError, gate.attach, Producer(), True)
        self.assertIs(gate.detach(), first)
        self.assertIsNone(gate.producer)

    def test_ownerHeldWeakly(self) -> None:
        """The gate does not keep its owner alive, and a pause or stop after the owner is gone does nothing."""
        gc.disable()
        self.addCleanup(gc.enable)
        owner = Owner()
        gate, alive = owner.gate, weakref.ref(owner)
        del owner
        self.assertIsNone(alive())
        gate.resumeProducing()
        gate.stopProducing()

    def test_transportFreedWithoutCollector(self) -> None:
        """A coalescing transport with a producer and back-pressure is freed by reference counting alone."""
        gc.disable()
        self.addCleanup(gc.enable)
        transport = CoalescingTransport(StringTransport())
        transport.setSendLimits(1024, 0)
        transport.registerProducer(Producer(), True)
        alive = weakref.ref(transport)
        del transport
        self.assertIsNone(alive())


class ReadGateTests(SynchronousTestCase):
    """Reading stops while the application paused it or too much waits to be sent."""

    def test_limitsChecked(self) -> None:
        """A low-water mark above the high-water mark is refused; both are raised to the floor."""
        gate = ReadGate()
        self.assertRaises(ValueError, gate.setLimits, 10, 20, 0)
        gate.setLimits(10, 5, 64)
        self.assertEqual((gate.high, gate.low), (64, 64))
        gate.setLimits(None, 5, 0)
        self.assertIsNone(gate.high)

    def test_backlogHysteresis(self) -> None:
        """Reading stops above the high-water mark and starts again only at the low-water mark."""
        told: list[bool] = []
        gate, wrapped = ReadGate(told.append), Calls()
        gate.setLimits(100, 10, 0)
        for pending in (100, 101, 50, 11, 10):
            gate.checkBacklog(pending, wrapped, False)
        self.assertEqual(wrapped.calls, ["pause", "resume"])
        self.assertEqual(told, [True, False])

    def test_pauseAndBacklogBothHold(self) -> None:
        """Reading stopped by both the application and the backlog starts only when neither holds."""
        gate, wrapped = ReadGate(), Calls()
        gate.setLimits(100, 10, 0)
        gate.pause(wrapped, False)
        gate.checkBacklog(200, wrapped, False)
        gate.resume(wrapped, False)
        self.assertTrue(gate.stopped)
        gate.checkBacklog(0, wrapped, False)
        self.assertEqual(wrapped.calls, ["pause", "resume"])

    def test_closedNeverResumes(self) -> None:
        """On a closed connection the backlog clears, the observer is told, and the transport is not resumed."""
        told: list[bool] = []
        gate, wrapped = ReadGate(told.append), Calls()
        gate.setLimits(100, 10, 0)
        gate.checkBacklog(200, wrapped, False)
        gate.checkBacklog(200, wrapped, True)
        self.assertEqual((wrapped.calls, told, gate.backlogged), (["pause"], [True, False], False))

    def test_overBudgetHolds(self) -> None:
        """A ledger over its budget stops reading; reading starts when it is back within it and nothing else holds."""
        told: list[bool] = []
        gate, wrapped = ReadGate(told.append), Calls()
        gate.setOverBudget(True, wrapped, False)
        gate.pause(wrapped, False)
        gate.setOverBudget(False, wrapped, False)
        self.assertTrue(gate.stopped)
        gate.resume(wrapped, False)
        self.assertEqual((wrapped.calls, told), (["pause", "resume"], [True, False]))


class OutletTests(SynchronousTestCase):
    """Flushed blocks reach the connection in one call each, counted."""

    def outlet(self) -> tuple[Outlet, WriteGate, ReadGate, StreamQueue]:
        gate, reading = newGate(), ReadGate()
        streams = StreamQueue(gate)
        return Outlet(gate, reading, streams), gate, reading, streams

    def test_oneCallPerWrite(self) -> None:
        """One block is one write, several are one writeSequence; writes and bytes are counted."""
        outlet = self.outlet()[0]
        wrapped = RecordingTransport()
        outlet.write(wrapped, [b"one"], 3)
        outlet.write(wrapped, [b"two", b"three"], 8)
        self.assertEqual(wrapped.writes, [b"one", b"twothree"])
        self.assertEqual((outlet.writeCount, outlet.bytesWritten), (2, 11))

    def test_asksForBackPressureOnlyPastTheMark(self) -> None:
        """write() says back-pressure must decide again only once the bound passes the high-water mark."""
        outlet, _, reading, _ = self.outlet()
        wrapped = StringTransport()
        self.assertFalse(outlet.write(wrapped, [b"x" * 100], 100))
        reading.setLimits(150, 0, 0)
        self.assertFalse(outlet.write(wrapped, [b"x" * 100], 100))
        self.assertTrue(outlet.write(wrapped, [b"x" * 100], 100))

    def test_heldRestartsTheBound(self) -> None:
        """held() counts what a transport that cannot say holds as what was written to it while paused."""
        outlet, gate, _, _ = self.outlet()
        wrapped = StringTransport()
        gate.paused = True
        outlet.write(wrapped, [b"x" * 30], 30)
        self.assertEqual((outlet.held(wrapped), outlet.mayHold, outlet.bytesSent(wrapped)), (30, 30, 0))
        outlet.drained()
        self.assertEqual((outlet.held(wrapped), outlet.bytesSent(wrapped)), (0, 30))


class Part:
    def __init__(self) -> None:
        self.value = 1


class Whole:
    value: Forwarded[int] = Forwarded("_part", "value", "The part's value.")
    settable: Forwarded[int] = Forwarded("_part", "value", "The part's value, settable.", settable=True)

    def __init__(self) -> None:
        self._part = Part()


class ForwardedTests(SynchronousTestCase):
    """A forwarded attribute reads (and, if settable, writes) an attribute of one of the instance's parts."""

    def test_reads(self) -> None:
        """Reading the attribute reads the part's."""
        whole = Whole()
        whole._part.value = 7
        self.assertEqual(whole.value, 7)

    def test_readOnly(self) -> None:
        """Assigning a read-only forwarded attribute raises AttributeError and changes nothing."""
        whole = Whole()
        self.assertRaises(AttributeError, setattr, whole, "value", 3)
        self.assertEqual(whole._part.value, 1)

    def test_settable(self) -> None:
        """Assigning a settable forwarded attribute sets the part's."""
        whole = Whole()
        whole.settable = 5
        self.assertEqual(whole._part.value, 5)

    def test_documented(self) -> None:
        """On the class the descriptor itself is found, with its docstring."""
        self.assertEqual(Whole.value.__doc__, "The part's value.")

    def test_transportObserverSettable(self) -> None:
        """A coalescing transport's readingObserver can be set and cleared, as the protocol and breakCycles do."""
        transport = CoalescingTransport(StringTransport())
        observer: Callable[[bool], None] = [].append
        transport.readingObserver = observer
        self.assertIs(transport.readingObserver, observer)
        transport.readingObserver = None
        self.assertIsNone(transport.readingObserver)


class FakeSocket:
    """Takes at most C{limit} bytes per send, as a full socket buffer does; counts its sends."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sends = 0

    def send(self, data: bytes) -> int:
        self.sends += 1
        return min(self.limit, len(data))

    def sendmsg(self, buffers: list[bytes]) -> int:
        self.sends += 1
        return min(self.limit, sum(map(len, buffers)))


class FakeConnection:
    """Not one of Twisted's own connections, though it has a socket."""

    def __init__(self, limit: int) -> None:
        self.socket = FakeSocket(limit)


def socketConnection(limit: int, **state: Any) -> Any:
    """
    One of Twisted's own TCP connections (never connected to anything) with nothing waiting to be sent, whose
    socket takes at most C{limit} bytes per send; C{state} sets its attributes (C{dataBuffer}, C{TLS}, ...).
    """
    connection = tcp.Server.__new__(tcp.Server)
    connection.socket = FakeSocket(limit)
    connection.connected = 1
    connection._tempDataLen = 0
    for name, value in state.items():
        setattr(connection, name, value)
    return connection


class SocketsTests(SynchronousTestCase):
    """What chunkwire knows of Twisted's socket connections, as public names of protocols._sockets."""

    def test_sendNowReturnsTheRest(self) -> None:
        """What the socket did not take comes back, starting inside the block it stopped in."""
        self.assertEqual(sockets.sendNow(socketConnection(5), [b"abc", b"defg"], 7), [b"fg"])
        self.assertEqual(sockets.sendNow(socketConnection(3), [b"abc", b"defg"], 7), [b"defg"])
        self.assertEqual(sockets.sendNow(socketConnection(100), [b"abc", b"defg"], 7), [])
        self.assertEqual(sockets.sendNow(socketConnection(100), [b"abc"], 3), [])
        self.assertEqual(sockets.sendNow(socketConnection(3), [b"abc"], 3), [])
        self.assertEqual(sockets.sendNow(socketConnection(2), [b"abc"], 3), [b"c"])
        self.assertEqual(sockets.sendNow(socketConnection(0), [b"abc"], 3), [b"abc"])

    def test_onlyTwistedSockets(self) -> None:
        """Only Twisted's own socket connections are written to directly: any other gets all of its blocks back."""
        transport = StringTransport()
        self.assertEqual(sockets.sendNow(transport, [b"abc"], 3), [b"abc"])
        self.assertEqual(transport.value(), b"")
        other = FakeConnection(100)
        self.assertEqual(sockets.sendNow(other, [b"abc", b"d"], 4), [b"abc", b"d"])
        self.assertEqual(other.socket.sends, 0)

    def test_onlyWhenNothingWaits(self) -> None:
        """
        A connection that is closing, under TLS, with a write of its own, or with anything waiting in Twisted's
        buffers gets all of its blocks back, its socket untouched; one with nothing waiting sends.
        """
        notNow = [
            {"connected": 0},
            {"disconnecting": True},
            {"_writeDisconnected": True},
            {"TLS": True},
            {"write": lambda data: None},
            {"_tempDataLen": 5},
            {"dataBuffer": b"waiting"},
            {"dataBuffer": b"waiting", "offset": 3},
            # Sent to its end but not yet emptied (Twisted empties it at once): the usual way, to be safe.
            {"dataBuffer": b"sent", "offset": 4},
        ]
        for state in notNow:
            connection = socketConnection(100, **state)
            self.assertEqual((sockets.sendNow(connection, [b"abc"], 3), connection.socket.sends), ([b"abc"], 0))
        # Twisted's state once it has sent everything: dataBuffer b"" at offset 0.
        connection = socketConnection(100, dataBuffer=b"", offset=0)
        self.assertEqual((sockets.sendNow(connection, [b"abc"], 3), connection.socket.sends), ([], 1))

    def test_ownBufferSizeThroughWrappers(self) -> None:
        """A wrapper's buffer size is the one of the transport it wraps; 0 if none says."""
        inner = StringTransport()
        inner.bufferSize = 4096  # type: ignore[attr-defined]
        outer = type("Wrapper", (), {"transport": inner})()
        self.assertEqual(sockets.ownBufferSize(outer), 4096)
        self.assertEqual(sockets.ownBufferSize(object()), 0)

    def test_setNoDelayStillImportableFromCoalescing(self) -> None:
        """protocols._coalescing.setNoDelay is the same function as protocols._sockets.setNoDelay."""
        self.assertIs(coalescing.setNoDelay, sockets.setNoDelay)


def protocolsCalls(action: Callable[[], None]) -> list[str]:
    """The functions of the protocols package that C{action} calls, in order."""
    root = protocols.__file__.rsplit("/", 1)[0] + "/"
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(root):
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return called


class HotPathTests(SynchronousTestCase):
    """Splitting the transport into parts added no call to sending a message."""

    def test_writeAndFlushCalls(self) -> None:
        """With back-pressure on, a write and a flush make five calls in protocols/, as before the split."""
        transport = CoalescingTransport(StringTransport())
        transport.setSendLimits(4 << 20, 1 << 20)

        def send() -> None:
            transport.write(b"message")
            transport.flush()

        self.assertEqual(protocolsCalls(send), ["write", "flush", "flushNow", "write", "sendNow"])

    def test_heldWriteCalls(self) -> None:
        """A message sent during a hold makes seven calls in protocols/, as before the split."""
        transport = CoalescingTransport(StringTransport())
        transport.setSendLimits(4 << 20, 1 << 20)

        def send() -> None:
            transport.hold()
            transport.write(b"message")
            transport.flush()
            transport.release()

        expected = ["hold", "write", "flush", "release", "flushNow", "write", "sendNow"]
        self.assertEqual(protocolsCalls(send), expected)
        self.assertEqual(transport.writeCount, 1)

    def test_directSendCalls(self) -> None:
        """
        On a socket connection of Twisted's own with nothing waiting, a held message reaches the socket in one
        send, and the one call into protocols._sockets both decides that it may and sends.
        """
        connection = socketConnection(1 << 20)
        transport = CoalescingTransport(connection)
        transport.setSendLimits(4 << 20, 1 << 20)

        def send() -> None:
            transport.hold()
            transport.write(b"message")
            transport.flush()
            transport.release()

        expected = ["hold", "write", "flush", "release", "flushNow", "write", "sendNow"]
        self.assertEqual(protocolsCalls(send), expected)
        self.assertEqual((transport.writeCount, transport.bytesWritten, connection.socket.sends), (1, 7, 1))
        self.assertEqual(connection._tempDataLen, 0)

    def test_fewReadsOfTheTransportItself(self) -> None:
        """
        A message sent during a hold reads the coalescing transport itself (whose __getattr__ makes each read
        slow) once per method called on it, for its Flusher, and once for the buffer: the rest is read there.
        """
        read: list[str] = []

        class Watched(CoalescingTransport):
            def __getattribute__(self, name: str) -> Any:
                read.append(name)
                return super().__getattribute__(name)

        transport = Watched(socketConnection(1 << 20))
        transport.setSendLimits(4 << 20, 1 << 20)
        transport.hold()
        transport.hold()
        transport.release()
        del read[:]
        transport.buffer.write_piece(b"message")
        transport.flush()
        transport.release()
        self.assertEqual(read, ["buffer", "flush", "_flusher", "release", "_flusher"])
        self.assertEqual(transport.writeCount, 1)
