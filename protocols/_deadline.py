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


@implementer(IConnectionObserver)
class _Attempt:
    """
    One connection attempt against its deadline: connecting, then waiting
    for the peer's preamble and the C{ready} step, in named steps.
    """

    def __init__(self, clock: Any, timeout: float, ready: Callable[[Any], Deferred[Any] | None] | None) -> None:
        self._timeout = timeout
        self._ready = ready
        # The steps not done yet: "connect", then "preamble" and "login".
        self._waiting: set[str] = {"connect"}
        self._connecting: Deferred[Any] | None = None
        self._connection: Any = None
        self._expired = False
        self._received = 0
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
        connection.addObserver(self)
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

    # -- IConnectionObserver: the peer's first bytes ---------------------------------

    def connectionStarted(self, protocol: Any) -> None:
        """(Added once the connection is up: nothing to start.)"""

    def dataArrived(self, length: int) -> None:
        """Count the peer's bytes until its whole preamble is in."""
        if "preamble" in self._waiting:
            self._received += length
            if self._received >= len(PREAMBLE):
                self._done("preamble")

    def dataDecoded(self, length: int, completed: int, controlBytes: int) -> None:
        """(Only arrival counts here.)"""

    def dataRead(self, length: int, completed: int, controlBytes: int) -> None:
        """A read decoded as it arrived: its arrival counts."""
        self.dataArrived(length)

    def sendBacklogChanged(self, backlogged: bool) -> None:
        """(Not this observer's business.)"""

    def connectionEnded(self, reason: Failure) -> None:
        """The connection is gone: nothing is left to wait for."""
        self._waiting.clear()
        self._stop()
        self._connection = None
