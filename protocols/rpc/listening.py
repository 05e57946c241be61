"""L{ListeningPort}: what C{serve} fires with, typed so that mypy checks its callers without a plugin.

Contract: C{rpc.serve} and C{bulk.serve} fire with a L{ServingPort}: the
port Twisted's endpoint made (a C{twisted.internet.tcp.Port} for C{tcp:},
C{ssl:} and C{chunkwire-tls:}, its subclass for C{unix:}) with the factory
of brokers it serves, so that the server drains (L{ServingPort.drain}:
stop accepting, GOAWAY on every connection, the calls in flight finish)
however the endpoint wrapped that factory (TLS and PROXY-header endpoints
listen with a wrapper, which is what the Twisted port's own C{factory}
is).  L{ListeningPort} names the part of it a caller uses; every other
attribute is the Twisted port's.

Why not C{IListeningPort}: it is a zope interface, whose methods mypy sees
as attributes without C{self} unless the mypy-zope plugin is installed, so
C{port.getHost()} and C{port.stopListening()} were errors in code checked
with plain C{mypy --strict}.  A C{typing.Protocol} is checked by any type
checker.  C{getHost} is typed C{Any} because which address it is depends
on the description, a string read at run time: an C{IPv4Address} or
C{IPv6Address} (C{.host}, C{.port}) for the TCP-based ones, a
C{UNIXAddress} (C{.name}) for C{unix:}.  C{stopListening} is typed as what
a listening port's returns, a L{Deferred} that fires once the socket is
closed (Twisted's interface also allows C{None}, which its ports return
only when called again after they stopped).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet.defer import Deferred

from .drain import DEFAULT_GRACE, drainPort

if TYPE_CHECKING:
    from .broker import BrokerFactory

__all__ = ["ListeningPort", "ServingPort"]


class ListeningPort(Protocol):
    """A listening port, as C{serve} gives it: where it listens, and how to stop."""

    def getHost(self) -> Any:
        """The address listened on: C{getHost().port} is the port number of a TCP-based description."""

    def stopListening(self) -> Deferred[None]:
        """Stop accepting connections; fires once the socket is closed (connections made stay up)."""

    @property
    def factory(self) -> BrokerFactory:
        """The factory of the brokers served: its C{brokers} are the connections, its C{disconnectAll()} closes them."""

    def drain(self, grace: float = DEFAULT_GRACE) -> Deferred[None]:
        """
        Stop accepting, send GOAWAY on every connection, and fire once they
        are all closed: the calls in flight get C{grace} seconds
        (L{protocols.rpc.drainPort}).  Made to be a shutdown trigger:
        C{reactor.addSystemEventTrigger("before", "shutdown", port.drain)}
        drains on SIGTERM and Ctrl-C.
        """


class ServingPort:
    """
    A listening port as C{serve} gives it (a L{ListeningPort}): Twisted's
    C{port}, and the C{factory} of brokers it serves.  Costs nothing per
    connection; attributes other than these are C{port}'s.
    """

    def __init__(self, port: Any, factory: BrokerFactory) -> None:
        self.port = port
        self.factory = factory

    def getHost(self) -> Any:
        """The address listened on (the Twisted port's)."""
        return self.port.getHost()

    def stopListening(self) -> Deferred[None]:
        """Stop accepting connections; fires once the socket is closed (connections made stay up)."""
        stopped: Deferred[None] = self.port.stopListening()
        return stopped

    def drain(self, grace: float = DEFAULT_GRACE) -> Deferred[None]:
        """L{ListeningPort.drain}."""
        return Deferred.fromCoroutine(drainPort(self.port, self.factory, grace))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.port, name)

    def __repr__(self) -> str:
        return f"<ServingPort {self.port!r}>"
