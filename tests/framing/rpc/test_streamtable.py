"""Tests for framing.rpc._streamtable: the one object-stream table, driven sans-IO, and the shells built on it."""

from __future__ import annotations

import gc
import inspect
from collections.abc import AsyncIterator

from twisted.trial.unittest import SynchronousTestCase

from framing._errors import ResourceExhausted
from framing._ledger import Ledger
from framing.rpc._clientstreams import ClientObjectStreams
from framing.rpc._streams import (
    CANCEL,
    CREDIT,
    END,
    ERROR,
    ITEM,
    Announcement,
    FlowMessage,
    ItemCreditExceeded,
    ObjectStreamIdReused,
    TooManyObjectStreams,
)
from framing.rpc._streamtable import PRODUCER_BYTES, PRODUCERS_ACCOUNT, ObjectStreamTable, ReceivedStream, SentStream


class RecordingTable(ObjectStreamTable):
    """A table whose output is a list of the flow messages it sends."""

    def __init__(self, window: int = 8, maxStreams: int = 2) -> None:
        super().__init__(window, 1 << 20, maxStreams)
        self.sent: list[FlowMessage] = []
        self.died = 0

    def sendFlow(self, message: FlowMessage) -> None:
        self.sent.append(message)

    def readerDied(self) -> None:
        self.died += 1


class TableTests(SynchronousTestCase):
    def test_announcedGrantsTheWindow(self) -> None:
        """An announcement makes a reader and sends the whole window as the first CREDIT."""
        table = RecordingTable()
        reader = table.announced(Announcement((1,)))
        self.assertIsInstance(reader, ReceivedStream)
        self.assertEqual(table.sent, [FlowMessage((CREDIT, 1, 8, 1 << 20))])

    def test_announcementRules(self) -> None:
        """An id not above the last, or one stream past the limit, breaks the rules."""
        table = RecordingTable(maxStreams=1)
        kept = table.announced(Announcement((2,)))
        self.assertRaises(ObjectStreamIdReused, table.announced, Announcement((2,)))
        self.assertRaises(TooManyObjectStreams, table.announced, Announcement((3,)))
        del kept

    def test_itemsTakenGiveCreditBack(self) -> None:
        """Items are held until taken; a quarter window taken goes back as CREDIT; END ends after the items."""
        table = RecordingTable()
        reader = table.announced(Announcement((1,)))
        self.assertIs(table.receivedFlow(FlowMessage((ITEM, 1, "a", "b", "c"))), reader)
        self.assertEqual(list(reader.buffer), ["a", "b", "c"])
        self.assertEqual(table.take(reader), "a")
        self.assertEqual(table.take(reader), "b")
        self.assertEqual(table.sent[1:], [FlowMessage((CREDIT, 1, 2, 1 << 20))])
        table.receivedFlow(FlowMessage((END, 1, 3)))
        self.assertFalse(reader.finished)
        table.take(reader)
        self.assertTrue(reader.finished)

    def test_endCountChecked(self) -> None:
        """An END counting other than the items that arrived fails the stream after its items (section 14.4)."""
        from framing.rpc._streams import EndCountMismatch

        table = RecordingTable()
        reader = table.announced(Announcement((1,)))
        table.receivedFlow(FlowMessage((ITEM, 1, "a")))
        table.receivedFlow(FlowMessage((END, 1, 2)))
        self.assertEqual(list(reader.buffer), ["a"])
        self.assertIsInstance(reader.error, EndCountMismatch)

    def test_pastTheWindow(self) -> None:
        """More items than granted break flow control."""
        table = RecordingTable(window=2)
        reader = table.announced(Announcement((1,)))
        self.assertRaises(ItemCreditExceeded, table.receivedFlow, FlowMessage((ITEM, 1, 1, 2, 3)))
        del reader

    def test_cancelOnce(self) -> None:
        """A cancelled reader sends CANCEL once and ignores what the peer sent before it heard."""
        table = RecordingTable()
        reader = table.announced(Announcement((1,)))
        table.cancel(reader)
        table.cancel(reader)
        self.assertEqual(table.sent[1:], [FlowMessage((CANCEL, 1))])
        self.assertIsNone(table.receivedFlow(FlowMessage((ITEM, 1, "late"))))

    def test_droppedReaderCancelled(self) -> None:
        """A reader dropped unfinished is reported, and its CANCEL sent when the shell asks."""
        table = RecordingTable()
        table.announced(Announcement((1,)))
        gc.collect()
        self.assertEqual((table.died, table.dropped), (1, [1]))
        table.cancelDropped()
        self.assertEqual(table.sent[1:], [FlowMessage((CANCEL, 1))])

    def test_errorRebuilt(self) -> None:
        """ERROR fails the reader with the producer's error."""
        table = RecordingTable()
        reader = table.announced(Announcement((1,)))
        table.receivedFlow(FlowMessage((ERROR, 1, "builtins.ValueError", "bad", None)))
        self.assertIsNotNone(reader.error)
        self.assertIn("bad", str(reader.error))

    def test_producerCreditCancelEnd(self) -> None:
        """This side's stream: CREDIT opens its window, END is sent with its count, CANCEL makes it over."""
        table = RecordingTable()
        producer = SentStream(table.reserveId(), iter(()))
        table.producerLive(producer)
        self.assertIs(table.receivedFlow(FlowMessage((CREDIT, 1, 4, 100))), producer)
        self.assertTrue(producer.window.open())
        producer.sent = 3
        table.endSending(producer)
        self.assertEqual(table.sent, [FlowMessage((END, 1, 3))])
        self.assertTrue(producer.over)
        other = SentStream(table.reserveId(), iter(()))
        table.producerLive(other)
        table.receivedFlow(FlowMessage((CANCEL, 2)))
        self.assertTrue(other.over)
        self.assertEqual(table.producers, {})

    def test_connectionEnded(self) -> None:
        """The end fails every open reader with the reason, ends every producer, and sends nothing more."""
        table = RecordingTable()
        reader = table.announced(Announcement((1,)))
        producer = SentStream(table.reserveId(), iter(()))
        table.producerLive(producer)
        reason = ConnectionError("gone")
        readers, producers = table.connectionEnded(reason)
        self.assertEqual((readers, producers), ([reader], [producer]))
        self.assertIs(reader.error, reason)
        self.assertTrue(producer.over)
        before = list(table.sent)
        table.cancel(reader)
        self.assertEqual(table.sent, before)


