"""Per-connection limits of the RPC broker (references, calls waiting, timeouts); what a closed connection leaves."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from framing import EncodingError
from framing.rpc._wire import CANCEL
from protocols.rpc import (
    SERVER_CALL_LIMITS,
    CallLimits,
    CallTimedOut,
    NoSuchMethod,
    Referenceable,
    RemoteViolation,
    TooManyPendingCalls,
    remote,
    serverFactory,
)

from .services import RpcPair, Service
from .test_memory import messagesIn, quiet


class Keeper(Referenceable):
    """Holds on to every reference it is given."""

    def __init__(self) -> None:
        self.kept: list[Any] = []

    @remote
    def keep(self, *refs: Any) -> int:
        self.kept.extend(refs)
        return len(self.kept)

    @remote
    def wait(self, *refs: Any) -> Deferred[None]:
        self.kept.extend(refs)
        return Deferred()


class Token(Referenceable):
    """Sent by reference and nothing else."""


class Silent(Referenceable):
    """A callback that never answers."""

    def __init__(self) -> None:
        self.calls = 0

    @remote
    def changed(self, *args: Any) -> Deferred[None]:
        self.calls += 1
        return Deferred()


class ImportLimitTests(SynchronousTestCase):
    """CallLimits.maxImports bounds the references a peer can make this side hold."""

    def test_pastTheLimitIsRefused(self) -> None:
        """A call carrying references past maxImports is refused with too-many-references; the connection stays up."""
        keeper = Keeper()
        pair = RpcPair(keeper, serverCallLimits=CallLimits(maxImports=3))
        quiet(pair.server, pair.client)
        first = pair.root.callRemote("keep", Token(), Token(), Token())
        second = pair.root.callRemote("keep", Token())
        pair.flush()
        self.assertEqual(self.successResultOf(first), 3)
        refused = self.failureResultOf(second, RemoteViolation).value
        self.assertEqual(refused.code, "too-many-references")
        self.assertEqual(pair.server.importCount, 3)
        self.assertTrue(pair.server.isConnected())

    def test_sameReferenceAgainIsFree(self) -> None:
        """A reference already held does not count again."""
        keeper = Keeper()
        pair = RpcPair(keeper, serverCallLimits=CallLimits(maxImports=1))
        token = Token()
        answers = [pair.root.callRemote("keep", token) for _ in range(3)]
        pair.flush()
        self.assertEqual([self.successResultOf(a) for a in answers], [1, 2, 3])
        self.assertEqual(pair.server.importCount, 1)


class PendingLimitTests(SynchronousTestCase):
    """CallLimits.maxPending bounds the calls waiting on the peer."""

    def test_failsAtOnce(self) -> None:
        """callRemote past maxPending fails at once with TooManyPendingCalls, and sends nothing."""
        service = Service()
        pair = RpcPair(service, clientCallLimits=CallLimits(maxPending=2))
        waiting = [pair.root.callRemote("stubborn", n) for n in range(2)]
        pair.flush()
        writes = len(pair.clientWrites)
        over = pair.root.callRemote("stubborn", 3)
        self.failureResultOf(over, TooManyPendingCalls)
        self.assertEqual(len(pair.clientWrites), writes)
        self.assertEqual(pair.client.pendingCount, 2)
        for deferred in waiting:
            self.assertNoResult(deferred)

    def test_roomAgainAfterAnswers(self) -> None:
        """Once answers come back, calls can be made again."""
        service = Service()
        pair = RpcPair(service, clientCallLimits=CallLimits(maxPending=1))
        first = pair.root.callRemote("echo", 1)
        pair.flush()
        self.assertEqual(self.successResultOf(first), 1)
        second = pair.root.callRemote("echo", 2)
        pair.flush()
        self.assertEqual(self.successResultOf(second), 2)


class TimeoutTests(SynchronousTestCase):
    """CallLimits.callTimeout fails calls the peer does not answer in time."""

    def setUp(self) -> None:
        self.service = Service()
        self.pair = RpcPair(self.service, clientCallLimits=CallLimits(callTimeout=5.0))
        self.events = quiet(self.pair.client, self.pair.server)

    def test_timedOutCallFails(self) -> None:
        """A call unanswered within callTimeout fails with CallTimedOut and is forgotten; the peer gets a CANCEL."""
        call = self.pair.root.callRemote("later", "k")
        self.pair.flush()
        self.pair.clock.advance(4.9)
        self.assertNoResult(call)
        self.pair.clock.advance(0.2)
        error = self.failureResultOf(call, CallTimedOut).value
        self.assertIn("'later'", str(error))
        self.assertEqual(self.pair.client.pendingCount, 0)
        self.pair.flush()
        self.assertEqual(self.service.cancelled, ["k"])

    def test_lateAnswerIgnored(self) -> None:
        """An answer that arrives after the timeout is ignored (logged at debug level), not an error."""
        self.pair.server.callLimits = CallLimits()
        call = self.pair.root.callRemote("stubborn", "k")
        self.pair.memory.flush()
        self.pair.clock.advance(6)
        self.failureResultOf(call, CallTimedOut)
        self.service.waiting["k"].callback("late")
        self.pair.flush()
        self.assertTrue(self.pair.client.isConnected())
        levels = {e["log_level"].name for e in self.events if "not pending" in e.get("log_format", "")}
        self.assertLessEqual(levels, {"debug"})

    def test_answeredInTimeCancelsTimer(self) -> None:
        """An answered call leaves no timer behind."""
        call = self.pair.root.callRemote("echo", 1)
        self.pair.flush()
        self.assertEqual(self.successResultOf(call), 1)
        self.assertEqual(self.pair.clock.getDelayedCalls(), [])

    def test_lostConnectionCancelsTimers(self) -> None:
        """Calls failed by a lost connection leave no timer behind."""
        call = self.pair.root.callRemote("stubborn", "k")
        self.pair.flush()
        self.pair.client.disconnect()
        self.pair.flush()
        self.failureResultOf(call)
        self.assertEqual(self.pair.clock.getDelayedCalls(), [])

    def test_serverDefault(self) -> None:
        """Servers' brokers time their calls out after 30 s by default; clients' do not."""
        factory = serverFactory(Service())
        self.assertEqual(factory.buildProtocol(None).receiver.callLimits, SERVER_CALL_LIMITS)
        self.assertEqual(SERVER_CALL_LIMITS.callTimeout, 30.0)
        self.assertIsNone(self.pair.server.callLimits.callTimeout)

    def test_serverCallbackTimesOut(self) -> None:
        """A server's call to a client callback that never answers fails with CallTimedOut and a CANCEL is sent."""
        keeper = Keeper()
        pair = RpcPair(keeper, serverCallLimits=SERVER_CALL_LIMITS)
        silent = Silent()
        pair.root.callRemote("keep", silent)
        pair.flush()
        call = keeper.kept[0].callRemote("changed", 1)
        pair.flush()
        pair.clock.advance(30)
        self.failureResultOf(call, CallTimedOut)
        self.assertEqual(silent.calls, 1)
        self.assertIn(CANCEL, [m[0] for m in messagesIn(b"".join(pair.serverWrites)) if isinstance(m, tuple)])


