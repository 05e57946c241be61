# -*- test-case-name: tests.protocols.test_coalescing_parts,tests.protocols.test_blocking -*-
"""CoalescingTransport: one transport write per message, one per stream chunk.

Contract: C{write} and C{writeSequence} only append to a
L{framing.BlockBuffer}; C{flush} hands everything buffered to the wrapped
transport in one C{write} or C{writeSequence}, so a message is never split
over writes.  Between L{CoalescingTransport.hold} and C{release} flushes
wait, so the answers to one read share one write.  A stream queued with
L{CoalescingTransport.writeStream} is pulled one unit per write, only while
the wrapped transport accepts more.  Past the high-water mark of what waits
to be sent (L{CoalescingTransport.setSendLimits}) reading stops, until it
falls to the low-water mark.

Cost: O(1) per write whatever is buffered, no system call before a flush, a
large piece kept by reference; never more writes than messages.

Design: docs/design/coalescing.md
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IConsumer, IPushProducer, ITransport
from twisted.python.failure import Failure
from zope.interface import directlyProvides, implementer, providedBy

from framing import BlockBuffer

from ._flusher import SEND_ACCOUNT, Flusher
from ._forwarding import Forwarded
from ._outlet import SEALED, Outlet
from ._readgate import ReadGate
from ._sockets import ownBufferSize, setNoDelay
from ._streamqueue import StreamQueue
from ._writegate import WriteGate


@implementer(ITransport, IConsumer, IPushProducer)
class CoalescingTransport:
    """
    Wraps any L{ITransport}: writes are buffered until L{flush}, which makes
    one write on the wrapped transport.  Everything else (C{getPeer},
    C{getTcpNoDelay}, ...) is passed through, and the wrapper provides the
    interfaces the wrapped transport provides.

    As an L{IConsumer} it accepts one producer (push or pull) through
    L{registerProducer}; as an L{IPushProducer} it controls I{reading}:
    L{pauseProducing} stops the wrapped transport from delivering data, as on
    any Twisted transport.

    @ivar buffer: the L{BlockBuffer} that writes wait in; an encoder may
        write into it directly, then call L{flush}.
    @ivar disconnecting: C{True} once L{loseConnection} was called.
    @ivar noDelay: whether C{TCP_NODELAY} was turned on at construction.
    """

    writeCount: Forwarded[int] = Forwarded("_outlet", "writeCount", "Writes handed to the connection (L{Outlet}).")
    bytesWritten: Forwarded[int] = Forwarded("_outlet", "bytesWritten", "The bytes in those writes.")
    producer: Forwarded[Any] = Forwarded("_gate", "producer", "The producer given to L{registerProducer}, or C{None}.")
    streamingProducer: Forwarded[bool] = Forwarded("_gate", "streaming", "Whether L{producer} is a push producer.")
    writePaused: Forwarded[bool] = Forwarded("_gate", "paused", "Whether the wrapped transport paused our writing.")
    readPaused: Forwarded[bool] = Forwarded("_reading", "paused", "Whether L{pauseProducing} stopped reading.")
    readingObserver: Forwarded[Callable[[bool], None] | None] = Forwarded(
        "_reading", "observer", "Told C{True}/C{False} when reading stops/starts (L{ReadGate.observer}).", settable=True
    )
    sendHighWater: Forwarded[int | None] = Forwarded("_reading", "high", "Reading stops above it (L{setSendLimits}).")
    sendLowWater: Forwarded[int] = Forwarded("_reading", "low", "Reading starts again at it (L{setSendLimits}).")
    sendBacklogged: Forwarded[bool] = Forwarded("_reading", "backlogged", "Whether too much waits to be sent.")
    transport: Forwarded[Any] = Forwarded("_flusher", "transport", "The wrapped transport.", settable=True)
    pendingBytes: Forwarded[int] = Forwarded(
        "_flusher", "pendingBytes", "The bytes written here that the socket has not taken (L{Flusher.pendingBytes})."
    )

    def __init__(self, transport: Any, readingObserver: Callable[[bool], None] | None = None) -> None:
        self.buffer = BlockBuffer()
        self.disconnecting = False
        self._gate = WriteGate(self._writingResumed, self._writingStopped)
        self._streams = StreamQueue(self._gate)
        self._reading = ReadGate(readingObserver)
        self._outlet = Outlet(self._gate, self._reading, self._streams)
        # What every message's send reads is read from here (see protocols._flusher: why a part).
        self._flusher = Flusher(transport, self.buffer, self._streams, self._outlet, self._reading)
        self._closeSent = False
        directlyProvides(self, providedBy(transport))
        self.noDelay = setNoDelay(transport)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this class does not define: pass them on, as
        # twisted.protocols.policies.ProtocolWrapper does.  (Not the part that
        # holds the wrapped transport, when it is not there yet.)
        if name == "_flusher":
            raise AttributeError(name)
        return getattr(self.transport, name)

    def __repr__(self) -> str:
        queued = len(self._streams.items)
        return f"<CoalescingTransport {len(self.buffer)} bytes buffered, {queued} queued, on {self.transport!r}>"

    # -- writing ---------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Buffer C{data} until the next L{flush}."""
        self.buffer.write_piece(data)

    def writeSequence(self, data: Iterable[bytes]) -> None:
        """Buffer each piece of C{data} until the next L{flush}."""
        write = self.buffer.write_piece
        for piece in data:
            write(piece)

    def flush(self) -> None:
        """
        Hand everything buffered to the wrapped transport in one write, if
        anything is.  It waits behind a queued stream (never between its OPEN
        and CLOSE), and between L{hold} and L{release} for the write
        L{release} makes; meanwhile, past the flusher's L{Flusher.room}, the
        backlog is checked, so that a read whose answers pass the high-water
        mark stops reading before the rest of it is delivered.
        """
        flusher = self._flusher
        if flusher.holds:
            buffer = flusher.buffer
            # (len(buffer) written out: this runs for every message sent while a read is handled)
            if buffer.sealed + buffer.tell() > flusher.room:
                flusher.checkBacklog()
            return
        flusher.flushNow()

    def flushNow(self) -> None:
        """As L{flush}, even during a L{hold}: for a stream's body chunk, which leaves in a write of its own."""
        self._flusher.flushNow()

    def hold(self) -> None:
        """Hold flushes back until the matching L{release} (holds nest): what is sent meanwhile shares one write."""
        self._flusher.holds += 1

    def release(self) -> None:
        """End one L{hold}; the last one flushes what was held."""
        flusher = self._flusher
        flusher.holds -= 1
        if not flusher.holds:
            flusher.flushNow()

    def discard(self) -> None:
        """Drop everything buffered and not yet flushed."""
        self.buffer.take_blocks()

    def writeStream(self, units: Iterable[list[bytes]]) -> Deferred[None]:
        """
        Queue a stream, after what was flushed before: each item of C{units}
        (a list of byte pieces) is one write, pulled only while the wrapped
        transport is not paused.

        @return: a L{Deferred} that fires with C{None} once the last unit was
            handed to the wrapped transport, or fails with the iterator's
            exception or the reason the connection was lost.
        """
        if self._flusher.closed or self.disconnecting:
            refused: Deferred[None] = Deferred()
            refused.errback(ConnectionDone("the connection is closing; the stream was not sent"))
            return refused
        self.flushNow()
        done = self._streams.addStream(units)
        self._updateGate()
        self._pump()
        return done

    def _pump(self) -> None:
        """Write what the stream queue holds while the gate is open; once it is empty, close if asked to."""
        if self._streams.pump(self._flusher.writeQueued):
            self._queueDrained()

    def _queueDrained(self) -> None:
        self._updateGate()
        if self.disconnecting and not self._closeSent and not self._flusher.closed:
            self._closeSent = True
            self.transport.loseConnection()

    # -- the wrapped transport's flow control (through the gate) ---------

    def _updateGate(self) -> None:
        """Register the gate while someone needs the wrapped transport's pauses; unregister it after."""
        # Back-pressure needs the wrapped transport's word that its buffer
        # drained, which it gives only to a producer it paused.
        backPressure = self._reading.high is not None and not self.disconnecting
        self._gate.switch(self.transport, not self._flusher.closed and bool(self._streams.items or backPressure))

    def _writingResumed(self) -> None:
        self._outlet.drained()
        if self._gate.resumeProducer():
            self.flush()
        self._pump()
        flusher = self._flusher
        if self._reading.backlogged or (flusher.ledger is not None and flusher.ledger.holding(SEND_ACCOUNT)):
            flusher.checkBacklog()

    def _writingStopped(self) -> None:
        # The wrapped transport is gone and has already forgotten the gate.
        self._fail(ConnectionDone("the connection was closed before the stream ended"))

    def _fail(self, reason: BaseException | Failure) -> None:
        """The connection is gone: stop the producer, fail every queued stream."""
        self._flusher.closed = True
        producer = self._gate.detach()
        if producer is not None:
            producer.stopProducing()
        self.buffer.take_blocks()
        self._streams.abandon(reason)

    # -- back-pressure: what waits to be sent stops reading -----------------

    def setSendLimits(self, high: int | None, low: int = 0) -> None:
        """
        Stop reading while more than C{high} bytes wait to be sent, and start
        again at C{low}; C{high} of C{None} turns back-pressure off.  Both
        marks are raised to the wrapped transport's own buffer size.

        @raise ValueError: C{low} is above C{high}.
        """
        self._reading.setLimits(high, low, ownBufferSize(self.transport))
        self._updateGate()
        self._flusher.checkBacklog()

    @property
    def bytesSent(self) -> int:
        """Bytes the connection has taken from this transport so far: L{bytesWritten} less what it still holds."""
        return self._outlet.bytesSent(self.transport)

    # -- IConsumer -------------------------------------------------------

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """
        Register C{producer}: a push producer (C{streaming} true) is paused
        and resumed with the wrapped transport; a pull producer is asked for
        more whenever the wrapped transport has sent what it had, and what it
        writes is flushed after each C{resumeProducing}.

        @raise RuntimeError: if a producer is already registered.
        """
        if self._flusher.closed:  # no producer is left registered once closed
            producer.stopProducing()
            return
        self._gate.attach(producer, streaming)
        self._updateGate()

    def unregisterProducer(self) -> None:
        """Forget the registered producer (a no-op if there is none)."""
        self._gate.detach()
        self._updateGate()

    # -- IPushProducer: reading --------------------------------------------

    def pauseProducing(self) -> None:
        """Stop reading from the connection until L{resumeProducing}."""
        self._reading.pause(self.transport, self._flusher.closed)

    def resumeProducing(self) -> None:
        """Start reading again (once at most the low-water mark waits to be sent, if back-pressure stopped it)."""
        self._reading.resume(self.transport, self._flusher.closed)

    def setOverBudget(self, over: bool) -> None:
        """
        Stop reading while the connection's ledger is over its budget
        (C{True}), and start again once it is back within it (C{False}), as
        the application's pause and the send back-pressure do.
        """
        self._reading.setOverBudget(over, self.transport, self._flusher.closed)

    def chargeTo(self, ledger: Any) -> None:
        """
        Charge what waits to be sent (L{pendingBytes}) to C{ledger}'s
        C{"send"} account, settled whenever the backlog is checked (past
        the high-water mark, and as it drains), so the connection's budget
        sees the bytes waiting for its peer.
        """
        self._flusher.ledger = ledger

    def stopProducing(self) -> None:
        """Stop for good: the wrapped transport drops the connection."""
        self.transport.stopProducing()

    # -- ending ------------------------------------------------------------

    def loseConnection(self) -> None:
        """Flush, then close the connection once every queued stream is written (as Twisted waits for a producer)."""
        if self.disconnecting:
            return
        self.disconnecting = True
        self.flushNow()
        if not self._streams.items:
            self._queueDrained()

    def seal(self) -> None:
        """
        Flush what is buffered, then write nothing more: what is sent later
        is dropped.  For a connection whose last token was written (a
        drop's ERROR); the close it asked for goes on.
        """
        self.flushNow()
        self._flusher.outlet = SEALED

    def abortConnection(self) -> None:
        """Drop what is buffered and queued, and abort the connection at once."""
        self.disconnecting = True
        self._fail(ConnectionDone("the connection was aborted before the stream ended"))
        self._updateGate()
        self.transport.abortConnection()

    def abandonStreams(self, reason: BaseException | Failure) -> None:
        """
        Fail every queued stream with C{reason} without writing the rest of
        it, and drop buffered and queued messages: for a protocol about to
        report a fatal error to its peer.
        """
        self.buffer.take_blocks()
        self._streams.abandon(reason)
        self._updateGate()

    def connectionClosed(self, reason: Failure) -> None:
        """
        The wrapped connection is gone (the protocol calls this from
        C{connectionLost}): queued streams fail with C{reason}, the producer
        is stopped, buffered bytes are dropped.
        """
        if self._flusher.closed:
            return
        self._fail(reason)
        self._gate.forget()
