"""Tests for L{protocols._pings}: PINGs answered in one write, round trips timed, unanswered pings failed at the end."""

from __future__ import annotations

from twisted.internet.error import ConnectionLost
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from framing import Ping, Pong
from framing.wire import PING, PONG, encode_header
from protocols._pings import Pings


class PingsTests(SynchronousTestCase):
    """Pings numbers its PINGs, matches PONGs to them and answers the peer's."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.written: list[bytes] = []
        self.pings = Pings(self.written.append, lambda: self.clock)

    def test_roundTrip(self) -> None:
        """Each PING has a fresh id; its PONG fires it with the seconds it took; other PONGs are ignored."""
        first, second = self.pings.send(), self.pings.send()
        self.assertEqual(self.written, [encode_header(PING, 1), encode_header(PING, 2)])
        self.assertEqual(self.pings.sent, 2)
        self.clock.advance(1.5)
        pongs, controlBytes = self.pings.controlEvents([Pong(2), Pong(99)])
        self.assertEqual(pongs, [])
        self.assertEqual(controlBytes, len(encode_header(PONG, 2)) + len(encode_header(PONG, 99)))
        self.assertEqual(self.successResultOf(second), 1.5)
        self.assertNoResult(first)

    def test_answersPeer(self) -> None:
        """The peer's PINGs are answered by PONGs of the same ids, returned together, and the events cleared."""
        events: list[Ping | Pong] = [Ping(7), Ping(300)]
        pongs, controlBytes = self.pings.controlEvents(events)
        self.assertEqual(pongs, [encode_header(PONG, 7), encode_header(PONG, 300)])
        self.assertEqual(controlBytes, sum(map(len, pongs)))
        self.assertEqual(events, [])
        self.assertEqual(self.pings.pongsSent, 2)

    def test_pongsCounted(self) -> None:
        """pongsSent counts the PONGs made for the peer's PINGs, across reads; this side's PINGs and PONGs are not."""
        self.pings.send()
        self.pings.controlEvents([Ping(1), Pong(1)])
        self.pings.controlEvents([Pong(5), Ping(2), Ping(3)])
        self.assertEqual((self.pings.pongsSent, self.pings.sent), (3, 1))

    def test_connectionLost(self) -> None:
        """The end fails every unanswered ping with its reason, and any ping sent later at once."""
        waiting = self.pings.send()
        reason = Failure(ConnectionLost("gone"))
        self.pings.connectionLost(reason)
        self.failureResultOf(waiting, ConnectionLost)
        self.failureResultOf(self.pings.send(), ConnectionLost)
        self.assertEqual(len(self.written), 1)
