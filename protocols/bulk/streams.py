"""Streams: what a sender sends (L{Stream}) and what a receiver receives (L{IncomingStream}).

Contract, sending: a L{Stream} sends nothing until the receiver grants
credit, never more than it was granted, one data frame (one transport
write) per chunk, and at most one chunk ahead of what it can send from a
sequential source.  It hashes what it sends (in order, off the reactor
thread when the connection has a reactor with threads) and ends with the
object's size and digest.  Its result fires only once the receiver has
confirmed the data verified.

Contract, receiving: an L{IncomingStream} hands each piece to its sink as
it arrives and returns credit only for pieces the sink and the hasher have
released, in steps of at least C{grantStep} bytes, keeping at most
C{window} bytes in its care (a window that a L{WindowTuner} may grow, never
shrink, when autotuning is on); it verifies the digest before the sink is told
the data is complete, and a mismatch fails the transfer with
L{IntegrityError} and tells the sink to drop what it holds.  Per piece the
cost is O(1).
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import AsyncIterable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IConsumer, IReactorThreads
from twisted.python.failure import Failure
from zope.interface import implementer

from .errors import IntegrityError, StreamReset
from .integrity import DEFAULT_DIGEST, OrderedHasher, checkAlgorithm
from .sinks import Sink, makeSink
from .sources import SeekableSource, seekableSource
from .tuning import WindowTuner
from .wire import ABORT, CANCEL, DONE, END, GRANT

if TYPE_CHECKING:
    from .channel import BulkChannel


@dataclass(frozen=True)
class TransferResult:
    """
    What a completed transfer reports.

    @ivar size: the object's size in bytes.
    @ivar digest: its verified digest, or C{None} if no digest was used.
    @ivar algorithm: the digest's C{hashlib} name, or C{None}.
    @ivar transferred: payload bytes this stream carried (less than C{size}
        when only some ranges were sent).
    """

    size: int
    digest: bytes | None
    algorithm: str | None
    transferred: int

    @property
    def hexdigest(self) -> str:
        """The digest in hex, or C{""}."""
        return self.digest.hex() if self.digest is not None else ""


class _Outcome:
    """A result that many may wait for; waiting never leaves an unhandled failure behind."""

    def __init__(self) -> None:
        self.result: Any = None
        self.failure: Failure | None = None
        self.fired = False
        self._waiters: list[Deferred[Any]] = []

    def wait(self, onCancel: Callable[[], object] | None = None) -> Deferred[Any]:
        """
        A L{Deferred} of the result; cancelling it calls C{onCancel()} (if
        given) after it stops waiting, and it fails with C{CancelledError}.
        """
        canceller = None if onCancel is None else (lambda waiter: self._cancelled(waiter, onCancel))
        waiter: Deferred[Any] = Deferred(canceller)
        if not self.fired:
            self._waiters.append(waiter)
        elif self.failure is not None:
            waiter.errback(self.failure)
        else:
            waiter.callback(self.result)
        return waiter

    def _cancelled(self, waiter: Deferred[Any], onCancel: Callable[[], object]) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)
        onCancel()

    def succeed(self, result: Any) -> None:
        self._fire(result, None)

    def fail(self, reason: BaseException | Failure) -> None:
        self._fire(None, reason if isinstance(reason, Failure) else Failure(reason))  # type: ignore[no-untyped-call]

    def _fire(self, result: Any, failure: Failure | None) -> None:
        if self.fired:
            return
        self.fired, self.result, self.failure = True, result, failure
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if failure is not None:
                waiter.errback(failure)
            else:
                waiter.callback(result)


# -- sending ------------------------------------------------------------------------

_NEW, _ANNOUNCED, _SENDING, _ENDING, _ENDED, _FINISHED = range(6)


@implementer(IConsumer)
class Stream:
    """
    A byte stream to send: put it in the arguments of a remote call (an
    upload) or return it from a remote method (a download), or hand it to
    L{protocols.bulk.BulkChannel.send}.  Each instance is sent once.

    The source may be random-access (a path, a binary file that can seek, a
    bytes-like, a L{SeekableSource}: sent from any offset, in part with
    C{ranges}, so transfers can resume and be striped), or sequential: an
    async iterable or an iterable of C{bytes}, an object with
    C{startProducing(consumer)} (Twisted's C{IBodyProducer}: its Deferred
    ends the stream), or nothing: the stream is then an L{IConsumer} that
    any C{IPushProducer} or C{IPullProducer} registers with and writes to,
    and L{finish} ends it.

    @ivar size: the object's size if known.
    @ivar digestName: the digest sent at the end (C{"sha256"} by default), or
        C{None}.
    @ivar sentBytes: payload bytes sent so far.
    @ivar streamId: the id on the connection once sent, or C{None}.
    """

    def __init__(
        self,
        source: Any = None,
        *,
        size: int | None = None,
        ranges: Iterable[tuple[int, int]] | None = None,
        digest: str | None = DEFAULT_DIGEST,
        hasher: OrderedHasher | None = None,
    ) -> None:
        """
        @param size: the length of a sequential source, if known (checked).
        @param ranges: for a random-access source, the byte ranges to send
            (default: all of it); the digest still covers the whole object.
        @param digest: the C{hashlib} algorithm of the end-to-end check, or
            C{None} for none.
        @param hasher: an L{OrderedHasher} shared with other streams of the
            same object (stripes, resumed attempts): this stream offers what
            it sends to it and sends no digest itself; its owner finishes it.
        @raise ValueError: C{ranges} for a sequential source, or ranges
            outside the object.
        """
        self._seekable: SeekableSource | None = None
        self._iterator: Any = None
        self._asyncIterator: Any = None
        self._bodyProducer: Any = None
        self._adopt(source)
        if self._seekable is not None:
            size = self._seekable.size
        self.size = size
        self.digestName = None if hasher is not None else checkAlgorithm(digest)
        self._sharedHasher = hasher
        self._hasher: OrderedHasher | None = None
        self._ranges: deque[tuple[int, int]] = deque(self._checkRanges(ranges))
        self._channel: BulkChannel | None = None
        self.streamId: int | None = None
        self._state = _NEW
        self._credit = 0
        self._minFrame = 1
        self._hashBacklog = 0
        self.sentBytes = 0
        # The sequential side: what was produced and not yet sent.
        self._buffer: deque[bytes | memoryview] = deque()
        self._buffered = 0
        self._position = 0
        self._finished = False
        self._producer: Any = None
        self._streamingProducer = False
        self._producerPaused = False
        self._pulling = False
        self._awaiting = False
        self._ownDigest: bytes | None = None
        self._outcome = _Outcome()

    def _adopt(self, source: Any) -> None:
        if source is None:
            return
        self._seekable = seekableSource(source)
        if self._seekable is not None:
            return
        if callable(getattr(source, "startProducing", None)):
            self._bodyProducer = source
        elif isinstance(source, AsyncIterable):
            self._asyncIterator = source.__aiter__()
        elif isinstance(source, Iterable):
            self._iterator = iter(source)
        else:
            raise TypeError(f"cannot stream from {type(source).__name__}")

    def _checkRanges(self, ranges: Iterable[tuple[int, int]] | None) -> list[tuple[int, int]]:
        if self._seekable is None:
            if ranges is not None:
                raise ValueError("only a random-access source can be sent in ranges")
            return []
        size = self._seekable.size
        if ranges is None:
            return [(0, size)] if size else []
        checked = []
        for start, end in ranges:
            if not 0 <= start <= end <= size:
                raise ValueError(f"range [{start}, {end}) is outside the object of {size} bytes")
            if end > start:
                checked.append((start, end))
        return checked

    def __repr__(self) -> str:
        return f"<Stream {self.streamId} {self.sentBytes}/{self.size} bytes sent>"

    # -- what the application sees --------------------------------------------

    def whenDone(self) -> Deferred[TransferResult]:
        """
        A L{Deferred} firing with the L{TransferResult} once the receiver
        confirmed it has everything (verified), or failing with
        L{IntegrityError}, L{StreamReset}, the source's error, or the reason
        the connection was lost.  Each call returns a new Deferred.
        """
        return self._outcome.wait()

    @property
    def done(self) -> bool:
        """Whether the stream has completed or failed."""
        return self._outcome.fired

    def abort(self, reason: str = "the sender abandoned the stream") -> None:
        """Abandon the stream: the receiver is told, and L{whenDone} fails with L{StreamReset}."""
        self._fail(StreamReset("cancelled", reason), tell="cancelled")

    # -- IConsumer: sequential sources write here -------------------------------

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """Take data from C{producer} (push if C{streaming}), paced by the stream's credit."""
        if self._producer is not None:
            raise RuntimeError(f"{producer!r} cannot register: {self._producer!r} is registered")
        self._producer, self._streamingProducer, self._producerPaused = producer, bool(streaming), False
        if self._state >= _SENDING:
            self._wantMore()

    def unregisterProducer(self) -> None:
        """Forget the producer (the stream goes on until L{finish})."""
        self._producer = None

    def write(self, data: bytes) -> None:
        """
        Queue C{data} to be sent.

        @raise RuntimeError: the stream was finished, or is random-access.
        """
        if self._finished or self._seekable is not None:
            raise RuntimeError("this stream takes no more data")
        if not data or self._outcome.fired:
            # A producer that has not yet seen stopProducing: nothing to keep.
            return
        data = bytes(data) if type(data) is not bytes else data
        self._buffer.append(data)
        self._buffered += len(data)
        if self._streamingProducer and self._producer is not None and self._buffered >= self._highWater():
            self._producerPaused = True
            self._producer.pauseProducing()
        if self._channel is not None and self._state == _SENDING:
            self._channel.wakeSoon(self)

    def finish(self) -> None:
        """No more data: the stream ends once what was written is sent."""
        self._finished = True
        if self._channel is not None and self._state == _SENDING:
            self._channel.wakeSoon(self)

    # -- the connection's side ----------------------------------------------------

    def _bind(self, channel: BulkChannel, streamId: int) -> None:
        if self._state != _NEW:
            raise RuntimeError("a Stream can be sent only once")
        self._channel, self.streamId, self._state = channel, streamId, _ANNOUNCED

    def _unbind(self) -> None:
        """The message announcing the stream was never sent: it may be sent again."""
        self._channel, self.streamId, self._state = None, None, _NEW

    def _granted(self, count: int) -> None:
        if self._state >= _ENDED:
            return
        self._credit += count
        if self._state == _ANNOUNCED:
            # The first grant is the receiver's whole window: send as soon as
            # a quarter of it is free (a receiver grants in such steps), so
            # several frames are in flight whatever the window.
            assert self._channel is not None
            self._minFrame = max(1, min(self._channel.options.grantStep, count // 4))
            self._start()
        assert self._channel is not None
        self._channel.wake(self)

    def _start(self) -> None:
        assert self._channel is not None
        self._state = _SENDING
        if self._sharedHasher is not None:
            self._hasher = self._sharedHasher
        elif self.digestName is not None:
            self._hasher = self._ownHasher(self._channel, self.digestName)
        if self._bodyProducer is not None:
            started = self._bodyProducer.startProducing(self)
            if self._producer is None:
                # It did not register a producer of its own: pause and resume it.
                self._producer, self._streamingProducer = self._bodyProducer, True
            started.addCallbacks(lambda _: self.finish(), self._sourceFailed)
        self._wantMore()

    def _ownHasher(self, channel: BulkChannel, algorithm: str) -> OrderedHasher:
        if self._seekable is None:
            return OrderedHasher(algorithm, None, channel.hashReactor)
        reactor = channel.hashReactor
        partial = list(self._ranges) != [(0, self._seekable.size)]
        if partial and reactor is None and IReactorThreads.providedBy(channel.clock):
            # The ranges not sent must be read back and hashed: not in the reactor thread.
            reactor = channel.clock
        return OrderedHasher(algorithm, self._seekable.read, reactor)

    def _highWater(self) -> int:
        return self._channel.options.chunkSize if self._channel is not None else 1 << 20

    def _sendOne(self) -> bool:
        """Send one data frame if credit, data and the hasher allow; end the stream when all is sent."""
        channel = self._channel
        if self._state != _SENDING or channel is None:
            return False
        if self._exhausted():
            self._end()
            return False
        if self._hashBacklog >= channel.options.hashBudget:
            return False
        try:
            frame = self._nextFrame(channel.options.chunkSize)
        except Exception as error:
            self._fail(error, tell="source-failed")
            return False
        if frame is None:
            return False
        offset, data = frame
        channel.sendData(self, offset, data)
        self.sentBytes += len(data)
        self._credit -= len(data)
        if self._hasher is not None:
            self._hashBacklog += len(data)
            self._hasher.offer(offset, data, self._hashReleased)
        if self._seekable is None:
            self._wantMore()
        return True

    def _nextFrame(self, chunkSize: int) -> tuple[int, bytes] | None:
        available = self._ranges[0][1] - self._ranges[0][0] if self._seekable is not None else self._buffered
        if not available:
            return None
        # A full chunk if the credit allows one, else as much as the credit
        # allows once that is at least a credit step: waiting for a whole
        # chunk of credit would let the pipe run dry between chunks.
        wanted = min(chunkSize, available, self._credit)
        if wanted < min(chunkSize, available, self._minFrame):
            return None
        if self._seekable is not None:
            return self._readRange(wanted)
        return self._takeBuffered(wanted)

    def _readRange(self, length: int) -> tuple[int, bytes]:
        assert self._seekable is not None
        start, end = self._ranges[0]
        data = self._seekable.read(start, length)
        if not data:
            raise IntegrityError(f"the source ended at {start} bytes, before its size of {self.size}")
        if start + len(data) >= end:
            self._ranges.popleft()
        else:
            self._ranges[0] = (start + len(data), end)
        return start, data

    def _takeBuffered(self, length: int) -> tuple[int, bytes]:
        buffer = self._buffer
        first = buffer[0]
        if len(first) > length:
            # Copy out one frame; keep the rest as a view, so a large write
            # is not copied again for every frame cut from it.
            view = memoryview(first)
            data = view[:length].tobytes()
            buffer[0] = view[length:]
        elif len(first) == length or len(buffer) == 1:
            head = buffer.popleft()
            data = head if type(head) is bytes else bytes(head)
        else:
            pieces, taken = [], 0
            while buffer and taken + len(buffer[0]) <= length:
                piece = buffer.popleft()
                pieces.append(piece)
                taken += len(piece)
            data = b"".join(pieces)
        offset = self._position
        self._position += len(data)
        self._buffered -= len(data)
        return offset, data

    def _exhausted(self) -> bool:
        if self._seekable is not None:
            return not self._ranges
        return self._finished and not self._buffered

    def _hashReleased(self, count: int) -> None:
        self._hashBacklog -= count
        if self._channel is not None and self._state == _SENDING:
            self._channel.wake(self)

    def _end(self) -> None:
        """Everything was sent: send END with the size and, once hashed, the digest."""
        self._state = _ENDING
        if self.size is None:
            self.size = self._position
        elif self._seekable is None and self._position != self.size:
            self._fail(StreamReset("size", f"the source gave {self._position} bytes, not {self.size}"), tell="size")
            return
        if self._hasher is None or self._hasher is self._sharedHasher:
            self._sendEnd(None)
            return
        self._hasher.finish(self.size).addCallbacks(self._sendEnd, self._sourceFailed)

    def _sendEnd(self, digest: bytes | None) -> None:
        if self._state != _ENDING or self._channel is None:
            return
        self._state = _ENDED
        self._ownDigest = digest
        self._channel.sendControl(END, self.streamId, self.size, digest)

    # -- pulling from sequential sources ---------------------------------------------

    def _wantMore(self) -> None:
        """Ask the source for more if less than a chunk is buffered."""
        if self._pulling or self._finished or self._seekable is not None or self._state != _SENDING:
            return
        self._pulling = True
        try:
            high = self._highWater()
            if self._producer is not None:
                self._resumeProducer(high)
            elif self._iterator is not None:
                self._pullIterator(high)
            elif self._asyncIterator is not None and not self._awaiting and self._buffered < high:
                self._pullAsync()
        finally:
            self._pulling = False

    def _resumeProducer(self, high: int) -> None:
        if self._buffered >= high:
            return
        if self._streamingProducer:
            if self._producerPaused:
                self._producerPaused = False
                self._producer.resumeProducing()
            return
        while self._producer is not None and self._buffered < high and not self._finished:
            before = self._position + self._buffered
            self._producer.resumeProducing()
            if self._position + self._buffered == before:
                break  # it will write later; write() wakes the stream

    def _pullIterator(self, high: int) -> None:
        try:
            while self._buffered < high:
                self.write(next(self._iterator))
        except StopIteration:
            self.finish()
        except Exception as error:
            self._sourceFailed(Failure(error))  # type: ignore[no-untyped-call]

    def _pullAsync(self) -> None:
        self._awaiting = True
        Deferred.fromCoroutine(self._next()).addCallbacks(self._gotAsync, self._sourceFailed)

    async def _next(self) -> Any:
        try:
            return await self._asyncIterator.__anext__()
        except StopAsyncIteration:
            return None

    def _gotAsync(self, data: bytes | None) -> None:
        self._awaiting = False
        if self._state != _SENDING:
            return
        if data is None:
            self.finish()
            return
        self.write(data)
        self._wantMore()

    def _sourceFailed(self, failure: Failure) -> None:
        self._awaiting = False
        error = failure.value
        assert error is not None
        self._fail(error, tell="source-failed")

    # -- the receiver's answer ------------------------------------------------------

    def _doneReceived(self, digest: bytes | None) -> None:
        if self._outcome.fired:
            return
        self._state = _FINISHED
        own = self._ownDigest
        result = TransferResult(self.size or 0, own if own is not None else digest, self.digestName, self.sentBytes)
        self._close()
        self._outcome.succeed(result)

    def _cancelReceived(self, code: str, message: str) -> None:
        error: Exception = IntegrityError(message) if code == "integrity" else StreamReset(code, message)
        self._fail(error)

    def _connectionLost(self, reason: Failure) -> None:
        self._fail(reason)

    def _callFailed(self, failure: Failure) -> None:
        """The call carrying this stream failed: if the stream never started, nobody will receive it."""
        if self._state == _ANNOUNCED:
            self._fail(StreamReset("cancelled", f"the call carrying the stream failed: {failure.getErrorMessage()}"))
        elif isinstance(failure.value, CancelledError) and self._state < _FINISHED:
            # The caller gave up on the call: the receiver is told to drop
            # what it holds, and this side closes its source.
            self._fail(StreamReset("cancelled", "the call carrying the stream was cancelled"), tell="cancelled")

    def _fail(self, reason: BaseException | Failure, tell: str | None = None) -> None:
        if self._outcome.fired:
            return
        channel = self._channel
        if tell is not None and channel is not None and self._state >= _ANNOUNCED:
            text = reason.getErrorMessage() if isinstance(reason, Failure) else str(reason)
            channel.sendControl(ABORT, self.streamId, tell, text[:512])
        self._state = _FINISHED
        if self._producer is not None:
            producer, self._producer = self._producer, None
            stop = getattr(producer, "stopProducing", None)
            if stop is not None:
                stop()
        self._close()
        self._outcome.fail(reason)

    def _close(self) -> None:
        if self._hasher is not None and self._hasher is not self._sharedHasher:
            self._hasher.abort()
        if self._channel is not None:
            self._channel.forget(self)
        if self._seekable is not None:
            self._seekable.close()


# -- receiving ----------------------------------------------------------------------------


class IncomingStream:
    """
    A stream the peer is sending: what a remote method receives for a
    L{Stream} argument, or a caller for a L{Stream} result.  Nothing is sent
    until L{receive} names where the bytes go; dropping an incoming stream
    unread (or L{cancel}) tells the sender it is not wanted.

    @ivar size: the announced size, or C{None} if the sender does not know it.
    @ivar digestName: the digest the sender will send, or C{None}.
    @ivar streamId: the sender's id for it on this connection.
    """

    def __init__(self, channel: BulkChannel, streamId: int, size: int | None, digestName: str | None) -> None:
        self._channel = channel
        self.streamId = streamId
        self.size = size
        self.digestName = digestName
        self._receiving: _Receiving | None = None
        self._dropped = weakref.finalize(self, channel.droppedUnread, streamId)
        self._dropped.atexit = False

    def __repr__(self) -> str:
        return f"<IncomingStream {self.streamId} of {self.size} bytes>"

    @property
    def broker(self) -> Any:
        """The connection (a L{protocols.bulk.BulkBroker}) the stream arrives on."""
        return self._channel.protocol

    @property
    def receivedBytes(self) -> int:
        """Payload bytes received so far."""
        return self._receiving.received if self._receiving is not None else 0

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
        if self._receiving is not None:
            raise RuntimeError("an incoming stream can be received only once")
        self._dropped.detach()
        receiving = _Receiving(self._channel, self, makeSink(sink), verify, window)
        self._receiving = receiving
        return receiving.start()

    def cancel(self, reason: str = "the receiver cancelled the stream") -> None:
        """Tell the sender the stream is not wanted (or no longer wanted)."""
        self._dropped.detach()
        if self._receiving is not None:
            self._receiving.abandon(StreamReset("cancelled", reason), "cancelled")
        else:
            self._channel.cancelledUnread(self.streamId)
            self._channel.sendControl(CANCEL, self.streamId, "cancelled", reason)


class _Receiving:
    """The receiving side of one stream: routing pieces to the sink, credit, verification."""

    def __init__(
        self, channel: BulkChannel, handle: IncomingStream, sink: Sink, verify: bool, window: int | None
    ) -> None:
        self.channel = channel
        # The handle's fields, not the handle: it holds this object, and a
        # finished pair must go without a garbage collection.
        self.streamId = handle.streamId
        self.size = handle.size
        self.digestName = handle.digestName
        self.sink = sink
        algorithm = handle.digestName if verify and not sink.verifies else None
        self.hasher = OrderedHasher(algorithm, None, channel.hashReactor) if algorithm is not None else None
        self.tuner: WindowTuner | None = None
        # A window asked for by name is kept; the connection's may grow.
        tunable = window is None and channel.autotuning
        if window is None:
            window = channel.options.window
            if self.hasher is not None and channel.hashReactor is None:
                # Hashing in the reactor thread about halves how fast this
                # side takes bytes in; a call waits behind what is in flight,
                # so keep that to the same time, not the same bytes.
                window //= 2
        self.window = window
        # Steps stay those of the starting window: a grown window only
        # means more steps in flight.
        self.grantStep = min(channel.options.grantStep, max(self.window // 4, 1))
        if tunable:
            # A sender sends no frame smaller than its credit step (a
            # quarter of the first grant, at most grantStep): less than a
            # step left means it ran out of credit.
            self.tuner = WindowTuner(window, channel.options.maxWindow, self.grantStep, channel.roundTrips)
        self.announced = 0  # body bytes announced by frame headers
        self.received = 0
        self.sinkReleased = 0
        self.hashReleased = 0
        self.granted = 0
        self.startedAt = 0.0  # when the first grant was sent
        self.ended: tuple[int | None, bytes | None] | None = None
        self.finishing = False
        self.outcome = _Outcome()

    def start(self) -> Deferred[TransferResult]:
        done: Deferred[TransferResult] = self.outcome.wait(self._receiveCancelled)
        if not self.channel.up:
            self.outcome.fail(ConnectionDone("the stream's connection is closed"))
            return done
        try:
            self.sink.start(self.size, self._sinkFailed)
        except Exception as error:
            self.abandon(error, "sink-failed")
            return done
        self.channel.receiving(self)
        self.startedAt = self.channel.clock.seconds()
        self._grant(self.window)
        return done

    def _grant(self, count: int) -> None:
        self.granted += count
        if self.tuner is not None:
            self.tuner.granted(self.channel.clock.seconds(), self.granted)
        self.channel.sendControl(GRANT, self.streamId, count)

    # -- data ----------------------------------------------------------------------

    def frameStarting(self, offset: int, length: int) -> bool:
        """
        A frame's header arrived: check it against flow control and the
        stream's shape.  Returns whether its body should be taken.

        @raise FlowControlError: (from the channel) if it exceeds the credit.
        """
        size = self.size
        if self.sink.sequential and offset != self.announced:
            self.abandon(StreamReset("out-of-order", f"data at {offset}, expected {self.announced}"), "out-of-order")
            return False
        if size is not None and offset + length > size:
            self.abandon(StreamReset("size", f"data past the announced size of {size} bytes"), "size")
            return False
        tuner = self.tuner
        now = self.channel.clock.seconds()
        if tuner is not None and self.announced == 0:
            # The sender sent nothing before the first grant: a round trip.
            self.channel.roundTrips.sample(now - self.startedAt)
        self.announced += length
        if tuner is not None and tuner.frameArrived(now, self.announced, self.received):
            # Grant the difference now: the sender is waiting for it.
            self.window = tuner.window
            self._released()
        return True

    def piece(self, offset: int, data: bytes) -> None:
        if self.outcome.fired:
            return
        self.received += len(data)
        try:
            self.sink.write(offset, data, self._sinkRelease)
        except Exception as error:
            self.abandon(error, "sink-failed")
            return
        if self.hasher is not None:
            self.hasher.offer(offset, data, self._hashRelease)

    def _sinkRelease(self, count: int) -> None:
        self.sinkReleased += count
        self._released()

    def _hashRelease(self, count: int) -> None:
        self.hashReleased += count
        self._released()

    def _released(self) -> None:
        if self.outcome.fired:
            return
        released = self.sinkReleased
        if self.hasher is not None:
            # Hashing may lag behind the sink by up to hashBudget bytes
            # without holding up credit (those bytes have arrived: a cut
            # would not lose them).
            released = min(released, self.hashReleased + self.channel.options.hashBudget)
        if self.ended is None:
            more = released + self.window - self.granted
            if more >= self.grantStep:
                self._grant(more)
        elif released == self.received:
            self._finish()

    def endReceived(self, size: int | None, digest: bytes | None) -> None:
        self.ended = (size, digest)
        self._released()

    # -- the end -------------------------------------------------------------------------

    def _finish(self) -> None:
        if self.finishing:
            return
        self.finishing = True
        assert self.ended is not None
        size, digest = self.ended
        if size is None or (not self.sink.verifies and self.received != size):
            self.abandon(StreamReset("size", f"received {self.received} bytes, the sender said {size}"), "size")
            return
        if self.hasher is None:
            self._verified(None, size)
            return
        if digest is None:
            self.abandon(IntegrityError("the sender sent no digest"), "integrity")
            return
        self.hasher.finish(size).addCallbacks(
            self._hashed, lambda f: self.abandon(f.value, "integrity"), callbackArgs=(size, digest)
        )

    def _hashed(self, actual: bytes, size: int, expected: bytes) -> None:
        if actual != expected:
            error = IntegrityError(
                f"{self.digestName} mismatch: sent {expected.hex()}, received {actual.hex()}",
                expected.hex(),
                actual.hex(),
            )
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
        if self.outcome.fired:
            return
        self.channel.sendControl(DONE, self.streamId, digest)
        self.channel.forgetIncoming(self)
        algorithm = self.digestName if digest is not None else None
        self.sink = _SPENT
        self.outcome.succeed(TransferResult(size, digest, algorithm, self.received))

    def _receiveCancelled(self) -> None:
        self.abandon(StreamReset("cancelled", "the receiver cancelled the transfer"), "cancelled")

    def _sinkFailed(self, error: BaseException) -> None:
        self.abandon(error, "sink-failed")

    def abandon(self, error: BaseException, code: str | None) -> None:
        """Fail the transfer; tell the sender (with C{code}) unless the connection is gone."""
        if self.outcome.fired:
            return
        if code is not None:
            self.channel.sendControl(CANCEL, self.streamId, code, str(error)[:512])
        self._drop(error)

    def abortReceived(self, code: str, message: str) -> None:
        self._drop(IntegrityError(message) if code == "integrity" else StreamReset(code, message))

    def connectionLost(self, reason: Failure) -> None:
        error = reason.value
        assert error is not None
        self._drop(error)

    def _drop(self, error: BaseException) -> None:
        if self.outcome.fired:
            return
        self.channel.forgetIncoming(self)
        if self.hasher is not None:
            self.hasher.abort()
        sink, self.sink = self.sink, _SPENT
        try:
            sink.fail(error)
        finally:
            del sink  # this frame may outlive the call (see BulkChannel.connectionLost)
            self.outcome.fail(error)


_SPENT = Sink()
"""The sink of a transfer that is over: the real one may hold this transfer
(its C{failed} callback), and is let go so that neither waits for a garbage
collection."""
