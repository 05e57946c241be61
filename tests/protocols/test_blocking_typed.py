"""Typed proxies of the blocking client (L{protocols.blocking.BlockingTypedReference}) against a scripted server.

The interface (L{tests.framing.sampleinterface.ICounter}) is declared
without Twisted; its hints are checked here before anything is sent, and
its results on arrival, by the same sans-IO checks the Twisted client's
proxy makes (L{framing.rpc.interfaces}).
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Violation
from framing.rpc.errors import NoSuchMethod
from framing.rpc.wire import ANSWER, CALL, Message
from protocols.blocking import BlockingReference, BlockingTypedReference, connect
from tests.framing.sampleinterface import ICounter
from tests.protocols.test_blocking import HANG, ScriptedPeer, ScriptedServer


def recordingServer(test: SynchronousTestCase, answers: dict[str, Any]) -> tuple[ScriptedServer, list[Any]]:
    """A server answering each CALL with C{answers[name]}, and the list of the calls it received, in order."""
    calls: list[Any] = []

    def script(peer: ScriptedPeer) -> None:
        while True:
            message = peer.next()
            if message is None:
                return
            if type(message) is Message and message[0] == CALL:
                _, requestId, _, name, args, kwargs = message
                calls.append((name, tuple(args), kwargs or None))
                peer.send(Message((ANSWER, requestId, answers[name])))

    return ScriptedServer(test, script), calls


class TypedProxyTests(SynchronousTestCase):
    """A typed proxy checks before sending and on arrival; the server sees only what passed."""

    def test_callsReturnResults(self) -> None:
        """connect(interface=) makes the root a typed proxy whose methods return the results."""
        server, calls = recordingServer(self, {"add": 4, "names": ["apples"]})
        with connect(server.address, timeout=HANG, interface=ICounter) as connection:
            root = connection.root
            self.assertIsInstance(root, BlockingTypedReference)
            self.assertEqual(root.add("apples", amount=3), 4)
            self.assertEqual(root.names(), ["apples"])
            self.assertEqual(root.callRemote("add", "pears"), 4)
        self.assertEqual(calls, [("add", ("apples",), {"amount": 3}), ("names", (), None), ("add", ("pears",), None)])

    def test_refusedArgumentNotSent(self) -> None:
        """An argument the hints refuse raises the Violation here, naming it; the server never sees that call."""
        server, calls = recordingServer(self, {"add": 1, "names": []})
        with connect(server.address, timeout=HANG) as connection:
            counter = connection.root.typed(ICounter)
            tooLong = self.assertRaises(Violation, counter.add, "far too long a name")
            self.assertEqual(tooLong.where, "args[0]")
            tooMuch = self.assertRaises(Violation, counter.callRemoteOnly, "add", "a", amount=1000)
            self.assertEqual(tooMuch.where, "kwargs['amount']")
            self.assertEqual(counter.names(), [])
        self.assertEqual(calls, [("names", (), None)])

    def test_refusedResult(self) -> None:
        """A result the result hint refuses raises the Violation at "result", naming the call and the server."""
        server, _ = recordingServer(self, {"add": "not a number", "names": []})
        with connect(server.address, timeout=HANG, interface=ICounter) as connection:
            error = self.assertRaises(Violation, connection.root.add, "apples")
        self.assertTrue(error.where.startswith("result"), error.where)
        self.assertIn(f"in the answer to 'add' from {server.address}", str(error))

    def test_unknownMethodNotSent(self) -> None:
        """A method the interface lacks: AttributeError as an attribute, NoSuchMethod by callRemote; nothing sent."""
        server, calls = recordingServer(self, {"names": []})
        with connect(server.address, timeout=HANG, interface=ICounter) as connection:
            root = connection.root
            self.assertRaises(AttributeError, getattr, root, "sub")
            self.assertRaises(NoSuchMethod, root.callRemote, "sub", "apples")
            self.assertRaises(NoSuchMethod, root.callRemoteOnly, "sub")
            root.names()
        self.assertEqual(calls, [("names", (), None)])

    def test_namedInterfaceMismatch(self) -> None:
        """A reference that arrived naming other interfaces is not typed as this one."""
        server, _ = recordingServer(self, {})
        with connect(server.address, timeout=HANG) as connection:
            other = BlockingReference(connection, 5, ("other.IThing",))
            self.assertRaises(TypeError, other.typed, ICounter)
            self.assertIsInstance(
                BlockingReference(connection, 6, ("tests.ICounter",)).typed(ICounter), BlockingTypedReference
            )
