"""ServerOptions: checked when made, and what rpc.serve and bulk.serve build from it (L{protocols.rpc.options})."""

from __future__ import annotations

import dataclasses
from typing import Any

from twisted.cred.checkers import AllowAnonymousAccess
from twisted.cred.portal import Portal
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from framing import Limits, Registry
from framing.rpc.limits import CLIENT_CALL_LIMITS, SERVER_CALL_LIMITS, CallLimits
from protocols import bulk, rpc
from protocols.guard import DEFAULT_GUARD, GuardPolicy
from protocols.options import ClientOptions
from protocols.rpc.interceptors import CallInterceptor, ConnectionMetadata
from protocols.rpc.options import ServerOptions, clientFactory

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
        ]
        for fields, kind, named in bad:
            error = self.assertRaises(kind, ServerOptions, **fields)
            self.assertIn(named, str(error), fields)


class ServingTests(SynchronousTestCase):
    """What rpc.serve and bulk.serve build from their ServerOptions: each field reaches the factory."""

    def served(self, serve: Any, root: Any, options: ServerOptions) -> Any:
        reactor = MemoryReactorClock()
        serve(reactor, "tcp:0", root, options=options)
        return listeningFactory(reactor)

    def test_fieldsReachTheFactory(self) -> None:
        """tracebacks, limits, registry, callLimits, interceptors and guard are the factory's, for both serves."""
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
        for serve in (rpc.serve, bulk.serve):
            factory = self.served(serve, Root(), options)
            self.assertEqual(
                (factory.tracebacks, factory.limits, factory.registry, factory.callLimits),
                (True, limits, registry, callLimits),
                serve,
            )
            self.assertEqual((factory.interceptors, factory.guardPolicy, factory.gate), ((interceptor,), guard, None))

    def test_callLimitsDefault(self) -> None:
        """Without callLimits, rpc.serve's calls back time out after 30 s; bulk.serve's (streams) do not."""
        self.assertEqual(self.served(rpc.serve, Root(), ServerOptions()).callLimits, SERVER_CALL_LIMITS)
        self.assertIn(self.served(bulk.serve, Root(), ServerOptions()).callLimits, (None, CLIENT_CALL_LIMITS))

    def test_logins(self) -> None:
        """A portal in the options gates every connection behind a login; a root and a portal, or neither: refused."""
        portal = Portal(object(), [AllowAnonymousAccess()])  # type: ignore[arg-type]
        factory = self.served(rpc.serve, None, ServerOptions(portal=portal, loginTimeout=3.0))
        self.assertIsNotNone(factory.gate)
        self.assertRaises(
            ValueError, rpc.serve, MemoryReactorClock(), "tcp:0", Root(), options=ServerOptions(portal=portal)
        )
        self.assertRaises(ValueError, rpc.serve, MemoryReactorClock(), "tcp:0")

    def test_bulkOptions(self) -> None:
        """bulk.serve's streams options are its own argument, bulkOptions, beside the ServerOptions."""
        streams = bulk.BulkOptions(window=1 << 20)
        reactor = MemoryReactorClock()
        bulk.serve(reactor, "tcp:0", Root(), options=ServerOptions(), bulkOptions=streams, steadyAllocator=False)
        self.assertIs(listeningFactory(reactor).options, streams)


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
