"""
The receiving side of a bulk channel (L{protocols.bulk._incoming.IncomingSide}), driven directly.

A channel-shaped subclass gives it what L{protocols.bulk.BulkChannel} gives
(options, the peer's HELLO, the early table, the stream table) and records
the control messages it sends; no connection, a fake clock.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from framing.bulk._connection import StreamTable
from framing.bulk._errors import DigestRefused, FlowControlError, HelloMissing, StreamIdReused, TooManyStreams
from framing.bulk._hello import Hello
from framing.bulk._wire import CANCEL, END, HELLO, Control, StreamAnnouncement
from protocols.bulk._early import EarlyTable
from protocols.bulk._incoming import IncomingSide
from protocols.bulk._options import BulkOptions
from protocols.bulk._receiving import IncomingStream


class Channel(IncomingSide):
    """The parts of a channel L{IncomingSide} reads, with the controls it sends kept in C{sent}."""

    def __init__(self, options: BulkOptions, up: bool = True) -> None:
        self.events: list[dict[str, Any]] = []
        self.log = Logger(observer=self.events.append)
        self.options = options
        self.hello = Hello()
        self.hello.peerDigests = options.digests
        self.clock = Clock()
        self.early = EarlyTable(self.clock, self._unreadTimedOut)
        self._up = up
        self.streams = StreamTable(options.maxStreams)
        self.sent: list[tuple[Any, ...]] = []
        self.hellos = 0

    def _peer(self) -> str:
        return "peer"

    def sendControl(self, op: int, streamId: Any, *values: Any) -> None:
        self.sent.append((op, streamId, *values))

    def helloReceived(self) -> None:
        self.hellos += 1


class FakeReceiver:
    """An incoming stream being received: records the frames and END routed to it."""

    heldHere = False

    def __init__(self, streamId: int) -> None:
        self.streamId = streamId
        self.frames: list[tuple[int, int]] = []
        self.ends: list[tuple[int | None, bytes | None]] = []

    def frameStarting(self, offset: int, length: int) -> Any:
        self.frames.append((offset, length))
        return lambda offset, data: None

    def endReceived(self, size: int | None, digest: bytes | None) -> None:
        self.ends.append((size, digest))

    def abortReceived(self, error: BaseException) -> None:
        raise AssertionError("not expected")

    def connectionLost(self, reason: Any) -> None:
        pass


def announce(channel: Channel, streamId: int, digest: str | None = None) -> IncomingStream:
    return channel.announcementReceived(StreamAnnouncement((streamId, 100, digest)))


class AnnouncementTests(SynchronousTestCase):
    """Each announcement is checked: ids increase, at most C{maxStreams} live, a digest this side accepts."""

    def setUp(self) -> None:
        self.options = BulkOptions(maxStreams=2, unreadTimeout=30.0, digests=("sha256",))
        self.channel = Channel(self.options)

    def test_announcedStreamHeld(self) -> None:
        """A new id makes an incoming stream, live, whose early data is held with the initial window."""
        stream = announce(self.channel, 1, "sha256")
        self.assertEqual((stream.streamId, stream.size, stream.digestName), (1, 100, "sha256"))
        self.assertEqual(self.channel.liveIncoming, 1)
        early = self.channel.early.get(1)
        assert early is not None
        self.assertEqual(early.granted, self.options.startWindow)

    def test_idsIncrease(self) -> None:
        """An id not above every id announced before is refused."""
        self.keep = [announce(self.channel, 5)]
        self.assertRaises(StreamIdReused, announce, self.channel, 5)
        self.assertRaises(StreamIdReused, announce, self.channel, 3)

    def test_maxStreams(self) -> None:
        """One live stream more than C{maxStreams} is refused; one over makes room again."""
        self.keep = [announce(self.channel, 1), announce(self.channel, 2)]
        self.assertRaises(TooManyStreams, announce, self.channel, 3)
        self.channel.cancelledUnread(1)
        self.keep.append(announce(self.channel, 4))
        self.assertEqual(self.channel.liveIncoming, 2)

    def test_digestAccepted(self) -> None:
        """A digest this side does not accept is refused, and so is any stream before the peer's HELLO."""
        self.assertRaises(DigestRefused, announce, self.channel, 1, "md5")
        self.channel.hello.peerDigests = None
        self.assertRaises(HelloMissing, announce, self.channel, 2)

    def test_notUpNotHeld(self) -> None:
        """Before the connection is up, a stream is neither live nor held in the early table."""
        channel = Channel(self.options, up=False)
        self.keep = announce(channel, 1)
        self.assertEqual((channel.liveIncoming, len(channel.early)), (0, 0))


