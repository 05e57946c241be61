"""protocols.kv._threads: storage calls run in a bounded pool, each caller's in turn, a cancelled or lost one never."""

from __future__ import annotations

import gc
from queue import SimpleQueue
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.error import ConnectionLost
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from protocols.kv import StoreUnavailable
from protocols.kv import _threads as threads
from protocols.kv._feed import ChangeFeed
from protocols.kv._watches import WatchBook
from protocols.rpc._answering import _calling


class FakeReactor(Clock):
    """A clock with what ThreadedCalls asks of a reactor (no thread runs: the pool's hand-off is faked)."""

    def callFromThread(self, f: Any, *args: Any) -> None:
        f(*args)

    def addSystemEventTrigger(self, *args: Any) -> object:
        return object()

    def removeSystemEventTrigger(self, trigger: object) -> None:
        pass


class FakeWorkers:
    """Stands for L{threads.Workers}: each call handed to it is recorded, its end left to the test."""

    started = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, Deferred[Any]]] = []

    def submit(self, call: Any, args: tuple[Any, ...], report: Any, *also: Any) -> None:
        running: Deferred[Any] = Deferred()
        running.addBoth(report, *also)
        self.calls.append((args[0], running))

    def stop(self) -> None:
        self.started = False


class _CallsCase(SynchronousTestCase):
    """A ThreadedCalls of 2 threads whose pool is faked: each call handed to it is recorded, ended by the test."""

    def setUp(self) -> None:
        self.results: list[Deferred[Any]] = []
        self.addCleanup(lambda: [result.addErrback(lambda _: None) for result in self.results])
        self.calls = threads.ThreadedCalls(FakeReactor(), threads=2)
        self.calls.pool.stop()  # (no thread was started: none is left behind)
        self.calls.pool = workers = FakeWorkers()  # type: ignore[assignment]
        self.started = workers.calls
        self.addCleanup(self.calls.stop)

    def runAs(self, caller: object, name: str) -> Deferred[Any]:
        token = _calling.set(caller)
        try:
            result = self.calls.run(lambda name: name, name)
            self.results.append(result)
            return result
        finally:
            _calling.reset(token)

    def finish(self, index: int) -> None:
        name, running = self.started[index]
        running.callback(name)


class ThreadedCallsTests(_CallsCase):
    """At most `threads` calls in the pool; the rest wait per caller, served in turn."""

    def test_callersTakeTurns(self) -> None:
        """A caller with many calls waiting delays another's next call by one of its own, not by all."""
        flood = [self.runAs("flood", f"put{i}") for i in range(50)]
        honest = self.runAs("honest", "list")
        self.assertEqual([name for name, _ in self.started], ["put0", "put1"])
        self.finish(0)
        self.assertEqual([name for name, _ in self.started][2:], ["list"])
        self.finish(2)
        self.assertEqual(self.successResultOf(honest), "list")
        self.finish(1)
        self.assertEqual(self.successResultOf(flood[0]), "put0")
        self.assertEqual(self.successResultOf(flood[1]), "put1")
        self.assertEqual([name for name, _ in self.started][3:], ["put2", "put3"])

    def test_atMostThreadsInThePool(self) -> None:
        """No more calls are handed to the pool than it has threads; each that ends lets the next in."""
        results = [self.runAs(None, f"c{i}") for i in range(5)]
        self.assertEqual(len(self.started), 2)
        for index in range(5):
            self.finish(index)
        self.assertEqual([self.successResultOf(result) for result in results], [f"c{i}" for i in range(5)])

    def test_cancelledWhileWaitingNeverRuns(self) -> None:
        """A call cancelled before its turn (its caller's deadline passed) is not run: no write after a failure."""
        self.runAs("a", "first")
        self.runAs("a", "second")
        late = self.runAs("a", "late")
        late.cancel()
        self.failureResultOf(late, CancelledError)
        self.finish(0)
        self.finish(1)
        self.assertEqual([name for name, _ in self.started], ["first", "second"])

    def test_failuresPassedOn(self) -> None:
        """A storage call's exception reaches its caller."""
        result = self.runAs(None, "x")
        self.started[0][1].errback(StoreUnavailable("locked"))
        self.failureResultOf(result, StoreUnavailable)

    def test_stopFailsWaitingCalls(self) -> None:
        """Calls still waiting when the store stops fail with StoreUnavailable, never left unanswered."""
        results = [self.runAs(None, f"c{i}") for i in range(4)]
        self.calls.stop()
        for result in results[2:]:
            self.assertIn("closing", str(self.failureResultOf(result, StoreUnavailable).value))


class _Transport:
    sendBacklogged = False


class _Connection:
    def __init__(self) -> None:
        self.transport = _Transport()


class _Broker:
    """Stands for a broker: its connection's transport says whether its peer is behind."""

    def __init__(self) -> None:
        self.connection = _Connection()


class NotReadingTests(_CallsCase):
    """A caller whose peer takes none of what is sent gets no call started until it does."""

    def test_heldWhileBehind(self) -> None:
        """While the caller's send backlog is up its calls wait (others run); once it drains, they run."""
        reactor = self.calls.reactor
        behind, honest = _Broker(), _Broker()
        behind.connection.transport.sendBacklogged = True
        held = self.runAs(behind, "get")
        answered = self.runAs(honest, "list")
        self.assertEqual([name for name, _ in self.started], ["list"])
        self.finish(0)
        self.assertEqual(self.successResultOf(answered), "list")
        reactor.advance(threads.RETRY)
        self.assertEqual(len(self.started), 1)
        behind.connection.transport.sendBacklogged = False
        reactor.advance(threads.RETRY)
        self.assertEqual([name for name, _ in self.started], ["list", "get"])
        self.finish(1)
        self.assertEqual(self.successResultOf(held), "get")


