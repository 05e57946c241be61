"""The kv store's contract, the same tests against each durable storage (SQLite, PostgreSQL), served over TCP.

Each body runs a L{KeyValueStore} on a storage of the kind it is given,
with its default calls (a thread pool), served on 127.0.0.1 to real RPC
connections, and checks at its end that no call was made to the storage
on the reactor's thread once the store was made; two stores on one
storage's data stand for two worker processes (or hosts).  Each body is a
trial test of the classes C{SQLiteContractTests} and
C{PostgreSQLContractTests} and a pytest-twisted function per store (the
PostgreSQL ones skip, saying why, when no PostgreSQL can be had).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

from twisted.internet.defer import gatherResults
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from protocols import rpc
from protocols.kv import KeyNotFound, KeyValueStore, ListTooLarge, Storage, StoreFull, StoreLimits, Unstorable
from tests.kv_stores import STORES, Scratch

from ..helpers import pytestTest, trialTest
from ..serving.test_kv_workers import Recorder

TIMEOUT = 60.0
"""Seconds a test may take: only a hang misses it."""


async def until(reactor: Any, condition: Callable[[], bool], state: Callable[[], object]) -> None:
    """Wait, the reactor running, until C{condition()}; fail showing C{state()} after L{TIMEOUT} seconds."""
    for _ in range(int(TIMEOUT / 0.02)):
        if condition():
            return
        await deferLater(reactor, 0.02)
    raise AssertionError(state())


class ThreadChecked:
    """
    A storage's stand-in that records the name of each of its (and its
    change log's) methods called on the reactor's thread, once L{recording}.
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.recording = False
        self.onReactor: list[str] = []
        self.reactorThread = threading.current_thread()

    @property
    def changeLog(self) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.storage, name)
        if not callable(found):
            return found

        def called(*args: Any) -> Any:
            if self.recording and threading.current_thread() is self.reactorThread:
                self.onReactor.append(name)
            return found(*args)

        return called


class Served:
    """Stores on one scratch store's data, each listening on 127.0.0.1, and connections to them; L{close} ends all."""

    def __init__(self, reactor: Any, kind: str) -> None:
        self.reactor = reactor
        self.scratch = Scratch(kind)
        self.stores: list[KeyValueStore] = []
        self.ports: list[Any] = []
        self.roots: list[Any] = []
        self.checked: list[ThreadChecked] = []

    def store(self, limits: StoreLimits | None = None, timeout: float | None = None) -> KeyValueStore:
        """
        A store on the data, listening; every call to its storage after it
        is made is checked to be off the reactor's thread (by L{close}).
        """
        checked = ThreadChecked(self.scratch.open(timeout))
        store = KeyValueStore(storage=checked, clock=self.reactor, limits=limits)  # type: ignore[arg-type]
        checked.recording = True
        self.checked.append(checked)
        self.stores.append(store)
        factory = rpc.serverFactory(store, clock=self.reactor)
        self.ports.append(self.reactor.listenTCP(0, factory, interface="127.0.0.1"))
        return store

    async def connect(self, index: int = 0) -> Any:
        root = await rpc.connect(self.reactor, f"tcp:host=127.0.0.1:port={self.ports[index].getHost().port}")
        self.roots.append(root)
        return root

    async def close(self) -> None:
        for root in self.roots:
            await root.broker.disconnect()
        for port in self.ports:
            await port.stopListening()
        for checked in self.checked:
            checked.recording = False
        for store in self.stores:
            store.close()
        self.scratch.cleanUp()
        onReactor = [checked.onReactor for checked in self.checked]
        assert not any(onReactor), f"storage calls on the reactor's thread: {onReactor}"


Body = Callable[[Any, Served], Awaitable[None]]


async def operations(reactor: Any, served: Served) -> None:
    """put, get, list and delete, and what one store put the other answers at once."""
    served.store()
    served.store()
    first, second = await served.connect(0), await served.connect(1)
    keys = ["a", "ab", "abc", "ac", "b", "é", "éa", "\U0010ffff", "\U0010ffffx", "\ud7ffz", "\ue000", ""]
    for key in keys:
        await first.callRemote("put", key, key * 2)
    await first.callRemote("put", "a", "again")
    assert await second.callRemote("get", "a") == "again"
    assert await second.callRemote("get", "é") == "éé"
    assert await second.callRemote("list", "") == sorted(keys)
    for prefix in ("a", "é", "\U0010ffff", "\ud7ff", "z"):
        assert await second.callRemote("list", prefix) == sorted(k for k in keys if k.startswith(prefix)), prefix
    assert await second.callRemote("delete", "a") is True
    assert await first.callRemote("delete", "a") is False
    try:
        await first.callRemote("get", "a")
    except KeyNotFound:
        pass
    else:
        raise AssertionError("a deleted key was got")
    await first.callRemote("put", "empty", "")
    assert await second.callRemote("get", "empty") == ""


