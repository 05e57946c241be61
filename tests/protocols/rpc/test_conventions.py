"""
The RPC conventions of docs/wire-format.md, section 12, that a peer must not
guess: request ids, refusals before a request id, objects that are no RPC
message, what follows a CANCEL, and RELEASE counting.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from framing import Limits, Violation
from framing._errors import PeerError
from framing.rpc._errors import DuplicateRequestId, UnexpectedAnswer, UnreadableRequestId
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, RELEASE, Message
from protocols.rpc import Broker, NoSuchMethod, NoSuchObject, RemoteReference, RemoteViolation
from protocols.testing import connectedPair

from .services import Child, RpcPair, Service
from .test_memory import RawClient, messagesIn, quiet


def sent(writes: list[bytes]) -> list[Any]:
    """The RPC messages in one side's writes so far (its preamble included)."""
    return messagesIn(b"".join(writes))


class RequestIdTests(SynchronousTestCase):
    """Request ids: numbered from 1, 0 for no answer, never two running calls under one."""

    def test_numberedFromOne(self) -> None:
        """A caller numbers the calls it waits on 1, 2, 3... and a call for no answer 0."""
        pair = RpcPair(Service())
        pair.root.callRemote("echo", 1)
        pair.root.callRemoteOnly("echo", 2)
        pair.root.callRemote("echo", 3)
        pair.flush()
        self.assertEqual([message[1] for message in sent(pair.clientWrites)], [1, 0, 2])

    def test_answerToNoAnswerDropsConnection(self) -> None:
        """An ANSWER to request id 0 answers nothing the caller made: the caller drops the connection."""
        pair = RpcPair(Service())
        quiet(pair.client, pair.server)
        waiting = pair.root.callRemote("later", "w")
        pair.flush()
        pair.server.sendObject(Message((ANSWER, 0, None)))
        pair.flush()
        error = self.failureResultOf(waiting, UnexpectedAnswer).value
        self.assertTrue(str(error).startswith("unexpected-answer: "), str(error))
        told = pair.server.failure.value  # type: ignore[union-attr]
        self.assertIsInstance(told, PeerError)
        self.assertIn("the peer reported: unexpected-answer: ", str(told))

    def test_reusedIdOfARunningCallDropsConnection(self) -> None:
        """A CALL reusing the id of a call still running there drops the connection with duplicate-request-id."""
        service = Service()
        pair = RpcPair(service)
        quiet(pair.client, pair.server)
        waiting = pair.root.callRemote("later", "first")
        pair.flush()
        pair.client.sendObject(Message((CALL, 1, 0, "later", None, "second")))
        pair.flush()
        self.assertIsInstance(pair.server.failure.value, DuplicateRequestId)  # type: ignore[union-attr]
        told = self.failureResultOf(waiting, PeerError).value
        self.assertIn("the peer reported: duplicate-request-id: call 1 reuses", str(told))
        # Refused on arrival (CallAdmission.admit): the second call's method never ran.  The first's end is dropped.
        self.assertNotIn("second", service.waiting)
        service.waiting["first"].callback("late")

    def test_reusedIdOfARunningCallAnsweredAtOnce(self) -> None:
        """
        A reused id drops the connection even when the second call's method
        would answer at once: it is refused on arrival, not when it would run
        on, so no ANSWER of that id reaches the caller before the first call's.
        """
        service = Service()
        pair = RpcPair(service)
        quiet(pair.client, pair.server)
        waiting = pair.root.callRemote("later", "first")
        pair.flush()
        pair.client.sendObject(Message((CALL, 1, 0, "echo", None, "second")))
        pair.flush()
        self.assertIsInstance(pair.server.failure.value, DuplicateRequestId)  # type: ignore[union-attr]
        # (Answered at once, "second" would have been taken for the first call's answer.)
        told = self.failureResultOf(waiting, PeerError).value
        self.assertIn("the peer reported: duplicate-request-id: call 1 reuses", str(told))
        service.waiting["first"].callback("late")

    def test_reusedIdOfAnAnsweredCall(self) -> None:
        """A request id whose call was answered may come again: the callee keeps no ids but those running."""
        clock = Clock()
        server, client = Broker(Service(), clock=clock), RawClient(clock=clock)
        memory = connectedPair(server, client)
        for value in ("a", "b"):
            client.sendObject(Message((CALL, 7, 0, "echo", None, value)))
        clock.advance(0)
        memory.flush()
        self.assertEqual(client.received, [Message((ANSWER, 7, "a")), Message((ANSWER, 7, "b"))])
        self.assertIsNone(server.failure)