class _Disconnection:
    reason: object = None


class _LosableBroker(_Broker):
    """A broker whose connection can be lost (its C{disconnection.reason} set, as L{protocols.rpc.Broker}'s is)."""

    def __init__(self) -> None:
        super().__init__()
        self.disconnection = _Disconnection()


class LostCallerTests(_CallsCase):
    """A caller whose connection is gone has its waiting calls failed, never run: nobody waits for them."""

    def test_waitingCallsOfALostCallerFail(self) -> None:
        """Its calls still waiting fail with ConnectionLost and never reach the pool; another caller's run."""
        gone, honest = _LosableBroker(), _Broker()
        gone.connection.transport.sendBacklogged = True  # (a non-reader: its calls waited)
        held = [self.runAs(gone, f"put{i}") for i in range(3)]
        self.runAs(honest, "list")
        gone.disconnection.reason = ConnectionLost()
        self.calls.reactor.advance(threads.RETRY)
        for result in held:
            self.assertIn("lost before this storage call ran", str(self.failureResultOf(result, ConnectionLost).value))
        self.assertEqual([name for name, _ in self.started], ["list"])

    def test_runningCallEnds(self) -> None:
        """A call already in the pool when its caller's connection is lost ends and reports, as any other."""
        gone = _LosableBroker()
        running = self.runAs(gone, "put")
        gone.disconnection.reason = ConnectionLost()
        self.finish(0)
        self.assertEqual(self.successResultOf(running), "put")


class _Changes:
    """Stands for a ChangeLog with nothing new: records which caller each read ran for."""

    def __init__(self) -> None:
        self.readFor: list[object] = []

    def lastChange(self) -> int:
        return 0

    def changesAndValues(self, *args: Any) -> tuple[list[Any], dict[str, str | None]]:
        return [], {}


class FeedReadingTests(_CallsCase):
    """The change feed's reading is the process's own: no caller's turn, so a non-reader holds up nobody."""

    def test_catchUpFromANonReader(self) -> None:
        """A catch-up asked in a call of a peer that reads nothing still runs its read, and fires."""
        behind = _Broker()
        behind.connection.transport.sendBacklogged = True
        feed = ChangeFeed(_Changes(), WatchBook(None, lambda key: None), self.calls.reactor, calls=self.calls)  # type: ignore[arg-type]
        token = _calling.set(behind)
        try:
            caughtUp = feed.catchUp()
        finally:
            _calling.reset(token)
        self.assertEqual(len(self.started), 1)
        self.started[0][1].callback(([], {}))
        self.assertIsNone(self.successResultOf(caughtUp))


class WorkersTests(SynchronousTestCase):
    """threads.Workers: calls run in threads, outcomes reported on the reactor's thread, nothing left behind."""

    def setUp(self) -> None:
        self.reported: SimpleQueue[tuple[Any, ...]] = SimpleQueue()
        reactor = FakeReactor()
        reactor.callFromThread = lambda f, *args: self.reported.put((f, args))  # type: ignore[method-assign]
        self.workers = threads.Workers(reactor, 2, "test-workers")
        self.addCleanup(self.workers.stop)
        self.outcomes: list[Any] = []

    def runAll(self, calls: list[tuple[Any, tuple[Any, ...]]]) -> list[Any]:
        """Submit C{calls}, at most 2 at once; each report run here, as the reactor would; their outcomes."""
        outcomes: list[Any] = []
        pending = list(calls)
        inFlight = 0
        while pending or inFlight:
            while pending and inFlight < 2:
                call, args = pending.pop(0)
                self.workers.submit(call, args, lambda outcome, into: into.append(outcome), outcomes)
                inFlight += 1
            f, args = self.reported.get(timeout=60)
            f(*args)
            inFlight -= 1
        return outcomes

    def test_outcomes(self) -> None:
        """Each call's value, or a Failure of its exception, is reported; at most 2 threads are made."""
        outcomes = self.runAll([(pow, (2, 10)), (int, ("x",)), (len, (b"abc",))])
        self.assertIn(1024, outcomes)
        self.assertIn(3, outcomes)
        failures = [outcome for outcome in outcomes if isinstance(outcome, Failure)]
        self.assertEqual(len(failures), 1)
        self.assertIsInstance(failures[0].value, ValueError)
        self.assertLessEqual(len(self.workers._threads), 2)

    def test_noCyclePerCall(self) -> None:
        """
        A call leaves no reference cycle (Twisted's ThreadPool left one per
        call, freed only by a full collection: tens of MiB under a flood).
        What existed before the calls is frozen out of the count
        (C{gc.freeze}): another test's cycles that its runner lets go of
        meanwhile (tests.protocols.bulk.test_incoming's channels, 120
        objects, when the two shared a trial runner) are not the calls'.
        """
        gc.collect()
        gc.freeze()
        self.addCleanup(gc.unfreeze)
        gc.disable()
        self.addCleanup(gc.enable)
        self.runAll([(len, (b"x" * 100,)) for _ in range(500)])
        self.assertLess(gc.collect(), 100)

    def test_stopJoinsThreads(self) -> None:
        """stop returns once every thread has ended; submitted calls ran first."""
        self.assertEqual(self.runAll([(len, (b"ab",))]), [2])
        threadsMade = list(self.workers._threads)
        self.workers.stop()
        self.assertFalse(any(thread.is_alive() for thread in threadsMade))
        self.assertFalse(self.workers.started)