async def limits(reactor: Any, served: Served) -> None:
    """The limits count what every store on the data holds: a put past them on either is a StoreFull, nothing stored."""
    bound = StoreLimits(maxKeys=3, maxBytes=100, maxListBytes=5)
    served.store(bound)
    served.store(bound)
    first, second = await served.connect(0), await served.connect(1)
    await first.callRemote("put", "k1", "x")
    await second.callRemote("put", "k2", "x")
    await first.callRemote("put", "k3", "x")
    for root, key in ((first, "k4"), (second, "k5")):
        try:
            await root.callRemote("put", key, "x")
        except StoreFull:
            pass
        else:
            raise AssertionError("a put past maxKeys was answered")
    await second.callRemote("put", "k1", "y" * 90)  # a replaced value counts once: 3 keys, 6 + 92 characters
    try:
        await first.callRemote("put", "k2", "y" * 10)
    except StoreFull:
        pass
    else:
        raise AssertionError("a put past maxBytes was answered")
    assert await first.callRemote("delete", "k3") is True
    await second.callRemote("put", "k4", "")
    try:
        await first.callRemote("list", "")
    except ListTooLarge:
        pass
    else:
        raise AssertionError("a listing past maxListBytes was answered")
    assert await first.callRemote("list", "k4") == ["k4"]
    assert await first.callRemote("get", "k2") == "x"


async def watches(reactor: Any, served: Served) -> None:
    """A watcher on one store hears of every put and delete made through the other, in order."""
    served.store()
    served.store()
    first, second = await served.connect(0), await served.connect(1)
    watcher = Recorder()
    assert await second.callRemote("watch", "k", watcher) is None
    await first.callRemote("put", "k", "1")
    await first.callRemote("put", "other", "x")
    await first.callRemote("put", "k", "2")
    await first.callRemote("delete", "k")
    await until(reactor, lambda: watcher.told >= 3, lambda: watcher.seen)
    assert watcher.seen[-1] == ("k", None), watcher.seen
    order = [["1", "2", None].index(value) for _key, value in watcher.seen]
    assert order == sorted(order), watcher.seen
    assert await second.callRemote("unwatch", "k", watcher) is True


async def lostTrack(reactor: Any, served: Served) -> None:
    """
    A store that read nothing while the changes its watchers wanted were
    forgotten closes their connections (they cannot be told which keys
    changed), and a skipped number with nothing forgotten closes nothing.
    """
    served.store()
    lagging = served.store()
    assert lagging.feed is not None
    served.checked[1].recording = False  # (stopping listens no more: no storage work, and closing does it too)
    lagging.feed.stop()  # (it reads nothing until asked below: blocked, say)
    served.checked[1].recording = True
    writer, watching = await served.connect(0), await served.connect(1)
    watcher = Recorder()
    assert await watching.callRemote("watch", "k", watcher) is None
    await writer.callRemote("put", "k", "1")
    changes = served.checked[0].storage.changeLog
    assert changes is not None
    await deferToThread(lambda: changes.forgetChanges(changes.lastChange()))
    assert await deferToThread(changes.forgottenUpTo) == 1
    await writer.callRemote("put", "k", "2")
    await lagging.feed.catchUp()
    await until(reactor, lambda: not watching.broker.isConnected(), lambda: watcher.seen)
    assert (watcher.seen, lagging.feed.missed) == ([], 1), (watcher.seen, lagging.feed.missed)
    again = await served.connect(1)
    assert await again.callRemote("watch", "k", watcher) == "2"
    await writer.callRemote("put", "k", "3")
    await lagging.feed.catchUp()
    await until(reactor, lambda: watcher.seen == [("k", "3")], lambda: watcher.seen)
    assert lagging.feed.missed == 1


async def snapshotValues(reactor: Any, served: Served) -> None:
    """
    changesAndValues reads the values in the snapshot of the changes it
    read: a put committed between the two reads is in neither (the next
    read has both); a full batch gives no values (more may follow).
    """
    served.store()
    served.store()
    reader, writer = (checked.storage for checked in served.checked)

    def test() -> None:
        writer.put("k", "1")
        start = reader.changeLog.lastChange() - 1
        landed: list[str] = []

        def wanted(key: str) -> bool:
            if not landed:
                writer.put("k", "2")  # (another connection commits between the two reads)
                landed.append(key)
            return True

        assert reader.changeLog.changesAndValues(start, 10, wanted) == ([(start + 1, "k", False)], {"k": "1"})
        assert landed == ["k"]
        rows, values = reader.changeLog.changesAndValues(start + 1, 10, wanted, ["other"])
        assert (rows, values) == ([(start + 2, "k", False)], {"k": "2", "other": None}), (rows, values)
        writer.put("k", "3")
        assert reader.changeLog.changesAndValues(start, 2, wanted)[1] is None

    await deferToThread(test)


