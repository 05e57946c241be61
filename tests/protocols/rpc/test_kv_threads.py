"""protocols.kv.threads: storage calls run in a bounded pool, each caller's in turn, a cancelled one never."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from protocols.kv import StoreUnavailable, threads
from protocols.rpc.answering import _calling


class FakeReactor(Clock):
    """A clock with what ThreadedCalls asks of a reactor (no thread runs: the pool's hand-off is faked)."""

    def callFromThread(self, f: Any, *args: Any) -> None:
        f(*args)

    def addSystemEventTrigger(self, *args: Any) -> object:
        return object()

    def removeSystemEventTrigger(self, trigger: object) -> None:
        pass


class _CallsCase(SynchronousTestCase):
    """A ThreadedCalls of 2 threads whose pool is faked: each call handed to it is recorded, ended by the test."""

    def setUp(self) -> None:
        self.started: list[tuple[str, Deferred[Any]]] = []

        def handOff(reactor: Any, pool: Any, call: Any, *args: Any) -> Deferred[Any]:
            running: Deferred[Any] = Deferred()
            self.started.append((args[0], running))
            return running

        self.patch(threads, "deferToThreadPool", handOff)
        self.results: list[Deferred[Any]] = []
        self.addCleanup(lambda: [result.addErrback(lambda _: None) for result in self.results])
        self.calls = threads.ThreadedCalls(FakeReactor(), threads=2)
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
