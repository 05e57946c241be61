"""TokenProtocol: a framing.Decoder and Encoder on a Twisted connection.

Contract: every received byte goes once through the connection's L{Decoder};
each completed object reaches the connection's L{IObjectReceiver}
(C{objectReceived}) and each refused one its C{objectRefused}, in stream
order, and a refusal leaves the connection up.  The receiver is the protocol
itself unless one is given (AMP's C{IBoxReceiver} split): subclasses
override the hooks, composed layers (the RPC broker) are receivers.  A
L{ProtocolError} drops the connection: the reason is logged, sent to the
peer in an ERROR token, and passed to C{connectionLost}.  Every
L{TokenProtocol.sendObject} is one send transaction (one encode, then one
commit or rollback of what its slicers promised) and one write on the
transport, except that the objects sent while one read is being handled
share one write (each whole); a streamed body is one write per chunk plus
one for its end.  While the application has paused reading, received bytes
are held undecoded, never more than C{Limits.max_buffered_bytes} of them.
Reading also stops while more than C{Limits.send_high_water} bytes wait to
be sent to a peer that does not read them (C{sendBackPressure}), so what a
server holds for one peer is bounded by what that peer reads.  Per-object
cost is O(1).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import Decoder, Encoder, Limits, Ping, ProtocolError, Registry, Violation
from framing.errors import BufferLimitExceeded, PeerError
from framing.outgoing import Outgoing
from framing.slicing.stream import stream_tokens
from framing.wire import ABORT, ERROR, PONG, PREAMBLE, encode_header

from .coalescing import CoalescingTransport
from .config import DEFAULT_CONFIG, ConnectionConfig
from .interfaces import IObjectReceiver, IObjectSender
from .lifetime import breakCycles
from .logs import LogPolicy, RefusalLog, TooManyRefusals, escape
from .mismatch import diagnoseLoss
from .pings import Pings
from .tracing import startTracing

_ABORT = encode_header(ABORT, 0)
# ERROR bodies stay well under the default Limits.max_error_length (4 KiB),
# so the peer can read why it is being dropped.
_MAX_ERROR_MESSAGE = 1024


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


@implementer(IObjectSender, IObjectReceiver)
class TokenProtocol(Protocol):
    """
    A protocol that exchanges chunkwire objects.

    Either give it a C{receiver} (an L{IObjectReceiver}: the RPC broker is
    one), or subclass it and override L{objectReceived} and, if they care,
    L{objectRefused}: without a receiver the protocol is its own.  Send with
    L{sendObject} and L{sendStream}.  The transport (C{self.transport}) is
    a L{CoalescingTransport} wrapping the real one: its C{pauseProducing}
    pauses delivery of objects as well as reading.

    @cvar log: where dropped connections and refusals are reported.
    @ivar config: the L{ConnectionConfig} this connection was made with.
    @ivar receiver: the L{IObjectReceiver} that gets what is decoded.
    @ivar limits: the L{Limits} for received data (the config's, or the class
        attribute); C{None} means the defaults.
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
    @ivar pings: the connection's L{Pings} (PINGs in flight).
    @ivar trace: log every token sent and received, one readable line each
        (see L{protocols.tracing}), through C{log} with the fields
        C{direction}, C{peer}, C{token}, C{kind} and C{value}.  Off by
        default and free when off; set it with the config, the constructor's
        C{trace} argument, on a subclass, or on C{TokenProtocol} itself to
        trace every connection in the process (what the examples' C{--trace}
        does).  Read when the connection is made.
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
    guard: Any = None
    config: ConnectionConfig = DEFAULT_CONFIG
    """The connection's L{protocols.guard.ConnectionGuard}, if it is guarded."""

    def __init__(
        self,
        limits: Limits | None = None,
        registry: Registry | None = None,
        trace: bool | None = None,
        *,
        receiver: Any = None,
        config: ConnectionConfig | None = None,
    ) -> None:
        """
        @param limits: shorthand for C{config.limits}.
        @param registry: shorthand for C{config.registry}.
        @param trace: shorthand for C{config.trace}.
        @param receiver: the L{IObjectReceiver}; this protocol if C{None}.
        @param config: the L{ConnectionConfig}; the keywords above override it.
        """
        config = config or DEFAULT_CONFIG
        if limits is not None or registry is not None or trace is not None:
            config = config.replace(
                limits=config.limits if limits is None else limits,
                registry=config.registry if registry is None else registry,
                trace=config.trace if trace is None else trace,
            )
        self.config = config
        for name in ("limits", "registry", "trace", "sendBackPressure"):
            value = getattr(config, name)
            if value is not None:
                setattr(self, name, value)
        self.receiver = self if receiver is None else receiver
        self.failure: Failure | None = None
        self.objectsDecoded = 0
        self.controlBytesReceived = 0
        self.pings = Pings(self._writePing, self._clock)
        self._observers: list[Any] = []
        self._paused = False
        self._sendBacklogged = False
        self._inDataReceived = False
        self._held: deque[bytes] = deque()
        self._heldBytes = 0
        self._backlog: deque[Any] = deque()
        self._refusals: RefusalLog | None = None
        self._traceReceived: Any = None
        self._flushCall: Any = None

    # -- connection setup --------------------------------------------------

    def makeConnection(self, transport: Any) -> None:
        """
        Wrap C{transport} in a L{CoalescingTransport}, make the decoder and
        encoder, queue the preamble, start the receiver, then call
        C{connectionMade}.  The preamble is flushed right after, in the same
        write as anything sent meanwhile (or, with C{config.holdPreamble},
        with the first message or at the end of the reactor turn).
        """
        if not isinstance(transport, CoalescingTransport):
            transport = CoalescingTransport(transport)
        transport.readingObserver = self._readingChanged
        factory = self.config.decoderFactory or Decoder
        self.decoder = factory(self.limits, self.registry)
        if self.sendBackPressure:
            limits = self.decoder.limits
            transport.setSendLimits(limits.send_high_water, limits.send_low_water)
        self.encoder = Encoder(self.registry)
        if self.trace:
            self._traceReceived = startTracing(transport, self.log)
        transport.write(PREAMBLE)
        # A loss before the peer's first byte is diagnosed (a TLS/plain mismatch: protocols.mismatch).
        undiagnosed = self.connectionLost
        self.connectionLost = lambda reason=connectionDone: undiagnosed(diagnoseLoss(self.decoder, reason))  # type: ignore[method-assign]
        self.transport = transport
        self.receiver.startReceiving(self)
        Protocol.makeConnection(self, transport)  # type: ignore[no-untyped-call]
        if self.config.holdPreamble and self.failure is None:
            self._flushCall = self._clock().callLater(0, self._flushHeld)
        else:
            transport.flush()
        for observer in self._observers:
            observer.connectionStarted(self)

    def _flushHeld(self) -> None:
        self._flushCall = None
        if self.failure is None and self.transport is not None:
            self.transport.flush()

    def addObserver(self, observer: Any) -> None:
        """Add an L{IConnectionObserver} (before the connection is made, to see it start)."""
        self._observers.append(observer)

    def _clock(self) -> Any:
        clock = self.config.clock
        if clock is None:
            from twisted.internet import reactor

            clock = reactor
        return clock

    # -- hooks (the default receiver's, and the connection's) ----------------

    def startReceiving(self, sender: Any) -> None:
        """The protocol as its own receiver: nothing to start (C{connectionMade} follows)."""

    def stopReceiving(self, reason: Failure) -> None:
        """The protocol as its own receiver: nothing to stop (C{connectionLost} is the hook)."""

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
        if refusals.refusal(self.log, self.peerName(), code, text, template, **fields):
            policy = refusals.policy
            self.failConnection(
                TooManyRefusals(f"more than {policy.max_refusals} refusals within {policy.interval:g} s")
            )

    def logFailure(self, kind: str, template: str, level: LogLevel = LogLevel.info, **fields: Any) -> None:
        """Log a failure on this connection (fields escaped by the caller) within L{logPolicy}'s rate."""
        self._refusalLog().failure(self.log, self.peerName(), kind, template, level, **fields)

    def _refusalLog(self) -> RefusalLog:
        refusals = self._refusals
        if refusals is None:
            refusals = self._refusals = RefusalLog(self.logPolicy)
        return refusals

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
            peer=self.peerName(),
            pending=self.transport.pendingBytes,
        )

    # -- sending -------------------------------------------------------------

    def sendObject(self, obj: Any, outgoing: Outgoing | None = None) -> None:
        """
        Send C{obj} in one send transaction: encode it, with C{outgoing}
        (a fresh L{Outgoing} if C{None}) handed to the slicers, then commit
        C{outgoing} and queue the bytes, or, if encoding fails, roll both
        back.  One write on the transport; while a read is being handled
        (from L{objectReceived} or a callback it fires), the write is shared
        with every other object sent before the read is done.

        This never waits: an application that sends many objects should
        register itself as a producer with C{self.transport}
        (C{registerProducer}) and stop sending while it is paused, so that a
        slow peer does not make the transport buffer without bound.

        @raise framing.EncodingError: C{obj} cannot be sent; nothing of it
            was written and C{outgoing} was rolled back.
        """
        transport = self.transport
        buf = transport.buffer
        mark = buf.mark()
        if outgoing is None:
            outgoing = Outgoing()
        try:
            self.encoder.encode_into(obj, buf, outgoing)
        except BaseException:
            # Whatever was buffered before (the preamble, held answers) stays.
            buf.rollback(mark)
            outgoing.rollback()
            raise
        outgoing.commit()
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

    def sendPing(self) -> Deferred[float]:
        """
        Send a PING.  The result fires with the seconds until the peer's
        PONG came back, or fails with the reason the connection was lost
        first (add an errback if you do not wait for it).
        """
        return self.pings.send()

    def _writePing(self, header: bytes) -> None:
        self.transport.write(header)
        self.transport.flush()

    # -- receiving -------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        """Decode C{data} and deliver what it completes, unless reading is paused."""
        if self._traceReceived is not None:
            self._traceReceived(data)
        for observer in self._observers:
            observer.dataArrived(len(data))
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
        completed, control = self.objectsDecoded, self.controlBytesReceived
        try:
            results = decoder.feed(data)
        except ProtocolError as error:
            # What the same bytes completed before the break was whole and
            # valid: deliver it, then drop the connection.
            self._dispatch(getattr(error, "results", ()))
            self.failConnection(error)
            return
        self.objectsDecoded += len(results)
        if decoder.control_events:
            self._controlEvents()
        receiver = self.receiver
        for index, obj in enumerate(results):
            if self._paused:
                self._backlog.extend(results[index:])
                break
            if isinstance(obj, Violation):
                receiver.objectRefused(obj)
            else:
                receiver.objectReceived(obj)
        for observer in self._observers:
            observer.dataDecoded(len(data), self.objectsDecoded - completed, self.controlBytesReceived - control)

    def _dispatch(self, results: Iterable[Any]) -> None:
        receiver = self.receiver
        for obj in results:
            if isinstance(obj, Violation):
                receiver.objectRefused(obj)
            else:
                receiver.objectReceived(obj)

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
            self.pings.pongReceived(pong)

    # -- receive flow control ----------------------------------------------------

    @property
    def bufferedBytes(self) -> int:
        """Received bytes held for this connection: undecoded while paused, plus the decoder's."""
        return self._heldBytes + self.decoder.buffered

    @property
    def readingPaused(self) -> bool:
        """Whether delivery is paused (by the application, back-pressure, or a dropped connection)."""
        return self._paused

    def _hold(self, data: bytes) -> None:
        self._held.append(data)
        self._heldBytes += len(data)
        limit = self.decoder.limits.max_buffered_bytes
        if self.bufferedBytes > limit:
            self.failConnection(
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
            for observer in self._observers:
                observer.sendBacklogChanged(backlogged)
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

    def failConnection(self, error: ProtocolError, logged: bool = True) -> None:
        """
        Log C{error} (unless C{logged} is false: the caller logged it),
        tell the peer, drop the connection, and report C{error} to
        connectionLost.
        """
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
        if logged:
            self.log.warn(
                "Dropping connection from {peer}: {code}: {error}",
                peer=self.peerName(),
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
        Fail queued streams and waiting pings with C{reason}, then stop the
        receiver.  Subclasses that override this should call it; C{reason}
        wraps the L{ProtocolError} if one dropped the connection.
        """
        transport = self.transport
        if isinstance(transport, CoalescingTransport):
            transport.connectionClosed(reason)
        flush, self._flushCall = self._flushCall, None
        if flush is not None and flush.active():
            flush.cancel()
        if self._refusals is not None:
            self._refusals.close(self.log, self.peerName())
        self.pings.connectionLost(reason)
        observers, self._observers = self._observers, []
        for observer in observers:
            observer.connectionEnded(reason)
        self.receiver.stopReceiving(reason)
        self.receiver = _GONE
        breakCycles(self)

    def peerName(self) -> str:
        """The peer's address as text, for logs."""
        try:
            return str(self.transport.getPeer())
        except Exception:
            return "an unknown peer"

    # Old private names, for subclasses being moved to the receiver shape.
    _peer = peerName
    _protocolFailed = failConnection


@implementer(IObjectReceiver)
class _Gone:
    """The receiver of a closed connection: anything still delivered is dropped."""

    def startReceiving(self, sender: Any) -> None:
        pass

    def objectReceived(self, obj: Any) -> None:
        pass

    def objectRefused(self, violation: Violation) -> None:
        pass

    def stopReceiving(self, reason: Failure) -> None:
        pass


_GONE = _Gone()
