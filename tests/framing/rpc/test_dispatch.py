"""The one routing of what an RPC connection receives (L{framing.rpc._dispatch}), with a recording endpoint."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Registry, Violation
from framing._errors import InvalidValue, KindRefused
from framing.rpc._dispatch import Dispatch, Handlers, RpcEndpoint, notAnRpcMessage, unreadableRequestId
from framing.rpc._errors import (
    ConnectionLost,
    MessageRefused,
    MessageWithoutId,
    NotAnRpcMessage,
    RuleBroken,
    UnreadableRequestId,
)
from framing.rpc._session import ClientSession, SessionState
from framing.rpc._streams import FlowMessage
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, GOAWAY, MESSAGES, OPEN_TYPE, RELEASE, Message, MessageUnslicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE

VECTORS = Path(__file__).parents[2] / "vectors" / "rpc.json"


class Recording:
    """An L{RpcEndpoint} that records each handler called, by name, with what it was given."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def callReceived(self, message: Message) -> None:
        self.seen.append(("callReceived", message))

    def answerReceived(self, message: Message) -> None:
        self.seen.append(("answerReceived", message))

    def failReceived(self, message: Message) -> None:
        self.seen.append(("failReceived", message))

    def cancelReceived(self, message: Message) -> None:
        self.seen.append(("cancelReceived", message))

    def releaseReceived(self, message: Message) -> None:
        self.seen.append(("releaseReceived", message))

    def goAwayReceived(self, message: Message) -> None:
        self.seen.append(("goAwayReceived", message))

    def callRefused(self, refused: MessageRefused) -> None:
        self.seen.append(("callRefused", refused))

    def answerRefused(self, refused: MessageRefused) -> None:
        self.seen.append(("answerRefused", refused))

    def refused(self, violation: Violation) -> None:
        self.seen.append(("refused", violation))

    def ruleBroken(self, error: RuleBroken, received: Any) -> None:
        self.seen.append(("ruleBroken", error, received))


MESSAGE_HANDLERS = {
    CALL: "callReceived",
    ANSWER: "answerReceived",
    FAIL: "failReceived",
    CANCEL: "cancelReceived",
    RELEASE: "releaseReceived",
    GOAWAY: "goAwayReceived",
}
"""Which handler each kind goes to (C{docs/wire-format.md} 12), by tag."""

REFUSAL_HANDLERS = {
    CALL: "callRefused",
    ANSWER: "answerRefused",
    FAIL: "answerRefused",
    CANCEL: "refused",
    RELEASE: "refused",
    GOAWAY: "refused",
}
"""Which handler each kind's refusal after its id goes to (12.4), by tag."""


def routed(obj: Any, controls: dict[type, Any] | None = None) -> list[tuple[Any, ...]]:
    """What a L{Recording} endpoint's handlers were given for C{obj}, routed by L{Dispatch.received}."""
    endpoint = Recording()
    Dispatch(endpoint, controls).received(obj)
    return endpoint.seen


class MessageTests(SynchronousTestCase):
    """A message goes to its kind's handler, by tag."""

    def test_everyKind(self) -> None:
        """Each kind of L{MESSAGES} has its handler, and only it is called with the message."""
        self.assertEqual(sorted(MESSAGE_HANDLERS), [kind.tag for kind in MESSAGES])
        for tag, name in MESSAGE_HANDLERS.items():
            message = Message((tag, 7))
            self.assertEqual(routed(message), [(name, message)], name)

    def test_tableByTag(self) -> None:
        """L{Dispatch.messages} is the endpoint's handlers by tag: what the shells index in line."""
        endpoint = Recording()
        dispatch = Dispatch(endpoint)
        self.assertEqual(
            dispatch.messages,
            (
                endpoint.callReceived,
                endpoint.answerReceived,
                endpoint.failReceived,
                endpoint.cancelReceived,
                endpoint.releaseReceived,
                endpoint.goAwayReceived,
            ),
        )

    def test_plainTupleIsNoMessage(self) -> None:
        """A plain tuple shaped like a message is no RPC message: the connection ends."""
        obj = (CALL, 1, 0, "echo", (), {})
        [(name, error, received)] = routed(obj)
        self.assertEqual(name, "ruleBroken")
        self.assertIsInstance(error, NotAnRpcMessage)
        self.assertIs(received, obj)