class UnreadTests(SynchronousTestCase):
    """A stream nobody receives is dropped after C{unreadTimeout}, and the sender is told."""

    def setUp(self) -> None:
        self.channel = Channel(BulkOptions(unreadTimeout=30.0))

    def test_unreadTimeout(self) -> None:
        """Unread for C{unreadTimeout}: dropped (its data freed), not live, a CANCEL "unread-timeout" sent, logged."""
        stream = announce(self.channel, 1)
        early = self.channel.early.get(1)
        assert early is not None
        self.channel.dataStarting(1, 0, 3)
        self.channel.clock.advance(30.0)
        assert early.dropped is not None
        self.assertEqual((early.dropped.code, early.held, self.channel.liveIncoming), ("unread-timeout", 0, 0))
        self.assertEqual([s[:3] for s in self.channel.sent], [(CANCEL, 1, "unread-timeout")])
        self.assertIn(
            "not received within {timeout} s", " ".join(str(e.get("log_format")) for e in self.channel.events)
        )
        self.assertIsNone(self.channel.earlyData(1))
        del stream

    def test_earlyDataTakenOnce(self) -> None:
        """C{earlyData} hands over what was held once, and the timeout no longer drops it."""
        self.keep = announce(self.channel, 1)
        early = self.channel.earlyData(1)
        self.assertIsNotNone(early)
        self.assertIsNone(self.channel.earlyData(1))
        self.channel.clock.advance(60.0)
        self.assertEqual(self.channel.sent, [])

    def test_droppedAndCancelledUnread(self) -> None:
        """Dropped unread, the sender is told (CANCEL "cancelled"); cancelled unread, nothing more is sent."""
        self.keep = [announce(self.channel, 1), announce(self.channel, 2)]
        self.channel.droppedUnread(1)
        self.channel.cancelledUnread(2)
        self.assertEqual([s[:3] for s in self.channel.sent], [(CANCEL, 1, "cancelled")])
        self.assertEqual((self.channel.liveIncoming, len(self.channel.early)), (0, 0))


class RoutingTests(SynchronousTestCase):
    """Frames and END or ABORT go to the stream's receiver once it receives, to its early data before."""

    def setUp(self) -> None:
        self.options = BulkOptions()
        self.channel = Channel(self.options)

    def test_receiverTable(self) -> None:
        """A receiver started is found by id until it is over; another receiver's end does not remove it."""
        receiver = FakeReceiver(1)
        self.channel.receiverStarted(receiver)
        self.assertEqual((self.channel.receiverFor(1), self.channel.receivers()), (receiver, [receiver]))
        self.channel.receiverOver(FakeReceiver(1))
        self.assertIs(self.channel.receiverFor(1), receiver)
        self.channel.receiverOver(receiver)
        self.assertEqual((self.channel.receiverFor(1), self.channel.receivers()), (None, []))

    def test_framesRouted(self) -> None:
        """A frame goes to its receiver, else to the early data (within its window), else nowhere (C{None})."""
        receiver = FakeReceiver(1)
        self.channel.receiverStarted(receiver)
        self.assertIsNotNone(self.channel.dataStarting(1, 0, 10))
        self.assertEqual(receiver.frames, [(0, 10)])
        self.keep = announce(self.channel, 2)
        piece = self.channel.dataStarting(2, 0, 3)
        assert piece is not None
        piece(0, b"abc")
        early = self.channel.early.get(2)
        assert early is not None
        self.assertEqual(early.pieces, [(0, b"abc")])
        self.assertRaises(FlowControlError, self.channel.dataStarting, 2, 3, self.options.startWindow)
        self.assertIsNone(self.channel.dataStarting(9, 0, 1))

    def test_controlsRouted(self) -> None:
        """An END goes to its receiver, or is kept by an unreceived stream; a HELLO is answered once."""
        receiver = FakeReceiver(1)
        self.channel.receiverStarted(receiver)
        self.keep = announce(self.channel, 2)
        self.channel.controlReceived(Control((END, 1, 10, None)))
        self.channel.controlReceived(Control((END, 2, 20, b"d")))
        self.channel.controlReceived(Control((HELLO, 0, "sha256", 1000)))
        early = self.channel.early.get(2)
        assert early is not None
        self.assertEqual((receiver.ends, early.ended, self.channel.hellos), ([(10, None)], (20, b"d"), 1))

    def test_failingControlLogged(self) -> None:
        """A receiver that raises on a control message is logged; the channel keeps going."""
        receiver = FakeReceiver(1)
        receiver.endReceived = lambda size, digest: 1 / 0  # type: ignore[assignment, method-assign, misc]
        self.channel.receiverStarted(receiver)
        self.channel.controlReceived(Control((END, 1, 10, None)))
        [event] = self.channel.events
        self.assertEqual(event["control"], (END, 1, 10, None))
        self.assertIsInstance(event["log_failure"].value, ZeroDivisionError)

    def test_flowPaused(self) -> None:
        """Flow is paused while a receiver holds its stream here."""
        receiver = FakeReceiver(1)
        self.channel.receiverStarted(receiver)
        self.assertFalse(self.channel.flowPaused)
        receiver.heldHere = True
        self.assertTrue(self.channel.flowPaused)
