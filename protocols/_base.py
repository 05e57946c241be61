# -*- test-case-name: tests.protocols.test_trimming,tests.protocols.test_blocking -*-
"""TokenProtocol: a framing.Decoder and Encoder on a Twisted connection.

Contract: every received byte goes once through the connection's L{Decoder};
each completed object reaches the connection's L{IObjectReceiver}
(C{objectReceived}) and each refused one its C{objectRefused}, in stream
order, and a refusal leaves the connection up.  The receiver is the protocol
itself unless one is given (AMP's C{IBoxReceiver} split): subclasses
override the hooks, composed layers (the RPC broker) are receivers.  A
L{ProtocolError} drops the connection: the reason is logged, sent to the
peer in an ERROR token, given at once to what waits on an answer (an RPC
broker's calls in flight fail with it), and given to the receiver's
C{stopReceiving} and the observers once the connection ends (as
L{TokenProtocol.lossReason}: C{connectionLost} itself gets the transport's
reason); a dropped connection the peer does not let close is aborted
C{ConnectionConfig.dropGrace} seconds later.  No method is replaced on an
instance.  Every
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

from collections.abc import Iterable, Iterator
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import Decoder, Encoder, Limits, ProtocolError, Registry, Violation
from framing._blocks import BlockBuffer
from framing._ledger import Ledger, LedgerPool
from framing._outgoing import Outgoing
from framing.slicing._stream import stream_tokens
from framing.wire import ABORT, PREAMBLE, encode_header

from ._coalescing import CoalescingTransport
from ._config import DEFAULT_CONFIG, ConnectionConfig
from ._forwarding import Forwarded
from ._inbound import Inbound
from ._interfaces import IObjectReceiver, IObjectSender
from ._lifetime import breakCycles
from ._lifetime import dropConnection as dropNow
from ._logs import LogPolicy, RefusalLog
from ._mismatch import diagnoseLoss
from ._pings import Pings
from ._tracing import startTracing
from ._trimming import connectionReleased

_ABORT = encode_header(ABORT, 0)


def _abortOnError(units: Iterator[list[bytes]]) -> Iterator[list[bytes]]:
    """
    Pass a stream's units on; if producing the next one fails after the OPEN
    was written, write an ABORT first so that the peer drops the half-sent
    object (an L{framing._errors.Aborted} refusal) and stays in sync.
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
    @ivar receiver: the L{IObjectReceiver} that gets what is decoded; set
        it to hand the connection to another (a login does).
    @ivar limits: the L{Limits} for received data (the config's, or the class
        attribute); C{None} means the defaults.
    @ivar registry: the L{Registry} used to decode and encode; C{None} means
        the built-in types.
    @ivar decoder: this connection's L{Decoder}, made when the connection is.
    @ivar ledger: this connection's L{Ledger}: what every layer holds for
        the peer, against C{Limits.max_connection_memory}; reading stops
        while it is over (made when the connection is; closed at its end).
    @ivar encoder: this connection's L{Encoder}.
    @ivar failure: the L{Failure} wrapping the L{ProtocolError} that dropped
        the connection, or C{None}.
    @cvar logPolicy: the L{LogPolicy}: how many refusals and failures of one
        connection are logged in full, and how many refusals drop it.
    @ivar inbound: the L{Inbound} that takes reads to the receiver (and
        counts the control bytes received; the decoder counts the objects).
    @ivar observers: the L{IConnectionObserver}s (see L{addObserver}).
    @ivar objectsSent: the objects L{sendObject} has sent (encoded whole) so
        far: with the transport's C{writeCount}, how many writes a message
        takes (C{examples/demo.py}).  One integer increment per object.
    @ivar pings: the connection's L{Pings} (PINGs in flight).
    @ivar guard: the L{protocols._guard.ConnectionGuard} watching it, if any.
    @ivar lingering: once dropped, the timer that aborts the connection if
        it has not ended C{config.dropGrace} seconds later; else C{None}.
    @cvar trace: log every token both ways (L{protocols._tracing}); off by
        default and free when off.  Set it in the config, on a subclass, or
        on C{TokenProtocol} itself for every connection in the process (what
        the examples' C{--trace} does).
    @cvar sendBackPressure: stop reading while more than
        C{Limits.send_high_water} bytes wait for the peer (on by default;
        the client helpers turn it off: see L{ConnectionConfig}).
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
    ledgerPool: LedgerPool | None = None
    inbound: Inbound
    receiver: Forwarded[Any] = Forwarded(
        "inbound", "receiver", "The L{IObjectReceiver} that gets what is decoded (the L{Inbound}'s).", settable=True
    )

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
        self.config = config = (config or DEFAULT_CONFIG).overriddenBy(limits, registry, trace)
        # (each None keeps the class's value)
        if config.limits is not None:
            self.limits = config.limits
        if config.registry is not None:
            self.registry = config.registry
        if config.trace is not None:
            self.trace = config.trace
        if config.sendBackPressure is not None:
            self.sendBackPressure = config.sendBackPressure
        self.failure: Failure | None = None
        self.objectsSent = 0
        self.pings = Pings(self._writePing, self._clock)
        self.observers: list[Any] = []
        self.inbound = Inbound(
            self if receiver is None else receiver,
            self.observers,
            self.pings,
            self.failConnection,
            self.sendBacklogChanged,
        )
        self.ledger = Ledger(None)
        self._refusals: RefusalLog | None = None
        self._flushCall: Any = None
        self.lingering: Any = None
        self._ended = False

    # -- connection setup --------------------------------------------------

    def makeConnection(self, transport: Any) -> None:
        """
        Wrap C{transport} in a L{CoalescingTransport}, make the decoder and
        encoder, queue the preamble, start the receiver, then call
        C{connectionMade}.  The preamble is flushed right after, in the same
        write as anything sent meanwhile (or, with C{config.holdPreamble},
        with the first message, at the end of the reactor turn, or before
        the ERROR of a drop in that turn: L{protocols._lifetime.dropConnection}).
        """
        if not isinstance(transport, CoalescingTransport):
            transport = CoalescingTransport(transport)
        transport.readingObserver = self.inbound.readingChanged
        factory = self.config.decoderFactory or Decoder
        self.decoder = factory(self.limits, self.registry)
        self.ledger = Ledger(self.decoder.limits.max_connection_memory, transport.setOverBudget, self.ledgerPool)
        transport.chargeTo(self.ledger)
        self.decoder.charge_to(self.ledger)  # (an object that does not fit is refused, never left half read)
        if self.sendBackPressure:
            limits = self.decoder.limits
            transport.setSendLimits(limits.send_high_water, limits.send_low_water)
        self.encoder = Encoder(self.registry)
        traceReceived = startTracing(transport, self.log) if self.trace else None
        self.inbound.connect(self.decoder, transport, self.ledger, traceReceived)
        transport.write(PREAMBLE)
        self.transport = transport
        self.receiver.startReceiving(self)
        Protocol.makeConnection(self, transport)  # type: ignore[no-untyped-call]
        if self.config.holdPreamble and self.failure is None:
            self._flushCall = self._clock().callLater(0, self._flushHeld)
        else:
            transport.flush()
        for observer in self.observers:
            observer.connectionStarted(self)

    def _flushHeld(self) -> None:
        self._flushCall = None
        if self.failure is None and self.transport is not None:
            self.transport.flush()

    def addObserver(self, observer: Any) -> None:
        """
        Add an L{IConnectionObserver} (before the connection is made, to see
        it start).  One written before C{dataRead} existed (it has only
        C{dataArrived} and C{dataDecoded}) is told of each read with those two.
        """
        if not hasattr(observer, "dataRead"):
            observer = _ReadInTwoCalls(observer)
        self.observers.append(observer)

    def removeObserver(self, observer: Any) -> None:
        """Remove an L{IConnectionObserver} added before (one not added is ignored)."""
        for added in self.observers:
            if added is observer or (type(added) is _ReadInTwoCalls and added.observer is observer):
                self.observers.remove(added)
                return

    def _clock(self) -> Any:
        return self.config.reactor()

    # -- hooks (the default receiver's, and the connection's) ----------------

    def startReceiving(self, sender: Any) -> None:
        """The protocol as its own receiver: nothing to start (C{connectionMade} follows)."""

    def stopReceiving(self, reason: Failure) -> None:
        """The protocol as its own receiver: told why the connection ended (L{lossReason}); override it to act."""

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
        refusals = self._refusalLog()
        if self.failure is None and refusals.refusal(self.log, self.peerName(), code, text, template, **fields):
            self.failConnection(refusals.tooMany())

    def logFailure(self, kind: str, template: str, level: LogLevel = LogLevel.info, **fields: Any) -> None:
        """Log a failure on this connection (fields escaped by the caller) within L{logPolicy}'s rate."""
        self._refusalLog().failure(self.log, self.peerName(), kind, template, level, **fields)

    def _refusalLog(self) -> RefusalLog:
        if self._refusals is None:
            self._refusals = RefusalLog(self.logPolicy)
        return self._refusals

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
        Send C{obj} in one send transaction: encode it with C{outgoing} (a
        fresh L{Outgoing} if C{None}) handed to the slicers, then commit it
        and queue the bytes, or, if encoding fails, roll both back.  One
        write, shared with the other objects sent while a read is handled.
        This never waits: an application sending much should be a producer
        of C{self.transport} (C{registerProducer}) and stop while paused.

        @raise framing.EncodingError: C{obj} cannot be sent; nothing of it
            was written and C{outgoing} was rolled back.
        """
        transport = self.transport
        tokens = self.encoder.tokens(obj)
        if tokens is None:
            _encodeInto(self.encoder, transport.buffer, obj, outgoing)
        else:
            # Written whole by the compiled core: no slicer ran, nothing to roll back.
            transport.buffer.write_piece(tokens)
            if outgoing is not None:
                outgoing.commit()
        self.objectsSent += 1
        transport.flush()

    def sendStream(self, chunks: Iterable[bytes]) -> Deferred[None]:
        """
        Send the concatenation of C{chunks} as one streamed byte string (the
        peer gets one C{bytes}): one write per chunk and one for its end.
        Chunks are pulled only while the transport is not paused; objects
        sent meanwhile go out after the stream.

        @return: a L{Deferred} that fires when the end was written, or fails
            with what C{chunks} raised (the peer sees the object aborted) or
            the reason the connection was lost.
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

    # -- receiving (the work is L{Inbound}'s) ----------------------------------

    def dataReceived(self, data: bytes) -> None:
        """Decode C{data} and deliver what it completes, unless reading is paused: L{Inbound.dataReceived}."""
        self.inbound.dataReceived(data)

    @property
    def bufferedBytes(self) -> int:
        """Received bytes held for this connection: undecoded while paused, plus the decoder's."""
        return self.inbound.bufferedBytes

    @property
    def readingPaused(self) -> bool:
        """Whether delivery is paused (by the application, back-pressure, or a dropped connection)."""
        return self.inbound.paused

    # -- failure and loss --------------------------------------------------------

    def dropConnection(self, error: ProtocolError, logged: bool = True) -> None:
        """
        Drop the connection for C{error}: the one way for the connection, a
        guard or an application to end a peer that broke the rules.  Log
        C{error} (unless C{logged} is false: the caller did), tell the peer
        why in an ERROR token, close, and make the receiver and observers see
        C{error} as the reason the connection ended (L{failure}, which
        L{lossReason} reads); nothing more is delivered.  What waits on an answer fails with C{error} at once,
        not when the transport closes (which waits for the peer to take
        what is queued): waiting pings, and what the receiver's optional
        C{connectionDropped(reason)} fails (an RPC broker's calls in
        flight); C{stopReceiving} still follows the loss.  A connection still
        open C{config.dropGrace} seconds later is aborted.  Once dropped
        (or lost), later calls do nothing (the first reason stands).  A
        clean close is C{transport.loseConnection()} instead.
        """
        if self.failure is None and not self._ended:
            failure = dropNow(self, error, logged)
            self.pings.connectionLost(failure)
            dropped = getattr(self.receiver, "connectionDropped", None)
            if dropped is not None:
                dropped(failure)

    failConnection = dropConnection
    """L{dropConnection}'s older name, the same method."""

    def lossReason(self, reason: Failure) -> Failure:
        """
        Why the connection ended, given the reason its transport gave: the
        L{failure} that dropped it, if one did; else, when nothing of the
        peer's stream arrived, the mismatch it probably was (a
        L{protocols._mismatch.ClosedBeforePreamble} or C{NotTLS}); else C{reason}.
        """
        if self.failure is not None:
            return self.failure
        return diagnoseLoss(getattr(self, "decoder", None), reason)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """
        Fail queued streams and waiting pings, tell the observers and stop
        the receiver, each with L{lossReason}: the L{ProtocolError} that
        dropped the connection, or C{reason}, the transport's (diagnosed).
        Subclasses that override this should call it; one that wants the
        reason the connection ended reads C{self.lossReason(reason)}, or,
        as its own receiver, overrides L{stopReceiving}.
        """
        reason = self.lossReason(reason)
        self._ended = True
        transport = self.transport
        if isinstance(transport, CoalescingTransport):
            transport.connectionClosed(reason)
        for timer in (self._flushCall, self.lingering):
            if timer is not None and timer.active():
                timer.cancel()
        self._flushCall = self.lingering = None
        if self._refusals is not None:
            self._refusals.close(self.log, self.peerName())
        self.pings.connectionLost(reason)
        observers = list(self.observers)
        self.observers.clear()  # (the list the Inbound reads too)
        for observer in observers:
            observer.connectionEnded(reason)
        self.receiver.stopReceiving(reason)
        self.receiver = _GONE
        self.inbound.close()
        peak = self.ledger.peak
        self.ledger.close()
        breakCycles(self)
        connectionReleased(peak)  # (a connection that held much: the C allocator's free pages go back, soon)

    def peerName(self) -> str:
        """The peer's address as text, for logs."""
        try:
            return str(self.transport.getPeer())
        except Exception:
            return "an unknown peer"


def _encodeInto(encoder: Encoder, buf: BlockBuffer, obj: Any, outgoing: Outgoing | None) -> None:
    """Encode C{obj} into C{buf} with C{outgoing} and commit both, or roll both back and raise."""
    mark = buf.mark()
    if outgoing is None:
        outgoing = Outgoing()
    try:
        encoder.encode_into(obj, buf, outgoing)
    except BaseException:
        # Whatever was buffered before (the preamble, held answers) stays.
        buf.rollback(mark)
        outgoing.rollback()
        raise
    outgoing.commit()


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


class _ReadInTwoCalls:
    """
    An observer without L{IConnectionObserver.dataRead} (written before it
    was added): a read decoded as it arrived is told to it as before, with
    C{dataArrived}, then C{dataDecoded}; everything else goes to it as is.
    """

    def __init__(self, observer: Any) -> None:
        self.observer = observer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.observer, name)

    def dataRead(self, length: int, completed: int, controlBytes: int) -> None:
        self.observer.dataArrived(length)
        self.observer.dataDecoded(length, completed, controlBytes)
