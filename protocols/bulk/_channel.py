# -*- test-case-name: tests.protocols.bulk.test_owners,tests.protocols.bulk.test_allocator -*-
"""The bulk channel of one connection: an extension an RPC broker loads.

Contract: L{BulkChannel} is an L{IBrokerExtension}: a plain RPC L{Broker}
made with bulk settings (C{Broker(bulk=BulkOptions())}, which
C{ServerOptions(bulk=...)} and C{ClientOptions(bulk=...)} make every
connection's) loads one, so a L{Stream} in a call's arguments or result is
announced in that message and arrives as an L{IncomingStream}.  Outgoing streams are
served round-robin, one data frame per turn, only while the transport is
not paused and the stream has credit; an RPC message is written between two
frames.  Receive windows may grow by autotuning (L{protocols.bulk._tuning}),
never below the configured one.  A peer may have at most
L{BulkOptions.maxStreams} live streams, with increasing ids
(L{StreamIdReused}); what the connection holds (L{Resources.hold}) is
released when it is lost.  L{callingChannel} finds the caller's channel.

Cost: routing a frame or control message is O(1) (two dicts by id); a
stream waiting for credit costs nothing.

Each outgoing stream is charged to the connection's ledger
(L{SENDING_ACCOUNT}, L{SENDING_STREAM_BYTES}) while it waits or runs; one
the ledger has no room for is not announced (the message carrying it fails
to encode with L{ResourceExhausted}: a call's answer becomes its FAIL).

Design: docs/design/bulk.md
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorThreads
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import EncodingError, Registry
from framing._errors import ResourceExhausted
from framing._outgoing import Outgoing
from framing.bulk._connection import StreamTable
from framing.bulk._digests import DigestUnavailable
from framing.bulk._hello import Hello
from framing.bulk._wire import (
    CONTROL_OPEN_TYPE,
    DATA_OPEN_TYPE,
    GRANT,
    STREAM_OPEN_TYPE,
    AnnouncementUnslicer,
    Control,
    ControlSlicer,
    ControlUnslicer,
    DataUnslicer,
    dataFramePieces,
    grantMessage,
)
from framing.slicing._interfaces import ISlicer

if TYPE_CHECKING:
    from framing._ledger import Ledger

from .._interfaces import IBrokerExtension
from .._sockets import tuneForBulk
from ..rpc import Broker, currentBroker
from ._early import EarlyTable
from ._incoming import IncomingSide
from ._interfaces import IReceivingStream, ISendingStream
from ._options import BulkOptions, carriedBy
from ._scheduling import FrameScheduler
from ._sending import Stream
from ._tuning import RoundTrips

if TYPE_CHECKING:
    from framing import Encoder

SENDING_ACCOUNT = "bulk-sending"
"""The ledger account of this side's outgoing streams, while they wait or run (L{SENDING_STREAM_BYTES} each)."""
SENDING_STREAM_BYTES = 3072
"""
What one outgoing stream's state holds here while it waits for the peer's
HELLO or credit (its L{Stream}, source, credit, window, outcome, their
Deferreds and the scheduler's entry), charged to the connection's ledger
from its announcement until it is over: measured with tracemalloc, 2.2 kB
for the interop service's C{stream()} (tests/protocols/bulk/test_owners.py
C{SendingStreamChargeTests}, which fails if a stream holds more).  Without
it a peer that asked for streams and never read them made the server hold
4,033 of them (a census inside the interop server, never-read), uncharged.
"""


def callingBroker() -> Broker | None:
    """
    The broker whose peer called the remote method now running (in its
    synchronous part, or anywhere in a coroutine method, which keeps the
    context it started in), or C{None} outside a remote call: the RPC
    layer's L{currentBroker}.
    """
    broker: Broker | None = currentBroker()
    return broker


