# -*- test-case-name: tests.protocols.bulk.test_interfaces,tests.protocols.bulk.test_owners -*-
"""The seams inside one bulk connection: what streams may ask of their channel, and back.

Contract: a stream (a sending L{protocols.bulk.Stream} or a receiving
L{protocols.bulk.Receiver}) talks to its connection only through an
L{IStreamHost} (the L{protocols.bulk.BulkChannel} implements it), and the
channel talks to a stream only through L{ISendingStream} or
L{IReceivingStream}.  Neither side imports the other's module, and neither
touches the other's private members, so a stream can be driven by a test
host and the channel's scheduling changed without reading the streams.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from twisted.python.failure import Failure

from ._options import BulkOptions
from ._tuning import RoundTrips


class ISendingStream(Protocol):
    """What the channel asks of an outgoing stream."""

    streamId: int | None
    digestName: str | None

    @property
    def waitingForCredit(self) -> bool:
        """Whether it waits for the receiver's credit."""

    def helloKnown(self, hello: Any, ours: tuple[str, ...]) -> int:
        """The receiver's HELLO is known: settle the digest; the initial window (see L{SendSide.helloKnown})."""

    def refuse(self, error: BaseException) -> None:
        """No digest fits both sides: fail before any data is sent (the receiver is told)."""

    def announcing(self, streamId: int, digestName: str | None) -> None:
        """Being announced as C{streamId} (L{framing.bulk._connection.StreamTable.reserve})."""

    def takenBack(self) -> None:
        """The message announcing it was never sent: NEW again (L{framing.bulk._connection.StreamTable.takeBack})."""

    def attach(self, host: IStreamHost) -> None:
        """The stream, announced, is sent by C{host}."""

    def detach(self) -> None:
        """The stream, taken back, is sent by no host."""

    def sendOne(self) -> bool:
        """Send one data frame if it can; return whether it may send more at once."""

    def initialCredit(self, count: int) -> None:
        """The receiver's initial window: the stream may send C{count} bytes before any grant."""

    def grantReceived(self, count: int) -> None:
        """The receiver granted C{count} more bytes of credit."""

    def doneReceived(self, digest: bytes | None) -> None:
        """The receiver has everything (verified, with C{digest} if one was used)."""

    def cancelReceived(self, error: BaseException) -> None:
        """The receiver does not want the stream (any more): C{error} is what its CANCEL means."""

    def callFailed(self, failure: Failure) -> None:
        """The call whose message announced the stream failed."""

    def connectionLost(self, reason: Failure) -> None:
        """The connection is gone."""


class IReceivingStream(Protocol):
    """What the channel asks of an incoming stream being received."""

    streamId: int

    @property
    def heldHere(self) -> bool:
        """Whether this side holds the stream (the sender is out of credit because the sink has not released)."""

    def frameStarting(self, offset: int, length: int) -> Callable[[int, bytes | memoryview], None] | None:
        """
        A data frame's header arrived: where its body's pieces go, or
        C{None} to drop them.

        @raise protocols.bulk.FlowControlError: it goes past the credit granted.
        """

    def endReceived(self, size: int | None, digest: bytes | None) -> None:
        """The sender sent everything: the object's size and digest."""

    def abortReceived(self, error: BaseException) -> None:
        """The sender abandoned the stream: C{error} is what its ABORT means."""

    def connectionLost(self, reason: Failure) -> None:
        """The connection is gone."""


class IStreamHost(Protocol):
    """
    What a stream may ask of its connection's channel.

    @ivar options: the connection's L{BulkOptions}.
    @ivar clock: its C{IReactorTime}.
    @ivar hashReactor: the reactor hashing threads report to, or C{None}
        (hash inline).
    @ivar roundTrips: the connection's base round-trip estimate.
    @ivar readSize: the most bytes one read of the connection hands in, or
        C{None} if not known (a transport other than a Twisted TCP socket).
    """

    options: BulkOptions
    clock: Any
    hashReactor: Any
    roundTrips: RoundTrips
    readSize: int | None

    @property
    def up(self) -> bool:
        """Whether the connection is up, so streams can start."""

    @property
    def autotuning(self) -> bool:
        """Whether a receiver's window may grow past L{BulkOptions.window}."""

    @property
    def protocol(self) -> Any:
        """The RPC broker of the connection (made with bulk settings: C{Broker(bulk=...)})."""

    def sendControl(self, op: int, streamId: Any, *values: Any) -> None:
        """Send one control message, if the connection is up."""

    def sendData(self, streamId: int, offset: int, data: bytes) -> None:
        """Write one data frame with one transport write."""

    def wake(self, stream: ISendingStream) -> None:
        """C{stream} may be able to send: send what can be sent now."""

    def wakeSoon(self, stream: ISendingStream) -> None:
        """As L{wake}, at the end of this reactor turn."""

    def streamOver(self, stream: ISendingStream) -> None:
        """An outgoing stream is over (done or failed): forget it."""

    def receiverStarted(self, receiver: IReceivingStream) -> None:
        """An incoming stream started receiving: route its frames and controls to C{receiver}."""

    def receiverOver(self, receiver: IReceivingStream) -> None:
        """An incoming stream is over: forget it."""

    def droppedUnread(self, streamId: int) -> None:
        """An incoming stream was dropped before being received: tell the sender."""

    def earlyData(self, streamId: int) -> Any:
        """Take what arrived for incoming stream C{streamId} before it was received (an L{EarlyData}), if any."""

    def cancelledUnread(self, streamId: int) -> None:
        """An incoming stream was cancelled before being received (the cancel was sent)."""
