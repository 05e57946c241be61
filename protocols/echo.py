# -*- test-case-name: tests.protocols.test_echo,tests.protocols.test_tls,tests.protocols.test_trace -*-
"""The echo service and its client.

Contract: L{EchoServer} answers every object it receives with the same object,
in order, one write per answer.  An object it refuses is answered with an
L{EchoRefused} (open-type C{"echo.refused"}, registered in L{ECHO_REGISTRY})
carrying the reason, so answers stay in step with requests: L{EchoClient}
fails the matching L{EchoClient.echo} with it.  A client without that
registration sees one refused object (an unknown open-type) in its place and
also stays in step.  Answers are
matched to requests first-in first-out: O(1) per request whatever is in
flight.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.endpoints import clientFromString, serverFromString
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory
from twisted.python.failure import Failure

from framing import Limits, Registry, Violation
from framing.slicing._registry import DEFAULT_REGISTRY

from ._base import TokenProtocol
from ._deadline import DeadlineEndpoint
from .options import DEFAULT_CONNECT_TIMEOUT

__all__ = [
    "ECHO_REGISTRY",
    "EchoClient",
    "EchoFactory",
    "EchoRefused",
    "EchoServer",
    "connect",
    "serve",
    "serverFactory",
]

REFUSED_OPEN_TYPE = "echo.refused"
_MAX_REASON = 1024


class EchoRefused(Exception):
    """
    The echo server refused the object sent (too big for its limits, an
    unknown type, ...).  Travels as the open-type C{"echo.refused"}.

    @ivar reason: the server's description of the refusal.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return type(other) is EchoRefused and other.reason == self.reason

    def __hash__(self) -> int:
        return hash(self.reason)


def _refusalFromWire(reason: Any) -> EchoRefused:
    if not isinstance(reason, str):
        raise TypeError("an echo.refused object holds a reason string")
    return EchoRefused(reason)


ECHO_REGISTRY = Registry(DEFAULT_REGISTRY)
"""The built-in types plus L{EchoRefused}; both ends of the echo service use it."""
ECHO_REGISTRY.register(EchoRefused, REFUSED_OPEN_TYPE, lambda refused: refused.reason, _refusalFromWire)


class EchoServer(TokenProtocol):
    """Sends back every object it receives."""

    def objectReceived(self, obj: Any) -> None:
        self.sendObject(obj)

    registry = ECHO_REGISTRY

    def objectRefused(self, violation: Violation) -> None:
        TokenProtocol.objectRefused(self, violation)
        self.sendObject(EchoRefused(f"{violation.code}: {violation}"[:_MAX_REASON]))


class EchoClient(TokenProtocol):
    """
    Sends objects to an L{EchoServer} and gives back its answers.

    @ivar pending: the L{Deferred}s of requests not yet answered, oldest first.
    """

    registry = ECHO_REGISTRY
    # A client keeps reading whatever waits to be sent: see TokenProtocol.sendBackPressure.
    sendBackPressure = False

    def __init__(self, limits: Limits | None = None, registry: Registry | None = None) -> None:
        TokenProtocol.__init__(self, limits, registry)
        self.pending: deque[Deferred[Any]] = deque()

    def echo(self, obj: Any) -> Deferred[Any]:
        """
        Send C{obj}; the result is the server's answer (a copy of C{obj}).

        @return: a L{Deferred} firing with the answer, or failing with
            L{EchoRefused}, a L{Violation} (this side refused the answer), an
            L{framing.EncodingError} (C{obj} cannot be sent), or the reason
            the connection was lost.
        """
        # Queue the Deferred first: a synchronous transport may deliver the
        # answer before sendObject returns.
        d: Deferred[Any] = Deferred()
        self.pending.append(d)
        try:
            self.sendObject(obj)
        except Exception:
            self.pending.pop()
            return fail()
        return d

    def echoStream(self, chunks: Iterable[bytes]) -> Deferred[Any]:
        """Send C{chunks} as one streamed byte string; the answer is their concatenation."""
        d: Deferred[Any] = Deferred()
        self.pending.append(d)
        self.sendStream(chunks).addErrback(lambda _: None)  # the answer's Deferred reports failures
        return d

    def objectReceived(self, obj: Any) -> None:
        if not self.pending:
            self.log.warn("Unexpected answer from the echo server at {peer}; dropping it", peer=self.peerName())
            self.transport.loseConnection()
            return
        d = self.pending.popleft()
        if isinstance(obj, EchoRefused):
            d.errback(obj)
        else:
            d.callback(obj)

    def objectRefused(self, violation: Violation) -> None:
        if self.pending:
            self.pending.popleft().errback(violation)

    def stopReceiving(self, reason: Failure) -> None:
        # (the reason the connection ended: the ProtocolError that dropped it, if one did)
        pending, self.pending = self.pending, deque()
        for d in pending:
            d.errback(reason)


class EchoFactory(Factory):
    """Builds echo servers or clients with a callable, so that they can be given limits."""

    def __init__(self, build: Callable[[], TokenProtocol]) -> None:
        self._build = build

    def buildProtocol(self, addr: Any) -> TokenProtocol:
        protocol = self._build()
        protocol.factory = self
        return protocol


def serverFactory(limits: Limits | None = None) -> Factory:
    """A factory of L{EchoServer}s with C{limits}."""
    return EchoFactory(lambda: EchoServer(limits))


def serve(reactor: Any, description: str, limits: Limits | None = None) -> Deferred[IListeningPort]:
    """
    Listen on the endpoint C{description} (e.g. C{"tcp:8750"},
    C{"ssl:8751:privateKey=server.pem"}, C{"unix:/tmp/echo.sock"}).

    @return: a L{Deferred} firing with the listening port.
    """
    endpoint = serverFromString(reactor, description)  # type: ignore[no-untyped-call]
    port: Deferred[IListeningPort] = endpoint.listen(serverFactory(limits))
    return port


def connect(
    reactor: Any,
    description: str,
    limits: Limits | None = None,
    *,
    timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
) -> Deferred[EchoClient]:
    """
    Connect to an echo server at the endpoint C{description} (e.g.
    C{"tcp:host=127.0.0.1:port=8750"}).

    @param timeout: seconds to connect and hear the server's preamble, as
        for C{rpc.connect}: then the connection is dropped, and the echoes
        waiting on it fail with L{protocols.rpc.ConnectTimeout};
        C{None}: no deadline.
    @return: a L{Deferred} firing with the connected L{EchoClient}.
    """
    endpoint: Any = clientFromString(reactor, description)  # type: ignore[no-untyped-call]
    if timeout is not None:
        endpoint = DeadlineEndpoint(endpoint, reactor, timeout)
    client: Deferred[EchoClient] = endpoint.connect(EchoFactory(lambda: EchoClient(limits)))
    return client
