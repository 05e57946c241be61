"""The RPC message table (L{framing.rpc._wire.MESSAGES}): one row per kind drives checking and dispatch."""

from __future__ import annotations

from dataclasses import fields

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from framing import Limits
from framing._errors import InvalidValue, TooManyItems
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, GOAWAY, MESSAGES, RELEASE, Kind, Message, MessageUnslicer
from protocols.rpc import Broker
from protocols.rpc._interceptors import CallInterceptor, intercept


class TableTests(SynchronousTestCase):
    """Each row names its fields; the dispatch of each kind is code, in one routing every side builds."""

    def test_tagsAreIndexes(self) -> None:
        """A row's tag is its index in the table, so dispatch is one index per message."""
        self.assertEqual([kind.tag for kind in MESSAGES], list(range(len(MESSAGES))))

    def test_everyKindDispatched(self) -> None:
        """
        The broker's dispatch (its connection's, framing.rpc._connection),
        built in one method, hands the peer's calls to its CallRunner and
        the answers, RELEASE and GOAWAY to the connection's own handlers,
        and the refusal of each kind a call waits on to the part that
        answers or fails that call; the refusal of any other kind is only
        logged.
        """
        broker = Broker(clock=Clock())
        incoming = broker.incoming
        expected = {
            CALL: incoming.callReceived,
            ANSWER: broker.calls.answerReceived,
            FAIL: broker.rpc.failReceived,
            CANCEL: incoming.cancelReceived,
            RELEASE: broker.rpc.releaseReceived,
            GOAWAY: broker.rpc.goAwayReceived,
        }
        self.assertEqual(sorted(expected), [kind.tag for kind in MESSAGES])
        self.assertEqual(broker._handlers, tuple(expected[kind.tag] for kind in MESSAGES))
        refused = {CALL: incoming.callRefused, ANSWER: broker.rpc.answerRefused, FAIL: broker.rpc.answerRefused}
        self.assertEqual(
            broker.rpc.dispatch.refusals, tuple(refused.get(kind.tag, broker._reactions.refused) for kind in MESSAGES)
        )
        self.assertEqual(sorted(refused), [kind.tag for kind in MESSAGES if kind.awaited])

    def test_brokerOnTheConnection(self) -> None:
        """
        The broker is built on one L{framing.rpc._connection.RpcConnection},
        as the client session is (tests/framing/rpc/test_connection): its
        call table, drain, reference tables, registry and dispatch are the
        connection's, its handlers the ones it reads in line.
        """
        broker = Broker(clock=Clock())
        rpc = broker.rpc
        self.assertIs(broker.calls._table, rpc.calls)
        self.assertIs(broker.drain.rule, rpc.drain)
        self.assertIs(rpc.references, broker.references)
        self.assertIs(broker.connection.registry, rpc.registry)
        self.assertEqual((broker._handlers, broker._controls), (rpc.messages, rpc.controls))
        self.assertEqual(rpc.dispatch.messages[ANSWER], broker.calls.answerReceived)

    def test_noHandlerNamedInTheTable(self) -> None:
        """A row holds its wire shape alone: no attribute path for a dispatch to resolve by name."""
        self.assertEqual([field.name for field in fields(Kind)], ["tag", "name", "fields", "awaited"])

    def test_interceptedInFront(self) -> None:
        """
        An interception stands in front of the CALL and CANCEL handlers
        only (the rest unchanged), and only once per broker.
        """
        broker = Broker(clock=Clock())
        before = broker._handlers
        received: list[Message] = []
        broker.interceptCalls(received.append, received.append)
        self.assertEqual(broker._handlers[CALL], received.append)
        self.assertEqual(broker._handlers[CANCEL], received.append)
        self.assertEqual(
            [h for tag, h in enumerate(broker._handlers) if tag not in (CALL, CANCEL)],
            [h for tag, h in enumerate(before) if tag not in (CALL, CANCEL)],
        )
        self.assertRaises(RuntimeError, broker.interceptCalls, None, received.append)

    def test_recordersLeaveCallsAlone(self) -> None:
        """With no interceptor but recorders, the broker's CALL handler stays CallRunner's own."""
        broker = Broker(clock=Clock())
        intercept(broker, [CallInterceptor()])
        self.assertEqual(broker._handlers[CALL], broker.incoming.callReceived)
        self.assertNotEqual(broker._handlers[CANCEL], broker.incoming.cancelReceived)

    def test_fieldNamesFromTheTable(self) -> None:
        """The unslicer names each field as its row does, and applies the row's check to it."""
        unslicer = MessageUnslicer(Limits())
        unslicer.receive_child(FAIL)
        unslicer.receive_child(3)
        self.assertEqual(unslicer.child_where(), MESSAGES[FAIL].fields[1].name)
        with self.assertRaises(InvalidValue):
            unslicer.receive_child("")

    def test_fieldCountFromTheTable(self) -> None:
        """A message with more fields than its row has is refused."""
        unslicer = MessageUnslicer(Limits())
        unslicer.receive_child(CANCEL)
        unslicer.receive_child(3)
        with self.assertRaises(TooManyItems):
            unslicer.receive_child(4)

    def test_unknownTag(self) -> None:
        """A tag past the table's end is refused."""
        unslicer = MessageUnslicer(Limits())
        with self.assertRaises(InvalidValue):
            unslicer.receive_child(len(MESSAGES))
