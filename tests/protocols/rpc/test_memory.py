"""Tests for protocols.rpc over the in-memory pair (no reactor: trial and pytest both run these)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.error import ConnectionAborted, ConnectionDone, ConnectionLost
from twisted.internet.task import Clock
from twisted.logger import Logger, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, EncodingError, Limits, ProtocolError, Registry, Violation
from framing._errors import PeerError
from framing.rpc._errors import NotAnRpcMessage
from framing.rpc._wire import ANSWER, CALL, FAIL, OPEN_TYPE, Message, MessageUnslicer
from framing.slicing._constraints import Integer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE
from protocols.rpc import (
    Broker,
    DeadReferenceError,
    NoSuchMethod,
    NoSuchObject,
    Referenceable,
    RemoteError,
    RemoteReference,
    RemoteViolation,
    UnexpectedAnswer,
    registerError,
    remote,
)
from protocols.testing import connectedPair

from ..helpers import EVERY_TYPE, REFERENCE_BATCHES, same
from .services import Child, NotFound, Overriding, RpcPair, Service


class RawClient(Broker):
    """A broker that keeps every message it receives instead of acting on it: a client forging its own ids."""

    def __init__(self, **kwargs: Any) -> None:
        Broker.__init__(self, **kwargs)
        self.received: list[Any] = []

    def objectReceived(self, obj: Any) -> None:
        self.received.append(obj)


def quiet(*brokers: Broker) -> list[dict[str, Any]]:
    """Send the brokers' log events to a list instead of the global log."""
    events: list[dict[str, Any]] = []
    for broker in brokers:
        broker.connection.log = Logger(observer=events.append)
    return events


def messagesIn(data: bytes) -> list[Any]:
    """Decode a side's raw output (preamble included) into its RPC messages."""
    registry = Registry(DEFAULT_REGISTRY)
    registry.add_unslicer(OPEN_TYPE, MessageUnslicer)
    return Decoder(registry=registry).feed(data)


