"""The kv store on SQLite: storage, persistence, and watches fired by a change made through another store on the file.

Two L{KeyValueStore}s on one file stand for two worker processes: each has
its own connection to the database and its own clock (trial's C{Clock}),
which the tests advance to make its change feed poll.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import globalLogPublisher
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from protocols.kv import POLL_INTERVAL, KeyNotFound, KeyValueStore, SQLiteStorage, StoreUnavailable
from protocols.kv._feed import PRUNE_EVERY, RETENTION
from protocols.kv._sqlite import prefixEnd
from protocols.kv._threads import InlineCalls
from protocols.rpc import SERVER_CALL_LIMITS

from ..rpc.services import RpcPair
from .test_store import Watcher


def run(done: Deferred[Any]) -> Any:
    """The result of a call of the store, a Deferred that has fired (none of its methods waits)."""
    results: list[Any] = []
    done.addBoth(results.append)
    (result,) = results
    if isinstance(result, Failure):
        result.raiseException()
    return result


class SQLiteStorageTests(SynchronousTestCase):
    """L{SQLiteStorage} alone."""

    def setUp(self) -> None:
        self.path = self.mktemp() + ".sqlite"
        self.storage = self.open()

    def open(self, **kwargs: Any) -> SQLiteStorage:
        storage = SQLiteStorage(self.path, **kwargs)
        self.addCleanup(storage.close)
        return storage

    def test_putGetDelete(self) -> None:
        """A value put is got back, replaced by the next put, gone once deleted (delete says whether it was there)."""
        storage = self.storage
        self.assertIsNone(storage.get("k"))
        storage.put("k", "1")
        storage.put("k", "2")
        self.assertEqual(storage.get("k"), "2")
        self.assertTrue(storage.delete("k"))
        self.assertFalse(storage.delete("k"))
        self.assertIsNone(storage.get("k"))
        storage.put("empty", "")
        self.assertEqual(storage.get("empty"), "")

    def test_keys(self) -> None:
        """keys(prefix) lists the keys starting with prefix, sorted by code point, non-ASCII and edge characters too."""
        keys = ["a", "ab", "abc", "ac", "b", "é", "éa", "\U0010ffff", "\U0010ffffx", "\ud7ffz", "\ue000", ""]
        for key in keys:
            self.storage.put(key, key)
        self.assertEqual(self.storage.keys(""), sorted(keys))
        for prefix in ("a", "ab", "é", "\U0010ffff", "\ud7ff", "z", "abcd"):
            self.assertEqual(self.storage.keys(prefix), sorted(k for k in keys if k.startswith(prefix)), prefix)

    def test_prefixEnd(self) -> None:
        """A prefix range ends at the prefix with its last character raised, past surrogates and U+10FFFF."""
        self.assertEqual(prefixEnd("ab"), "ac")
        self.assertEqual(prefixEnd("a\ud7ff"), "a\ue000")
        self.assertEqual(prefixEnd("a\U0010ffff"), "b")
        self.assertIsNone(prefixEnd("\U0010ffff"))
        self.assertIsNone(prefixEnd(""))

    def test_survivesReopen(self) -> None:
        """What was put is there after the file is closed and opened again (in WAL mode, synchronous FULL)."""
        self.storage.put("k", "v")
        self.storage.put("gone", "x")
        self.storage.delete("gone")
        self.storage.close()
        again = self.open()
        self.assertEqual((again.get("k"), again.get("gone")), ("v", None))
        self.assertEqual(again.db.execute("PRAGMA journal_mode").fetchone()[0], "wal")
        self.assertEqual(again.db.execute("PRAGMA synchronous").fetchone()[0], 2)  # FULL

    def test_changeLog(self) -> None:
        """Every put and delete is a numbered change; another connection sees it, and forgotten changes are gone."""
        other = self.open()
        self.assertEqual(other.lastChange(), 0)
        self.assertFalse(other.changedElsewhere())
        self.storage.put("k", "v")
        self.storage.delete("k")
        self.storage.delete("k")  # not there: no change
        self.assertTrue(other.changedElsewhere())
        self.assertFalse(other.changedElsewhere())
        self.assertEqual(other.changesSince(0, 10), [(1, "k", False), (2, "k", True)])
        self.assertEqual(other.changesSince(1, 10), [(2, "k", True)])
        # Notices only: the log never holds a value (a put's is '', a delete's NULL).
        self.assertEqual(other.db.execute("SELECT value FROM changes ORDER BY seq").fetchall(), [("",), (None,)])
        self.assertEqual(other.forgottenUpTo(), 0)
        other.forgetChanges(2)
        self.assertEqual(self.storage.forgottenUpTo(), 2)
        other.forgetChanges(1)
        self.assertEqual(self.storage.forgottenUpTo(), 2)  # (never lowered)
        self.assertEqual(self.storage.changesSince(0, 10), [])
        self.storage.put("k", "w")
        self.assertEqual(self.storage.changesSince(0, 10), [(3, "k", False)])  # never a number again
        self.assertEqual(self.storage.lastChange(), 3)

    def test_olderFileGainsForgotten(self) -> None:
        """A file made before the table of what was forgotten gets it when opened, starting from nothing forgotten."""
        self.storage.put("k", "v")
        self.storage.db.execute("DROP TABLE forgotten")
        self.storage.close()
        again = self.open()
        self.assertEqual((again.forgottenUpTo(), again.get("k")), (0, "v"))
        again.forgetChanges(1)
        self.assertEqual(again.forgottenUpTo(), 1)

    def test_waitsForTheWriteLock(self) -> None:
        """A writer waits for another connection's transaction to end instead of failing with "database is locked"."""
        holder = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.addCleanup(holder.close)
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("INSERT INTO kv (key, value) VALUES ('held', '1')")
        patient = self.open(busyTimeout=10.0)
        release = threading.Timer(0.2, holder.execute, ("COMMIT",))
        release.start()
        self.addCleanup(release.join)
        patient.put("k", "v")  # blocks until the COMMIT (its busy timeout is 10 s)
        self.assertEqual((self.storage.get("held"), self.storage.get("k")), ("1", "v"))

    def test_lockedTooLong(self) -> None:
        """
        Past its busy timeout a write fails with the store's own
        StoreUnavailable (not the driver's error or words), and leaves no
        transaction open.
        """
        impatient = self.open(busyTimeout=0.0)
        holder = sqlite3.connect(self.path, isolation_level=None)
        self.addCleanup(holder.close)
        holder.execute("BEGIN IMMEDIATE")
        error = self.assertRaises(StoreUnavailable, impatient.put, "k", "v")
        self.assertNotIsInstance(error, sqlite3.Error)
        self.assertIn("locked by another process", str(error))
        self.assertNotIn("database is locked", str(error))
        self.assertRaises(StoreUnavailable, impatient.delete, "k")
        holder.execute("ROLLBACK")
        impatient.put("k", "v")
        self.assertEqual(self.storage.get("k"), "v")


