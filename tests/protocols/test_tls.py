"""Write counts over TLS (twisted.protocols.tls), in memory: one small message is one TLS record."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from protocols.echo import EchoClient, EchoServer
from protocols.testing import tlsRecords

from .helpers import TLSPair

APPLICATION_DATA = 23


class RecordCountTests(SynchronousTestCase):
    """Each message is one TLS record; a stream is one record per chunk plus one for its end."""

    buffering = False
    """Whether to use BufferingTLSTransport (Twisted's default) instead of the plain TLSMemoryBIOProtocol."""

    def setUp(self) -> None:
        self.tls = TLSPair(EchoServer(), EchoClient(), self.buffering)
        self.client: EchoClient = self.tls.client
        self.sent = self.tls.pair.clientTransport.writes
        # Settle the handshake and the preambles before counting.
        self.successResultOf(self._echo(0))
        self.sent.clear()

    def _echo(self, obj: Any) -> Any:
        d = self.client.echo(obj)
        self.tls.flush()
        return d

    def records(self) -> list[tuple[int, int]]:
        """The application-data records the client has sent since setUp."""
        return [record for record in tlsRecords(b"".join(self.sent)) if record[0] == APPLICATION_DATA]

    def test_smallMessageIsOneRecord(self) -> None:
        """One small message is one TLS record."""
        self.assertEqual(
            self.successResultOf(self._echo({"id": 1, "args": [1, 2.5, "x"]})), {"id": 1, "args": [1, 2.5, "x"]}
        )
        self.assertEqual(len(self.records()), 1)

    def test_messageWithBodyIsOneRecord(self) -> None:
        """A message with a body that fits one record (up to 16 KiB) is one TLS record."""
        message = {"id": 2, "body": b"b" * 15_000}
        self.assertEqual(self.successResultOf(self._echo(message)), message)
        self.assertEqual(len(self.records()), 1)

    def test_streamIsOneRecordPerChunk(self) -> None:
        """A stream of N small chunks is N records plus one for its end."""
        chunks = [b"%d" % i * 100 for i in range(5)]
        d = self.client.echoStream(chunks)
        self.tls.flush()
        self.assertEqual(self.successResultOf(d), b"".join(chunks))
        self.assertEqual(len(self.records()), len(chunks) + 1)

    def test_manyMessagesManyRecords(self) -> None:
        """Ten messages sent one after another are ten records, never one per token."""
        answers = [self.client.echo([i, "x" * i, {i: None}]) for i in range(10)]
        self.tls.flush()
        self.assertEqual([self.successResultOf(d) for d in answers], [[i, "x" * i, {i: None}] for i in range(10)])
        self.assertEqual(len(self.records()), 10)


class BufferingRecordCountTests(SynchronousTestCase):
    """With Twisted's default BufferingTLSTransport, one message is still one record."""

    def test_smallMessageIsOneRecord(self) -> None:
        """One small message is one TLS record when Twisted also aggregates writes."""
        tls = TLSPair(EchoServer(), EchoClient(), buffering=True)
        d = tls.client.echo(0)
        tls.flush()
        self.successResultOf(d)
        sent = tls.pair.clientTransport.writes
        sent.clear()
        d = tls.client.echo(["small", 1])
        tls.flush()
        self.assertEqual(self.successResultOf(d), ["small", 1])
        records = [record for record in tlsRecords(b"".join(sent)) if record[0] == APPLICATION_DATA]
        self.assertEqual(len(records), 1)
