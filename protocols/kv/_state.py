# -*- test-case-name: tests.protocols.kv.test_state -*-
"""The state of a service of your own, kept in one of the kv store's storages: memory, a SQLite file, PostgreSQL.

Contract: a L{StateStore} is a L{protocols.kv._storage.Storage} (string keys
to string values) and the place its calls run, with methods that return
C{Deferred}s fired on the reactor thread.  Durable storages run in the
store's own thread pool, never the reactor thread; a C{put} or C{delete}
fires only once committed; a storage that cannot serve a call fails it with
L{protocols.kv.StoreUnavailable} (nothing changed), and limits fail with
L{StoreFull}, L{ListTooLarge} or L{Unstorable}.  Calls may complete out of
order; a change is atomic per key.  A durable store is shared with every
process that opens it: keep a service's keys under a prefix of its own.

Cost: a thread hand-off per call (tens of microseconds) on a durable
storage, nothing on a memory one; every L{TIDY_INTERVAL} seconds after
writes the change log is forgotten and its space given back.

Design: docs/design/kv.md
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.python.failure import Failure

from .._logs import NamedLogger
from ._postgresql import PostgresStorage
from ._sqlite import SQLiteStorage
from ._storage import DEFAULT_LIMITS, ChangeLog, MemoryStorage, Storage, StoreLimits
from ._threads import InlineCalls, StorageCalls, ThreadedCalls

TIDY_INTERVAL = 10.0
"""Seconds between two tidyings of a durable L{StateStore}'s change log, when it was written in between."""

MEMORY = "memory"
"""The C{store} of L{openState} that keeps the state in this process's memory, gone when it exits."""


def openStorage(store: str) -> Storage:
    """
    The storage C{--store STORE} names: a C{postgresql://} (or
    C{postgres://}) URL is a L{PostgresStorage}, anything else a
    L{SQLiteStorage} file's path.  Opening connects (a database) or opens
    the file, blocking its caller: done once, at start.

    @raise StoreUnavailable: a database that cannot be reached now.
    @raise sqlite3.Error: a file that cannot be opened as a store.
    @raise ImportError: a URL, and no psycopg (the C{postgresql} extra).
    """
    if store.startswith(("postgresql://", "postgres://")):
        return PostgresStorage(store)
    return SQLiteStorage(store)


class StateStore:
    """
    A storage and where its calls run: see the module's contract.

    @ivar storage: the L{Storage}.
    @ivar calls: where its calls run (L{InlineCalls} for memory, else L{ThreadedCalls}).
    @ivar limits: the L{StoreLimits} its puts and listings are held to.
    """

    _log = NamedLogger(namespace="chunkwire.state")

    def __init__(
        self,
        storage: Storage,
        calls: StorageCalls,
        limits: StoreLimits = DEFAULT_LIMITS,
        clock: Any = None,
        tidyInterval: float = TIDY_INTERVAL,
    ) -> None:
        """
        @param clock: what a durable storage's change log is tidied with (the
            reactor); with C{None}, never (a test stepping its own).
        """
        self.storage = storage
        self.calls = calls
        self.limits = limits
        self._written = False
        self._tidying: LoopingCall | None = None
        changes = storage.changeLog
        if changes is not None and clock is not None:
            self._tidying = LoopingCall(self._tidy, changes)
            self._tidying.clock = clock
            self._tidying.start(tidyInterval, now=False)

    def _tidy(self, changes: ChangeLog) -> Deferred[None] | None:
        if not self._written:
            return None
        self._written = False
        tidied = self.calls.run(_forgetAll, changes)
        # (A storage unavailable now is tidied at a later turn: the next write marks it again.)
        return tidied.addErrback(self._untidied)

    def _untidied(self, failure: Failure) -> None:
        self._written = True
        self._log.debug("the state's change log could not be tidied now: {error}", error=failure.value)

    def get(self, key: str) -> Deferred[str | None]:
        """The value of C{key}, or C{None} if it has none."""
        return self.calls.run(self.storage.get, key)

    def put(self, key: str, value: str) -> Deferred[None]:
        """Set C{key} to C{value}; fires once committed (L{StoreFull}: nothing changed)."""
        self._written = True
        return self.calls.run(self.storage.put, key, value, self.limits)

    def delete(self, key: str) -> Deferred[bool]:
        """Delete C{key}; fires, once committed, with whether it was there (so only one deleter gets C{True})."""
        self._written = True
        return self.calls.run(self.storage.delete, key)

    def keys(self, prefix: str = "") -> Deferred[list[str]]:
        """The keys that start with C{prefix}, sorted by code point (L{ListTooLarge} past C{limits.maxListBytes})."""
        return self.calls.run(self.storage.keys, prefix, self.limits.maxListBytes)

    def close(self) -> None:
        """Finish the calls running (blocking until they end), then close the storage; nothing is served after."""
        if self._tidying is not None and self._tidying.running:
            self._tidying.stop()
        self.calls.stop()
        self.storage.close()


def openState(reactor: Any, store: str = MEMORY, limits: StoreLimits | None = None) -> StateStore:
    """
    The L{StateStore} C{store} names: L{MEMORY} (this process's memory),
    a C{postgresql://} URL (shared by every process on every host that
    opens it), or a SQLite file's path (shared by the processes of one
    host), whose calls run in threads of C{reactor}'s (stopped when it
    shuts down, or by L{StateStore.close}).  Opening a durable one blocks
    (see L{openStorage}): open it before serving.

    @raise StoreUnavailable: a database that cannot be reached now.
    @raise sqlite3.Error: a file that cannot be opened as a store.
    @raise ImportError: a URL, and no psycopg (the C{postgresql} extra).
    """
    limits = limits or DEFAULT_LIMITS
    if store == MEMORY:
        return StateStore(MemoryStorage(), InlineCalls(), limits)
    return StateStore(openStorage(store), ThreadedCalls(reactor, name="state-storage"), limits, clock=reactor)


def _forgetAll(changes: ChangeLog) -> None:
    """Forget every change logged so far and give back the space (in a storage thread: it blocks)."""
    changes.forgetChanges(changes.lastChange())
    changes.tidy()
