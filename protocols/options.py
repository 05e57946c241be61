# -*- test-case-name: tests.protocols.test_options,tests.protocols.rpc.test_options -*-
"""How a client connects: one L{ClientOptions} value for every client's C{connect}.

Contract: a L{ClientOptions} is immutable, checked when it is made (a bad
field raises C{TypeError} or C{ValueError} naming it), and taken by every
way of connecting, Twisted's and the clients' without it: C{rpc.connect},
C{rpc.login}, C{rpc.connectURL}, C{rpc.reconnecting},
L{protocols.blocking.connect} (and C{connectURL}),
L{protocols.asyncioclient.connect} (and C{connectURL}) and the bulk
clients'.  A field a client has no use for is said so in its description.
This module imports no Twisted, so the clients without it can use it.  The
server's counterpart is L{protocols.rpc.ServerOptions}; both take bulk
settings (C{bulk}) as a L{ConnectionExtension}, so that the RPC layer
imports nothing of L{protocols.bulk}.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from framing import Limits, Registry
from framing.rpc._addresses import PICK_FIRST, POLICIES, Backoff
from framing.rpc._exports import DEFAULT_MAX_IMPORTS
from framing.rpc._incoming import DEFAULT_MAX_RUNNING
from framing.rpc._limits import CallLimits
from framing.rpc._session import ClientSession, SessionExtension
from framing.rpc._streamtable import SentStream

if TYPE_CHECKING:
    import ssl
else:

    class _SSLOnDemand:
        """
        Stands for the C{ssl} module in this module's hints: C{ssl} loads
        when a name is asked of it (C{typing.get_type_hints} asking for
        C{ssl.SSLContext}, or a context given as L{ClientOptions.tls}), so
        that a client on a plain connection never loads it (5 ms of every
        start).
        """

        def __getattr__(self, name: str) -> Any:
            import ssl

            return getattr(ssl, name)

    ssl = _SSLOnDemand()

DEFAULT_CONNECT_TIMEOUT = 30.0
"""
Seconds a client gives a connection to be made and ready
(L{ClientOptions.timeout}, every client's): far more than a TCP and TLS
handshake and a login take on any working path, even across the world and
through a busy server's throttle, and short enough that a user waiting on
a server that says nothing is told so within half a minute.
"""

_NO_METADATA: Mapping[str, str] = MappingProxyType({})


def checkField(owner: str, name: str, value: object, kinds: type | tuple[type, ...], optional: bool = True) -> None:
    """
    @raise TypeError: C{value}, the field C{name} of an C{owner}, is not of C{kinds} (nor C{None}, if C{optional}).
    """
    if value is None and optional:
        return
    if not isinstance(value, kinds):
        wanted = kinds.__name__ if isinstance(kinds, type) else " or ".join(kind.__name__ for kind in kinds)
        raise TypeError(f"{owner}.{name} must be {wanted}{' or None' if optional else ''}, not {type(value).__name__}")


@runtime_checkable
class ConnectionExtension(Protocol):
    """
    What a Twisted connection carries beside calls, as C{ClientOptions.bulk}
    and C{ServerOptions.bulk} hold it: L{protocols.bulk.BulkOptions} is the
    one there is.  The RPC layer asks it only these, so it imports nothing
    of the extension (no import cycle).
    """

    def prepareProcess(self) -> None:
        """Set up the process, once per C{rpc.serve} or client factory, before it listens or connects."""

    def connectionLimits(self) -> Limits:
        """The L{Limits} of a connection carrying it whose options give none."""
        ...

    def brokerExtension(self, clock: Any) -> Any:
        """A new L{protocols._interfaces.IBrokerExtension} for one connection's broker, on C{clock}."""


def checkExtension(owner: str, name: str, value: object) -> None:
    """@raise TypeError: C{value}, the field C{name} of an C{owner}, is neither C{None} nor a L{ConnectionExtension}."""
    if value is not None and not isinstance(value, ConnectionExtension):
        raise TypeError(f"{owner}.{name} must be protocols.bulk.BulkOptions or None, not {type(value).__name__}")


def checkSeconds(owner: str, name: str, value: float | None, optional: bool = True) -> None:
    """@raise TypeError, ValueError: C{value}, seconds, is no number, or not positive (C{None} only if C{optional})."""
    checkField(owner, name, value, (int, float), optional)
    if value is not None and (isinstance(value, bool) or not value > 0):
        raise ValueError(f"{owner}.{name} must be a positive number of seconds, not {value!r}")


def checkInterceptors(owner: str, interceptors: object) -> tuple[Any, ...]:
    """C{interceptors} as a tuple; @raise TypeError: it is not a sequence of interceptors (a lone one, a string)."""
    if isinstance(interceptors, (str, bytes)) or not isinstance(interceptors, (tuple, list)):
        raise TypeError(f"{owner}.interceptors must be a tuple of interceptors, not {type(interceptors).__name__}")
    for interceptor in interceptors:
        if not (hasattr(interceptor, "callStarted") and hasattr(interceptor, "callEnded")):
            raise TypeError(f"{owner}.interceptors holds {interceptor!r}, which is no call interceptor")
    return tuple(interceptors)


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """How a client connects, and what its connection accepts; C{ClientOptions()}
    is every client's default, C{dataclasses.replace(options, timeout=5)} a
    changed copy.

    Design: docs/design/options.md

    @ivar credentials: log in with these first (C{Password}, C{Token}, ...); C{None}: no login.
    @ivar timeout: seconds to connect, finish TLS, hear the preamble and log in, each (30; C{None}: for ever).
    @ivar limits: the L{Limits} of what the connection receives; C{None}: the defaults.
    @ivar registry: the L{Registry} of application types both sides send; C{None}: built-in types only.
    @ivar callLimits: the L{CallLimits}; C{None}: L{framing.rpc.CLIENT_CALL_LIMITS}.
    @ivar interceptors: L{protocols.rpc._interceptors.ICallInterceptor}s, in order, for every client.
    @ivar metadata: sent with every call (a C{callContext}'s own keys win).
    @ivar silenceTimeout: seconds a server may stay silent while calls wait (60; C{None}: no bound).
    @ivar tls: the clients without Twisted: an C{ssl.SSLContext}, C{True} (system CAs) or C{False}.
    @ivar policy: for a list of addresses: L{protocols.rpc.PICK_FIRST} or L{protocols.rpc.ROUND_ROBIN}.
    @ivar moveTimeout: seconds a call waits for a ready connection after a server drains, dies or is cut off (30).
    @ivar backoff: for a list of addresses, each address's L{framing.rpc.Backoff}; C{None}: the default.
    @ivar bulk: Twisted's clients: a L{protocols.bulk.BulkOptions}, the connection carries streams; C{None}: calls
        only.  The clients without Twisted refuse it (C{ValueError}): L{protocols.blockingbulk.connect} and
        L{protocols.asynciobulk.connect} carry streams.
    """

    credentials: Any = field(default=None, repr=False)
    timeout: float | None = DEFAULT_CONNECT_TIMEOUT
    limits: Limits | None = None
    registry: Registry | None = None
    callLimits: CallLimits | None = None
    interceptors: tuple[Any, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=lambda: _NO_METADATA)
    silenceTimeout: float | None = 60.0
    tls: ssl.SSLContext | bool = False
    policy: str = PICK_FIRST
    moveTimeout: float = 30.0
    backoff: Backoff | None = None
    bulk: ConnectionExtension | None = None

    def __post_init__(self) -> None:
        owner = "ClientOptions"
        checkSeconds(owner, "timeout", self.timeout)
        checkField(owner, "limits", self.limits, Limits)
        checkField(owner, "registry", self.registry, Registry)
        checkField(owner, "callLimits", self.callLimits, CallLimits)
        object.__setattr__(self, "interceptors", checkInterceptors(owner, self.interceptors))
        checkField(owner, "metadata", self.metadata, Mapping, optional=False)
        for key, value in self.metadata.items():
            if type(key) is not str or type(value) is not str:
                raise TypeError(f"{owner}.metadata maps str to str, not {key!r} to {value!r}")
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        checkSeconds(owner, "silenceTimeout", self.silenceTimeout)
        if not isinstance(self.tls, bool):  # (ssl loads to check a context given, not for True or False)
            checkField(owner, "tls", self.tls, (ssl.SSLContext, bool), optional=False)
        if self.policy not in POLICIES:
            raise ValueError(f"{owner}.policy must be one of {', '.join(POLICIES)}, not {self.policy!r}")
        checkSeconds(owner, "moveTimeout", self.moveTimeout, optional=False)
        checkField(owner, "backoff", self.backoff, Backoff)
        checkExtension(owner, "bulk", self.bulk)

    @property
    def callTimeout(self) -> float | None:
        """The C{callTimeout} of the C{callLimits}: seconds a call waits for its answer, or C{None}."""
        return None if self.callLimits is None else self.callLimits.callTimeout

    def session(
        self,
        peer: str,
        owner: Any,
        extension: SessionExtension | None,
        hooks: tuple[Callable[..., Any], Callable[[], None], Callable[..., Any], Callable[[SentStream], None] | None],
    ) -> ClientSession[Any]:
        """
        The L{framing.rpc._session.ClientSession} of a client without Twisted
        with these options: their C{limits}, C{registry} and C{callLimits}
        (without them the session's own defaults: no bound on the calls
        waiting, 10,000 references, 100 of the server's calls running).

        @param hooks: the connection's C{makeReference}, C{released} (also
            C{streamDropped}), C{makeStream} and C{streamSending} (C{None}:
            it sends no streams).
        """
        limits = self.callLimits
        maxPending, maxImports, maxRunning = (
            (None, DEFAULT_MAX_IMPORTS, DEFAULT_MAX_RUNNING)
            if limits is None
            else (
                limits.maxPending,
                limits.maxImports,
                limits.maxRunning,
            )
        )
        makeReference, released, makeStream, streamSending = hooks
        return ClientSession(
            peer,
            limits=self.limits,
            registry=self.registry,
            maxPending=maxPending,
            maxImports=maxImports,
            maxRunning=maxRunning,
            makeReference=makeReference,
            owner=owner,
            released=released,
            extension=extension,
            makeStream=makeStream,
            streamDropped=released,
            streamSending=streamSending,
        )

    def refuseBulk(self, way: str, bulkClient: str | None = None) -> None:
        """
        @raise ValueError: these options have C{bulk} (Twisted's clients' L{protocols.bulk.BulkOptions}), which
            C{way}, a client without Twisted, would not use; its error names C{bulkClient}, the connect of that
            client which carries streams (C{None}: C{way} is it, with its own settings).
        """
        if self.bulk is None:
            return
        if bulkClient is None:
            raise ValueError(
                f"{way} takes no ClientOptions.bulk (BulkOptions are Twisted's clients'): "
                "it carries streams with its own settings; leave bulk None"
            )
        raise ValueError(
            f"{way} takes no ClientOptions.bulk (BulkOptions are Twisted's clients'): "
            f"to carry streams without Twisted, use {bulkClient}, with bulk left None"
        )

    def refuseCredentials(self, way: str) -> None:
        """@raise ValueError: these options have C{credentials}, which C{way} (a C{connectURL}) does not take."""
        if self.credentials is not None:
            raise ValueError(f"{way} takes no ClientOptions.credentials: the URL's name is the login")


CLIENT_DEFAULTS = ClientOptions()
"""C{ClientOptions()}: the default of every C{connect}."""

__all__ = ["ClientOptions"]
