"""ClientOptions: checked when made, and honoured by the clients without Twisted (L{protocols.options}).

The Twisted clients' use of the same options is in
L{tests.protocols.rpc.test_connecting} (every way of connecting) and
L{tests.protocols.rpc.test_options} (the server's).
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
import socket
import threading
import typing
from collections.abc import Callable
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Limits
from framing.login import Password
from framing.login._urls import ObjectURL
from framing.rpc._addresses import Backoff
from framing.rpc._errors import TooManyPendingCalls
from framing.rpc._limits import CallLimits
from framing.rpc._wire import ANSWER, CALL, NO_ANSWER, Message
from protocols import asynciobulk, asyncioclient, blocking, blockingbulk
from protocols._clientcontext import callContext
from protocols.bulk import BulkOptions
from protocols.options import ClientOptions
from protocols.rpc._interceptors import CallInterceptor
from tests.protocols.test_blocking import HANG, ScriptedPeer, ScriptedServer


class ClientOptionsTests(SynchronousTestCase):
    """A ClientOptions refuses a bad field when made, naming it; the defaults are every client's."""

    def test_defaults(self) -> None:
        """Every field has a default: no login, 30 s to connect, 60 s of silence, plain TCP, pick_first."""
        options = ClientOptions()
        self.assertEqual(
            (options.credentials, options.timeout, options.silenceTimeout, options.tls, options.policy),
            (None, 30.0, 60.0, False, "pick_first"),
        )
        self.assertEqual(
            (options.callLimits, options.callTimeout, options.interceptors, dict(options.metadata)),
            (None, None, (), {}),
        )

    def test_badFields(self) -> None:
        """Each bad value raises TypeError or ValueError naming its field."""
        bad: list[tuple[dict[str, Any], type[Exception], str]] = [
            ({"timeout": 0}, ValueError, "ClientOptions.timeout"),
            ({"timeout": "10"}, TypeError, "ClientOptions.timeout"),
            ({"limits": {"max_bytes": 1}}, TypeError, "ClientOptions.limits"),
            ({"registry": object()}, TypeError, "ClientOptions.registry"),
            ({"callLimits": 10}, TypeError, "ClientOptions.callLimits"),
            ({"interceptors": CallInterceptor()}, TypeError, "ClientOptions.interceptors"),
            ({"interceptors": (object(),)}, TypeError, "ClientOptions.interceptors"),
            ({"metadata": {"tenant": 1}}, TypeError, "ClientOptions.metadata"),
            ({"metadata": [("a", "b")]}, TypeError, "ClientOptions.metadata"),
            ({"silenceTimeout": -1.0}, ValueError, "ClientOptions.silenceTimeout"),
            ({"tls": "yes"}, TypeError, "ClientOptions.tls"),
            ({"policy": "random"}, ValueError, "ClientOptions.policy"),
            ({"moveTimeout": None}, TypeError, "ClientOptions.moveTimeout"),
            ({"backoff": 1.0}, TypeError, "ClientOptions.backoff"),
            ({"bulk": {"window": 1}}, TypeError, "ClientOptions.bulk must be protocols.bulk.BulkOptions or None"),
        ]
        for fields, kind, named in bad:
            error = self.assertRaises(kind, ClientOptions, **fields)
            self.assertIn(named, str(error), fields)

    def test_goodFields(self) -> None:
        """Good values are kept (interceptors as a tuple, metadata as a read-only copy)."""
        interceptor = CallInterceptor()
        given = {"tenant": "t1"}
        options = ClientOptions(
            timeout=None,
            limits=Limits(),
            callLimits=CallLimits(callTimeout=2.0),
            interceptors=[interceptor],
            metadata=given,
            backoff=Backoff(),
            policy="round_robin",
        )
        given["tenant"] = "changed"
        self.assertEqual((options.interceptors, dict(options.metadata)), ((interceptor,), {"tenant": "t1"}))
        self.assertEqual(options.callTimeout, 2.0)
        self.assertRaises(TypeError, operator.setitem, options.metadata, "a", "b")
        self.assertRaises(dataclasses.FrozenInstanceError, setattr, options, "timeout", 1.0)

    def test_hintsResolve(self) -> None:
        """
        C{typing.get_type_hints} resolves every field's hint, C{tls}'s to
        C{ssl.SSLContext | bool} (the module loads C{ssl} only when asked:
        C{tests.examples.test_help}), and a context is taken as C{tls}.
        """
        import ssl

        hints = typing.get_type_hints(ClientOptions)
        self.assertEqual(set(hints), {field.name for field in dataclasses.fields(ClientOptions)})
        self.assertEqual(hints["tls"], ssl.SSLContext | bool)
        context = ssl.create_default_context()
        self.assertIs(ClientOptions(tls=context).tls, context)
        self.assertIs(ClientOptions(tls=True).tls, True)

    def test_credentialsNotShown(self) -> None:
        """The repr of options with a password does not show it."""
        self.assertNotIn("hunter2", repr(ClientOptions(credentials=Password("ada", "hunter2"))))


