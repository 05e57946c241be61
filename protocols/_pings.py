# -*- test-case-name: tests.protocols.test_pings -*-
"""Pings: PING out, the matching PONG back, as a Deferred round-trip time.

Contract: PINGs from the peer are answered by PONGs of the same id, all
those of one read in one write.  L{Pings.send} gives each PING a fresh id and returns a Deferred
that fires with the seconds until the PONG with that id came back; a PONG
nobody asked for is ignored; when the connection ends every unanswered
ping fails with the reason.  One dict entry per ping in flight, O(1) each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from framing import Ping, Pong
from framing.wire import PING, PONG, encode_header


class Pings:
    """
    The pings in flight on one connection.

    @ivar sent: how many PINGs were sent.
    """

    def __init__(self, write: Callable[[bytes], None], clock: Callable[[], Any]) -> None:
        """
        @param write: writes one PING header (and flushes it).
        @param clock: returns the C{IReactorTime} whose C{seconds} times the round trips.
        """
        self._write = write
        self._clock = clock
        self._waiting: dict[int, tuple[Deferred[float], float]] = {}
        self._lost: Failure | None = None
        self.sent = 0

    def send(self) -> Deferred[float]:
        """Send a PING; the result fires with its round trip in seconds (fails at once if the connection is gone)."""
        if self._lost is not None:
            return fail(self._lost)
        self.sent += 1
        pingId = self.sent
        answered: Deferred[float] = Deferred()
        self._waiting[pingId] = (answered, self._clock().seconds())
        self._write(encode_header(PING, pingId))
        return answered

    def controlEvents(self, events: list[Ping | Pong]) -> tuple[list[bytes], int]:
        """
        Take the decoder's control events (and clear them): match each PONG
        to its ping, and return the PONGs that answer the peer's PINGs (to
        be written together) and the wire bytes of all those events.
        """
        pongs = [encode_header(PONG, event.id) for event in events if type(event) is Ping]
        answered = [event.id for event in events if type(event) is Pong]
        events.clear()
        # A PING and its PONG have headers of the same length.
        controlBytes = sum(map(len, pongs)) + sum(len(encode_header(PONG, i)) for i in answered)
        for pingId in answered:
            self.pongReceived(pingId)
        return pongs, controlBytes

    def pongReceived(self, pingId: int) -> None:
        """The peer answered PING C{pingId}: fire its Deferred (nothing if nobody asked)."""
        entry = self._waiting.pop(pingId, None)
        if entry is not None:
            answered, sentAt = entry
            answered.callback(max(0.0, self._clock().seconds() - sentAt))

    def connectionLost(self, reason: Failure) -> None:
        """Fail every ping still waiting with C{reason}, and any sent later; let the connection go."""
        self._lost = reason
        # The two callables are the protocol's bound methods: drop them, so
        # that a closed connection is no reference cycle.
        self._write = self._clock = _gone
        waiting, self._waiting = self._waiting, {}
        for answered, _ in waiting.values():
            answered.errback(reason)


def _gone(*args: object) -> Any:
    raise RuntimeError("the connection is gone")
