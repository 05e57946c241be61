"""Tests for framing.bulk._connection: the bulk rules every shell shares (announcements, dispatch, credit, checks)."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing.bulk._connection import (
    Announcements,
    ReceiveCredit,
    ReceiveSide,
    SendSide,
    StreamTable,
    cancelCode,
    digestProblem,
    dispatch,
    endSize,
    frameProblem,
    resetFrom,
    resetMessage,
)
from framing.bulk._digests import NEGOTIATED, DigestUnavailable, IntegrityError
from framing.bulk._errors import FlowControlError, IllegalTransition, StreamIdReused, StreamReset, TooManyStreams
from framing.bulk._hello import Hello
from framing.bulk._states import ReceiveEvent, SendEvent
from framing.bulk._states import ReceiveState as R
from framing.bulk._states import SendState as S
from framing.bulk._wire import ABORT, CANCEL, DONE, END, GRANT, HELLO, Control


class Recorder:
    """A sending and receiving end that records what dispatch calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def grantReceived(self, count: int) -> None:
        self.calls.append(("grant", count))

    def doneReceived(self, digest: bytes | None) -> None:
        self.calls.append(("done", digest))

    def cancelReceived(self, error: BaseException) -> None:
        self.calls.append(("cancel", error))

    def endReceived(self, size: int | None, digest: bytes | None) -> None:
        self.calls.append(("end", size, digest))

    def abortReceived(self, error: BaseException) -> None:
        self.calls.append(("abort", error))


class DispatchTests(SynchronousTestCase):
    """One dispatch: each op to the stream of the direction it names."""

    def test_routes(self) -> None:
        """GRANT, DONE, CANCEL go to the stream this side sends; END, ABORT to the one it receives (same id)."""
        sending, receiving = Recorder(), Recorder()
        for control in (
            (GRANT, 1, 100),
            (DONE, 1, b"d"),
            (CANCEL, 1, "integrity", "bad"),
            (END, 1, 10, b"e"),
            (ABORT, 1, "source-failed", "gone"),
        ):
            self.assertFalse(dispatch(Control(control), {1: sending}, {1: receiving}))
        self.assertEqual(sending.calls[:2], [("grant", 100), ("done", b"d")])
        self.assertIsInstance(sending.calls[2][1], IntegrityError)
        self.assertEqual(receiving.calls[0], ("end", 10, b"e"))
        abort = receiving.calls[1][1]
        self.assertEqual((type(abort), abort.code), (StreamReset, "source-failed"))

    def test_hello(self) -> None:
        """A HELLO is reported to the caller, to no stream."""
        self.assertTrue(dispatch(Control((HELLO, 0, "sha256", 0)), {}, {}))

    def test_unknownIgnored(self) -> None:
        """A message for a stream not in the table is ignored; an END or ABORT for one goes to unreceived if given."""
        unreceived: list[Any] = []
        dispatch(Control((GRANT, 7, 1)), {}, {})
        dispatch(Control((END, 7, 1, None)), {}, {}, unreceived.append)
        dispatch(Control((DONE, 7, None)), {}, {}, unreceived.append)
        self.assertEqual([tuple(control) for control in unreceived], [(END, 7, 1, None)])

    def test_grantBeforeHello(self) -> None:
        """A GRANT before the peer's HELLO is ignored (its sender breaks 5.5.3); other messages are not."""
        sending = Recorder()
        dispatch(Control((GRANT, 1, 100)), {1: sending}, {}, helloKnown=False)
        dispatch(Control((DONE, 1, None)), {1: sending}, {}, helloKnown=False)
        self.assertEqual(sending.calls, [("done", None)])

    def test_resetFrom(self) -> None:
        """CANCEL or ABORT integrity means IntegrityError, any other code a StreamReset with that code."""
        self.assertIsInstance(resetFrom("integrity", "x"), IntegrityError)
        self.assertEqual(resetFrom("size", "x").code, "size")  # type: ignore[attr-defined]


