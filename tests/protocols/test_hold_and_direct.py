"""
Tests for the two ways the coalescing transport saves system calls: a hold
that makes everything sent during one read share one write, and sending
straight to the socket of Twisted's own TCP connections.
"""

from __future__ import annotations

import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol
from twisted.internet.task import deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import EncodingError
from protocols import CoalescingTransport, TokenProtocol
from protocols.testing import (
    RecordingTransport,
    SelfSignedCertificate,
    connectedPair,
    loopbackTCP,
    messagesPerWrite,
    recordSends,
    tlsRecords,
)

from .helpers import pytestTest, trialTest


class HoldTests(SynchronousTestCase):
    """hold() and release(): flushes wait for the last release, which writes once."""

    def setUp(self) -> None:
        self.wrapped = RecordingTransport()
        self.transport = CoalescingTransport(self.wrapped)

    def test_flushesWaitForRelease(self) -> None:
        """Three flushed messages during a hold leave in one write, in order, at the release."""
        self.transport.hold()
        for piece in (b"one", b"two", b"three"):
            self.transport.write(piece)
            self.transport.flush()
        self.assertEqual(self.wrapped.writes, [])
        self.transport.release()
        self.assertEqual(self.wrapped.writes, [b"onetwothree"])

    def test_countsWrites(self) -> None:
        """writeCount and bytesWritten count what reached the wrapped transport, not what was flushed."""
        self.transport.write(b"alone")
        self.transport.flush()
        self.transport.hold()
        for piece in (b"one", b"two"):
            self.transport.write(piece)
            self.transport.flush()
        self.assertEqual((self.transport.writeCount, self.transport.bytesWritten), (1, 5))
        self.transport.release()
        self.assertEqual((self.transport.writeCount, self.transport.bytesWritten), (2, 11))
        self.assertEqual(len(self.wrapped.writes), self.transport.writeCount)

    def test_holdsNest(self) -> None:
        """Only the outermost release writes."""
        self.transport.hold()
        self.transport.hold()
        self.transport.write(b"a")
        self.transport.flush()
        self.transport.release()
        self.assertEqual(self.wrapped.writes, [])
        self.transport.release()
        self.assertEqual(self.wrapped.writes, [b"a"])

    def test_releaseWithNothingBuffered(self) -> None:
        """A hold in which nothing was sent writes nothing."""
        self.transport.hold()
        self.transport.release()
        self.assertEqual(self.wrapped.writes, [])

    def test_flushNowIgnoresTheHold(self) -> None:
        """flushNow() writes at once, held messages included, and later ones wait again."""
        self.transport.hold()
        self.transport.write(b"held")
        self.transport.flush()
        self.transport.flushNow()
        self.transport.write(b"later")
        self.transport.flush()
        self.assertEqual(self.wrapped.writes, [b"held"])
        self.transport.release()
        self.assertEqual(self.wrapped.writes, [b"held", b"later"])

    def test_streamGoesAfterHeldMessages(self) -> None:
        """A stream queued during a hold is written after what was held, not before it."""
        self.transport.hold()
        self.transport.write(b"before")
        self.transport.flush()
        self.transport.writeStream(iter([[b"unit1"], [b"unit2"]]))
        self.transport.release()
        self.assertEqual(self.wrapped.writes, [b"before", b"unit1", b"unit2"])

    def test_loseConnectionWritesWhatIsHeld(self) -> None:
        """Closing during a hold still sends what was held, then closes."""
        self.transport.hold()
        self.transport.write(b"last words")
        self.transport.flush()
        self.transport.loseConnection()
        self.assertEqual(self.wrapped.writes, [b"last words"])
        self.assertTrue(self.wrapped.disconnecting)


class Answering(TokenProtocol):
    """Answers each received object with itself, and with a failed send first when asked."""

    def objectReceived(self, obj: Any) -> None:
        if obj == "unsendable first":
            try:
                self.sendObject(["half", object()])
            except EncodingError:
                pass
        self.sendObject(obj)


class Collecting(TokenProtocol):
    def __init__(self) -> None:
        super().__init__()
        self.received: list[Any] = []

    def objectReceived(self, obj: Any) -> None:
        self.received.append(obj)


class ProtocolHoldTests(SynchronousTestCase):
    """TokenProtocol holds writes while it handles a read."""

    def test_answersToOneReadShareAWrite(self) -> None:
        """Ten requests arriving in one read are answered in one write of ten whole messages."""
        server = Answering()
        wrapped = RecordingTransport()
        server.makeConnection(wrapped)
        client = Collecting()
        sender = RecordingTransport()
        client.makeConnection(sender)
        for i in range(10):
            client.sendObject(i)
        server.dataReceived(b"".join(sender.writes))
        self.assertEqual(messagesPerWrite(wrapped.writes), [0, 10])

    def test_failedEncodeKeepsHeldAnswers(self) -> None:
        """An object that cannot be encoded is dropped whole; answers held before and after it go out."""
        pair = connectedPair(Answering(), Collecting())
        client = pair.client
        assert isinstance(client, Collecting)
        client.sendObject("before")
        client.sendObject("unsendable first")
        client.sendObject("after")
        pair.flush()
        self.assertEqual(client.received, ["before", "unsendable first", "after"])


