"""ServerOptions: checked when made, and what rpc.serve builds from it, bulk or not (L{protocols.rpc._options})."""

from __future__ import annotations

import dataclasses
from typing import Any

from twisted.cred.checkers import AllowAnonymousAccess
from twisted.cred.portal import Portal
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from framing import Limits, Registry
from framing.rpc._limits import CLIENT_CALL_LIMITS, SERVER_CALL_LIMITS, CallLimits
from protocols import bulk, rpc
from protocols._guard import DEFAULT_GUARD, GuardPolicy
from protocols.options import ClientOptions
from protocols.rpc._interceptors import CallInterceptor, ConnectionMetadata
from protocols.rpc._options import ServerOptions, clientFactory
from protocols.testing import connectedPair

from ..bulk.support import Store
from ..test_guarded_serve import listeningFactory


class Root(rpc.Referenceable):
    """An open server's root."""


class ServerOptionsTests(SynchronousTestCase):
    """A ServerOptions refuses a bad field when made, naming it."""

    def test_defaults(self) -> None:
        """No tracebacks, the default guard, 10 s to log in, no logins."""
        options = ServerOptions()
        self.assertEqual((options.tracebacks, options.guard, options.loginTimeout), (False, DEFAULT_GUARD, 10.0))
        self.assertFalse(options.hasLogins)
        self.assertRaises(dataclasses.FrozenInstanceError, setattr, options, "tracebacks", True)

    def test_badFields(self) -> None:
        """Each bad value raises TypeError or ValueError naming its field."""
        bad: list[tuple[dict[str, Any], type[Exception], str]] = [
            ({"tracebacks": 1}, TypeError, "ServerOptions.tracebacks"),
            ({"limits": 1}, TypeError, "ServerOptions.limits"),
            ({"registry": {}}, TypeError, "ServerOptions.registry"),
            ({"callLimits": SERVER_CALL_LIMITS.callTimeout}, TypeError, "ServerOptions.callLimits"),
            ({"interceptors": "metrics"}, TypeError, "ServerOptions.interceptors"),
            ({"guard": True}, TypeError, "ServerOptions.guard"),
            ({"loginTimeout": 0}, ValueError, "ServerOptions.loginTimeout"),
            ({"bulk": True}, TypeError, "ServerOptions.bulk must be protocols.bulk.BulkOptions or None, not bool"),
            ({"bulk": bulk.Stream(b"")}, TypeError, "ServerOptions.bulk must be protocols.bulk.BulkOptions or None"),
        ]
        for fields, kind, named in bad:
            error = self.assertRaises(kind, ServerOptions, **fields)
            self.assertIn(named, str(error), fields)


STREAMS = bulk.BulkOptions(window=1 << 20, maxWindow=0, steadyAllocator=False)
"""Bulk options of a test's own (no steady allocator: these tests leave the process alone)."""


class ServingTests(SynchronousTestCase):
    """What rpc.serve builds from its ServerOptions, with bulk or without: each field reaches the factory."""

    def served(self, serve: Any, root: Any, options: ServerOptions) -> Any:
        reactor = MemoryReactorClock()
        serve(reactor, "tcp:0", root, options=options)
        return listeningFactory(reactor)

    def test_fieldsReachTheFactory(self) -> None:
        """tracebacks, limits, registry, callLimits, interceptors and guard are the factory's, with bulk or not."""
        interceptor = CallInterceptor()
        limits, registry, callLimits = Limits(max_string_length=1000), Registry(), CallLimits(maxPending=7)
        guard = GuardPolicy(preambleTimeout=5.0)
        options = ServerOptions(
            tracebacks=True,
            limits=limits,
            registry=registry,
            callLimits=callLimits,
            interceptors=[interceptor],
            guard=guard,
        )
        for streams in (None, STREAMS):
            factory = self.served(rpc.serve, Root(), dataclasses.replace(options, bulk=streams))
            self.assertEqual(
                (factory.tracebacks, factory.limits, factory.registry, factory.callLimits, factory.bulk),
                (True, limits, registry, callLimits, streams),
            )
            self.assertEqual((factory.interceptors, factory.guardPolicy, factory.gate), ((interceptor,), guard, None))
            self.assertIs(factory.buildProtocol(None).limits, limits)

    def test_callLimitsDefault(self) -> None:
        """Without callLimits, a server's calls back time out after 30 s; with bulk (a call may carry a long
        stream) they do not: CLIENT_CALL_LIMITS, as bulk.serve had."""
        self.assertEqual(self.served(rpc.serve, Root(), ServerOptions()).callLimits, SERVER_CALL_LIMITS)
        factory = self.served(rpc.serve, Root(), ServerOptions(bulk=STREAMS))
        self.assertEqual(factory.callLimits, CLIENT_CALL_LIMITS)
        self.assertEqual(factory.buildProtocol(None).receiver.callLimits, CLIENT_CALL_LIMITS)
        self.assertEqual(rpc.serverFactory(Root(), options=ServerOptions(bulk=STREAMS)).callLimits, CLIENT_CALL_LIMITS)

    def test_limitsDefault(self) -> None:
        """Without limits, a bulk server's connections hold four of the largest windows while reading is paused
        (as bulk.serve's did); a plain server's keep the defaults."""
        wide = bulk.BulkOptions(window=1 << 20, maxWindow=64 << 20, steadyAllocator=False)
        connection = self.served(rpc.serve, Root(), ServerOptions(bulk=wide)).buildProtocol(None)
        self.assertEqual(connection.limits.max_buffered_bytes, 4 * (64 << 20))
        self.assertEqual(connection.limits, wide.connectionLimits())
        self.assertIsNone(self.served(rpc.serve, Root(), ServerOptions()).buildProtocol(None).limits)
        small = bulk.BulkOptions(window=1 << 16, maxWindow=0)
        self.assertEqual(small.connectionLimits(), Limits())

    def test_logins(self) -> None:
        """A portal in the options gates every connection behind a login; a root and a portal, or neither: refused."""
        portal = Portal(object(), [AllowAnonymousAccess()])  # type: ignore[arg-type]
        factory = self.served(rpc.serve, None, ServerOptions(portal=portal, loginTimeout=3.0))
        self.assertIsNotNone(factory.gate)
        self.assertRaises(
            ValueError, rpc.serve, MemoryReactorClock(), "tcp:0", Root(), options=ServerOptions(portal=portal)
        )
        self.assertRaises(ValueError, rpc.serve, MemoryReactorClock(), "tcp:0")

    def test_bulk(self) -> None:
        """With ServerOptions(bulk=...) every connection's broker carries streams with those options (a plain
        Broker with a BulkChannel, named .bulk); without, a broker carries none."""
        broker = self.served(rpc.serve, Root(), ServerOptions(bulk=STREAMS)).buildProtocol(None).receiver
        self.assertIs(type(broker), rpc.Broker)
        self.assertIsInstance(broker.bulk, bulk.BulkChannel)
        self.assertIs(broker.bulk, bulk.bulkOf(broker))
        self.assertIs(broker.bulk.options, STREAMS)
        plain = self.served(rpc.serve, Root(), ServerOptions()).buildProtocol(None).receiver
        self.assertIsNone(plain.bulk)
        self.assertIsNone(bulk.bulkOf(plain))


