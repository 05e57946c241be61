# -*- test-case-name: tests.framing.test_pings -*-
"""The PINGs one side sent that wait for their PONGs, whatever waits: numbering and matching, sans-IO.

Contract: a L{PingTable} numbers this side's PINGs from 1, keeps what waits
for each (a Deferred and its start, the streams a probe asks about, or
C{None}: opaque here) by id, and gives each back once, when the PONG of
that id comes (L{PingTable.control_events}, which also makes the PONGs that
answer the peer's PINGs) or when the connection ends
(L{PingTable.take_all}).  A PONG nobody waits for is ignored.  The wire
bytes are C{docs/wire-format.md}'s PING and PONG headers.  Nothing here
writes, reads a clock or fails anything: the Twisted connection's
L{protocols._pings.Pings} and the client session
(L{framing.rpc._session.ClientSession}) do, each with its own waiters.

Cost: one dict entry per PING in flight; sending and matching are O(1)
each, whatever is in flight.
"""

from __future__ import annotations

from typing import TypeVar

from ._decoder import Ping, Pong
from .wire import PING, PONG, encode_header

Waiter = TypeVar("Waiter")


class PingTable(dict[int, Waiter]):
    """
    The PINGs in flight on one connection: a dict of each one's waiter by
    PING id (its length is how many wait).

    @ivar last_ping_id: the id given last, which is how many PINGs were sent (0 before the first).
    @ivar pongs_made: how many PONGs L{control_events} made to answer the peer's PINGs.
    """

    __slots__ = ("last_ping_id", "pongs_made")

    def __init__(self) -> None:
        super().__init__()
        self.last_ping_id = 0
        self.pongs_made = 0

    def send(self, waiter: Waiter) -> bytes:
        """Number a new PING, keep C{waiter} for its PONG: the PING's bytes, to send."""
        ping_id = self.last_ping_id = self.last_ping_id + 1
        self[ping_id] = waiter
        return encode_header(PING, ping_id)

    def control_events(self, events: list[Ping | Pong]) -> tuple[list[bytes], list[Waiter], int]:
        """
        Take a read's control events (the decoder's C{control_events}, then
        cleared).

        @return: the PONGs answering the peer's PINGs, in order (to be
            written together, before the replies to the read's objects);
            the waiters of this side's PINGs the PONGs answered, in order,
            no longer waiting; and the wire bytes of all these events (a
            PING's header and its PONG's are of one length).
        """
        pongs = [encode_header(PONG, event.id) for event in events if type(event) is Ping]
        self.pongs_made += len(pongs)
        control_bytes = sum(map(len, pongs))
        answered: list[Waiter] = []
        for event in events:
            if type(event) is Pong:
                ping_id = event.id
                control_bytes += len(encode_header(PONG, ping_id))
                if ping_id in self:
                    answered.append(self.pop(ping_id))
        events.clear()
        return pongs, answered, control_bytes

    def take_all(self) -> list[Waiter]:
        """Every waiting PING's waiter, in sending order; none waits any more (the connection ended)."""
        waiters = list(self.values())
        self.clear()
        return waiters
