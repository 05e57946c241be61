# -*- test-case-name: tests.protocols.bulk.test_states,tests.protocols.bulk.test_typed_streams -*-
"""Sending: a L{Stream}, what a sender sends, and its states.

Contract: a L{Stream} sends nothing until the receiver's HELLO is known;
then it starts with the initial window as credit, never sends more than it
was granted, one data frame (one transport write) per chunk, and at most one
chunk ahead of what it can send from a sequential source.  It hashes what it
sends (off the reactor thread when the connection's reactor has threads) and
ends with the object's size and digest; its result fires only once the
receiver confirmed the data verified.  Its life is the sending table of
L{framing.bulk._states}.

It reads from one L{protocols.bulk._sources.StreamSource} and talks to its
connection only through an L{IStreamHost}.  The source may be random-access
(a path, a seekable binary file, a bytes-like, a L{SeekableSource}: sent
from any offset, in part with C{ranges}, so transfers resume and stripe), or
sequential: an (async) iterable of C{bytes}, an C{IBodyProducer} (its Deferred ends the stream), or nothing
(the stream is then an L{IConsumer} that producers write to, and
L{Stream.finish} ends it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.interfaces import IConsumer
from twisted.python.failure import Failure
from zope.interface import implementer

from framing.bulk._connection import SendSide, resetMessage
from framing.bulk._digests import NEGOTIATED, checkAlgorithm
from framing.bulk._errors import StreamReset
from framing.bulk._states import ON_WIRE, SendEvent, SendState
from framing.bulk._wire import ABORT

from ._integrity import OrderedHasher
from ._interfaces import IStreamHost
from ._outcome import Outcome, TransferResult
from ._sources import StreamSource, openSource

NEW, ANNOUNCED, SENDING, ENDING, ENDED, DELIVERED, FAILED = SendState


@implementer(IConsumer)
class Stream(SendSide):
    """
    A byte stream to send: put it in the arguments of a remote call (an
    upload) or return it from a remote method (a download).  Each instance
    is sent once.  What it reads from: see the module docstring.

    @ivar size: the object's size if known.
    @ivar digestName: the digest sent at the end, or C{None}; by default the
        one both ends choose (L{NEGOTIATED} until the connection has).
    @ivar sentBytes: payload bytes sent so far.
    @ivar streamId: the id on the connection once sent, or C{None}.
    @ivar state: its L{SendState}.
    @ivar source: the L{StreamSource} it reads from.
    @ivar credit: its L{SendCredit}: what the receiver granted, and the
        frames that allows (L{framing.bulk._credit}).
    """

    def __init__(
        self,
        source: Any = None,
        *,
        size: int | None = None,
        ranges: Iterable[tuple[int, int]] | None = None,
        digest: str | None = NEGOTIATED,
        hasher: OrderedHasher | None = None,
    ) -> None:
        """
        @param size: the length of a sequential source, if known (checked).
        @param ranges: for a random-access source, the byte ranges to send
            (default: all of it); the digest still covers the whole object.
        @param digest: the end-to-end check: L{NEGOTIATED} (the default,
            the first digest both ends have), a name this side computes
            (C{"blake3"}, a C{hashlib} name) that the receiver must then
            accept, or C{None} for none.
        @param hasher: an L{OrderedHasher} shared with other streams of the
            same object (stripes, resumed attempts): this stream offers what
            it sends to it and sends no digest itself; its owner finishes it.
        @raise ValueError: C{ranges} for a sequential source, or ranges
            outside the object.
        @raise DigestUnavailable: C{digest} cannot be computed here.
        """
        self.source: StreamSource = openSource(source, size, ranges)
        self.size = self.source.size
        wanted = None if hasher is not None else digest
        self.digestName = wanted if wanted == NEGOTIATED else checkAlgorithm(wanted)
        self._sharedHasher = hasher
        self._hasher: OrderedHasher | None = None
        self._host: IStreamHost | None = None
        SendSide.__init__(self)
        self._hashBacklog = 0
        self.sentBytes = 0
        self._ownDigest: bytes | None = None
        self._outcome = Outcome()

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

    @property
    def failure(self) -> Failure | None:
        """Why the stream failed, once it has; else C{None}."""
        return self._outcome.failure

    @property
    def buffered(self) -> int:
        """Bytes a sequential source produced that are not sent yet."""
        return self.source.buffered

    def abort(self, reason: str = "the sender abandoned the stream") -> None:
        """Abandon the stream: the receiver is told, and L{whenDone} fails with L{StreamReset}."""
        self._fail(StreamReset("cancelled", reason), tell="cancelled")

    # -- IConsumer: sequential sources write here -------------------------------

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """Take data from C{producer} (push if C{streaming}), paced by the stream's credit."""
        self.source.registerProducer(producer, streaming)

    def unregisterProducer(self) -> None:
        """Forget the producer (the stream goes on until L{finish})."""
        self.source.unregisterProducer()

    def write(self, data: bytes) -> None:
        """
        Queue C{data} to be sent.

        @raise RuntimeError: the stream was finished, or is random-access.
        """
        self.source.write(data)

    def finish(self) -> None:
        """No more data: the stream ends once what was written is sent."""
        self.source.finish()

    # -- ISourceOwner: what the source tells -------------------------------------------

    def sourceReady(self) -> None:
        """The source has more (or ended): send it at the end of this turn."""
        if self._host is not None and self.state is SENDING:
            self._host.wakeSoon(self)

    def sourceFailed(self, error: BaseException) -> None:
        """The source failed: so does the stream, and the receiver is told."""
        self._fail(error, tell="source-failed")

    # -- ISendingStream: what the channel asks ----------------------------------------

    def attach(self, host: IStreamHost) -> None:
        """Announced (L{framing.bulk._connection.StreamTable.reserve}): C{host} sends it."""
        self._host = host
        self.source.limit(host.options.chunkSize)

    @property
    def waitingForCredit(self) -> bool:
        """Whether the stream is sending and waits for the receiver's credit (its sink holds the window)."""
        return self.state is SENDING and self.credit.short() and not self.source.exhausted()

    def refuse(self, error: BaseException) -> None:
        """No digest fits both sides: the stream fails before any data is sent, and the receiver is told."""
        self._fail(error, tell="digest-unavailable")

    def detach(self) -> None:
        """Taken back (L{framing.bulk._connection.StreamTable.takeBack}): no host sends it."""
        self._host = None

    def initialCredit(self, count: int) -> None:
        """The receiver's initial window (from its HELLO): the stream starts with C{count} bytes of credit."""
        self.grantReceived(count, heard=False)

    def grantReceived(self, count: int, heard: bool = True) -> None:
        """
        The receiver granted C{count} bytes (a grant says it receives); a
        first credit starts the stream (and sends at once), later ones send
        at the end of the reactor turn, so that grants read together make
        one frame.
        """
        host = self._host
        started = self.creditArrived(count, host.options.grantStep if host is not None else 1, heard)
        if started is None:
            return
        assert host is not None
        if started:
            self._start(host)
            host.wake(self)
        else:
            # At the end of the turn: grants that came in one read (a
            # receiver grants per piece, and a read may hold several
            # frames) make one frame, not one each.
            host.wakeSoon(self)

    def _start(self, host: IStreamHost) -> None:
        if self._sharedHasher is not None:
            self._hasher = self._sharedHasher
        elif self.digestName is not None:
            self._hasher = self.source.makeHasher(self.digestName, host.hashReactor, host.clock)
        self.source.begin(self, self)

    def sendOne(self) -> bool:
        """Send one data frame if credit, data and the hasher allow; end the stream when all is sent."""
        host = self._host
        if self.state is not SENDING or host is None:
            return False
        source = self.source
        if source.exhausted():
            self._end()
            return False
        if self._hashBacklog >= host.options.hashBudget:
            return False
        try:
            frame = self.credit.take(source, host.options.chunkSize)
        except Exception as error:
            self._fail(error, tell="source-failed")
            return False
        if frame is None:
            return False
        offset, data = frame
        host.sendData(self.streamId or 0, offset, data)
        self.sentBytes += len(data)
        if self._hasher is not None:
            self._hashBacklog += len(data)
            self._hasher.offer(offset, data, self._hashReleased)
        source.refill()
        return True

    def _hashReleased(self, count: int) -> None:
        self._hashBacklog -= count
        if self._host is not None and self.state is SENDING:
            self._host.wake(self)

    def _end(self) -> None:
        """Everything was sent: send END with the size and, once hashed, the digest."""
        try:
            size = self.allSent(self.source.given())
        except StreamReset as error:
            self._fail(error, tell=error.code)
            return
        if self._hasher is None or self._hasher is self._sharedHasher:
            self._sendEnd(None)
            return
        self._hasher.finish(size).addCallbacks(self._sendEnd, self._hashFailed)

    def _hashFailed(self, failure: Failure) -> None:
        error = failure.value
        assert error is not None
        self._fail(error, tell="source-failed")

    def _sendEnd(self, digest: bytes | None) -> None:
        if self.state is not ENDING or self._host is None:
            return
        self._ownDigest = digest
        self._host.sendControl(*self.endMessage(digest))

    def doneReceived(self, digest: bytes | None) -> None:
        """The receiver confirmed everything arrived (verified): the stream succeeds."""
        if self._outcome.fired:
            return
        self.advance(SendEvent.DONE)
        own = self._ownDigest
        result = TransferResult(self.size or 0, own if own is not None else digest, self.digestName, self.sentBytes)
        self._close()
        self._outcome.succeed(result)

    def cancelReceived(self, error: BaseException) -> None:
        """The receiver gave up on the stream: it fails with C{error}, what its CANCEL means."""
        self._fail(error)

    def connectionLost(self, reason: Failure) -> None:
        """The connection is gone: the stream fails with its reason."""
        self._fail(reason)

    def callFailed(self, failure: Failure) -> None:
        """The call carrying this stream failed: if the receiver never said it receives, nobody will."""
        heard = self.heard
        giveUp, tell = self.callFailure(isinstance(failure.value, CancelledError))
        if not giveUp:
            return
        # Unheard, the peer may have refused the call before it saw the
        # stream; else the caller gave up on the call: the receiver is told
        # to drop what it holds, and this side closes its source.
        why = "was cancelled" if heard else f"failed: {failure.getErrorMessage()}"
        self._fail(StreamReset("cancelled", f"the call carrying the stream {why}"), tell)

    # -- the end -------------------------------------------------------------------------

    def _fail(self, reason: BaseException | Failure, tell: str | None = None) -> None:
        if self._outcome.fired:
            return
        host = self._host
        if tell is not None and host is not None and self.state in ON_WIRE:
            error = reason.value if isinstance(reason, Failure) else reason
            host.sendControl(*resetMessage(ABORT, self.streamId or 0, tell, error or Exception()))
        self.advance(SendEvent.FAIL)
        self.source.stop()
        self._close()
        self._outcome.fail(reason)

    def _close(self) -> None:
        if self._hasher is not None and self._hasher is not self._sharedHasher:
            self._hasher.abort()
        if self._host is not None:
            self._host.streamOver(self)
        self.source.close()
