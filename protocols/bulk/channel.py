"""The bulk channel of one connection, and the RPC broker that carries it.

Contract: L{BulkBroker} is an RPC L{Broker} whose connection also carries
streams: a L{Stream} in a call's arguments or result is announced in that
message and arrives as an L{IncomingStream}.  Its L{BulkChannel} keeps the
streams of the connection in two dicts by id (one per direction), so routing
a frame or a control message is O(1) whatever is in flight.  Outgoing
streams are served round-robin, one data frame (one transport write) per
turn, and only while the transport is not paused (the channel is the
transport's push producer while it has streams) and the stream has credit:
a stream waiting for credit costs nothing and holds up nobody, and an RPC
message is written at once, between two frames, so it never waits behind
more than the bytes already in flight.

A receiver's window starts at L{BulkOptions.window} and, with autotuning
on (L{BulkOptions.maxWindow}), grows towards twice what the path holds in
one base round trip while the window is what limits the stream (see
L{protocols.bulk.tuning}): the base round trip is the smallest of each
stream's first-grant-to-first-frame times and, on a path of 25 ms or more,
of PING probes, one per measuring interval while streams arrive.  A window
never shrinks below the configured one.

What a connection holds in the bulk layer dies with it: a peer may have at
most L{BulkOptions.maxStreams} incoming streams live at once, must announce
stream ids in increasing order (a repeated id would orphan the stream it
replaced: L{StreamIdReused}), and everything the application ties to the
connection with L{BulkChannel.hold} (the file service's open uploads) is
released when it is lost, at a cost proportional to what it held.  A remote
method finds the connection calling it with L{callingBroker}.
"""

from __future__ import annotations

import itertools
import weakref
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IListeningPort, IPushProducer, IReactorThreads
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import Limits, Registry
from framing.slicing.interfaces import ISlicer

from ..rpc import Broker, BrokerFactory, Referenceable, RemoteReference
from ..rpc.endpoints import connectWith, listenWith
from .errors import FlowControlError, StreamIdReused, TooManyStreams
from .streams import IncomingStream, Stream, _Receiving
from .tuning import RoundTrips
from .wire import (
    ABORT,
    CANCEL,
    CONTROL_OPEN_TYPE,
    DATA_OPEN_TYPE,
    DONE,
    END,
    GRANT,
    STREAM_OPEN_TYPE,
    AnnouncementUnslicer,
    Control,
    ControlSlicer,
    ControlUnslicer,
    DataUnslicer,
    StreamAnnouncement,
    dataFramePieces,
)

