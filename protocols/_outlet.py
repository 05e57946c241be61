# -*- test-case-name: tests.protocols.test_flusher,tests.protocols.test_coalescing_parts -*-
"""Outlet: where a coalescing transport's flushed blocks reach the connection.

Contract: L{Outlet.write} hands one message's blocks (or one stream unit)
to the connection in exactly one call: one C{send} or C{sendmsg} straight
to a socket of Twisted's own when nothing waits in Twisted's buffer, else
one C{write} or C{writeSequence} on the wrapped transport (plus, rarely,
the write of what the socket did not take).  It counts those writes and
their bytes, and keeps a cheap upper bound on what the wrapped transport
still holds, so that back-pressure asks the transport (a few attribute
reads, L{protocols._sockets.queuedIn}) only when the bound passes the
high-water mark.  Per write: O(number of blocks), no system call beyond the
one that sends.  The wrapped transport is passed to each call, never kept
(tracing replaces it under a running connection).
"""

from __future__ import annotations

from typing import Any

from ._readgate import ReadGate
from ._sockets import queuedIn, sendNow
from ._streamqueue import StreamQueue
from ._writegate import WriteGate


class Outlet:
    """
    The connection end of a coalescing transport.

    @ivar writeCount: writes handed to the connection so far: each one
        C{write} or C{writeSequence} on the wrapped transport, or one direct
        send (plus, rarely, the write of what the socket did not take).
    @ivar bytesWritten: the bytes in those writes.
    @ivar mayHold: an upper bound on what the wrapped transport holds: what
        it held when last asked (L{held}), plus what was written since.
    @ivar unconfirmed: bytes handed to a transport that cannot count its
        queue since it last paused us (what it has not confirmed sending).
    """

    def __init__(self, gate: WriteGate, reading: ReadGate, streams: StreamQueue) -> None:
        """
        @param gate: tells whether the wrapped transport has paused us.
        @param reading: holds the high-water mark and whether reading is
            stopped for back-pressure.
        @param streams: counts the bytes queued behind a stream.
        """
        self.writeCount = 0
        self.bytesWritten = 0
        self.mayHold = 0
        self.unconfirmed = 0
        self._gate = gate
        self._reading = reading
        self._streams = streams

    def __repr__(self) -> str:
        return f"<Outlet {self.writeCount} writes, {self.bytesWritten} bytes>"

    def write(self, transport: Any, blocks: list[bytes], size: int) -> bool:
        """
        Hand C{blocks} to the connection (C{transport}, the wrapped one) in one write.

        @param size: the bytes in C{blocks} (the buffer they were taken from
            counted them as they were written).
        @return: whether back-pressure must decide again: the bound on what
            waits passed the high-water mark, or reading is stopped for
            back-pressure and may start again.
        """
        self.writeCount += 1
        self.bytesWritten += size
        reading = self._reading
        blocks = sendNow(transport, blocks, size)
        if not blocks:
            # The socket took everything, and nothing was queued before.
            self.mayHold = 0
            return reading.backlogged
        if self._gate.paused:
            self.unconfirmed += size
        if len(blocks) == 1:
            transport.write(blocks[0])
        else:
            transport.writeSequence(blocks)
        high = reading.high
        if high is None:
            return False
        self.mayHold += size
        return reading.backlogged or self.mayHold + self._streams.queuedBytes > high

    def held(self, transport: Any) -> int:
        """What the wrapped transport holds (or, if it cannot say, L{unconfirmed}); L{mayHold} restarts from it."""
        queued = queuedIn(transport)
        if queued is None:
            queued = self.unconfirmed
        self.mayHold = queued
        return queued

    def bytesSent(self, transport: Any) -> int:
        """Bytes C{transport} has taken so far: L{bytesWritten} less what it still holds."""
        queued = queuedIn(transport)
        return self.bytesWritten - (self.unconfirmed if queued is None else queued)

    def drained(self) -> None:
        """The wrapped transport resumed us: it has sent what it was given before."""
        self.unconfirmed = 0


class SealedOutlet:
    """
    The outlet of a connection that sent its last token (a drop's ERROR,
    which wire format 4.8 says is the last): what is flushed later is
    dropped, not written.  Stateless, so one serves every connection.
    """

    mayHold = 0
    """(It holds nothing.)"""

    def write(self, transport: Any, blocks: list[bytes], size: int) -> bool:
        """Drop C{blocks}; nothing is for back-pressure to decide."""
        return False

    def held(self, transport: Any) -> int:
        """Nothing of the connection's is for back-pressure any more: 0."""
        return 0


SEALED = SealedOutlet()
"""The one L{SealedOutlet}."""