class ProducerChargeTests(SynchronousTestCase):
    """Each producer is charged PRODUCER_BYTES to its connection's ledger while it lives, in every shell."""

    def test_chargedUntilOver(self) -> None:
        """Admitted, a producer holds its charge until it ends (or is cancelled); then it is released."""
        table = RecordingTable()
        table.ledger = Ledger(10 * PRODUCER_BYTES)
        producers = [SentStream(table.reserveId(), iter(())) for _ in range(3)]
        for producer in producers:
            table.admitProducer(producer)
            table.producerLive(producer)
        self.assertEqual(table.ledger.holding(PRODUCERS_ACCOUNT), 3 * PRODUCER_BYTES)
        table.endSending(producers[0])
        table.receivedFlow(FlowMessage((CANCEL, producers[1].streamId)))
        self.assertEqual(table.ledger.holding(PRODUCERS_ACCOUNT), PRODUCER_BYTES)
        table.connectionEnded(ConnectionError("gone"))
        self.assertEqual(table.ledger.holding(PRODUCERS_ACCOUNT), 0)

    def test_refusedWithoutRoom(self) -> None:
        """A producer the ledger has no room for is refused (ResourceExhausted), nothing charged."""
        table = RecordingTable()
        table.ledger = Ledger(PRODUCER_BYTES + 100)
        table.admitProducer(SentStream(table.reserveId(), iter(())))
        error = self.assertRaises(ResourceExhausted, table.admitProducer, SentStream(table.reserveId(), iter(())))
        self.assertIn("no room for another object stream", str(error))
        self.assertEqual(table.ledger.holding(PRODUCERS_ACCOUNT), PRODUCER_BYTES)

    def test_clientAnnouncementCharged(self) -> None:
        """
        The clients without Twisted charge the streams they announce alike:
        from the announcement, released if its message fails to encode.
        """
        streams = ClientObjectStreams([], sending=lambda producer: None)
        streams.ledger = ledger = Ledger(1 << 20)

        async def source() -> AsyncIterator[int]:
            yield 1

        streams.announce(source())
        streams.announce(source())
        self.assertEqual(ledger.holding(PRODUCERS_ACCOUNT), 2 * PRODUCER_BYTES)
        streams.rolledBack()
        self.assertEqual(ledger.holding(PRODUCERS_ACCOUNT), 0)
        streams.announce(source())
        [live] = streams.committed()
        streams.producerOver(live)  # (cancelled by the server)
        self.assertEqual(ledger.holding(PRODUCERS_ACCOUNT), 0)