if TYPE_CHECKING:
    from framing import Encoder

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class BulkOptions:
    """
    How a connection moves streams.  The defaults were measured on loopback
    TCP (see C{tests/benchmarks/bench_bulk.py}).

    @ivar chunkSize: payload bytes per data frame, hence per transport
        write.  1 MiB: per-frame costs (a reactor turn, four headers) vanish
        against the copy, and a frame is still small next to the window.
    @ivar window: the most bytes a receiver keeps in its care per stream
        (received but not yet written and hashed) to begin with, and always
        at least; the sender never has more than the window in flight.
        1.875 MiB: less than two chunks, so a connection cut mid-stream on a
        LAN loses (and a resume resends) less than two chunks, and enough
        that a reactor turn's delay on either side does not starve the
        pipe.  A receiver that hashes in the reactor thread starts from half
        (it takes bytes in about half as fast, and a small call waits behind
        what is in flight: the same time, not the same bytes).  Over a
        latent link a fixed window caps a stream at about C{window / RTT};
        see C{maxWindow}.
    @ivar maxWindow: how far a stream's window may grow on its own
        (autotuning).  The receiver measures the path's base round-trip
        time (each stream's first grant to its first frame, and PINGs) and
        each stream's delivery rate over a few round trips; while the window is what holds the stream back (the sender
        keeps running out of credit), it raises the window to twice the
        bytes delivered per base round trip, up to this.  32 MiB: a 100 ms
        path at up to 160 MiB/s.  Paths with a base RTT under 25 ms
        (loopback, a LAN; see L{protocols.bulk.tuning.MIN_TUNED_RTT}) keep
        C{window}, so nothing changes there.  0 (or anything up to C{window}) turns
        autotuning off, and its probes with it.  A window given to
        L{IncomingStream.receive} is kept as it is.
    @ivar grantStep: credit goes back to the sender in steps of at least
        this many bytes (and of a quarter of the window, if that is less),
        so grants cost a small message per step, not per socket read; a
        sender waits for as much credit before a frame smaller than a chunk.
    @ivar hashing: where the digest of data in flight is computed.
        C{"inline"} (the default): in the reactor thread, piece by piece as
        it is sent or received; on two cores shared by both ends this
        measured faster than handing pieces to a thread, and calls stay
        prompt since a piece is at most one socket read or one chunk.
        C{"thread"}: in a worker thread per stream (C{hashlib} releases the
        GIL), for machines with cores to spare.  Hashing that must read
        bytes back (a stream sent in part, an assembly) always uses a
        thread when the reactor has them; a test clock never does.
    @ivar hashBudget: how far hashing may lag behind the data, in bytes,
        on either side, before the stream waits for it.  The bytes it holds
        have already arrived (a cut loses none of them), so this is memory,
        not window: 8 MiB lets the hashing thread smooth over the moments
        the reactor thread and the peer keep the CPU busy.
    @ivar readSize: bytes asked of the socket per read on a TCP connection
        (Twisted's default is 64 KiB); larger reads mean fewer reactor turns
        per megabyte.  C{None} leaves the transport alone.
    @ivar sendLimit: most bytes handed to the socket per reactor turn on a
        TCP connection (Twisted's default is 128 KiB).  C{None} leaves the
        transport alone.
    @ivar maxStreams: the most incoming streams the peer may have live on
        the connection at once (announced and neither received to the end,
        failed, cancelled nor dropped unread); one more is a
        L{TooManyStreams} protocol error.  64: each may hold a window of
        memory and an open file, and a client stripes a file over
        connections, not over streams of one connection.
    """

    chunkSize: int = 1 * MiB
    window: int = 1920 * KiB
    maxWindow: int = 32 * MiB
    grantStep: int = 512 * KiB
    hashing: str = "inline"
    hashBudget: int = 8 * MiB
    readSize: int | None = 256 * KiB
    sendLimit: int | None = 1 * MiB
    maxStreams: int = 64

    def __post_init__(self) -> None:
        if self.chunkSize <= 0 or self.window <= 0 or self.grantStep <= 0 or self.maxStreams <= 0:
            raise ValueError("chunkSize, window, grantStep and maxStreams must be positive")
        if self.maxWindow < 0:
            raise ValueError("maxWindow must be 0 (no autotuning) or more")
        if self.hashing not in ("thread", "inline"):
            raise ValueError("hashing is 'thread' or 'inline'")


_calling: ContextVar[BulkBroker | None] = ContextVar("chunkwire-bulk-calling", default=None)


def callingBroker() -> BulkBroker | None:
    """
    The L{BulkBroker} whose peer called the remote method now running (in
    its synchronous part, or anywhere in a coroutine method, which keeps the
    context it started in), or C{None} outside a remote call.
    """
    return _calling.get()