class CallTests(SynchronousTestCase):
    """Calls, results and what they cost on the wire."""

    def test_everyTypeRoundTrips(self) -> None:
        """A remote method receives and returns an exact copy of every built-in type."""
        pair = RpcPair(Service())
        answers = [pair.root.callRemote("echo", value) for value in EVERY_TYPE]
        pair.flush()
        for value, answer in zip(EVERY_TYPE, answers, strict=True):
            self.assertTrue(same(value, self.successResultOf(answer)), repr(value)[:80])

    def test_keywordArguments(self) -> None:
        """Positional and keyword arguments reach the method as given."""
        pair = RpcPair(Service())
        answers = [
            pair.root.callRemote("keywords", 1),
            pair.root.callRemote("keywords", 1, 5, c=9),
            pair.root.callRemote("keywords", a=4, c=0),
        ]
        pair.flush()
        self.assertEqual([self.successResultOf(d) for d in answers], [(1, 2, 3), (1, 5, 9), (4, 2, 0)])

    def test_deferredResult(self) -> None:
        """A method that returns a Deferred is answered when the Deferred fires."""
        service = Service()
        pair = RpcPair(service)
        answer = pair.root.callRemote("later", "k")
        pair.flush()
        self.assertNoResult(answer)
        self.assertEqual(pair.server.runningCount, 1)
        service.waiting["k"].callback("done")
        pair.flush()
        self.assertEqual(self.successResultOf(answer), "done")
        self.assertEqual(pair.server.runningCount, 0)

    def test_coroutineResult(self) -> None:
        """An async def method is run as a coroutine and answered with its return value."""
        service = Service()
        pair = RpcPair(service)
        answer = pair.root.callRemote("coroutine", "c")
        pair.flush()
        self.assertNoResult(answer)
        service.waiting["c"].callback(42)
        pair.flush()
        self.assertEqual(self.successResultOf(answer), 42)

    def test_tenThousandInFlightAnsweredOutOfOrder(self) -> None:
        """Ten thousand calls in flight, answered in a shuffled order, each get their own answer."""
        service = Service()
        pair = RpcPair(service)
        count = 10_000
        answers = [pair.root.callRemote("later", i) for i in range(count)]
        pair.flush()
        self.assertEqual((pair.client.pendingCount, pair.server.runningCount), (count, count))
        order = list(range(count))
        random.Random(5).shuffle(order)
        for i in order:
            service.waiting[i].callback(i * 3)
        pair.flush()
        self.assertEqual([self.successResultOf(d) for d in answers], [i * 3 for i in range(count)])
        self.assertEqual((pair.client.pendingCount, pair.server.runningCount), (0, 0))

    def test_oneWritePerCallAndPerAnswer(self) -> None:
        """Each call is one client write, each answer one server write; the preamble shares the first call's write."""
        pair = RpcPair(Service())
        self.assertEqual(pair.clientWrites, [])
        first = pair.root.callRemote("echo", "first")
        self.assertEqual(len(pair.clientWrites), 1)
        self.assertTrue(pair.clientWrites[0].startswith(PREAMBLE))
        self.assertEqual(messagesIn(pair.clientWrites[0]), [(CALL, 1, 0, "echo", ("first",), {})])
        answers = [pair.root.callRemote("echo", i) for i in range(10)]
        self.assertEqual(len(pair.clientWrites), 11)
        pair.flush()
        self.successResultOf(first)
        self.assertEqual([self.successResultOf(d) for d in answers], list(range(10)))
        self.assertEqual(len(pair.clientWrites), 11)
        self.assertEqual(len(pair.serverWrites), 12)  # its preamble alone at the end of the turn, then 11 answers
        self.assertEqual(messagesIn(b"".join(pair.serverWrites))[-1], (ANSWER, 11, 9))

    def test_preambleFlushedAtEndOfTurn(self) -> None:
        """With nothing to send, the held preamble still goes out alone at the end of the reactor turn."""
        pair = RpcPair(Service())
        self.assertEqual(pair.clientWrites, [])
        pair.clock.advance(0)
        self.assertEqual(pair.clientWrites, [PREAMBLE])

    def test_pendingCallsKeyedById(self) -> None:
        """Pending calls are counted until answered; answers match their calls whatever the order."""
        service = Service()
        pair = RpcPair(service)
        first, second = pair.root.callRemote("later", 1), pair.root.callRemote("later", 2)
        pair.flush()
        self.assertEqual(pair.client.pendingCount, 2)
        service.waiting[2].callback("two")
        pair.flush()
        self.assertEqual((self.successResultOf(second), pair.client.pendingCount), ("two", 1))
        self.assertNoResult(first)
        service.waiting[1].callback("one")
        pair.flush()
        self.assertEqual(self.successResultOf(first), "one")


class ExposureTests(SynchronousTestCase):
    """Only methods marked @remote on Referenceables can be called."""

    def test_unmarkedNamesAreNoSuchMethod(self) -> None:
        """Unmarked methods, attributes and Python machinery all fail with NoSuchMethod, and the connection stays up."""
        pair = RpcPair(Service())
        quiet(pair.server)
        names = ["hidden", "__init__", "__class__", "remoteMethods", "waiting", "nothing", "__getattribute__"]
        answers = [pair.root.callRemote(name) for name in names]
        pair.flush()
        for name, answer in zip(names, answers, strict=True):
            error = self.failureResultOf(answer, NoSuchMethod).value
            self.assertEqual(error.remoteType, "NoSuchMethod")
            self.assertIn(repr(name), error.message)
            self.assertNotIn("AttributeError", str(error))
        echo = pair.root.callRemote("echo", "still up")
        pair.flush()
        self.assertEqual(self.successResultOf(echo), "still up")

    def test_overrideWithoutMarkIsNotRemote(self) -> None:
        """A subclass that overrides a remote method without @remote makes it not remote; other methods stay."""
        self.assertNotIn("echo", Overriding.remoteMethods)
        pair = RpcPair(Overriding())
        answers = [pair.root.callRemote("echo", 1), pair.root.callRemote("keywords", 1)]
        pair.flush()
        self.failureResultOf(answers[0], NoSuchMethod)
        self.assertEqual(self.successResultOf(answers[1]), (1, 2, 3))

    def test_rootMustBeReferenceable(self) -> None:
        """A root that is not a Referenceable is refused at once."""
        self.assertRaises(TypeError, Broker, object())

    def test_unknownTargetIsNoSuchObject(self) -> None:
        """A call to an id the peer does not export fails with NoSuchObject."""
        pair = RpcPair(Service())
        answer = RemoteReference(pair.client, 999).callRemote("get")
        pair.flush()
        self.assertEqual(self.failureResultOf(answer, NoSuchObject).value.remoteType, "NoSuchObject")

    def test_noRootIsNoSuchObject(self) -> None:
        """Calling the root of a side that exposes none fails with NoSuchObject."""
        pair = RpcPair(Service())
        answer = pair.server.rootReference().callRemote("anything")
        pair.flush()
        self.failureResultOf(answer, NoSuchObject)

    def test_plainObjectsAreNotSentByReference(self) -> None:
        """An argument that is neither a value nor a Referenceable fails the call at once and sends nothing."""
        pair = RpcPair(Service())
        pair.flush()
        before = len(pair.clientWrites)
        self.failureResultOf(pair.root.callRemote("echo", object()), EncodingError)
        self.assertEqual((len(pair.clientWrites), pair.client.pendingCount), (before, 0))

    def test_constraintNamesMustExist(self) -> None:
        """@remote(args=...) naming a parameter the method does not have is an error when the class is made."""
        with self.assertRaises(TypeError):

            class Typo(Referenceable):
                @remote(args={"nmae": Integer()})
                def method(self, name: str) -> None:
                    pass


