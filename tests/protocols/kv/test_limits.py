"""The kv store's size limits (issue 28 item 2): keys, characters in all, and what one listing carries, per backend."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from protocols.kv import KeyValueStore, ListTooLarge, MemoryStorage, SQLiteStorage, Storage, StoreFull, StoreLimits
from protocols.rpc import RemoteError

from ..rpc.services import RpcPair

LIMITS = StoreLimits(maxKeys=3, maxBytes=100, maxListBytes=5)


class _Limits:
    """The same tests for each backend; C{storage()} makes one."""

    def storage(self) -> Storage:
        raise NotImplementedError

    def setUp(self) -> None:
        self.kept = self.storage()

    def test_keysCapped(self) -> None:
        """A put of a new key past maxKeys is refused and stores nothing; replacing a key is allowed."""
        for key in "abc":
            self.kept.put(key, "v", LIMITS)
        self.assertRaises(StoreFull, self.kept.put, "d", "v", LIMITS)
        self.assertIsNone(self.kept.get("d"))
        self.kept.put("a", "w", LIMITS)
        self.assertEqual(self.kept.get("a"), "w")

    def test_sizeCapped(self) -> None:
        """Keys and values count by characters; a put past maxBytes is refused; a delete frees its room."""
        self.kept.put("a", "x" * 90, LIMITS)  # 91
        self.assertRaises(StoreFull, self.kept.put, "b", "x" * 9, LIMITS)  # 91 + 10 > 100
        self.kept.put("b", "x" * 8, LIMITS)  # 100
        self.assertRaises(StoreFull, self.kept.put, "a", "x" * 91, LIMITS)
        self.assertEqual(self.kept.get("a"), "x" * 90)
        self.kept.put("a", "", LIMITS)  # a smaller value gives room back
        self.kept.put("c", "x" * 80, LIMITS)
        self.assertTrue(self.kept.delete("c"))
        self.kept.put("c", "x" * 80, LIMITS)

    def test_listCapped(self) -> None:
        """A listing whose keys pass maxListBytes is refused; a longer prefix lists the part that fits."""
        for key in ("aa", "ab", "b1"):
            self.kept.put(key, "", LIMITS)
        self.assertRaises(ListTooLarge, self.kept.keys, "", LIMITS.maxListBytes)
        self.assertEqual(self.kept.keys("a", LIMITS.maxListBytes), ["aa", "ab"])
        self.assertEqual(self.kept.keys("", None), ["aa", "ab", "b1"])


class MemoryLimitTests(_Limits, SynchronousTestCase):
    """L{MemoryStorage}'s limits."""

    def storage(self) -> Storage:
        return MemoryStorage()


class SQLiteLimitTests(_Limits, SynchronousTestCase):
    """L{SQLiteStorage}'s limits, whose totals every process on the file keeps."""

    def storage(self) -> Storage:
        self.path = self.mktemp() + ".sqlite"
        return self.open()

    def open(self) -> SQLiteStorage:
        storage = SQLiteStorage(self.path)
        self.addCleanup(storage.close)
        return storage

    def test_totalsShared(self) -> None:
        """Two storages on one file (two workers) count against one total, which survives reopening."""
        other = self.open()
        self.kept.put("a", "x" * 90, LIMITS)
        self.assertRaises(StoreFull, other.put, "b", "x" * 20, LIMITS)
        other.put("b", "x" * 5, LIMITS)
        self.assertRaises(StoreFull, self.open().put, "c", "x" * 5, LIMITS)

    def test_totalsOfAnOlderFile(self) -> None:
        """A file written before the totals were kept gets them counted from its rows when it is opened."""
        import sqlite3

        self.kept.put("a", "x" * 50, LIMITS)
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("DROP TABLE totals")
        db.close()
        reopened = self.open()
        self.assertRaises(StoreFull, reopened.put, "b", "x" * 60, LIMITS)
        reopened.put("b", "x" * 40, LIMITS)


class RemoteLimitTests(SynchronousTestCase):
    """Through RPC the refusals arrive as themselves, and the store goes on serving."""

    def test_refusedOverRpc(self) -> None:
        """put past the limit fails with kv.StoreFull and list with kv.ListTooLarge at the client; get still works."""
        store = KeyValueStore(limits=LIMITS, clock=Clock())
        pair = RpcPair(store)
        results: list[Any] = []
        for call in (
            pair.root.callRemote("put", "aa", "x"),
            pair.root.callRemote("put", "bb", "x" * 200),
            pair.root.callRemote("put", "ab", ""),
            pair.root.callRemote("put", "b1", ""),
            pair.root.callRemote("list", ""),
            pair.root.callRemote("get", "aa"),
        ):
            call.addBoth(results.append)
        pair.flush()
        self.assertIsNone(results[0])
        results[1].trap(StoreFull)
        self.assertEqual(results[2:4], [None, None])
        results[4].trap(ListTooLarge)
        self.assertEqual(results[5], "x")
        self.assertTrue(pair.server.isConnected())
        self.assertNotIsInstance(results[1].value, RemoteError)

    def test_defaults(self) -> None:
        """A store made without limits has the defaults: 100,000 keys, 256 Mi characters, 1 Mi per listing."""
        limits = KeyValueStore().limits
        self.assertEqual((limits.maxKeys, limits.maxBytes, limits.maxListBytes), (100_000, 256 * 2**20, 2**20))