@implementer(IPushProducer)
class BulkChannel:
    """
    The streams of one connection.  While it has outgoing streams it is the
    transport's push producer, so frames wait for the socket; an application
    should not register a producer of its own on a bulk connection (if one
    is registered, streams are paced by their credit alone).

    @ivar protocol: the L{BulkBroker} it belongs to.
    @ivar options: its L{BulkOptions}.
    @ivar hashReactor: the reactor hashing threads report to, or C{None}
        (hash inline).
    @ivar framesSent: data frames written on this connection.
    @ivar roundTrips: the connection's base round-trip time, measured while
        autotuning is on (L{BulkOptions.maxWindow}).
    """

    log = Logger()

    def __init__(self, protocol: BulkBroker, options: BulkOptions, clock: Any) -> None:
        # Weak: the broker holds the channel, and a closed connection's pair
        # must go without waiting for a garbage collection.
        self._protocol = weakref.ref(protocol)
        self.options = options
        self.clock = clock
        threads = options.hashing == "thread" and IReactorThreads.providedBy(clock)
        self.hashReactor: Any = clock if threads else None
        self.framesSent = 0
        self._ids = itertools.count(1)
        self._outgoing: dict[int, Stream] = {}
        self._incoming: dict[int, _Receiving] = {}
        self._live: set[int] = set()
        self._lastAnnounced = 0
        self._held: dict[object, Callable[[], None]] = {}
        self.noted: set[str] = set()
        self._announcing: list[Stream] = []
        self._ready: deque[Stream] = deque()
        self._queued: set[int] = set()
        self._pumping = False
        self._pumpCall: Any = None
        self._writePaused = False
        self._registered = False
        self._up = False
        self.roundTrips = RoundTrips(clock, protocol.sendPing)

    @property
    def protocol(self) -> BulkBroker:
        """The L{BulkBroker} the channel belongs to."""
        protocol = self._protocol()
        if protocol is None:
            raise RuntimeError("the bulk channel's connection is gone")
        return protocol

    @property
    def autotuning(self) -> bool:
        """Whether incoming streams' windows may grow past L{BulkOptions.window}."""
        return self.options.maxWindow > self.options.window

    def install(self, registry: Registry) -> None:
        """Teach the connection's registry the bulk open-types."""
        registry.add_slicer(Stream, _StreamSlicer(self))
        registry.add_slicer(Control, ControlSlicer())
        registry.add_unslicer(CONTROL_OPEN_TYPE, ControlUnslicer)
        registry.add_unslicer(DATA_OPEN_TYPE, lambda limits: DataUnslicer(limits, self.dataStarting))
        registry.add_unslicer(STREAM_OPEN_TYPE, lambda limits: AnnouncementUnslicer(limits, self.announcementReceived))

    # -- lifecycle ---------------------------------------------------------------

    def connectionMade(self) -> None:
        self._up = True
        readSize = self.options.readSize
        wrapped: Any = getattr(self.protocol.transport, "transport", None)
        if readSize is not None and hasattr(wrapped, "bufferSize") and hasattr(wrapped, "socket"):
            # Twisted's TCP transport reads bufferSize bytes per reactor turn.
            wrapped.bufferSize = readSize
        sendLimit = self.options.sendLimit
        if sendLimit is not None and hasattr(wrapped, "SEND_LIMIT") and hasattr(wrapped, "socket"):
            # Twisted hands the socket at most SEND_LIMIT bytes per reactor
            # turn (128 KiB); a frame then waits in user space for several
            # turns, and a small call written after it waits with it.
            wrapped.SEND_LIMIT = sendLimit

    def connectionLost(self, reason: Failure) -> None:
        self._up = False
        if self._pumpCall is not None and self._pumpCall.active():
            self._pumpCall.cancel()
        self._pumpCall = None
        self._ready.clear()
        self._queued.clear()
        self._registered = False
        self._announcing = []
        self._live.clear()
        # Emptied one by one, and nothing left in a local: a failure raised
        # meanwhile keeps this frame (through its traceback's frames) until
        # a garbage collection, and must not keep the streams with it.
        outgoing, incoming, held = self._outgoing, self._incoming, self._held
        while outgoing:
            outgoing.popitem()[1]._connectionLost(reason)
        while incoming:
            incoming.popitem()[1].connectionLost(reason)
        while held:
            try:
                held.popitem()[1]()
            except Exception:
                self.log.failure("Releasing what a lost bulk connection held failed")
        # The probes' sendPing is the protocol's bound method: let the
        # protocol go (nothing more will be measured).
        self.roundTrips = RoundTrips(self.clock, _noPing)

    # -- what the application ties to the connection ------------------------------

    def hold(self, key: object, release: Callable[[], None]) -> None:
        """
        Tie a resource to the connection: C{release()} is called once when
        the connection is lost, unless L{letGo} was called for C{key} first.
        On a connection already lost it is called at once.
        """
        if not self._up:
            release()
            return
        self._held[key] = release

    def letGo(self, key: object) -> None:
        """The resource C{key} was released by its owner: forget it (a key not held is ignored)."""
        self._held.pop(key, None)

    def holds(self, key: object) -> bool:
        """Whether the resource C{key} is tied to this connection."""
        return key in self._held

    def noteOnce(self, code: str, message: str, **fields: Any) -> None:
        """Log C{message} (with C{code}) the first time C{code} happens on this connection, not later."""
        if code not in self.noted:
            self.noted.add(code)
            self.log.warn("Bulk connection from {peer}: {code}: " + message, peer=self._peer(), code=code, **fields)

    def _peer(self) -> str:
        transport = getattr(self._protocol(), "transport", None)
        getPeer = getattr(transport, "getPeer", None)
        return str(getPeer()) if getPeer is not None else "?"

    @property
    def up(self) -> bool:
        """Whether the connection is up, so streams can start."""
        return self._up and not self.protocol.transport.disconnecting

    @property
    def streamCount(self) -> int:
        """Streams in flight on this connection, both ways."""
        return len(self._outgoing) + len(self._incoming)

    # -- announcing --------------------------------------------------------------

    def announce(self, stream: Stream) -> int:
        """Give C{stream} an id on this connection (it is being encoded into a message)."""
        streamId = next(self._ids)
        stream._bind(self, streamId)
        self._outgoing[streamId] = stream
        self._announcing.append(stream)
        return streamId

    def announceSent(self) -> list[Stream]:
        """The message being encoded was sent: its streams now wait for credit.  Returns them."""
        announced, self._announcing = self._announcing, []
        if announced:
            self._register()
        return announced

    def announceFailed(self) -> None:
        """The message being encoded failed: its streams were never announced."""
        announcing, self._announcing = self._announcing, []
        for stream in announcing:
            if stream.streamId is not None:
                self._outgoing.pop(stream.streamId, None)
            stream._unbind()

    def announcementReceived(self, announcement: StreamAnnouncement) -> IncomingStream:
        """
        The peer announced a stream: its id must be new, and the streams it
        has live must stay within L{BulkOptions.maxStreams}.

        @raise StreamIdReused: the id is not above every id announced before.
        @raise TooManyStreams: one stream more than the cap.
        """
        streamId, size, digestName = announcement
        if type(streamId) is not int or streamId <= self._lastAnnounced:
            raise StreamIdReused(f"stream id {streamId!r} announced after stream id {self._lastAnnounced}")
        if len(self._live) >= self.options.maxStreams:
            raise TooManyStreams(f"more than {self.options.maxStreams} incoming streams at once")
        self._lastAnnounced = streamId
        if self._up:
            self._live.add(streamId)
        return IncomingStream(self, streamId, size, digestName)

    @property
    def liveIncoming(self) -> int:
        """Incoming streams announced by the peer and not over yet."""
        return len(self._live)

    def droppedUnread(self, streamId: int) -> None:
        """An incoming stream was dropped before being received: the sender may stop."""
        self._live.discard(streamId)
        self.sendControl(CANCEL, streamId, "cancelled", "the receiver dropped the stream unread")

    def cancelledUnread(self, streamId: int) -> None:
        """An incoming stream was cancelled before being received."""
        self._live.discard(streamId)

    def receiving(self, receiving: _Receiving) -> None:
        self._incoming[receiving.streamId] = receiving

    def forgetIncoming(self, receiving: _Receiving) -> None:
        self._live.discard(receiving.streamId)
        if self._incoming.get(receiving.streamId) is receiving:
            del self._incoming[receiving.streamId]

    def forget(self, stream: Stream) -> None:
        """An outgoing stream is over (done or failed)."""
        if stream.streamId is not None and self._outgoing.get(stream.streamId) is stream:
            del self._outgoing[stream.streamId]
        if not self._outgoing:
            self._unregister()

    # -- sending -------------------------------------------------------------------

    def sendControl(self, op: int, streamId: Any, *values: Any) -> None:
        """Send one control message (one write), if the connection is up."""
        if self._up and not self.protocol.transport.disconnecting:
            self.protocol.sendObject(Control((op, streamId, *values)))

    def sendData(self, stream: Stream, offset: int, data: bytes) -> None:
        """
        Write one data frame of C{stream} with one write on the transport,
        even while the protocol holds writes for a read: a frame carries up
        to a whole chunk, which should neither wait nor be copied into a
        bigger write.  Messages held before it leave first, in their own write.
        """
        transport = self.protocol.transport
        transport.flushNow()
        transport.writeSequence(dataFramePieces(stream.streamId or 0, offset, data))
        transport.flushNow()
        self.framesSent += 1

    def wake(self, stream: Stream) -> None:
        """C{stream} may be able to send: queue it and send what can be sent now."""
        self._enqueue(stream)
        self.pump()

    def wakeSoon(self, stream: Stream) -> None:
        """As L{wake}, but at the end of this reactor turn, so that writes made in this turn share frames."""
        self._enqueue(stream)
        if self._pumpCall is None and self._up:
            self._pumpCall = self.clock.callLater(0, self._pumpLater)

    def _enqueue(self, stream: Stream) -> None:
        key = id(stream)
        if key not in self._queued:
            self._queued.add(key)
            self._ready.append(stream)

    def _pumpLater(self) -> None:
        self._pumpCall = None
        self.pump()

    def pump(self) -> None:
        """Send frames round-robin, one per ready stream per round, while the transport takes them."""
        if self._pumping or not self._up:
            return
        self._pumping = True
        try:
            self._pumpFrames()
        finally:
            self._pumping = False

    def _pumpFrames(self) -> None:
        ready, queued = self._ready, self._queued
        while ready and not self._writePaused:
            if self.protocol.transport.disconnecting:
                self._unregister()
                return
            stream = ready.popleft()
            if stream._sendOne():
                ready.append(stream)
            else:
                queued.discard(id(stream))

    # -- IPushProducer: the transport's flow control --------------------------------

    def _register(self) -> None:
        transport = self.protocol.transport
        if self._registered or not self._up or transport.disconnecting or transport.producer is not None:
            return
        self._registered = True
        self._writePaused = False
        transport.registerProducer(self, True)

    def _unregister(self) -> None:
        if self._registered:
            self._registered = False
            self._writePaused = False
            if self.protocol.transport.producer is self:
                self.protocol.transport.unregisterProducer()

    def pauseProducing(self) -> None:
        self._writePaused = True

    def resumeProducing(self) -> None:
        self._writePaused = False
        if self.protocol.transport.disconnecting:
            # A registered producer keeps a closing TCP transport open.
            self._unregister()
            return
        self.pump()

    def stopProducing(self) -> None:
        self._registered = False
        self._writePaused = True

    # -- receiving ------------------------------------------------------------------

    def dataStarting(self, streamId: int, offset: int, length: int) -> Callable[[int, bytes], None] | None:
        """
        A data frame's body is about to arrive: where its pieces go, or
        C{None} to drop them (a stream this side already gave up on).

        @raise FlowControlError: the frame goes past the stream's credit.
        """
        receiving = self._incoming.get(streamId)
        if receiving is None:
            return None
        if receiving.announced + length > receiving.granted:
            raise FlowControlError(
                f"stream {streamId}: {receiving.announced + length} bytes sent, {receiving.granted} granted"
            )
        if not receiving.frameStarting(offset, length):
            return None
        return receiving.piece

    def controlReceived(self, control: Control) -> None:
        """Act on one control message; an unknown stream id is ignored (it already ended)."""
        op, streamId = control[0], control[1]
        try:
            if op == END:
                receiving = self._incoming.get(streamId)
                if receiving is not None:
                    receiving.endReceived(control[2], control[3])
            elif op == ABORT:
                receiving = self._incoming.get(streamId)
                if receiving is not None:
                    receiving.abortReceived(control[2], control[3])
            else:
                self._toSender(op, streamId, control)
        except Exception:
            self.log.failure("Handling bulk control message {control} failed", control=control)

    def _toSender(self, op: int, streamId: int, control: Control) -> None:
        stream = self._outgoing.get(streamId)
        if stream is None:
            return
        if op == GRANT:
            stream._granted(control[2])
        elif op == DONE:
            stream._doneReceived(control[2])
        elif op == CANCEL:
            stream._cancelReceived(control[2], control[3])