class SharedStoreTests(SynchronousTestCase):
    """Two stores on one file, as two workers: each answers what the other put, and tells its watchers."""

    def setUp(self) -> None:
        self.path = self.mktemp() + ".sqlite"
        self.logged: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(self.logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.logged.append)
        self.first, self.firstClock = self.store()
        self.second, self.secondClock = self.store()

    def store(self) -> tuple[KeyValueStore, Clock]:
        clock = Clock()
        store = KeyValueStore(storage=SQLiteStorage(self.path), clock=clock, calls=InlineCalls())
        self.addCleanup(store.close)
        return store, clock

    def watch(self, store: KeyValueStore, key: str) -> tuple[RpcPair, Watcher]:
        """A connection to C{store} watching C{key}."""
        pair = RpcPair(store, serverCallLimits=SERVER_CALL_LIMITS)
        watcher = Watcher()
        pair.root.callRemote("watch", key, watcher)
        pair.flush()
        return pair, watcher

    def test_operations(self) -> None:
        """put, get, delete and list on one store are seen by the other at once (no poll needed)."""
        run(self.first.put("a/1", "x"))
        run(self.first.put("a/2", "y"))
        run(self.first.put("b", "z"))
        self.assertEqual(run(self.second.get("a/1")), "x")
        self.assertEqual(run(self.second.list("a/")), ["a/1", "a/2"])
        self.assertTrue(run(self.second.delete("a/1")))
        self.assertFalse(run(self.first.delete("a/1")))
        self.assertRaises(KeyNotFound, run, self.first.get("a/1"))

    def test_persistence(self) -> None:
        """A store opened again on the file has every value put before."""
        for n in range(100):
            run(self.first.put(f"k{n}", str(n)))
        self.first.close()
        self.second.close()
        again, _ = self.store()
        self.assertEqual([run(again.get(f"k{n}")) for n in range(100)], [str(n) for n in range(100)])

    def test_watchFiresAcrossStores(self) -> None:
        """A watch on the second store hears of the puts and deletes made through the first, once it polls."""
        pair, watcher = self.watch(self.second, "k")
        run(self.first.put("k", "1"))
        run(self.first.put("other", "x"))
        run(self.first.put("k", "2"))
        run(self.first.delete("k"))
        self.assertEqual(watcher.seen, [])
        self.secondClock.advance(POLL_INTERVAL)
        pair.flush()
        # One call per key and poll, with its value now: the two changes before it were skipped, and it says so.
        self.assertEqual((watcher.seen, watcher.skipped), ([("k", None)], [2]))
        run(self.first.put("k", "3"))
        self.secondClock.advance(POLL_INTERVAL)
        pair.flush()
        self.assertEqual((watcher.seen, watcher.skipped), ([("k", None), ("k", "3")], [2, 0]))

    def test_ownChangesAtOnce(self) -> None:
        """A store's own put reaches its watchers before it is answered, once each, whatever the polls."""
        pair, watcher = self.watch(self.first, "k")
        run(self.second.put("k", "theirs"))
        run(self.first.put("k", "mine"))
        pair.flush()
        # Both read by the one catch-up of the put: told once, the other's change counted as skipped.
        self.assertEqual((watcher.seen, watcher.skipped), ([("k", "mine")], [1]))
        self.firstClock.advance(POLL_INTERVAL)
        pair.flush()
        self.assertEqual(len(watcher.seen), 1)
        run(self.first.put("k", "again"))
        pair.flush()
        self.assertEqual((watcher.seen[-1], watcher.skipped[-1]), (("k", "again"), 0))

    def test_watchReturnsCurrentValue(self) -> None:
        """watch() answers with the value now, whichever store put it, and that put is not told again."""
        run(self.first.put("k", "v"))
        pair = RpcPair(self.second, serverCallLimits=SERVER_CALL_LIMITS)
        watcher = Watcher()
        answer = pair.root.callRemote("watch", "k", watcher)
        pair.flush()
        self.assertEqual(self.successResultOf(answer), "v")
        self.secondClock.advance(POLL_INTERVAL)
        pair.flush()
        self.assertEqual(watcher.seen, [])

    def test_oldChangesForgotten(self) -> None:
        """
        Changes read more than RETENTION seconds ago are deleted from the
        log; a store that lagged behind them cannot tell its watchers which
        keys changed, so it closes their connections (to watch again), skips
        what was lost, logs it once, and tells what comes after to new watches.
        """
        lagging, _ = self.store()  # never polled: it misses what the others forget
        pair, watcher = self.watch(lagging, "k")
        run(self.first.put("k", "1"))
        for _ in range(int(RETENTION / 5) + 2):
            self.firstClock.advance(5)
            self.secondClock.advance(5)
        self.assertEqual(self.first.storage.changeLog.changesSince(0, 10), [])  # type: ignore[union-attr]
        self.assertEqual(self.first.storage.changeLog.forgottenUpTo(), 1)  # type: ignore[union-attr]
        run(self.second.put("k", "2"))
        assert lagging.feed is not None
        lagging.feed.poll()
        pair.flush()
        self.assertEqual(lagging.feed.missed, 1)
        self.assertEqual(watcher.seen, [])  # not told k=2 as if nothing came before: its connection closed
        self.assertFalse(pair.server.isConnected())
        self.assertEqual(lagging.watches.connections, {})
        [logged] = [e for e in self.logged if "forgotten before this process read them" in e["log_format"]]
        self.assertEqual((logged["first"], logged["upTo"], logged["closed"]), (1, 1, 1))
        again, watcherAgain = self.watch(lagging, "k")
        run(self.second.put("k", "3"))
        lagging.feed.poll()
        again.flush()
        self.assertEqual((watcherAgain.seen, watcherAgain.skipped), ([("k", "3")], [0]))
        self.assertEqual(lagging.feed.missed, 1)

    def test_lostWhileNothingNew(self) -> None:
        """A store that lagged finds the forgotten changes at its next pruning, even when nothing came after them."""
        lagging, laggingClock = self.store()
        pair, watcher = self.watch(lagging, "k")
        assert lagging.feed is not None
        lagging.feed.stop()  # (it reads nothing: blocked, say)
        run(self.first.put("k", "1"))
        self.first.storage.changeLog.forgetChanges(1)  # type: ignore[union-attr]
        lagging.feed.start()
        for _ in range(3):
            laggingClock.advance(PRUNE_EVERY)
        pair.flush()
        self.assertEqual((lagging.feed.missed, watcher.seen), (1, []))
        self.assertFalse(pair.server.isConnected())

    def test_valueOfTheChangesRead(self) -> None:
        """
        A watcher is told the value the changes read left, with their
        count, never a newer one made while they were read: that one is
        told, with its own count, by the next read.
        """
        pair, watcher = self.watch(self.second, "k")
        run(self.first.put("k", "1"))
        watched = self.second.watches.watched
        during: list[str] = []

        def watchedWhileAPutLands(key: str) -> bool:
            if not during:
                during.append(key)
                run(self.first.put("k", "2"))  # (between reading the changes and reading the values)
            return watched(key)

        self.patch(self.second.watches, "watched", watchedWhileAPutLands)
        self.secondClock.advance(POLL_INTERVAL)
        pair.flush()
        self.assertEqual((watcher.seen, watcher.skipped), ([("k", "1")], [0]))
        self.secondClock.advance(POLL_INTERVAL)
        pair.flush()
        self.assertEqual((watcher.seen, watcher.skipped), ([("k", "1"), ("k", "2")], [0, 0]))
        self.assertEqual(during, ["k"])

    def test_skippedNumberIsNotALoss(self) -> None:
        """
        A number missing from the log with nothing forgotten (as when a
        PostgreSQL transaction that failed took one) loses nothing: the
        watchers hear of what follows, no connection is closed, nothing is logged.
        """
        pair, watcher = self.watch(self.second, "k")
        run(self.first.put("k", "1"))
        run(self.first.put("k", "2"))
        self.first.storage.db.execute("DELETE FROM changes WHERE seq = 1")  # type: ignore[attr-defined]
        self.secondClock.advance(POLL_INTERVAL)
        pair.flush()
        assert self.second.feed is not None
        self.assertEqual((watcher.seen, watcher.skipped, self.second.feed.missed), ([("k", "2")], [0], 0))
        self.assertTrue(pair.server.isConnected())
        self.assertEqual([e for e in self.logged if "forgotten" in e["log_format"]], [])

    def test_clockNeeded(self) -> None:
        """A shared storage without a clock to poll with is refused."""
        storage = SQLiteStorage(self.path)
        self.addCleanup(storage.close)
        self.assertRaises(ValueError, KeyValueStore, storage=storage)