# -- sending straight to the socket --------------------------------------------------


class HalfSocket:
    """A socket stand-in whose sends take at most half of what they are given, to force partial sends."""

    def __init__(self, sock: Any) -> None:
        self._socket = sock
        self.sends = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._socket, name)

    def send(self, data: Any, *flags: int) -> int:
        self.sends += 1
        sent: int = self._socket.send(memoryview(data)[: max(1, len(data) // 2)], *flags)
        return sent

    def sendmsg(self, buffers: Any, *args: Any) -> int:
        self.sends += 1
        joined = b"".join(bytes(b) for b in buffers)
        sent: int = self._socket.send(joined[: max(1, len(joined) // 2)])
        return sent


async def _received(reactor: Any, client: Any) -> None:
    """Wait until C{client} has received something (60 s: only a hang takes that long)."""
    deadline = time.monotonic() + 60
    while not client.received and time.monotonic() < deadline:
        await deferLater(reactor, 0.005, lambda: None)


async def sendsStraightAway(reactor: Any) -> None:
    """On Twisted's TCP transport a small message reaches the socket at once: nothing waits in Twisted's buffer."""
    pair = await loopbackTCP(reactor, Answering(), Collecting())
    try:
        raw = pair.client.transport.transport
        # What set-up sent (the preamble) has left Twisted's buffer: the check below is of the new message alone.
        deadline = time.monotonic() + 60
        while (raw._tempDataLen or raw.dataBuffer) and time.monotonic() < deadline:
            await deferLater(reactor, 0.005, lambda: None)
        pair.client.sendObject({"small": 1})
        assert raw._tempDataLen == 0 and raw.dataBuffer == b"", (raw._tempDataLen, raw.dataBuffer)
        client = pair.client
        assert isinstance(client, Collecting)
        await _received(reactor, client)
        assert client.received == [{"small": 1}]
    finally:
        await pair.close()


async def partialSendsLoseNothing(reactor: Any) -> None:
    """When the socket takes only part of a write, Twisted sends the rest: every message arrives whole, in order."""
    pair = await loopbackTCP(reactor, Answering(), Collecting())
    try:
        raw = pair.client.transport.transport
        half = HalfSocket(raw.socket)
        raw.socket = half
        objects = [bytes([i]) * (i * 997) for i in range(1, 40)] + [[b"x" * 70_000, b"y" * 70_000]]
        for obj in objects:
            pair.client.sendObject(obj)
        client = pair.client
        assert isinstance(client, Collecting)
        done: Deferred[None] = Deferred()

        def check() -> None:
            if len(client.received) == len(objects):
                done.callback(None)
            else:
                reactor.callLater(0.01, check)

        check()
        await done
        assert client.received == objects
        assert half.sends > 0
    finally:
        await pair.close()


async def noDirectSendsAfterStartTLS(reactor: Any) -> None:
    """Once TLS is started on a plain TCP connection, messages go through TLS, never straight to the socket."""
    certificate = SelfSignedCertificate.generate()
    pair = await loopbackTCP(reactor, Answering(), Collecting())
    try:
        client = pair.client
        assert isinstance(client, Collecting)
        # One plain exchange first: both preambles have then arrived, so no
        # plain byte can reach a TLS layer.
        pair.client.sendObject("plain")
        await _received(reactor, client)
        assert client.received == ["plain"]
        del client.received[:]
        pair.server.transport.startTLS(certificate.serverOptions())
        pair.client.transport.startTLS(certificate.clientOptions())
        raw = pair.client.transport.transport
        sends = recordSends(raw)
        pair.client.sendObject({"over": "tls"})
        await _received(reactor, client)
        assert client.received == [{"over": "tls"}]
        # Everything that left the client's socket is TLS records, not chunkwire bytes.
        assert sends and all(b"over" not in sent for sent in sends), sends
        assert {kind for kind, _ in tlsRecords(b"".join(sends))} <= {20, 21, 22, 23}
    finally:
        await pair.close()


class DirectSendTests(TestCase):
    test_sendsStraightAway = trialTest(sendsStraightAway)
    test_partialSendsLoseNothing = trialTest(partialSendsLoseNothing)
    test_noDirectSendsAfterStartTLS = trialTest(noDirectSendsAfterStartTLS)


class NotDirectTests(SynchronousTestCase):
    """Transports that are not Twisted's own sockets are always written through their write method."""

    def test_otherTransportsUseWrite(self) -> None:
        wrapped = RecordingTransport()
        transport = CoalescingTransport(wrapped)
        transport.write(b"x")
        transport.flush()
        self.assertEqual(wrapped.writes, [b"x"])

    def test_plainProtocolIsUnaffected(self) -> None:
        """A transport for a non-TokenProtocol still gets exactly what was flushed."""
        wrapped = RecordingTransport()
        wrapped.protocol = Protocol()
        transport = CoalescingTransport(wrapped)
        transport.writeSequence([b"a", b"b"])
        transport.flush()
        self.assertEqual(wrapped.writes, [b"ab"])


test_sends_straight_away = pytestTest(sendsStraightAway)
test_partial_sends_lose_nothing = pytestTest(partialSendsLoseNothing)
test_no_direct_sends_after_start_tls = pytestTest(noDirectSendsAfterStartTLS)
