"""rpc.serve and rpc.serverFactory, with bulk or not, guard their connections by default, as the example servers do."""

from __future__ import annotations

import importlib.util
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.trial.unittest import SynchronousTestCase

from framing.wire import PREAMBLE
from protocols import bulk, rpc
from protocols._guard import DEFAULT_GUARD, GuardedFactory, GuardError, GuardPolicy
from protocols.rpc._options import ServerOptions
from tests.processes import ROOT

PEER = IPv4Address("TCP", "192.0.2.7", 40000)
STREAMS = bulk.BulkOptions(steadyAllocator=False)
"""The bulk servers' options (the process left alone)."""


class Service(rpc.Referenceable):
    """A root with one method, for servers that are only connected to."""

    @rpc.remote
    def ping(self) -> str:
        return "pong"


def tutorialGreeter() -> rpc.Referenceable:
    """The tutorial's own server's root: C{Greeter} of docs/snippets/greeter_server.py, as a user copies it."""
    spec = importlib.util.spec_from_file_location("greeter_server", ROOT / "docs" / "snippets" / "greeter_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    greeter: rpc.Referenceable = module.Greeter()
    return greeter


def listeningFactory(reactor: MemoryReactorClock) -> Any:
    """The factory the one server listening on C{reactor} accepts connections with."""
    [(port, factory, backlog, interface)] = reactor.tcpServers
    return factory


def silentPeer(factory: Any) -> tuple[Any, StringTransport]:
    """A connection accepted by C{factory} from a peer that sends nothing, and its transport."""
    connection = factory.buildProtocol(PEER)
    transport = StringTransport(peerAddress=PEER)
    connection.makeConnection(transport)
    return connection, transport


class GuardedByDefaultTests(SynchronousTestCase):
    """A server made without a guard argument drops a silent peer; guard=None leaves it; a policy given is used."""

    def dropsSilentPeer(self, serve: Any, root: rpc.Referenceable) -> None:
        """A server made by C{serve(reactor, "tcp:0", root)} drops a peer silent for the default preamble timeout."""
        reactor = MemoryReactorClock()
        serve(reactor, "tcp:0", root)
        connection, transport = silentPeer(listeningFactory(reactor))
        assert DEFAULT_GUARD.preambleTimeout is not None
        reactor.advance(DEFAULT_GUARD.preambleTimeout - 0.5)
        self.assertIsNone(connection.failure)
        reactor.advance(1.0)
        self.assertIsInstance(connection.failure.value, GuardError)
        self.assertEqual(connection.failure.value.code, "preamble-timeout")
        self.assertTrue(transport.disconnecting)

    def test_tutorialServer(self) -> None:
        """The tutorial's server (rpc.serve of its Greeter, no guard argument) drops a peer that never speaks."""
        self.dropsSilentPeer(rpc.serve, tutorialGreeter())

    def test_bulkServe(self) -> None:
        """rpc.serve with bulk options, given no guard, drops a peer that never speaks."""
        self.dropsSilentPeer(bulkServe, Service())

    def test_serverFactory(self) -> None:
        """rpc.serverFactory, given no guard, drops a peer that never speaks."""
        self.dropsSilentPeer(
            lambda reactor, description, root: _listen(reactor, rpc.serverFactory(root, clock=reactor)), Service()
        )

    def test_examplesDefaults(self) -> None:
        """The default policy is every GuardPolicy default: the example servers' and twist's."""
        self.assertEqual(DEFAULT_GUARD, GuardPolicy())
        reactor = MemoryReactorClock()
        rpc.serve(reactor, "tcp:0", Service())
        self.assertEqual(listeningFactory(reactor).guardPolicy, GuardPolicy())

    def test_guardNone(self) -> None:
        """guard=None turns the guard off: a silent peer of rpc.serve, bulk or not, stays connected an hour on."""
        for streams in (None, STREAMS):
            reactor = MemoryReactorClock()
            rpc.serve(reactor, "tcp:0", Service(), options=ServerOptions(guard=None, bulk=streams))
            connection, transport = silentPeer(listeningFactory(reactor))
            reactor.advance(3600)
            self.assertIsNone(connection.failure, streams)
            self.assertFalse(transport.disconnecting, streams)
            self.assertIsNone(connection.guard, streams)

    def test_policyGiven(self) -> None:
        """A policy given to rpc.serve is the one applied: its preamble timeout, not the default's."""
        reactor = MemoryReactorClock()
        rpc.serve(reactor, "tcp:0", Service(), options=ServerOptions(guard=GuardPolicy(preambleTimeout=2.0)))
        connection, transport = silentPeer(listeningFactory(reactor))
        reactor.advance(2.5)
        self.assertEqual(connection.failure.value.code, "preamble-timeout")

    def test_peerThatSpeaksStays(self) -> None:
        """A peer that sends its preamble in time is not dropped by the default guard."""
        reactor = MemoryReactorClock()
        rpc.serve(reactor, "tcp:0", Service())
        connection, transport = silentPeer(listeningFactory(reactor))
        connection.dataReceived(PREAMBLE)
        reactor.advance(60)
        self.assertIsNone(connection.failure)

    def test_wrappedFactoryOneGuard(self) -> None:
        """A GuardedFactory around rpc.serverFactory guards each connection once, with the wrapper's policy alone."""
        reactor = MemoryReactorClock()
        wrapped = GuardedFactory(
            rpc.serverFactory(Service(), clock=reactor), GuardPolicy(preambleTimeout=None), reactor
        )
        connection, transport = silentPeer(wrapped)
        self.assertEqual([observer.policy for observer in connection.observers], [GuardPolicy(preambleTimeout=None)])
        assert DEFAULT_GUARD.preambleTimeout is not None
        reactor.advance(DEFAULT_GUARD.preambleTimeout + 1)
        self.assertIsNone(connection.failure)


def bulkServe(reactor: Any, description: str, root: rpc.Referenceable) -> Any:
    """C{rpc.serve} of C{root} with bulk options (L{STREAMS}) and no other."""
    return rpc.serve(reactor, description, root, options=ServerOptions(bulk=STREAMS))


def _listen(reactor: Any, factory: Any) -> Any:
    """Listen with C{factory} as a user of rpc.serverFactory does."""
    from twisted.internet.endpoints import serverFromString

    return serverFromString(reactor, "tcp:0").listen(factory)
