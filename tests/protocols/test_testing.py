"""Tests for protocols.testing, including the two example tests its docstring shows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from typing import Protocol as TypingProtocol

import pytest_twisted
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionAborted, ConnectionDone, ConnectionLost
from twisted.internet.protocol import Protocol, connectionDone
from twisted.internet.ssl import Certificate
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing.wire import PREAMBLE
from protocols import bulk, rpc
from protocols.echo import EchoClient, EchoServer
from protocols.testing import (
    RecordingTransport,
    SelfSignedCertificate,
    brokerPair,
    connectedPair,
    loopbackTCP,
    recordWrites,
    tlsRecords,
)

from .helpers import pytestTest, trialTest

# -- the docstring's examples, verbatim ----------------------------------------------


class EchoTests(SynchronousTestCase):
    def test_echo(self) -> None:
        """The echo server answers a request with the same object."""
        pair = connectedPair(EchoServer(), EchoClient())
        answer = pair.client.echo({"id": 7, "tags": ("a", "b")})
        pair.flush()
        self.assertEqual(self.successResultOf(answer), {"id": 7, "tags": ("a", "b")})
        self.assertEqual(len(pair.clientTransport.writes), 2)  # preamble, request


@pytest_twisted.ensureDeferred
async def test_echo_over_tcp() -> None:
    """The echo server answers over a real TCP connection."""
    from twisted.internet import reactor

    pair = await loopbackTCP(reactor, EchoServer(), EchoClient())
    try:
        assert await pair.client.echo([1, 2.5, b"x"]) == [1, 2.5, b"x"]
    finally:
        await pair.close()


# -- the helpers themselves -------------------------------------------------------------


class Collector(Protocol):
    """Keeps every chunk it is given, and the reason its connection ended."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.reasons: list[Failure] = []

    def dataReceived(self, data: bytes) -> None:
        self.chunks.append(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.reasons.append(reason)


class MemoryPairTests(SynchronousTestCase):
    """connectedPair moves bytes only when pumped, keeps write boundaries, and closes like TCP."""

    def test_nothingMovesUntilPumped(self) -> None:
        """Writes wait until pump() or flush()."""
        server, client = Collector(), Collector()
        pair = connectedPair(server, client)
        client.transport.write(b"hello")
        self.assertEqual(server.chunks, [])
        self.assertTrue(pair.pump())
        self.assertEqual(server.chunks, [b"hello"])
        self.assertFalse(pair.pump())

    def test_writeBoundariesKept(self) -> None:
        """Each write is delivered as its own chunk, and the transport records each call."""
        server, client = Collector(), Collector()
        pair = connectedPair(server, client)
        client.transport.write(b"a")
        client.transport.writeSequence([b"b", b"c"])
        pair.flush()
        self.assertEqual(server.chunks, [b"a", b"bc"])
        self.assertEqual(pair.clientTransport.writes, [b"a", b"bc"])

    def test_maxChunkSplits(self) -> None:
        """maxChunk splits deliveries into pieces no larger than it."""
        server, client = Collector(), Collector()
        pair = connectedPair(server, client, maxChunk=2)
        client.transport.write(b"abcde")
        pair.flush()
        self.assertEqual(server.chunks, [b"ab", b"cd", b"e"])

    def test_pausedReaderGetsNothing(self) -> None:
        """A side whose transport is paused receives nothing until resumed."""
        server, client = Collector(), Collector()
        pair = connectedPair(server, client)
        server.transport.pauseProducing()
        client.transport.write(b"x")
        pair.flush()
        self.assertEqual(server.chunks, [])
        server.transport.resumeProducing()
        pair.flush()
        self.assertEqual(server.chunks, [b"x"])

    def test_cleanClose(self) -> None:
        """loseConnection delivers what was written, then both sides see ConnectionDone."""
        server, client = Collector(), Collector()
        pair = connectedPair(server, client)
        client.transport.write(b"last")
        client.transport.loseConnection()
        pair.flush()
        self.assertEqual(server.chunks, [b"last"])
        server.reasons[0].trap(ConnectionDone)
        client.reasons[0].trap(ConnectionDone)

    def test_abort(self) -> None:
        """abortConnection drops what was queued: ConnectionAborted here, ConnectionLost at the peer."""
        server, client = Collector(), Collector()
        pair = connectedPair(server, client)
        client.transport.write(b"dropped")
        client.transport.abortConnection()
        pair.flush()
        self.assertEqual(server.chunks, [])
        client.reasons[0].trap(ConnectionAborted)
        server.reasons[0].trap(ConnectionLost)

    def test_tooBusy(self) -> None:
        """flush() gives up, loudly, on protocols that never stop talking."""

        class Chatty(Collector):
            def dataReceived(self, data: bytes) -> None:
                self.transport.write(data)

        pair = connectedPair(Chatty(), Chatty())
        pair.client.transport.write(b"ping")
        self.assertRaises(RuntimeError, pair.flush, 50)


class Counter(rpc.Referenceable):
    """A service whose calls show where they ran: it counts them, and calls back the caller's root."""

    def __init__(self) -> None:
        self.calls = 0
        self.received: list[bytes] = []

    @rpc.remote
    def increment(self) -> int:
        self.calls += 1
        return self.calls

    @rpc.remote
    async def upload(self, stream: bulk.IncomingStream) -> int:
        result = await stream.receive(self.received.append)
        return result.size

    @rpc.remote
    async def askBack(self) -> str:
        caller = rpc.currentBroker()
        assert caller is not None
        answer: str = await caller.rootReference().callRemote("never")
        return answer


class Silent(rpc.Referenceable):
    """A client's root whose one method never answers."""

    @rpc.remote
    def never(self) -> Deferred[str]:
        return Deferred()


class BrokerPairTests(SynchronousTestCase):
    """brokerPair serves a root to a client in memory, as serve and connect would over a socket."""

    def test_callAnsweredOnFlush(self) -> None:
        """A call is delivered and answered by flush(), and not before."""
        service = Counter()
        pair = brokerPair(service)
        answer = pair.root.callRemote("increment")
        self.assertNoResult(answer)
        self.assertEqual(service.calls, 0)
        pair.flush()
        self.assertEqual(self.successResultOf(answer), 1)
        self.assertEqual(service.calls, 1)

    def test_serverCallsTimeOutOnTheClock(self) -> None:
        """The server's calls back to the client time out after SERVER_CALL_LIMITS' 30 s of the pair's clock."""
        pair = brokerPair(Counter(), clientRoot=Silent())
        answer = pair.root.callRemote("askBack")
        pair.flush()
        pair.clock.advance(29)
        pair.flush()
        self.assertNoResult(answer)
        pair.clock.advance(2)
        pair.flush()
        failure = self.failureResultOf(answer, rpc.RemoteError)
        self.assertIn("CallTimedOut", str(failure.value))

    def test_bulkCarriesStreams(self) -> None:
        """With bulk=True, a Stream in a call's arguments reaches the server whole."""
        service = Counter()
        pair = brokerPair(service, bulk=True)
        data = bytes(range(256)) * 1000
        answer = pair.root.callRemote("upload", bulk.Stream(data))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), len(data))
        self.assertEqual(b"".join(service.received), data)

    def test_withoutBulkStreamsRefused(self) -> None:
        """Without bulk, a Stream cannot be sent: the pair is plain RPC."""
        pair = brokerPair(Counter())
        answer = pair.root.callRemote("upload", bulk.Stream(b"x"))
        pair.flush()
        self.failureResultOf(answer)


