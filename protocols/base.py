"""TokenProtocol: a framing.Decoder and Encoder on a Twisted connection.

Contract: every received byte goes once through the connection's L{Decoder};
each completed object reaches L{TokenProtocol.objectReceived} and each refused
one L{TokenProtocol.objectRefused}, in stream order, and a refusal leaves the
connection up.  A L{ProtocolError} drops the connection: the reason is logged,
sent to the peer in an ERROR token, and passed to C{connectionLost}.  Every
L{TokenProtocol.sendObject} is one write on the transport, except that the
objects sent while one read is being handled share one write (each whole);
a streamed body is one write per chunk plus one for its end.  While the application has paused
reading, received bytes are held undecoded, never more than
C{Limits.max_buffered_bytes} of them.  Reading also stops while more than
C{Limits.send_high_water} bytes wait to be sent to a peer that does not read
them (L{TokenProtocol.sendBackPressure}), so what a server holds for one
peer is bounded by what that peer reads.  Per-object cost is O(1).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure
from zope.interface import directlyProvides, providedBy

from framing import Decoder, Encoder, Limits, Ping, ProtocolError, Registry, Violation
from framing.errors import BufferLimitExceeded, PeerError
from framing.slicing.stream import stream_tokens
from framing.trace import TokenTracer
from framing.wire import ABORT, ERROR, PING, PONG, PREAMBLE, encode_header

from .coalescing import CoalescingTransport
from .lifetime import breakCycles
from .logs import LogPolicy, RefusalLog, TooManyRefusals, escape
from .mismatch import diagnoseLoss

_ABORT = encode_header(ABORT, 0)
# ERROR bodies stay well under the default Limits.max_error_length (4 KiB),
# so the peer can read why it is being dropped.
_MAX_ERROR_MESSAGE = 1024

RESERVED_PING_IDS = 1 << 63
"""PING ids from this one up are chunkwire's own (the bulk channel's round-trip
probes): their PONGs go to L{TokenProtocol._reservedPongReceived}, never to
L{TokenProtocol.pongReceived}, so an application's or the guard's pings (which
count up from small numbers) never see them."""


def _abortOnError(units: Iterator[list[bytes]]) -> Iterator[list[bytes]]:
    """
    Pass a stream's units on; if producing the next one fails after the OPEN
    was written, write an ABORT first so that the peer drops the half-sent
    object (an L{framing.errors.Aborted} refusal) and stays in sync.
    """
    started = False
    try:
        for unit in units:
            started = True
            yield unit
    except Exception:
        if started:
            yield [_ABORT]
        raise


class TokenProtocol(Protocol):
    """
    A protocol that exchanges chunkwire objects.

    Subclasses override L{objectReceived} and, if they care, L{objectRefused}
    and L{pongReceived}; they send with L{sendObject} and L{sendStream}.  The
    transport they see (C{self.transport}) is a L{CoalescingTransport}
    wrapping the real one: its C{pauseProducing} pauses delivery of objects
    as well as reading.

    @cvar log: where dropped connections and refusals are reported.
    @ivar limits: the L{Limits} for received data (the class attribute, or
        the constructor's argument); C{None} means the defaults.
    @ivar registry: the L{Registry} used to decode and encode; C{None} means
        the built-in types.
    @ivar decoder: this connection's L{Decoder}, made when the connection is.
    @ivar encoder: this connection's L{Encoder}.
    @ivar failure: the L{Failure} wrapping the L{ProtocolError} that dropped
        the connection, or C{None}.
    @cvar logPolicy: the L{LogPolicy}: how many refusals and failures of one
        connection are logged in full, and how many refusals drop it.
    @ivar objectsDecoded: top-level objects (and refusals) the decoder has
        completed so far, delivered or not.
    @ivar controlBytesReceived: bytes of PING and PONG tokens received so
        far: traffic that keeps a connection alive but is no progress.
    @ivar trace: log every token sent and received, one readable line each
        (see L{framing.trace}), through C{log} with the fields C{direction}
        (C{"sent"} or C{"received"}), C{peer}, C{token}, C{kind} and
        C{value}.  Off by default and free when off; set it with the
        constructor's C{trace} argument, on a subclass, or on
        C{TokenProtocol} itself to trace every connection in the process
        (what the examples' C{--trace} does).  Read when the connection is made.
    @cvar sendBackPressure: whether this connection stops reading while more
        than C{Limits.send_high_water} bytes wait to be sent to its peer,
        and starts again at C{Limits.send_low_water}.  On by default: what a
        server sends is caused by what it reads.  The client helpers
        (C{rpc.connect}, C{bulk.connect}, L{protocols.echo.EchoClient}) turn
        it off: what a client sends comes from its own application, which
        reading less would not slow, and two ends that both stop reading
        while their sends wait could wait for each other for ever.
    """

    log = Logger()
    logPolicy: LogPolicy = LogPolicy()
    limits: Limits | None = None
    registry: Registry | None = None
    trace: bool = False
    sendBackPressure: bool = True
    transport: Any

    def __init__(
        self, limits: Limits | None = None, registry: Registry | None = None, trace: bool | None = None
    ) -> None:
        if limits is not None:
            self.limits = limits
        if registry is not None:
            self.registry = registry
        if trace is not None:
            self.trace = trace
        self.failure: Failure | None = None
        self.objectsDecoded = 0
        self.controlBytesReceived = 0
        self._paused = False
        self._sendBacklogged = False
        self._inDataReceived = False
        self._held: deque[bytes] = deque()
        self._heldBytes = 0
        self._backlog: deque[Any] = deque()
        self._refusals: RefusalLog | None = None

    # -- connection setup --------------------------------------------------

    def makeConnection(self, transport: Any) -> None:
        """
        Wrap C{transport} in a L{CoalescingTransport}, make the decoder and
        encoder, queue the preamble, then call C{connectionMade}.  The
        preamble is flushed right after C{connectionMade}, in the same write
        as anything C{connectionMade} sent.
        """
        if not isinstance(transport, CoalescingTransport):
            transport = CoalescingTransport(transport)
        transport.readingObserver = self._readingChanged
        self.decoder = Decoder(self.limits, self.registry)
        if self.sendBackPressure:
            limits = self.decoder.limits
            transport.setSendLimits(limits.send_high_water, limits.send_low_water)
        self.encoder = Encoder(self.registry)
        if self.trace:
            self._startTracing(transport)
        transport.write(PREAMBLE)
        # A loss before the peer's first byte is diagnosed (a TLS/plain mismatch: protocols.mismatch).
        undiagnosed = self.connectionLost
        self.connectionLost = lambda reason=connectionDone: undiagnosed(diagnoseLoss(self.decoder, reason))  # type: ignore[method-assign]
        Protocol.makeConnection(self, transport)  # type: ignore[no-untyped-call]
        self.flushAfterConnect()

    def flushAfterConnect(self) -> None:
        """
        Write what the connection start queued: the preamble and anything
        C{connectionMade} sent.  Override to hold it back so that the first
        message shares the preamble's write (the RPC broker does, to save a
        packet on a latent link); whatever is held must be flushed soon.
        """
        self.transport.flush()

    def _startTracing(self, transport: CoalescingTransport) -> None:
        """Log each token both ways: tap the wrapped transport's writes and shadow C{dataReceived}."""
        try:
            address = transport.getPeer()
        except Exception:
            address = "an unknown peer"
        host, port = getattr(address, "host", None), getattr(address, "port", None)
        peer = f"{host}:{port}" if host is not None and port is not None else str(address)
        transport.transport = _TracingWriter(transport.transport, self.log, peer)
        received = TokenTracer()
        untraced = type(self).dataReceived

        def dataReceived(data: bytes) -> None:
            _logTokens(self.log, "received", peer, received.feed(data))
            untraced(self, data)

        self.dataReceived = dataReceived  # type: ignore[method-assign]

    # -- hooks ---------------------------------------------------------------

    def objectReceived(self, obj: Any) -> None:
        """Called with each object the peer sent, in order.  Override this."""

    def objectRefused(self, violation: Violation) -> None:
        """
        Called, in stream order, for each object the decoder refused (too
        big, unknown type, ...).  The connection stays up.  By default the
        refusal is passed to L{logRefusal}.
        """
        self.logRefusal(violation.code, str(violation))

    def logRefusal(self, code: str, text: str, template: str | None = None, **fields: Any) -> None:
        """
        Log that something the peer sent was refused (C{text} is escaped),
        within L{logPolicy}'s rate; drop the connection with
        C{too-many-refusals} once the peer passes the policy's refusals per
        interval.  C{template} and C{fields} replace the default line.
        """
        if self.failure is not None:
            return
        refusals = self._refusalLog()
        if refusals.refusal(self.log, self._peer(), code, text, template, **fields):
            policy = refusals.policy
            self._protocolFailed(
                TooManyRefusals(f"more than {policy.max_refusals} refusals within {policy.interval:g} s")
            )

    def logFailure(self, kind: str, template: str, level: LogLevel = LogLevel.info, **fields: Any) -> None:
        """Log a failure on this connection (fields escaped by the caller) within L{logPolicy}'s rate."""
        self._refusalLog().failure(self.log, self._peer(), kind, template, level, **fields)

    def _refusalLog(self) -> RefusalLog:
        refusals = self._refusals
        if refusals is None:
            refusals = self._refusals = RefusalLog(self.logPolicy)
        return refusals

    def pongReceived(self, pingId: int) -> None:
        """
        Called when the peer answers L{sendPing} C{pingId} (an id below
        L{RESERVED_PING_IDS}).  Override this.
        """

    def sendBacklogChanged(self, backlogged: bool) -> None:
        """
        Called when reading stops because more than C{Limits.send_high_water}
        bytes wait to be sent to the peer (C{backlogged} true), and when it
        starts again at C{Limits.send_low_water}.  By default this is logged
        at debug level.  Override it to watch for peers that do not read.
        """
        self.log.debug(
            "{what} reading from {peer}: {pending} bytes wait to be sent",
            what="Stopped" if backlogged else "Resumed",
            peer=self._peer(),
            pending=self.transport.pendingBytes,
        )

    def _reservedPongReceived(self, pingId: int) -> None:
        """Called when the peer answers a PING with an id of L{RESERVED_PING_IDS} or more: chunkwire's own."""

    # -- sending -------------------------------------------------------------

    def sendObject(self, obj: Any) -> None:
        """
        Encode C{obj} and write it with one write on the transport; while a
        read is being handled (from L{objectReceived} or a callback it
        fires), the write is shared with every other object sent before the
        read is done.

        This never waits: an application that sends many objects should
        register itself as a producer with C{self.transport}
        (C{registerProducer}) and stop sending while it is paused, so that a
        slow peer does not make the transport buffer without bound.

        @raise framing.EncodingError: C{obj} cannot be sent; nothing of it
            was written.
        """
        transport = self.transport
        buf = transport.buffer
        mark = buf.mark()
        try:
            self.encoder.encode_into(obj, buf)
        except BaseException:
            # Whatever was buffered before (the preamble, held answers) stays.
            buf.rollback(mark)
            raise
        transport.flush()

    def sendStream(self, chunks: Iterable[bytes]) -> Deferred[None]:
        """
        Send the concatenation of C{chunks} as one streamed byte string: one
        write per chunk (the first with the stream's OPEN) and one for its
        end.  Chunks are pulled from C{chunks} only while the transport is
        not paused, so a lazy iterable is read no faster than the peer
        reads.  Objects sent meanwhile go out after the stream.  The peer's
        decoder delivers the joined C{bytes} as one object.

        @return: a L{Deferred} that fires when the stream's end was written,
            or fails with the exception C{chunks} raised (the peer then sees
            the object refused as aborted) or the reason the connection was
            lost.
        """
        done: Deferred[None] = self.transport.writeStream(_abortOnError(iter(stream_tokens(chunks))))
        return done

    def sendPing(self, pingId: int) -> None:
        """
        Send PING C{pingId}; the peer answers and L{pongReceived} is called.
        Ids of L{RESERVED_PING_IDS} and more are chunkwire's own: their
        answers go to L{_reservedPongReceived} instead.
        """
        self.transport.write(encode_header(PING, pingId))
        self.transport.flush()

    # -- receiving -------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        """Decode C{data} and deliver what it completes, unless reading is paused."""
        if self.failure is not None:
            return
        if self._paused or self._held or self._backlog:
            self._hold(data)
            return
        self._inDataReceived = True
        # Everything sent while this read is handled shares one write.
        transport = self.transport
        transport.hold()
        try:
            self._decode(data)
        finally:
            self._inDataReceived = False
            transport.release()

    def _decode(self, data: bytes) -> None:
        decoder = self.decoder
        try:
            results = decoder.feed(data)
        except ProtocolError as error:
            # What the same bytes completed before the break was whole and
            # valid: deliver it, then drop the connection.
            self._dispatch(getattr(error, "results", ()))
            self._protocolFailed(error)
            return
        self.objectsDecoded += len(results)
        if decoder.control_events:
            self._controlEvents()
        for index, obj in enumerate(results):
            if self._paused:
                self._backlog.extend(results[index:])
                return
            if isinstance(obj, Violation):
                self.objectRefused(obj)
            else:
                self.objectReceived(obj)

    def _dispatch(self, results: Iterable[Any]) -> None:
        for obj in results:
            if isinstance(obj, Violation):
                self.objectRefused(obj)
            else:
                self.objectReceived(obj)

    def _controlEvents(self) -> None:
        events = self.decoder.control_events
        pongs = [encode_header(PONG, event.id) for event in events if isinstance(event, Ping)]
        answered = [event.id for event in events if not isinstance(event, Ping)]
        events.clear()
        # A PING and its PONG have headers of the same length.
        self.controlBytesReceived += sum(map(len, pongs)) + sum(len(encode_header(PONG, i)) for i in answered)
        if pongs:
            self.transport.writeSequence(pongs)
            self.transport.flush()
        for pong in answered:
            if pong >= RESERVED_PING_IDS:
                self._reservedPongReceived(pong)
            else:
                self.pongReceived(pong)

    # -- receive flow control ----------------------------------------------------

    @property
    def bufferedBytes(self) -> int:
        """Received bytes held for this connection: undecoded while paused, plus the decoder's."""
        return self._heldBytes + self.decoder.buffered

    def _hold(self, data: bytes) -> None:
        self._held.append(data)
        self._heldBytes += len(data)
        limit = self.decoder.limits.max_buffered_bytes
        if self.bufferedBytes > limit:
            self._protocolFailed(
                BufferLimitExceeded(
                    f"{self.bufferedBytes} received bytes held while reading is paused, more than the limit of {limit}"
                )
            )

    def _readingChanged(self, paused: bool) -> None:
        self._paused = paused
        backlogged = self.transport.sendBacklogged
        if backlogged != self._sendBacklogged:
            self._sendBacklogged = backlogged
            self.sendBacklogChanged(backlogged)
        if not paused and not self._inDataReceived:
            self._catchUp()

    def _catchUp(self) -> None:
        """Deliver what was held back while paused, until paused again."""
        self._inDataReceived = True
        transport = self.transport
        transport.hold()
        try:
            while not self._paused and self.failure is None:
                if self._backlog:
                    self._dispatch((self._backlog.popleft(),))
                elif self._held:
                    data = self._held.popleft()
                    self._heldBytes -= len(data)
                    self._decode(data)
                else:
                    break
        finally:
            self._inDataReceived = False
            transport.release()

    # -- failure and loss --------------------------------------------------------

    def _protocolFailed(self, error: ProtocolError) -> None:
        """Log C{error}, tell the peer, drop the connection, and report C{error} to connectionLost."""
        # The traceback's frames would hold this protocol (and what it
        # decoded) in a cycle; where in our code a peer's bytes broke the
        # stream says nothing the code and message do not.
        error.__traceback__ = None
        failure = Failure(error)  # type: ignore[no-untyped-call]
        self.failure = failure
        self._paused = True
        self._held.clear()
        self._heldBytes = 0
        self._backlog.clear()
        self.log.warn(
            "Dropping connection from {peer}: {code}: {error}",
            peer=self._peer(),
            code=error.code,
            error=escape(error),
        )
        # connectionLost is called by the wrapped transport, with its own
        # reason; so that any override sees this error instead, shadow it on
        # this instance (as BufferingTLSTransport shadows its write).
        original = self.connectionLost
        self.connectionLost = lambda reason=failure: original(failure)  # type: ignore[method-assign]
        transport = self.transport
        transport.abandonStreams(failure)
        if not isinstance(error, PeerError):
            body = str(error).encode("utf-8")[:_MAX_ERROR_MESSAGE]
            transport.write(encode_header(ERROR, len(body)) + body)
        transport.loseConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """
        Fail queued streams with C{reason}.  Subclasses that override this
        should call it; C{reason} wraps the L{ProtocolError} if one dropped
        the connection.
        """
        transport = self.transport
        if isinstance(transport, CoalescingTransport):
            transport.connectionClosed(reason)
        if self._refusals is not None:
            self._refusals.close(self.log, self._peer())
        breakCycles(self)

    def _peer(self) -> str:
        try:
            return str(self.transport.getPeer())
        except Exception:
            return "an unknown peer"


def _logTokens(log: Logger, direction: str, peer: str, events: Iterable[Any]) -> None:
    arrow = "->" if direction == "sent" else "<-"
    for event in events:
        log.info(
            "{peer} {arrow} {token}",
            direction=direction,
            arrow=arrow,
            peer=peer,
            token=event.text,
            kind=event.kind,
            value=event.value,
        )


class _TracingWriter:
    """A transport proxy that logs the tokens of everything written through it (see L{TokenProtocol.trace})."""

    def __init__(self, transport: Any, log: Logger, peer: str) -> None:
        directlyProvides(self, providedBy(transport))
        self._transport = transport
        self._log = log
        self._peer = peer
        self._tracer = TokenTracer()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def write(self, data: bytes) -> None:
        _logTokens(self._log, "sent", self._peer, self._tracer.feed(data))
        self._transport.write(data)

    def writeSequence(self, data: Iterable[bytes]) -> None:
        data = list(data)
        for piece in data:
            _logTokens(self._log, "sent", self._peer, self._tracer.feed(piece))
        self._transport.writeSequence(data)
