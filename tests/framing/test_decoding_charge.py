"""What a decoder holds between reads, charged to a ledger: an object with no room is refused, never left half read.

Run on both codec cores (pytest on the compiled one, trial with
C{CHUNKWIRE_PURE=1}): an object that spans reads is built by the Python
unslicers on either, so the charge and the refusal are the same.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Limits, dumps
from framing._decoder import DECODING
from framing._errors import ObjectTooCostly, ResourceExhausted
from framing._ledger import Ledger, LedgerPool
from framing.wire import BYTES, CLOSE, OPEN, PREAMBLE, encode_header

NEXT = dumps("next")[len(PREAMBLE) :]
"""A small valid object, sent after the one refused."""


def lists(count: int = 40) -> bytes:
    """A list of C{count} lists of 1,000 ints (about 80 kB on the wire, past the compiled core's held tail)."""
    return dumps([[index] * 1000 for index in range(count)])


CROWD = 6
"""Ledgers open in the pool beside the two of L{pooled}, holding nothing: each one's fair share is an eighth."""


def pooled(budget: int) -> tuple[Decoder, Ledger, Ledger]:
    """
    A decoder charging a ledger of a pool of C{budget}, and another ledger
    of the same pool, among L{CROWD} more: a fair share (an eighth of the
    pool) is less than the objects these tests send need, so that once the
    other takes the pool they find no room.
    """
    pool = LedgerPool(budget)
    ledger, other = Ledger(None, pool=pool), Ledger(None, pool=pool)
    for _ in range(CROWD):
        Ledger(None, pool=pool)  # (open until closed: counted in the pool's members)
    decoder = Decoder()
    decoder.charge_to(ledger)
    return decoder, ledger, other


def codes(results: list[Any]) -> list[Any]:
    return [getattr(result, "code", result) for result in results]


class ChargeTests(SynchronousTestCase):
    """The object in progress is charged as it grows, and let go when it is complete."""

    def test_chargedAsItGrowsAndReleased(self) -> None:
        """A part-way object is charged (account decoding) more with each read, and nothing once it is complete."""
        decoder, ledger, _ = pooled(64 << 20)
        whole = lists()
        decoder.feed(whole[:30_000])
        first = ledger.holding(DECODING)
        self.assertGreater(first, 30_000)  # (its wire bytes, and what the ints and lists built of them cost)
        self.assertEqual(first, decoder.charged)
        decoder.feed(whole[30_000:60_000])
        self.assertGreater(ledger.holding(DECODING), first)
        results = decoder.feed(whole[60_000:] + NEXT)
        self.assertEqual(len(results[0]), 40)
        self.assertEqual(results[1], "next")
        self.assertEqual((ledger.holding(DECODING), decoder.charged), (0, 0))

    def test_wholeObjectsChargeNothing(self) -> None:
        """Reads of whole objects leave nothing charged."""
        decoder, ledger, _ = pooled(64 << 20)
        results = decoder.feed(PREAMBLE + NEXT * 3)
        self.assertEqual(results, ["next"] * 3)
        self.assertEqual(ledger.accounts(), {})


class RefusalTests(SynchronousTestCase):
    """An object that would hold more than the ledger's pool has room for is refused; the stream reads on."""

    def test_refusedOnceThePoolIsFull(self) -> None:
        """
        Once another connection fills the pool, the object's next read
        refuses it (resource-exhausted) and lets go of its charge; the rest
        of it is skipped and the next object decodes.
        """
        decoder, ledger, other = pooled(4 << 20)
        whole = lists()
        decoder.feed(whole[:30_000])
        other.charge("answers", 4 << 20)
        self.assertEqual(decoder.feed(whole[30_000:31_000]), [])
        self.assertLessEqual(decoder.buffered, 9)  # (a header cut by the read's end, if any: all it holds)
        self.assertEqual(ledger.holding(DECODING), decoder.buffered)
        results = decoder.feed(whole[31_000:] + NEXT)
        self.assertEqual(codes(results), ["resource-exhausted", "next"])
        self.assertIsInstance(results[0], ResourceExhausted)
        self.assertNotIsInstance(results[0], ObjectTooCostly)
        self.assertEqual(ledger.accounts(), {DECODING: 0})
        self.assertEqual(other.held, 4 << 20)

    def test_boundedWithinTheNextRead(self) -> None:
        """
        The room left at one read's end bounds the object through the next
        read as max_object_memory does: an object whose rest arrives in one
        read is refused there once it passes that room, not completed.
        """
        decoder, ledger, other = pooled(2 << 20)
        other.charge("answers", 900_000)
        whole = lists()
        decoder.feed(whole[:30_000])
        self.assertGreater(decoder.charged, 1_000_000)  # (it fit)
        results = decoder.feed(whole[30_000:] + NEXT)
        self.assertEqual(codes(results), ["resource-exhausted", "next"])
        self.assertEqual(ledger.holding(DECODING), 0)

    def test_notRefusedWithoutGrowing(self) -> None:
        """An object that holds no more than it was charged for keeps its charge, whatever the pool holds."""
        decoder, ledger, other = pooled(4 << 20)
        whole = lists()
        decoder.feed(whole[:30_000])
        charged = decoder.charged
        other.charge("answers", 8 << 20)
        self.assertEqual(decoder.feed(b""), [])
        self.assertEqual(ledger.holding(DECODING), charged)
        self.assertEqual(decoder.state, "BUILDING")

    def test_bodyInProgressDropped(self) -> None:
        """A whole body part-way read when its object is refused is let go and the rest of it skipped."""
        decoder, ledger, other = pooled(4 << 20)
        body = b"x" * 1_000_000
        data = PREAMBLE + encode_header(OPEN, 4) + b"list" + encode_header(BYTES, len(body)) + body
        data += encode_header(CLOSE, 0) + NEXT
        decoder.feed(data[:500_000])
        self.assertGreaterEqual(ledger.holding(DECODING), 500_000 - len(PREAMBLE) - 20)
        other.charge("answers", 4 << 20)
        decoder.feed(data[500_000:600_000])
        self.assertEqual((decoder.buffered, ledger.holding(DECODING)), (0, 0))
        self.assertEqual(codes(decoder.feed(data[600_000:])), ["resource-exhausted", "next"])

    def test_topLevelBodyDropped(self) -> None:
        """A top-level body refused part-way is reported at once, and the rest of it skipped."""
        decoder, ledger, other = pooled(4 << 20)
        body = b"y" * 1_000_000
        data = PREAMBLE + encode_header(BYTES, len(body)) + body + NEXT
        decoder.feed(data[:500_000])
        other.charge("answers", 4 << 20)
        self.assertEqual(codes(decoder.feed(data[500_000:600_000])), ["resource-exhausted"])
        self.assertEqual((decoder.buffered, ledger.holding(DECODING)), (0, 0))
        self.assertEqual(decoder.feed(data[600_000:]), ["next"])

    def test_openNameInProgress(self) -> None:
        """Refused while an OPEN's name is part-way read, the container it opens is skipped too."""
        decoder, _, other = pooled(4 << 20)
        whole = lists()
        inner = whole.index(encode_header(OPEN, 4) + b"list", 30_000)
        decoder.feed(whole[: inner + 2])
        other.charge("answers", 4 << 20)
        decoder.feed(whole[inner + 2 : inner + 3])
        self.assertEqual(decoder.state, "DISCARDING")
        self.assertEqual(codes(decoder.feed(whole[inner + 3 :] + NEXT)), ["resource-exhausted", "next"])

    def test_overTheLimitStaysObjectTooCostly(self) -> None:
        """Past max_object_memory itself the refusal is still object-too-costly, room or not."""
        pool = LedgerPool(64 << 20)
        ledger = Ledger(None, pool=pool)
        decoder = Decoder(Limits(max_object_memory=100_000))
        decoder.charge_to(ledger)
        self.assertEqual(codes(decoder.feed(lists() + NEXT)), ["object-too-costly", "next"])
        self.assertEqual(ledger.holding(DECODING), 0)

    def test_nextObjectGetsTheWholeLimit(self) -> None:
        """The room an object was bounded by is its own: the next object may cost up to max_object_memory again."""
        decoder, ledger, other = pooled(4 << 20)
        whole = lists()
        decoder.feed(whole[:30_000])
        other.charge("answers", (4 << 20) - decoder.charged - 1000)
        decoder.feed(whole[30_000:31_000])
        other.release("answers", other.held)
        results = decoder.feed(whole[31_000:] + lists()[len(PREAMBLE) :])
        self.assertEqual(codes(results)[0], "resource-exhausted")
        self.assertEqual(len(results[1]), 40)
        self.assertEqual(ledger.holding(DECODING), 0)

    def test_sameOnEitherCore(self) -> None:
        """The refusal names where the object was when it was refused, the same on both cores."""
        decoder, _, other = pooled(4 << 20)
        whole = lists()
        decoder.feed(whole[:30_000])
        other.charge("answers", 4 << 20)
        decoder.feed(whole[30_000:31_000])
        (refused, _) = decoder.feed(whole[31_000:] + NEXT)
        self.assertRegex(refused.where, r"^\[\d+\]\[\d+\]$")
        self.assertIn("has room for now", str(refused))


class StreamedBodyTests(SynchronousTestCase):
    """A body streamed to its unslicer piece by piece is not held by the decoder, so not charged."""

    def test_streamedBodyNotCharged(self) -> None:
        """Across reads of a streamed body, only the decoder's own holdings are charged, not the body's bytes."""
        from .test_hooks import PieceUnslicer, pieces, pieces_registry

        self.addCleanup(setattr, PieceUnslicer, "log", [])
        decoder = Decoder(registry=pieces_registry())
        ledger = Ledger(None, pool=LedgerPool(64 << 20))
        decoder.charge_to(ledger)
        data = PREAMBLE + pieces(b"z" * 1_000_000, 7)
        for start in range(0, 900_000, 65_536):
            decoder.feed(data[start : start + 65_536])
            self.assertLess(ledger.holding(DECODING), 65_536)
        results = decoder.feed(data[917_504:])
        self.assertEqual(results[0][1], [7])
        self.assertEqual(ledger.holding(DECODING), 0)


class FairShareTests(SynchronousTestCase):
    """One connection holding the pool with one partial object does not starve another's legal large object."""

    def test_honestObjectBesideAHog(self) -> None:
        """
        A hog's partial object takes all the pool lets it (the whole pool,
        free when it began); an honest connection's object of nearly its
        fair share (half the pool) is still accepted, read in pieces; the
        hog's object, growing on past its share, is then refused.
        """
        pool = LedgerPool(4 << 20)
        hog, honest = Ledger(None, pool=pool), Ledger(None, pool=pool)
        hogDecoder, honestDecoder = Decoder(), Decoder()
        hogDecoder.charge_to(hog)
        honestDecoder.charge_to(honest)
        huge = dumps([[index] * 1000 for index in range(400)])
        offset = 0
        while hog.holding(DECODING) < (4 << 20) - (100 << 10):
            self.assertEqual(hogDecoder.feed(huge[offset : offset + 2000]), [])
            self.assertEqual(hogDecoder.state, "BUILDING")
            offset += 2000
        self.assertGreater(pool.held, pool.share())
        legal = lists(30)  # (about 1.6 MB held while it arrives: within its share of 2 MiB)
        results: list[Any] = []
        for start in range(0, len(legal), 16_384):
            results += honestDecoder.feed(legal[start : start + 16_384])
        self.assertEqual([len(result) for result in results], [30])
        self.assertEqual(honest.holding(DECODING), 0)
        hogDecoder.feed(huge[offset : offset + 20_000])
        self.assertEqual(hogDecoder.state, "DISCARDING")
        self.assertEqual(codes(hogDecoder.feed(huge[offset + 20_000 :] + NEXT)), ["resource-exhausted", "next"])
        self.assertEqual(hog.holding(DECODING), 0)
