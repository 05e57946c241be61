"""Tests for protocols.echo over real sockets (TCP, TLS, UNIX) and in memory.

Each reactor test is one C{async def} body run twice: as a trial C{TestCase}
method and as a pytest-twisted function (see C{helpers.py} and
C{tests/conftest.py}).
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from typing import Any
from unittest import SkipTest

from OpenSSL import SSL
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol, serverFromString
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.logger import Logger, formatEvent
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import Decoder, Limits, Violation
from framing._errors import PeerError
from protocols.echo import EchoClient, EchoRefused, EchoServer, connect, serverFactory
from protocols.testing import (
    SelfSignedCertificate,
    TrackingFactory,
    connectedPair,
    loopbackTCP,
    messagesPerWrite,
    recordSends,
    recordWrites,
    tlsRecords,
    whenLost,
)

from .helpers import EVERY_TYPE, pytestTest, same, trialTest

# -- bodies ------------------------------------------------------------------------


async def echoAll(client: EchoClient) -> None:
    """Echo every sample one at a time, then all at once, then as a stream; check each answer."""
    for value in EVERY_TYPE:
        answer = await client.echo(value)
        assert same(value, answer), f"{value!r:.80} came back as {answer!r:.80}"
    answers = await gatherResults([client.echo(value) for value in EVERY_TYPE])
    assert all(same(value, answer) for value, answer in zip(EVERY_TYPE, answers, strict=True))
    chunks = [bytes([i]) * 20_000 for i in range(10)]
    assert await client.echoStream(chunks) == b"".join(chunks)


async def everyTypeOverTCP(reactor: Any) -> None:
    """The echo service returns an exact copy of every built-in type over loopback TCP."""
    pair = await loopbackTCP(reactor, EchoServer(), EchoClient())
    try:
        await echoAll(pair.client)
    finally:
        await pair.close()


async def everyTypeOverIPv6(reactor: Any) -> None:
    """The echo service works over the IPv6 loopback interface too."""
    if not socket.has_ipv6:
        raise SkipTest("no IPv6")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        raise SkipTest("no IPv6 loopback interface")
    pair = await loopbackTCP(reactor, EchoServer(), EchoClient(), interface="::1")
    try:
        assert await pair.client.echo({"v6": [1, b"2", "3"]}) == {"v6": [1, b"2", "3"]}
    finally:
        await pair.close()


async def writeCountsOverTCP(reactor: Any) -> None:
    """On real TCP a message is one write, with or without a body, and a stream of N chunks is N+1 writes."""
    pair = await loopbackTCP(reactor, EchoServer(), EchoClient())
    try:
        assert pair.client.transport.getTcpNoDelay() and pair.server.transport.getTcpNoDelay()
        client = recordWrites(pair.client.transport.transport)
        server = recordWrites(pair.server.transport.transport)
        await pair.client.echo(("small", 1))
        assert (len(client), len(server)) == (1, 1), (client, server)
        body = {"id": 2, "body": b"\xab" * (1 << 20)}
        assert await pair.client.echo(body) == body
        assert (len(client), len(server)) == (2, 2), (len(client), len(server))
        chunks = [b"c" * 50_000] * 5
        assert await pair.client.echoStream(chunks) == b"".join(chunks)
        assert (len(client), len(server)) == (2 + 6, 3), (len(client), len(server))
    finally:
        await pair.close()


async def sendsOverTCP(reactor: Any) -> None:
    """
    On real TCP a small message is one send system call each way; a batch
    of requests that arrive in one read is answered in fewer sends, each
    carrying whole messages.
    """
    pair = await loopbackTCP(reactor, EchoServer(), EchoClient())
    try:
        assert await pair.client.echo("warm") == "warm"
        client = recordSends(pair.client.transport.transport)
        server = recordSends(pair.server.transport.transport)
        for i in range(10):
            assert await pair.client.echo(("small", i)) == ("small", i)
        assert messagesPerWrite(client, preamble=False) == [1] * 10
        assert messagesPerWrite(server, preamble=False) == [1] * 10
        # Sent from the callback of an answer, so inside one read: one send.
        del client[:], server[:]
        assert await gatherResults([pair.client.echo(i) for i in range(100)]) == list(range(100))
        assert messagesPerWrite(client, preamble=False) == [100]
        # Sent from a timer, outside any read: one send each.
        await deferLater(reactor, 0, lambda: None)
        del client[:], server[:]
        assert await gatherResults([pair.client.echo(i) for i in range(100)]) == list(range(100))
        assert messagesPerWrite(client, preamble=False) == [1] * 100
        answered = messagesPerWrite(server, preamble=False)
        assert sum(answered) == 100 and 0 not in answered, answered
    finally:
        await pair.close()


async def pipelined(reactor: Any) -> None:
    """A hundred requests in flight on one connection are all answered, in order."""
    pair = await loopbackTCP(reactor, EchoServer(), EchoClient())
    try:
        for _ in range(5):
            answers = await gatherResults([pair.client.echo([i, str(i)]) for i in range(100)])
            assert answers == [[i, str(i)] for i in range(100)]
    finally:
        await pair.close()


async def overTLS(reactor: Any) -> None:
    """Over ssl: endpoints with a test-made certificate every type round-trips, and a small message is one record."""
    directory = tempfile.mkdtemp(prefix="chunkwire-tls-")
    certificate = SelfSignedCertificate.generate().writeTo(directory)
    factory = TrackingFactory(serverFactory())
    port = await serverFromString(reactor, certificate.serverEndpoint(0)).listen(factory)
    client = await connect(reactor, certificate.clientEndpoint(port.getHost().port))
    try:
        client_lost = whenLost(client)
        await echoAll(client)
        tcp = client.transport.transport.transport  # coalescing -> TLS -> TCP
        sent = recordWrites(tcp)
        assert await client.echo({"small": True}) == {"small": True}
        records = [record for record in tlsRecords(b"".join(sent)) if record[0] == 23]
        assert len(records) == 1, records
    finally:
        client.transport.loseConnection()
        await client_lost
        await factory.closeAll()
        await port.stopListening()
        shutil.rmtree(directory)


async def overUNIX(reactor: Any) -> None:
    """Over a UNIX socket (unix: endpoints) every type round-trips."""
    directory = tempfile.mkdtemp(prefix="cw-")
    path = f"{directory}/echo.sock"
    factory = TrackingFactory(serverFactory())
    port = await serverFromString(reactor, f"unix:{path}").listen(factory)
    client = await connect(reactor, f"unix:path={path}")
    client_lost = whenLost(client)
    try:
        assert not client.transport.noDelay
        await echoAll(client)
    finally:
        client.transport.loseConnection()
        await client_lost
        await factory.closeAll()
        await port.stopListening()
        shutil.rmtree(directory)


class Raw(Protocol):
    """A client that sends some bytes on connect and keeps what comes back."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.received = b""

    def connectionMade(self) -> None:
        if self.payload:
            self.transport.write(self.payload)

    def dataReceived(self, data: bytes) -> None:
        self.received += data


