# -*- test-case-name: tests.protocols.test_deadline,tests.examples.test_connecting,tests.test_docs_defaults -*-
"""A client connection's deadline: connected, the peer heard from, and logged in, within a time.

Contract: L{DeadlineEndpoint} wraps a client endpoint so that each
connection attempt has C{timeout} seconds, counted from the call to
C{connect}, for everything before the connection is of use: the TCP
connection, a TLS handshake, the peer's preamble and, when C{ready} names
one, a login.  An attempt still connecting then is cancelled and its
C{connect} fails with L{ConnectTimeout}; a connection made but not ready
then is dropped with L{ConnectTimeout} as its reason (and aborted at once:
a peer that said nothing is owed no wait), so whatever waits on it (the
login, the calls made on it) fails with that error.  Without a deadline a
server that accepts and says nothing would keep a client waiting for ever.
L{heard} is the wait for the peer's preamble alone (the failover client's
test of a connection being ready, and this deadline's).

Cost: one timer per attempt, cancelled as soon as the connection is ready,
and one addition per read until the peer's preamble is in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import ProtocolError
from framing.wire import PREAMBLE

from ._interfaces import IConnectionObserver


class ConnectTimeout(ProtocolError):
    """
    A connection was not made and ready (connected, the peer's preamble
    heard, logged in) within its client's C{timeout}; the message says which
    step was missing.
    """

    code = "connect-timeout"


@implementer(IStreamClientEndpoint)
class DeadlineEndpoint:
    """
    A client endpoint whose connections must be ready within C{timeout}
    seconds of each C{connect} (see the module docstring).

    @ivar endpoint: the wrapped C{IStreamClientEndpoint}.
    @ivar timeout: the seconds each attempt has.
    """

    def __init__(
        self,
        endpoint: Any,
        clock: Any,
        timeout: float,
        ready: Callable[[Any], Deferred[Any] | None] | None = None,
    ) -> None:
        """
        @param endpoint: the C{IStreamClientEndpoint} to connect with.
        @param clock: the C{IReactorTime} of the timers.
        @param timeout: seconds from C{connect} until the connection is ready.
        @param ready: called with the connected protocol: a L{Deferred}
            that fires (or fails) once the connection is ready beyond the
            peer's preamble (a login's), or C{None} when the preamble is enough.
        """
        self.endpoint = endpoint
        self.timeout = timeout
        self._clock = clock
        self._ready = ready

    def connect(self, factory: Any) -> Deferred[Any]:
        """Connect with C{factory}, as the wrapped endpoint does, within the deadline."""
        attempt = _Attempt(self._clock, self.timeout, self._ready)
        return attempt.start(self.endpoint, factory)


class _Attempt:
    """
    One connection attempt against its deadline: connecting, then waiting
    for the peer's preamble and the C{ready} step, in named steps.
    """

    def __init__(self, clock: Any, timeout: float, ready: Callable[[Any], Deferred[Any] | None] | None) -> None:
        self._timeout = timeout
        self._ready = ready
        self._clock = clock
        # The steps not done yet: "connect", then "preamble" and "login".
        self._waiting: set[str] = {"connect"}
        self._connecting: Deferred[Any] | None = None
        self._connection: Any = None
        self._expired = False
        self._timer: Any = clock.callLater(timeout, self._expire)

    def start(self, endpoint: Any, factory: Any) -> Deferred[Any]:
        connecting: Deferred[Any] = endpoint.connect(factory)
        if "connect" in self._waiting:
            self._connecting = connecting
        return connecting.addCallbacks(self._connected, self._notConnected)

    def _connected(self, protocol: Any) -> Any:
        self._connecting = None
        self._waiting.discard("connect")
        connection = getattr(protocol, "connection", protocol)
        if not hasattr(connection, "addObserver") or getattr(connection, "failure", None) is not None:
            # Not a chunkwire connection (nothing more to wait for), or already dropped.
            self._stop()
            return protocol
        self._connection = connection
        self._waiting.add("preamble")
        heard(connection, self._clock).addCallbacks(self._heard, self._ended)
        if self._ready is not None:
            ready = self._ready(protocol)
            if ready is not None:
                self._waiting.add("login")
                ready.addBoth(self._loggedIn)
        return protocol

    def _notConnected(self, failure: Failure) -> Failure:
        self._connecting = None
        if self._expired:
            # The endpoint reports our cancel (as ConnectingCancelledError or CancelledError): say why.
            return Failure(ConnectTimeout(self._message("connect")))  # type: ignore[no-untyped-call]
        self._stop()
        return failure

    def _loggedIn(self, result: object) -> object:
        self._done("login")
        return result

    def _done(self, step: str) -> None:
        self._waiting.discard(step)
        if not self._waiting:
            self._stop()

    def _stop(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def _expire(self) -> None:
        self._timer = None
        self._expired = True
        if self._connecting is not None:
            self._connecting.cancel()
            return
        connection = self._connection
        if connection is None or connection.failure is not None or connection.transport is None:
            return
        missing = "preamble" if "preamble" in self._waiting else "login"
        transport = connection.transport
        connection.dropConnection(ConnectTimeout(self._message(missing)), logged=False)
        transport.abortConnection()

    def _message(self, missing: str) -> str:
        # No endpoint in the message: it is also the ERROR sent to the server, which has no business
        # with the client's description (certificate paths and all).  Callers know where they connected.
        seconds = f"{self._timeout:g} s"
        if missing == "connect":
            return f"not connected within {seconds}"
        if missing == "preamble":
            return (
                f"connected, but the server said nothing within {seconds}"
                " (is it a chunkwire server? a TLS server reached without TLS, or the reverse?)"
            )
        return f"connected, but the login was not done within {seconds}"

    def _heard(self, _: object) -> None:
        self._done("preamble")

    def _ended(self, _: Failure) -> None:
        """The connection is gone before the preamble: nothing is left to wait for (its loss says why)."""
        self._waiting.clear()
        self._stop()
        self._connection = None


def heard(connection: Any, clock: Any) -> Deferred[None]:
    """
    Fires once C{connection} (a L{protocols.TokenProtocol}) has received
    the peer's whole preamble (at once if it has), or fails with the reason
    it ended first (a L{protocols._mismatch.ClosedBeforePreamble} for a
    server that closed without a word).  Cost: one observer until then,
    removed by a C{callLater(0)} on C{clock} (not while the connection
    walks its observers).
    """
    return _Heard(connection, clock).done


@implementer(IConnectionObserver)
class _Heard:
    """Counts a connection's arriving bytes until the peer's preamble is in (see L{heard})."""

    def __init__(self, connection: Any, clock: Any) -> None:
        self.done: Deferred[None] = Deferred()
        self._connection = connection
        self._clock = clock
        self._received = 0
        if not connection.decoder.nothing_received:
            self.done.callback(None)
        elif connection.failure is not None:
            self.done.errback(connection.failure)
        else:
            connection.addObserver(self)

    def _settle(self, reason: Failure | None) -> None:
        self._clock.callLater(0, self._connection.removeObserver, self)
        if reason is None:
            self.done.callback(None)
        else:
            self.done.errback(reason)

    def connectionStarted(self, protocol: Any) -> None:
        """(Added once the connection is up: nothing to start.)"""

    def dataArrived(self, length: int) -> None:
        """Count the peer's bytes: the preamble whole, the wait is over."""
        self._received += length
        if self._received >= len(PREAMBLE) and not self.done.called:
            self._settle(None)

    def dataDecoded(self, length: int, completed: int, controlBytes: int) -> None:
        """(Only arrival counts here.)"""

    def dataRead(self, length: int, completed: int, controlBytes: int) -> None:
        """A read decoded as it arrived: its arrival counts."""
        self.dataArrived(length)

    def sendBacklogChanged(self, backlogged: bool) -> None:
        """(Not this observer's business.)"""

    def connectionEnded(self, reason: Failure) -> None:
        """The connection ended before the preamble: the wait fails with why."""
        if not self.done.called:
            self._settle(reason)
