"""How a server serves: one L{ServerOptions} value for C{serve}, C{serverFactory} and C{bulk.serve}.

Contract: a L{ServerOptions} is immutable and checked when it is made (a
bad field raises C{TypeError} or C{ValueError} naming it); C{serve(reactor,
description, root, options=ServerOptions(...))} and its siblings read it
when they build their factory.  The client's counterpart is
L{protocols.options.ClientOptions}; L{clientFactory} is what every Twisted
client builds from one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from framing import Limits, Registry
from framing.rpc.limits import CallLimits
from framing.rpc.referenceable import Referenceable

from ..auth.client import ClientLogin, mechanismFor
from ..auth.server import DEFAULT_LOGIN_TIMEOUT
from ..guard import DEFAULT_GUARD, GuardPolicy
from ..options import ClientOptions, checkField, checkInterceptors, checkSeconds
from .broker import BrokerFactory
from .interceptors import ConnectionMetadata


@dataclass(frozen=True, kw_only=True)
class ServerOptions:
    """
    How a server serves each connection; C{ServerOptions()} is the default
    of every C{serve}.  A server exposes a root (C{serve}'s argument) or
    has logins (C{portal} or C{names}), never both.

    @ivar tracebacks: send the traceback of a failed call to the caller
        (C{RemoteError.remoteTraceback}).  Off: tracebacks show source
        paths and code to whoever connects.
    @ivar limits: the L{Limits} for what each connection receives (once
        logged in, with logins); C{None}: the defaults (bulk: room for four
        of the largest stream windows).
    @ivar registry: the L{Registry} of application types both sides send.
    @ivar callLimits: the L{CallLimits} of each connection: references a
        client may make the server hold, the server's calls waiting on a
        client, and their timeout.  C{None}: L{framing.rpc.limits.SERVER_CALL_LIMITS}
        (calls back to a client time out after 30 s); for C{bulk.serve},
        L{framing.rpc.limits.CLIENT_CALL_LIMITS} (a call back may carry a
        long stream: no timeout).
    @ivar interceptors: L{protocols.rpc.interceptors.ICallInterceptor}s told
        of each call on each connection (metrics, access control), in order.
    @ivar guard: the L{protocols.guard.GuardPolicy} every connection is
        watched with: a peer whose preamble does not come within 10 s, that
        stalls in the middle of an object, stays silent past a keepalive
        PING, idles for 15 minutes or stops reading is dropped, and the
        connections are capped (1,000 in all, 20 per address).  The default
        is L{protocols.guard.DEFAULT_GUARD}; C{None} turns the guard off (a
        server behind something that guards it already).
    @ivar portal: a C{twisted.cred} portal whose realm returns, for
        L{protocols.auth.IRemoteRoot}, the L{Referenceable} each logged-in
        client sees as its root (see L{protocols.auth}).
    @ivar names: a L{protocols.auth.names.NameTable}: a client that presents
        a registered name (C{connectURL}) gets that object.
    @ivar loginTimeout: seconds a connection has to log in.
    @ivar throttle: the L{protocols.auth.throttle.LoginThrottle} of the
        logins; C{None}: one in this process (worker processes share one in SQLite).
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

    def __post_init__(self) -> None:
        owner = "ServerOptions"
        checkField(owner, "tracebacks", self.tracebacks, bool, optional=False)
        checkField(owner, "limits", self.limits, Limits)
        checkField(owner, "registry", self.registry, Registry)
        checkField(owner, "callLimits", self.callLimits, CallLimits)
        object.__setattr__(self, "interceptors", checkInterceptors(owner, self.interceptors))
        checkField(owner, "guard", self.guard, GuardPolicy)
        checkSeconds(owner, "loginTimeout", self.loginTimeout, optional=False)

    @property
    def hasLogins(self) -> bool:
        """Whether clients log in (a C{portal} or C{names} is given)."""
        return self.portal is not None or self.names is not None


SERVER_DEFAULTS = ServerOptions()
"""C{ServerOptions()}: the default of every C{serve}."""


def clientFactory(
    reactor: Any, root: Referenceable | None, options: ClientOptions, kind: Callable[..., BrokerFactory] = BrokerFactory
) -> BrokerFactory:
    """
    A client's factory of brokers of class C{kind} with C{options} (its
    C{metadata} sent with each call by a L{ConnectionMetadata} interceptor,
    the first); its brokers keep reading however much waits to be sent (see
    L{protocols.TokenProtocol.sendBackPressure}).  C{credentials} are left
    to the caller (L{loginWith}, L{gateLogins}).
    """
    interceptors = options.interceptors
    if options.metadata:
        interceptors = (ConnectionMetadata(options.metadata), *interceptors)
    factory = kind(
        root,
        clock=reactor,
        limits=options.limits,
        registry=options.registry,
        callLimits=options.callLimits,
        interceptors=interceptors,
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