class ProbeTests(SynchronousTestCase):
    """
    The announcement kept or undone with its message, and the probe after
    it (docs/wire-format.md 14.6): the table's rule, which the Twisted
    streams and the clients' session both call.
    """

    def _announced(self, table: RecordingTable, count: int) -> list[SentStream]:
        producers = [SentStream(table.reserveId(), iter(())) for _ in range(count)]
        firsts = [table.announceProducer(producer) for producer in producers]
        self.assertEqual(firsts, [True] + [False] * (count - 1))
        return producers

    def test_liveOnlyOnceCommitted(self) -> None:
        """A message's streams are live (CREDIT reaches them) once it is encoded whole; one probe for them all."""
        table = RecordingTable()
        first, second = self._announced(table, 2)
        self.assertEqual(table.producers, {})
        self.assertIsNone(table.receivedFlow(FlowMessage((CREDIT, first.streamId, 1, 100))))
        self.assertEqual(table.committed(), [first, second])
        self.assertEqual(table.announcing, [])
        self.assertEqual(set(table.producers), {first.streamId, second.streamId})
        self.assertIs(table.receivedFlow(FlowMessage((CREDIT, first.streamId, 1, 100))), first)

    def test_rolledBackReleased(self) -> None:
        """A message that failed to encode: its streams are over, never live, their charges released."""
        table = RecordingTable()
        table.ledger = ledger = Ledger(1 << 20)
        producers = self._announced(table, 2)
        self.assertEqual(ledger.holding(PRODUCERS_ACCOUNT), 2 * PRODUCER_BYTES)
        table.rolledBack()
        self.assertEqual(ledger.holding(PRODUCERS_ACCOUNT), 0)
        self.assertTrue(all(producer.over for producer in producers))
        self.assertEqual(table.producers, {})
        self.assertTrue(table.announceProducer(SentStream(table.reserveId(), iter(()))))

    def test_probedClosesWhatWasNotTaken(self) -> None:
        """
        At the probe's PONG a stream without credit is closed, nothing sent
        for it; one credited, or over already, is left alone.
        """
        table = RecordingTable()
        table.ledger = ledger = Ledger(1 << 20)
        taken, untaken, ended = self._announced(table, 3)
        probed = table.committed()
        table.receivedFlow(FlowMessage((CREDIT, taken.streamId, 4, 100)))
        table.receivedFlow(FlowMessage((CREDIT, ended.streamId, 4, 100)))
        table.endSending(ended)
        sentBefore = list(table.sent)
        self.assertEqual(table.untaken(probed), [untaken])
        self.assertEqual(table.probed(probed), [untaken])
        self.assertTrue(untaken.over)
        self.assertFalse(taken.over)
        self.assertEqual(set(table.producers), {taken.streamId})
        self.assertEqual(table.sent, sentBefore)
        self.assertEqual(ledger.holding(PRODUCERS_ACCOUNT), PRODUCER_BYTES)

    def test_shellsCallTheRule(self) -> None:
        """Neither shell judges a probed stream itself: both ask the table (ObjectStreamTable.probed)."""
        import framing.rpc._clientstreams
        import protocols.rpc._streams

        for module in (framing.rpc._clientstreams, protocols.rpc._streams):
            source = inspect.getsource(module)
            self.assertNotIn("not producer.credited", source, module.__name__)
            self.assertIn("self.probed(", source, module.__name__)


class ShellTests(SynchronousTestCase):
    def test_everyShellIsTheTable(self) -> None:
        """The Twisted streams and the clients' are the one table; every reader and producer its stream classes."""
        from framing.rpc._clientstreams import ClientObjectStreams
        from protocols.asyncioclient import AsyncStream
        from protocols.blocking import BlockingStream
        from protocols.rpc import _streams as streams

        self.assertTrue(issubclass(streams.ObjectStreams, ObjectStreamTable))
        self.assertTrue(issubclass(ClientObjectStreams, ObjectStreamTable))
        for reader in (streams.StreamReader, AsyncStream, BlockingStream):
            self.assertTrue(issubclass(reader, ReceivedStream), reader)
        self.assertTrue(issubclass(streams._Producer, SentStream))

    def test_rulesDefinedOnce(self) -> None:
        """No shell builds a CREDIT, CANCEL, END or ERROR, or checks an announcement's id: the table does."""
        import framing.rpc._clientstreams
        import protocols.rpc._streams

        for module in (framing.rpc._clientstreams, protocols.rpc._streams):
            source = inspect.getsource(module)
            for made in ("((CREDIT,", "((CANCEL,", "((END,", "((ERROR,", "ObjectStreamIdReused(", "rebuild("):
                self.assertNotIn(made, source, module.__name__)