@implementer(IBrokerExtension)
class BulkChannel(IncomingSide):
    """
    The streams of one connection: it implements L{IStreamHost} for them.
    While it has outgoing streams its L{FrameScheduler} is the transport's
    push producer, so frames wait for the socket; an application should not
    register a producer of its own on a bulk connection (if one is
    registered, streams are paced by their credit alone).

    @ivar protocol: the L{Broker} it belongs to (its C{bulk}).
    @ivar options: its L{BulkOptions}.
    @ivar clock: its C{IReactorTime}.
    @ivar hashReactor: the reactor hashing threads report to, or C{None}
        (hash inline).
    @ivar framesSent: data frames written on this connection.
    @ivar grantsSent: GRANT messages written on this connection.
    @ivar roundTrips: the connection's base round-trip time, measured while
        autotuning is on (L{BulkOptions.maxWindow}).
    @ivar readSize: the most bytes one read of the connection hands in, once
        it is up on a Twisted TCP socket (L{BulkOptions.socketReadSize}, or
        Twisted's own if that is C{None}); C{None} on any other transport.
        A receiver hashing in the reactor thread sizes its window by it
        (L{protocols.bulk._tuning.inlineHashingWindow}).
    @ivar scheduler: its L{FrameScheduler}.
    @ivar resources: what the application tied to the connection (L{Resources}).
    @ivar hello: both sides' HELLO (L{Hello}): digests and initial windows.
    @ivar early: what announced streams sent before they were received (L{EarlyTable}).
    """

    log = Logger()
    controlTypes = (Control,)
    """Control messages come to L{controlReceived} (data frames complete nothing)."""

    def __init__(self, options: BulkOptions, clock: Any) -> None:
        """
        @param options: the connection's L{BulkOptions}.
        @param clock: its C{IReactorTime} (a reactor with threads hashes off
            the reactor thread when C{options.hashing} says so).
        """
        self._protocol: Callable[[], Broker | None] = _noBroker
        self.options = options
        self.clock = clock
        threads = options.hashing == "thread" and IReactorThreads.providedBy(clock)
        self.hashReactor: Any = clock if threads else None
        self.framesSent = 0
        self.grantsSent = 0
        self.readSize: int | None = None
        self.streams: StreamTable[ISendingStream, IReceivingStream] = StreamTable(options.maxStreams)
        # What the channel holds must not hold it back (neither the
        # instance's logger, whose source is the channel, nor its bound
        # methods), or a closed connection's channel waits for a garbage
        # collection: L{_weakly}.
        self.resources = Resources(type(self).log, _weakly(self._peer, "?"))
        self.scheduler = FrameScheduler(_weakly(self._transport, RuntimeError), clock)
        self._sending: tuple[Outgoing, Deferred[Any]] | None = None
        self._up = False
        self.roundTrips = RoundTrips(clock, _noPing)
        self.hello = Hello()
        self._awaitingHello: list[ISendingStream] = []
        self.early = EarlyTable(clock, _weakly(self._unreadTimedOut, None))
        self._charged: dict[int, Ledger] = {}
        """The ledger each outgoing stream in C{streams.sending} was charged to (L{SENDING_STREAM_BYTES}), by id."""

    @property
    def protocol(self) -> Broker:
        """The broker the channel is loaded by."""
        broker = self._protocol()
        if broker is None:
            raise RuntimeError("the bulk channel's connection is gone")
        return broker

    def _sendPing(self) -> Deferred[float]:
        """A round-trip probe on the broker's connection (made after the broker installed this channel)."""
        answered: Deferred[float] = self.protocol.connection.sendPing()
        return answered

    def _transport(self) -> Any:
        return self.protocol.transport

    @property
    def autotuning(self) -> bool:
        """Whether incoming streams' windows may grow past L{BulkOptions.window}."""
        return self.options.maxWindow > self.options.window

    def install(self, broker: Broker, registry: Registry) -> None:
        """Loaded by C{broker}: teach its connection's registry the bulk open-types."""
        # Weak: the broker holds the channel, and a closed connection's pair
        # must go without waiting for a garbage collection.
        self._protocol = weakref.ref(broker)
        self.roundTrips = RoundTrips(self.clock, self._sendPing)
        registry.add_slicer(Stream, _StreamSlicer(self))
        registry.add_slicer(Control, ControlSlicer())
        registry.add_unslicer(CONTROL_OPEN_TYPE, lambda limits: ControlUnslicer(limits, self.helloDecoded))
        registry.add_unslicer(DATA_OPEN_TYPE, lambda limits: DataUnslicer(limits, self.dataStarting))
        registry.add_unslicer(STREAM_OPEN_TYPE, lambda limits: AnnouncementUnslicer(limits, self.announcementReceived))

    # -- lifecycle ---------------------------------------------------------------

    def connectionMade(self) -> None:
        """The connection is up: streams may start; a TCP socket is tuned for bulk (L{BulkOptions.readSize})."""
        self._up = True
        self.resources.open = True
        self.scheduler.start()
        wrapped = getattr(self.protocol.transport, "transport", None)
        self.readSize = tuneForBulk(wrapped, self.options.socketReadSize(), self.options.sendLimit)

    def connectionLost(self, reason: Failure) -> None:
        """Every stream in flight fails with C{reason}; what was held is released."""
        self._up = False
        self._sending = None
        self.scheduler.stop()
        self.streams.live.clear()
        self._awaitingHello.clear()
        self.early.clear()
        # Emptied one by one, and nothing left in a local: a failure raised
        # meanwhile keeps this frame (through its traceback's frames) until
        # a garbage collection, and must not keep the streams with it.
        outgoing, incoming = self.streams.sending, self.streams.receiving
        self._charged.clear()  # (the connection's ledger is closed with it: what they held is let go at once)
        while outgoing:
            outgoing.popitem()[1].connectionLost(reason)
        while incoming:
            incoming.popitem()[1].connectionLost(reason)
        self.resources.releaseAll()
        # Nothing more will be measured on a lost connection.
        self.roundTrips = RoundTrips(self.clock, _noPing)

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
        return len(self.streams)

    # -- announcing: one send transaction per message ---------------------------------

    def reserve(self, stream: Stream, outgoing: Outgoing) -> int:
        """
        Give C{stream} an id as the message C{outgoing} is encoded: kept if
        the message is sent, taken back if it is not.  A stream sent in a
        call's arguments also fails with the call if it never started.

        @raise IllegalTransition: the stream was sent before.
        """
        broker = self._protocol()
        ledger = None if broker is None else broker.connection.ledger
        if ledger is not None and not ledger.room(SENDING_STREAM_BYTES):
            raise ResourceExhausted(
                f"no room for another outgoing stream ({SENDING_STREAM_BYTES} bytes; the connection's ledger: "
                f"{ledger.held} held of {ledger.budget}, spare {ledger.spare()})"
            )
        streamId = self.streams.reserve(stream, self.hello, self.options.digests)
        if ledger is not None:
            ledger.charge(SENDING_ACCOUNT, SENDING_STREAM_BYTES)
            self._charged[streamId] = ledger
        stream.attach(self)
        sending = self._sending
        call = sending[1] if sending is not None and sending[0] is outgoing else None
        outgoing.on_commit(partial(self._announced, stream, call))
        outgoing.on_rollback(partial(self._takeBack, stream, streamId))
        return streamId

    def _announced(self, stream: ISendingStream, call: Deferred[Any] | None) -> None:
        self.scheduler.register()
        if call is not None:
            # The peer may refuse the call before it even sees the stream.
            call.addErrback(_callFailed, stream)
        if self.hello.peerDigests is None:
            self._awaitingHello.append(stream)
        else:
            self._startStream(stream)

    def _startStream(self, stream: ISendingStream) -> None:
        """The peer's HELLO is known: settle the stream's digest and give it the initial window."""
        try:
            window = stream.helloKnown(self.hello, self.options.digests)
        except DigestUnavailable as error:
            stream.refuse(error)
            return
        if window:
            stream.initialCredit(window)

    def sayHello(self) -> None:
        """Send this side's HELLO (its digests and initial window), once, before anything else bulk."""
        if self._up and not self.protocol.transport.disconnecting:
            hello = self.hello.first(self.options)
            if hello is not None:
                self.protocol.sendObject(hello)

    def helloDecoded(self, control: Control) -> None:
        """The peer's HELLO holds as soon as it is decoded, for announcements later in the same read."""
        if not self.hello.decoded(control):
            self.log.warn("Bulk connection from {peer}: a malformed HELLO was ignored", peer=self._peer())

    def helloReceived(self) -> None:
        """The peer's HELLO, dispatched: answer with this side's, then start the streams that waited for it."""
        if self.hello.peerDigests is None:
            return
        self.sayHello()
        waiting, self._awaitingHello = self._awaitingHello, []
        for stream in waiting:
            if stream.streamId is not None and self.streams.sending.get(stream.streamId) is stream:
                self._startStream(stream)

    def _takeBack(self, stream: ISendingStream, streamId: int) -> None:
        self.streams.takeBack(stream, streamId)
        self._release(streamId)
        stream.detach()

    def callSent(self, call: Deferred[Any], outgoing: Outgoing) -> None:
        """A call is being sent: this side's HELLO goes first; streams in its arguments fail with it unless started."""
        if not self.hello.sent and self._up:
            # The HELLO shares the call's write.
            transport = self.protocol.transport
            transport.hold()
            outgoing.on_commit(transport.release)
            outgoing.on_rollback(transport.release)
            self.sayHello()
        self._sending = (outgoing, call)
        # Registered before the slicers' actions: the call is forgotten
        # first on commit, last on rollback, and never kept past its send.
        outgoing.on_commit(self._callSendOver)
        outgoing.on_rollback(self._callSendOver)

    def _callSendOver(self) -> None:
        self._sending = None

    # -- IStreamHost: what streams ask ------------------------------------------------

    def streamOver(self, stream: ISendingStream) -> None:
        """An outgoing stream is over (done or failed)."""
        if stream.streamId is not None and self.streams.sending.get(stream.streamId) is stream:
            del self.streams.sending[stream.streamId]
            self._release(stream.streamId)
        if not self.streams.sending:
            self.scheduler.unregister()

    def _release(self, streamId: int) -> None:
        """Outgoing stream C{streamId} is held no more: what it was charged is released."""
        ledger = self._charged.pop(streamId, None)
        if ledger is not None:
            ledger.release(SENDING_ACCOUNT, SENDING_STREAM_BYTES)

    def sendControl(self, op: int, streamId: Any, *values: Any) -> None:
        """
        Send one control message (one write), if the connection is up; this
        side's HELLO goes first.  A GRANT, sent about once per read while a
        stream arrives, is written as its bytes (L{grantMessage}): no send
        transaction, which only an object that may fail to encode needs.
        """
        if not self._up:
            return
        broker = self.protocol
        transport = broker.transport
        if transport.disconnecting:
            return
        if not self.hello.sent:
            self.sayHello()
        if op == GRANT:
            transport.write(grantMessage(streamId, *values))
            transport.flush()
            self.grantsSent += 1
        else:
            broker.sendObject(Control((op, streamId, *values)))

    def sendData(self, streamId: int, offset: int, data: bytes) -> None:
        """
        Write one data frame of stream C{streamId} with one write on the
        transport, even while the protocol holds writes for a read: a frame
        carries up to a whole chunk, which should neither wait nor be copied
        into a bigger write.  Messages held before it leave first, in their
        own write.
        """
        transport = self.protocol.transport
        transport.flushNow()
        transport.writeSequence(dataFramePieces(streamId, offset, data))
        transport.flushNow()
        self.framesSent += 1

    def wake(self, stream: ISendingStream) -> None:
        """C{stream} may be able to send: queue it and send what can be sent now."""
        self.scheduler.wake(stream)

    def wakeSoon(self, stream: ISendingStream) -> None:
        """As L{wake}, but at the end of this reactor turn, so that writes made in this turn share frames."""
        self.scheduler.wakeSoon(stream)