class ErrorTests(SynchronousTestCase):
    """Exceptions in remote methods, and what the caller sees."""

    def test_exceptionArrivesAsRemoteError(self) -> None:
        """An exception in a remote method arrives as RemoteError with its type name and message, and no traceback."""
        pair = RpcPair(Service())
        quiet(pair.server)
        answers = [pair.root.callRemote("fail", "x"), pair.root.callRemote("fail", "unregistered")]
        pair.flush()
        error = self.failureResultOf(answers[0], RemoteError).value
        self.assertEqual((error.remoteType, error.message, error.remoteTraceback), ("ValueError", "bad x", None))
        self.assertEqual(str(error), "ValueError: bad x")
        other = self.failureResultOf(answers[1], RemoteError).value
        self.assertEqual(other.remoteType, "tests.protocols.rpc.services.Unregistered")

    def test_tracebacksOnlyWhenServerOptsIn(self) -> None:
        """With tracebacks=True the remote traceback comes along, for synchronous and Deferred failures."""
        service = Service()
        pair = RpcPair(service, tracebacks=True)
        quiet(pair.server)
        answers = [pair.root.callRemote("fail", "x"), pair.root.callRemote("later", "d")]
        pair.flush()
        service.waiting["d"].errback(ValueError("late"))
        pair.flush()
        errors = [self.failureResultOf(answer, RemoteError).value for answer in answers]
        self.assertEqual([error.message for error in errors], ["bad x", "late"])
        for error in errors:
            assert error.remoteTraceback is not None
            self.assertIn("ValueError", error.remoteTraceback)
        self.assertIn("in fail", errors[0].remoteTraceback)

    def test_registeredErrorArrivesAsItself(self) -> None:
        """An exception type registered on both sides arrives as itself, with its arguments, sync or async."""
        pair = RpcPair(Service())
        answers = [pair.root.callRemote("fail", "registered"), pair.root.callRemote("asyncFail")]
        pair.flush()
        first = self.failureResultOf(answers[0], NotFound).value
        self.assertEqual((first.key, first.detail, first.args), ("k", 5, ("k", 5)))
        self.assertEqual(self.failureResultOf(answers[1], NotFound).value.key, "async")

    def test_registerErrorChecks(self) -> None:
        """registerError refuses reserved names, a name taken by another type, and non-exceptions."""
        self.assertRaises(ValueError, registerError, KeyError, "Violation")
        self.assertRaises(ValueError, registerError, KeyError, "tests.NotFound")
        self.assertRaises(TypeError, registerError, int, "tests.int")
        registerError(NotFound, "tests.NotFound")  # the same registration again is fine

    def test_wrongArgumentsAreRefused(self) -> None:
        """Calling with the wrong arguments is refused at dispatch as a RemoteViolation naming the method."""
        pair = RpcPair(Service())
        quiet(pair.server)
        answer = pair.root.callRemote("echo", 1, 2, 3)
        pair.flush()
        error = self.failureResultOf(answer, RemoteViolation).value
        self.assertEqual((error.code, error.where), ("wrong-arguments", "args"))
        self.assertIn("echo(", error.message)

    def test_nonStringNameFailsAtOnce(self) -> None:
        """A method name that is not a str fails the call at once."""
        pair = RpcPair(Service())
        self.failureResultOf(pair.root.callRemote(b"echo"), TypeError)  # type: ignore[arg-type]


