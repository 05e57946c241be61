"""The sans-IO ping table (L{framing._pings.PingTable}): PINGs numbered, PONGs matched and made, the end."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Ping, Pong
from framing._pings import PingTable
from framing.wire import PING, PONG, PREAMBLE, encode_header


class PingTableTests(SynchronousTestCase):
    """A L{PingTable} numbers PINGs from 1, gives each waiter back at its PONG once, answers the peer's PINGs."""

    def test_numbersFromOne(self) -> None:
        """Each PING gets the next id from 1, in the wire format's PING header; its waiter waits."""
        table: PingTable[str | None] = PingTable()
        self.assertEqual([table.send("a"), table.send(None)], [encode_header(PING, 1), encode_header(PING, 2)])
        self.assertEqual(table.last_ping_id, 2)
        self.assertEqual(dict(table), {1: "a", 2: None})

    def test_pongMatched(self) -> None:
        """
        A PONG gives back its PING's waiter once, in order (C{None} too); a
        PONG nobody waits for is ignored; every event's bytes are counted
        and the events cleared.
        """
        table: PingTable[str | None] = PingTable()
        table.send("a")
        table.send(None)
        table.send("c")
        events: list[Ping | Pong] = [Pong(3), Pong(99), Pong(2), Pong(3)]
        pongs, answered, controlBytes = table.control_events(events)
        self.assertEqual((pongs, answered), ([], ["c", None]))
        self.assertEqual(controlBytes, sum(len(encode_header(PONG, i)) for i in (3, 99, 2, 3)))
        self.assertEqual(events, [])
        self.assertEqual(dict(table), {1: "a"})

    def test_peerPingsAnswered(self) -> None:
        """The peer's PINGs are answered by PONGs of the same ids, in order, as the decoder reads them."""
        table: PingTable[str] = PingTable()
        decoder = Decoder()
        decoder.feed(PREAMBLE + encode_header(PING, 7) + encode_header(PING, 300))
        pongs, answered, controlBytes = table.control_events(decoder.control_events)
        self.assertEqual(pongs, [encode_header(PONG, 7), encode_header(PONG, 300)])
        self.assertEqual((answered, controlBytes), ([], sum(map(len, pongs))))
        self.assertEqual(decoder.control_events, [])
        self.assertEqual(table.pongs_made, 2)

    def test_takeAll(self) -> None:
        """The end gives every waiting PING's waiter, in sending order, and none waits after; numbering goes on."""
        table: PingTable[str] = PingTable()
        for waiter in "abc":
            table.send(waiter)
        table.control_events([Pong(2)])
        self.assertEqual(table.take_all(), ["a", "c"])
        self.assertEqual(len(table), 0)
        self.assertEqual(table.send("d"), encode_header(PING, 4))

    def test_shellsAskTheTable(self) -> None:
        """Neither the Twisted connection's pings nor the client session numbers a PING or makes a PONG itself."""
        import inspect

        import framing.rpc._session
        import protocols._pings

        for module in (framing.rpc._session, protocols._pings):
            source = inspect.getsource(module)
            self.assertNotIn("encode_header(", source, module.__name__)
            self.assertIn("PingTable", source, module.__name__)
