"""The peer's calls running here are charged to the connection's ledger (account C{calls}) by what their arguments hold.

Issue 39: before, a peer's running calls held their arguments uncharged
(1,000 calls of 4 MiB to a method that never returns: 4 GB held, the ledger
reading 0).  See L{protocols.rpc._answering} and L{framing.rpc._incoming.callBytes}.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.trial.unittest import SynchronousTestCase

from framing import Limits
from framing._budget import held_bytes
from framing.rpc._incoming import CALLS_ACCOUNT, RUNNING_CALL_BYTES, callBytes
from protocols.rpc import DeadlineExceeded, DrainDeadlineExceeded, Referenceable, RemoteError, callContext, remote

from .services import RpcPair
from .test_memory import quiet

SIZE = 100_000
"""The bytes of each call's argument here."""


class Holder(Referenceable):
    """Methods that keep their caller's argument until the test ends them."""

    def __init__(self) -> None:
        self.held: list[Deferred[int]] = []

    @remote
    def hold(self, data: bytes) -> Deferred[int]:
        running: Deferred[int] = Deferred()
        running.addCallback(lambda _: len(data))
        self.held.append(running)
        return running

    @remote
    async def holdAsync(self, data: bytes) -> int:
        running: Deferred[None] = Deferred()
        self.held.append(running)  # type: ignore[arg-type]
        await running
        return len(data)

    @remote
    def holdAny(self, value: Any) -> Deferred[int]:
        running: Deferred[int] = Deferred()
        running.addCallback(lambda _: len(value))
        self.held.append(running)
        return running

    @remote
    def holdStream(self, items: AsyncIterator[Any]) -> Deferred[int]:
        running: Deferred[int] = Deferred()
        running.addCallback(lambda _: 0)
        self.held.append(running)
        return running

    @remote
    def size(self, data: bytes) -> int:
        return len(data)


def pair(**options: Any) -> tuple[RpcPair, Holder]:
    """A server exposing a L{Holder}, its logs quiet."""
    holder = Holder()
    made = RpcPair(holder, **options)
    quiet(made.server, made.client)
    return made, holder


def charged(made: RpcPair) -> int:
    """What the server's ledger holds for the client's calls."""
    return made.server.connection.ledger.holding(CALLS_ACCOUNT)


class RunningCallStateTests(SynchronousTestCase):
    """A running call is charged its own state too (RUNNING_CALL_BYTES), no less than that state holds."""

    def serverBytesPerCall(self, method: str, calls: int = 1000) -> float:
        """What the server side holds per call of C{method} left running, by tracemalloc (the client's part apart)."""
        made, holder = pair()
        answers = []  # (the client's waiting calls are held here, measured apart: callRemote is outside)
        for _ in range(20):  # (what is made lazily, once)
            answers.append(made.root.callRemote(method, b"k"))
            made.flush()
        gc.collect()
        tracemalloc.start()
        try:
            server = 0
            for _ in range(calls):
                answers.append(made.root.callRemote(method, b"k"))
                taken = tracemalloc.get_traced_memory()[0]
                made.flush()
                server += tracemalloc.get_traced_memory()[0] - taken
        finally:
            tracemalloc.stop()
        self.assertEqual(len(holder.held), calls + 20)
        return server / calls

    def test_stateCharged(self) -> None:
        """Each running call is charged RUNNING_CALL_BYTES beside its arguments."""
        made, holder = pair()
        made.root.callRemote("holdAsync", b"k")
        made.flush()
        self.assertEqual(charged(made), RUNNING_CALL_BYTES + held_bytes(((b"k",), {}, None)))

    def test_noLessThanHeld(self) -> None:
        """A coroutine method awaiting a Deferred, or a method returning one, holds at most what it is charged."""
        for method in ("hold", "holdAsync"):
            held = self.serverBytesPerCall(method)
            self.assertLessEqual(held, RUNNING_CALL_BYTES, method)