@implementer(ISlicer)
class _StreamSlicer:
    """Announces a L{Stream} in the message being encoded: OPEN "bulk.stream", id, size, digest name, CLOSE."""

    def __init__(self, channel: BulkChannel) -> None:
        self.channel = channel

    def slice(self, obj: Stream, encoder: Encoder) -> None:
        streamId = self.channel.announce(obj)
        encoder.write_container(STREAM_OPEN_TYPE, obj, (streamId, obj.size, obj.digestName))


class BulkBroker(Broker):
    """
    An RPC L{Broker} whose connection also carries streams (see the module
    docstring).  Both ends of a connection must be bulk brokers.

    @ivar bulk: the connection's L{BulkChannel}.
    """

    def __init__(
        self,
        root: Referenceable | None = None,
        *,
        clock: Any = None,
        tracebacks: bool = False,
        limits: Limits | None = None,
        registry: Registry | None = None,
        options: BulkOptions | None = None,
    ) -> None:
        """
        Arguments as for L{Broker}, and the connection's L{BulkOptions}.
        Without C{limits}, the defaults hold up to four of the largest
        windows of received bytes while the application pauses reading (a
        stream's window may be in flight when it does).
        """
        options = options or BulkOptions()
        if limits is None:
            largest = max(options.window, options.maxWindow)
            limits = Limits(max_buffered_bytes=max(Limits().max_buffered_bytes, 4 * largest))
        Broker.__init__(self, root, clock=clock, tracebacks=tracebacks, limits=limits, registry=registry)
        self.bulk = BulkChannel(self, options, self._reactor())
        assert self.registry is not None
        self.bulk.install(self.registry)
        self._callStreams: list[Stream] | None = None

    def makeConnection(self, transport: Any) -> None:
        """Connect as L{Broker} does (its decoder streams data frames' bodies to their streams)."""
        Broker.makeConnection(self, transport)
        self.bulk.connectionMade()

    def objectReceived(self, obj: Any) -> None:
        """Control messages go to the channel; the rest is RPC (data frames complete nothing)."""
        if type(obj) is Control:
            self.bulk.controlReceived(obj)
            return
        Broker.objectReceived(self, obj)

    def _callReceived(self, message: Any) -> None:
        """Dispatch a call as L{Broker} does, with L{callingBroker} naming this connection meanwhile."""
        token = _calling.set(self)
        try:
            Broker._callReceived(self, message)
        finally:
            _calling.reset(token)

    def _reservedPongReceived(self, pingId: int) -> None:
        """The answer to one of the channel's round-trip probes."""
        self.bulk.roundTrips.pongReceived(pingId)

    def sendObject(self, obj: Any) -> None:
        """Send as L{Broker} does; streams announced in a message that failed to encode are taken back."""
        try:
            Broker.sendObject(self, obj)
        except BaseException:
            self.bulk.announceFailed()
            raise
        announced = self.bulk.announceSent()
        if announced and self._callStreams is not None:
            self._callStreams += announced

    def callRemote(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Deferred[Any]:
        """
        Call as L{Broker} does.  If the call fails, the streams among its
        arguments that were never started fail with it: the peer may have
        refused the call before it even saw them.
        """
        self._callStreams = []
        try:
            call = Broker.callRemote(self, target, name, args, kwargs)
        finally:
            streams, self._callStreams = self._callStreams, None
        if streams:
            call.addErrback(_callFailed, streams)
        return call

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        """Fail pending calls (as L{Broker} does) and every stream in flight."""
        Broker.connectionLost(self, reason)
        self.bulk.connectionLost(reason)


def _noPing(pingId: int) -> None:
    """The probe of a lost connection: nothing is sent."""


def _callFailed(failure: Failure, streams: list[Stream]) -> Failure:
    for stream in streams:
        stream._callFailed(failure)
    return failure


class BulkBrokerFactory(BrokerFactory):
    """A L{BrokerFactory} building L{BulkBroker}s with the same L{BulkOptions}."""

    def __init__(self, root: Referenceable | None = None, *, options: BulkOptions | None = None, **kwargs: Any) -> None:
        BrokerFactory.__init__(self, root, **kwargs)
        self.options = options

    def buildProtocol(self, addr: Any) -> BulkBroker:
        broker = BulkBroker(
            self.root,
            clock=self.clock,
            tracebacks=self.tracebacks,
            limits=self.limits,
            registry=self.registry,
            options=self.options,
        )
        broker.factory = self
        broker.sendBackPressure = self.sendBackPressure
        return broker


def serve(
    reactor: Any,
    description: str,
    root: Referenceable,
    *,
    tracebacks: bool = False,
    limits: Limits | None = None,
    registry: Registry | None = None,
    options: BulkOptions | None = None,
) -> Deferred[IListeningPort]:
    """As L{protocols.rpc.serve}, with connections that carry streams."""
    factory = BulkBrokerFactory(
        root, clock=reactor, tracebacks=tracebacks, limits=limits, registry=registry, options=options
    )
    return listenWith(reactor, description, factory)


def connect(
    reactor: Any,
    description: str,
    *,
    root: Referenceable | None = None,
    limits: Limits | None = None,
    registry: Registry | None = None,
    options: BulkOptions | None = None,
) -> Deferred[RemoteReference]:
    """As L{protocols.rpc.connect}, with a connection that carries streams; close it with C{ref.broker.disconnect()}."""
    factory = BulkBrokerFactory(root, clock=reactor, limits=limits, registry=registry, options=options)
    return connectWith(reactor, description, factory)