# Brokers made with BulkOptions (Broker(bulk=...), ServerOptions.bulk, ClientOptions.bulk) load a channel.
carriedBy(BulkChannel)


def _weakly(method: Callable[..., Any], gone: Any) -> Callable[..., Any]:
    """
    C{method} (a bound method of a channel), called through a weak
    reference: what the channel's parts keep to call back must not keep
    the channel.  Once the channel is gone the call answers C{gone}, or
    raises one if it is an exception class (as C{protocol} does once the
    broker is gone).  Cost: one dereference per call.
    """
    reference = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        live = reference()
        if live is not None:
            return live(*args)
        if isinstance(gone, type) and issubclass(gone, BaseException):
            raise gone("the bulk channel is gone")
        return gone

    return call


class Resources:
    """
    What the application ties to one connection (the file service's open
    uploads), released once when it is lost, and the refusals already
    logged on it.

    @ivar open: whether the connection is up (a resource held on a
        connection not up is released at once).
    @ivar noted: the codes L{noteOnce} logged.
    """

    def __init__(self, log: Logger, peer: Callable[[], str]) -> None:
        self._log = log
        self._peer = peer
        self._held: dict[object, Callable[[], None]] = {}
        self.open = False
        self.noted: set[str] = set()

    def hold(self, key: object, release: Callable[[], None]) -> None:
        """
        Tie a resource to the connection: C{release()} is called once when
        the connection is lost, unless L{letGo} was called for C{key} first.
        On a connection not up it is called at once.
        """
        if not self.open:
            release()
            return
        self._held[key] = release

    def letGo(self, key: object) -> None:
        """The resource C{key} was released by its owner: forget it (a key not held is ignored)."""
        self._held.pop(key, None)

    def holds(self, key: object) -> bool:
        """Whether the resource C{key} is tied to the connection."""
        return key in self._held

    def releaseAll(self) -> None:
        """The connection is lost: release everything held, one by one (a release that raises is logged)."""
        self.open = False
        held = self._held
        while held:
            try:
                held.popitem()[1]()
            except Exception:
                self._log.failure("Releasing what a lost bulk connection held failed")

    def noteOnce(self, code: str, message: str, **fields: Any) -> None:
        """Log C{message} (with C{code}) the first time C{code} happens on this connection, not later."""
        if code not in self.noted:
            self.noted.add(code)
            self._log.warn("Bulk connection from {peer}: {code}: " + message, peer=self._peer(), code=code, **fields)