class RunningCallTests(SynchronousTestCase):
    """A running call's arguments are charged from its start to its end, whichever way it ends."""

    def test_chargedUntilAnswered(self) -> None:
        """A call whose method returned a Deferred holds its argument's bytes (callBytes) until answered."""
        made, holder = pair()
        answer = made.root.callRemote("hold", b"x" * SIZE)
        made.flush()
        self.assertEqual(charged(made), callBytes((b"x" * SIZE,), {}))
        self.assertIn(CALLS_ACCOUNT, made.server.connection.ledger.accounts())
        holder.held[0].callback(None)
        made.flush()
        self.assertEqual(self.successResultOf(answer), SIZE)
        self.assertEqual(charged(made), 0)

    def test_chargedWhatItHolds(self) -> None:
        """
        A call is charged the memory its arguments hold, not their wire
        bodies: a list of 100,000 small ints (100 kB of bodies) is charged
        over 3.6 MB, about 36 bytes an int.
        """
        made, holder = pair()
        answer = made.root.callRemote("holdAny", list(range(1000, 101_000)))
        made.flush()
        self.assertGreaterEqual(charged(made), 100_000 * 36)
        holder.held[0].callback(None)
        made.flush()
        self.assertEqual(self.successResultOf(answer), 100_000)
        self.assertEqual(charged(made), 0)

    def test_streamReaderChargedItsOwnSize(self) -> None:
        """
        A stream among a call's arguments (a reader here) is charged its own
        size, not what it reaches (the broker, the connection, the exports:
        held for the connection, not for this call; walked, a reader counted
        some 130 kB, so 500 such calls passed a 64 MiB pool holding nothing).
        """

        async def items() -> AsyncIterator[int]:
            yield 1

        made, holder = pair()
        answer = made.root.callRemote("holdStream", items())
        made.flush()
        self.assertGreater(charged(made), RUNNING_CALL_BYTES)
        self.assertLess(charged(made), RUNNING_CALL_BYTES + 2048)
        holder.held[0].callback(None)
        made.flush()
        self.assertEqual(self.successResultOf(answer), 0)
        self.assertEqual(charged(made), 0)

    def test_coroutineCharged(self) -> None:
        """A coroutine method's call is charged while it runs, released when it returns."""
        made, holder = pair()
        answer = made.root.callRemote("holdAsync", b"x" * SIZE)
        made.flush()
        self.assertGreater(charged(made), SIZE)
        holder.held[0].callback(None)
        made.flush()
        self.assertEqual(self.successResultOf(answer), SIZE)
        self.assertEqual(charged(made), 0)

    def test_releasedWhenFailed(self) -> None:
        """A running call that fails is released when its FAIL is sent."""
        made, holder = pair()
        answer = made.root.callRemote("hold", b"x" * SIZE)
        made.flush()
        holder.held[0].errback(ValueError("no"))
        made.flush()
        self.failureResultOf(answer, RemoteError)
        self.assertEqual(charged(made), 0)

    def test_releasedWhenCancelled(self) -> None:
        """The peer's CANCEL releases its call at once."""
        made, holder = pair()
        answer = made.root.callRemote("hold", b"x" * SIZE)
        made.flush()
        self.assertGreater(charged(made), SIZE)
        answer.cancel()
        self.failureResultOf(answer, CancelledError)
        made.flush()
        self.assertTrue(holder.held[0].called)
        self.assertEqual(charged(made), 0)

    def test_releasedAtItsDeadline(self) -> None:
        """A call whose deadline passes while it runs is released when it is failed with DeadlineExceeded."""
        made, _ = pair()
        with callContext(timeout=5, clock=made.clock):
            answer = made.root.callRemote("hold", b"x" * SIZE)
        made.flush()
        self.assertGreater(charged(made), SIZE)
        made.clock.advance(6)
        made.flush()
        self.failureResultOf(answer, DeadlineExceeded)
        self.assertEqual(charged(made), 0)

    def test_releasedWhenAbandoned(self) -> None:
        """A drain's deadline abandoning the calls still running releases them all."""
        made, _ = pair()
        answers = [made.root.callRemote("hold", b"x" * SIZE) for _ in range(3)]
        made.flush()
        self.assertGreater(charged(made), 3 * SIZE)
        made.server.incoming.abandonRunning(DrainDeadlineExceeded("drained", 1.0))
        made.flush()
        for answer in answers:
            self.failureResultOf(answer)
        self.assertEqual(charged(made), 0)

    def test_releasedAtConnectionEnd(self) -> None:
        """The connection's end lets go of its running calls; their later end releases nothing twice."""
        made, holder = pair()
        made.root.callRemote("hold", b"x" * SIZE).addErrback(lambda _: None)
        made.root.callRemoteOnly("hold", b"y" * SIZE)
        made.flush()
        ledger = made.server.connection.ledger
        self.assertGreater(ledger.holding(CALLS_ACCOUNT), 2 * SIZE)
        made.client.disconnect()
        made.flush()
        self.assertFalse(made.server.isConnected())
        self.assertEqual((ledger.held, ledger.holding(CALLS_ACCOUNT)), (0, 0))
        for running in holder.held:
            running.callback(None)
        self.assertEqual(ledger.held, 0)

    def test_callForNoAnswerCharged(self) -> None:
        """A call for no answer is charged while its method runs, released when it ends."""
        made, holder = pair()
        made.root.callRemoteOnly("hold", b"x" * SIZE)
        made.root.callRemoteOnly("hold", b"y" * SIZE)
        made.flush()
        self.assertEqual(charged(made), 2 * callBytes((b"x" * SIZE,), {}))
        holder.held[0].callback(None)
        self.assertEqual(charged(made), callBytes((b"x" * SIZE,), {}))
        holder.held[1].errback(ValueError("no"))
        self.assertEqual(charged(made), 0)

    def test_metadataCharged(self) -> None:
        """The metadata a running call carries is charged with its arguments."""
        made, holder = pair()
        metadata = {"request-id": "r" * 1000}
        with callContext(metadata=metadata):
            made.root.callRemote("hold", b"x" * SIZE)
        made.flush()
        self.assertEqual(charged(made), callBytes((b"x" * SIZE,), {}, metadata))
        self.assertGreater(charged(made), SIZE + 1000)
        holder.held[0].callback(None)
        made.flush()
        self.assertEqual(charged(made), 0)

    def test_answeredAtOnceNotCharged(self) -> None:
        """A call answered before its method returns is never charged: the ledger's peak stays below its argument."""
        made, _ = pair()
        answer = made.root.callRemote("size", b"x" * SIZE)
        made.flush()
        self.assertEqual(self.successResultOf(answer), SIZE)
        self.assertLess(made.server.connection.ledger.peak, SIZE)


class OverBudgetTests(SynchronousTestCase):
    """Calls that run on and hold more than the budget stop the connection's reading until they end."""

    def test_runningCallsStopReading(self) -> None:
        """Past max_connection_memory the server stops reading; calls after it wait unread; ending them resumes it."""
        made, holder = pair(serverLimits=Limits(max_connection_memory=int(2.5 * SIZE)))
        answers = [made.root.callRemote("hold", b"x" * SIZE) for _ in range(5)]
        made.flush()
        self.assertEqual(len(holder.held), 3)
        self.assertTrue(made.server.connection.ledger.full)
        self.assertTrue(made.memory.serverTransport.readPaused)
        for running in holder.held[:3]:
            running.callback(None)
        made.flush()
        self.assertEqual(len(holder.held), 5)
        self.assertFalse(made.memory.serverTransport.readPaused)
        for running in holder.held[3:]:
            running.callback(None)
        made.flush()
        self.assertEqual([self.successResultOf(answer) for answer in answers], [SIZE] * 5)
        self.assertEqual(charged(made), 0)
