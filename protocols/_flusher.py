# -*- test-case-name: tests.protocols.test_flusher -*-
"""Flusher: what a coalescing transport does for every message it flushes.

Contract: a L{Flusher} keeps the state every message's send reads (the
wrapped transport, the send buffer, the count of holds, whether the
connection is gone) and does the flush itself: L{Flusher.flushNow} hands
everything buffered to the L{Outlet} in one write, or queues it behind a
stream, and lets the L{ReadGate} decide again when what waits may have
passed the high-water mark.  It refers back to nothing, so a closed
connection is freed by reference counting alone.

Cost: per flush O(number of blocks), and only plain attribute reads (not
through the transport's C{__getattr__}).

Design: docs/design/coalescing.md
"""

from __future__ import annotations

import sys
from typing import Any

from framing import BlockBuffer
from framing._ledger import Ledger

from ._outlet import Outlet, SealedOutlet
from ._readgate import ReadGate
from ._streamqueue import StreamQueue

SEND_ACCOUNT = "send"
"""The ledger account of the bytes written to a connection that its socket has not taken."""

UNWATCHED = sys.maxsize
"""L{Flusher.room} while no held flush needs to check the backlog (back-pressure off, or reading stopped for it)."""


class Flusher:
    """
    The per-message send state of a coalescing transport, and its flush.

    @ivar transport: the wrapped transport (the coalescing transport's
        C{transport}; tracing replaces it).
    @ivar buffer: the L{BlockBuffer} that writes wait in (the coalescing
        transport's C{buffer}, the same object).
    @ivar holds: the holds not yet released; flushes wait while there are any.
    @ivar closed: whether the connection is gone: nothing more is written.
    @ivar streams: the L{StreamQueue} that streams, and the messages flushed
        behind them, wait in.
    @ivar outlet: the L{Outlet}, where flushed blocks reach the connection
        (a L{SealedOutlet} once the connection sent its last token).
    @ivar reading: the L{ReadGate}, which stops reading while too much waits.
    @ivar ledger: the connection's L{framing._ledger.Ledger}, charged with
        what waits to be sent (account C{"send"}) each time the backlog is
        checked; or C{None}.
    @ivar room: the bytes the send buffer may hold before a held flush
        must check the backlog (the high-water mark less what waits behind
        the buffer), or L{UNWATCHED} while back-pressure is off or reading is
        stopped for it.  Set again where what waits grows or the mark
        changes (L{flushNow}, L{writeQueued}, L{checkBacklog}); between, it
        can only be too small: a needless check, never a missed one.
    """

    def __init__(
        self, transport: Any, buffer: BlockBuffer, streams: StreamQueue, outlet: Outlet, reading: ReadGate
    ) -> None:
        """
        @param transport: the wrapped transport.
        @param buffer: the send buffer.
        @param streams: the stream queue.
        @param outlet: the outlet.
        @param reading: the read gate.
        """
        self.transport = transport
        self.buffer = buffer
        self.holds = 0
        self.closed = False
        self.streams = streams
        self.outlet: Outlet | SealedOutlet = outlet  # (sealed once the last token is written)
        self.reading = reading
        self.ledger: Ledger | None = None
        self.room = UNWATCHED

    def __repr__(self) -> str:
        return f"<Flusher {len(self.buffer)} bytes buffered, {self.holds} holds>"

    def flushNow(self) -> None:
        """Hand everything buffered to the connection in one write, or queue it behind a stream; even during a hold."""
        blocks, size = self.buffer.take_sized()
        if not blocks:
            return
        streams = self.streams
        if streams.items:
            streams.addMessage(blocks, size)
            high = self.reading.high
            if high is not None and streams.queuedBytes + self.outlet.mayHold > high:
                self.checkBacklog()
            else:
                self._settleRoom()
        elif self.outlet.write(self.transport, blocks, size):
            self.checkBacklog()
        elif self.outlet.mayHold:
            # The wrapped transport may hold some of it: less room (it took all: as much or more, left as it is).
            # (L{_settleRoom} written out: on a transport that holds what it is given, this runs for every flush.)
            reading = self.reading
            high = reading.high
            self.room = (
                UNWATCHED if high is None or reading.backlogged else high - streams.queuedBytes - self.outlet.mayHold
            )

    def writeQueued(self, blocks: list[bytes], size: int) -> None:
        """Hand one queued message or stream unit (C{size} bytes) to the connection (the stream queue's write)."""
        if self.outlet.write(self.transport, blocks, size):
            self.checkBacklog()
        elif self.outlet.mayHold:
            self._settleRoom()

    def _settleRoom(self) -> None:
        """Set L{room} from what waits behind the buffer now."""
        reading = self.reading
        high = reading.high
        self.room = (
            UNWATCHED if high is None or reading.backlogged else high - self.streams.queuedBytes - self.outlet.mayHold
        )

    @property
    def pendingBytes(self) -> int:
        """The bytes written that the socket has not taken: buffered, queued, or in the wrapped transport."""
        return len(self.buffer) + self.streams.queuedBytes + self.outlet.held(self.transport)

    def checkBacklog(self) -> None:
        """
        Let the read gate decide again, with what waits to be sent now, and
        settle the ledger's C{"send"} account to it.  Runs only when what
        waits may have passed the high-water mark, or drained: a message
        the socket takes at once costs the ledger nothing, so the account
        lags by at most what the socket took since (up to the low-water mark).
        """
        pending = self.pendingBytes
        ledger = self.ledger
        if ledger is not None:
            ledger.settle(SEND_ACCOUNT, pending)
        self.room = 0  # (until decided: a message sent meanwhile, by a read the decision resumed, checks again)
        self.reading.checkBacklog(pending, self.transport, self.closed)
        self._settleRoom()
