"""bulk_cost: the Python a bulk receiver runs per data frame, counted in a real server during a CLI send."""

from __future__ import annotations

import sys

from twisted.trial.unittest import SynchronousTestCase

from tests.benchmarks import bulk_cost

MiB = 1 << 20


def twice(count: int) -> int:
    total = 0
    for _ in range(count):
        total += 2
    return total


class CounterTests(SynchronousTestCase):
    def test_countsWhatRunsWhileOn(self) -> None:
        """
        The counter counts the calls of each function called while it is
        on, and more bytecodes for more work, and nothing once it is off.
        """
        counter = bulk_cost.Counter()
        previous = sys.gettrace()
        sys.settrace(counter.trace)
        try:
            twice(1)
            twice(10)
        finally:
            sys.settrace(previous)
        twice(100)
        [row] = [row for row in counter.rows() if row[4] == "twice"]
        bytecodes, calls = row[0], row[1]
        self.assertEqual(calls, 2)
        # The loop's body runs 11 times in all: each run adds bytecodes.
        self.assertGreater(bytecodes, 11 * 3)
        self.assertLess(bytecodes, 11 * 30)

    def test_namesMethodsWithTheirClass(self) -> None:
        """A method is named with its class, as the report lists it (C{Assembly.write}, not one of two C{write}s)."""
        self.assertEqual(bulk_cost.qualifiedName(sys._getframe()), "CounterTests.test_namesMethodsWithTheirClass")


class MeasureTests(SynchronousTestCase):
    def test_countsFramesReadsAndPieces(self) -> None:
        """
        An 8 MiB CLI send into examples/bulk_server.py is counted: at
        least its 8 data frames of 1 MiB (fewer bytes when credit is
        short makes more), a read and a piece at least per frame's worth
        of data, and the file service's Assembly.write among the functions
        that ran for each frame.
        """
        result = bulk_cost.measure(8 * MiB, top=60)
        self.assertGreaterEqual(result["frames"], 8)
        self.assertGreaterEqual(result["pieces"], result["frames"])
        self.assertGreaterEqual(result["reads"], 8)
        self.assertEqual(result["per_frame"], result["bytecodes"] / result["frames"])
        self.assertEqual(result["per_mib"], result["bytecodes"] / 8)
        # Some hundreds of bytecodes per frame at least: the decoding, the write, the grant.
        self.assertGreater(result["per_frame"], 300)
        functions = [row["function"] for row in result["top"]]
        self.assertTrue(any(name.endswith(" Assembly.write") for name in functions), functions)
        self.assertIn("Assembly.write", bulk_cost.report(result))
