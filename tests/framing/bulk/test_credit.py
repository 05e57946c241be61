"""Tests for L{framing.bulk._credit}: a stream never sends past its credit, nor frames smaller than a credit step."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from framing.bulk._credit import SendCredit


class Source:
    """A stream source holding C{size} bytes, taken in order."""

    def __init__(self, size: int) -> None:
        self.data = bytes(range(256)) * (size // 256 + 1)
        self.data = self.data[:size]
        self.offset = 0

    def available(self) -> int:
        return len(self.data) - self.offset

    def take(self, count: int) -> tuple[int, bytes]:
        offset = self.offset
        self.offset += count
        return offset, self.data[offset : offset + count]


class SendCreditTests(SynchronousTestCase):
    """SendCredit sizes frames by the credit the receiver granted."""

    def test_noCreditNoFrame(self) -> None:
        """Without a grant nothing is sent; an empty source sends nothing either."""
        credit = SendCredit()
        self.assertIsNone(credit.take(Source(100), 10))
        credit.grant(50)
        self.assertIsNone(credit.take(Source(0), 10))
        self.assertEqual(credit.remaining, 50)

    def test_fullChunks(self) -> None:
        """With credit for more than a chunk, frames are whole chunks, in order, and the credit is spent."""
        credit = SendCredit()
        credit.firstGrant(1000, grantStep=1000)
        source = Source(300)
        frames = [credit.take(source, 128) for _ in range(3)]
        self.assertEqual([(f[0], len(f[1])) for f in frames if f], [(0, 128), (128, 128), (256, 44)])
        self.assertEqual(credit.remaining, 700)
        self.assertIsNone(credit.take(source, 128))

    def test_neverPastCredit(self) -> None:
        """The bytes sent never pass the bytes granted, however the grants come."""
        credit = SendCredit()
        credit.firstGrant(400, grantStep=64)
        source = Source(10_000)
        sent = 0
        granted = 400
        for _ in range(50):
            frame = credit.take(source, 256)
            while frame is not None:
                sent += len(frame[1])
                frame = credit.take(source, 256)
            self.assertLessEqual(sent, granted)
            credit.grant(37)
            granted += 37
        self.assertEqual(sent + credit.remaining, granted)

    def test_creditStep(self) -> None:
        """Below a credit step (a quarter of the first grant, at most grantStep) a source with more waits."""
        credit = SendCredit()
        credit.firstGrant(400, grantStep=1000)
        self.assertEqual(credit.minFrame, 100)
        source = Source(10_000)
        self.assertEqual(len(credit.take(source, 350)[1]), 350)  # type: ignore[index]
        self.assertTrue(credit.short())
        self.assertIsNone(credit.take(source, 350))  # 50 left: less than a step
        credit.grant(50)
        self.assertFalse(credit.short())
        self.assertEqual(len(credit.take(source, 350)[1]), 100)  # type: ignore[index]
        capped = SendCredit()
        capped.firstGrant(4000, grantStep=64)
        self.assertEqual(capped.minFrame, 64)

    def test_lastBytesBelowStep(self) -> None:
        """A source with less left than a step still sends it: the step only holds back a source with more."""
        credit = SendCredit()
        credit.firstGrant(400, grantStep=1000)
        frame = credit.take(Source(30), 128)
        self.assertEqual(frame, (0, bytes(range(30))))