class ITicker(rpc.RemoteInterface, TypingProtocol, name="tests.testing.ITicker"):
    def ticks(self, count: int) -> AsyncIterator[int]: ...


class Ticker(rpc.Referenceable, ITicker):
    """Streams of objects: whole, failing midway, or waiting for ever after one item."""

    @rpc.remote
    async def ticks(self, count: int) -> AsyncIterator[int]:
        for tick in range(count):
            yield tick

    @rpc.remote
    async def broken(self) -> AsyncIterator[int]:
        yield 1
        raise ValueError("no more")

    @rpc.remote
    async def stalled(self) -> AsyncIterator[int]:
        yield 1
        await Deferred()


class CollectTests(SynchronousTestCase):
    """pair.collect pulls a stream of objects under SynchronousTestCase, flushing between items."""

    def test_wholeStream(self) -> None:
        """A typed proxy's stream (a Deferred of an AsyncIterator) is collected to its end, past its credit window."""
        pair = brokerPair(Ticker())
        self.assertEqual(pair.collect(pair.root.typed(ITicker).ticks(1000)), list(range(1000)))

    def test_countThenTheRest(self) -> None:
        """collect(stream, n) takes n items and leaves the stream open for the rest."""
        pair = brokerPair(Ticker())
        deferred = pair.root.callRemote("ticks", 10)
        pair.flush()
        opened = self.successResultOf(deferred)
        self.assertEqual(pair.collect(opened, 3), [0, 1, 2])
        self.assertEqual(pair.collect(opened), list(range(3, 10)))
        self.assertEqual(pair.collect(opened), [])

    def test_failureRaised(self) -> None:
        """A stream that fails midway raises its error from collect."""
        pair = brokerPair(Ticker())
        error = self.assertRaises(rpc.RemoteError, pair.collect, pair.root.callRemote("broken"))
        self.assertIn("no more", str(error))

    def test_stalledStream(self) -> None:
        """A stream with no item once everything was delivered raises RuntimeError, rather than hanging."""
        pair = brokerPair(Ticker())
        deferred = pair.root.callRemote("stalled")
        pair.flush()
        opened = self.successResultOf(deferred)
        self.assertEqual(pair.collect(opened, 1), [1])
        self.assertRaises(RuntimeError, pair.collect, opened)


