# -*- test-case-name: tests.test_exports,tests.protocols.test_asyncioclient_kv,tests.protocols.test_blocking_kv -*-
"""The key-value store of the RPC tutorial and of C{twist chunkwire-kv}.

The remote interface L{IKeyValue} (C{get}, C{put}, C{delete}, C{list},
C{watch}, C{unwatch}) is imported by both ends: L{KeyValueStore} serves it and
a client calls it through a typed proxy. A watcher (a C{Referenceable} the client
passed; an L{IWatcher}'s hints check the server's calls too) is told every
change of its key, or how many it missed (C{skipped=N}). Keys and values
are strings within L{Key} and L{Value}; refusals arrive as registered errors:
L{KeyNotFound}, L{StoreFull}, L{ListTooLarge}, L{WatchRefused},
L{StoreUnavailable}, L{Unstorable}.

Cost: L{MemoryStorage} (the default) is O(1) per call except C{list}
(O(n log n)); L{SQLiteStorage} and L{PostgresStorage} are O(log n), commit
before answering and run in the store's own thread pool, never the reactor
thread. A put or delete costs O(watchers of that key); what a watcher holds is
charged to its connection's ledger and bounded (L{WatchLimits}).

Design: docs/design/kv.md
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from twisted.internet.defer import Deferred

from framing.slicing._constraints import Text

from .. import rpc
from ._feed import POLL_INTERVAL, ChangeFeed
from ._postgresql import PostgresStorage
from ._sqlite import SQLiteStorage
from ._state import StateStore, openState, openStorage
from ._storage import (
    DEFAULT_LIMITS,
    ListTooLarge,
    MemoryStorage,
    Storage,
    StoreFull,
    StoreLimits,
    StoreUnavailable,
    Unstorable,
)
from ._threads import InlineCalls, StorageCalls, ThreadedCalls
from ._watches import WatchBook, WatchLimits, WatchRefused

__all__ = [
    "KEY",
    "POLL_INTERVAL",
    "VALUE",
    "IKeyValue",
    "IWatcher",
    "Key",
    "KeyNotFound",
    "KeyValueStore",
    "ListTooLarge",
    "MemoryStorage",
    "PostgresStorage",
    "SQLiteStorage",
    "StateStore",
    "Storage",
    "StoreFull",
    "StoreLimits",
    "StoreUnavailable",
    "Unstorable",
    "Value",
    "WatchLimits",
    "WatchRefused",
    "Watcher",
    "openState",
    "openStorage",
]

Key = Annotated[str, rpc.MaxLength(1024)]
"""A key: a string of at most 1 KiB (UTF-8)."""
Value = Annotated[str, rpc.MaxLength(1 << 20)]
"""A value: a string of at most 1 MiB (UTF-8)."""

KEY = Text(1024)
"""L{Key} as an explicit constraint (what C{remote(args=...)} takes)."""
VALUE = Text(1 << 20)
"""L{Value} as an explicit constraint."""


class KeyNotFound(Exception):
    """The key is not in the store.  Registered as C{"kv.KeyNotFound"}."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


rpc.registerError(KeyNotFound, "kv.KeyNotFound")
rpc.registerError(StoreFull, "kv.StoreFull")
rpc.registerError(ListTooLarge, "kv.ListTooLarge")
rpc.registerError(StoreUnavailable, "kv.StoreUnavailable")
rpc.registerError(Unstorable, "kv.Unstorable")


class IWatcher(rpc.RemoteInterface, Protocol, name="kv.IWatcher"):
    """What a client passes to L{IKeyValue.watch}: the server calls C{changed} on every change of the key."""

    def changed(self, key: Key, value: Value | None, skipped: int = 0) -> Deferred[None]:
        """
        C{key} is now C{value}, or was deleted (C{None}); C{skipped} changes
        of it came before this one that this watcher was not told of (it was
        behind, or they came through another process within one poll).  The
        server sends C{skipped} (as a keyword argument) only when it is not 0.
        """


Watcher = rpc.Referenceable | rpc.RemoteReference
"""A watcher as a hint: any Referenceable of the caller (the server calls its C{changed})."""


class IKeyValue(rpc.RemoteInterface, Protocol, name="kv.IKeyValue"):
    """The key-value service, as both ends see it."""

    def get(self, key: Key) -> Deferred[str]:
        """The value of C{key}; a L{KeyNotFound} if it has none."""

    def put(self, key: Key, value: Value) -> Deferred[None]:
        """Set C{key} to C{value}, telling its watchers."""

    def delete(self, key: Key) -> Deferred[bool]:
        """Delete C{key}, telling its watchers; whether it was there."""

    def list(self, prefix: Key = "") -> Deferred[list[str]]:
        """The keys that start with C{prefix}, sorted."""

    def watch(self, key: Key, watcher: Watcher) -> Deferred[str | None]:
        """Call C{watcher.changed(key, value)} on every change of C{key}; its value now."""

    def unwatch(self, key: Key, watcher: Watcher) -> Deferred[bool]:
        """Stop calling C{watcher} for C{key}; whether it was watching."""


