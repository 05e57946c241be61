# -*- test-case-name: tests.protocols.bulk.test_earlytable,tests.protocols.bulk.test_early -*-
"""Early data: what arrives for an announced stream before the application receives it.

Contract: every stream starts with the receiver's initial window of credit
(L{BulkOptions.initialWindow}, stated in its HELLO), so the sender sends at
once, before the application has called C{receive()}.  An L{EarlyData}
holds those bytes, and the END or ABORT that may follow them, until
C{receive()} replays them into the L{protocols.bulk.Receiver}; it never
holds more than the initial window (more is a L{FlowControlError}, the
peer broke flow control), and a stream nobody receives within
L{BulkOptions.unreadTimeout} is dropped (L{dropped}).  Per piece the cost
is one list append; the pieces are the very buffers that came off the
socket.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from framing.bulk._connection import ReceiveCredit
from framing.bulk._errors import StreamReset
from framing.bulk._wire import END, Control


class EarlyData(ReceiveCredit):
    """
    The data, END and ABORT of one announced stream that nobody receives
    yet; its credit (L{ReceiveCredit}) is the initial window.

    @ivar streamId: the sender's id for the stream.
    @ivar window: the credit the sender had before any grant.
    @ivar announced: body bytes announced by frame headers so far.
    @ivar pieces: C{(offset, bytes)} received so far, in arrival order.
    @ivar ended: the END's C{(size, digest)}, once it came.
    @ivar aborted: the ABORT's C{(code, message)}, once it came.
    @ivar dropped: why the stream was dropped unread (a L{StreamReset}), or C{None}.
    @ivar timer: the delayed call that drops it, while it waits.
    @ivar forward: once received, where the rest of a frame begun before
        goes (the receiver's C{piece}).
    """

    def __init__(self, streamId: int, window: int) -> None:
        ReceiveCredit.__init__(self, window, window)
        self.granted = window
        self.streamId = streamId
        self.pieces: list[tuple[int, bytes]] = []
        self.ended: tuple[int | None, bytes | None] | None = None
        self.aborted: tuple[str, str] | None = None
        self.dropped: StreamReset | None = None
        self.timer: Any = None
        self.forward: Any = None

    @property
    def held(self) -> int:
        """Bytes held, waiting for the receiver."""
        return sum(len(data) for _, data in self.pieces)

    def frameStarting(self, offset: int, length: int) -> Any:
        """
        A data frame's header arrived before C{receive()}: keep its body.

        @raise FlowControlError: it goes past the initial window.
        """
        self.frameAnnounced(self.streamId, length)
        return self.piece

    def piece(self, offset: int, data: bytes | memoryview) -> None:
        """One piece of a frame's body: kept (a view copied: a held read never outweighs the window), or passed on."""
        if self.forward is not None:
            self.forward(offset, data)
        elif self.dropped is None:
            self.pieces.append((offset, data if type(data) is bytes else bytes(data)))

    def stopWaiting(self) -> None:
        """The stream was received, cancelled or dropped: no timeout any more."""
        timer, self.timer = self.timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def drop(self, reason: StreamReset) -> None:
        """Free what is held; a later C{receive()} fails with C{reason}."""
        self.stopWaiting()
        self.dropped = reason
        self.pieces = []


class EarlyTable:
    """
    The L{EarlyData} of one connection's announced streams that nobody
    receives yet, by stream id; each is dropped (C{onTimeout} is told) if
    nobody receives it within its timeout.  Every operation is O(1).
    """

    def __init__(self, clock: Any, onTimeout: Callable[[EarlyData], None]) -> None:
        self._clock = clock
        self._onTimeout = onTimeout
        self._byId: dict[int, EarlyData] = {}

    def __len__(self) -> int:
        return len(self._byId)

    def add(self, streamId: int, window: int, timeout: float) -> EarlyData:
        """Hold what stream C{streamId} sends before C{receive()}, for C{timeout} seconds at most."""
        early = self._byId[streamId] = EarlyData(streamId, window)
        early.timer = self._clock.callLater(timeout, self._timedOut, streamId)
        return early

    def get(self, streamId: int) -> EarlyData | None:
        """The early data of stream C{streamId}, while nobody receives it."""
        return self._byId.get(streamId)

    def take(self, streamId: int) -> EarlyData | None:
        """Stream C{streamId} is being received: hand over its early data (once)."""
        early = self._byId.pop(streamId, None)
        if early is not None:
            early.stopWaiting()
        return early

    def forget(self, streamId: int) -> None:
        """Stream C{streamId} was dropped or cancelled unread: free what it held."""
        early = self._byId.pop(streamId, None)
        if early is not None:
            early.drop(StreamReset("cancelled", "the receiver dropped the stream unread"))

    def clear(self) -> None:
        """The connection is gone: no timeout fires any more."""
        held, self._byId = self._byId, {}
        for early in held.values():
            early.stopWaiting()

    def frameStarting(self, streamId: int, offset: int, length: int) -> Any:
        """Where a data frame of an unreceived stream goes, or C{None} (not held: dropped)."""
        early = self._byId.get(streamId)
        return early.frameStarting(offset, length) if early is not None else None

    def endOrAbort(self, control: Control) -> None:
        """An END C{(size, digest)} or an ABORT C{(code, message)} for an unreceived stream: kept for receive()."""
        early = self._byId.get(control[1])
        if early is None:
            return
        if control[0] == END:
            early.ended = (control[2], control[3])
        else:
            early.aborted, early.pieces = (control[2], control[3]), []

    def _timedOut(self, streamId: int) -> None:
        early = self._byId.pop(streamId, None)
        if early is not None:
            early.timer = None
            self._onTimeout(early)