def tlsClientHello() -> bytes:
    """
    The first flight of a real TLS client, made in memory: sent raw, it
    arrives whole before the client could react to the server's preamble
    (a live TLS client may see the preamble first and give up unsent).
    """
    connection = SSL.Connection(SSL.Context(SSL.TLS_CLIENT_METHOD), None)
    connection.set_connect_state()
    try:
        connection.do_handshake()
    except SSL.WantReadError:
        pass
    hello: bytes = connection.bio_read(65536)
    return hello


async def foreignPeersDropped(reactor: Any) -> None:
    """Garbage, an HTTP request and a TLS hello on a plain port are dropped with a logged reason; others go on."""
    events: list[dict[str, Any]] = []

    class LoggedEchoServer(EchoServer):
        log = Logger(observer=events.append)

    factory = TrackingFactory(Factory.forProtocol(LoggedEchoServer))
    port = await serverFromString(reactor, "tcp:0:interface=127.0.0.1").listen(factory)
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port)
    good = await connectProtocol(endpoint, EchoClient())
    good_lost = whenLost(good)
    try:
        assert await good.echo("before") == "before"
        intruders = [
            Raw(b"\x00\x07garbage\xff\xfe"),
            Raw(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
            Raw(tlsClientHello()),
        ]
        for intruder in intruders:
            lost = whenLost(intruder)
            await connectProtocol(endpoint, intruder)
            await lost
        messages = [formatEvent(event) for event in events]
        assert len(messages) == 3, messages
        for message, expected in zip(
            messages, ["unrecognised binary data", "an HTTP request", "a TLS handshake"], strict=True
        ):
            assert "Dropping connection from" in message and "bad-preamble" in message and expected in message, message
        for intruder in intruders:
            try:
                Decoder().feed(intruder.received)
            except PeerError as error:
                assert "not a chunkwire stream" in str(error)
            else:
                raise AssertionError(f"no ERROR token in {intruder.received!r}")
        assert await good.echo("after") == "after"
        late = await connectProtocol(endpoint, EchoClient())
        late_lost = whenLost(late)
        assert await late.echo(["late", 1]) == ["late", 1]
        late.transport.loseConnection()
        await late_lost
    finally:
        good.transport.loseConnection()
        await good_lost
        await factory.closeAll()
        await port.stopListening()


# -- trial ---------------------------------------------------------------------------


class EchoOverSocketsTests(TestCase):
    """The echo service over real sockets (trial runs these; pytest runs the twins below)."""

    timeout = 30
    test_every_type_over_tcp = trialTest(everyTypeOverTCP)
    test_every_type_over_ipv6 = trialTest(everyTypeOverIPv6)
    test_write_counts_over_tcp = trialTest(writeCountsOverTCP)
    test_sends_over_tcp = trialTest(sendsOverTCP)
    test_pipelined = trialTest(pipelined)
    test_over_tls = trialTest(overTLS)
    test_over_unix = trialTest(overUNIX)
    test_foreign_peers_dropped = trialTest(foreignPeersDropped)


# -- pytest-twisted ------------------------------------------------------------------

test_every_type_over_tcp = pytestTest(everyTypeOverTCP)
test_every_type_over_ipv6 = pytestTest(everyTypeOverIPv6)
test_write_counts_over_tcp = pytestTest(writeCountsOverTCP)
test_sends_over_tcp = pytestTest(sendsOverTCP)
test_pipelined = pytestTest(pipelined)
test_over_tls = pytestTest(overTLS)
test_over_unix = pytestTest(overUNIX)
test_foreign_peers_dropped = pytestTest(foreignPeersDropped)


# -- in memory -------------------------------------------------------------------------


class EchoInMemoryTests(SynchronousTestCase):
    """The echo pair's behaviour that needs no sockets."""

    def test_refusedObjectFailsItsRequestOnly(self) -> None:
        """An object the server refuses fails that request with EchoRefused; the requests around it succeed."""
        pair = connectedPair(EchoServer(Limits(max_bytes_length=100)), EchoClient())
        pair.server.log = Logger(observer=lambda event: None)
        answers = [pair.client.echo(1), pair.client.echo([b"x" * 101]), pair.client.echo(3)]
        pair.flush()
        self.assertEqual(self.successResultOf(answers[0]), 1)
        refused = self.failureResultOf(answers[1], EchoRefused)
        self.assertIn("body-too-large", refused.value.reason)
        self.assertEqual(self.successResultOf(answers[2]), 3)

    def test_refusalSeenByPlainClient(self) -> None:
        """A client without the echo registry sees a refusal as one refused object and stays in step."""
        seen: list[Any] = []

        class Plain(EchoClient):
            def objectRefused(self, violation: Violation) -> None:
                seen.append(violation)
                super().objectRefused(violation)

        pair = connectedPair(EchoServer(Limits(max_string_length=3)), Plain(registry=Decoder().registry))
        pair.server.log = Logger(observer=lambda event: None)
        answers = [pair.client.echo("long string"), pair.client.echo("ok")]
        pair.flush()
        self.failureResultOf(answers[0], Violation)
        self.assertEqual(self.successResultOf(answers[1]), "ok")
        self.assertEqual([v.code for v in seen], ["unknown-type"])

    def test_lostConnectionFailsPending(self) -> None:
        """Requests still unanswered when the connection is lost fail with the reason."""
        pair = connectedPair(EchoServer(), EchoClient())
        answer = pair.client.echo(1)
        pair.clientTransport.abortConnection()
        pair.flush()
        self.assertIsInstance(self.failureResultOf(answer), Failure)

    def test_unencodableFailsAtOnce(self) -> None:
        """An object that cannot be sent fails its request at once and sends nothing."""
        pair = connectedPair(EchoServer(), EchoClient())
        before = len(pair.clientTransport.writes)
        self.failureResultOf(pair.client.echo(object()), TypeError)
        self.assertEqual(len(pair.clientTransport.writes), before)
        self.assertEqual(pair.client.pending, type(pair.client.pending)())

    def test_unexpectedAnswerDropsConnection(self) -> None:
        """An answer nobody asked for is logged and the client hangs up."""
        events: list[Any] = []
        pair = connectedPair(EchoServer(), EchoClient())
        pair.client.log = Logger(observer=events.append)
        pair.server.sendObject("unsolicited")
        pair.flush()
        self.assertTrue(pair.clientTransport.disconnected)
        self.assertIn("Unexpected answer", formatEvent(events[0]))

    def test_pendingDeferred(self) -> None:
        """An unanswered request's Deferred has no result until the answer is pumped."""
        pair = connectedPair(EchoServer(), EchoClient())
        answer: Deferred[Any] = pair.client.echo("x")
        self.assertNoResult(answer)
        pair.flush()
        self.assertEqual(self.successResultOf(answer), "x")
