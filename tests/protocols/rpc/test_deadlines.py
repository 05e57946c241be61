"""Deadlines and metadata that travel with a call (protocols.rpc._context), on a Clock and in real time."""

from __future__ import annotations

import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.logger import formatEvent
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import Limits, dumps
from framing.rpc._wire import CALL, CANCEL, FAIL, Message
from protocols.rpc import (
    Broker,
    DeadlineExceeded,
    Referenceable,
    RemoteViolation,
    callContext,
    connect,
    currentCall,
    remote,
    serve,
)
from protocols.rpc._interceptors import CallInfo, CallInterceptor, intercept
from protocols.testing import connectedPair

from ..helpers import pytestTest, trialTest
from .services import RpcPair
from .test_memory import messagesIn, quiet
from .test_vectors import registry


class Downstream(Referenceable):
    """The service the front calls on the caller's behalf: it reports the time it was given."""

    @remote
    def peek(self) -> Any:
        return currentCall().timeRemaining()


class Front(Referenceable):
    """Waits 0.1 s, asks downstream how much time it got, then sleeps 2 s (cancellably)."""

    def __init__(self, clock: Any, downstream: Any = None) -> None:
        self.clock = clock
        self.downstream = downstream
        self.seen: Any = None
        self.downstreamSaw: Any = None
        self.cancelled = 0
        self.finished = False

    @remote
    async def slow(self) -> str:
        self.seen = currentCall().timeRemaining()
        await deferLater(self.clock, 0.1)
        if self.downstream is not None:
            self.downstreamSaw = await self.downstream.callRemote("peek")

        def cancelled(d: Deferred[None]) -> None:
            self.cancelled += 1
            sleeping.cancel()

        asleep: Deferred[None] = Deferred(cancelled)
        sleeping = self.clock.callLater(2.0, asleep.callback, None)
        await asleep
        self.finished = True
        return "finished"

    @remote
    def metadata(self) -> dict[str, str]:
        return dict(currentCall().metadata)

    @remote
    def deadline(self) -> Any:
        return currentCall().deadline


class Recorder(Referenceable):
    """Records the metadata of each call of C{record}."""

    def __init__(self, seen: list[dict[str, str]]) -> None:
        self.seen = seen

    @remote
    def record(self) -> None:
        self.seen.append(dict(currentCall().metadata))


def failed(d: Deferred[Any]) -> list[Failure]:
    """The failures C{d} ends with, collected (consumed)."""
    failures: list[Failure] = []
    d.addErrback(failures.append)
    return failures