class ViolationTests(SynchronousTestCase):
    """Refused calls and answers fail only their own call; the connection stays up."""

    def assertViolation(self, answer: Deferred[Any], code: str, where: str) -> RemoteViolation:
        error = self.failureResultOf(answer, RemoteViolation).value
        self.assertEqual((error.remoteType, error.code, error.where), ("Violation", code, where), str(error))
        return error

    def test_argumentConstraints(self) -> None:
        """Arguments that break a per-argument constraint fail the call with a Violation naming the argument."""
        pair = RpcPair(Service())
        quiet(pair.server)
        answers = [
            pair.root.callRemote("add", 1, 11),
            pair.root.callRemote("add", 1, b=-1),
            pair.root.callRemote("add", "1", 2),
            pair.root.callRemote("add", 2, 3),
        ]
        pair.flush()
        self.assertViolation(answers[0], "invalid-value", "args[1]")
        self.assertViolation(answers[1], "invalid-value", "kwargs['b']")
        self.assertViolation(answers[2], "kind-refused", "args[0]")
        self.assertEqual(self.successResultOf(answers[3]), 5)

    def test_tupleConstraint(self) -> None:
        """A TupleOf constraint checks the positional arguments, nested positions included, and refuses keywords."""
        pair = RpcPair(Service())
        quiet(pair.server)
        answers = [
            pair.root.callRemote("pair", "abc", [1, 2]),
            pair.root.callRemote("pair", "abc", [1, -2]),
            pair.root.callRemote("pair", "toolong", []),
            pair.root.callRemote("pair", "abc", numbers=[1]),
        ]
        pair.flush()
        self.assertEqual(self.successResultOf(answers[0]), 6)
        self.assertViolation(answers[1], "invalid-value", "args[1][1]")
        self.assertViolation(answers[2], "body-too-large", "args[0]")
        self.assertViolation(answers[3], "kind-refused", "kwargs")

    def test_resultConstraint(self) -> None:
        """A result that breaks the method's result constraint is not sent; the call fails with a Violation."""
        pair = RpcPair(Service())
        quiet(pair.server)
        answers = [
            pair.root.callRemote("wordy", "hi"),
            pair.root.callRemote("wordy", "hello"),
            pair.root.callRemote("add", 9, 9),
        ]
        pair.flush()
        self.assertEqual(self.successResultOf(answers[0]), "hi")
        self.assertViolation(answers[1], "body-too-large", "result")
        self.assertViolation(answers[2], "invalid-value", "result")

    def test_limitsRefuseOneCall(self) -> None:
        """An argument over the server's limits is refused at its header; only that call fails."""
        pair = RpcPair(Service(), serverLimits=Limits(max_bytes_length=100))
        quiet(pair.server)
        answers = [
            pair.root.callRemote("echo", b"x" * 10),
            pair.root.callRemote("echo", [1, {"k": b"x" * 101}]),
            pair.root.callRemote("echo", b"y"),
        ]
        pair.flush()
        self.assertEqual(self.successResultOf(answers[0]), b"x" * 10)
        error = self.assertViolation(answers[1], "body-too-large", "args[0][1]['k']")
        self.assertIn("100", error.message)
        self.assertEqual(self.successResultOf(answers[2]), b"y")

    def test_unknownTypeRefusesOneCall(self) -> None:
        """An argument of a type the server does not register fails that call with unknown-type."""

        @dataclass
        class Point:
            x: int
            y: int

        registry = Registry(DEFAULT_REGISTRY)
        registry.register(Point, "tests.Point")
        pair = RpcPair(Service(), clientRegistry=registry)
        quiet(pair.server)
        answers = [pair.root.callRemote("echo", Point(1, 2)), pair.root.callRemote("echo", 3)]
        pair.flush()
        self.assertViolation(answers[0], "unknown-type", "args[0]")
        self.assertEqual(self.successResultOf(answers[1]), 3)

    def test_refusedAnswerFailsLocally(self) -> None:
        """An answer over the caller's own limits fails that call with the local Violation; others go on."""
        pair = RpcPair(Service(), clientLimits=Limits(max_string_length=10))
        quiet(pair.client)
        answers = [pair.root.callRemote("echo", "x" * 11), pair.root.callRemote("echo", "short")]
        pair.flush()
        violation = self.failureResultOf(answers[0], Violation).value
        self.assertNotIsInstance(violation, RemoteError)
        self.assertEqual((violation.code, violation.where), ("body-too-large", "result"))
        self.assertEqual(self.successResultOf(answers[1]), "short")

    def test_unencodableResult(self) -> None:
        """A result that cannot be encoded fails the call with an encoding-error Violation at the result."""
        pair = RpcPair(Service())
        answer = pair.root.callRemote("unencodable")
        pair.flush()
        self.assertViolation(answer, "encoding-error", "result")

    def test_malformedCallIsAnsweredByItsId(self) -> None:
        """A call whose fields are malformed is refused and answered with a FAIL for its id."""
        server = Broker(Service(), clock=Clock())
        client = RawClient(clock=Clock())
        memory = connectedPair(server, client)
        events = quiet(server)
        # The wire shape of a CALL: (CALL, id, target, name, kwargs or None, *args).
        client.sendObject(Message((CALL, 77, 0, 12, None)))
        client.sendObject(Message((CALL, 78, 0, "echo", [1])))
        client.sendObject(Message((CALL, 79, 0, "echo", {1: 2})))
        memory.flush()
        fails = [m for m in client.received if m[0] == FAIL]
        self.assertEqual(
            [(m[1], m[2], m[5]) for m in fails],
            [
                (77, "Violation", ("invalid-value", "name")),
                (78, "Violation", ("kind-refused", "kwargs")),
                (79, "Violation", ("invalid-value", "kwargs")),
            ],
        )
        self.assertEqual(len(events), 3)
        self.assertFalse(memory.serverTransport.disconnecting)

    def test_unknownReferenceComingHome(self) -> None:
        """A reference claiming to be one of the server's exports that does not exist is refused."""
        pair = RpcPair(Service())
        quiet(pair.server)
        answer = pair.root.callRemote("echo", RemoteReference(pair.client, 999))
        pair.flush()
        self.assertViolation(answer, "invalid-value", "args[0]")


