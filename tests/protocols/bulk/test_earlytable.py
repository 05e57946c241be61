"""
Early data held for an announced stream before C{receive()} (L{protocols.bulk._early}), driven directly.

L{tests.protocols.bulk.test_early} checks the same contract end to end, over
a connection; this module checks the table and its pieces on a fake clock.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from framing.bulk._errors import FlowControlError, StreamReset
from framing.bulk._wire import ABORT, END, Control
from protocols.bulk._early import EarlyData, EarlyTable


class EarlyDataTests(SynchronousTestCase):
    """One stream's early data: at most the initial window, kept until received, passed on after."""

    def test_keptWithinWindow(self) -> None:
        """Frames within the initial window are kept in arrival order, views copied to bytes."""
        early = EarlyData(3, 10)
        sink = early.frameStarting(0, 4)
        sink(0, b"abcd")
        early.frameStarting(4, 6)(4, memoryview(b"efghij"))
        self.assertEqual(early.pieces, [(0, b"abcd"), (4, b"efghij")])
        self.assertIs(type(early.pieces[1][1]), bytes)
        self.assertEqual((early.held, early.announced, early.granted), (10, 10, 10))

    def test_pastWindowIsFlowControlError(self) -> None:
        """A frame going past the initial window is the peer breaking flow control; nothing of it is counted."""
        early = EarlyData(3, 10)
        early.frameStarting(0, 8)
        self.assertRaises(FlowControlError, early.frameStarting, 8, 3)
        self.assertEqual(early.announced, 8)

    def test_forwardAfterReceive(self) -> None:
        """Once received, the rest of a frame begun before goes to the receiver, not into C{pieces}."""
        early = EarlyData(3, 10)
        piece = early.frameStarting(0, 6)
        piece(0, b"abc")
        got: list[tuple[int, bytes]] = []
        early.forward = lambda offset, data: got.append((offset, bytes(data)))
        piece(3, b"def")
        self.assertEqual((early.pieces, got), ([(0, b"abc")], [(3, b"def")]))

    def test_dropFreesAndStopsTimer(self) -> None:
        """A dropped stream holds nothing, keeps nothing more, and its timer no longer fires."""
        clock = Clock()
        early = EarlyData(3, 10)
        early.timer = clock.callLater(5, lambda: None)
        early.frameStarting(0, 4)(0, b"abcd")
        reason = StreamReset("cancelled", "gone")
        early.drop(reason)
        early.piece(4, b"more")
        self.assertEqual((early.held, early.dropped, early.timer), (0, reason, None))
        self.assertEqual(clock.getDelayedCalls(), [])


class EarlyTableTests(SynchronousTestCase):
    """A connection's unreceived streams by id: handed over once, dropped on timeout, cleared with the connection."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.timedOut: list[EarlyData] = []
        self.table = EarlyTable(self.clock, self.timedOut.append)

    def test_takeOnce(self) -> None:
        """C{take} hands the early data over once and stops its timeout; a second take gets nothing."""
        early = self.table.add(7, 100, 30.0)
        self.assertIs(self.table.get(7), early)
        self.assertIs(self.table.take(7), early)
        self.assertIsNone(self.table.take(7))
        self.assertEqual((len(self.table), self.clock.getDelayedCalls()), (0, []))
        self.clock.advance(60)
        self.assertEqual(self.timedOut, [])

    def test_timeoutDropsUnread(self) -> None:
        """A stream nobody receives within its timeout leaves the table and is reported, once."""
        early = self.table.add(7, 100, 30.0)
        self.clock.advance(29.9)
        self.assertEqual(self.timedOut, [])
        self.clock.advance(0.1)
        self.assertEqual((self.timedOut, early.timer, len(self.table)), ([early], None, 0))
        self.assertIsNone(self.table.frameStarting(7, 0, 10))

    def test_forgetDropsWithReason(self) -> None:
        """A stream dropped or cancelled unread frees what it held and fails a later receive with "cancelled"."""
        early = self.table.add(7, 100, 30.0)
        self.table.frameStarting(7, 0, 3)(0, b"abc")
        self.table.forget(7)
        self.table.forget(8)
        assert early.dropped is not None
        self.assertEqual((early.held, early.dropped.code, len(self.table)), (0, "cancelled", 0))
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_frameRouting(self) -> None:
        """A frame of a held stream is kept by it (within its window); of an unknown one, dropped (C{None})."""
        early = self.table.add(7, 4, 30.0)
        self.table.frameStarting(7, 0, 4)(0, b"abcd")
        self.assertEqual(early.pieces, [(0, b"abcd")])
        self.assertRaises(FlowControlError, self.table.frameStarting, 7, 4, 1)
        self.assertIsNone(self.table.frameStarting(9, 0, 1))

    def test_endAndAbortKept(self) -> None:
        """An END is kept with its size and digest; an ABORT is kept and frees the data; unknown ids are ignored."""
        ended = self.table.add(1, 100, 30.0)
        aborted = self.table.add(2, 100, 30.0)
        aborted.frameStarting(0, 3)(0, b"abc")
        self.table.endOrAbort(Control((END, 1, 5, b"digest")))
        self.table.endOrAbort(Control((ABORT, 2, "source-failed", "boom")))
        self.table.endOrAbort(Control((END, 3, 5, None)))
        self.assertEqual((ended.ended, ended.aborted), ((5, b"digest"), None))
        self.assertEqual((aborted.aborted, aborted.pieces), (("source-failed", "boom"), []))

    def test_clearStopsTimers(self) -> None:
        """The connection gone: no timeout fires any more and nothing is held."""
        self.table.add(1, 100, 30.0)
        self.table.add(2, 100, 30.0)
        self.table.clear()
        self.assertEqual((len(self.table), self.clock.getDelayedCalls()), (0, []))
        self.clock.advance(60)
        self.assertEqual(self.timedOut, [])
