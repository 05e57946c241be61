"""
The calls one side makes (L{protocols.rpc._calls.OutgoingCalls}), on a recording connection and a fake clock.

Each call is one CALL sent; it gets its answer or fails; timeouts, deadlines
and cancelling send a CANCEL and forget the call; a late answer to such a
call is ignored, a stray one fails the connection; losing the connection
fails every pending call.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from framing._outgoing import Outgoing
from framing.rpc._connection import RpcConnection, Shell
from framing.rpc._drain import GoingAway
from framing.rpc._errors import (
    CallTimedOut,
    DeadlineExceeded,
    DeadReferenceError,
    RemoteError,
    TooManyPendingCalls,
)
from framing.rpc._limits import CallLimits
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, NO_ANSWER, Message
from framing.rpc._wire import callContext as sentContext
from protocols.rpc._calls import OutgoingCalls, callName, reactorOf
from protocols.rpc._context import callContext


class Transport:
    disconnecting = False


class Connection:
    """What L{OutgoingCalls} asks of its connection, recorded."""

    def __init__(self) -> None:
        self.transport = Transport()
        self.failure: Any = None
        self.sent: list[tuple[Any, ...]] = []
        self.logged: list[str] = []
        self.failed: list[BaseException] = []
        self.refuse: BaseException | None = None

    def sendObject(self, message: Message, outgoing: Outgoing | None = None) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.sent.append(tuple(message))

    def peerName(self) -> str:
        return "the peer"

    def logFailure(self, kind: str, template: str, level: Any, **fields: Any) -> None:
        self.logged.append(kind)

    def failConnection(self, error: BaseException) -> None:
        self.failed.append(error)


class OutgoingCallsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.connection = Connection()
        self.clock = Clock()
        self.calls = self.make(CallLimits())

    def make(self, limits: CallLimits, **kw: Any) -> OutgoingCalls:
        """
        Calls on an L{RpcConnection} routed to them as the broker routes
        it (tests/protocols/rpc/test_table); C{self.received} delivers to it.
        """
        rpc: RpcConnection[Any] = RpcConnection(maxPending=limits.maxPending, nameOf=callName)
        calls = OutgoingCalls(self.connection, limits, self.clock, rpc=rpc, **kw)
        connection = self.connection
        rpc.route(
            Shell(
                callReceived=self.fail,
                cancelReceived=self.fail,
                callRefused=self.fail,
                answered=calls.callAnswered,
                failed=calls.failed,
                ignored=calls.ignored,
                goneAway=self.fail,
                refused=self.fail,
                ruleBroken=lambda error, received: connection.failConnection(error),
                peerName=connection.peerName,
            ),
            answerReceived=calls.answerReceived,
        )
        self.received = rpc.objectReceived
        calls.start()
        return calls

    def test_notUpYet(self) -> None:
        """Before the connection is up, a call fails at once and nothing is sent."""
        calls = OutgoingCalls(self.connection, CallLimits(), self.clock, rpc=RpcConnection(nameOf=callName))
        self.failureResultOf(calls.callRemote(0, "m", (), {}), DeadReferenceError)
        self.assertRaises(DeadReferenceError, calls.callRemoteOnly, 0, "m", (), {})
        self.assertEqual((self.connection.sent, calls.open), ([], False))

    def test_callAndAnswer(self) -> None:
        """A call is one CALL (request id, target, name, kwargs or None, args); its ANSWER fires it."""
        call = self.calls.callRemote(4, "add", (1, 2), {"k": 3})
        other = self.calls.callRemote(4, "add", (), {})
        self.assertEqual(self.connection.sent, [(CALL, 1, 4, "add", {"k": 3}, 1, 2), (CALL, 2, 4, "add", None)])
        self.assertEqual(self.calls.pendingCount, 2)
        self.received(Message((ANSWER, 1, "three")))
        self.assertEqual(self.successResultOf(call), "three")
        self.assertNoResult(other)
        self.assertEqual(self.calls.pendingCount, 1)

    def test_nameMustBeText(self) -> None:
        """A method name that is not a str fails the call; nothing is sent."""
        self.failureResultOf(self.calls.callRemote(0, b"m", (), {}), TypeError)  # type: ignore[arg-type]
        self.assertRaises(TypeError, self.calls.callRemoteOnly, 0, b"m", (), {})  # type: ignore[arg-type]
        self.assertEqual(self.connection.sent, [])

    def test_failReceived(self) -> None:
        """A FAIL fails the call with the error it describes."""
        call = self.calls.callRemote(0, "m", (), {})
        self.received(Message((FAIL, 1, "some.Error", "it broke", None, None)))
        self.assertIn("it broke", str(self.failureResultOf(call, RemoteError).value))

    def test_maxPending(self) -> None:
        """One pending call more than C{maxPending} fails with L{TooManyPendingCalls}, unsent."""
        calls = self.make(CallLimits(maxPending=1))
        calls.callRemote(0, "m", (), {})
        self.failureResultOf(calls.callRemote(0, "m", (), {}), TooManyPendingCalls)
        self.assertEqual(len(self.connection.sent), 1)

    def test_sendFailsCallForgotten(self) -> None:
        """A call whose CALL cannot be sent fails with the error and is not left pending."""
        self.connection.refuse = ValueError("cannot encode")
        self.failureResultOf(self.calls.callRemote(0, "m", (object(),), {}), ValueError)
        self.assertEqual(self.calls.pendingCount, 0)

    def test_timeout(self) -> None:
        """Unanswered for C{callTimeout}: forgotten, a CANCEL sent, the call fails; its late answer is ignored."""
        calls = self.make(CallLimits(callTimeout=5.0))
        call = calls.callRemote(0, "slow", (), {})
        self.clock.advance(4.9)
        self.assertNoResult(call)
        self.clock.advance(0.1)
        self.failureResultOf(call, CallTimedOut)
        self.assertEqual(self.connection.sent[1:], [(CANCEL, 1)])
        self.received(Message((ANSWER, 1, "late")))
        self.assertEqual((self.connection.logged, self.connection.failed), (["not-pending"], []))

    def test_answerStopsTimer(self) -> None:
        """An answered call's timer is cancelled: no CANCEL later."""
        calls = self.make(CallLimits(callTimeout=5.0))
        calls.callRemote(0, "m", (), {})
        self.received(Message((ANSWER, 1, None)))
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_cancel(self) -> None:
        """Cancelling sends a CANCEL and forgets the call; its late answer is ignored, once."""
        call = self.calls.callRemote(0, "m", (), {})
        call.cancel()
        self.failureResultOf(call, CancelledError)
        self.assertEqual(self.connection.sent[1:], [(CANCEL, 1)])
        self.received(Message((ANSWER, 1, "late")))
        self.assertEqual(self.connection.failed, [])
        self.received(Message((ANSWER, 1, "again")))
        self.assertEqual(len(self.connection.failed), 1)

    def test_strayAnswerFailsConnection(self) -> None:
        """An answer to a call never made fails the connection."""
        self.received(Message((ANSWER, 9, None)))
        self.assertEqual(len(self.connection.failed), 1)

    def test_deadline(self) -> None:
        """In a callContext, the CALL carries the milliseconds left, and the call fails when they run out."""
        with callContext(2.0, clock=self.clock):
            call = self.calls.callRemote(0, "m", (), {})
        self.assertEqual(self.connection.sent, [(CALL, 1, 0, "m", sentContext(None, 2000, None))])
        self.clock.advance(2.0)
        self.failureResultOf(call, DeadlineExceeded)
        self.assertEqual(self.connection.sent[1:], [(CANCEL, 1)])

    def test_deadlinePassed(self) -> None:
        """A call made after its deadline passed fails and is never sent."""
        with callContext(1.0, clock=self.clock):
            self.clock.advance(1.0)
            self.failureResultOf(self.calls.callRemote(0, "m", (), {}), DeadlineExceeded)
            self.assertRaises(DeadlineExceeded, self.calls.callRemoteOnly, 0, "m", (), {})
        self.assertEqual(self.connection.sent, [])

    def test_callRemoteOnly(self) -> None:
        """A call for no answer is one CALL with request id NO_ANSWER, pending nowhere."""
        self.assertIsNone(self.calls.callRemoteOnly(3, "log", ("x",), {}))
        self.assertEqual(self.connection.sent, [(CALL, NO_ANSWER, 3, "log", None, "x")])
        self.assertEqual(self.calls.pendingCount, 0)

    def test_callSentSeesEachCall(self) -> None:
        """Each extension's C{callSent} is told of each call, with its Outgoing, before it is sent."""
        seen: list[tuple[Any, Any]] = []
        calls = self.make(CallLimits(), callSent=[lambda call, outgoing: seen.append((call, outgoing))])
        call = calls.callRemote(0, "m", (), {})
        [(told, outgoing)] = seen
        self.assertIs(told, call)
        self.assertIsInstance(outgoing, Outgoing)

    def test_callSentRaising(self) -> None:
        """An extension's C{callSent} that raises fails the call with its error; nothing is sent nor left pending."""

        def broken(call: Any, outgoing: Any) -> None:
            raise RuntimeError("a broken extension")

        calls = self.make(CallLimits(), callSent=[broken])
        self.failureResultOf(calls.callRemote(0, "m", (), {}), RuntimeError)
        self.assertEqual((self.connection.sent, calls.pendingCount), ([], 0))

    def test_goingAway(self) -> None:
        """Stopped (GOAWAY either way), a call fails with GoingAway, nothing sent; the calls in flight are answered."""
        call = self.calls.callRemote(0, "m", (), {})
        self.calls.stop("the connection to the peer is draining (sent GOAWAY)")
        error = self.failureResultOf(self.calls.callRemote(0, "n", (), {}), GoingAway).value
        self.assertEqual(str(error), "cannot call 'n': the connection to the peer is draining (sent GOAWAY)")
        self.assertRaises(GoingAway, self.calls.callRemoteOnly, 0, "n", (), {})
        self.assertEqual(len(self.connection.sent), 1)
        self.received(Message((ANSWER, 1, "last")))
        self.assertEqual(self.successResultOf(call), "last")

    def test_connectionLost(self) -> None:
        """Every pending call fails with the reason, naming its method and the peer; later calls fail at once."""
        calls = self.make(CallLimits(callTimeout=5.0))
        first, second = calls.callRemote(0, "one", (), {}), calls.callRemote(0, "two", (), {})
        calls.connectionLost(Failure(ConnectionDone("bye")))
        for call, name in [(first, "one"), (second, "two")]:
            error = self.failureResultOf(call, ConnectionDone).value
            self.assertIn(name, str(error))
            self.assertIn("the peer", str(error))
        self.assertEqual((calls.pendingCount, self.clock.getDelayedCalls()), (0, []))
        self.failureResultOf(calls.callRemote(0, "m", (), {}), DeadReferenceError)

    def test_reactorOf(self) -> None:
        """A clock given is used; none means the global reactor."""
        from twisted.internet import reactor

        self.assertIs(reactorOf(self.clock), self.clock)
        self.assertIs(reactorOf(None), reactor)
