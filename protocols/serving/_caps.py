# -*- test-case-name: tests.protocols.serving.test_caps -*-
"""A side listener's own connection cap and lifetime (for C{/metrics}), and the descriptors they need.

Contract: a L{CappedFactory} wraps the factory of a listener that speaks
something other than chunkwire (the C{/metrics} page, plain HTTP) so that
at most C{caps.maxConnections} of its connections are up at once (one
more is closed as soon as it is accepted: its descriptor is back at once,
and the refusals are logged as a count, not a line each) and each
connection lives at most C{caps.lifetime} seconds (then it is aborted,
whatever it was doing: a scrape takes milliseconds, a half-sent request
is an attack).  The cap is this listener's alone: what it refuses counts
against nothing else, and L{reserveDescriptors} raises the process's
descriptor limit so that the chunkwire listeners' caps and every side
listener's fit in it together, so that filling one never starves the other.

Cost: one counter and one timer per connection.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import Any

from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure

DESCRIPTOR_HEADROOM = 64
"""Descriptors a process needs besides its connections: stdio, logs, the reactor, listening sockets, files."""


@dataclass(frozen=True)
class ListenerCaps:
    """
    The bounds of a side listener.

    @ivar maxConnections: most connections up at once.  16: Prometheus
        scrapes from one or two servers, one connection each.
    @ivar lifetime: seconds a connection may live.  10 s: Prometheus's own
        default scrape timeout.
    """

    maxConnections: int = 16
    lifetime: float = 10.0


class _Capped(ProtocolWrapper):
    """One connection of a L{CappedFactory}: aborted when its lifetime is over."""

    factory: CappedFactory

    def connectionMade(self) -> None:
        self._expiry = self.factory.clock.callLater(self.factory.caps.lifetime, self._expired)
        super().connectionMade()  # type: ignore[no-untyped-call]

    def _expired(self) -> None:
        if self.transport is not None:
            self.transport.abortConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        expiry = getattr(self, "_expiry", None)
        if expiry is not None and expiry.active():
            expiry.cancel()
        super().connectionLost(reason)  # type: ignore[no-untyped-call]


class CappedFactory(WrappingFactory):
    """
    Wraps a factory so that its listener has its own connection cap and lifetime.

    @ivar caps: the L{ListenerCaps}.
    @ivar refused: connections closed at once for being over the cap.
    """

    protocol = _Capped
    _log = Logger()

    def __init__(self, factory: Any, caps: ListenerCaps | None = None, clock: Any = None) -> None:
        super().__init__(factory)  # type: ignore[no-untyped-call]
        if clock is None:
            from twisted.internet import reactor

            clock = reactor
        self.caps = caps or ListenerCaps()
        self.clock = clock
        self.refused = 0
        self._loggedAt = 0

    def logPrefix(self) -> str:
        """The wrapped factory's: the log says what serves (C{Site starting on ...}), not how it is capped."""
        prefix = getattr(self.wrappedFactory, "logPrefix", None)
        return str(prefix()) if prefix is not None else self.wrappedFactory.__class__.__name__

    @property
    def active(self) -> int:
        """How many connections are up now."""
        return len(self.protocols)

    def buildProtocol(self, addr: Any) -> Any:
        if len(self.protocols) >= self.caps.maxConnections:
            # None: the reactor closes the accepted socket at once.
            self.refused += 1
            if self.refused >= 2 * self._loggedAt:
                self._loggedAt = self.refused
                self._log.warn(
                    "{factory}: {refused} connections refused so far, {limit} were up",
                    factory=self.wrappedFactory.__class__.__name__,
                    refused=self.refused,
                    limit=self.caps.maxConnections,
                )
            return None
        return super().buildProtocol(addr)


def reserveDescriptors(needed: int) -> int:
    """
    Raise this process's soft limit of open descriptors to at least
    C{needed} plus L{DESCRIPTOR_HEADROOM}, as far as the hard limit allows;
    return the soft limit now (below what was asked when the hard limit is
    lower: the caller should say so).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = needed + DESCRIPTOR_HEADROOM
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if target > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    return int(soft)