class DeadlineTests(SynchronousTestCase):
    """On one Clock: client -> front -> downstream, in memory."""

    def setUp(self) -> None:
        self.pair = RpcPair(Front(None))
        self.clock = self.pair.clock
        self.front: Front = self.pair.server.root  # type: ignore[assignment]
        self.front.clock = self.clock
        self.down = Broker(Downstream(), clock=self.clock)
        self.up = Broker(clock=self.clock)
        self.memory = connectedPair(self.down, self.up)
        self.front.downstream = self.up.rootReference()
        quiet(self.pair.server, self.pair.client, self.down, self.up)

    def flush(self) -> None:
        for _ in range(100):
            self.clock.advance(0)
            if not (self.pair.memory.flush() | self.memory.flush()):
                return

    def advanceTo(self, when: float) -> None:
        while self.clock.seconds() < when:
            self.clock.advance(min(0.05, when - self.clock.seconds()))
            self.flush()

    def test_deadlinePassesDuringTheCall(self) -> None:
        """
        A 0.5 s deadline on a call whose method sleeps 2 s: the caller fails
        with DeadlineExceeded at 0.5 s, the method's Deferred is cancelled,
        and the downstream call it made saw the time left (0.4 s).
        """
        with callContext(timeout=0.5, clock=self.clock):
            call = self.pair.root.callRemote("slow")
        when: list[float] = []
        call.addErrback(lambda f: when.append(self.clock.seconds()) or f)
        failures = failed(call)
        self.flush()
        self.assertAlmostEqual(self.front.seen, 0.5, places=3)
        self.advanceTo(0.49)
        self.assertEqual(failures, [])
        self.assertAlmostEqual(self.front.downstreamSaw, 0.4, places=2)
        self.assertLess(self.front.downstreamSaw, 0.5)
        self.advanceTo(0.5)
        self.assertEqual(len(failures), 1)
        failures[0].trap(DeadlineExceeded)
        self.assertEqual(when, [0.5])
        self.assertEqual(self.front.cancelled, 1)
        self.advanceTo(3.0)
        self.assertFalse(self.front.finished)
        self.assertEqual(self.pair.server.runningCount, 0)
        self.assertEqual(self.pair.client.pendingCount, 0)

    def test_serverCancelsAtItsDeadline(self) -> None:
        """The callee's own timer: at the deadline it answers DeadlineExceeded and cancels the method."""
        self.front.downstream = None
        self.pair.client.connection.sendObject(Message((CALL, 7, 0, "slow", (None, 300, None))))
        self.flush()
        self.assertEqual([m for m in messagesIn(b"".join(self.pair.serverWrites)) if m[1] == 7], [])
        self.clock.advance(0.3)
        self.assertEqual(self.front.cancelled, 1)
        (sent,) = [m for m in messagesIn(b"".join(self.pair.serverWrites)) if m[1] == 7]
        self.assertEqual(sent[:3], (FAIL, 7, "chunkwire.DeadlineExceeded"))

    def test_callForNoAnswerCancelledAtItsDeadline(self) -> None:
        """
        A call for no answer with a 0.3 s deadline whose method sleeps 2 s:
        cancelled at 0.3 s on the server, its end logged as DeadlineExceeded,
        nothing sent back; it no longer counts as running.
        """
        self.front.downstream = None
        events = quiet(self.pair.server)
        with callContext(timeout=0.3, clock=self.clock):
            self.pair.root.callRemoteOnly("slow")
        self.flush()
        self.assertEqual(self.pair.server.runningCount, 1)
        writes = len(self.pair.serverWrites)
        self.advanceTo(0.29)
        self.assertEqual(self.front.cancelled, 0)
        self.advanceTo(0.3)
        self.assertEqual(self.front.cancelled, 1)
        self.assertEqual(self.pair.server.runningCount, 0)
        self.advanceTo(3.0)
        self.assertFalse(self.front.finished)
        self.assertEqual(len(self.pair.serverWrites), writes)
        logged = "\n".join(formatEvent(event) for event in events)
        self.assertIn("DeadlineExceeded", logged)
        self.assertIn("'slow' (called for no answer) did not finish within its deadline", logged)

    def test_callForNoAnswerEndingInTimeKeepsNoTimer(self) -> None:
        """A call for no answer that ends before its deadline is not cancelled, and leaves no timer behind."""
        self.front.downstream = None
        with callContext(timeout=5.0, clock=self.clock):
            self.pair.root.callRemoteOnly("slow")
        self.flush()
        self.assertEqual(len(self.clock.getDelayedCalls()), 2)  # (the method's sleep, and its deadline)
        self.advanceTo(2.2)
        self.assertTrue(self.front.finished)
        self.assertEqual((self.front.cancelled, self.pair.server.runningCount), (0, 0))
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_notRunOnceExpired(self) -> None:
        """A call that arrives with no time left is answered DeadlineExceeded and does not run."""
        self.pair.client.connection.sendObject(Message((CALL, 9, 0, "slow", (None, 0, None))))
        before = len(self.pair.serverWrites)
        self.flush()
        self.assertIsNone(self.front.seen)
        (sent,) = [m for m in messagesIn(b"".join(self.pair.serverWrites)) if m[1] == 9]
        self.assertEqual(sent[:3], (FAIL, 9, "chunkwire.DeadlineExceeded"))
        self.assertGreater(len(self.pair.serverWrites), before)

    def test_expiredBeforeSending(self) -> None:
        """A deadline that passed before the call is made fails it at once, and nothing is sent."""
        with callContext(timeout=0.5, clock=self.clock):
            self.advanceTo(0.5)
            writes = len(self.pair.clientWrites)
            failures = failed(self.pair.root.callRemote("slow"))
        self.assertEqual(len(failures), 1)
        failures[0].trap(DeadlineExceeded)
        self.assertEqual(len(self.pair.clientWrites), writes)

    def test_clientSendsCancel(self) -> None:
        """The caller's timer sends CANCEL for the call it gives up on."""
        self.front.downstream = None
        with callContext(timeout=0.2, clock=self.clock):
            failures = failed(self.pair.root.callRemote("slow"))
        self.flush()
        before = len(self.pair.clientWrites)
        # Stop the server's own timer from answering first: only the client's timer runs at 0.2.
        self.clock.advance(0.2)
        failures[0].trap(DeadlineExceeded)
        kinds = [m[0] for m in messagesIn(b"".join(self.pair.clientWrites))[-1:]]
        self.assertEqual(kinds, [CANCEL])
        self.assertGreater(len(self.pair.clientWrites), before)

    def test_nestedContextsTakeTheEarlierDeadline(self) -> None:
        """An inner callContext cannot extend the outer deadline; the method sees the earlier one."""
        with callContext(timeout=0.3, clock=self.clock), callContext(timeout=5.0, clock=self.clock):
            call = self.pair.root.callRemote("deadline")
        results: list[Any] = []
        call.addCallback(results.append)
        self.flush()
        self.assertEqual(len(results), 1)
        self.assertAlmostEqual(results[0], 0.3, places=3)

    def test_plainCallUnchanged(self) -> None:
        """A call without deadline or metadata is sent byte for byte as before (keyword arguments None)."""
        writes = len(self.pair.clientWrites)
        self.pair.root.callRemote("metadata")
        sent = b"".join(self.pair.clientWrites[writes:])
        # (the preamble is held until the first message, and leaves with it)
        self.assertEqual(sent, dumps(Message((CALL, 1, 0, "metadata", None)), registry()))
        self.assertIsNone(currentCall().deadline)


