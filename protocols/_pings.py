# -*- test-case-name: tests.protocols.test_pings -*-
"""Pings: PING out, the matching PONG back, as a Deferred round-trip time.

Contract: PINGs from the peer are answered by PONGs of the same id, all
those of one read in one write.  L{Pings.send} gives each PING a fresh id and returns a Deferred
that fires with the seconds until the PONG with that id came back; a PONG
nobody asked for is ignored; when the connection ends every unanswered
ping fails with the reason.  The numbering and the matching are the sans-IO
L{framing._pings.PingTable}'s, as the client session's are; this shell adds
the Deferreds, the clock and the write.  One dict entry per ping in flight,
O(1) each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from framing import Ping, Pong
from framing._pings import PingTable


class Pings:
    """The pings in flight on one connection."""

    def __init__(self, write: Callable[[bytes], None], clock: Callable[[], Any]) -> None:
        """
        @param write: writes one PING header (and flushes it).
        @param clock: returns the C{IReactorTime} whose C{seconds} times the round trips.
        """
        self._write = write
        self._clock = clock
        # Each ping's Deferred and when it was sent.
        self._table: PingTable[tuple[Deferred[float], float]] = PingTable()
        self._lost: Failure | None = None

    @property
    def sent(self) -> int:
        """How many PINGs were sent."""
        return self._table.last_ping_id

    @property
    def pongsSent(self) -> int:
        """How many PONGs answered the peer's PINGs (each written with its read's replies)."""
        return self._table.pongs_made

    def send(self) -> Deferred[float]:
        """Send a PING; the result fires with its round trip in seconds (fails at once if the connection is gone)."""
        if self._lost is not None:
            return fail(self._lost)
        answered: Deferred[float] = Deferred()
        self._write(self._table.send((answered, self._clock().seconds())))
        return answered

    def controlEvents(self, events: list[Ping | Pong]) -> tuple[list[bytes], int]:
        """
        Take the decoder's control events (and clear them): fire the ping of
        each PONG, and return the PONGs that answer the peer's PINGs (to be
        written together) and the wire bytes of all those events.
        """
        pongs, answered, controlBytes = self._table.control_events(events)
        if answered:
            now = self._clock().seconds()
            for deferred, sentAt in answered:
                deferred.callback(max(0.0, now - sentAt))
        return pongs, controlBytes

    def connectionLost(self, reason: Failure) -> None:
        """Fail every ping still waiting with C{reason}, and any sent later; let the connection go."""
        self._lost = reason
        # The two callables are the protocol's bound methods: drop them, so
        # that a closed connection is no reference cycle.
        self._write = self._clock = _gone
        for deferred, _ in self._table.take_all():
            deferred.errback(reason)


def _gone(*args: object) -> Any:
    raise RuntimeError("the connection is gone")
