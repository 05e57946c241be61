"""Tests for L{protocols._flusher}: a flush is one write, waits behind a stream, settles the send account."""

from __future__ import annotations

from typing import Any

from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from framing import BlockBuffer
from framing._ledger import Ledger
from protocols import CoalescingTransport
from protocols._flusher import SEND_ACCOUNT, UNWATCHED, Flusher
from protocols._outlet import Outlet
from protocols._readgate import ReadGate
from protocols._streamqueue import StreamQueue
from protocols._writegate import WriteGate

from .test_coalescing_parts import newGate


class Counting(StringTransport):
    """A transport that counts the writes it is given, and pauses and resumes reading on request."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.reading: list[str] = []

    def write(self, data: Any) -> None:
        self.writes += 1
        super().write(data)

    def writeSequence(self, data: Any) -> None:
        self.writes += 1
        super().writeSequence(data)

    def pauseProducing(self) -> None:
        self.reading.append("pause")

    def resumeProducing(self) -> None:
        self.reading.append("resume")


def flusher() -> tuple[Flusher, Counting, WriteGate]:
    """A Flusher wired to its parts, as a coalescing transport wires them, its transport and its write gate."""
    gate = newGate()
    reading = ReadGate()
    streams = StreamQueue(gate)
    transport = Counting()
    return Flusher(transport, BlockBuffer(), streams, Outlet(gate, reading, streams), reading), transport, gate


class FlusherTests(SynchronousTestCase):
    """Flusher.flushNow hands what is buffered to the connection."""

    def test_oneWrite(self) -> None:
        """Messages buffered since the last flush go in one write; an empty buffer writes nothing."""
        flush, transport, gate = flusher()
        flush.buffer.write_piece(b"first message ")
        flush.buffer.write_piece(b"second")
        flush.flushNow()
        self.assertEqual((transport.writes, transport.value()), (1, b"first message second"))
        self.assertEqual((flush.outlet.writeCount, len(flush.buffer)), (1, 0))
        flush.flushNow()
        self.assertEqual(transport.writes, 1)

    def test_behindStream(self) -> None:
        """While a stream is queued, a flushed message waits behind it, counted as pending."""
        flush, transport, gate = flusher()
        flush.streams.addStream(iter([[b"unit"]]))
        flush.buffer.write_piece(b"message")
        flush.flushNow()
        self.assertEqual(transport.writes, 0)
        self.assertEqual(flush.pendingBytes, len(b"message"))

    def test_backlogSettlesLedger(self) -> None:
        """Past the high-water mark (the transport paused us) reading stops and the send account holds what waits."""
        flush, transport, gate = flusher()
        flush.ledger = Ledger(None)
        flush.reading.setLimits(10, 0, 0)
        gate.pauseProducing()
        flush.buffer.write_piece(b"x" * 20)
        flush.flushNow()
        self.assertEqual(transport.reading, ["pause"])
        self.assertEqual(flush.ledger.accounts()[SEND_ACCOUNT], 20)
        flush.outlet.drained()
        flush.checkBacklog()
        self.assertEqual(transport.reading, ["pause", "resume"])
        self.assertEqual(flush.ledger.accounts().get(SEND_ACCOUNT, 0), 0)

    def test_room(self) -> None:
        """
        The room is what the buffer may hold before a held flush checks the backlog: the high-water mark less
        what waits behind the buffer, unwatched with back-pressure off or once reading stopped for it.
        """
        flush, transport, gate = flusher()
        self.assertEqual(flush.room, UNWATCHED)
        flush.reading.setLimits(20, 0, 0)
        flush.checkBacklog()
        self.assertEqual(flush.room, 20)
        flush.streams.addStream(iter([[b"unit"]]))
        flush.buffer.write_piece(b"y" * 5)
        flush.flushNow()  # (queued behind the stream)
        self.assertEqual(flush.room, 15)
        flush.buffer.write_piece(b"z" * 16)
        flush.flushNow()
        self.assertEqual((flush.reading.backlogged, flush.room, transport.reading), (True, UNWATCHED, ["pause"]))


class HeldFlushTests(SynchronousTestCase):
    """A coalescing transport's flush during a hold writes nothing, and checks the backlog past the room."""

    def test_pastTheRoom(self) -> None:
        """A read's answers past the high-water mark stop reading before the read is done; at the mark they do not."""
        wrapped = Counting()
        transport = CoalescingTransport(wrapped)
        transport.setSendLimits(20, 0)
        transport.hold()
        transport.write(b"x" * 20)
        transport.flush()
        self.assertEqual((wrapped.writes, transport.sendBacklogged), (0, False))
        transport.write(b"x")
        transport.flush()
        self.assertEqual((wrapped.writes, transport.sendBacklogged, wrapped.reading), (0, True, ["pause"]))
        transport.release()
        self.assertEqual(wrapped.writes, 1)
