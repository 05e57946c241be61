"""protocols._deadline: a client connection is connected, hears the peer and logs in within its timeout, or fails."""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from framing.wire import PREAMBLE
from protocols import rpc
from protocols._deadline import ConnectTimeout, DeadlineEndpoint
from protocols.echo import EchoClient, EchoFactory

from .helpers import cancelDropTimers

SERVER = IPv4Address("TCP", "127.0.0.1", 8750)


class Attempt:
    """One connection attempt through a L{DeadlineEndpoint} on a fake reactor, and what became of it."""

    def __init__(self, timeout: float = 5.0, ready: Any = None) -> None:
        self.reactor = MemoryReactorClock()
        endpoint = TCP4ClientEndpoint(self.reactor, "127.0.0.1", 8750)
        deadline = DeadlineEndpoint(endpoint, self.reactor, timeout, ready)
        self.result: list[Any] = []
        self.connecting = deadline.connect(EchoFactory(EchoClient))
        self.connecting.addBoth(self.result.append)
        self.transport = StringTransport(peerAddress=SERVER)

    def accept(self) -> Any:
        """The server accepts: the attempt's protocol is connected to a StringTransport; return the protocol."""
        [(host, port, factory, timeout, bindAddress)] = self.reactor.tcpClients
        wrapper = factory.buildProtocol(SERVER)
        wrapper.makeConnection(self.transport)
        [protocol] = self.result
        return protocol

    def failure(self) -> BaseException:
        [outcome] = self.result
        assert isinstance(outcome, Failure), outcome
        value = outcome.value
        assert value is not None
        return value


class DeadlineTests(SynchronousTestCase):
    """A step missing at the deadline fails the attempt with ConnectTimeout naming it; none missing, nothing fails."""

    def setUp(self) -> None:
        self.addCleanup(cancelDropTimers)

    def test_notConnected(self) -> None:
        """A TCP connection not made in time is cancelled, and connect fails with ConnectTimeout."""
        attempt = Attempt(timeout=5.0)
        attempt.reactor.advance(4.9)
        self.assertEqual(attempt.result, [])
        attempt.reactor.advance(0.2)
        error = attempt.failure()
        self.assertIsInstance(error, ConnectTimeout)
        self.assertEqual(str(error), "not connected within 5 s")
        [connector] = attempt.reactor.connectors
        self.assertTrue(connector.stoppedConnecting)

    def test_silentPeer(self) -> None:
        """A peer that accepts and says nothing: dropped with ConnectTimeout (its ERROR names no endpoint), aborted."""
        attempt = Attempt(timeout=5.0)
        attempt.reactor.advance(1.0)
        protocol = attempt.accept()
        waiting = protocol.echo("anyone?")
        failures: list[Failure] = []
        waiting.addErrback(failures.append)
        attempt.reactor.advance(3.9)
        self.assertIsNone(protocol.failure)
        attempt.reactor.advance(0.2)
        self.assertIsInstance(protocol.failure.value, ConnectTimeout)
        self.assertIn("connected, but the server said nothing within 5 s", str(protocol.failure.value))
        self.assertTrue(attempt.transport.disconnecting)
        # The server is told why, and nothing of the client's endpoint.
        self.assertIn(b"said nothing", attempt.transport.value())
        self.assertNotIn(b"127.0.0.1", attempt.transport.value())
        protocol.connectionLost(Failure(Exception("aborted")))
        [failure] = failures
        self.assertIsInstance(failure.value, ConnectTimeout)

    def test_peerHeard(self) -> None:
        """The peer's whole preamble in time ends the deadline: the connection stays up after it."""
        attempt = Attempt(timeout=5.0)
        protocol = attempt.accept()
        protocol.dataReceived(PREAMBLE[:3])
        protocol.dataReceived(PREAMBLE[3:])
        attempt.reactor.advance(60)
        self.assertIsNone(protocol.failure)
        self.assertFalse(attempt.transport.disconnecting)
        self.assertEqual(attempt.reactor.getDelayedCalls(), [])

    def test_partialPreamble(self) -> None:
        """Part of a preamble is not enough: the connection is dropped at the deadline."""
        attempt = Attempt(timeout=5.0)
        protocol = attempt.accept()
        protocol.dataReceived(PREAMBLE[:3])
        attempt.reactor.advance(5.1)
        self.assertIsInstance(protocol.failure.value, ConnectTimeout)

    def test_loginNotDone(self) -> None:
        """With a ready step (a login) not done in time, the connection is dropped though the peer spoke."""
        login: Deferred[None] = Deferred()
        attempt = Attempt(timeout=5.0, ready=lambda protocol: login)
        protocol = attempt.accept()
        protocol.dataReceived(PREAMBLE)
        attempt.reactor.advance(5.1)
        self.assertIsInstance(protocol.failure.value, ConnectTimeout)
        self.assertIn("the login was not done within 5 s", str(protocol.failure.value))

    def test_loginDone(self) -> None:
        """A login done in time (after the preamble) ends the deadline."""
        login: Deferred[None] = Deferred()
        attempt = Attempt(timeout=5.0, ready=lambda protocol: login)
        protocol = attempt.accept()
        protocol.dataReceived(PREAMBLE)
        login.callback(None)
        attempt.reactor.advance(60)
        self.assertIsNone(protocol.failure)
        self.assertEqual(attempt.reactor.getDelayedCalls(), [])

    def test_refusedPassesThrough(self) -> None:
        """A connection that fails by itself fails with its own error, and the timer is gone."""
        attempt = Attempt(timeout=5.0)
        [(host, port, factory, timeout, bindAddress)] = attempt.reactor.tcpClients
        from twisted.internet.error import ConnectionRefusedError

        factory.clientConnectionFailed(None, Failure(ConnectionRefusedError()))
        self.assertIsInstance(attempt.failure(), ConnectionRefusedError)
        self.assertEqual(attempt.reactor.getDelayedCalls(), [])

    def test_exported(self) -> None:
        """The error is rpc.ConnectTimeout, a ProtocolError with its own code."""
        self.assertIs(rpc.ConnectTimeout, ConnectTimeout)
        self.assertEqual(ConnectTimeout.code, "connect-timeout")