def answering(seen: list[Any], calls: int) -> Any:
    """A script that answers C{calls} calls with their method's name, noting each message; then reads to the close."""

    def script(peer: ScriptedPeer) -> None:
        while (message := peer.next()) is not None:
            seen.append(message)
            if message[0] == CALL and message[1] != NO_ANSWER:
                peer.send(Message((ANSWER, message[1], message[3])))

    return script


class ClientsWithoutTwistedTests(SynchronousTestCase):
    """The blocking and asyncio clients honour the options' metadata and call limits."""

    def test_metadataEveryCall(self) -> None:
        """
        ClientOptions.metadata goes with every call of the connection, a
        call for no answer too; a callContext's metadata is added, its key
        winning (the blocking and asyncio clients; their bulk subclasses
        share the connection's call path).
        """
        options = ClientOptions(timeout=HANG, metadata={"tenant": "t1", "who": "connection"})

        def blockingSide(address: str, connect: Any) -> None:
            with connect(address, options=options) as connection:
                connection.root.callRemote("plain")
                connection.root.callRemoteOnly("oneWay")
                with callContext(metadata={"who": "block", "request-id": "r1"}):
                    connection.root.callRemote("inBlock")

        async def asyncioSide(address: str, connect: Any) -> None:
            async with await connect(address, options=options) as connection:
                await connection.root.callRemote("plain")
                await connection.root.callRemoteOnly("oneWay")
                with callContext(metadata={"who": "block", "request-id": "r1"}):
                    await connection.root.callRemote("inBlock")

        sides = {
            "blocking": lambda address: blockingSide(address, blocking.connect),
            "asyncio": lambda address: asyncio.run(asyncio.wait_for(asyncioSide(address, asyncioclient.connect), HANG)),
        }
        for client, side in sides.items():
            seen: list[Any] = []
            server = ScriptedServer(self, answering(seen, 2))
            side(server.address)
            self.assertTrue(server.done.wait(HANG))
            calls = [(message[3], message[7]) for message in seen if message[0] == CALL]
            connection = {"tenant": "t1", "who": "connection"}
            expected = [
                ("plain", connection),
                ("oneWay", connection),
                ("inBlock", {"tenant": "t1", "who": "block", "request-id": "r1"}),
            ]
            self.assertEqual(calls, expected, client)

    def test_noMetadataSendsNone(self) -> None:
        """Without metadata (or a block) a call carries no call context at all, as before."""
        seen: list[Any] = []
        server = ScriptedServer(self, answering(seen, 1))
        with blocking.connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            connection.root.callRemote("plain")
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual([message for message in seen if message[0] == CALL], [Message((CALL, 1, 0, "plain", (), {}))])

    def test_maxPending(self) -> None:
        """The callLimits' maxPending bounds the blocking client's calls waiting: one past it fails at once, unsent."""
        received, release = threading.Event(), threading.Event()
        seen: list[Any] = []

        def script(peer: ScriptedPeer) -> None:
            first = peer.next()
            received.set()
            release.wait(HANG)
            peer.send(Message((ANSWER, first[1], "done")))
            while (message := peer.next()) is not None:
                seen.append(message)

        server = ScriptedServer(self, script)
        options = ClientOptions(timeout=HANG, callLimits=CallLimits(maxPending=1, callTimeout=HANG))
        with blocking.connect(server.address, options=options) as connection:
            results: list[Any] = []
            waiting = threading.Thread(target=lambda: results.append(connection.root.callRemote("slow")))
            waiting.start()
            self.assertTrue(received.wait(HANG))
            self.assertRaises(TooManyPendingCalls, connection.root.callRemote, "second")
            release.set()
            waiting.join(HANG)
            self.assertEqual(results, ["done"])
        self.assertTrue(server.done.wait(HANG))
        self.assertEqual(seen, [])  # (the refused call was never sent)

    def test_connectURLRefusesCredentials(self) -> None:
        """connectURL logs in by the URL's name: options with credentials are a ValueError, before connecting."""
        options = ClientOptions(credentials=Password("ada", "secret"))
        error = self.assertRaises(ValueError, blocking.connectURL, "chunkwire://x@127.0.0.1:1/y", options=options)
        self.assertIn("credentials", str(error))
        self.assertRaises(
            ValueError, asyncio.run, asyncioclient.connectURL("chunkwire://x@127.0.0.1:1/y", options=options)
        )