class RecordingTests(SynchronousTestCase):
    """The write-counting helpers count calls, not bytes."""

    def test_recordingTransport(self) -> None:
        """RecordingTransport records one entry per write or writeSequence call."""
        transport = RecordingTransport()
        transport.write(b"a")
        transport.writeSequence([b"b", b"c"])
        self.assertEqual(transport.writes, [b"a", b"bc"])
        self.assertEqual(transport.value(), b"abc")

    def test_recordWrites(self) -> None:
        """recordWrites records calls on any transport and still passes them on."""
        transport = RecordingTransport()
        calls = recordWrites(transport)
        transport.write(b"a")
        transport.writeSequence(iter([b"b", b"c"]))
        self.assertEqual(calls, [b"a", b"bc"])
        self.assertEqual(transport.value(), b"abc")

    def test_tlsRecords(self) -> None:
        """tlsRecords splits bytes into (type, length) records and ignores a partial tail."""
        data = b"\x17\x03\x03\x00\x02ab" + b"\x15\x03\x03\x00\x01z" + b"\x17\x03"
        self.assertEqual(tlsRecords(data), [(23, 2), (21, 1)])


class CertificateTests(SynchronousTestCase):
    """SelfSignedCertificate makes usable TLS material at test time."""

    def test_certificateNamesHost(self) -> None:
        """The certificate names the host and the loopback addresses, and loads in Twisted."""
        certificate = SelfSignedCertificate.generate("example.test")
        loaded = Certificate.loadPEM(certificate.certPEM)
        self.assertIn(b"example.test", loaded.dump())
        self.assertIsNotNone(certificate.serverOptions())
        self.assertIsNotNone(certificate.clientOptions())

    def test_endpointDescriptions(self) -> None:
        """writeTo() stores the files the ssl: endpoint descriptions name, with colons escaped."""
        directory = self.mktemp()
        certificate = SelfSignedCertificate.generate().writeTo(directory)
        self.assertTrue(certificate.serverPEMPath.read_bytes().startswith(b"-----BEGIN PRIVATE KEY"))  # type: ignore[union-attr]
        self.assertIn("privateKey=", certificate.serverEndpoint(0))
        self.assertIn("interface=127.0.0.1", certificate.serverEndpoint(0))
        self.assertIn("interface=\\:\\:1", certificate.serverEndpoint(0, "::1"))
        self.assertIn("port=8751:caCertsDir=", certificate.clientEndpoint(8751))

    def test_descriptionsNeedFiles(self) -> None:
        """Asking for an endpoint description before writeTo() is an error."""
        certificate = SelfSignedCertificate.generate()
        self.assertRaises(RuntimeError, certificate.serverEndpoint)
        self.assertRaises(RuntimeError, certificate.clientEndpoint, 1)


async def loopbackPairCloses(reactor: Any) -> None:
    """loopbackTCP connects two protocols for real, and close() ends both ends and the port."""
    server, client = Collector(), Collector()
    pair = await loopbackTCP(reactor, server, client)
    client.transport.write(PREAMBLE)
    while not server.chunks:
        from twisted.internet.task import deferLater

        await deferLater(reactor, 0.001)
    assert b"".join(server.chunks) == PREAMBLE
    assert pair.port.getHost().host == "127.0.0.1"
    await pair.close()
    assert isinstance(await pair.serverLost, ConnectionDone)
    assert len(client.reasons) == 1


class LoopbackTests(TestCase):
    """The real loopback TCP pair (trial runs this; pytest runs the twin)."""

    timeout = 30
    test_loopback_pair_closes = trialTest(loopbackPairCloses)


test_loopback_pair_closes = pytestTest(loopbackPairCloses)
