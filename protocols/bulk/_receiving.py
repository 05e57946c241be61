# -*- test-case-name: tests.protocols.bulk.test_receiving_cost,tests.protocols.bulk.test_states -*-
"""Receiving: an L{IncomingStream}, what a receiver is handed, and the L{Receiver} that takes it in.

Contract: a L{Receiver} hands each piece to its sink as it arrives and
returns credit only for pieces the sink and the hasher have released, in
steps of at least C{grantStep} bytes, keeping at most C{window} bytes in
its care (a window that a L{WindowTuner} may grow, never shrink, when
autotuning is on); it verifies the digest before the sink is told the data
is complete, and a mismatch fails the transfer with L{IntegrityError} and
tells the sink to drop what it holds.  Per piece the cost is O(1).

Its life is the receiving table of L{framing.bulk._states} (one table for
every shell).

It talks to its connection only through an L{IStreamHost}.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure

from framing.bulk._connection import (
    ReceiveCredit,
    ReceiveSide,
    digestProblem,
    frameProblem,
    resetFrom,
    resetMessage,
)
from framing.bulk._digests import IntegrityError
from framing.bulk._errors import StreamReset
from framing.bulk._states import LIVE, ReceiveEvent, ReceiveState
from framing.bulk._wire import CANCEL, GRANT, controlMessage

from ._early import EarlyData
from ._integrity import OrderedHasher
from ._interfaces import IStreamHost
from ._outcome import Outcome, TransferResult
from ._sinks import Piece, Sink, makeSink
from ._tuning import receiveWindow


class IncomingStream:
    """
    A stream the peer is sending: what a remote method receives for a
    L{Stream} argument, or a caller for a L{Stream} result.  Nothing is sent
    until L{receive} names where the bytes go; dropping an incoming stream
    unread (or L{cancel}) tells the sender it is not wanted.

    @ivar size: the announced size, or C{None} if the sender does not know it.
    @ivar digestName: the digest the transfer is checked with (the one
        both sides chose, see L{protocols.bulk.BulkOptions.digests}), or C{None}.
    @ivar streamId: the sender's id for it on this connection.
    @ivar receiver: its L{Receiver} once L{receive} was called, else C{None}.
    """

    def __init__(
        self,
        host: IStreamHost,
        streamId: int,
        size: int | None,
        digestName: str | None,
        early: EarlyData | None = None,
    ) -> None:
        self._host = host
        self.streamId = streamId
        self.size = size
        self.digestName = digestName
        self.receiver: Receiver | None = None
        # What the sender sent before receive() (its initial window), held by the channel meanwhile.
        self._early = early
        self._dropped = weakref.finalize(self, host.droppedUnread, streamId)
        self._dropped.atexit = False

    def __repr__(self) -> str:
        return f"<IncomingStream {self.streamId} of {self.size} bytes>"

    @property
    def broker(self) -> Any:
        """The RPC broker (made with bulk settings: C{Broker(bulk=...)}) of the connection the stream arrives on."""
        return self._host.protocol

    @property
    def receivedBytes(self) -> int:
        """Payload bytes received so far."""
        return self.receiver.received if self.receiver is not None else 0

    def receive(self, sink: Any, *, verify: bool = True, window: int | None = None) -> Deferred[TransferResult]:
        """
        Start the transfer into C{sink}: a path, a binary file object, an
        C{IConsumer}, a callable taking each piece (it may return a Deferred
        or be async), or a L{Sink}.

        @param verify: check the sender's digest (when it sends one).
        @param window: the most bytes in this side's care at once, kept as
            given (default: the connection's L{BulkOptions.window}, grown up
            to L{BulkOptions.maxWindow} while the window is what holds the
            stream back on a latent path).
        @return: a L{Deferred} firing with the L{TransferResult} once all of
            it arrived, verified, and the sink completed (a file renamed into
            place); failing with L{IntegrityError}, L{StreamReset}, the sink's
            error, or the reason the connection was lost.
        @raise RuntimeError: if called twice.
        """
        if self.receiver is not None:
            raise RuntimeError("an incoming stream can be received only once")
        self._dropped.detach()
        early, self._early = self._early, None
        if early is not None:
            self._host.earlyData(self.streamId)
            if early.dropped is not None:
                return _failed(early.dropped)
        receiver = Receiver(self._host, self.streamId, self.size, self.digestName, makeSink(sink), verify, window)
        self.receiver = receiver
        return receiver.start(early)

    def cancel(self, reason: str = "the receiver cancelled the stream") -> None:
        """Tell the sender the stream is not wanted (or no longer wanted)."""
        self._dropped.detach()
        if self.receiver is not None:
            self.receiver.abandon(StreamReset("cancelled", reason), "cancelled")
        else:
            self._host.cancelledUnread(self.streamId)
            self._host.sendControl(CANCEL, self.streamId, "cancelled", controlMessage(reason))


ANNOUNCED, RECEIVING, ENDED, VERIFYING, DONE, FAILED = ReceiveState


class Receiver(ReceiveSide, ReceiveCredit):
    """
    The receiving side of one stream: routing pieces to the sink, credit,
    verification (see the module docstring).  Its credit and checks are
    the sans-IO rules of L{framing.bulk._connection} (L{ReceiveSide}: its
    state, END and DONE; L{ReceiveCredit}, L{frameProblem}, L{digestProblem}).

    @ivar state: its L{ReceiveState}.
    @ivar window: the most bytes in its care at once (chosen by
        L{receiveWindow}; it may grow).
    @ivar grantStep: the smallest grant it sends.
    @ivar tuner: its L{WindowTuner}, or C{None} if the window is fixed
        (asked for, autotuning off, or a path too short to tune: let go
        once the tuner knows it, L{WindowTuner.fixed}).
    @ivar announced: body bytes announced by frame headers so far.
    @ivar received: body bytes received so far.
    @ivar sinkReleased: bytes the sink is done with.
    @ivar hashReleased: bytes the hasher is done with.
    @ivar granted: credit granted so far.
    """

    def __init__(
        self,
        host: IStreamHost,
        streamId: int,
        size: int | None,
        digestName: str | None,
        sink: Sink,
        verify: bool,
        window: int | None,
    ) -> None:
        # The handle's fields, not the handle: it holds this object, and a
        # finished pair must go without a garbage collection.
        self.host = host
        self.streamId = streamId
        self.size = size
        self.digestName = digestName
        self.sink = sink
        ReceiveSide.__init__(self)
        algorithm = digestName if verify and not sink.verifies else None
        self.hasher = OrderedHasher(algorithm, None, host.hashReactor) if algorithm is not None else None
        inline = self.hasher is not None and host.hashReactor is None
        # Hashed in this thread as each piece is offered, and done with at once.
        self._hashesAtOnce = inline
        window, grantStep, self.tuner = receiveWindow(
            host.options, window, host.autotuning, inline, host.roundTrips, host.readSize
        )
        ReceiveCredit.__init__(self, window, grantStep)
        self.received = 0
        self.sinkReleased = 0
        self.hashReleased = 0
        self.startedAt = 0.0  # when the first grant was sent
        self.ended: tuple[int | None, bytes | None] | None = None
        self.outcome = Outcome()

    def start(self, early: EarlyData | None = None) -> Deferred[TransferResult]:
        """
        Start the sink, take in what arrived C{early} (the sender's initial
        window, perhaps its END), and grant the rest of the window; the
        result of L{IncomingStream.receive}.
        """
        done: Deferred[TransferResult] = self.outcome.wait(self._receiveCancelled)
        if not self.host.up:
            self.advance(ReceiveEvent.FAIL)
            self.outcome.fail(ConnectionDone("the stream's connection is closed"))
            return done
        try:
            self.sink.start(self.size, self._sinkFailed)
        except Exception as error:
            self.abandon(error, "sink-failed")
            return done
        self.advance(ReceiveEvent.START)
        self.host.receiverStarted(self)
        self.startedAt = self.host.clock.seconds()
        if early is not None:
            self.granted = early.window
            self._replay(early)
        if self.state is RECEIVING:
            # Always one grant (of nothing, if the initial window covers the
            # window): it tells the sender this side receives the stream.
            self._granted(self.firstGrant(self._releasedBytes()))
        return done

    def _replay(self, early: EarlyData) -> None:
        """Hand the sink and the hasher what arrived before receive(), as if it arrived now."""
        pieces, early.pieces = early.pieces, []
        for offset, data in pieces:
            if self.state not in LIVE:
                return
            if not self._fits(offset, len(data), self.announced):
                return
            self.announced += len(data)
            self.piece(offset, data)
        self.announced = early.announced
        # The rest of a frame whose header came before receive() comes here.
        early.forward = self.piece
        if early.aborted is not None:
            self.abortReceived(resetFrom(*early.aborted))
        elif early.ended is not None:
            self.endReceived(*early.ended)

    def _fits(self, offset: int, length: int, expected: int) -> bool:
        """Whether a frame at C{offset} fits the sink's order (C{expected}) and the announced size, else abandoned."""
        problem = frameProblem(offset, length, expected if self.sink.sequential else None, self.size)
        if problem is not None:
            self.abandon(problem, problem.code)
            return False
        return True

    @property
    def heldHere(self) -> bool:
        """Whether this side holds the stream: receiving, and the sender has less credit left than a step."""
        return self.state is RECEIVING and self.senderShort

    def _granted(self, count: int) -> None:
        """C{count} bytes were granted (counted): tell the sender, and the tuner."""
        if self.tuner is not None:
            self.tuner.granted(self.host.clock.seconds(), self.granted)
        self.host.sendControl(GRANT, self.streamId, count)

    # -- data ----------------------------------------------------------------------

    def frameStarting(self, offset: int, length: int) -> Callable[[int, Piece], None] | None:
        """
        A frame's header arrived: check it against flow control and the
        stream's shape.  Returns where its body's pieces go, or C{None} to
        drop them.

        @raise FlowControlError: it exceeds the credit.
        """
        expected = self.announced
        self.frameAnnounced(self.streamId, length)
        if not self._fits(offset, length, expected):
            return None
        tuner = self.tuner
        if tuner is not None:
            if tuner.frameArrived(self.host.clock.seconds(), self.announced, self.received):
                # Grant the difference now: the sender is waiting for it.
                self.window = tuner.window
                self._released()
            elif tuner.fixed:
                # A short path (loopback, a LAN): the window stays; no frame or grant needs the tuner from now on.
                self.tuner = None
        return self.piece

    def piece(self, offset: int, data: Piece) -> None:
        """
        One piece of a frame's body, as it came off the socket (a view
        copied only for a sink that wants bytes).  Hashed in this thread, it
        is hashed first and counted as released at once, so that the sink's
        release alone decides whether to grant: one decision per piece.
        """
        if self.state not in LIVE:
            return
        sink = self.sink
        if type(data) is not bytes and not sink.views:
            data = bytes(data)
        length = len(data)
        self.received += length
        hasher = self.hasher
        if self._hashesAtOnce:
            assert hasher is not None
            hasher.offer(offset, data)
            self.hashReleased += length
            hasher = None
        try:
            sink.write(offset, data, self._sinkRelease)
        except Exception as error:
            self.abandon(error, "sink-failed")
            return
        if hasher is not None:
            hasher.offer(offset, data, self._hashRelease)

    def _sinkRelease(self, count: int) -> None:
        self.sinkReleased += count
        self._released()

    def _hashRelease(self, count: int) -> None:
        self.hashReleased += count
        self._released()

    def _released(self) -> None:
        state = self.state
        if state is RECEIVING:
            count = self.due(self._releasedBytes())
            if count:
                self._granted(count)
        elif state is ENDED and self._releasedBytes() == self.received:
            self._finish()

    def _releasedBytes(self) -> int:
        released = self.sinkReleased
        if self.hasher is not None:
            # Hashing may lag behind the sink by up to hashBudget bytes
            # without holding up credit (those bytes have arrived: a cut
            # would not lose them).
            released = min(released, self.hashReleased + self.host.options.hashBudget)
        return released

    def endReceived(self, size: int | None, digest: bytes | None) -> None:
        """The sender sent everything; a repeated END changes nothing."""
        if not self.ending():
            return
        self.ended = (size, digest)
        self._released()

    # -- the end -------------------------------------------------------------------------

    def _finish(self) -> None:
        assert self.ended is not None
        size, digest = self.ended
        try:
            size = self.allReleased(self.received, size, whole=not self.sink.verifies)
        except StreamReset as problem:
            self.abandon(problem, "size")
            return
        if self.hasher is None:
            self._verified(None, size)
            return
        missing = digestProblem(self.digestName, digest, None)
        if missing is not None or digest is None:
            self.abandon(missing or IntegrityError("no digest"), "integrity")
            return
        self.hasher.finish(size).addCallbacks(
            self._hashed, lambda f: self.abandon(f.value, "integrity"), callbackArgs=(size, digest)
        )

    def _hashed(self, actual: bytes, size: int, expected: bytes) -> None:
        error = digestProblem(self.digestName, expected, actual)
        if error is not None:
            self.abandon(error, "integrity")
            return
        self._verified(actual, size)

    def _verified(self, digest: bytes | None, size: int) -> None:
        try:
            completed = self.sink.complete()
        except Exception as error:
            self.abandon(error, "sink-failed")
            return
        if completed is None:
            self._completed(None, digest, size)
        else:
            completed.addCallbacks(
                self._completed, lambda f: self.abandon(f.value, "sink-failed"), callbackArgs=(digest, size)
            )

    def _completed(self, _: object, digest: bytes | None, size: int) -> None:
        if self.state is not VERIFYING:
            return
        self.host.sendControl(*self.doneMessage(digest))
        self.host.receiverOver(self)
        algorithm = self.digestName if digest is not None else None
        self.sink = _SPENT
        self.outcome.succeed(TransferResult(size, digest, algorithm, self.received))

    def _receiveCancelled(self) -> None:
        self.abandon(StreamReset("cancelled", "the receiver cancelled the transfer"), "cancelled")

    def _sinkFailed(self, error: BaseException) -> None:
        self.abandon(error, "sink-failed")

    def abandon(self, error: BaseException, code: str | None) -> None:
        """Fail the transfer; tell the sender (with C{code}) unless the connection is gone."""
        if self.state not in LIVE:
            return
        if code is not None:
            self.host.sendControl(*resetMessage(CANCEL, self.streamId, code, error))
        self._drop(error)

    def abortReceived(self, error: BaseException) -> None:
        """The sender abandoned the stream: the transfer fails with C{error}, what its ABORT means."""
        self._drop(error)

    def connectionLost(self, reason: Failure) -> None:
        """The connection is gone: the transfer fails with its reason."""
        error = reason.value
        assert error is not None
        self._drop(error)

    def _drop(self, error: BaseException) -> None:
        if not self.failing():
            return
        self.host.receiverOver(self)
        if self.hasher is not None:
            self.hasher.abort()
        sink, self.sink = self.sink, _SPENT
        try:
            sink.fail(error)
        finally:
            del sink  # this frame may outlive the call (see BulkChannel.connectionLost)
            self.outcome.fail(error)


def _failed(error: BaseException) -> Deferred[TransferResult]:
    failed: Deferred[TransferResult] = Deferred()
    failed.errback(error)
    return failed


_SPENT = Sink()
"""The sink of a transfer that is over: the real one may hold this transfer
(its C{failed} callback), and is let go so that neither waits for a garbage
collection."""