class RefusalTests(SynchronousTestCase):
    """A refusal goes to the call it concerns, ends the connection, or is counted (C{docs/wire-format.md} 12.4)."""

    def test_refusedAfterItsId(self) -> None:
        """A L{MessageRefused} goes by its tag: a CALL's and an answer's to their call, any other's is counted."""
        self.assertEqual(sorted(REFUSAL_HANDLERS), [kind.tag for kind in MESSAGES])
        for tag, name in REFUSAL_HANDLERS.items():
            refusal = MessageRefused(KindRefused("no"), tag, 9)
            self.assertEqual(routed(refusal), [(name, refusal)], name)
            endpoint = Recording()
            Dispatch(endpoint).refused(refusal)
            self.assertEqual(endpoint.seen, [(name, refusal)], name)

    def test_withoutId(self) -> None:
        """A L{MessageWithoutId} ends the connection with an L{UnreadableRequestId} saying what went unanswered."""
        for tag, what in [
            (CALL, "a call refused before its request id arrived cannot be answered"),
            (ANSWER, "an answer refused before its request id arrived leaves its call waiting"),
            (FAIL, "an answer refused before its request id arrived leaves its call waiting"),
        ]:
            refusal = MessageWithoutId(KindRefused("an rpc message field cannot be BIGINT", "<rpc>"), tag)
            [(name, error, received)] = routed(refusal)
            self.assertEqual(name, "ruleBroken")
            self.assertIsInstance(error, UnreadableRequestId)
            reason = "(kind-refused: an rpc message field cannot be BIGINT (at <rpc>))"
            self.assertEqual(str(error), f"unreadable-request-id: {what} {reason}")
            self.assertIs(received, refusal)

    def test_anyOtherViolation(self) -> None:
        """Any other refusal (an unknown type, a message of no kind) is counted, the connection up."""
        violation = InvalidValue("unknown rpc message tag 9")
        self.assertEqual(routed(violation), [("refused", violation)])

    def test_vectors(self) -> None:
        """
        Each refused message of C{tests/vectors/rpc.json}, decoded, goes
        where section 12.4's table says: a CALL, ANSWER or FAIL refused
        before its id ends the connection, one refused after it goes to its
        call, any other is counted.
        """
        expected = {
            "goaway-grace-string": "refused",
            "goaway-grace-negative": "refused",
            "goaway-extra-field": "refused",
            "goaway-no-field": "refused",
            "unknown-tag": "refused",
            "call-id-past-64-bits": "ruleBroken",
            "release-count-past-64-bits": "refused",
            "goaway-grace-bigint": "refused",
            "cancel-id-bigint": "refused",
            "answer-id-neg": "ruleBroken",
            "release-count-bigint": "refused",
            "call-target-bigint": "callRefused",
            "call-context-two-fields": "callRefused",
            "call-deadline-negative": "callRefused",
            "call-metadata-value-not-text": "callRefused",
            "call-metadata-empty-key": "callRefused",
            "call-context-kwargs-tuple": "callRefused",
            "fail-type-name-not-dotted-identifiers": "answerRefused",
            "fail-type-name-empty-part": "answerRefused",
        }
        registry = Registry(DEFAULT_REGISTRY)
        registry.add_unslicer(OPEN_TYPE, MessageUnslicer)
        errors = json.loads(VECTORS.read_text())["errors"]
        self.assertEqual(sorted(vector["name"] for vector in errors), sorted(expected))
        for vector in errors:
            [refusal] = Decoder(registry=registry).feed(bytes.fromhex(vector["hex"]))  # (the preamble included)
            seen = routed(refusal)
            self.assertEqual([entry[0] for entry in seen], [expected[vector["name"]]], vector["name"])