class CancellationTests(SynchronousTestCase):
    """Cancelling and timing out calls."""

    def test_cancelReachesServer(self) -> None:
        """Cancelling a call fails it with CancelledError at once, sends a CANCEL, cancels the server's Deferred."""
        service = Service()
        pair = RpcPair(service)
        answer = pair.root.callRemote("later", "x")
        pair.flush()
        writes = len(pair.clientWrites)
        answer.cancel()
        self.failureResultOf(answer, CancelledError)
        self.assertEqual(len(pair.clientWrites), writes + 1)
        self.assertEqual(pair.client.pendingCount, 0)
        pair.flush()
        self.assertEqual(service.cancelled, ["x"])
        self.assertEqual(pair.server.runningCount, 0)

    def test_cancelCoroutine(self) -> None:
        """Cancelling a call to an async def method cancels the coroutine where it waits."""
        service = Service()
        pair = RpcPair(service)
        answer = pair.root.callRemote("coroutine", "c")
        pair.flush()
        answer.cancel()
        pair.flush()
        self.failureResultOf(answer, CancelledError)
        self.assertEqual(service.cancelled, ["c", ("coroutine", "c")])

    def test_timeout(self) -> None:
        """addTimeout cancels the call when it expires: the caller sees TimeoutError and the server cancels."""
        from twisted.internet.defer import TimeoutError

        service = Service()
        pair = RpcPair(service)
        answer = pair.root.callRemote("later", "t").addTimeout(5, pair.clock)
        pair.flush()
        pair.clock.advance(4)
        self.assertNoResult(answer)
        pair.clock.advance(1)
        self.failureResultOf(answer, TimeoutError)
        pair.flush()
        self.assertEqual(service.cancelled, ["t"])

    def test_answerAfterCancelIgnored(self) -> None:
        """An answer that arrives for a call already cancelled is ignored and logged at debug level."""
        service = Service()
        pair = RpcPair(service)
        events = quiet(pair.client, pair.server)
        answer = pair.root.callRemote("stubborn", "s")
        pair.memory.flush()
        answer.cancel()
        service.waiting["s"].callback("late")  # answered before the CANCEL arrives
        pair.flush()
        self.failureResultOf(answer, CancelledError)
        debug = [formatEvent(e) for e in events if e["log_level"].name == "debug"]
        self.assertTrue(any("not pending" in text for text in debug), debug)
        self.assertTrue(any("not running" in text for text in debug), debug)
        echo = pair.root.callRemote("echo", 1)
        pair.flush()
        self.assertEqual(self.successResultOf(echo), 1)

    def test_unknownAnswerDropsConnection(self) -> None:
        """An answer to a call never made drops the connection with UnexpectedAnswer; calls in flight fail."""
        pair = RpcPair(Service())
        events = quiet(pair.client)
        waiting = pair.root.callRemote("later", "w")
        pair.flush()
        pair.server.sendObject(Message((ANSWER, 12345, "stray")))
        pair.flush()
        self.assertIsInstance(pair.client.failure.value, UnexpectedAnswer)  # type: ignore[union-attr]
        self.assertIn("never made", str(pair.client.failure.value))  # type: ignore[union-attr]
        self.failureResultOf(waiting, UnexpectedAnswer)
        self.assertTrue(any(event.get("code") == "unexpected-answer" for event in events))

    def test_secondAnswerDropsConnection(self) -> None:
        """A failure sent for a call that was answered already drops the connection: answers are not a flood channel."""
        pair = RpcPair(Service())
        quiet(pair.client)
        echo = pair.root.callRemote("echo", 1)
        pair.flush()
        self.assertEqual(self.successResultOf(echo), 1)
        pair.server.sendObject(Message((FAIL, 1, "X", "y", None, None)))
        pair.flush()
        self.assertIsInstance(pair.client.failure.value, UnexpectedAnswer)  # type: ignore[union-attr]
        self.assertIn("answered already", str(pair.client.failure.value))  # type: ignore[union-attr]

    def test_oneLateAnswerPerCancelledCall(self) -> None:
        """Each cancelled call may still be answered once; a second answer to it drops the connection."""
        service = Service()
        pair = RpcPair(service)
        quiet(pair.client, pair.server)
        answer = pair.root.callRemote("stubborn", "s")
        pair.memory.flush()
        answer.cancel()
        service.waiting["s"].callback("late")
        pair.flush()
        self.failureResultOf(answer, CancelledError)
        self.assertIsNone(pair.client.failure)
        pair.server.sendObject(Message((ANSWER, 1, "again")))
        pair.flush()
        self.assertIsInstance(pair.client.failure.value, UnexpectedAnswer)  # type: ignore[union-attr]