class RefusedBeforeTheIdTests(SynchronousTestCase):
    """A CALL, ANSWER or FAIL refused before its request id arrived: an ERROR and a close, never a silent hang."""

    CALLS = {
        "negative id": Message((CALL, -1, 0, "echo", None, 1)),
        "text id": Message((CALL, "5", 0, "echo", None, 1)),
        "tag alone": Message((CALL,)),
        "id past 64 bits": Message((CALL, 2**64, 0, "echo", None, 1)),
    }

    def test_callDropsConnection(self) -> None:
        """The callee sends an ERROR naming unreadable-request-id and closes; the caller's calls fail with it."""
        for name, message in self.CALLS.items():
            pair = RpcPair(Service())
            quiet(pair.client, pair.server)
            waiting = pair.root.callRemote("later", "w")
            pair.client.sendObject(message)
            pair.flush()
            self.assertIsInstance(pair.server.failure.value, UnreadableRequestId, name)  # type: ignore[union-attr]
            self.assertTrue(pair.memory.serverTransport.disconnected, name)
            told = str(self.failureResultOf(waiting, PeerError).value)
            self.assertIn("the peer reported: unreadable-request-id: a call refused before its request id", told)
        # The text section 12.4 shows.
        self.assertEqual(
            str(pair.server.failure.value),  # type: ignore[union-attr]
            "unreadable-request-id: a call refused before its request id arrived cannot be answered"
            " (kind-refused: an rpc message field cannot be BIGINT (at <rpc>))",
        )

    def test_answerDropsConnection(self) -> None:
        """An ANSWER or FAIL refused before its id leaves a call waiting: the caller drops the connection."""
        for message in (Message((ANSWER, -1, 5)), Message((FAIL, "1", "KeyError", "k", None, None))):
            pair = RpcPair(Service())
            quiet(pair.client, pair.server)
            waiting = pair.root.callRemote("later", "w")
            pair.flush()
            pair.server.sendObject(message)
            pair.flush()
            error = self.failureResultOf(waiting, UnreadableRequestId).value
            self.assertIn("an answer refused before its request id arrived leaves its call waiting", str(error))
            self.assertIn("the peer reported: unreadable-request-id: ", str(pair.server.failure.value))  # type: ignore[union-attr]

    def test_otherKindsOnlyRefused(self) -> None:
        """A CANCEL refused before its id is only a refusal: nobody waits on it, and the connection stays up."""
        pair = RpcPair(Service())
        events = quiet(pair.server)
        pair.client.sendObject(Message((CANCEL, -1)))
        answer = pair.root.callRemote("echo", 1)
        pair.flush()
        self.assertEqual(self.successResultOf(answer), 1)
        self.assertIsNone(pair.server.failure)
        self.assertEqual([event.get("code") for event in events], ["invalid-value"])

    def test_refusedWithItsIdIsFailed(self) -> None:
        """A CALL refused after its id arrived is answered with a FAIL; the connection stays up."""
        pair = RpcPair(Service())
        quiet(pair.server)
        nowhere = RemoteReference(pair.client, 42)
        refused = [pair.root.callRemote("add", 1, 99), pair.root.callRemote("nothing"), nowhere.callRemote("echo", 1)]
        pair.flush()
        violation = self.failureResultOf(refused[0], RemoteViolation).value
        self.assertEqual(
            (violation.remoteType, violation.code, violation.where), ("Violation", "invalid-value", "args[1]")
        )
        self.assertEqual(self.failureResultOf(refused[1], NoSuchMethod).value.remoteType, "NoSuchMethod")
        self.assertEqual(self.failureResultOf(refused[2], NoSuchObject).value.remoteType, "NoSuchObject")
        failed = [message for message in sent(pair.serverWrites) if message[0] == FAIL]
        self.assertEqual(
            [(message[1], message[2], message[5]) for message in failed][1:],
            [
                (2, "NoSuchMethod", None),
                (3, "NoSuchObject", None),
            ],
        )
        self.assertIsNone(pair.server.failure)

    def test_tooFewFieldsAfterTheId(self) -> None:
        """A CALL cut short after its id is failed by id; an ANSWER without its result fails its call."""
        clock = Clock()
        server, client = Broker(Service(), clock=clock), RawClient(clock=clock)
        memory = connectedPair(server, client)
        quiet(server)
        client.sendObject(Message((CALL, 5, 0)))
        clock.advance(0)
        memory.flush()
        ((tag, requestId, typeName, _, _, details),) = client.received
        self.assertEqual((tag, requestId, typeName, details[0]), (FAIL, 5, "Violation", "invalid-value"))
        pair = RpcPair(Service())
        quiet(pair.client)
        waiting = pair.root.callRemote("later", "w")
        pair.flush()
        pair.server.sendObject(Message((ANSWER, 1)))
        pair.flush()
        self.assertIn("needs 3 fields", str(self.failureResultOf(waiting, Violation).value))
        self.assertIsNone(pair.client.failure)

    def test_failGoesBeforeTheError(self) -> None:
        """A CALL refused and ended just before a ProtocolError is answered with its FAIL, then the ERROR comes."""
        pair = RpcPair(Service())
        quiet(pair.client, pair.server)
        refused = pair.root.callRemote("add", 1, 99)
        pending = pair.root.callRemote("later", "w")
        pair.client.connection.transport.write(b"\xe0")  # a reserved kind, in the same write
        pair.flush()
        self.assertEqual(self.failureResultOf(refused, RemoteViolation).value.code, "invalid-value")
        self.failureResultOf(pending, PeerError)


