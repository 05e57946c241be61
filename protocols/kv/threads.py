"""Where the kv store's storage calls run: never on the reactor thread when they may block.

Contract: a L{StorageCalls} runs one storage call and gives its result as
a C{Deferred}, fired on the reactor thread.  L{ThreadedCalls}, what a
durable storage (SQLite, PostgreSQL) gets, runs each call in a small thread
pool of its own (L{THREADS} threads at most, each with its own database
connection, opened by the storage on the thread's first call), so that a
call waiting for a lock, a slow commit's sync or an unreachable database
delays that call only: the reactor goes on serving every other connection,
and up to L{THREADS} calls wait on the database at once (more queue in the
pool, in order).  L{InlineCalls}, what L{protocols.kv.storage.MemoryStorage}
gets (a dict never blocks), runs the call at once and returns a fired
C{Deferred}; tests that drive a durable store step by step on a fake clock
pass it too.

Why threads rather than psycopg's non-blocking mode driven by the reactor:
one mechanism serves both stores (the stdlib C{sqlite3} has no non-blocking
mode), the storages stay plain synchronous code whose transactions read as
they run, and the pool bounds the connections each process opens.  The
cost: a thread hand-off per call (tens of microseconds) and answers that
may come back in another order than the calls came (two calls on one
connection run side by side); a put is still answered only once its
transaction has committed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

T = TypeVar("T")

THREADS = 4
"""
Most threads (so database connections) one process's store uses: enough
that a call stuck on a lock leaves others running, few enough that many
worker processes on many hosts stay far below a database's connection limit.
"""


class StorageCalls(Protocol):
    """Runs a store's storage calls."""

    def run(self, call: Callable[..., T], *args: Any) -> Deferred[T]:
        """C{call(*args)}'s result (or its exception), fired on the reactor thread."""

    def stop(self) -> None:
        """Finish the calls running, then run no more (blocks until they end)."""


class InlineCalls:
    """Each call at once, on the caller's thread: for a storage that never blocks (a dict)."""

    def run(self, call: Callable[..., T], *args: Any) -> Deferred[T]:
        try:
            return succeed(call(*args))
        except Exception:
            return fail()

    def stop(self) -> None:
        pass


class ThreadedCalls:
    """
    Each call in a thread of a pool owned by this object, started when made
    and stopped by L{stop} or when the reactor shuts down, whichever is first.

    @ivar pool: the C{ThreadPool} (at most C{threads} threads, made as calls need them).
    """

    def __init__(self, reactor: Any, threads: int = THREADS, name: str = "kv-storage") -> None:
        """
        @param reactor: the reactor results are fired on (through its C{callFromThread}).
        @raise ValueError: C{reactor} is not a real reactor (a test's C{Clock}): give such a store L{InlineCalls}.
        """
        if not hasattr(reactor, "callFromThread"):
            raise ValueError("storage calls in threads need a reactor (with callFromThread), not a bare clock")
        self.reactor = reactor
        self.pool = ThreadPool(minthreads=0, maxthreads=threads, name=name)
        self.pool.start()
        self._trigger = reactor.addSystemEventTrigger("during", "shutdown", self.stop)

    def run(self, call: Callable[..., T], *args: Any) -> Deferred[T]:
        return deferToThreadPool(self.reactor, self.pool, call, *args)

    def stop(self) -> None:
        if self.pool.started:
            self.pool.stop()
            if self._trigger is not None:
                try:
                    self.reactor.removeSystemEventTrigger(self._trigger)
                except (ValueError, KeyError):
                    pass  # (it is the trigger running now)
                self._trigger = None