class BulkRefusedTests(SynchronousTestCase):
    """
    The clients without Twisted refuse C{ClientOptions.bulk} (Twisted's
    clients' L{BulkOptions}, which they would not use) with a ValueError
    naming their bulk client, before they connect.
    """

    def setUp(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.addCleanup(self.listener.close)
        self.listener.setblocking(False)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.options = ClientOptions(bulk=BulkOptions())

    def refused(self, connecting: Callable[[], object], named: str) -> None:
        """C{connecting} raises the ValueError naming C{named}, and no connection reached the listener."""
        error = self.assertRaises(ValueError, connecting)
        self.assertIn("ClientOptions.bulk", str(error))
        self.assertIn(named, str(error))
        self.assertRaises(BlockingIOError, self.listener.accept)

    def test_blocking(self) -> None:
        """protocols.blocking's connect (one address or a list) and connectURL name blockingbulk.connect."""
        url = str(ObjectURL("a" * 52, (self.address,), "b" * 52))
        named = "protocols.blockingbulk.connect"
        self.refused(lambda: blocking.connect(self.address, options=self.options), named)
        self.refused(lambda: blocking.connect([self.address, self.address], options=self.options), named)
        self.refused(lambda: blocking.connectURL(url, options=self.options), named)

    def test_asyncio(self) -> None:
        """protocols.asyncioclient's connect (one address or a list) and connectURL name asynciobulk.connect."""
        url = str(ObjectURL("a" * 52, (self.address,), "b" * 52))
        named = "protocols.asynciobulk.connect"
        self.refused(lambda: asyncio.run(asyncioclient.connect(self.address, options=self.options)), named)
        self.refused(
            lambda: asyncio.run(asyncioclient.connect([self.address, self.address], options=self.options)), named
        )
        self.refused(lambda: asyncio.run(asyncioclient.connectURL(url, options=self.options)), named)

    def test_bulkClients(self) -> None:
        """The bulk clients without Twisted carry streams with their own settings: they refuse it too."""
        self.refused(lambda: blockingbulk.connect(self.address, options=self.options), "protocols.blockingbulk.connect")
        self.refused(
            lambda: asyncio.run(asynciobulk.connect(self.address, options=self.options)),
            "protocols.asynciobulk.connect",
        )
