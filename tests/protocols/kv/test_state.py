"""Tests for L{protocols.kv._state}: a service's own state store, its Deferreds, its limits and its tidying."""

from __future__ import annotations

from pathlib import Path

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from protocols.kv import ListTooLarge, StoreFull
from protocols.kv._sqlite import SQLiteStorage
from protocols.kv._state import MEMORY, TIDY_INTERVAL, StateStore, openState
from protocols.kv._storage import MemoryStorage, StoreLimits
from protocols.kv._threads import InlineCalls


class MemoryStateTests(SynchronousTestCase):
    """openState(MEMORY) serves get, put, delete and keys at once, held to its limits."""

    def test_calls(self) -> None:
        """A put is read back, keys are listed by prefix in order, and only the first delete finds the key."""
        state = openState(Clock(), MEMORY)
        self.assertIsInstance(state.storage, MemoryStorage)
        self.assertIsNone(self.successResultOf(state.get("job/1")))
        for key in ("job/2", "job/1", "other"):
            self.assertIsNone(self.successResultOf(state.put(key, "v " + key)))
        self.assertEqual(self.successResultOf(state.get("job/1")), "v job/1")
        self.assertEqual(self.successResultOf(state.keys("job/")), ["job/1", "job/2"])
        self.assertTrue(self.successResultOf(state.delete("job/1")))
        self.assertFalse(self.successResultOf(state.delete("job/1")))
        state.close()

    def test_limits(self) -> None:
        """Past maxKeys a put fails with StoreFull (nothing changed); a listing past maxListBytes with ListTooLarge."""
        state = openState(Clock(), MEMORY, StoreLimits(maxKeys=2, maxListBytes=8))
        self.successResultOf(state.put("a", "1"))
        self.successResultOf(state.put("b", "2"))
        self.failureResultOf(state.put("c", "3"), StoreFull)
        self.assertIsNone(self.successResultOf(state.get("c")))
        self.successResultOf(state.put("a", "changed"))
        self.assertEqual(self.successResultOf(state.get("a")), "changed")
        big = openState(Clock(), MEMORY, StoreLimits(maxListBytes=8))
        for key in ("long key one", "long key two"):
            self.successResultOf(big.put(key, ""))
        self.failureResultOf(big.keys(), ListTooLarge)


class TidyingTests(SynchronousTestCase):
    """A durable store forgets its change log every TIDY_INTERVAL seconds after writes, and only then."""

    def test_tidied(self) -> None:
        """After a write the next interval forgets the logged changes (the sequence goes on), and tidying stays due."""
        clock = Clock()
        storage = SQLiteStorage(str(Path(self.mktemp() + ".sqlite3")))
        state = StateStore(storage, InlineCalls(), clock=clock)
        self.addCleanup(state.close)
        changes = storage.changeLog
        assert changes is not None
        self.successResultOf(state.put("k", "v"))
        last = changes.lastChange()
        self.assertEqual(len(changes.changesSince(0, 100)), 1)
        clock.advance(TIDY_INTERVAL)
        self.assertEqual(changes.changesSince(0, 100), [])
        self.assertEqual(changes.lastChange(), last)
        self.assertEqual(clock.getDelayedCalls()[0].getTime(), 2 * TIDY_INTERVAL)
