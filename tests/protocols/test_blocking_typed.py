"""Typed proxies and logins of the blocking client (L{protocols.blocking}) against scripted servers.

The interface (L{tests.framing.sampleinterface.ICounter}) is declared
without Twisted; its hints are checked here before anything is sent, and
its results on arrival, by the same sans-IO checks the Twisted client's
proxy makes (L{framing.rpc._interfaces}).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder, Violation
from framing.login import LoginBroken, Token
from framing.login._wire import ACCEPTED, PRE_LOGIN_LIMITS, TOKEN, LoginMessage, loginRegistry
from framing.rpc._errors import NoSuchMethod
from framing.rpc._wire import ANSWER, CALL, Message
from protocols.blocking import (
    BlockingReference,
    BlockingTypedReference,
    ConnectionLost,
    ServerSilent,
    connect,
)
from protocols.options import ClientOptions
from tests.framing.sampleinterface import ICounter
from tests.protocols.test_blocking import HANG, REGISTRY, ScriptedPeer, ScriptedServer


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
        with connect(server.address, interface=ICounter, options=ClientOptions(timeout=HANG)) as connection:
            root = connection.root
            self.assertIsInstance(root, BlockingTypedReference)
            self.assertEqual(root.add("apples", amount=3), 4)
            self.assertEqual(root.names(), ["apples"])
            self.assertEqual(root.callRemote("add", "pears"), 4)
        self.assertEqual(calls, [("add", ("apples",), {"amount": 3}), ("names", (), None), ("add", ("pears",), None)])

    def test_refusedArgumentNotSent(self) -> None:
        """An argument the hints refuse raises the Violation here, naming it; the server never sees that call."""
        server, calls = recordingServer(self, {"add": 1, "names": []})
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
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
        with connect(server.address, interface=ICounter, options=ClientOptions(timeout=HANG)) as connection:
            error = self.assertRaises(Violation, connection.root.add, "apples")
        self.assertTrue(error.where.startswith("result"), error.where)
        self.assertIn(f"in the answer to 'add' from {server.address}", str(error))

    def test_unknownMethodNotSent(self) -> None:
        """A method the interface lacks: AttributeError as an attribute, NoSuchMethod by callRemote; nothing sent."""
        server, calls = recordingServer(self, {"names": []})
        with connect(server.address, interface=ICounter, options=ClientOptions(timeout=HANG)) as connection:
            root = connection.root
            self.assertRaises(AttributeError, getattr, root, "sub")
            self.assertRaises(NoSuchMethod, root.callRemote, "sub", "apples")
            self.assertRaises(NoSuchMethod, root.callRemoteOnly, "sub")
            root.names()
        self.assertEqual(calls, [("names", (), None)])

    def test_namedInterfaceMismatch(self) -> None:
        """A reference that arrived naming other interfaces is not typed as this one."""
        server, _ = recordingServer(self, {})
        with connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            other = BlockingReference(connection, 5, ("other.IThing",))
            self.assertRaises(TypeError, other.typed, ICounter)
            self.assertIsInstance(
                BlockingReference(connection, 6, ("tests.ICounter",)).typed(ICounter), BlockingTypedReference
            )


LOGIN_REGISTRY = loginRegistry()


def loginScript(*answers: Any, then: Callable[[ScriptedPeer], None] | None = None) -> Callable[[ScriptedPeer], None]:
    """
    A server's side that reads the client's login messages with the login
    registry and sends C{answers} (bytes as they are, login messages
    encoded) after the client's first one, then runs C{then} (or waits for
    the client to close).
    """

    def script(peer: ScriptedPeer) -> None:
        peer.decoder = Decoder(PRE_LOGIN_LIMITS, LOGIN_REGISTRY)
        encoder = Encoder(LOGIN_REGISTRY)
        start = peer.next()
        assert isinstance(start, LoginMessage), start
        peer.connection.sendall(b"".join(a if isinstance(a, bytes) else encoder.encode(a) for a in answers))
        if then is not None:
            then(peer)
        else:
            peer.connection.recv(1)

    return script


class ScriptedLoginTests(SynchronousTestCase):
    """The blocking client's login against servers that do what a real one would not."""

    def test_accepted(self) -> None:
        """A token login the server accepts: connect returns; the token was sent once, in the start message."""
        seen: list[Any] = []

        def script(peer: ScriptedPeer) -> None:
            peer.decoder = Decoder(PRE_LOGIN_LIMITS, LOGIN_REGISTRY)
            seen.append(peer.next())
            peer.connection.sendall(Encoder(LOGIN_REGISTRY).encode(LoginMessage.of(ACCEPTED, TOKEN)))
            peer.connection.recv(1)

        server = ScriptedServer(self, script)
        connect(server.address, options=ClientOptions(timeout=HANG, credentials=Token("abc"))).close()
        self.assertEqual([(m.verb, m.mechanism, m.payload) for m in seen], [("start", TOKEN, b"abc")])

    def test_silentDuringLogin(self) -> None:
        """A server that never answers the login: ServerSilent within the timeout."""
        server = ScriptedServer(self, loginScript())
        error = self.assertRaises(
            ServerSilent, connect, server.address, options=ClientOptions(timeout=0.5, credentials=Token("abc"))
        )
        self.assertIn("login", str(error))

    def test_closedDuringLogin(self) -> None:
        """A server that closes during the login: ConnectionLost, saying so."""
        server = ScriptedServer(self, loginScript(then=lambda peer: None))
        error = self.assertRaises(
            ConnectionLost, connect, server.address, options=ClientOptions(timeout=HANG, credentials=Token("abc"))
        )
        self.assertIn("during the login", str(error))

    def test_moreAfterAccepted(self) -> None:
        """Anything the server sends with its acceptance, before the first call, breaks the login."""
        accepted = LoginMessage.of(ACCEPTED, TOKEN)
        server = ScriptedServer(self, loginScript(accepted, accepted))
        self.assertRaises(
            LoginBroken, connect, server.address, options=ClientOptions(timeout=HANG, credentials=Token("abc"))
        )

    def test_notALoginMessage(self) -> None:
        """An object the login registry does not know (an RPC message) breaks the login."""
        call = Encoder(REGISTRY).encode(Message((ANSWER, 1, "early")))
        server = ScriptedServer(self, loginScript(call))
        self.assertRaises(
            LoginBroken, connect, server.address, options=ClientOptions(timeout=HANG, credentials=Token("abc"))
        )
