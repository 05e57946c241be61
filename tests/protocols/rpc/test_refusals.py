"""Structured refusals: the RPC message unslicer reports a refused message's kind and id as fields."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Limits, Registry, Violation, dumps
from framing._errors import BodyTooLarge
from framing._ledger import Ledger, LedgerPool
from framing.rpc._errors import MessageRefused, MessageWithoutId
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, OPEN_TYPE, RELEASE, Message, MessageSlicer, MessageUnslicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE
from protocols.rpc import Broker
from protocols.testing import RecordingTransport, connectedPair

from .services import Service
from .test_memory import quiet


def encoded(message: Message) -> bytes:
    """The bytes of one RPC message, preamble excluded."""
    registry = Registry(DEFAULT_REGISTRY)
    registry.add_slicer(Message, MessageSlicer())
    return dumps(message, registry=registry)[len(PREAMBLE) :]


def decoded(data: bytes, limits: Limits | None = None) -> list[Any]:
    registry = Registry(DEFAULT_REGISTRY)
    registry.add_unslicer(OPEN_TYPE, MessageUnslicer)
    return Decoder(limits, registry).feed(PREAMBLE + data)


class ReportViolationTests(SynchronousTestCase):
    """L{MessageUnslicer.report_violation} on its own, and as the decoder calls it."""

    def test_reportsKindAndId(self) -> None:
        """Once the tag and the id have arrived, a refusal is reported as a MessageRefused with both."""
        unslicer = MessageUnslicer(Limits())
        unslicer.receive_child(CALL)
        unslicer.receive_child(17)
        violation = BodyTooLarge("too big", "args[0]")
        reported = unslicer.report_violation(violation)
        assert isinstance(reported, MessageRefused)
        self.assertEqual((reported.tag, reported.requestId), (CALL, 17))
        self.assertIs(reported.violation, violation)
        self.assertEqual((reported.code, reported.where), ("body-too-large", "args[0]"))

    def test_beforeTheId(self) -> None:
        """Before the id has arrived, a message nobody waits on is reported unchanged."""
        for tag in (CANCEL, RELEASE):
            unslicer = MessageUnslicer(Limits())
            unslicer.receive_child(tag)
            violation = Violation("refused")
            self.assertIs(unslicer.report_violation(violation), violation)
        unslicer = MessageUnslicer(Limits())
        violation = Violation("refused")
        self.assertIs(unslicer.report_violation(violation), violation)

    def test_awaitedBeforeTheId(self) -> None:
        """A CALL, ANSWER or FAIL refused before its id is reported as a MessageWithoutId of its kind."""
        for tag in (CALL, ANSWER, FAIL):
            unslicer = MessageUnslicer(Limits())
            unslicer.receive_child(tag)
            violation = Violation("refused")
            reported = unslicer.report_violation(violation)
            assert isinstance(reported, MessageWithoutId)
            self.assertEqual((reported.tag, reported.violation, reported.code), (tag, violation, "violation"))

    def test_decoderDeliversTheReport(self) -> None:
        """A call refused deep inside is delivered as a MessageRefused naming its id and the field's path."""
        data = encoded(Message((CALL, 5, 0, "echo", None, [b"x" * 100])))
        (refused,) = decoded(data, Limits(max_bytes_length=10))
        assert isinstance(refused, MessageRefused)
        self.assertEqual((refused.tag, refused.requestId, refused.code), (CALL, 5, "body-too-large"))
        self.assertEqual(refused.where, "args[0][0]")

    def test_noIdNoReport(self) -> None:
        """A message refused before its id is delivered without an id, located in the rpc message."""
        data = encoded(Message((CALL, "not an id")))
        (refused,) = decoded(data)
        self.assertIs(type(refused), MessageWithoutId)
        self.assertEqual((refused.tag, refused.code, refused.where), (CALL, "kind-refused", "<rpc>"))


class BrokerRefusalTests(SynchronousTestCase):
    """The broker acts on the reported id directly."""

    def test_refusedReleaseIsLogged(self) -> None:
        """A refused message that is neither a call nor an answer is logged as a refusal; the connection stays up."""
        server = Broker(Service(), clock=Clock())
        client = Broker(clock=Clock())
        memory = connectedPair(server, client)
        events = quiet(server)
        client.sendObject(Message((RELEASE, 3, 0)))
        memory.flush()
        self.assertEqual(len(events), 1)
        self.assertIsNone(server.failure)
        self.assertFalse(memory.serverTransport.disconnecting)

    def test_callWithoutRoomFails(self) -> None:
        """
        A call part-way read when its listener's pool fills is answered
        with a FAIL of code resource-exhausted, and the connection's next
        call is answered.
        """
        pool = LedgerPool(4 << 20)
        server = Broker(Service(), clock=Clock())
        connection = server.connection
        connection.ledgerPool = pool
        transport = RecordingTransport()
        connection.makeConnection(transport)
        quiet(server)
        big = encoded(Message((CALL, 1, 0, "echo", None, [[index] * 1000 for index in range(40)])))
        connection.dataReceived(PREAMBLE + big[:30_000])
        for _ in range(6):  # (connections holding nothing: the call's fair share of the pool, an eighth, is too little)
            Ledger(None, pool=pool)
        Ledger(None, pool=pool).charge("answers", 4 << 20)
        connection.dataReceived(big[30_000:31_000])
        connection.dataReceived(big[31_000:] + encoded(Message((CALL, 2, 0, "echo", None, "small"))))
        registry = Registry(DEFAULT_REGISTRY)
        registry.add_unslicer(OPEN_TYPE, MessageUnslicer)
        sent = Decoder(None, registry).feed(transport.value())
        self.assertEqual([(message[0], message[1]) for message in sent], [(FAIL, 1), (ANSWER, 2)])
        self.assertEqual(sent[0][5][0], "resource-exhausted")
        self.assertEqual(sent[1][2], "small")
        self.assertIsNone(connection.failure)
