# -*- test-case-name: tests.framing.bulk.test_streams,tests.protocols.bulk.test_states -*-
"""A client's bulk streams on one RPC connection, sans-IO: what the clients without Twisted carry streams with.

Contract: a L{ClientStreams} is the bulk layer of one
L{framing.rpc._session.ClientSession} (its extension): it sends this side's
HELLO before the first CALL, announces each L{SendStream} passed in a call
and sends its data frames as credit allows (the GRANTs of one read make
one frame: frames are made when the output is asked for), then END with
its digest.  An L{IncomingTransfer} stands in a result for each stream
the server announces; L{ClientStreams.startReceiving} names its sink, and
the END is checked (size, digest) before DONE is sent.  This side's initial window is
0, so nothing is held for a stream nobody took.  Bad input is typed
(L{FlowControlError}, L{StreamIdReused}, L{DigestRefused},
L{IntegrityError}); losing the connection settles every receiver.  No I/O,
no threads, no clock.

Cost: one dict lookup per frame and per control message; memory per stream
O(1); one round trip before each stream's data.

Design: docs/design/bulk.md
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Protocol

from zope.interface import implementer

from .._errors import EncodingError
from ..slicing._interfaces import ISlicer
from ..slicing._registry import Registry
from ._connection import (
    ReceiveCredit,
    ReceiveSide,
    SendSide,
    StreamTable,
    cancelCode,
    digestProblem,
    frameProblem,
    resetMessage,
)
from ._credit import StreamSource
from ._digests import NEGOTIATED, DigestUnavailable, availableDigests, newHash
from ._errors import IllegalTransition, StreamReset
from ._hello import Hello
from ._states import ReceiveEvent, ReceiveState, SendEvent, SendState
from ._wire import (
    ABORT,
    CANCEL,
    CONTROL_OPEN_TYPE,
    DATA_OPEN_TYPE,
    STREAM_OPEN_TYPE,
    AnnouncementUnslicer,
    Control,
    ControlSlicer,
    ControlUnslicer,
    DataUnslicer,
    StreamAnnouncement,
    dataFramePieces,
    grantMessage,
)

KiB = 1024
MiB = 1024 * KiB
CHUNK_SIZE = 1 * MiB
"""Payload bytes per data frame sent (the Twisted sender's)."""
WINDOW = 1920 * KiB
"""Bytes a receiving stream lets the server have in flight (the Twisted receiver's default window)."""
GRANT_STEP = 480 * KiB
"""Credit goes back in steps of at least this (a quarter of L{WINDOW})."""


class Sink(Protocol):
    """Where an incoming stream's bytes go: each piece at its offset, as it is decoded."""

    def write(self, offset: int, data: bytes | memoryview) -> None:
        """Store C{data} at C{offset} now (a view into a read is valid only during the call)."""


class SendStream(SendSide):
    """
    A stream to pass as an argument of a call on a client without Twisted:
    its bytes are C{source}'s (C{available()}, C{take(count)} giving
    C{(offset, data)}), announced with C{size} and checked with C{digest}
    (a digest name, L{NEGOTIATED} for the first both sides compute, or
    C{None}: a stream of ranges, checked by its receiver otherwise).

    @ivar state: its L{SendState}.
    @ivar sentBytes: payload bytes sent so far.
    @ivar failure: why it failed, once it has.
    @ivar digestName: the digest announced (settled once the server's HELLO came).
    @ivar callId: the request id of the call that announced it (0: none waits for an answer).
    """

    def __init__(self, source: StreamSource, size: int | None, digest: str | None = NEGOTIATED) -> None:
        self.source = source
        self.size = size
        self.digestName = digest
        SendSide.__init__(self)
        self.sentBytes = 0
        self.failure: BaseException | None = None
        self.callId = 0
        self._hash: Any = None
        self._owner: ClientStreams | None = None

    def __repr__(self) -> str:
        return f"<SendStream {self.streamId} {self.state.value}, {self.sentBytes} bytes sent>"

    # -- framing.bulk._connection.SendingEnd: what dispatch calls ----------------

    def grantReceived(self, count: int) -> None:
        """The server granted C{count} more bytes."""
        assert self._owner is not None
        self._owner._granted(self, count)

    def doneReceived(self, digest: bytes | None) -> None:
        """The server has every byte, verified."""
        assert self._owner is not None
        self._owner._delivered(self)

    def cancelReceived(self, error: BaseException) -> None:
        """The server gave the stream up."""
        assert self._owner is not None
        self._owner._senderFailed(self, error)


class IncomingTransfer(ReceiveSide):
    """
    A stream the server announced in an answer, as a client without Twisted
    receives it (its connection's C{receive}).

    @ivar streamId: the server's id for it.
    @ivar size: the announced size, or C{None}.
    @ivar digestName: the digest it is checked with, or C{None}.
    @ivar state: its L{ReceiveState}.
    @ivar receivedBytes: payload bytes received so far.
    @ivar failure: why it failed, once it has.
    """

    def __init__(self, streamId: int, size: int | None, digestName: str | None) -> None:
        self.streamId = streamId
        self.size = size
        self.digestName = digestName
        ReceiveSide.__init__(self)
        self.receivedBytes = 0
        self.failure: BaseException | None = None
        self._sink: Sink | None = None
        self._waiter: Any = None
        self._hash: Any = None
        self._credit = ReceiveCredit(WINDOW, GRANT_STEP)
        self._owner: ClientStreams | None = None

    def __repr__(self) -> str:
        return f"<IncomingTransfer {self.streamId} of {self.size} bytes, {self.state.value}>"

    # -- framing.bulk._connection.ReceivingEnd: what dispatch calls ----------------

    def endReceived(self, size: int | None, digest: bytes | None) -> None:
        """The server sent everything."""
        assert self._owner is not None
        self._owner._ended(self, size, digest)

    def abortReceived(self, error: BaseException) -> None:
        """The server gave the stream up."""
        assert self._owner is not None
        self._owner._fail(self, error)


@implementer(ISlicer)
class _SendStreamSlicer:
    """Announces a L{SendStream} where it stands in a message: OPEN "bulk.stream", id, size, digest name, CLOSE."""

    def __init__(self, streams: ClientStreams) -> None:
        self.streams = streams

    def slice(self, obj: SendStream, encoder: Any) -> None:
        streamId = self.streams.announcing(obj)
        encoder.write_container(STREAM_OPEN_TYPE, obj, (streamId, obj.size, obj.digestName))


class ClientStreams:
    """
    The streams of one client connection, both ways (see the module docstring).

    @ivar hello: both sides' HELLOs (L{framing.bulk._hello.Hello}).
    @ivar digests: the digests this side computes and accepts, in its order of preference.
    @ivar startWindow: the initial window of this side's HELLO: 0 (see the module docstring).
    """

    controlTypes: tuple[type, ...] = (Control,)
    """The top-level objects the session hands to L{received}: bulk's control messages."""

    def __init__(self, digests: Sequence[str] | None = None) -> None:
        """@param digests: what this side offers (default: L{availableDigests}, BLAKE3 first when installed)."""
        self.digests = tuple(digests) if digests is not None else availableDigests()
        self.startWindow = 0
        self.hello = Hello()
        self.streams: StreamTable[SendStream, IncomingTransfer] = StreamTable()
        self._announcing: list[SendStream] = []
        self._output: list[bytes] = []
        self._pumpDue = False
        self._settled: list[Any] = []
        self._encoder: Any = None

    # -- the session's hooks (framing.rpc._session.SessionExtension) ----------

    def install(self, registry: Registry, encoder: Any) -> None:
        """Add the bulk open types to the connection's C{registry}; C{encoder} writes control messages."""
        self._encoder = encoder
        registry.add_slicer(SendStream, _SendStreamSlicer(self))
        registry.add_slicer(Control, ControlSlicer())
        registry.add_unslicer(CONTROL_OPEN_TYPE, lambda limits: ControlUnslicer(limits, self._helloDecoded))
        registry.add_unslicer(DATA_OPEN_TYPE, lambda limits: DataUnslicer(limits, self._dataStarting))
        registry.add_unslicer(STREAM_OPEN_TYPE, lambda limits: AnnouncementUnslicer(limits, self._announced))

    def messageEncoded(self, data: bytes, requestId: int = 0) -> bytes:
        """
        A message was encoded whole (the CALL of C{requestId}, if it waits
        for an answer): its bytes, after this side's HELLO if none was sent
        yet, with the streams it announced now live (and their first frames
        after it, if the server's credit is known).
        """
        hello = self.hello.first(self)
        if hello is not None:
            data = self._control(hello) + data
        announcing = self._announcing
        if announcing:
            for stream in announcing:
                stream.callId = requestId
                if self.hello.peerDigests is not None:
                    self._start(stream)
            announcing.clear()
            self._pump()
        if self._output:
            data += self.dataToSend()
        return data

    def messageDropped(self) -> None:
        """The message being encoded was not sent: the streams it announced go back to new (their ids unused)."""
        for stream in self._announcing:
            self.streams.takeBack(stream, _idOf(stream))
        self._announcing.clear()

    def received(self, obj: Any) -> bool:
        """A top-level object of L{controlTypes}, or any other the session does not take: C{True} if it was bulk's."""
        if type(obj) is not Control:
            return False
        # A HELLO was taken as it was decoded (_helloDecoded); a well-formed one is answered with this side's, if it
        # did not go first (Hello.first).
        if self.streams.dispatch(obj, self.hello.peerDigests is not None) and self.hello.peerDigests is not None:
            hello = self.hello.first(self)
            if hello is not None:
                self._output.append(self._control(hello))
        return True

    def callFailed(self, requestId: int, cancelled: bool) -> None:
        """
        Call C{requestId} failed (C{cancelled}: its caller gave up on it):
        each stream its CALL announced does as L{SendSide.callFailure} says
        (5.5.2: one the server never granted is given up, with ABORT
        C{cancelled} once it began sending).  O(streams sending).
        """
        for stream in [stream for stream in self.streams.sending.values() if stream.callId == requestId]:
            giveUp, tell = stream.callFailure(cancelled)
            if not giveUp:
                continue
            why = "was cancelled" if stream.heard else "failed"
            error = StreamReset("cancelled", f"the call carrying the stream {why}")
            if tell is None:
                self._senderFailed(stream, error)
            else:
                self._abort(stream, tell, error)

    def takeSettled(self) -> list[Any]:
        """The receivers settled since last asked, as C{(waiter, result, error)}; once."""
        settled, self._settled = self._settled, []
        return settled

    def dataToSend(self) -> bytes:
        """Control messages and data frames waiting to be sent; once."""
        return b"".join(self.piecesToSend())

    def piecesToSend(self) -> list[bytes]:
        """L{dataToSend} as pieces in order, each data frame's body by reference (not copied); once."""
        if self._pumpDue:
            self._pumpDue = False
            self._pump()
        output = self._output
        if not output:
            return []
        pieces = output[:]  # (the list itself is shared with what appends to it)
        output.clear()
        return pieces

    def ended(self, reason: BaseException) -> list[Any]:
        """The connection ended: every stream fails with C{reason}; the receivers waited for, settled."""
        for stream in self.streams.sending.values():
            stream.advance(SendEvent.FAIL)
            stream.failure = reason
        self.streams.sending.clear()
        for incoming in list(self.streams.receiving.values()):
            self._fail(incoming, reason)
        self._output.clear()
        self._pumpDue = False
        return self.takeSettled()

    # -- sending streams -------------------------------------------------------

    def announcing(self, stream: SendStream) -> int:
        """
        C{stream} is being announced in a message: its id
        (L{StreamTable.reserve}), live once the message is encoded whole.

        @raise framing.EncodingError: it was announced before.
        @raise DigestUnavailable: the server computes no digest the stream could be checked with.
        """
        try:
            streamId = self.streams.reserve(stream, self.hello, self.digests)
        except IllegalTransition as error:
            raise EncodingError(f"{stream!r} was already sent; a stream is sent once") from error
        stream._owner = self
        self._announcing.append(stream)
        return streamId

    def _helloDecoded(self, control: Control) -> None:
        """The server's HELLO, as soon as it is decoded: streams announced meanwhile get their digest and credit."""
        hello = self.hello
        if hello.peerDigests is not None or not hello.decoded(control):
            return
        for stream in list(self.streams.sending.values()):
            self._start(stream)
        self._pump()

    def _start(self, stream: SendStream) -> None:
        """The server's HELLO is known: C{stream} gets its digest and the initial window (or is given up)."""
        try:
            window = stream.helloKnown(self.hello, self.digests)
        except DigestUnavailable as error:
            self._abort(stream, "digest-unavailable", error)
            return
        if window:
            self._credited(stream, window, heard=False)

    def _credited(self, stream: SendStream, count: int, heard: bool) -> bool:
        """Credit for C{stream} (L{SendSide.creditArrived}); whether it changed anything."""
        started = stream.creditArrived(count, GRANT_STEP, heard)
        if started and stream.digestName is not None:
            stream._hash = newHash(stream.digestName)
        return started is not None

    def _delivered(self, stream: SendStream) -> None:
        stream.advance(SendEvent.DONE)
        self.streams.sending.pop(_idOf(stream))

    def _granted(self, stream: SendStream, count: int) -> None:
        # Sent when the output is next asked for (piecesToSend: after the read that brought the GRANT), as the
        # Twisted sender sends at the end of the reactor turn: grants read together make one frame, not one each.
        if self._credited(stream, count, heard=True):
            self._pumpDue = True

    def _pump(self) -> None:
        """Every sending stream's frames that its credit allows, then END for a stream whose source is spent."""
        for streamId, stream in list(self.streams.sending.items()):
            if stream.state is not SendState.SENDING:
                continue
            credit, source, output = stream.credit, stream.source, self._output
            try:
                while True:
                    frame = credit.take(source, CHUNK_SIZE)
                    if frame is None:
                        break
                    offset, data = frame
                    if stream._hash is not None:
                        stream._hash.update(data)
                    output.extend(dataFramePieces(streamId, offset, data))
                    stream.sentBytes += len(data)
                spent = not source.available()
            except Exception as error:
                self._abort(stream, "source-failed", error)
                continue
            if spent:
                # A sized source is of ranges of an object of that size (framing.bulk._credit.StreamSource).
                try:
                    stream.allSent(None if stream.size is not None else stream.sentBytes)
                except StreamReset as error:
                    self._abort(stream, error.code, error)
                    continue
                digest = None if stream._hash is None else stream._hash.digest()
                output.append(self._control(stream.endMessage(digest)))

    def _abort(self, stream: SendStream, code: str, error: BaseException) -> None:
        """Give up sending C{stream}: ABORT with C{code}; it fails with C{error}."""
        self._output.append(self._control(resetMessage(ABORT, _idOf(stream), code, error)))
        self._senderFailed(stream, error)

    def _senderFailed(self, stream: SendStream, error: BaseException) -> None:
        stream.advance(SendEvent.FAIL)
        stream.failure = error
        self.streams.sending.pop(_idOf(stream), None)

    # -- receiving streams -------------------------------------------------------

    def startReceiving(self, incoming: IncomingTransfer, sink: Sink, waiter: Any) -> list[Any]:
        """
        Receive C{incoming} into C{sink}: its GRANT waits in L{dataToSend};
        C{waiter} is settled (as a session's call is, in what this returns
        or the session's L{framing.rpc._session.ClientSession.receive} does)
        with C{(receivedBytes, digest)} when it ends checked, or with its
        failure.

        @raise ValueError: it is already being received, or over.
        """
        if incoming._waiter is not None or incoming.state not in (ReceiveState.ANNOUNCED, ReceiveState.FAILED):
            raise ValueError(f"{incoming!r} is already being received or over")
        incoming._sink, incoming._waiter = sink, waiter
        if incoming.state is ReceiveState.FAILED:
            self._fail(incoming, incoming.failure or StreamReset("cancelled", "the stream failed"))
            return self.takeSettled()
        if incoming.digestName is not None:
            incoming._hash = newHash(incoming.digestName)
        incoming.advance(ReceiveEvent.START)
        self._output.append(grantMessage(incoming.streamId, incoming._credit.firstGrant(0)))
        return self.takeSettled()

    def stopReceiving(self, incoming: IncomingTransfer) -> list[Any]:
        """
        Give up receiving C{incoming} (its receiver was cancelled): the
        server is sent a CANCEL (code C{cancelled}), so it stops sending
        rather than fill a window nobody reads, and what arrives for the
        stream after it is dropped.  Its waiter is settled with
        L{StreamReset}.  Nothing happens to a stream not being received.
        """
        if incoming.state is ReceiveState.RECEIVING:
            self._cancel(incoming, StreamReset("cancelled", "the receiver stopped receiving the stream"))
        return self.takeSettled()

    def _announced(self, announcement: StreamAnnouncement) -> IncomingTransfer:
        """A stream the server announced (in an answer): checked, then stands in the result."""
        streamId, size, digest = announcement
        self.streams.check(streamId)
        self.streams.live.add(streamId)
        incoming = IncomingTransfer(streamId, size, self.hello.accepted(digest, self.digests))
        incoming._owner = self
        self.streams.receiving[streamId] = incoming
        return incoming

    def _dataStarting(self, streamId: int, offset: int, length: int) -> Any:
        """A data frame's body begins: where its pieces go, or C{None} to drop it (a stream not received)."""
        incoming = self.streams.receiving.get(streamId)
        if incoming is None or incoming.state is not ReceiveState.RECEIVING:
            return None
        credit = incoming._credit
        expected = credit.announced
        credit.frameAnnounced(streamId, length)
        # A stream with a digest is hashed as it comes: only in order.
        problem = frameProblem(offset, length, expected if incoming._hash is not None else None, incoming.size)
        if problem is not None:
            self._cancel(incoming, problem)
            return None
        return partial(self._piece, incoming)  # (one Python call per piece: a lambda around it made two)

    def _piece(self, incoming: IncomingTransfer, offset: int, piece: bytes | memoryview) -> None:
        if incoming.state is not ReceiveState.RECEIVING:
            return
        sink = incoming._sink
        assert sink is not None
        try:
            sink.write(offset, piece)
        except Exception as error:
            self._cancel(incoming, error, "sink-failed")
            return
        if incoming._hash is not None:
            incoming._hash.update(piece)
        incoming.receivedBytes += len(piece)
        count = incoming._credit.due(incoming.receivedBytes)
        if count:
            self._output.append(grantMessage(incoming.streamId, count))

    def _ended(self, incoming: IncomingTransfer, size: int | None, digest: bytes | None) -> None:
        """The server's END: check the size and digest, then DONE (or CANCEL) and settle the receiver."""
        if not incoming.ending():
            return
        actual = None
        try:
            # Without a digest it may be a stream of ranges, whose sink checks what it holds.
            incoming.allReleased(incoming.receivedBytes, size, whole=incoming._hash is not None)
        except StreamReset as problem:
            self._cancel(incoming, problem)
            return
        if incoming._hash is not None:
            actual = incoming._hash.digest()
            mismatch = digestProblem(incoming.digestName, digest, actual)
            if mismatch is not None:
                self._cancel(incoming, mismatch)
                return
        done = incoming.doneMessage(actual)
        del self.streams.receiving[incoming.streamId]
        self.streams.live.discard(incoming.streamId)
        self._output.append(self._control(done))
        self._settled.append((incoming._waiter, (incoming.receivedBytes, actual), None))
        incoming._waiter = None

    def _cancel(self, incoming: IncomingTransfer, error: BaseException, code: str | None = None) -> None:
        """Give up receiving C{incoming}: CANCEL with C{code} (default: L{cancelCode}'s)."""
        if code is None:
            code = cancelCode(error)
        self._output.append(self._control(resetMessage(CANCEL, incoming.streamId, code, error)))
        self._fail(incoming, error)

    def _fail(self, incoming: IncomingTransfer, error: BaseException) -> None:
        """C{incoming} is over, failed with C{error} (its first failure kept); its waiter, if any, settled."""
        self.streams.receiving.pop(incoming.streamId, None)
        self.streams.live.discard(incoming.streamId)
        if incoming.failing():
            incoming.failure = error
        if incoming._waiter is not None:
            self._settled.append((incoming._waiter, None, incoming.failure))
            incoming._waiter = None

    def _control(self, control: Control) -> bytes:
        return self._encoder.encode(control)  # type: ignore[no-any-return]


def _idOf(stream: SendStream) -> int:
    """The id of C{stream}, announced (in the sending table, or being announced)."""
    streamId = stream.streamId
    assert streamId is not None
    return streamId
