"""CoalescingTransport: one transport write per message, one per stream chunk.

Contract: C{write} and C{writeSequence} only append to a L{framing.BlockBuffer}
(no system call; a large piece is kept by reference, never copied); C{flush}
hands everything buffered to the wrapped transport in exactly one C{write}
(one block) or one C{writeSequence} (several blocks), so a message is never
split over writes.  Between L{CoalescingTransport.hold} and C{release} (the
protocol holds while it handles one read) flushes wait, and the messages
sent meanwhile share the one write C{release} makes: never more writes than
messages, and a batch of requests that arrived together is answered with
one system call.  On Twisted's own TCP and UNIX connections, a write finds
the socket directly when nothing is waiting in Twisted's buffer (one send,
no C{epoll_ctl}); the rest goes through the wrapped transport as usual.
A stream queued with L{CoalescingTransport.writeStream} is written one unit
per write (the OPEN with the first chunk, each further chunk, the CLOSE),
and its units are pulled from their iterator only while the wrapped
transport accepts more: a peer that reads slowly pauses the pulling, so
nothing piles up beyond the wrapped transport's own buffer.  Per-write cost
is O(1) whatever is buffered.

Back-pressure (L{CoalescingTransport.setSendLimits}): once more than the
high-water mark waits to be sent (buffered here, queued behind a stream, or
in the wrapped transport's own buffer), reading stops, as if
C{pauseProducing} had been called, and it starts again when what waits falls
to the low-water mark.  A server's answers are caused by what it reads, so
a peer that does not read its answers is no longer read from, and the
memory held for it stays near the mark.  Counting what waits costs a few
attribute reads, and only for writes the socket did not take at once.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from twisted.internet import tcp
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IConsumer, IPushProducer, ITCPTransport, ITransport
from twisted.python.failure import Failure
from zope.interface import directlyProvides, implementer, providedBy

from framing import BlockBuffer


def _loadSocketConnections() -> list[type]:
    classes: list[type] = [tcp.Server, tcp.Client]
    try:
        from twisted.internet import unix
    except ImportError:  # no AF_UNIX on this platform
        return classes
    return [*classes, unix.Server, unix.Client]


# Connections whose sockets _sendNow may write to directly (see _canSendNow).
_SOCKET_CONNECTIONS: frozenset[type] = frozenset(_loadSocketConnections())

_MAX_IOV = 64


def _queuedIn(transport: Any) -> int | None:
    """
    The bytes C{transport} holds that its socket has not taken yet, or
    C{None} if it cannot say.

    Twisted's socket connections (every C{FileDescriptor}) keep them in
    C{dataBuffer} past C{offset}, plus C{_tempDataLen}; its TLS wrapper keeps
    what was written before the handshake in C{_appSendBuffer} and the rest
    in the connection under it; chunkwire's in-memory transports count them
    in C{outgoingBytes}.
    """
    queued = 0
    for _ in range(4):  # a TLS wrapper over a TCP connection is two levels
        data = getattr(transport, "dataBuffer", None)
        if data is not None:
            held: int = len(data) - transport.offset + transport._tempDataLen
            return queued + held
        outgoing = getattr(transport, "outgoingBytes", None)
        if isinstance(outgoing, int):
            return queued + outgoing
        waiting = getattr(transport, "_appSendBuffer", None)
        if waiting is not None:
            queued += sum(map(len, waiting))
        transport = getattr(transport, "transport", None)
        if transport is None:
            break
    return None


def _ownBufferSize(transport: Any) -> int:
    """
    How much C{transport} buffers before it pauses its producer (Twisted's
    C{bufferSize}, 64 KiB on TCP), or 0 if it does not say.

    A transport reports that its buffer drained only to a producer it paused,
    which it does only past this size; so a low-water mark below it could
    wait for a report that never comes.
    """
    for _ in range(4):
        size = getattr(transport, "bufferSize", None)
        if isinstance(size, int):
            return size
        transport = getattr(transport, "transport", None)
        if transport is None:
            break
    return 0


# How the gate is registered with the wrapped transport (None: not at all).
_PUSH = "push"
_PULL = "pull"


def setNoDelay(transport: Any) -> bool:
    """
    Turn on C{TCP_NODELAY} if C{transport} is (or wraps) a TCP connection.

    Each message leaves in one write, so Nagle's algorithm can only delay it:
    with it on, a small message written after an unacknowledged one waits
    for that ACK (a whole round trip, see the bzr HPSS thread).

    @return: whether the option was set.
    """
    if not ITCPTransport.providedBy(transport):
        return False
    try:
        # UNIX-socket transports claim ITCPTransport too (they share the TCP
        # code); only an IP address means there is a TCP socket underneath.
        if not isinstance(transport.getHost(), (IPv4Address, IPv6Address)):
            return False
        transport.setTcpNoDelay(True)
    except (OSError, AttributeError):
        # A socket already closed, or a wrapper that claims TCP without a socket.
        return False
    return True


def _canSendNow(transport: Any) -> bool:
    """
    Whether C{transport} is a plain socket connection of Twisted's own with
    nothing waiting to be sent, so that bytes can go to the socket at once.

    Twisted's own C{write} always waits for the reactor to report the socket
    writable, which costs two C{epoll_ctl} calls and a reactor turn per
    message even when the socket could take the bytes now; on a
    request/response connection that is most of the cost of a small call.
    Only the exact classes are trusted (their buffer attributes are known),
    never once TLS has started on them, and never when something replaced
    C{write} on the instance (a recorder in a test, say): that write is
    then the one to call.
    """
    return (
        type(transport) in _SOCKET_CONNECTIONS
        and "write" not in transport.__dict__
        and transport.connected
        and not transport.disconnecting
        and not transport._writeDisconnected
        and not transport.TLS
        and not transport._tempDataLen
        and transport.offset == len(transport.dataBuffer)
    )


def _sendNow(transport: Any, blocks: list[bytes]) -> list[bytes]:
    """
    Send C{blocks} on C{transport}'s socket without blocking.

    @return: what the socket did not take, to be written the usual way (an
        error is left for Twisted to find on its next attempt, so the
        connection is closed as for any other write).
    """
    try:
        if len(blocks) == 1:
            sent = transport.socket.send(blocks[0])
        else:
            # Within every system's IOV_MAX; the rest, if any, is written later.
            sent = transport.socket.sendmsg(blocks[:_MAX_IOV])
    except OSError:
        return blocks
    for index, block in enumerate(blocks):
        if sent < len(block):
            rest = blocks[index:]
            if sent:
                rest[0] = block[sent:]
            return rest
        sent -= len(block)
    return []


class _Stream:
    """One queued stream: its units still to write and who waits for the end."""

    __slots__ = ("units", "done")

    def __init__(self, units: Iterator[list[bytes]], done: Deferred[None]) -> None:
        self.units = units
        self.done = done


@implementer(IPushProducer)
class _Gate:
    """
    What the coalescing transport registers with the wrapped transport as
    I{its} producer: the wrapped transport's pause and resume arrive here and
    are fanned out to the application's producer and to queued streams.  It
    is a separate object because the coalescing transport's own
    C{pauseProducing} means "stop reading", as on every Twisted transport.
    """

    def __init__(self, owner: CoalescingTransport) -> None:
        # Weak: the owner holds its gate, and a strong reference back would
        # make every connection a cycle that only the garbage collector frees.
        self._owner = weakref.ref(owner)

    def pauseProducing(self) -> None:
        owner = self._owner()
        if owner is not None:
            owner._writingPaused()

    def resumeProducing(self) -> None:
        owner = self._owner()
        if owner is not None:
            owner._writingResumed()

    def stopProducing(self) -> None:
        owner = self._owner()
        if owner is not None:
            owner._writingStopped()


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

    @ivar transport: the wrapped transport.
    @ivar buffer: the L{BlockBuffer} that writes wait in; an encoder may
        write into it directly, then call L{flush}.
    @ivar writePaused: C{True} while the wrapped transport has asked its
        producer to pause (its send buffer is full).  Queued streams are not
        advanced meanwhile.
    @ivar readPaused: C{True} between L{pauseProducing} and L{resumeProducing}.
    @ivar readingObserver: called with C{True} or C{False} whenever reading is
        paused or resumed through this transport, so that the protocol can
        hold back what it already received; or C{None}.
    @ivar disconnecting: C{True} once L{loseConnection} was called.
    @ivar producer: the producer registered through L{registerProducer}, or
        C{None}.
    @ivar streamingProducer: whether L{producer} is a push producer.
    @ivar noDelay: whether C{TCP_NODELAY} was turned on at construction.
    @ivar writeCount: writes handed to the connection so far: each one
        C{write} or C{writeSequence} on the wrapped transport, or one direct
        send (plus, rarely, the write of what the socket did not take).
    @ivar bytesWritten: the bytes in those writes.
    @ivar sendHighWater: with back-pressure on (L{setSendLimits}), the
        L{pendingBytes} above which reading stops; C{None} when off.
    @ivar sendLowWater: the L{pendingBytes} at which reading starts again.
    @ivar sendBacklogged: C{True} while reading is stopped because too much
        waits to be sent.
    """

    def __init__(self, transport: Any, readingObserver: Callable[[bool], None] | None = None) -> None:
        self.transport = transport
        self.buffer = BlockBuffer()
        self.readingObserver = readingObserver
        self.writePaused = False
        self.readPaused = False
        self.disconnecting = False
        self.producer: Any = None
        self.streamingProducer = False
        self._gate = _Gate(self)
        self._gateMode: str | None = None
        self._unitBuffer = BlockBuffer()
        self._queue: deque[_Stream | list[bytes]] = deque()
        self._pumping = False
        self._closed = False
        self._closeSent = False
        self._holds = 0
        self.writeCount = 0
        self.bytesWritten = 0
        self.sendHighWater: int | None = None
        self.sendLowWater = 0
        self.sendBacklogged = False
        self._readingStopped = False
        # Bytes of flushed messages queued behind a stream.
        self._queuedBytes = 0
        # Bytes handed to a transport that cannot count its queue, since it
        # last paused us (what it has not confirmed sending).
        self._unconfirmed = 0
        # A bound on what the wrapped transport holds: what it held when last
        # asked, plus what was written to it since.  Asking costs a few
        # attribute lookups, so it is done only when this bound passes the
        # high-water mark: once per high-water mark of bytes written at most.
        self._mayHold = 0
        directlyProvides(self, providedBy(transport))
        self.noDelay = setNoDelay(transport)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names this class does not define: pass them on, as
        # twisted.protocols.policies.ProtocolWrapper does.
        if name == "transport":
            raise AttributeError(name)
        return getattr(self.transport, name)

    def __repr__(self) -> str:
        return (
            f"<CoalescingTransport {len(self.buffer)} bytes buffered, {len(self._queue)} queued, on {self.transport!r}>"
        )

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
        Hand everything buffered to the wrapped transport in one C{write} or
        one C{writeSequence}; do nothing if nothing is buffered.  While a
        stream is being written, what is flushed waits behind it, so that it
        never lands between a stream's OPEN and its CLOSE.  Between L{hold}
        and L{release} nothing is written: the messages wait for the write
        that L{release} makes.
        """
        if self._holds:
            high = self.sendHighWater
            if high is not None and not self.sendBacklogged:
                if len(self.buffer) + self._queuedBytes + self._mayHold > high:
                    self._checkBacklog()
            return
        self.flushNow()

    def flushNow(self) -> None:
        """
        As L{flush}, even during a L{hold}: for a stream's body chunk, which
        leaves in a write of its own (see L{protocols.bulk}).
        """
        blocks = self.buffer.take_blocks()
        if not blocks:
            return
        if self._queue:
            self._queue.append(blocks)
            self._queuedBytes += sum(map(len, blocks))
            high = self.sendHighWater
            if high is not None and self._queuedBytes + self._mayHold > high:
                self._checkBacklog()
        else:
            self._emit(blocks)

    def hold(self) -> None:
        """
        Hold flushes back until the matching L{release}, so that every
        message sent meanwhile shares one write.  The protocol holds while
        it handles one read: the answers to a batch of requests that arrived
        together then leave together, each still whole and in order.
        Holds nest.
        """
        self._holds += 1

    def release(self) -> None:
        """End one L{hold}; the last one flushes what was held."""
        self._holds -= 1
        if not self._holds:
            self.flushNow()

    def discard(self) -> None:
        """Drop everything buffered and not yet flushed."""
        self.buffer.take_blocks()

    def writeStream(self, units: Iterable[list[bytes]]) -> Deferred[None]:
        """
        Queue a stream: each item of C{units} (a list of byte pieces) is
        written with one write, and the next item is pulled only when the
        wrapped transport is not paused.  Streams and flushes are written in
        the order they were queued.

        @return: a L{Deferred} that fires with C{None} once the last unit was
            handed to the wrapped transport, or fails with the iterator's
            exception or the reason the connection was lost.
        """
        done: Deferred[None] = Deferred()
        if self._closed or self.disconnecting:
            done.errback(ConnectionDone("the connection is closing; the stream was not sent"))
            return done
        self.flushNow()
        self._queue.append(_Stream(iter(units), done))
        self._updateGate()
        self._pump()
        return done

    def _emit(self, blocks: list[bytes]) -> None:
        self.writeCount += 1
        size = len(blocks[0]) if len(blocks) == 1 else sum(map(len, blocks))
        self.bytesWritten += size
        transport = self.transport
        if _canSendNow(transport):
            blocks = _sendNow(transport, blocks)
            if not blocks:
                # The socket took everything, and nothing was queued before.
                self._mayHold = 0
                if self.sendBacklogged:
                    self._checkBacklog()
                return
        if self.writePaused:
            self._unconfirmed += size
        if len(blocks) == 1:
            transport.write(blocks[0])
        else:
            transport.writeSequence(blocks)
        high = self.sendHighWater
        if high is not None:
            self._mayHold += size
            if self.sendBacklogged or self._mayHold + self._queuedBytes > high:
                self._checkBacklog()

    def _emitUnit(self, unit: list[bytes]) -> None:
        buf = self._unitBuffer
        for piece in unit:
            buf.write_piece(piece)
        if len(buf):
            self._emit(buf.take_blocks())
        if self._gateMode == _PULL:
            # A pull consumer asks for each next piece by calling resumeProducing.
            self.writePaused = True

    def _pump(self) -> None:
        """Write queued units until the queue is empty or writing is paused."""
        if self._pumping:
            # Re-entered from a write or a Deferred callback: the outer loop goes on.
            return
        self._pumping = True
        try:
            self._pumpQueue()
        finally:
            self._pumping = False
        if not self._queue:
            self._queueDrained()

    def _pumpQueue(self) -> None:
        queue = self._queue
        while queue and not self.writePaused and not self._closed:
            head = queue[0]
            if isinstance(head, list):
                queue.popleft()
                self._queuedBytes -= sum(map(len, head))
                self._emit(head)
                continue
            try:
                unit = next(head.units)
            except StopIteration:
                queue.popleft()
                head.done.callback(None)
                continue
            except Exception:
                queue.popleft()
                head.done.errback()
                continue
            self._emitUnit(unit)

    def _queueDrained(self) -> None:
        self._updateGate()
        if self.disconnecting and not self._closeSent and not self._closed:
            self._closeSent = True
            self.transport.loseConnection()

    # -- the wrapped transport's flow control (through the gate) ---------

    def _updateGate(self) -> None:
        """Register the gate while someone needs the wrapped transport's pauses; unregister it after."""
        wanted: str | None = None
        if self.producer is not None:
            wanted = _PUSH if self.streamingProducer else _PULL
        elif self._closed:
            pass
        elif self._queue or (self.sendHighWater is not None and not self.disconnecting):
            # Back-pressure needs the wrapped transport's word that its
            # buffer drained, which it gives only to a producer it paused.
            wanted = _PUSH
        if wanted == self._gateMode:
            return
        if self._gateMode is not None:
            self._gateMode = None
            self.transport.unregisterProducer()
        self.writePaused = False
        if wanted is not None:
            self._gateMode = wanted
            self.transport.registerProducer(self._gate, wanted == _PUSH)

    def _writingPaused(self) -> None:
        self.writePaused = True
        if self.producer is not None and self.streamingProducer:
            self.producer.pauseProducing()

    def _writingResumed(self) -> None:
        self.writePaused = False
        self._unconfirmed = 0
        if self.producer is not None:
            self.producer.resumeProducing()
            if not self.streamingProducer:
                self.flush()
        self._pump()
        if self.sendBacklogged:
            self._checkBacklog()

    def _writingStopped(self) -> None:
        # The wrapped transport is gone and has already forgotten the gate.
        self._gateMode = None
        self._fail(ConnectionDone("the connection was closed before the stream ended"))

    def _fail(self, reason: BaseException | Failure) -> None:
        """The connection is gone: stop the producer, fail every queued stream."""
        self._closed = True
        producer, self.producer = self.producer, None
        if producer is not None:
            producer.stopProducing()
        self.buffer.take_blocks()
        queue, self._queue = self._queue, deque()
        self._queuedBytes = 0
        for item in queue:
            if isinstance(item, _Stream):
                item.done.errback(reason)

    # -- back-pressure: what waits to be sent stops reading -----------------

    def setSendLimits(self, high: int | None, low: int = 0) -> None:
        """
        Stop reading while more than C{high} bytes wait to be sent, and start
        again at C{low}; C{high} of C{None} turns back-pressure off.  Both
        marks are raised to the wrapped transport's own buffer size if they
        are below it (see L{_ownBufferSize}).

        @raise ValueError: C{low} is above C{high}.
        """
        if high is not None and low > high:
            raise ValueError(f"the low-water mark {low} is above the high-water mark {high}")
        self.sendLowWater = max(low, _ownBufferSize(self.transport))
        self.sendHighWater = None if high is None else max(high, self.sendLowWater)
        self._updateGate()
        self._checkBacklog()

    @property
    def pendingBytes(self) -> int:
        """
        The bytes written to this transport that the socket has not taken:
        buffered here, queued behind a stream, and held by the wrapped
        transport (or, for one that cannot count them, what was handed to it
        since it last asked us to pause).
        """
        queued = _queuedIn(self.transport)
        if queued is None:
            queued = self._unconfirmed
        self._mayHold = queued
        return len(self.buffer) + self._queuedBytes + queued

    @property
    def bytesSent(self) -> int:
        """Bytes the connection has taken from this transport so far: L{bytesWritten} less what it still holds."""
        queued = _queuedIn(self.transport)
        return self.bytesWritten - (self._unconfirmed if queued is None else queued)

    def _checkBacklog(self) -> None:
        """Stop reading above the high-water mark; start again at the low-water mark."""
        high = self.sendHighWater
        if high is None or self._closed:
            backlogged = False
        elif self.sendBacklogged:
            backlogged = self.pendingBytes > self.sendLowWater
        else:
            backlogged = self.pendingBytes > high
        if backlogged != self.sendBacklogged:
            self.sendBacklogged = backlogged
            self._applyReading()

    def _applyReading(self) -> None:
        """Pause or resume the wrapped transport's reading to match L{readPaused} and L{sendBacklogged}."""
        stop = self.readPaused or self.sendBacklogged
        if stop == self._readingStopped:
            return
        self._readingStopped = stop
        if stop:
            self.transport.pauseProducing()
        elif not self._closed:
            self.transport.resumeProducing()
        if self.readingObserver is not None:
            self.readingObserver(stop)

    # -- IConsumer -------------------------------------------------------

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        """
        Register C{producer}: a push producer (C{streaming} true) is paused
        and resumed with the wrapped transport; a pull producer is asked for
        more whenever the wrapped transport has sent what it had, and what it
        writes is flushed after each C{resumeProducing}.

        @raise RuntimeError: if a producer is already registered.
        """
        if self.producer is not None:
            raise RuntimeError(f"Cannot register producer {producer!r}: {self.producer!r} was never unregistered")
        if self._closed:
            producer.stopProducing()
            return
        self.producer = producer
        self.streamingProducer = bool(streaming)
        self._updateGate()

    def unregisterProducer(self) -> None:
        """Forget the registered producer (a no-op if there is none)."""
        self.producer = None
        self.streamingProducer = False
        self._updateGate()

    # -- IPushProducer: reading --------------------------------------------

    def pauseProducing(self) -> None:
        """Stop reading from the connection until L{resumeProducing}."""
        if not self.readPaused:
            self.readPaused = True
            self._applyReading()

    def resumeProducing(self) -> None:
        """
        Start reading from the connection again (once what waits to be
        sent is below the low-water mark, if back-pressure stopped it too).
        """
        if self.readPaused:
            self.readPaused = False
            self._applyReading()

    def stopProducing(self) -> None:
        """Stop for good: the wrapped transport drops the connection."""
        self.transport.stopProducing()

    # -- ending ------------------------------------------------------------

    def loseConnection(self) -> None:
        """
        Flush, then close the connection once every queued stream has been
        written (as Twisted transports wait for a registered producer).
        """
        if self.disconnecting:
            return
        self.disconnecting = True
        self.flushNow()
        if not self._queue:
            self._queueDrained()

    def abortConnection(self) -> None:
        """Drop what is buffered and queued, and abort the connection at once."""
        self.disconnecting = True
        self._fail(ConnectionDone("the connection was aborted before the stream ended"))
        self._updateGate()
        self.transport.abortConnection()

    def abandonStreams(self, reason: BaseException | Failure) -> None:
        """
        Fail every queued stream with C{reason} without writing the rest of
        it; buffered and queued messages are dropped too.  For a protocol
        about to report a fatal error to its peer.
        """
        queue, self._queue = self._queue, deque()
        self._queuedBytes = 0
        self.buffer.take_blocks()
        for item in queue:
            if isinstance(item, _Stream):
                item.done.errback(reason)
        self._updateGate()

    def connectionClosed(self, reason: Failure) -> None:
        """
        Tell this transport that the wrapped connection is gone (the protocol
        calls this from C{connectionLost}): queued streams fail with
        C{reason}, the registered producer is stopped, buffered bytes are
        dropped.
        """
        if self._closed:
            return
        self._fail(reason)
        self._gateMode = None