class MetadataTests(SynchronousTestCase):
    """Metadata: set by the caller and by client interceptors, read by the method and server interceptors."""

    def test_methodReadsMetadata(self) -> None:
        """The method sees the metadata the caller set; a call outside the context carries none."""
        pair = RpcPair(Front(None))
        with callContext(metadata={"request-id": "r1"}):
            call = pair.root.callRemote("metadata")
        later = pair.root.callRemote("metadata")
        results: list[Any] = []
        call.addCallback(results.append)
        later.addCallback(results.append)
        pair.flush()
        self.assertEqual(results, [{"request-id": "r1"}, {}])

    def test_callForNoAnswer(self) -> None:
        """A call for no answer carries its metadata too; one whose deadline passed raises and sends nothing."""
        seen: list[dict[str, str]] = []
        pair = RpcPair(Recorder(seen))
        with callContext(metadata={"request-id": "r2"}):
            pair.root.callRemoteOnly("record")
        pair.flush()
        self.assertEqual(seen, [{"request-id": "r2"}])
        writes = len(pair.clientWrites)
        with callContext(timeout=0.1, clock=pair.clock):
            pair.clock.advance(0.2)
            with self.assertRaises(DeadlineExceeded):
                pair.root.callRemoteOnly("record")
        self.assertEqual(len(pair.clientWrites), writes)

    def test_tooMuchMetadataRefused(self) -> None:
        """Metadata past the receiver's Limits is refused with a Violation; the connection stays up."""
        pair = RpcPair(Front(None), serverLimits=Limits(max_call_metadata=2, max_call_metadata_length=20))
        quiet(pair.server, pair.client)
        with callContext(metadata={"a": "1", "b": "2", "c": "3"}):
            many = failed(pair.root.callRemote("metadata"))
        with callContext(metadata={"a": "x" * 30}):
            long = failed(pair.root.callRemote("metadata"))
        fine: list[Any] = []
        with callContext(metadata={"a": "1"}):
            pair.root.callRemote("metadata").addCallback(fine.append)
        pair.flush()
        self.assertEqual(many[0].trap(RemoteViolation), RemoteViolation)
        self.assertEqual(many[0].value.code, "too-many-items")
        self.assertEqual(long[0].value.code, "invalid-value")
        self.assertEqual(fine, [{"a": "1"}])

    def test_metadataIsText(self) -> None:
        """callContext refuses metadata that is not text, before anything is sent."""
        with self.assertRaises(TypeError):
            with callContext(metadata={"a": 1}):  # type: ignore[dict-item]
                pass

    def test_interceptorsSeeAndAddMetadata(self) -> None:
        """A client interceptor adds metadata that the server's interceptor and the method see."""
        seen: list[tuple[str, dict[str, str], Any]] = []

        class Tagger(CallInterceptor):
            def callStarted(self, call: CallInfo) -> None:
                seen.append((call.side, dict(call.metadata), call.deadline))
                if call.side == "client":
                    call.metadata["trace"] = "t1"  # type: ignore[index]

        pair = RpcPair(Front(None))
        intercept(pair.client, [Tagger()])
        intercept(pair.server, [Tagger()])
        results: list[Any] = []
        with callContext(metadata={"request-id": "r1"}, timeout=1.0, clock=pair.clock):
            pair.root.callRemote("metadata").addCallback(results.append)
        pair.flush()
        self.assertEqual(results, [{"request-id": "r1", "trace": "t1"}])
        (client, server) = seen
        self.assertEqual(client[:2], ("client", {"request-id": "r1"}))
        self.assertAlmostEqual(client[2], 1.0)
        self.assertEqual(server[:2], ("server", {"request-id": "r1", "trace": "t1"}))
        self.assertAlmostEqual(server[2], 1.0, places=3)


# -- real time, over TCP --------------------------------------------------------------------


async def realDeadline(reactor: Any) -> None:
    """Real time: a 0.5 s deadline on a 2 s method fails at about 0.5 s, and the method is cancelled."""
    front = Front(reactor)
    port = await serve(reactor, "tcp:0:interface=127.0.0.1", front)
    root = await connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
    try:
        started = reactor.seconds()
        with callContext(timeout=0.5):
            call = root.callRemote("slow")
        try:
            await call
        except DeadlineExceeded:
            pass
        else:
            raise AssertionError("the call did not fail")
        took = reactor.seconds() - started
        # Never early; how late a loaded machine makes it is no measure: that the deadline, not the
        # method's end, failed the call is shown by the method's being cancelled and never finished.
        assert took >= 0.5, took
        deadline = time.monotonic() + 60  # only a hang takes that long
        while not front.cancelled and time.monotonic() < deadline:
            await deferLater(reactor, 0.01)
        assert front.cancelled == 1 and not front.finished
    finally:
        await root.broker.disconnect()
        await port.stopListening()
        await port.factory.disconnectAll()  # type: ignore[attr-defined]


class RealTimeTests(TestCase):
    """The real-time deadline (trial runs this; pytest runs the twin below)."""

    test_real_deadline = trialTest(realDeadline)


test_real_deadline = pytestTest(realDeadline)