class AnnouncementTests(SynchronousTestCase):
    """A peer's announcements (5.5.2)."""

    def test_idsIncrease(self) -> None:
        """Ids must increase (gaps allowed); a repeated, lower or non-INT id is StreamIdReused."""
        announcements = Announcements()
        self.assertEqual(announcements.check(1, 0), 1)
        self.assertEqual(announcements.check(5, 0), 5)
        for bad in (5, 2, "6", True):
            self.assertRaises(StreamIdReused, announcements.check, bad, 0)

    def test_liveCap(self) -> None:
        """One stream past maxLive is TooManyStreams; no cap without one."""
        self.assertRaises(TooManyStreams, Announcements(2).check, 1, 2)
        self.assertEqual(Announcements().check(1, 10_000), 1)


class StreamTableTests(SynchronousTestCase):
    """One connection's streams both ways."""

    def test_table(self) -> None:
        """Each direction has its ids: the same id routes GRANT to the stream sent, END to the one received; the
        peer's live streams count against the cap."""
        table: StreamTable[Recorder, Recorder] = StreamTable(maxLive=1)
        sending, receiving = Recorder(), Recorder()
        table.sending[1], table.receiving[table.check(1)] = sending, receiving
        table.live.add(1)
        self.assertEqual(len(table), 2)
        self.assertRaises(TooManyStreams, table.check, 2)
        table.dispatch(Control((GRANT, 1, 5)), True)
        table.dispatch(Control((END, 1, 5, None)), True)
        self.assertEqual((sending.calls, receiving.calls), ([("grant", 5)], [("end", 5, None)]))


class ReservationTests(SynchronousTestCase):
    """The ids of the streams this side sends (StreamTable.reserve, takeBack), one rule for every shell."""

    def test_idsIncrease(self) -> None:
        """Each stream announced gets the next id, is ANNOUNCED and in the sending table; an id taken back is not
        given again."""
        table: StreamTable[SendSide, Any] = StreamTable()
        first, second, third = SendSide(), SendSide(), SendSide()
        for stream in (first, second, third):
            stream.digestName = None
        self.assertEqual(table.reserve(first, Hello(), ()), 1)
        self.assertEqual(table.reserve(second, Hello(), ()), 2)
        table.takeBack(second, 2)
        self.assertEqual((second.state, second.streamId), (S.NEW, None))
        self.assertEqual(table.reserve(third, Hello(), ()), 3)
        self.assertEqual(table.sending, {1: first, 3: third})
        self.assertIs(first.state, S.ANNOUNCED)

    def test_digestSettled(self) -> None:
        """Once the peer's HELLO is known, the negotiated digest is settled as the stream is announced; with none in
        common the stream stays NEW, out of the table, and no id is used."""
        hello = Hello()
        hello.decoded(Control((HELLO, 0, "sha256", 0)))
        table: StreamTable[SendSide, Any] = StreamTable()
        stream = SendSide()
        stream.digestName = NEGOTIATED
        table.reserve(stream, hello, ("blake3", "sha256"))
        self.assertEqual(stream.digestName, "sha256")
        refused = SendSide()
        refused.digestName = NEGOTIATED
        self.assertRaises(DigestUnavailable, table.reserve, refused, hello, ("blake3",))
        self.assertEqual((refused.state, len(table.sending), table.lastSentId), (S.NEW, 1, 1))

    def test_onceOnly(self) -> None:
        """A stream is announced once: again is an IllegalTransition, and the table is unchanged."""
        table: StreamTable[SendSide, Any] = StreamTable()
        stream = SendSide()
        stream.digestName = None
        table.reserve(stream, Hello(), ())
        self.assertRaises(IllegalTransition, table.reserve, stream, Hello(), ())
        self.assertEqual((stream.streamId, table.lastSentId), (1, 1))


