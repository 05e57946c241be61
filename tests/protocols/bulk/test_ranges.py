"""Tests for framing.bulk._ranges.RangeSet: the corner cases tcptrace's addseg names, and a model."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from framing.bulk import _ranges as ranges
from framing.bulk._ranges import RangeSet
from tests.properties import examples


def build(*pairs: tuple[int, int]) -> RangeSet:
    return RangeSet(pairs)


class CornerCaseTests(SynchronousTestCase):
    """Every way a new range can meet the ranges held (the cases of tcptrace's addseg test set)."""

    def test_appendInOrder(self) -> None:
        """Ranges arriving in order, each touching the last, stay one range."""
        held = RangeSet()
        for start in range(0, 1000, 10):
            self.assertEqual(held.add(start, start + 10), 10)
        self.assertEqual(held.ranges(), [(0, 1000)])
        self.assertEqual(held.total, 1000)

    def test_noOverlapAfter(self) -> None:
        """A range past the end, with a gap, becomes a new last range."""
        held = build((0, 10))
        self.assertEqual(held.add(20, 30), 10)
        self.assertEqual(held.ranges(), [(0, 10), (20, 30)])

    def test_noOverlapBefore(self) -> None:
        """A range before the first, with a gap, becomes a new first range."""
        held = build((20, 30))
        self.assertEqual(held.add(0, 10), 10)
        self.assertEqual(held.ranges(), [(0, 10), (20, 30)])

    def test_noOverlapBetween(self) -> None:
        """A range in a gap, touching neither side, is inserted between them."""
        held = build((0, 10), (40, 50))
        self.assertEqual(held.add(20, 30), 10)
        self.assertEqual(held.ranges(), [(0, 10), (20, 30), (40, 50)])

    def test_fullOverlapInside(self) -> None:
        """A range inside one held adds nothing."""
        held = build((0, 10), (20, 40))
        self.assertEqual(held.add(25, 35), 0)
        self.assertEqual(held.ranges(), [(0, 10), (20, 40)])

    def test_fullOverlapCovering(self) -> None:
        """A range covering one held replaces it."""
        held = build((0, 10), (20, 30), (50, 60))
        self.assertEqual(held.add(15, 35), 10)
        self.assertEqual(held.ranges(), [(0, 10), (15, 35), (50, 60)])

    def test_overlapOneByteAtStart(self) -> None:
        """A range whose last byte is a held range's first byte merges with it."""
        held = build((0, 5), (20, 30))
        self.assertEqual(held.add(10, 21), 10)
        self.assertEqual(held.ranges(), [(0, 5), (10, 30)])

    def test_overlapOneByteAtEnd(self) -> None:
        """A range whose first byte is a held range's last byte merges with it."""
        held = build((20, 30), (50, 60))
        self.assertEqual(held.add(29, 40), 10)
        self.assertEqual(held.ranges(), [(20, 40), (50, 60)])

    def test_touchingMerges(self) -> None:
        """Ranges that touch without overlapping merge: the set never holds two touching ranges."""
        held = build((0, 10), (20, 30))
        self.assertEqual(held.add(10, 20), 10)
        self.assertEqual(held.ranges(), [(0, 30)])

    def test_repeatOfOldRange(self) -> None:
        """A repeat of a range received long ago adds nothing and changes nothing."""
        held = build((0, 10), (20, 30), (40, 50), (60, 70))
        self.assertEqual(held.add(20, 30), 0)
        self.assertEqual(held.add(0, 10), 0)
        self.assertEqual(held.ranges(), [(0, 10), (20, 30), (40, 50), (60, 70)])

    def test_bridgesTwo(self) -> None:
        """A range overlapping two held ranges joins them into one."""
        held = build((0, 10), (20, 30), (50, 60))
        self.assertEqual(held.add(5, 25), 10)
        self.assertEqual(held.ranges(), [(0, 30), (50, 60)])

    def test_bridgesMany(self) -> None:
        """A range spanning several held ranges swallows them all."""
        held = build((0, 10), (20, 30), (40, 50), (60, 70), (90, 100))
        self.assertEqual(held.add(5, 65), 30)
        self.assertEqual(held.ranges(), [(0, 70), (90, 100)])

    def test_emptyRange(self) -> None:
        """An empty range adds nothing."""
        held = build((0, 10))
        self.assertEqual(held.add(5, 5), 0)
        self.assertEqual(held.add(50, 50), 0)
        self.assertEqual(held.ranges(), [(0, 10)])

    def test_badRange(self) -> None:
        """A negative start or an end before the start is refused."""
        self.assertRaises(ValueError, RangeSet().add, -1, 5)
        self.assertRaises(ValueError, RangeSet().add, 5, 4)


class QueryTests(SynchronousTestCase):
    """What a receiver asks of its ranges."""

    def test_missing(self) -> None:
        """The gaps of an interval are listed in order, clipped to it."""
        held = build((10, 20), (30, 40))
        self.assertEqual(held.missing(0, 50), [(0, 10), (20, 30), (40, 50)])
        self.assertEqual(held.missing(15, 35), [(20, 30)])
        self.assertEqual(held.missing(10, 20), [])
        self.assertEqual(RangeSet().missing(0, 7), [(0, 7)])

    def test_covers(self) -> None:
        """An interval is covered only if one held range contains all of it."""
        held = build((10, 20), (30, 40))
        self.assertTrue(held.covers(12, 20))
        self.assertFalse(held.covers(12, 21))
        self.assertFalse(held.covers(15, 35))
        self.assertTrue(held.covers(5, 5))

    def test_contiguousEnd(self) -> None:
        """The run of held bytes from an offset ends where its range ends, or at the offset if not held."""
        held = build((0, 10), (20, 30))
        self.assertEqual(held.contiguousEnd(0), 10)
        self.assertEqual(held.contiguousEnd(25), 30)
        self.assertEqual(held.contiguousEnd(10), 10)
        self.assertEqual(held.contiguousEnd(15), 15)

    def test_listRoundTrip(self) -> None:
        """toList and fromList round-trip, and fromList refuses what is not a list of pairs of ints."""
        held = build((0, 10), (20, 30))
        self.assertEqual(RangeSet.fromList(held.toList()), held)
        self.assertRaises(ValueError, RangeSet.fromList, [[1, 2, 3]])
        self.assertRaises(ValueError, RangeSet.fromList, [["a", 2]])


class CostTests(SynchronousTestCase):
    """The tail is checked first: appending never searches."""

    def test_appendDoesNotSearch(self) -> None:
        """Adding at or past the end costs no binary search, however many ranges are held."""
        calls: list[str] = []
        original = (ranges.bisect_left, ranges.bisect_right)

        def counting(name: str, function: Any) -> Any:
            def wrapper(*args: Any) -> Any:
                calls.append(name)
                return function(*args)

            return wrapper

        held = RangeSet((i * 10, i * 10 + 5) for i in range(10_000))
        ranges.bisect_left = counting("left", original[0])  # type: ignore[assignment]
        ranges.bisect_right = counting("right", original[1])  # type: ignore[assignment]
        try:
            for start in range(100_000, 101_000, 10):
                held.add(start, start + 10)
            held.add(200_000, 200_001)
            self.assertEqual(calls, [])
            held.add(3, 7)
            self.assertEqual(sorted(set(calls)), ["left", "right"])
        finally:
            ranges.bisect_left, ranges.bisect_right = original  # type: ignore[assignment]


# -- the model -------------------------------------------------------------------------------

LIMIT = 200
RANGE_LISTS = st.lists(
    st.tuples(st.integers(0, LIMIT), st.integers(0, 30)).map(lambda p: (p[0], min(p[0] + p[1], LIMIT))),
    max_size=60,
)


def modelRanges(model: set[int]) -> list[tuple[int, int]]:
    """The model's bytes as maximal runs."""
    result: list[tuple[int, int]] = []
    for offset in sorted(model):
        if result and result[-1][1] == offset:
            result[-1] = (result[-1][0], offset + 1)
        else:
            result.append((offset, offset + 1))
    return result


class ModelTests(SynchronousTestCase):
    """A RangeSet always agrees with a plain set of offsets."""

    @settings(max_examples=examples(400), deadline=None)
    @given(RANGE_LISTS)
    def test_agreesWithModel(self, added: list[tuple[int, int]]) -> None:
        """After any adds the ranges, totals, new-byte counts and gaps match a set of offsets."""
        held = RangeSet()
        model: set[int] = set()
        for start, end in added:
            new = set(range(start, end)) - model
            self.assertEqual(held.add(start, end), len(new))
            model |= new
            self.assertEqual(held.ranges(), modelRanges(model))
            self.assertEqual(held.total, len(model))
        everything = set(range(LIMIT + 5))
        self.assertEqual(held.missing(0, LIMIT + 5), modelRanges(everything - model))
        for offset in range(0, LIMIT, 7):
            end = held.contiguousEnd(offset)
            self.assertTrue(all(o in model for o in range(offset, end)))
            self.assertNotIn(end, model)

    @settings(max_examples=examples(400), deadline=None)
    @given(RANGE_LISTS, st.integers(0, LIMIT), st.integers(-3, 40))
    def test_extendRunAgreesWithModel(self, added: list[tuple[int, int]], start: int, length: int) -> None:
        """
        extendRun(start, end) extends exactly when the set is the one run
        [0, start) (or empty with start 0) and end > start, and then leaves
        what add(start, end) would; else it changes nothing.
        """
        held = RangeSet(added)
        model = {o for s, e in added for o in range(s, e)}
        end = start + length
        runFromZero = model == set(range(start))
        before = held.ranges()
        extended = held.extendRun(start, end)
        self.assertEqual(extended, runFromZero and end > start)
        if extended:
            model |= set(range(start, end))
            self.assertEqual(held.ranges(), modelRanges(model))
            self.assertEqual(held.total, len(model))
        else:
            self.assertEqual(held.ranges(), before)
            self.assertEqual(held.total, len(model))

    @settings(max_examples=examples(200), deadline=None)
    @given(RANGE_LISTS, st.integers(0, LIMIT), st.integers(0, 40))
    def test_coversAgreesWithModel(self, added: list[tuple[int, int]], start: int, length: int) -> None:
        """covers() is true exactly when the model holds every offset of the interval."""
        held = RangeSet(added)
        model = {o for s, e in added for o in range(s, e)}
        self.assertEqual(held.covers(start, start + length), all(o in model for o in range(start, start + length)))
