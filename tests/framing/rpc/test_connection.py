"""One RPC connection's registry, parts and dispatch (L{framing.rpc._connection.RpcConnection}), built once."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, EncodingError, Registry
from framing._errors import InvalidValue
from framing.rpc._connection import RpcConnection
from framing.rpc._drain import Drain
from framing.rpc._errors import NotAnRpcMessage, TooManyPendingCalls
from framing.rpc._exports import References
from framing.rpc._interfaces import ExportedReference
from framing.rpc._referenceable import Referenceable
from framing.rpc._session import ClientSession
from framing.rpc._signatures import remote
from framing.rpc._streams import FlowMessage
from framing.rpc._wire import ANSWER, GOAWAY, OPEN_TYPE, ROOT_ID, Message
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE

from .test_dispatch import Recording


class Ref(ExportedReference):
    """A reference to the peer's object, as a shell makes it."""


class Served(Referenceable):
    @remote
    def add(self, amount: int) -> int:
        return amount


def withReferences() -> tuple[RpcConnection[str], References]:
    """A connection carrying references against fresh tables (the peer's exports become L{Ref}s)."""
    connection: RpcConnection[str] = RpcConnection()
    tables = References(None, lambda exportId, names: Ref(None, exportId, names))
    connection.carryReferences(tables, Ref)
    return connection, tables


class RegistryTests(SynchronousTestCase):
    """The connection's registry: the application's types, the RPC messages, the references once carried."""

    def test_childOfTheApplications(self) -> None:
        """The registry is a child of the one given, with the RPC messages added to it alone."""
        application = Registry(DEFAULT_REGISTRY)
        connection: RpcConnection[str] = RpcConnection(application)
        self.assertIsNotNone(connection.registry.unslicer_for(OPEN_TYPE))
        self.assertIsNotNone(connection.registry.slicer_for(Message))
        self.assertIsNone(application.unslicer_for(OPEN_TYPE))

    def test_messagesRoundTrip(self) -> None:
        """A message encoded on one connection's registry decodes on another's as the same message."""
        one: RpcConnection[str] = RpcConnection()
        other: RpcConnection[str] = RpcConnection()
        data = Encoder(one.registry).encode(Message((ANSWER, 1, [2, "three"])))
        (message,) = Decoder(registry=other.registry).feed(PREAMBLE + data)
        self.assertEqual((type(message), message), (Message, (ANSWER, 1, [2, "three"])))

    def test_noReferencesUntilCarried(self) -> None:
        """Without tables, a Referenceable is no type the registry sends."""
        connection: RpcConnection[str] = RpcConnection()
        self.assertIsNone(connection.references)
        self.assertRaises(EncodingError, Encoder(connection.registry).encode, Served())

    def test_referencesTravel(self) -> None:
        """
        Carried, a Referenceable sent is exported in the sender's tables and
        arrives as the receiver's reference; that reference sent back
        arrives as the object itself.
        """
        sender, senderTables = withReferences()
        receiver, _ = withReferences()
        served = Served()
        self.assertIs(sender.references, senderTables)
        data = Encoder(sender.registry).encode(Message((ANSWER, 1, served)))
        (message,) = Decoder(registry=receiver.registry).feed(PREAMBLE + data)
        reference = message[2]
        self.assertIsInstance(reference, Ref)
        self.assertIs(senderTables.exports[reference.exportId][0], served)
        back = Encoder(receiver.registry).encode(Message((ANSWER, 2, reference)))
        (returned,) = Decoder(registry=sender.registry).feed(PREAMBLE + back)
        self.assertIs(returned[2], served)


class PartsTests(SynchronousTestCase):
    """The parts every shell shares: one call table, one drain."""

    def test_callTable(self) -> None:
        """The call table keeps waiters up to C{maxPending} and names a call by C{nameOf}."""
        connection: RpcConnection[tuple[str, str]] = RpcConnection(maxPending=1, nameOf=lambda waiter: waiter[1])
        connection.calls.call(("waiter", "add"), ROOT_ID, "add", None, ())
        self.assertRaises(TooManyPendingCalls, connection.calls.call, ("second", "add"), ROOT_ID, "add", None, ())
        ((entry, error),) = connection.calls.lost(ValueError("gone"), lambda: "peer")
        self.assertEqual(entry, ("waiter", "add"))
        self.assertIn("'add'", str(error))

    def test_drain(self) -> None:
        connection: RpcConnection[str] = RpcConnection()
        self.assertIsInstance(connection.drain, Drain)
        self.assertFalse(connection.drain.draining)


class RoutingTests(SynchronousTestCase):
    """The one dispatch: built by L{RpcConnection.route}, read by every shell, forgotten at the end."""

    def test_notRoutedYet(self) -> None:
        """Before L{RpcConnection.route}, routing anything raises; nothing is delivered."""
        connection: RpcConnection[str] = RpcConnection()
        self.assertRaises(RuntimeError, connection.objectReceived, ["a", "list"])
        self.assertRaises(RuntimeError, connection.refused, InvalidValue("no"))

    def test_routed(self) -> None:
        """A message goes by its tag, an extension's object by its type, anything else ends the connection."""
        connection: RpcConnection[str] = RpcConnection()
        endpoint = Recording()
        flows: list[Any] = []
        dispatch = connection.route(endpoint, {FlowMessage: flows.append})
        self.assertIs(connection.dispatch, dispatch)
        self.assertEqual((connection.messages, connection.controls), (dispatch.messages, dispatch.controls))
        goAway, flow, stray = Message((GOAWAY, 0)), FlowMessage((1, 2)), ["a", "list"]
        for obj in (goAway, flow, stray):
            connection.objectReceived(obj)
        refusal = InvalidValue("no")
        connection.refused(refusal)
        self.assertEqual(flows, [flow])
        (first, (broken, error, received), second) = endpoint.seen
        self.assertEqual(first, ("goAwayReceived", goAway))
        self.assertEqual((broken, type(error), received), ("ruleBroken", NotAnRpcMessage, stray))
        self.assertEqual(second, ("refused", refusal))

    def test_endForgets(self) -> None:
        """L{RpcConnection.end} forgets the handlers: nothing refers back to the shell; routing after raises."""
        connection: RpcConnection[str] = RpcConnection()
        endpoint = Recording()
        connection.route(endpoint)
        connection.end()
        self.assertEqual((connection.messages, connection.controls), ((), {}))
        self.assertRaises(RuntimeError, connection.objectReceived, ["a", "list"])
        self.assertEqual(endpoint.seen, [])


class SessionOnTheConnectionTests(SynchronousTestCase):
    """The client session is an RpcConnection and its codec (the broker's: tests/protocols/rpc/test_table)."""

    def test_sessionsParts(self) -> None:
        """The session's call table, drain, references and dispatch are its connection's, its codec on its registry."""
        session: ClientSession[str] = ClientSession(
            "peer", makeReference=lambda exportId, names: Ref(None, exportId, names)
        )
        rpc = session.rpc
        self.assertIs(session.pending, rpc.calls)
        self.assertIs(session.drain, rpc.drain)
        self.assertIs(session.references, rpc.references)
        self.assertEqual(rpc.messages[ANSWER], session.answerReceived)
        self.assertIs(session.incomingCalls.registry, rpc.registry)