class ControlTests(SynchronousTestCase):
    """An object that is no RPC message goes to the control of its type, or ends the connection."""

    def test_byType(self) -> None:
        """An object of a control type goes to that control, and nothing else is called."""
        taken: list[Any] = []
        flow = FlowMessage((1, 2))
        self.assertEqual(routed(flow, {FlowMessage: taken.append}), [])
        self.assertEqual(taken, [flow])

    def test_exactType(self) -> None:
        """Controls go by exact type (one dict lookup): a subclass of a control type is no RPC message."""

        class Other(FlowMessage):
            pass

        taken: list[Any] = []
        other = Other((1, 2))
        [(name, error, received)] = routed(other, {FlowMessage: taken.append})
        self.assertEqual((name, taken, received), ("ruleBroken", [], other))

    def test_notAnRpcMessage(self) -> None:
        """Anything else ends the connection with L{NotAnRpcMessage}, naming its type."""
        [(name, error, received)] = routed(["a", "list"])
        self.assertEqual(name, "ruleBroken")
        self.assertIsInstance(error, NotAnRpcMessage)
        self.assertEqual(str(error), "not-an-rpc-message: a top-level list where only rpc messages are taken")
        self.assertEqual(received, ["a", "list"])

    def test_errorsMadeHere(self) -> None:
        """The errors that end a connection are made by this module's two functions, for every shell."""
        self.assertEqual(
            str(notAnRpcMessage(3)), "not-an-rpc-message: a top-level int where only rpc messages are taken"
        )
        self.assertEqual(unreadableRequestId(MessageWithoutId(Violation("no"), CALL)).code, "unreadable-request-id")


class HandlersTests(SynchronousTestCase):
    """L{Handlers}: an endpoint made of other objects' methods, as the broker's is."""

    def test_routesToItsFields(self) -> None:
        """A L{Dispatch} of a L{Handlers} calls each field's callable for its route."""
        recording = Recording()
        handlers = Handlers(
            callReceived=recording.callReceived,
            answerReceived=recording.answerReceived,
            failReceived=recording.failReceived,
            cancelReceived=recording.cancelReceived,
            releaseReceived=recording.releaseReceived,
            goAwayReceived=recording.goAwayReceived,
            callRefused=recording.callRefused,
            answerRefused=recording.answerRefused,
            refused=recording.refused,
            ruleBroken=recording.ruleBroken,
        )
        endpoint: RpcEndpoint = handlers
        dispatch = Dispatch(endpoint)
        answer = Message((ANSWER, 1, "x"))
        refusal = MessageRefused(KindRefused("no"), CALL, 2)
        dispatch.received(answer)
        dispatch.refused(refusal)
        self.assertEqual(recording.seen, [("answerReceived", answer), ("callRefused", refusal)])


class SessionEndpointTests(SynchronousTestCase):
    """The client session's dispatch: its connection's, built from its handlers and the connection's own."""

    def test_sessionHandlers(self) -> None:
        """
        The session's connection routes the server's calls to the session's
        handlers, what answers its calls, RELEASE and GOAWAY to the
        connection's own (framing.rpc._connection), the rest of the
        refusals to the session (the broker's: tests/protocols/rpc/test_table).
        """
        session: ClientSession[str] = ClientSession("peer")
        rpc = session.rpc
        dispatch = rpc.dispatch
        self.assertEqual(
            dispatch.messages,
            (
                session.callReceived,
                rpc.answerReceived,
                rpc.failReceived,
                session.cancelReceived,
                rpc.releaseReceived,
                rpc.goAwayReceived,
            ),
        )
        self.assertEqual(
            dispatch.refusals,
            (
                session.callRefused,
                rpc.answerRefused,
                rpc.answerRefused,
                session.refused,
                session.refused,
                session.refused,
            ),
        )
        self.assertIn(FlowMessage, dispatch.controls)

    def test_endedSessionFreed(self) -> None:
        """
        The session holds its dispatch, whose handlers are its methods: once
        it ended (as its I/O layer ends it when the connection closes) the
        dispatch forgets them, so the session is freed without the GC.
        """
        gc.collect()
        gc.disable()
        self.addCleanup(gc.enable)
        session: ClientSession[str] = ClientSession("peer", makeReference=lambda exportId, names: object())
        session.receive(PREAMBLE)
        session.end(ConnectionLost("closed"))
        self.assertEqual(session.state, SessionState.ENDED)
        freed = weakref.ref(session)
        del session
        self.assertIsNone(freed())


class ClearTests(SynchronousTestCase):
    def test_clearForgetsTheEndpoint(self) -> None:
        """L{Dispatch.clear} drops every handler of the endpoint; routing after it raises."""
        endpoint = Recording()
        dispatch = Dispatch(endpoint, {FlowMessage: endpoint.refused})
        dispatch.clear()
        self.assertEqual((dispatch.messages, dispatch.refusals, dispatch.controls), ((), (), {}))
        self.assertRaises(RuntimeError, dispatch.received, ["a", "list"])
        self.assertRaises(RuntimeError, dispatch.refused, InvalidValue("no"))
        self.assertEqual(endpoint.seen, [])