class ConnectionLossTests(SynchronousTestCase):
    """Nothing hangs when the connection goes."""

    def test_lostConnectionFailsEveryPendingCall(self) -> None:
        """Every pending call fails at once with the reason the connection was lost."""
        service = Service()
        pair = RpcPair(service)
        answers = [pair.root.callRemote("later", i) for i in range(5)]
        pair.flush()
        pair.memory.clientTransport.abortConnection()
        pair.flush()
        for answer in answers:
            self.failureResultOf(answer, ConnectionAborted)
        self.assertEqual(pair.client.pendingCount, 0)
        service.waiting[0].callback("too late")  # the server's late answer is dropped quietly
        self.assertEqual(pair.server.runningCount, 0)

    def test_callsAfterLossFailAtOnce(self) -> None:
        """A call made after the connection was lost, or while it closes, fails at once with DeadReferenceError."""
        pair = RpcPair(Service())
        child = pair.root.callRemote("make", 1)
        pair.flush()
        ref = self.successResultOf(child)
        pair.client.transport.loseConnection()
        self.failureResultOf(pair.root.callRemote("echo", 1), DeadReferenceError)
        pair.flush()
        self.assertFalse(ref.isConnected())
        self.failureResultOf(ref.callRemote("get"), DeadReferenceError)
        self.failureResultOf(pair.root.callRemote("echo", 1), DeadReferenceError)

    def test_whenDisconnected(self) -> None:
        """whenDisconnected fires with the exception that ended the connection, on both sides, at once if lost."""
        pair = RpcPair(Service())
        before = pair.root.whenDisconnected()
        server = pair.server.whenDisconnected()
        self.assertNoResult(before)
        pair.client.disconnect()
        pair.flush()
        self.assertIsInstance(self.successResultOf(before), ConnectionDone)
        self.assertIsInstance(self.successResultOf(server), (ConnectionDone, ConnectionLost))
        self.assertIsInstance(self.successResultOf(pair.client.whenDisconnected()), ConnectionDone)

    def test_protocolErrorFailsPending(self) -> None:
        """Bytes that break the wire format drop the connection and fail pending calls with the ProtocolError."""
        pair = RpcPair(Service())
        quiet(pair.client)
        answer = pair.root.callRemote("later", 1)
        pair.flush()
        pair.server.transport.write(b"\xef\xef")
        pair.server.transport.flush()
        pair.flush()
        self.failureResultOf(answer, ProtocolError)

    def test_notAMessageDropsConnection(self) -> None:
        """A top-level object that is not an RPC message is no RPC peer's: an ERROR naming the code, then a close."""
        pair = RpcPair(Service())
        events = quiet(pair.server, pair.client)
        answer = pair.root.callRemote("later", 1)
        pair.client.sendObject(("CALL", 1))
        pair.flush()
        self.assertTrue(pair.memory.serverTransport.disconnected)
        self.assertIn("instead of an rpc message", formatEvent(events[0]))
        self.assertIsInstance(pair.server.failure.value, NotAnRpcMessage)  # type: ignore[union-attr]
        told = self.failureResultOf(answer, PeerError).value
        self.assertIn("the peer reported: not-an-rpc-message: a top-level tuple", str(told))


