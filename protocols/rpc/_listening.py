# -*- test-case-name: tests.protocols.rpc.test_listening -*-
"""L{ListeningPort}: what C{serve} fires with, typed so that mypy checks its callers without a plugin.

Contract: C{rpc.serve} fires with a L{ServingPort} (streams or not): the
port Twisted's endpoint made, with the factory of brokers it serves, so
that L{ServingPort.drain} (stop accepting, GOAWAY, the calls in flight
finish) works however the endpoint wrapped that factory.
L{ListeningPort} is the part a caller uses, a C{typing.Protocol} (not the
zope C{IListeningPort}, which plain mypy cannot check); C{getHost} is
typed C{Any} (its address type depends on the description).

Design: docs/design/rpc-twisted.md
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet.defer import Deferred

from ._drain import DEFAULT_GRACE, drainPort

if TYPE_CHECKING:
    from ._broker import BrokerFactory


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