class ReceiveSideTests(SynchronousTestCase):
    """A receiving stream's END and DONE (5.5.4), one rule for every shell."""

    def receiving(self) -> ReceiveSide:
        stream = ReceiveSide()
        stream.streamId = 6
        stream.advance(ReceiveEvent.START)
        return stream

    def test_endDone(self) -> None:
        """END ends a stream being received (a repeated one changes nothing); all released, the END's size is
        checked; DONE says it is whole."""
        stream = self.receiving()
        self.assertIs(stream.ending(), True)
        self.assertIs(stream.ending(), False)
        self.assertEqual(stream.allReleased(5, 5, whole=True), 5)
        self.assertIs(stream.state, R.VERIFYING)
        self.assertEqual(tuple(stream.doneMessage(b"d")), (DONE, 6, b"d"))
        self.assertIs(stream.state, R.DONE)
        self.assertIs(stream.failing(), False)

    def test_endSizeWrong(self) -> None:
        """An END stating another size than a whole stream received is a StreamReset size; a stream of ranges (not
        whole) takes the END's size; an END with none is refused either way."""
        stream = self.receiving()
        stream.ending()
        with self.assertRaises(StreamReset) as raised:
            stream.allReleased(4, 5, whole=True)
        self.assertEqual(raised.exception.code, "size")
        self.assertIs(stream.failing(), True)
        self.assertIs(stream.state, R.FAILED)
        ranges = self.receiving()
        ranges.ending()
        self.assertEqual(ranges.allReleased(4, 5, whole=False), 5)
        unsized = self.receiving()
        unsized.ending()
        self.assertRaises(StreamReset, unsized.allReleased, 4, None, whole=False)

    def test_endBeforeReceiving(self) -> None:
        """An END for a stream not being received (announced, failed) changes nothing."""
        stream = ReceiveSide()
        self.assertIs(stream.ending(), False)
        self.assertIs(stream.state, R.ANNOUNCED)


class ReceiveCreditTests(SynchronousTestCase):
    """A receiving stream's credit (5.5.3)."""

    def test_pastCredit(self) -> None:
        """Frames within the credit are counted; one byte past it is FlowControlError."""
        credit = ReceiveCredit(100, 25)
        self.assertEqual(credit.firstGrant(0), 100)
        credit.frameAnnounced(1, 60)
        credit.frameAnnounced(1, 40)
        self.assertRaises(FlowControlError, credit.frameAnnounced, 1, 1)

    def test_steps(self) -> None:
        """Credit goes back only in steps of at least grantStep, keeping the window ahead of what is released."""
        credit = ReceiveCredit(100, 25)
        credit.firstGrant(0)
        self.assertEqual(credit.due(24), 0)
        self.assertEqual(credit.due(30), 30)
        self.assertEqual(credit.granted, 130)

    def test_senderShort(self) -> None:
        """The stream is held here once the sender has less than a step of credit left."""
        credit = ReceiveCredit(100, 25)
        credit.firstGrant(0)
        credit.frameAnnounced(1, 75)
        self.assertFalse(credit.senderShort)
        credit.frameAnnounced(1, 1)
        self.assertTrue(credit.senderShort)


class CheckTests(SynchronousTestCase):
    """Where a frame may lie, and how END is checked (5.5.3, 5.5.4)."""

    def test_frameProblem(self) -> None:
        """out-of-order for an in-order receiver's misplaced frame, size past the announced size, else none."""
        self.assertIsNone(frameProblem(10, 5, 10, 15))
        self.assertEqual(frameProblem(11, 5, 10, None).code, "out-of-order")  # type: ignore[union-attr]
        self.assertEqual(frameProblem(10, 6, None, 15).code, "size")  # type: ignore[union-attr]

    def test_endSize(self) -> None:
        """END without a size, or with another than received for a whole stream, is a reset with code size."""
        self.assertEqual(endSize(10, 10), 10)
        self.assertEqual(endSize(4, 10, whole=False), 10)
        for received, size in ((9, 10), (10, None)):
            with self.assertRaises(StreamReset) as raised:
                endSize(received, size)
            self.assertEqual(raised.exception.code, "size")

    def test_digestProblem(self) -> None:
        """No digest, or another than computed, is an IntegrityError carrying both in hex."""
        self.assertIsNone(digestProblem("sha256", b"a", b"a"))
        self.assertIsNone(digestProblem("sha256", b"a", None))
        self.assertIsInstance(digestProblem("sha256", None, None), IntegrityError)
        error = digestProblem("sha256", b"\x01", b"\x02")
        assert error is not None
        self.assertEqual((error.expected, error.actual), ("01", "02"))

    def test_cancelCode(self) -> None:
        """A reset cancels with its code, an IntegrityError with integrity, anything else with cancelled."""
        self.assertEqual(cancelCode(StreamReset("size", "x")), "size")
        self.assertEqual(cancelCode(IntegrityError("x")), "integrity")
        self.assertEqual(cancelCode(OSError("x")), "cancelled")