class CancelTests(SynchronousTestCase):
    """After a CANCEL the callee sends nothing more for the call cancelled."""

    def test_nothingAfterCancel(self) -> None:
        """A call cancelled while it runs is never answered, whatever its method ends with."""
        for method, ending in (("later", None), ("stubborn", "answer"), ("stubborn", ValueError("fails"))):
            service = Service()
            pair = RpcPair(service)
            answer = pair.root.callRemote(method, "k")
            pair.flush()
            before = len(pair.serverWrites)
            answer.cancel()
            pair.flush()
            self.failureResultOf(answer, CancelledError)
            running = service.waiting["k"]
            if isinstance(ending, Exception):
                running.errback(ending)
            elif not running.called:
                running.callback(ending)
            pair.flush()
            self.assertEqual(pair.serverWrites[before:], [], method)
            self.assertEqual(pair.server.runningCount, 0)
            self.assertIsNone(pair.server.failure)
            self.assertIsNone(pair.client.failure)

    def test_cancelOfWhatIsNotRunning(self) -> None:
        """A CANCEL of a call already answered, never made, or for no answer is ignored: nothing is sent."""
        pair = RpcPair(Service())
        answered = pair.root.callRemote("echo", 1)
        pair.flush()
        self.assertEqual(self.successResultOf(answered), 1)
        before = len(pair.serverWrites)
        for requestId in (1, 99, 0):
            pair.client.sendObject(Message((CANCEL, requestId)))
        pair.flush()
        self.assertEqual(pair.serverWrites[before:], [])
        self.assertIsNone(pair.server.failure)


class ReleaseTests(SynchronousTestCase):
    """RELEASE counts every rpc.ref received for one reference."""

    def test_countIsEveryArrival(self) -> None:
        """A reference whose id arrived three times is released once, with count 3; the exporter forgets it."""
        pair = RpcPair(Service())
        answers = [pair.root.callRemote("same") for _ in range(3)]
        pair.flush()
        ref = self.successResultOf(answers[0])
        self.assertEqual(pair.server.exportCount, 2)
        before = len(pair.clientWrites)
        del ref, answers
        pair.flush()
        self.assertEqual(sent(pair.clientWrites)[-1:], [Message((RELEASE, 1, 3))])
        self.assertEqual(len(pair.clientWrites), before + 1)
        self.assertEqual(pair.server.exportCount, 1)

    def test_rootNeverReleased(self) -> None:
        """The root reference (export 0) is never released, and a RELEASE of 0 changes nothing."""
        pair = RpcPair(Service())
        root = pair.client.rootReference()
        called = root.callRemote("echo", 1)
        pair.flush()
        self.assertEqual(self.successResultOf(called), 1)
        del root, called
        pair.root = None  # type: ignore[assignment]
        pair.flush()
        self.assertNotIn(RELEASE, [message[0] for message in sent(pair.clientWrites)])
        pair.client.sendObject(Message((RELEASE, 0, 5)))
        pair.flush()
        self.assertEqual(pair.server.exportCount, 1)
        again = pair.client.rootReference().callRemote("echo", 2)
        pair.flush()
        self.assertEqual(self.successResultOf(again), 2)

    def test_refInARefusedMessageIsReleased(self) -> None:
        """An rpc.ref decoded inside a message the decoder then refuses still counts: it is released."""
        pair = RpcPair(Service(), serverLimits=Limits(max_bytes_length=10))
        quiet(pair.server)
        mine = Child(1)
        refused = pair.root.callRemote("keep", mine, b"x" * 100)
        pair.flush()
        self.assertEqual(self.failureResultOf(refused, RemoteViolation).value.code, "body-too-large")
        self.assertEqual(pair.client.exportCount, 0)
        self.assertIn(Message((RELEASE, 1, 1)), sent(pair.serverWrites))