@implementer(ISlicer)
class _StreamSlicer:
    """
    Announces a L{Stream} in the message being encoded: OPEN "bulk.stream",
    id, size, digest name, CLOSE.  The stream registers on the message's
    send transaction (C{encoder.outgoing}): it starts if the message is
    sent, and its id is taken back if it is not.
    """

    def __init__(self, channel: BulkChannel) -> None:
        self.channel = channel

    def slice(self, obj: Stream, encoder: Encoder) -> None:
        outgoing = encoder.outgoing
        if outgoing is None:
            raise EncodingError("a Stream can only be sent in a message (sendObject), not encoded alone")
        streamId = self.channel.reserve(obj, outgoing)
        encoder.write_container(STREAM_OPEN_TYPE, obj, (streamId, obj.size, obj.digestName))


def bulkOf(broker: Any) -> BulkChannel | None:
    """The L{BulkChannel} loaded by C{broker}, or C{None} (a broker without bulk, or C{None})."""
    for extension in getattr(broker, "extensions", ()):
        if isinstance(extension, BulkChannel):
            return extension
    return None


def callingChannel() -> BulkChannel | None:
    """The L{BulkChannel} of the connection whose peer called the remote method now running, or C{None}."""
    return bulkOf(currentBroker())


def _noBroker() -> Broker | None:
    """The broker of a channel not loaded yet."""
    return None


def _noPing() -> Deferred[float]:
    """The probe of a lost connection: nothing is sent, and no answer comes."""
    return Deferred()


def _callFailed(failure: Failure, stream: ISendingStream) -> Failure:
    stream.callFailed(failure)
    return failure
