"""Where the kv store's storage calls run: never on the reactor thread when they may block.

Contract: a L{StorageCalls} runs one storage call and gives its result as a
C{Deferred} fired on the reactor thread.  L{ThreadedCalls} (durable
storages) runs calls in a pool of its own (at most L{THREADS} threads, one
database connection each); calls beyond that wait in one queue per caller
(L{protocols.rpc.currentBroker}), taken in turn, so a connection delays
another's next call by at most one of its own.  A call cancelled while it
waits never runs, and a caller whose peer does not take its answers gets no
call started until it does.  L{InlineCalls} (memory storage, tests on a fake
clock) runs the call at once.

Cost: a thread hand-off per call (tens of microseconds); answers may come
back out of order.

Design: docs/design/kv.md
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from protocols.rpc.answering import currentBroker

from .storage import StoreUnavailable

T = TypeVar("T")

RETRY = 0.05
"""Seconds after which calls held back for a peer that was not reading are looked at again."""

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
    At most C{threads} calls are in the pool at once; the others wait in
    their caller's queue, and the queues are served in turn (each call costs
    a dict and deque operation more than the pool's own queue).

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
        self.threads = threads
        self.pool = ThreadPool(minthreads=0, maxthreads=threads, name=name)
        self.pool.start()
        self._trigger = reactor.addSystemEventTrigger("during", "shutdown", self.stop)
        self._inPool = 0
        # Caller (a broker, or None outside a remote call) to its calls in the pool now, and to those waiting.
        self._inPoolBy: dict[object, int] = {}
        self._waiting: dict[object, deque[tuple[Callable[..., Any], tuple[Any, ...], Deferred[Any]]]] = {}
        self._retry: Any = None

    def run(self, call: Callable[..., T], *args: Any) -> Deferred[T]:
        result: Deferred[T] = Deferred()
        caller = currentBroker()
        queue = self._waiting.get(caller)
        if queue is None:
            queue = self._waiting[caller] = deque()
        queue.append((call, args, result))
        self._dispatch()
        return result

    def _dispatch(self) -> None:
        """
        Hand waiting calls to the pool while it has room: each time the
        call of the caller with the fewest in the pool (the longest waiting
        of those), so that callers share the threads.
        """
        waiting, inPoolBy = self._waiting, self._inPoolBy
        behind = []
        while self._inPool < self.threads and waiting and self.pool.started:
            caller = min(waiting, key=lambda caller: inPoolBy.get(caller, 0))
            queue = waiting.pop(caller)
            if _notReading(caller):
                behind.append((caller, queue))
                continue
            call, args, result = queue.popleft()
            if queue:
                waiting[caller] = queue  # (to the back: the other callers go first)
            if result.called:
                continue  # cancelled while it waited: never run
            self._inPool += 1
            inPoolBy[caller] = inPoolBy.get(caller, 0) + 1
            deferToThreadPool(self.reactor, self.pool, call, *args).addBoth(self._ran, caller, result)
        for caller, queue in behind:
            waiting[caller] = queue
        if behind and self._retry is None:
            self._retry = self.reactor.callLater(RETRY, self._retried)

    def _retried(self) -> None:
        self._retry = None
        self._dispatch()

    def _ran(self, outcome: object, caller: object, result: Deferred[Any]) -> None:
        self._inPool -= 1
        left = self._inPoolBy.pop(caller) - 1
        if left:
            self._inPoolBy[caller] = left
        self._dispatch()
        if result.called:
            return  # (cancelled while it ran: the caller has its answer)
        if isinstance(outcome, Failure):
            result.errback(outcome)
        else:
            result.callback(outcome)

    def stop(self) -> None:
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        waiting, self._waiting = self._waiting, {}
        for queue in waiting.values():
            for _, _, result in queue:
                if not result.called:
                    result.errback(StoreUnavailable("the store is closing; nothing was changed"))
        if self.pool.started:
            self.pool.stop()
            if self._trigger is not None:
                try:
                    self.reactor.removeSystemEventTrigger(self._trigger)
                except (ValueError, KeyError):
                    pass  # (it is the trigger running now)
                self._trigger = None


def _notReading(caller: object) -> bool:
    """Whether C{caller} (a broker, or C{None}) has a peer that is not taking what is sent to it: its send backlog."""
    connection = getattr(caller, "connection", None)
    transport = None if connection is None else connection.transport
    return bool(transport is not None and transport.sendBacklogged)