class ClientFactoryTests(SynchronousTestCase):
    """What every Twisted client builds from its ClientOptions."""

    def test_fields(self) -> None:
        """limits, registry, callLimits and interceptors are the factory's; a client factory keeps reading."""
        interceptor = CallInterceptor()
        options = ClientOptions(
            limits=Limits(), registry=Registry(), callLimits=CallLimits(), interceptors=(interceptor,)
        )
        factory = clientFactory(MemoryReactorClock(), None, options)
        self.assertEqual(
            (factory.limits, factory.registry, factory.callLimits, factory.interceptors),
            (options.limits, options.registry, options.callLimits, (interceptor,)),
        )
        self.assertFalse(factory.sendBackPressure)

    def test_metadataInterceptorFirst(self) -> None:
        """With metadata, a ConnectionMetadata interceptor comes first, so the others see what it adds."""
        interceptor = CallInterceptor()
        factory = clientFactory(
            MemoryReactorClock(), None, ClientOptions(metadata={"tenant": "t1"}, interceptors=(interceptor,))
        )
        first, second = factory.interceptors
        self.assertIsInstance(first, ConnectionMetadata)
        self.assertEqual((dict(first.metadata), second), ({"tenant": "t1"}, interceptor))
        self.assertEqual(clientFactory(MemoryReactorClock(), None, ClientOptions()).interceptors, ())

    def test_bulk(self) -> None:
        """With ClientOptions(bulk=...) the client's brokers carry streams with those options, the limits
        defaulting to the options' connectionLimits(); without, none."""
        broker = clientFactory(MemoryReactorClock(), None, ClientOptions(bulk=STREAMS)).buildProtocol(None).receiver
        self.assertIs(broker.bulk.options, STREAMS)
        self.assertEqual(broker.connection.limits, STREAMS.connectionLimits())
        self.assertIsNone(clientFactory(MemoryReactorClock(), None, ClientOptions()).bulk)


class StreamsTests(SynchronousTestCase):
    """A connection carries streams when the server's and the client's options give bulk, and only then."""

    def call(self, serving: ServerOptions, payload: bytes) -> tuple[Any, Store]:
        """Serve a L{Store} with C{serving} to a client with bulk options, in memory; upload C{payload}."""
        clock, store = Clock(), Store()
        server = rpc.serverFactory(store, options=serving, clock=clock).buildProtocol(None).receiver
        client = clientFactory(clock, None, ClientOptions(bulk=STREAMS)).buildProtocol(None).receiver
        pair = connectedPair(server, client)
        called = client.rootReference().callRemote("upload", bulk.Stream(payload))
        for _ in range(10_000):
            clock.advance(0)
            if not pair.flush() and called.called:
                break
        return called, store

    def test_bulkServerCarriesStreams(self) -> None:
        """A server with ServerOptions(bulk=...) receives a Stream argument whole, its digest checked."""
        payload = bytes(range(256)) * 1000
        called, store = self.call(ServerOptions(bulk=STREAMS), payload)
        self.assertIsInstance(self.successResultOf(called), str)
        self.assertEqual(b"".join(store.pieces), payload)

    def test_plainServerRefusesStreams(self) -> None:
        """A server without bulk options refuses a call with a Stream argument (the call fails; nothing arrives)."""
        called, store = self.call(ServerOptions(), b"x" * 1000)
        self.failureResultOf(called, rpc.RemoteViolation)
        self.assertEqual((store.streams, store.pieces), ([], []))
