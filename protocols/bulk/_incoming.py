# -*- test-case-name: tests.protocols.bulk.test_incoming,tests.protocols.bulk.test_owners -*-
"""The receiving side of a bulk channel: announced streams, their early data, and routing frames to receivers.

Contract: L{IncomingSide} is the part of L{protocols.bulk.BulkChannel} that
takes what the peer sends: it checks each announcement (ids increase, at
most C{maxStreams} live, a digest this side accepts), holds what arrives
before C{receive()} (L{EarlyTable}: at most the initial window per stream,
dropped after C{unreadTimeout}), and routes each frame and END or ABORT to
its stream's receiver in O(1).  It is a base class only so that the
channel's two directions stay two readable pieces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.logger import Logger

from framing.bulk._connection import StreamTable
from framing.bulk._errors import StreamReset
from framing.bulk._hello import Hello
from framing.bulk._wire import CANCEL, Control, StreamAnnouncement

from ._early import EarlyData, EarlyTable
from ._interfaces import IReceivingStream, ISendingStream
from ._options import BulkOptions
from ._receiving import IncomingStream


class IncomingSide:
    """
    What a bulk channel does with the streams the peer sends (see the
    module docstring); L{protocols.bulk.BulkChannel} provides the rest.
    """

    log: Logger
    options: BulkOptions
    hello: Hello
    early: EarlyTable
    _up: bool
    streams: StreamTable[ISendingStream, IReceivingStream]

    def _peer(self) -> str:
        raise NotImplementedError

    def sendControl(self, op: int, streamId: Any, *values: Any) -> None:
        raise NotImplementedError

    def helloReceived(self) -> None:
        raise NotImplementedError

    @property
    def flowPaused(self) -> bool:
        """Whether a stream is paused by flow control, either way: the guard's idle rule lets such a peer be."""
        return any(receiver.heldHere for receiver in self.streams.receiving.values()) or any(
            stream.waitingForCredit for stream in self.streams.sending.values()
        )

    def receiverFor(self, streamId: int) -> IReceivingStream | None:
        """The receiver of incoming stream C{streamId}, while it receives."""
        return self.streams.receiving.get(streamId)

    def receivers(self) -> list[IReceivingStream]:
        """The incoming streams being received."""
        return list(self.streams.receiving.values())

    def announcementReceived(self, announcement: StreamAnnouncement) -> IncomingStream:
        """
        The peer announced a stream: its id must be new, and the streams it
        has live must stay within L{BulkOptions.maxStreams}.

        @raise StreamIdReused: the id is not above every id announced before.
        @raise TooManyStreams: one stream more than the cap.
        """
        streamId, size, digestName = announcement
        self.streams.check(streamId)
        digestName = self.hello.accepted(digestName, self.options.digests)
        window = self.options.startWindow
        if self._up:
            self.streams.live.add(streamId)
            early = self.early.add(streamId, window, self.options.unreadTimeout)
        else:
            early = EarlyData(streamId, window)
        host: Any = self  # the channel, an IStreamHost
        return IncomingStream(host, streamId, size, digestName, early)

    def _unreadTimedOut(self, early: EarlyData) -> None:
        streamId = early.streamId
        self.log.warn(
            "Bulk connection from {peer}: stream {streamId} dropped: not received within {timeout} s"
            " ({held} bytes held)",
            peer=self._peer(),
            streamId=streamId,
            timeout=self.options.unreadTimeout,
            held=early.held,
        )
        reason = f"the receiver did not receive the stream within {self.options.unreadTimeout} s"
        early.drop(StreamReset("unread-timeout", reason))
        self.streams.live.discard(streamId)
        self.sendControl(CANCEL, streamId, "unread-timeout", reason)

    def earlyData(self, streamId: int) -> EarlyData | None:
        """What arrived for incoming stream C{streamId} before it was received (taken: asked once)."""
        return self.early.take(streamId)

    @property
    def liveIncoming(self) -> int:
        """Incoming streams announced by the peer and not over yet."""
        return len(self.streams.live)

    def droppedUnread(self, streamId: int) -> None:
        """An incoming stream was dropped before being received: the sender may stop."""
        self.streams.live.discard(streamId)
        self.early.forget(streamId)
        self.sendControl(CANCEL, streamId, "cancelled", "the receiver dropped the stream unread")

    def cancelledUnread(self, streamId: int) -> None:
        """An incoming stream was cancelled before being received."""
        self.streams.live.discard(streamId)
        self.early.forget(streamId)

    def receiverStarted(self, receiver: IReceivingStream) -> None:
        """Route incoming stream C{receiver.streamId}'s frames and controls to C{receiver}."""
        self.streams.receiving[receiver.streamId] = receiver

    def receiverOver(self, receiver: IReceivingStream) -> None:
        """An incoming stream is over: forget it."""
        self.streams.live.discard(receiver.streamId)
        if self.streams.receiving.get(receiver.streamId) is receiver:
            del self.streams.receiving[receiver.streamId]

    # -- receiving ------------------------------------------------------------------

    def dataStarting(self, streamId: int, offset: int, length: int) -> Callable[[int, bytes | memoryview], None] | None:
        """
        A data frame's body is about to arrive: where its pieces go, or
        C{None} to drop them (a stream this side already gave up on).

        @raise FlowControlError: the frame goes past the stream's credit.
        """
        receiver = self.streams.receiving.get(streamId)
        if receiver is None:
            early: Callable[[int, bytes | memoryview], None] | None = self.early.frameStarting(streamId, offset, length)
            return early
        return receiver.frameStarting(offset, length)

    def controlReceived(self, control: Control) -> None:
        """Act on one control message; an unknown stream id is ignored (it already ended)."""
        try:
            if self.streams.dispatch(control, self.hello.peerDigests is not None, self.early.endOrAbort):
                self.helloReceived()
        except Exception:
            self.log.failure("Handling bulk control message {control} failed", control=control)