def silence(pair: RpcPair) -> None:
    """Drop both brokers' log events (a list of them would hold the brokers, as each event's source)."""
    for broker in (pair.server, pair.client):
        broker.connection.log = Logger(observer=lambda event: None)


def forgetProtocols(pair: RpcPair) -> None:
    """Make the memory transports forget their protocols once closed, as Twisted's TCP transport does."""
    pair.memory.serverTransport.protocol = pair.memory.clientTransport.protocol = None


class CycleTests(SynchronousTestCase):
    """A closed connection's objects are freed by reference counting, with no garbage collection."""

    def test_noCyclesAfterDisconnect(self) -> None:
        """After a connection with calls, references and failures closes, brokers and transports are freed at once."""
        gc.collect()
        gc.disable()
        self.addCleanup(gc.enable)
        keeper = Keeper()
        pair = RpcPair(keeper, serverCallLimits=CallLimits(callTimeout=5.0))
        silence(pair)
        kept = pair.root.callRemote("keep", Token(), Token())
        missing = pair.root.callRemote("nothing")
        unsendable = pair.root.callRemote("keep", object())
        waiting = pair.root.callRemote("wait", Token())  # still pending when the connection closes
        pair.memory.flush()
        self.successResultOf(kept)
        self.failureResultOf(missing, NoSuchMethod)
        self.failureResultOf(unsendable, EncodingError)
        self.assertNoResult(waiting)
        objects = [pair.server, pair.client, pair.server.transport, pair.client.transport, pair.server.decoder]
        refs = [weakref.ref(o) for o in objects]
        del objects
        pair.client.disconnect()
        pair.flush()
        self.failureResultOf(waiting)
        forgetProtocols(pair)
        keeper.kept.clear()  # the application's own references to the peer's objects (the kv store drops them)
        del pair, kept, missing, unsendable, waiting
        self.assertEqual([r() for r in refs], [None] * len(refs))

    def test_noCyclesAfterProtocolError(self) -> None:
        """A connection dropped for a protocol error (connectionLost shadowed on the instance) is freed at once too."""
        gc.collect()
        gc.disable()
        self.addCleanup(gc.enable)
        pair = RpcPair(Keeper())
        silence(pair)
        pair.memory.clientTransport.write(b"\xff" * 16)  # not a header: a protocol error on the server
        pair.flush()
        self.assertIsNotNone(pair.server.failure)
        refs = [weakref.ref(pair.server), weakref.ref(pair.server.transport)]
        pair.flush()
        forgetProtocols(pair)
        del pair
        self.assertEqual([r() for r in refs], [None, None])


