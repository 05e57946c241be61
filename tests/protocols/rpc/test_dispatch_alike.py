"""
What an RPC connection receives is routed alike on the Twisted broker and on the clients' L{ClientSession}.

Both route through one L{framing.rpc._dispatch.Dispatch} (its own tests:
tests/framing/rpc/test_dispatch.py).  This holds the two shells to the
outcomes C{docs/wire-format.md} 12.4 gives, where they differed before:
a CANCEL, RELEASE or GOAWAY refused after its id counts as a refusal on
both; the errors that end the connection say the same; nothing after the
end of the connection is acted on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from framing import Encoder, Registry
from framing._refusals import TooManyRefusals
from framing.rpc import Referenceable, remote
from framing.rpc._errors import NotAnRpcMessage, UnreadableRequestId
from framing.rpc._session import ClientSession, SessionState
from framing.rpc._wire import CALL, CANCEL, GOAWAY, RELEASE, Message, addMessageTypes
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import CLOSE, INT, OPEN, PREAMBLE, encode_header
from protocols._logs import LogPolicy
from protocols.rpc import Broker
from protocols.testing import RecordingTransport

from .test_memory import quiet

RESERVED = b"\xe0"
"""A header of reserved kind 0xE: the stream breaks there (a ProtocolError)."""


def errorVector(name: str) -> bytes:
    """The refused message C{name} of C{tests/vectors/rpc.json}, without its preamble."""
    [vector] = [vector for vector in json.loads(VECTORS.read_text())["errors"] if vector["name"] == name]
    return bytes.fromhex(vector["hex"])[len(PREAMBLE) :]


VECTORS = Path(__file__).parents[2] / "vectors" / "rpc.json"


class Marked(Referenceable):
    """Records each call to C{mark}."""

    def __init__(self) -> None:
        self.marks: list[int] = []

    @remote
    def mark(self, value: int) -> int:
        self.marks.append(value)
        return value


def encoded(*objects: Any) -> bytes:
    """The bytes of C{objects} (RPC messages or not), one top-level object each, no preamble."""
    registry = Registry(DEFAULT_REGISTRY)
    addMessageTypes(registry)
    encoder = Encoder(registry)
    return b"".join(encoder.encode(obj) for obj in objects)


def brokerFed(data: bytes, root: Referenceable | None = None, maxRefusals: int | None = None) -> Broker:
    """A server broker exporting C{root} as 0 that received the preamble and C{data}."""
    broker = Broker(root, clock=Clock())
    quiet(broker)
    if maxRefusals is not None:
        broker.connection.logPolicy = LogPolicy(maxRefusals=maxRefusals)
    broker.connection.makeConnection(RecordingTransport())
    broker.connection.dataReceived(PREAMBLE + data)
    return broker


def sessionFed(data: bytes, root: Referenceable | None = None, maxRefusals: int | None = None) -> ClientSession[str]:
    """A client session exporting C{root} as 1 (see L{target}) that received the preamble and C{data}."""
    session: ClientSession[str] = ClientSession(
        "test", makeReference=lambda exportId, names: object(), maxRefusals=maxRefusals
    )
    session.start()
    session.receive(PREAMBLE)
    if root is not None:
        assert session.references is not None
        assert session.references.exportFor(root) == 1
    session.receive(data)
    return session


def failureOf(broker: Broker) -> BaseException | None:
    return None if broker.failure is None else broker.failure.value


REFUSED_AFTER_ID = {
    "cancel": Message((CANCEL, 7, 8)),
    "release": Message((RELEASE, 5, 0)),
    "goaway": Message((GOAWAY, 10, 11)),
}
"""A CANCEL, RELEASE and GOAWAY refused after their first field (a field too many, a count of 0)."""


class RefusalsAlikeTests(SynchronousTestCase):
    def test_otherKindsRefusedCount(self) -> None:
        """
        A CANCEL, RELEASE or GOAWAY refused after its id is a refusal on
        both (12.4: refused as one object; 12: each refusal counts): past
        the rate, both end with L{TooManyRefusals}; within it, both stay up.
        """
        for name, message in REFUSED_AFTER_ID.items():
            data = encoded(message, message, message)
            broker, session = brokerFed(data, maxRefusals=2), sessionFed(data, maxRefusals=2)
            self.assertIsInstance(failureOf(broker), TooManyRefusals, name)
            self.assertIsInstance(session.failure, TooManyRefusals, name)
            data = encoded(message, message)
            broker, session = brokerFed(data, maxRefusals=2), sessionFed(data, maxRefusals=2)
            self.assertIsNone(failureOf(broker), name)
            self.assertEqual(session.state, SessionState.OPEN, name)

    def test_unknownTypeCounts(self) -> None:
        """A top-level object of a type neither takes is a refusal on both, counted the same."""
        unknown = encode_header(OPEN, 6) + b"nosuch" + encode_header(INT, 1) + encode_header(CLOSE, 0)
        broker, session = brokerFed(unknown * 3, maxRefusals=2), sessionFed(unknown * 3, maxRefusals=2)
        self.assertIsInstance(failureOf(broker), TooManyRefusals)
        self.assertIsInstance(session.failure, TooManyRefusals)
        broker, session = brokerFed(unknown * 2, maxRefusals=2), sessionFed(unknown * 2, maxRefusals=2)
        self.assertIsNone(failureOf(broker))
        self.assertEqual(session.state, SessionState.OPEN)


class EndsAlikeTests(SynchronousTestCase):
    def test_unreadableRequestId(self) -> None:
        """A CALL or an ANSWER refused before its id ends both with the same L{UnreadableRequestId}."""
        for name, what in [
            ("call-id-past-64-bits", "a call refused before its request id arrived cannot be answered"),
            ("answer-id-neg", "an answer refused before its request id arrived leaves its call waiting"),
        ]:
            data = errorVector(name)
            broker, session = brokerFed(data), sessionFed(data)
            self.assertIsInstance(failureOf(broker), UnreadableRequestId, name)
            self.assertIsInstance(session.failure, UnreadableRequestId, name)
            self.assertEqual(str(session.failure), str(failureOf(broker)), name)
            self.assertIn(what, str(session.failure), name)

    def test_notAnRpcMessage(self) -> None:
        """A top-level object that is no RPC message ends both with the same L{NotAnRpcMessage}."""
        data = encoded(["a", "list"])
        broker, session = brokerFed(data), sessionFed(data)
        self.assertIsInstance(failureOf(broker), NotAnRpcMessage)
        self.assertIsInstance(session.failure, NotAnRpcMessage)
        self.assertEqual(str(session.failure), str(failureOf(broker)))

    def test_nothingAfterTheEnd(self) -> None:
        """
        A CALL after an object that ended the connection, in the same read,
        is not run by either, whether the read then breaks the stream or not.
        """
        for tail in (b"", RESERVED):
            served, called = Marked(), Marked()
            brokerFed(encoded(["a", "list"], Message((CALL, 5, 0, "mark", None, 1))) + tail, served)
            session = sessionFed(encoded(["a", "list"], Message((CALL, 5, 1, "mark", None, 1))) + tail, called)
            self.assertEqual(served.marks, [], tail)
            self.assertIsInstance(session.failure, NotAnRpcMessage)
            self.assertEqual(len(session.incomingCalls.waiting), 0, tail)