async def persistence(reactor: Any, served: Served) -> None:
    """A store opened again on the data has every value put before."""
    store = served.store()
    root = await served.connect(0)
    for n in range(20):
        await root.callRemote("put", f"k{n}", str(n))
    again = served.scratch.open()
    try:
        assert [again.get(f"k{n}") for n in range(20)] == [str(n) for n in range(20)]
    finally:
        again.close()
    assert store.calls is not None


async def blockedWriteDelaysOnlyItself(reactor: Any, served: Served) -> None:
    """
    While the store's write lock is held from outside (another process's
    transaction; another session's LOCK TABLE), a put waits for it in a
    storage thread, and meanwhile a get of another key on another
    connection, and on the put's own, is answered: the reactor is never
    blocked by the database.  Once the lock goes, the put is answered.
    """
    store = served.store(timeout=TIMEOUT)
    first, second = await served.connect(0), await served.connect(0)
    await first.callRemote("put", "other", "x")
    entered = threading.Event()
    put = store.storage.put

    def enteringPut(*args: Any) -> None:
        entered.set()
        put(*args)

    store.storage.storage.put = enteringPut  # type: ignore[attr-defined]
    release = served.scratch.holdWriteLock()
    try:
        blocked = first.callRemote("put", "k", "v")
        await until(reactor, entered.is_set, lambda: "the put never reached its storage thread")
        assert await second.callRemote("get", "other") == "x"
        assert await first.callRemote("get", "other") == "x"
        assert not blocked.called, "the put was answered while the write lock was held"
    finally:
        release()
    await blocked
    assert await second.callRemote("get", "k") == "v"


async def unstorable(reactor: Any, served: Served) -> None:
    """
    A key or value with NUL is stored in SQLite, and refused in PostgreSQL
    (whose text cannot hold it) with kv.Unstorable, never a driver's error;
    such a key is never found there, and the store goes on serving.
    """
    served.store()
    root = await served.connect(0)
    if served.scratch.kind == "sqlite":
        await root.callRemote("put", "n\x00", "v\x00")
        assert await root.callRemote("get", "n\x00") == "v\x00"
        return
    for key, value in [("k\x00", "v"), ("k", "v\x00")]:
        try:
            await root.callRemote("put", key, value)
        except Unstorable:
            pass
        else:
            raise AssertionError(f"{key!r} = {value!r} was stored")
    assert await root.callRemote("delete", "k\x00") is False
    assert await root.callRemote("list", "k\x00") == []
    try:
        await root.callRemote("get", "k\x00")
    except KeyNotFound:
        pass
    else:
        raise AssertionError("a key with NUL was found")
    await root.callRemote("put", "k", "v")
    assert await root.callRemote("get", "k") == "v"


async def racingWrites(reactor: Any, served: Served) -> None:
    """
    Writers racing on one key through two stores (two hosts), several
    calls in each store's threads at once: one delete of it says it was
    there, and the stores' count of keys stays true, so the key limit holds
    exactly (a count read from before the lock was taken once made two
    deletes both say yes, and counted a new key twice).
    """
    served.store(StoreLimits(maxKeys=2))
    served.store(StoreLimits(maxKeys=2))
    roots = [await served.connect(number % 2) for number in range(8)]
    for _ in range(5):
        await gatherResults([root.callRemote("put", "k", f"v{n}") for n, root in enumerate(roots)])
        deleted = await gatherResults([root.callRemote("delete", "k") for root in roots])
        assert deleted.count(True) == 1, deleted
    await roots[0].callRemote("put", "a", "1")
    await roots[1].callRemote("put", "b", "1")  # refused if a put of a new key was counted twice
    try:
        await roots[0].callRemote("put", "c", "1")  # allowed if a delete was counted twice
    except StoreFull:
        pass
    else:
        raise AssertionError("a third key was stored under a limit of two")


BODIES: list[Body] = [
    operations,
    limits,
    watches,
    lostTrack,
    snapshotValues,
    persistence,
    blockedWriteDelaysOnlyItself,
    unstorable,
    racingWrites,
]


def withStore(body: Body, kind: str) -> Callable[[Any], Awaitable[None]]:
    """C{body} on a L{Served} of C{kind}, closed afterwards."""

    async def test(reactor: Any) -> None:
        served = Served(reactor, kind)
        try:
            await body(reactor, served)
        finally:
            await served.close()

    test.__doc__ = f"({kind}) {body.__doc__}"
    test.__name__ = f"{body.__name__}_{kind}"
    return test


class SQLiteContractTests(TestCase):
    """The store's contract on a SQLite file."""


class PostgreSQLContractTests(TestCase):
    """The store's contract on PostgreSQL."""


for _body in BODIES:
    for _kind, _class in zip(STORES, (SQLiteContractTests, PostgreSQLContractTests), strict=True):
        _bound = withStore(_body, _kind)
        setattr(_class, f"test_{_body.__name__}", trialTest(_bound, TIMEOUT))
        globals()[f"test_{_bound.__name__}"] = pytestTest(_bound, TIMEOUT)
