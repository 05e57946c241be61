# -*- test-case-name: tests.protocols.rpc.test_options,tests.protocols.rpc.test_otel_processes -*-
"""How a server serves: one L{ServerOptions} value for C{serve} and C{serverFactory}, streams too.

Contract: a L{ServerOptions} is immutable and checked when it is made (a
bad field raises C{TypeError} or C{ValueError} naming it); C{serve(reactor,
description, root, options=ServerOptions(...))} and its siblings read it
when they build their factory.  The client's counterpart is
L{protocols.options.ClientOptions}; L{clientFactory} is what every Twisted
client builds from one.  With C{bulk} settings (a
L{protocols.bulk.BulkOptions}) each connection's broker loads a bulk
channel, and the connections carry streams as well as calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from framing import Limits, Registry
from framing.rpc._limits import CallLimits
from framing.rpc._referenceable import Referenceable

from .._guard import DEFAULT_GUARD, GuardPolicy
from ..auth._client import ClientLogin, mechanismFor
from ..auth._server import DEFAULT_LOGIN_TIMEOUT
from ..options import ClientOptions, ConnectionExtension, checkExtension, checkField, checkInterceptors, checkSeconds
from ._broker import BrokerFactory
from ._interceptors import ConnectionMetadata


@dataclass(frozen=True, kw_only=True)
class ServerOptions:
    """How a server serves each connection; C{ServerOptions()} is the default
    of every C{serve}.  A server exposes a root or has logins (C{portal} or
    C{names}), never both.

    Design: docs/design/options.md

    @ivar tracebacks: send a failed call's traceback to the caller (off: it shows source to whoever connects).
    @ivar limits: the L{Limits} for what each connection receives; C{None}: the defaults.
    @ivar registry: the L{Registry} of application types both sides send.
    @ivar callLimits: the L{CallLimits} of each connection; C{None}: L{framing.rpc._limits.SERVER_CALL_LIMITS}
        (with C{bulk}: L{framing.rpc._limits.CLIENT_CALL_LIMITS}).
    @ivar interceptors: L{protocols.rpc._interceptors.ICallInterceptor}s told of each call, in order.
    @ivar guard: the L{protocols._guard.GuardPolicy} (default L{protocols._guard.DEFAULT_GUARD}; C{None}: off).
    @ivar portal: a C{twisted.cred} portal whose realm gives each logged-in client its root.
    @ivar names: a L{protocols.auth._names.NameTable}: a registered name (C{connectURL}) gets that object.
    @ivar loginTimeout: seconds a connection has to log in.
    @ivar throttle: the L{protocols.auth._throttle.LoginThrottle}; C{None}: one in this process.
    @ivar bulk: a L{protocols.bulk.BulkOptions}: each connection carries streams with them; C{None}: calls only.
    """

    tracebacks: bool = False
    limits: Limits | None = None
    registry: Registry | None = None
    callLimits: CallLimits | None = None
    interceptors: tuple[Any, ...] = ()
    guard: GuardPolicy | None = DEFAULT_GUARD
    portal: Any = None
    names: Any = None
    loginTimeout: float = DEFAULT_LOGIN_TIMEOUT
    throttle: Any = None
    bulk: ConnectionExtension | None = None

    def __post_init__(self) -> None:
        owner = "ServerOptions"
        checkField(owner, "tracebacks", self.tracebacks, bool, optional=False)
        checkField(owner, "limits", self.limits, Limits)
        checkField(owner, "registry", self.registry, Registry)
        checkField(owner, "callLimits", self.callLimits, CallLimits)
        object.__setattr__(self, "interceptors", checkInterceptors(owner, self.interceptors))
        checkField(owner, "guard", self.guard, GuardPolicy)
        checkSeconds(owner, "loginTimeout", self.loginTimeout, optional=False)
        checkExtension(owner, "bulk", self.bulk)

    @property
    def hasLogins(self) -> bool:
        """Whether clients log in (a C{portal} or C{names} is given)."""
        return self.portal is not None or self.names is not None


SERVER_DEFAULTS = ServerOptions()
"""C{ServerOptions()}: the default of every C{serve}."""


def clientFactory(reactor: Any, root: Referenceable | None, options: ClientOptions) -> BrokerFactory:
    """
    A client's factory of brokers with C{options} (its C{metadata} sent with
    each call by a L{ConnectionMetadata} interceptor, the first; with
    C{bulk}, each broker carries streams, and the process is prepared for
    them first: L{protocols.bulk.BulkOptions.prepareProcess}); its brokers
    keep reading however much waits to be sent (see
    L{protocols.TokenProtocol.sendBackPressure}).  C{credentials} are left
    to the caller (L{loginWith}, L{gateLogins}).
    """
    interceptors = options.interceptors
    if options.metadata:
        interceptors = (ConnectionMetadata(options.metadata), *interceptors)
    if options.bulk is not None:
        options.bulk.prepareProcess()
    factory = BrokerFactory(
        root,
        clock=reactor,
        limits=options.limits,
        registry=options.registry,
        callLimits=options.callLimits,
        interceptors=interceptors,
        bulk=options.bulk,
    )
    factory.sendBackPressure = False
    return factory


def gateLogins(factory: BrokerFactory, credentials: Any) -> None:
    """
    Log in with C{credentials} on every connection C{factory} makes, if
    given (a reconnecting client's).

    @raise UnsupportedCredentials: no mechanism takes them (here, not on every attempt).
    """
    if credentials is not None:
        mechanismFor(credentials)
        factory.gate = lambda broker: ClientLogin(broker, mechanismFor(credentials))