class KeyValueStore(rpc.Referenceable, IKeyValue):
    """
    The store: a L{Storage} of strings, and the watchers of each key.  It
    implements L{IKeyValue}, so its methods of that name are remote, with
    the constraints of the interface's hints, as C{async def} methods under
    L{rpc.deferred} returning the C{Deferred}s the interface declares.
    Each awaits its storage calls through L{calls}: at once for a
    L{MemoryStorage} (so its methods never wait), in a thread for a durable
    storage; answers may then come back in another order than the calls.

    @ivar storage: the L{Storage}.
    @ivar limits: the L{StoreLimits}: a put past them fails with a
        L{StoreFull}, a listing past them with a L{ListTooLarge}, and
        nothing is stored or sent.
    @ivar watches: the L{WatchBook} of this process's watchers.
    @ivar feed: the L{ChangeFeed} telling them of other processes' changes,
        if the storage is shared (has a change log), else C{None}.
    @ivar calls: where the storage's calls run (C{protocols/kv/_threads.py}).
    """

    def __init__(
        self,
        watchLimits: WatchLimits | None = None,
        storage: Storage | None = None,
        clock: Any = None,
        pollInterval: float = POLL_INTERVAL,
        limits: StoreLimits | None = None,
        calls: StorageCalls | None = None,
    ) -> None:
        """
        @param storage: a L{MemoryStorage} of its own if C{None}.
        @param calls: where the storage's calls run: by default at once for
            a L{MemoryStorage}, else in a L{ThreadedCalls} pool of the
            store's own on C{clock} (a reactor), stopped by L{close}; a
            test stepping a fake clock passes L{InlineCalls}.
        @param limits: what the store may hold (L{StoreLimits} if C{None}).
        @param clock: what a shared storage's change log is polled with (the
            reactor); needed only with one.
        @raise ValueError: a shared storage and no clock.
        """
        self.storage: Storage = storage if storage is not None else MemoryStorage()
        self.limits = limits or DEFAULT_LIMITS
        if calls is None:
            calls = InlineCalls() if isinstance(self.storage, MemoryStorage) else ThreadedCalls(clock or _reactor())
        self.calls: StorageCalls = calls
        self.watches = WatchBook(watchLimits, self._current)
        self.feed: ChangeFeed | None = None
        changes = self.storage.changeLog
        if changes is not None:
            if clock is None:
                raise ValueError("a shared storage needs a clock (the reactor) to poll its changes with")
            self.feed = ChangeFeed(changes, self.watches, clock, pollInterval, calls=calls)
            self.feed.start()

    def _current(self, key: str) -> Deferred[str | None]:
        return self.calls.run(self.storage.get, key)

    @property
    def watchers(self) -> dict[str, set[rpc.RemoteReference]]:
        """Key to the references of this process's watchers of it (a key with none has no entry)."""
        return self.watches.watchers

    @property
    def watchLimits(self) -> WatchLimits:
        """The L{WatchLimits}."""
        return self.watches.limits

    @watchLimits.setter
    def watchLimits(self, limits: WatchLimits) -> None:
        self.watches.limits = limits

    def close(self) -> None:
        """
        Stop listening or polling for changes, finish the storage calls
        running and close the storage (once the connections are gone:
        nothing is served after).
        """
        if self.feed is not None:
            self.feed.stop()
        self.calls.stop()
        self.storage.close()

    @rpc.deferred
    async def get(self, key: str) -> str:
        value = await self.calls.run(self.storage.get, key)
        if value is None:
            raise KeyNotFound(key)
        return value

    @rpc.deferred
    async def put(self, key: str, value: str) -> None:
        await self.calls.run(self.storage.put, key, value, self.limits)
        await self._changed(key, value)

    @rpc.deferred
    async def delete(self, key: str) -> bool:
        if not await self.calls.run(self.storage.delete, key):
            return False
        await self._changed(key, None)
        return True

    @rpc.deferred
    async def list(self, prefix: str = "") -> list[str]:
        return await self.calls.run(self.storage.keys, prefix, self.limits.maxListBytes)

    @rpc.deferred
    async def watch(self, key: str, watcher: Watcher) -> str | None:
        """
        Call C{watcher.changed(key, value)} on every change; return the current value.

        @raise WatchRefused: the connection or the key has as many watches as
            L{WatchLimits} allows.
        """
        if not isinstance(watcher, rpc.RemoteReference):
            raise TypeError("the watcher must be a Referenceable of the caller")
        if self.feed is not None:
            # Changes read before the watch begins: the value returned already includes them.
            await self.feed.catchUp()
        self.watches.add(key, watcher)
        return await self.calls.run(self.storage.get, key)

    @rpc.deferred
    async def unwatch(self, key: str, watcher: Watcher) -> bool:
        # The same client object arrives as the same RemoteReference, so set
        # membership finds it.
        if not isinstance(watcher, rpc.RemoteReference):
            return False
        return self.watches.remove(key, watcher)

    async def _changed(self, key: str, value: str | None) -> None:
        if self.feed is None:
            self.watches.notify(key, value)
        else:
            # Through the log, in its order: this change, and any other process's made before it.
            await self.feed.catchUp()


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor
