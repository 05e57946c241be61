"""One RPC connection's registry, parts and dispatch (L{framing.rpc._connection.RpcConnection}), built once."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, EncodingError, Limits, Registry
from framing._errors import InvalidValue
from framing.rpc._connection import RpcConnection, Shell
from framing.rpc._drain import Drain, GoingAway
from framing.rpc._errors import MessageRefused, NotAnRpcMessage, TooManyPendingCalls, UnexpectedAnswer
from framing.rpc._exports import References
from framing.rpc._interfaces import ExportedReference
from framing.rpc._referenceable import Referenceable
from framing.rpc._references import ReferenceableSlicer, ReferenceUnslicer, RemoteReferenceSlicer, YourReferenceUnslicer
from framing.rpc._session import ClientSession
from framing.rpc._signatures import REF_OPEN_TYPE, YOURREF_OPEN_TYPE, remote
from framing.rpc._streams import FlowMessage
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, GOAWAY, OPEN_TYPE, RELEASE, ROOT_ID, Message
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE


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

    def test_referenceCodecsCarried(self) -> None:
        """Carried, the registry sends and reads references with framing.rpc._references' slicers and unslicers."""
        connection, tables = withReferences()
        registry = connection.registry
        self.assertIsInstance(registry.slicer_for(Referenceable), ReferenceableSlicer)
        self.assertIsInstance(registry.slicer_for(Ref), RemoteReferenceSlicer)
        for name, kind in ((REF_OPEN_TYPE, ReferenceUnslicer), (YOURREF_OPEN_TYPE, YourReferenceUnslicer)):
            factory = registry.unslicer_for(name)
            assert factory is not None, name
            self.assertIsInstance(factory(Limits()), kind)

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


class RecordingShell:
    """A shell that records what its connection tells it, by the L{Shell} field's name."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def record(self, name: str) -> Any:
        def told(*arguments: Any) -> None:
            self.seen.append((name, *arguments))

        return told

    def shell(self) -> Shell[str]:
        record = self.record
        return Shell(
            callReceived=record("callReceived"),
            cancelReceived=record("cancelReceived"),
            callRefused=record("callRefused"),
            answered=record("answered"),
            failed=record("failed"),
            ignored=record("ignored"),
            goneAway=record("goneAway"),
            refused=record("refused"),
            ruleBroken=record("ruleBroken"),
            peerName=lambda: "the peer",
        )


def routed(**options: Any) -> tuple[RpcConnection[str], RecordingShell, list[Any]]:
    """A connection routed to a recording shell, with one control type (L{FlowMessage}) recorded in a list."""
    connection: RpcConnection[str] = RpcConnection(nameOf=lambda waiter: "add", **options)
    recording = RecordingShell()
    flows: list[Any] = []
    connection.route(recording.shell(), {FlowMessage: flows.append})
    return connection, recording, flows


class RoutingTests(SynchronousTestCase):
    """The one dispatch: built by L{RpcConnection.route}, read by every shell, forgotten at the end."""

    def test_notRoutedYet(self) -> None:
        """Before L{RpcConnection.route}, routing anything raises; nothing is delivered."""
        connection: RpcConnection[str] = RpcConnection()
        self.assertRaises(RuntimeError, connection.objectReceived, ["a", "list"])
        self.assertRaises(RuntimeError, connection.objectReceived, Message((ANSWER, 1, None)))
        self.assertRaises(RuntimeError, connection.refused, InvalidValue("no"))

    def test_routed(self) -> None:
        """
        The peer's calls go to the shell's handlers, an extension's object
        by its type to its control, anything else ends the connection; a
        refusal of no call's is the shell's to count.
        """
        connection, recording, flows = routed()
        self.assertEqual(
            (connection.messages, connection.controls), (connection.dispatch.messages, {FlowMessage: flows.append})
        )
        call, cancel, flow, stray = (
            Message((CALL, 1, ROOT_ID, "add", None, ())),
            Message((CANCEL, 1)),
            FlowMessage((1, 2)),
            ["a"],
        )
        for obj in (call, cancel, flow, stray):
            connection.objectReceived(obj)
        refusal = InvalidValue("no")
        connection.refused(refusal)
        self.assertEqual(flows, [flow])
        (first, second, (broken, error, received), third) = recording.seen
        self.assertEqual((first, second), (("callReceived", call), ("cancelReceived", cancel)))
        self.assertEqual((broken, type(error), received), ("ruleBroken", NotAnRpcMessage, stray))
        self.assertEqual(third, ("refused", refusal))

    def test_endForgets(self) -> None:
        """L{RpcConnection.end} forgets the shell: nothing refers back to it; routing after raises."""
        connection, recording, _ = routed()
        connection.end()
        self.assertEqual((connection.messages, connection.controls), ((), {}))
        self.assertRaises(RuntimeError, connection.objectReceived, ["a", "list"])
        self.assertRaises(RuntimeError, connection.answerReceived, Message((ANSWER, 1, None)))
        self.assertEqual(recording.seen, [])


class FreedTests(SynchronousTestCase):
    """Nothing keeps a connection for the GC: not before it is routed, not once ended."""

    def setUp(self) -> None:
        gc.collect()
        gc.disable()
        self.addCleanup(gc.enable)

    def test_unroutedFreed(self) -> None:
        connection: RpcConnection[str] = RpcConnection()
        freed = weakref.ref(connection)
        del connection
        self.assertIsNone(freed())

    def test_endedFreed(self) -> None:
        """Routed, its dispatch holds its own handlers; L{RpcConnection.end} lets both go."""
        connection, _, _ = routed()
        connection.end()
        freed = weakref.ref(connection)
        del connection
        self.assertIsNone(freed())


class AnswerTests(SynchronousTestCase):
    """The rules of what answers this side's calls, the connection's own; the shell told the outcome."""

    def test_answered(self) -> None:
        """An ANSWER to a pending call: the shell is told its waiter and result; the call is no longer pending."""
        connection, recording, _ = routed()
        connection.calls.call("waiter", ROOT_ID, "add", None, ())
        connection.objectReceived(Message((ANSWER, 1, 3)))
        self.assertEqual((recording.seen, len(connection.calls)), ([("answered", "waiter", 3)], 0))

    def test_failed(self) -> None:
        """A FAIL: the shell is told its waiter and the error rebuilt from it."""
        connection, recording, _ = routed()
        connection.calls.call("waiter", ROOT_ID, "add", None, ())
        connection.objectReceived(Message((FAIL, 1, "some.Error", "it broke", None, None)))
        ((told, waiter, error),) = recording.seen
        self.assertEqual((told, waiter), ("failed", "waiter"))
        self.assertIn("it broke", str(error))

    def test_answerRefused(self) -> None:
        """An answer refused after its id: the call fails with the violation, naming the call and the peer."""
        connection, recording, _ = routed()
        connection.calls.call("waiter", ROOT_ID, "add", None, ())
        connection.refused(MessageRefused(InvalidValue("too big"), ANSWER, 1))
        ((told, waiter, error),) = recording.seen
        self.assertEqual((told, waiter), ("failed", "waiter"))
        self.assertIn("the peer", str(error))

    def test_strayAnswerBreaksTheRule(self) -> None:
        """An ANSWER, a FAIL or a refused answer to no call ends the connection (L{UnexpectedAnswer}, 12.3)."""
        for received in (
            Message((ANSWER, 9, None)),
            Message((FAIL, 9, "some.Error", "no", None, None)),
            MessageRefused(InvalidValue("too big"), ANSWER, 9),
        ):
            connection, recording, _ = routed()
            if type(received) is Message:
                connection.objectReceived(received)
            else:
                connection.refused(received)
            ((told, error, what),) = recording.seen
            self.assertEqual((told, type(error), what), ("ruleBroken", UnexpectedAnswer, received))

    def test_lateAnswerIgnored(self) -> None:
        """The late answer of a call given up on is ignored once (the shell told what it was); a second breaks 12.3."""
        connection, recording, _ = routed()
        connection.calls.call("waiter", ROOT_ID, "add", None, ())
        connection.calls.giveUp(1)
        connection.objectReceived(Message((ANSWER, 1, "late")))
        connection.objectReceived(Message((ANSWER, 1, "again")))
        (ignored, (told, error, _)) = recording.seen
        self.assertEqual(ignored, ("ignored", 1, "an answer"))
        self.assertEqual((told, type(error)), ("ruleBroken", UnexpectedAnswer))


class ReleaseAndGoAwayTests(SynchronousTestCase):
    """RELEASE and GOAWAY, the connection's own handlers."""

    def test_release(self) -> None:
        """A RELEASE counts against the carried tables' exports; without references it is dropped."""
        connection, recording, _ = routed()
        connection.objectReceived(Message((RELEASE, 5, 1)))
        tables = References(None, lambda exportId, names: Ref(None, exportId, names))
        connection.carryReferences(tables, Ref)
        served = Served()
        exportId = tables.exportFor(served)
        connection.objectReceived(Message((RELEASE, exportId, 1)))
        self.assertNotIn(exportId, tables.exports)
        self.assertEqual(recording.seen, [])

    def test_goAway(self) -> None:
        """
        The peer's first GOAWAY stops this side's calls (L{GoingAway},
        naming the peer) and tells the shell; the calls in flight stay; a
        second is ignored.
        """
        connection, recording, _ = routed()
        connection.calls.call("waiter", ROOT_ID, "add", None, ())
        connection.objectReceived(Message((GOAWAY, 1000)))
        connection.objectReceived(Message((GOAWAY, 1000)))
        self.assertEqual(recording.seen, [("goneAway",)])
        self.assertTrue(connection.drain.draining)
        self.assertEqual(list(connection.calls), [1])
        error = self.assertRaises(GoingAway, connection.calls.call, "next", ROOT_ID, "add", None, ())
        self.assertIn("the peer", str(error))


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
        self.assertEqual(rpc.messages[ANSWER], rpc.answerReceived)
        self.assertEqual(rpc.dispatch.refusals[CALL], session.callRefused)
        self.assertIs(session.incomingCalls.registry, rpc.registry)