class RunningLimitTests(SynchronousTestCase):
    """CallLimits.maxRunning bounds the peer's calls running here, with or without an answer."""

    def test_answeredCallsPastTheLimitAreRefused(self) -> None:
        """A call past maxRunning is refused with too-many-running-calls and does not run; one ending makes room."""
        keeper = Keeper()
        pair = RpcPair(keeper, serverCallLimits=CallLimits(maxRunning=3))
        quiet(pair.server, pair.client)
        waiting = [pair.root.callRemote("wait", Token()) for _ in range(3)]
        refused = pair.root.callRemote("wait", Token())
        pair.flush()
        self.assertEqual(self.failureResultOf(refused, RemoteViolation).value.code, "too-many-running-calls")
        self.assertEqual((len(keeper.kept), pair.server.incoming.runningCount), (3, 3))
        self.assertTrue(pair.server.isConnected())
        for call in waiting:
            call.cancel()
            self.failureResultOf(call, CancelledError)
        pair.flush()
        again = pair.root.callRemote("keep", Token())
        pair.flush()
        self.assertEqual(self.successResultOf(again), 4)

    def test_callsForNoAnswerCount(self) -> None:
        """Calls for no answer still running count too: past the limit they are not run (and only logged)."""
        keeper = Keeper()
        pair = RpcPair(keeper, serverCallLimits=CallLimits(maxRunning=5))
        quiet(pair.server, pair.client)
        for _ in range(20):
            pair.root.callRemoteOnly("wait", Token())
        pair.flush()
        self.assertEqual(len(keeper.kept), 5)
        self.assertEqual(pair.server.incoming.runningCount, 5)
        refused = pair.root.callRemote("keep", Token())
        pair.flush()
        self.assertEqual(self.failureResultOf(refused, RemoteViolation).value.code, "too-many-running-calls")

    def test_serverDefault(self) -> None:
        """Servers and clients alike cap running calls at 10,000 by default, as many as a caller may have waiting."""
        self.assertEqual((SERVER_CALL_LIMITS.maxRunning, CallLimits().maxRunning), (10_000, 10_000))
