"""Tests for L{protocols._tracing}: every token sent and received is logged once, whole, with its peer."""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from framing import dumps
from framing.wire import PREAMBLE
from protocols._tracing import TracingWriter, peerName, startTracing


class Holder:
    """Stands for the coalescing layer: the transport it writes to is its C{transport}."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    def getPeer(self) -> Any:
        return self.transport.getPeer()


class TracingTests(SynchronousTestCase):
    """startTracing logs both directions through one TokenTracer each."""

    def setUp(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.log = Logger(observer=self.events.append)
        self.inner = StringTransport(peerAddress=IPv4Address("TCP", "10.0.0.1", 4000))

    def test_sentAndReceived(self) -> None:
        """Writes go through to the transport and each of their tokens is logged; so are received tokens."""
        holder = Holder(self.inner)
        traceReceived = startTracing(holder, self.log)
        self.assertIsInstance(holder.transport, TracingWriter)
        data = PREAMBLE + dumps([1, "a"])
        holder.transport.write(data[:5])
        holder.transport.writeSequence([data[5:]])
        self.assertEqual(self.inner.value(), data)
        sent = [e for e in self.events if e["direction"] == "sent"]
        self.assertGreater(len(sent), 2)
        self.assertTrue(all(e["peer"] == "10.0.0.1:4000" and e["arrow"] == "->" for e in sent))
        count = len(self.events)
        for i in range(len(data)):
            traceReceived(data[i : i + 1])
        received = self.events[count:]
        self.assertEqual([e["token"] for e in received], [e["token"] for e in sent])
        self.assertTrue(all(e["direction"] == "received" and e["arrow"] == "<-" for e in received))

    def test_passesThrough(self) -> None:
        """The proxy answers for the transport's other attributes."""
        writer = TracingWriter(self.inner, self.log, "p")
        self.assertIs(writer.getPeer(), self.inner.getPeer())

    def test_peerName(self) -> None:
        """A peer is host:port, its address as text otherwise, or unknown if asking fails."""
        self.assertEqual(peerName(self.inner), "10.0.0.1:4000")

        class Broken:
            def getPeer(self) -> Any:
                raise OSError("no peer")

        class Unix:
            def getPeer(self) -> str:
                return "/tmp/socket"

        self.assertEqual(peerName(Broken()), "an unknown peer")
        self.assertEqual(peerName(Unix()), "/tmp/socket")