class ReferenceTests(SynchronousTestCase):
    """Referenceables travel by reference, come home as themselves, and are released."""

    def test_referenceIsCallable(self) -> None:
        """A Referenceable in a result arrives as a RemoteReference whose remote methods can be called."""
        pair = RpcPair(Service())
        made = pair.root.callRemote("make", 5)
        pair.flush()
        ref = self.successResultOf(made)
        self.assertIsInstance(ref, RemoteReference)
        answers = [ref.callRemote("add", 2), ref.callRemote("get")]
        pair.flush()
        self.assertEqual([self.successResultOf(d) for d in answers], [7, 7])

    def test_onePerIdPerConnection(self) -> None:
        """The same object received twice is the same RemoteReference."""
        pair = RpcPair(Service())
        answers = [pair.root.callRemote("same"), pair.root.callRemote("same")]
        pair.flush()
        first, second = (self.successResultOf(d) for d in answers)
        self.assertIs(first, second)

    def test_referenceComesHomeAsItself(self) -> None:
        """A RemoteReference passed back to its owner arrives as the original object."""
        pair = RpcPair(Service())
        got = pair.root.callRemote("same")
        pair.flush()
        ref = self.successResultOf(got)
        answers = [pair.root.callRemote("isShared", ref), pair.root.callRemote("isShared", [ref])]
        pair.flush()
        self.assertEqual(self.successResultOf(answers[0]), True)
        self.assertEqual(self.successResultOf(answers[1]), False)  # a list holding it, not it

    def test_callbackReference(self) -> None:
        """A Referenceable the client passes can be called back by the server."""
        pair = RpcPair(Service())
        mine = Child(10)
        answer = pair.root.callRemote("callBack", mine, 5)
        pair.flush()
        self.assertEqual(self.successResultOf(answer), 15)
        self.assertEqual(mine.value, 15)
        self.assertEqual(pair.client.exportCount, 0)  # released once the server dropped it

    def test_foreignReferenceRefused(self) -> None:
        """A RemoteReference cannot be sent over a connection it did not come from."""
        one, two = RpcPair(Service()), RpcPair(Service())
        made = one.root.callRemote("make", 1)
        one.flush()
        ref = self.successResultOf(made)
        self.failureResultOf(two.root.callRemote("echo", ref), EncodingError)

    def test_failedEncodeTakesBackExports(self) -> None:
        """References counted while encoding a call that then fails to encode are taken back."""
        pair = RpcPair(Service())
        child = Child(1)
        self.failureResultOf(pair.root.callRemote("keep", child, object()), EncodingError)
        self.assertEqual(pair.client.exportCount, 0)
        kept = pair.root.callRemote("keep", child, child)
        pair.flush()
        self.assertTrue(self.successResultOf(kept))
        first, second = pair.server.root.received  # type: ignore[union-attr]
        self.assertIs(first, second)
        self.assertEqual(pair.client.exportCount, 1)  # still held by the server's Service.received

    def test_referencesComeAndGo(self) -> None:
        """
        Thousands of references sent over one connection are all released:
        the export table shrinks back after each batch of 1000
        (L{REFERENCE_BATCHES}: 10 in the default run, a hundred thousand
        references in C{dev.py soak}).
        """
        pair = RpcPair(Service())
        pair.flush()
        start = (pair.server.exportCount, pair.client.importCount)
        for _ in range(REFERENCE_BATCHES):
            batch = pair.root.callRemote("many", 1000)
            pair.flush()
            refs = self.successResultOf(batch)
            self.assertEqual(len({id(ref) for ref in refs}), 1000)
            self.assertEqual(pair.server.exportCount, start[0] + 1000)
            del refs, batch
            pair.flush()
            self.assertEqual((pair.server.exportCount, pair.client.importCount), start)
        self.assertEqual(start, (1, 1))

    def test_releaseRace(self) -> None:
        """A reference sent again while its RELEASE is in flight stays exported until that copy is released."""
        pair = RpcPair(Service())
        got = pair.root.callRemote("same")
        pair.flush()
        first = self.successResultOf(got)
        self.assertEqual(pair.server.exportCount, 2)
        pair.memory.clientTransport.pauseProducing()  # the next answer waits on the way
        again = pair.root.callRemote("same")
        pair.flush()
        del first, got  # the only copy the client has seen dies: RELEASE(id, 1)
        pair.flush()
        self.assertEqual(pair.server.exportCount, 2)  # the second copy is still in flight
        pair.memory.clientTransport.resumeProducing()
        pair.flush()
        second = self.successResultOf(again)
        call = second.callRemote("get")
        pair.flush()
        self.assertEqual(self.successResultOf(call), 7)
        self.assertEqual(pair.server.exportCount, 2)
        del second, again, call
        pair.flush()
        self.assertEqual(pair.server.exportCount, 1)

    def test_inFlightCountsProtectExport(self) -> None:
        """The exporter forgets an object only when every sending of it has been released."""
        pair = RpcPair(Service())
        answers = [pair.root.callRemote("same") for _ in range(3)]
        pair.flush()
        ref = self.successResultOf(answers[0])
        self.assertEqual(pair.server.exportCount, 2)
        del answers
        self.assertEqual(pair.server.exportCount, 2)
        call = ref.callRemote("get")
        pair.flush()
        self.assertEqual(self.successResultOf(call), 7)
        del ref, call
        pair.flush()
        self.assertEqual(pair.server.exportCount, 1)

    def test_lossForgetsReferences(self) -> None:
        """When the connection is lost both sides forget their exports and imports."""
        pair = RpcPair(Service())
        made = pair.root.callRemote("many", 10)
        pair.flush()
        refs = self.successResultOf(made)
        pair.client.disconnect()
        pair.flush()
        self.assertEqual((pair.server.exportCount, pair.client.importCount), (0, 0))
        self.failureResultOf(refs[0].callRemote("get"), DeadReferenceError)
