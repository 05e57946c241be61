"""Small protocols for the TLS tests of protocols.auth: a recording server, a client that says hello.

Contract: L{Recorder} keeps every byte its application side receives and
the peer certificate seen when the first byte arrived; L{Hello} sends one
greeting at C{connectionMade} (before the TLS handshake is done, so a
refused handshake shows that buffered bytes never leave) and keeps the
answer.  L{Proxy} is the application side of a TLS-terminating proxy: it
records what it decrypted and relays it to the real server.  Every
connection is closed and waited for, so trial finds a clean reactor.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, UNIXClientEndpoint, wrapClientTLS
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure

from protocols._coalescing import CoalescingTransport
from protocols.auth._certificates import PeerCertificate, peerCertificateOf

GREETING = b"hello, server"
ANSWER = b"hello, client"


class Recorder(Protocol):
    """
    A server protocol that records what its application side receives,
    answers the first byte with L{ANSWER}, and reads the peer certificate
    through a L{CoalescingTransport} wrapping its TLS transport.

    @ivar received: every byte received, joined.
    @ivar certificate: the peer certificate when the first byte arrived.
    @ivar lost: fires with the reason once the connection is gone.
    """

    def __init__(self) -> None:
        self.received = b""
        self.certificate: PeerCertificate | None = None
        self.lost: Deferred[Any] = Deferred()

    def dataReceived(self, data: bytes) -> None:
        if not self.received:
            self.certificate = peerCertificateOf(CoalescingTransport(self.transport))
            assert self.transport is not None
            self.transport.write(ANSWER)
        self.received += data

    def connectionLost(self, reason: Failure = Failure(Exception())) -> None:  # noqa: B008
        self.lost.callback(reason.value)


class RecorderFactory(Factory):
    """Builds L{Recorder}s and keeps them."""

    def __init__(self) -> None:
        self.built: list[Recorder] = []

    def buildProtocol(self, addr: Any) -> Recorder:
        protocol = Recorder()
        protocol.factory = self
        self.built.append(protocol)
        return protocol


class Hello(Protocol):
    """
    A client protocol that writes L{GREETING} at once and records the answer.

    @ivar answered: fires with the first data received.
    @ivar lost: fires with the reason once the connection is gone.
    """

    def __init__(self) -> None:
        self.answered: Deferred[bytes] = Deferred()
        self.lost: Deferred[Any] = Deferred()

    def connectionMade(self) -> None:
        assert self.transport is not None
        self.transport.write(GREETING)

    def dataReceived(self, data: bytes) -> None:
        if not self.answered.called:
            self.answered.callback(data)

    def connectionLost(self, reason: Failure = Failure(Exception())) -> None:  # noqa: B008
        self.lost.callback(reason.value)


class HelloFactory(Factory):
    """Builds one L{Hello} and keeps it."""

    protocol = Hello

    def buildProtocol(self, addr: Any) -> Hello:
        self.hello = Hello()
        self.hello.factory = self
        return self.hello


def shortDirectory() -> Path:
    """A new directory under the system's temporary directory, short enough for UNIX socket paths."""
    return Path(tempfile.mkdtemp(prefix="cw"))


def removeDirectory(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


async def hello(reactor: Any, endpoint: Any) -> Hello:
    """Connect to C{endpoint}, say hello, and return the client once the connection is made."""
    factory = HelloFactory()
    await endpoint.connect(factory)
    return factory.hello


def tlsTo(reactor: Any, options: Any, port: Any) -> Any:
    """A TLS client endpoint with C{options} to the listening C{port} (TCP or UNIX)."""
    address = port.getHost()
    if getattr(address, "name", None) is not None:
        return wrapClientTLS(options, UNIXClientEndpoint(reactor, address.name))
    return wrapClientTLS(options, TCP4ClientEndpoint(reactor, "127.0.0.1", address.port))


async def settle(*protocols: Any) -> None:
    """Close each protocol's connection if still open and wait until all are lost."""
    for protocol in protocols:
        if not protocol.lost.called and protocol.transport is not None:
            protocol.transport.loseConnection()
    for protocol in protocols:
        await protocol.lost


class Relay(Protocol):
    """One side of the proxy's upstream connection: passes what it receives to C{downstream}."""

    def __init__(self, downstream: Proxy) -> None:
        self.downstream = downstream
        self.lost: Deferred[Any] = Deferred()

    def dataReceived(self, data: bytes) -> None:
        assert self.downstream.transport is not None
        self.downstream.transport.write(data)

    def connectionLost(self, reason: Failure = Failure(Exception())) -> None:  # noqa: B008
        if self.downstream.transport is not None:
            self.downstream.transport.loseConnection()
        self.lost.callback(reason.value)


class Proxy(Protocol):
    """
    The application side of a TLS-terminating proxy: it records what it
    decrypted and forwards it to the real server (over TLS pinned to the
    real server's key).

    @ivar received: every byte the proxy's TLS layer handed up.
    """

    def __init__(self, upstream: Any) -> None:
        self.upstreamEndpoint = upstream
        self.received = b""
        self.relay: Relay | None = None
        self.waiting: list[bytes] = []
        self.lost: Deferred[Any] = Deferred()
        self.upstreamMade: Deferred[Any] = Deferred()

    def connectionMade(self) -> None:
        def made(relay: Relay) -> None:
            self.relay = relay
            assert relay.transport is not None
            relay.transport.write(b"".join(self.waiting))
            self.upstreamMade.callback(relay)

        factory = Factory.forProtocol(lambda: Relay(self))
        self.upstreamEndpoint.connect(factory).addCallback(made)

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        if self.relay is None:
            self.waiting.append(data)
        else:
            assert self.relay.transport is not None
            self.relay.transport.write(data)

    def connectionLost(self, reason: Failure = Failure(Exception())) -> None:  # noqa: B008
        def closeRelay(relay: Relay) -> Relay:
            assert relay.transport is not None
            relay.transport.loseConnection()
            return relay

        self.upstreamMade.addCallback(closeRelay)
        self.lost.callback(reason.value)
