# -*- test-case-name: tests.protocols.serving.test_service,tests.protocols.serving.test_workers -*-
"""Listening services that drain on stop, and endpoints over inherited listening sockets.

Contract: a L{DrainingService} listens when started and, when stopped (by
C{twist} on SIGTERM or SIGINT, or by C{stopService}), stops accepting,
sends GOAWAY on each RPC connection and waits for the calls in flight up
to its grace time (L{protocols.rpc._drain}); its C{stopService} fires once
every connection is closed.  An L{AdoptedEndpoint} listens on a socket
that another process bound (a worker's share of its supervisor's port,
L{protocols.serving._workers}) with C{IReactorSocket.adoptStreamPort};
L{watchParent} makes a worker stop when its supervisor is gone.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.error import ReactorNotRunning
from twisted.internet.interfaces import IListeningPort, IStreamServerEndpoint
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from .._proxyheader import ProxiedEndpoint, TrustedProxies
from ..rpc._drain import DEFAULT_GRACE, drainPort

FAMILIES = {"inet": socket.AF_INET, "inet6": socket.AF_INET6, "unix": socket.AF_UNIX}
"""The address families a listening socket may be handed over in, by name."""


class DrainingService(Service):
    """
    Listens on one endpoint with one factory; drains when stopped.

    @ivar port: the listening port once listening, else C{None}.
    @ivar grace: seconds the calls in flight get when the service stops.
    """

    _log = Logger()

    def __init__(self, endpoint: Any, factory: Any, grace: float = DEFAULT_GRACE) -> None:
        self.endpoint = endpoint
        self.factory = factory
        self.grace = grace
        self.port: IListeningPort | None = None
        self._listening: Deferred[Any] | None = None

    def startService(self) -> None:
        super().startService()  # type: ignore[no-untyped-call]
        self._listening = self.endpoint.listen(self.factory)
        self._listening.addCallbacks(self._listened, self._listenFailed)

    def _listened(self, port: IListeningPort) -> IListeningPort:
        self.port = port
        return port

    def _listenFailed(self, failure: Failure) -> None:
        self._log.failure("Could not listen on {endpoint}", failure, endpoint=self.endpoint)

    def stopService(self) -> Deferred[None]:
        """Stop accepting, send GOAWAY on every connection, and fire once they are all closed."""
        super().stopService()  # type: ignore[no-untyped-call]
        listening, self._listening = self._listening, None
        if listening is None:
            return succeed(None)
        return listening.addCallback(self._drain)

    def _drain(self, port: IListeningPort | None) -> Deferred[None]:
        if port is None:
            return succeed(None)
        self.port = None
        return Deferred.fromCoroutine(drainPort(port, self.factory, self.grace))


@implementer(IStreamServerEndpoint)
class AdoptedEndpoint:
    """
    An endpoint over a listening socket this process inherited: C{listen}
    adopts it (the reactor works on a duplicate; the inherited descriptor
    is closed then).

    @ivar fileno: the inherited descriptor.
    @ivar family: its address family (C{socket.AF_INET}, C{AF_INET6}, C{AF_UNIX}).
    """

    def __init__(self, reactor: Any, fileno: int, family: int) -> None:
        self.reactor = reactor
        self.fileno = fileno
        self.family = family

    def listen(self, factory: Any) -> Deferred[IListeningPort]:
        port = self.reactor.adoptStreamPort(self.fileno, self.family, factory)
        os.close(self.fileno)
        return succeed(port)

    def __repr__(self) -> str:
        return f"<AdoptedEndpoint fd={self.fileno} family={self.family}>"


def adoptedEndpoint(reactor: Any, spec: str, trusted: TrustedProxies | None = None) -> Any:
    """
    The endpoint of one C{--adopt} argument, C{FD:FAMILY}, then
    optionally C{:haproxy} (PROXY protocol headers first, believed only
    from C{trusted} proxies, loopback if C{None}: L{protocols._proxyheader}),
    then optionally C{:chunkwire-tls:...}, the TLS description whose key,
    certificate and client CAs (L{protocols.auth._tlsendpoints}) this
    process serves TLS with over the socket, as a supervisor passes them
    to its workers.  Under C{haproxy:}, the header is read as a single
    process on C{haproxy:ssl:...} reads it (inside the TLS).

    @raise ValueError: a malformed C{spec}.
    @raise OSError: a TLS key or certificate file that cannot be read.
    """
    parts = spec.split(":", 2)
    if len(parts) < 2 or not parts[0].isdigit() or parts[1] not in FAMILIES:
        raise ValueError(f"--adopt takes FD:{'|'.join(FAMILIES)}[:haproxy][:chunkwire-tls:...], not {spec!r}")
    rest = parts[2] if len(parts) == 3 else ""
    proxied = rest == "haproxy" or rest.startswith("haproxy:")
    if proxied:
        rest = rest[len("haproxy:") :]
    endpoint: Any = AdoptedEndpoint(reactor, int(parts[0]), FAMILIES[parts[1]])
    if rest:
        from ..auth._tlsendpoints import PREFIX, TLSServerEndpoint, plainPart, serverTLSOptions

        if not rest.startswith(PREFIX + ":"):
            raise ValueError(f"--adopt takes FD:FAMILY[:haproxy][:chunkwire-tls:...], not {spec!r}")
        tls = plainPart(rest)[1]
        if "privateKey" not in tls:
            raise ValueError(f"--adopt {spec!r}: a TLS description needs privateKey=")
        options = serverTLSOptions(tls["privateKey"], tls.get("certKey"), tls.get("caCertsDir"))
        endpoint = TLSServerEndpoint(endpoint, options, reactor)
    if proxied:
        endpoint = ProxiedEndpoint(endpoint, trusted or TrustedProxies(), reactor)
    return endpoint


class _ParentWatch(Protocol):
    """Reads a worker's stdin, the supervisor's pipe: when it closes, the supervisor is gone."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    def dataReceived(self, data: bytes) -> None:
        pass

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        # The supervisor exited (even killed), or is stopping: stop, which drains, rather than serve on unsupervised.
        if self.reactor.running:
            try:
                self.reactor.stop()
            except ReactorNotRunning:
                pass  # (already stopping: a SIGTERM came first)


def watchParent(reactor: Any) -> Any:
    """
    In a worker: stop the reactor (so the services drain) once stdin, the
    pipe from the supervisor, closes: a worker never outlives its
    supervisor, even one that was killed.
    """
    from twisted.internet.stdio import StandardIO

    return StandardIO(_ParentWatch(reactor), reactor=reactor)  # type: ignore[no-untyped-call]
