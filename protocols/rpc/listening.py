"""L{ListeningPort}: what C{serve} fires with, typed so that mypy checks its callers without a plugin.

Contract: this module declares a type and nothing runs here.  C{rpc.serve}
and C{bulk.serve} fire with the port Twisted's endpoint made (a
C{twisted.internet.tcp.Port} for C{tcp:}, C{ssl:} and C{chunkwire-tls:},
its subclass for C{unix:}); L{ListeningPort} names the part of it a
caller uses.

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

from typing import Any, Protocol

from twisted.internet.defer import Deferred

__all__ = ["ListeningPort"]


class ListeningPort(Protocol):
    """A listening port, as C{serve} gives it: where it listens, and how to stop."""

    def getHost(self) -> Any:
        """The address listened on: C{getHost().port} is the port number of a TCP-based description."""

    def stopListening(self) -> Deferred[None]:
        """Stop accepting connections; fires once the socket is closed (connections made stay up)."""
