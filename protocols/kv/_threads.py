# -*- test-case-name: tests.protocols.kv.test_threads,tests.protocols.kv.test_sqlite -*-
"""Where the kv store's storage calls run: never on the reactor thread when they may block.

Contract: a L{StorageCalls} runs one storage call and gives its result as a
C{Deferred} fired on the reactor thread.  L{ThreadedCalls} (durable
storages) runs calls in a pool of its own (at most L{THREADS} threads, one
database connection each); calls beyond that wait in one queue per caller
(L{protocols.rpc.currentBroker}), taken in turn, so a connection delays
another's next call by at most one of its own.  A call cancelled while it
waits never runs, a caller whose peer does not take its answers gets no
call started until it does, and the calls still waiting when their
caller's connection is lost fail with C{ConnectionLost} without running
(nobody waits for them; what they hold is let go).  L{InlineCalls} (memory storage, tests on a fake
clock) runs the call at once.

Cost: a thread hand-off per call (tens of microseconds); answers may come
back out of order.

Design: docs/design/kv.md
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from queue import SimpleQueue
from threading import Thread
from typing import Any, Protocol, TypeVar

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import ConnectionLost
from twisted.python.failure import Failure

from protocols.rpc._answering import currentBroker

from ._storage import StoreUnavailable

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

    @ivar pool: the L{Workers} (at most C{threads} threads, made as calls need them).
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
        self.pool = Workers(reactor, threads, name)
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
            if _lost(caller):
                _dropAll(queue)
                continue
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
            self.pool.submit(call, args, self._ran, caller, result)
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


class Workers:
    """
    At most C{size} threads, each started when a call finds none free and
    kept until L{stop}, that run the calls L{submit}ted, in order, and
    report each one's outcome on the reactor thread.  Not Twisted's
    C{ThreadPool}: its C{callInThreadWithCallback} leaves a reference cycle
    per call (a function holding itself), which only a full garbage
    collection frees; under a flood of calls that is tens of MiB held
    between two such collections.  Here a call leaves nothing behind.

    The caller keeps at most C{size} calls submitted at once (one per thread).
    """

    def __init__(self, reactor: Any, size: int, name: str) -> None:
        self.reactor, self.size, self.name = reactor, size, name
        self.started = True
        self._jobs: SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Callable[..., None], tuple[Any, ...]] | None]
        self._jobs = SimpleQueue()
        self._threads: list[Thread] = []
        self._busy = 0

    def submit(self, call: Callable[..., Any], args: tuple[Any, ...], report: Callable[..., None], *also: Any) -> None:
        """
        Run C{call(*args)} in a thread; then, on the reactor thread,
        C{report(outcome, *also)} (the outcome a L{Failure} if it raised).
        """
        self._busy += 1
        if self._busy > len(self._threads) and len(self._threads) < self.size:
            thread = Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
            self._threads.append(thread)
            thread.start()
        self._jobs.put((call, args, report, also))

    def _work(self) -> None:
        jobs, callFromThread = self._jobs, self.reactor.callFromThread
        while True:
            job = jobs.get()
            if job is None:
                return
            call, args, report, also = job
            callFromThread(self._reported, report, _outcome(call, args), also)
            del job, call, args, report, also  # (nothing of a call is held while the thread waits for the next)

    def _reported(self, report: Callable[..., None], outcome: object, also: tuple[Any, ...]) -> None:
        self._busy -= 1
        report(outcome, *also)

    def stop(self) -> None:
        """Let the calls submitted end, then end every thread (blocks until they have)."""
        self.started = False
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        self._threads = []


def _outcome(call: Callable[..., Any], args: tuple[Any, ...]) -> object:
    """C{call(*args)}, or the L{Failure} of its exception (made here, so that no frame of L{Workers._work} holds it)."""
    try:
        return call(*args)
    except BaseException:
        return Failure()  # type: ignore[no-untyped-call]


def _lost(caller: object) -> bool:
    """Whether C{caller} (a broker, or C{None}) has lost its connection."""
    disconnection = getattr(caller, "disconnection", None)
    return disconnection is not None and disconnection.reason is not None


def _dropAll(queue: deque[tuple[Callable[..., Any], tuple[Any, ...], Deferred[Any]]]) -> None:
    """Fail every call of C{queue} (a lost caller's, none started) with C{ConnectionLost}."""
    for _call, _args, result in queue:
        if not result.called:
            result.errback(ConnectionLost("the caller's connection was lost before this storage call ran"))


def _notReading(caller: object) -> bool:
    """Whether C{caller} (a broker, or C{None}) has a peer that is not taking what is sent to it: its send backlog."""
    connection = getattr(caller, "connection", None)
    transport = None if connection is None else connection.transport
    return bool(transport is not None and transport.sendBacklogged)
