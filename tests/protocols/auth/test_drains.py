"""The login throttle's in-process counts (L{protocols.auth._drains}): bounded drain tables, the trusted set."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from protocols.auth._drains import DrainTable, MemoryThrottleState
from protocols.auth._interfaces import IThrottleState


class DrainTableTests(SynchronousTestCase):
    """At most C{capacity} keys; past it the soonest-draining other key is forgotten, never the one being set."""

    def test_getAndPop(self) -> None:
        """A key set reads back its drain time; an unknown or forgotten key reads 0.0."""
        table = DrainTable(4)
        table.set("a", 5.0)
        self.assertEqual((table.get("a"), table.get("b"), len(table)), (5.0, 0.0, 1))
        table.pop("a")
        table.pop("never")
        self.assertEqual((table.get("a"), len(table)), (0.0, 0))

    def test_capacityAtLeastOne(self) -> None:
        """A table of no entries is refused."""
        self.assertRaises(ValueError, DrainTable, 0)

    def test_evictsSoonestDraining(self) -> None:
        """Over capacity, the key that drains soonest goes; the fuller ones stay."""
        table = DrainTable(3)
        for key, until in [("full", 30.0), ("one", 1.0), ("mid", 10.0)]:
            table.set(key, until)
        table.set("new", 2.0)
        self.assertEqual(len(table), 3)
        self.assertEqual([table.get(k) for k in ("full", "one", "mid", "new")], [30.0, 0.0, 10.0, 2.0])

    def test_neverEvictsTheKeyBeingSet(self) -> None:
        """A new key that drains sooner than every other is kept: another one goes instead."""
        table = DrainTable(2)
        table.set("a", 10.0)
        table.set("b", 20.0)
        table.set("c", 1.0)
        self.assertEqual([table.get(k) for k in ("a", "b", "c")], [0.0, 20.0, 1.0])

    def test_staleEntriesSkipped(self) -> None:
        """A key set again later is judged by its new time, and a forgotten key is not evicted twice."""
        table = DrainTable(2)
        table.set("a", 1.0)
        table.set("b", 5.0)
        table.set("a", 50.0)  # its old entry (1.0) is stale now
        table.set("c", 3.0)
        self.assertEqual([table.get(k) for k in ("a", "b", "c")], [50.0, 0.0, 3.0])
        table.pop("c")
        table.set("d", 4.0)
        table.set("e", 5.0)  # c's stale entry (3.0) is popped first, and skipped
        self.assertEqual(len(table), 2)
        self.assertEqual([table.get(k) for k in ("a", "c", "d", "e")], [50.0, 0.0, 0.0, 5.0])

    def test_heapStaysBounded(self) -> None:
        """Setting one key many times does not grow the heap past about twice the table (memory is O(capacity))."""
        table = DrainTable(4)
        for i in range(1000):
            table.set("k", float(i))
        self.assertEqual((len(table), table.get("k")), (1, 999.0))
        self.assertLessEqual(len(table._heap), 2 * len(table) + 16)

    def test_floodKeepsTheFullBucket(self) -> None:
        """A flood of new keys, one attempt each, evicts each other and never a fuller bucket."""
        table = DrainTable(10)
        table.set("guesser", 1000.0)
        for i in range(500):
            table.set(f"flood{i}", 1.0 + i / 1000)
        self.assertEqual((len(table), table.get("guesser")), (10, 1000.0))


class MemoryThrottleStateTests(SynchronousTestCase):
    """The default L{IThrottleState}: two drain tables and a bounded, least-recently-trusted-first set."""

    def test_providesInterface(self) -> None:
        """It provides L{IThrottleState}, as the throttle uses it."""
        self.assertTrue(verifyObject(IThrottleState, MemoryThrottleState()))

    def test_tables(self) -> None:
        """Each named table is its own L{DrainTable} with its own capacity."""
        state = MemoryThrottleState(maxAddresses=1, maxPairs=2)
        with state.atomically():
            state.setUntil("address", "10.0.0.1", 5.0)
            state.setUntil("address", "10.0.0.2", 6.0)
            state.setUntil("pair", "10.0.0.1", 7.0)
        self.assertEqual(
            (state.until("address", "10.0.0.1"), state.until("address", "10.0.0.2"), state.until("pair", "10.0.0.1")),
            (0.0, 6.0, 7.0),
        )
        self.assertEqual((state.size("address"), state.size("pair")), (1, 1))
        state.forget("pair", "10.0.0.1")
        self.assertEqual((state.until("pair", "10.0.0.1"), state.size("pair")), (0.0, 0))

    def test_trustedBounded(self) -> None:
        """Past C{maxTrusted}, the pair trusted least recently is forgotten; trusting again refreshes a pair."""
        state = MemoryThrottleState(maxTrusted=2)
        state.trust("a")
        state.trust("b")
        state.trust("a")
        state.trust("c")
        self.assertEqual([state.isTrusted(k) for k in "abc"], [True, False, True])

    def test_limitsAtLeastOne(self) -> None:
        """No table and no trusted set of size 0."""
        self.assertRaises(ValueError, MemoryThrottleState, maxTrusted=0)
        self.assertRaises(ValueError, MemoryThrottleState, maxAddresses=0)