class SendSideTests(SynchronousTestCase):
    """A sending stream's credit and what a failed call does to it (5.5.2, 5.5.3)."""

    def announced(self) -> SendSide:
        stream = SendSide()
        stream.advance(SendEvent.ANNOUNCE)
        return stream

    def test_credit(self) -> None:
        """The first credit starts the stream (True), later credit adds (False), after END it changes nothing (None)."""
        stream = self.announced()
        self.assertIs(stream.creditArrived(400, 512, heard=False), True)
        self.assertEqual(
            (stream.state, stream.credit.remaining, stream.credit.minFrame, stream.heard), (S.SENDING, 400, 100, False)
        )
        self.assertIs(stream.creditArrived(100, 512), False)
        self.assertEqual((stream.credit.remaining, stream.heard), (500, True))
        stream.advance(SendEvent.ALL_SENT)
        stream.advance(SendEvent.END_SENT)
        self.assertIsNone(stream.creditArrived(100, 512))
        self.assertEqual(stream.credit.remaining, 500)

    def test_callFailure(self) -> None:
        """Unheard: given up, ABORT only once it began sending; heard: goes on unless the call was cancelled."""
        stream = self.announced()
        self.assertEqual(stream.callFailure(False), (True, None))
        stream.creditArrived(10, 512, heard=False)
        self.assertEqual(stream.callFailure(False), (True, "cancelled"))
        stream.creditArrived(10, 512)
        self.assertEqual(stream.callFailure(False), (False, None))
        self.assertEqual(stream.callFailure(True), (True, "cancelled"))
        stream.advance(SendEvent.DONE)
        self.assertEqual(stream.callFailure(True), (False, None))

    def sending(self, size: int | None) -> SendSide:
        stream = self.announced()
        stream.streamId, stream.size = 4, size
        stream.creditArrived(10, 512)
        return stream

    def test_end(self) -> None:
        """All sent, the END states the announced size (an object's, given None) or what a sequential source gave,
        with the digest; the stream goes ENDING, then ENDED."""
        for size, given in ((7, None), (7, 7), (None, 9)):
            stream = self.sending(size)
            self.assertEqual(stream.allSent(given), size or given)
            self.assertIs(stream.state, S.ENDING)
            self.assertEqual(tuple(stream.endMessage(b"d")), (END, 4, size or given, b"d"))
            self.assertIs(stream.state, S.ENDED)

    def test_endSizeWrong(self) -> None:
        """A sequential source that gave another size than announced (or no size known at all) is a StreamReset
        with code size: the stream is given up (ABORT size) rather than ended."""
        for size, given in ((7, 6), (7, 8), (None, None)):
            stream = self.sending(size)
            with self.assertRaises(StreamReset) as raised:
                stream.allSent(given)
            self.assertEqual(raised.exception.code, "size")

    def test_resetMessage(self) -> None:
        """A CANCEL or ABORT carries the code and the error as text for people."""
        message = resetMessage(ABORT, 3, "cancelled", StreamReset("cancelled", "no"))
        self.assertEqual(tuple(message), (ABORT, 3, "cancelled", "cancelled: no"))
