"""Object streams read by the clients without Twisted, sans-IO: the reader's side of L{framing.rpc.streams}.

Contract: a L{ClientObjectStreams} is part of every
L{framing.rpc.session.ClientSession} (not an extension: a plain call pays
nothing for it; the session hands it a top-level L{FlowMessage} only, and
its announcement unslicer runs only when an answer carries a stream).  A
stream the server announces in an answer (or in its call to a callback)
decodes as the client's own reader, a L{ReceivedStream} subclass made by
the session's C{makeStream}; the first CREDIT (the whole window) waits in
the session's output at once.  From then on:

 - the server's ITEMs are counted against the stream's window
   (L{framing.rpc.streams.ReceiveWindow.arrived}, the Twisted reader's
   bookkeeping: items and bytes, every body an item holds counted by its
   length, a sender past either drops the connection with
   L{framing.rpc.streams.ItemCreditExceeded}), checked against the
   stream's item constraint if it is typed (L{framing.rpc.streams.StreamOf}
   calls L{ReceivedStream.constrainItems}; the first refused item ends the
   stream with its L{framing.Violation} after the items before it, C{where}
   naming its index, and CANCEL goes to the server at once), held in the
   reader's buffer and charged to the session's ledger (C{ledger}) until
   taken; a consumer waiting for them (its C{waiter}, opaque here) is
   settled as a call is, C{(waiter, None, None)}, and takes them itself;
 - L{ClientObjectStreams.take} hands the consumer one item, and its credit
   goes back in the window's steps (a CREDIT in the output);
 - END ends the iteration after the items held; ERROR fails it with the
   producer's error (rebuilt as a FAIL's is) after them;
 - L{ClientObjectStreams.cancel} (the consumer's C{close}, C{aclose}, a
   break that dropped the reader) drops the items held and sends CANCEL;
   L{ClientObjectStreams.timedOut} does too, the stream failing with the
   I/O layer's error (a consumer that waited past its deadline);
 - the session's end fails every stream with the reason, after its items.

Sending a stream as an argument (client streaming), for a client that
gives C{sending} (the asyncio client): an async iterable in a call's
arguments is announced as the CALL is encoded and goes live once it is
encoded whole (L{ClientObjectStreams.committed}; forgotten if the encoding
fails); the I/O layer pulls its source while its L{SendWindow} is open,
hands each item to L{ClientObjectStreams.itemReady} (checked, if the
stream is typed, then one ITEM in the output) and ends it with
L{ClientObjectStreams.endSending} or L{ClientObjectStreams.failSending}
(END, ERROR); the server's CREDIT settles the pull's C{waiter}, its
CANCEL and the session's end tell the I/O layer to stop.  Without
C{sending} (the blocking client), and for a plain generator in any
client, the argument is refused with L{StreamArgumentRefused} (a
C{TypeError}) before anything is sent.

No I/O, no threads, no clock: the session's owner guards this with the
session's lock and sends the session's output.  Costs: one dict lookup and
the window's O(1) count per ITEM, one buffer append per item, a CREDIT per
quarter window; nothing per call without a stream.
"""

from __future__ import annotations

import collections
import types
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from zope.interface import implementer

from framing import Encoder, Registry, Violation
from framing.ledger import Ledger
from framing.slicing.constraints import Constraint
from framing.slicing.interfaces import ISlicer

from .errors import CallTimedOut, DeadlineExceeded, describe, rebuild
from .streams import (
    ANNOUNCE_OPEN_TYPE,
    CANCEL,
    CREDIT,
    DEFAULT_WINDOW,
    DEFAULT_WINDOW_BYTES,
    END,
    ERROR,
    ITEM,
    Announcement,
    AnnouncementUnslicer,
    FlowMessage,
    ObjectStreamIdReused,
    ReceiveWindow,
    SendWindow,
    TooManyObjectStreams,
    addFlowTypes,
    checkItem,
    itemCheckFor,
)

__all__ = ["ClientObjectStreams", "ReceivedStream", "SentStream", "StreamArgumentRefused", "itemWaitBound"]

DEFAULT_MAX_STREAMS = 1000
"""Streams the server may have announced to a client at once (the Twisted side's default)."""

_Settled = tuple[Any, Any, "BaseException | None"]


class StreamArgumentRefused(TypeError):
    """A client without Twisted was asked to send a stream of objects in a call's arguments: it reads streams only."""


class ReceivedStream:
    """
    One stream the server sends, as a client without Twisted holds it: the
    items received and not yet taken, its window, how it ended.  The
    clients subclass it with their iteration (a plain iterator, an async one).

    @ivar streamId: the server's id of the stream.
    @ivar window: its L{ReceiveWindow} (C{window.buffered}: items held).
    @ivar taken: items taken by the consumer so far.
    @ivar waiter: what the consumer waits on for the next item (opaque: a
        future, a thread's slot), settled when items, the end or an error
        come; C{None} while nobody waits.
    @ivar ended: END came (or the stream was cancelled here).
    @ivar error: why the stream failed (ERROR, a refused item, the connection's end), or C{None}.
    """

    isObjectStream = True

    def __init__(self, streams: ClientObjectStreams, streamId: int, window: ReceiveWindow) -> None:
        self.streams = streams
        self.streamId = streamId
        self.window = window
        self.buffer: collections.deque[Any] = collections.deque()
        self.taken = 0
        self.waiter: Any = None
        self.ended = False
        self.error: BaseException | None = None
        self._constrained = False

    def constrainItems(self, constraint: Constraint, where: str) -> bool:
        """
        Check each item against C{constraint} as it arrives (and those held
        already), a refused one named C{where[index]}
        (L{framing.rpc.streams.StreamOf} calls this).

        @return: whether C{constraint} is this stream's (C{False}: it had one already).
        """
        if self._constrained:
            return False
        self._constrained = True
        self.window.constrain(constraint, where)
        buffer = self.buffer
        for offset, item in enumerate(buffer):
            try:
                checkItem(constraint, item, where, self.taken + offset)
            except Violation as violation:
                for _ in range(len(buffer) - offset):
                    buffer.pop()
                self.streams.refused(self, violation)
                break
        return True

    @property
    def finished(self) -> bool:
        """Whether the stream is over and nothing is left to take."""
        return (self.ended or self.error is not None) and not self.buffer

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.streamId}: {self.taken} taken, {len(self.buffer)} held>"


class SentStream:
    """
    One stream this side sends in a call's arguments (an async iterable),
    as the sans-IO side tracks it; the I/O layer pulls its C{source} while
    L{SendWindow.open} and hands each item to L{ClientObjectStreams.itemReady}.

    @ivar streamId: this side's id of the stream.
    @ivar source: what the items are taken from (opaque here).
    @ivar window: its L{SendWindow}.
    @ivar sent: items sent so far.
    @ivar over: ended, failed or cancelled: nothing more is sent.
    @ivar waiter: what the I/O layer's pull waits on for credit (opaque), settled when CREDIT or CANCEL comes.
    @ivar handle: the I/O layer's own (its pulling task), untouched here.
    """

    def __init__(self, streamId: int, source: Any) -> None:
        self.streamId = streamId
        self.source = source
        self.window = SendWindow()
        self.sent = 0
        self.over = False
        self.waiter: Any = None
        self.handle: Any = None
        self.check = itemCheckFor(source)


class ClientObjectStreams:
    """
    The object streams of one client connection, read and sent (see the module docstring).

    @ivar output: where the flow messages to send go (the session's output list).
    """

    def __init__(
        self,
        output: list[bytes],
        makeStream: Callable[[ClientObjectStreams, int, ReceiveWindow], ReceivedStream] | None = None,
        *,
        window: int = DEFAULT_WINDOW,
        windowBytes: int = DEFAULT_WINDOW_BYTES,
        maxStreams: int = DEFAULT_MAX_STREAMS,
        died: Callable[[], None] | None = None,
        sending: Callable[[SentStream], None] | None = None,
    ) -> None:
        """
        @param output: the session's output list: CREDITs and CANCELs are appended, encoded.
        @param makeStream: the client's reader class (or factory); C{None}: L{ReceivedStream}.
        @param window: items a stream may have in flight.
        @param windowBytes: encoded bytes of items a stream may have in flight.
        @param maxStreams: streams the server may have announced at once.
        @param died: told when a reader unfinished was dropped by its consumer
            (its CANCEL is due: L{cancelDropped}); on whatever thread the
            garbage collector ran, so it must neither block nor encode.
        @param sending: told of each stream this side sends once the call
            carrying it was encoded whole (the I/O layer starts pulling its
            source) and again when it is over (its pull stops); C{None}:
            this side sends no streams (an async iterable or a generator in
            an argument is refused with L{StreamArgumentRefused}).
        """
        self.output = output
        self.makeStream = makeStream or ReceivedStream
        self.window = window
        self.windowBytes = windowBytes
        self.maxStreams = maxStreams
        self._died = died
        self._streams: dict[int, weakref.ref[ReceivedStream]] = {}
        # Every live reader's weak reference (whose callback lets its held items go) and window, over or not.
        self._windows: dict[int, tuple[weakref.ref[ReceivedStream], ReceiveWindow]] = {}
        self._registry: Registry | None = None
        self.ledger: Ledger | None = None
        # The ids of readers dropped unfinished, their CANCELs due (the session looks at this list: never replaced).
        self.dropped: list[int] = []
        self._lastAnnounced = 0
        self._encoder: Encoder | None = None
        self.failure: BaseException | None = None
        self._sending = sending
        self._producers: dict[int, SentStream] = {}
        # Streams announced in the message being encoded: live once it is encoded whole (the session asks).
        self.announcing: list[SentStream] = []
        self._nextId = 1

    def install(self, registry: Registry, encoder: Encoder) -> None:
        """Teach the connection's C{registry} the flow messages and the announcement; refuse streams as arguments."""
        self._encoder = encoder
        self._registry = registry
        addFlowTypes(registry)
        registry.add_unslicer(ANNOUNCE_OPEN_TYPE, lambda limits: AnnouncementUnslicer(limits, self.announced))
        refusal = _StreamArgumentSlicer()
        announcer: Any = refusal if self._sending is None else _AnnouncementSlicer(self)
        refused: tuple[type, ...] = (types.GeneratorType, ReceivedStream)
        announced: tuple[type, ...] = (types.AsyncGeneratorType, AsyncIterator)
        for cls in refused:
            registry.add_slicer(cls, refusal)
        for cls in announced:
            registry.add_slicer(cls, announcer)

    @property
    def streamCount(self) -> int:
        """Streams the server sends that are not over."""
        return len(self._streams)

    # -- told by the session -----------------------------------------------------

    def announced(self, announcement: Announcement) -> ReceivedStream:
        """
        The server announced a stream (as its announcement is decoded): its
        reader, and the first CREDIT in the output.

        @raise ObjectStreamIdReused: the id is not above the server's last one (the session ends).
        @raise TooManyObjectStreams: the server has L{maxStreams} streams here already (the session ends).
        """
        (streamId,) = announcement
        if streamId <= self._lastAnnounced:
            raise ObjectStreamIdReused(f"stream {streamId} announced after stream {self._lastAnnounced}")
        if len(self._streams) >= self.maxStreams:
            raise TooManyObjectStreams(f"more than {self.maxStreams} streams announced at once")
        self._lastAnnounced = streamId
        window = ReceiveWindow(self.window, self.windowBytes, self.ledger, self._registry)
        stream = self.makeStream(self, streamId, window)
        ref = weakref.ref(stream, _Dropped(weakref.ref(self), streamId))
        self._streams[streamId] = ref
        self._windows[streamId] = (ref, window)
        objects, windowBytes = window.first()
        self._send(FlowMessage((CREDIT, streamId, objects, windowBytes)))
        return stream

    def received(self, message: FlowMessage, settled: list[_Settled]) -> None:
        """
        One flow message from the server: an ITEM, END or ERROR of one of
        its streams (CREDIT and CANCEL name streams this side sends: it
        sends none, and ignores them); a waiting consumer is settled into C{settled}.

        @raise framing.rpc.streams.ItemCreditExceeded: the server sent past the
            stream's window (the session ends: a broken flow control).
        """
        tag = message[0]
        if tag == CREDIT or tag == CANCEL:
            producer = self._producers.get(message[1])
            if producer is None:
                return  # over here, the server has not heard yet
            if tag == CREDIT:
                producer.window.granted(message[2], message[3])
            else:
                self._producerOver(producer)
            waiter = producer.waiter
            if waiter is not None:
                producer.waiter = None
                settled.append((waiter, None, None))
            return
        ref = self._streams.get(message[1])
        stream = ref() if ref is not None else None
        if stream is None:
            return  # cancelled here, the server has not heard yet
        if tag == ITEM:
            items, refused = stream.window.arrived(message)
            stream.buffer.extend(items)
            if refused is not None:
                self.refused(stream, refused)
        else:
            del self._streams[stream.streamId]
            problem = stream.window.endProblem(message[2]) if tag == END else None
            if tag == END and problem is None:
                stream.ended = True
            elif problem is not None:
                stream.error = problem
            else:
                stream.error = rebuild(message[2], message[3], None, message[4])
        self._wake(stream, settled)

    def ended(self, reason: BaseException) -> list[_Settled]:
        """The session ended with C{reason}: every stream fails with it (after its items); the waiting consumers."""
        self.failure = reason
        settled: list[_Settled] = []
        streams = self._streams
        while streams:
            stream = streams.popitem()[1]()
            if stream is not None and not stream.ended and stream.error is None:
                stream.error = reason
                self._wake(stream, settled)
        self.dropped.clear()
        # (the session's ledger is closed with it: what the readers still hold is let go at once)
        self._windows.clear()
        self.announcing.clear()
        producers = self._producers
        while producers:
            producer = producers.popitem()[1]
            self._producerOver(producer)
            if producer.waiter is not None:
                settled.append((producer.waiter, None, None))
                producer.waiter = None
        return settled

    # -- the streams this side sends -------------------------------------------------

    def announce(self, source: Any) -> int:
        """C{source} is being announced in a message: its id (live if the message is encoded whole: L{committed})."""
        streamId = self._nextId
        self._nextId += 1
        self.announcing.append(SentStream(streamId, source))
        return streamId

    def committed(self) -> None:
        """The message announcing L{announcing} was encoded whole (and will be sent): each stream is live."""
        announcing, self.announcing = self.announcing, []
        for producer in announcing:
            self._producers[producer.streamId] = producer
            if self._sending is not None:
                self._sending(producer)

    def rolledBack(self) -> None:
        """The message announcing L{announcing} failed to encode: the streams are forgotten."""
        self.announcing.clear()

    def itemReady(self, producer: SentStream, item: Any) -> None:
        """
        The I/O layer took C{item} from C{producer}'s source (its window was
        open): checked if the stream is typed, then its ITEM in the output;
        a refused or unencodable item ends the stream with ERROR instead.
        """
        if producer.over:
            return
        check = producer.check
        if check is not None:
            try:
                checkItem(check[0], item, check[1], producer.sent)
            except Violation as violation:
                self.failSending(producer, violation)
                return
        message = FlowMessage((ITEM, producer.streamId, item))
        try:
            data = self._encoded(message)
        except Exception as error:
            self.failSending(producer, error)
            return
        producer.window.taken()
        producer.window.sent(1, len(data))
        producer.sent += 1
        self.output.append(data)

    def endSending(self, producer: SentStream) -> None:
        """C{producer}'s source is spent: END, with the count of items sent."""
        if producer.over:
            return
        self._producerOver(producer)
        self._send(FlowMessage((END, producer.streamId, producer.sent)))

    def failSending(self, producer: SentStream, error: BaseException) -> None:
        """C{producer}'s source raised C{error} (or an item was refused): ERROR, after the items sent."""
        if producer.over:
            return
        self._producerOver(producer)
        typeName, text, details = describe(error)
        try:
            self._send(FlowMessage((ERROR, producer.streamId, typeName, text, details)))
        except Exception:
            self._send(FlowMessage((ERROR, producer.streamId, typeName, text, None)))

    def _producerOver(self, producer: SentStream) -> None:
        producer.over = True
        if self._producers.get(producer.streamId) is producer:
            del self._producers[producer.streamId]
        if self._sending is not None:
            self._sending(producer)

    # -- asked by the consumer ---------------------------------------------------------

    def take(self, stream: ReceivedStream) -> Any:
        """
        The next item of C{stream}, held already (and checked as it
        arrived): counted, its bytes released once every item of its ITEM
        is taken, its credit given back (a CREDIT in the output, a step at a time).

        @raise IndexError: no item is held (wait: L{ReceivedStream.waiter}).
        """
        item = stream.buffer.popleft()
        stream.taken += 1
        grant = stream.window.taken()
        if grant and not stream.ended and stream.error is None:
            self._send(FlowMessage((CREDIT, stream.streamId, grant, stream.window.windowBytes)))
        return item

    def cancel(self, stream: ReceivedStream) -> None:
        """The consumer stops reading C{stream}: the items held dropped, CANCEL in the output (once, if not over)."""
        stream.buffer.clear()
        stream.window.dropHeld()
        if stream.error is None and not stream.ended:
            stream.ended = True
            self._cancelled(stream)

    def timedOut(self, stream: ReceivedStream, error: BaseException) -> None:
        """
        C{stream}'s consumer waited for an item past its deadline (the I/O
        layer's C{callContext} deadline or C{callTimeout}): the stream is
        over, failing with C{error} from now on, its items dropped and
        CANCEL in the output (if it was not over).
        """
        stream.waiter = None
        stream.buffer.clear()
        stream.window.dropHeld()
        if stream.error is None and not stream.ended:
            self._cancelled(stream)
            stream.error = error

    def refused(self, stream: ReceivedStream, violation: Violation) -> None:
        """An item of C{stream} arrived that its constraint refuses: CANCEL now; the items held, then C{violation}."""
        if stream.error is None and not stream.ended:
            self._cancelled(stream)
        stream.error = violation

    def cancelDropped(self) -> None:
        """The CANCELs of the streams whose readers were dropped unfinished, into the output (the session calls it)."""
        dropped = list(self.dropped)
        del self.dropped[: len(dropped)]
        for streamId in dropped:
            entry = self._windows.pop(streamId, None)
            if entry is not None:
                entry[1].dropHeld()
            if self._streams.pop(streamId, None) is not None and self.failure is None:
                self._send(FlowMessage((CANCEL, streamId)))

    def readerDropped(self, streamId: int) -> None:
        """A reader died unfinished (on the garbage collector's thread): its CANCEL is due."""
        if streamId in self._streams or streamId in self._windows:
            self.dropped.append(streamId)
            if self._died is not None:
                self._died()

    def _cancelled(self, stream: ReceivedStream) -> None:
        if self._streams.pop(stream.streamId, None) is not None and self.failure is None:
            self._send(FlowMessage((CANCEL, stream.streamId)))

    def _wake(self, stream: ReceivedStream, settled: list[_Settled]) -> None:
        waiter = stream.waiter
        if waiter is not None:
            stream.waiter = None
            settled.append((waiter, None, None))

    def _send(self, message: FlowMessage) -> None:
        if self.failure is None:
            self.output.append(self._encoded(message))

    def _encoded(self, message: FlowMessage) -> bytes:
        encoder = self._encoder
        assert encoder is not None
        data = encoder.tokens(message)
        return encoder.encode(message) if data is None else data


def itemWaitBound(
    streamId: int, now: float, deadline: float | None, callTimeout: float | None
) -> tuple[float, BaseException] | None:
    """
    How long a consumer may wait for the next item of stream C{streamId}
    (a server that stalls a stream while it answers PINGs is not silent,
    so its silence bounds nothing here): until the C{deadline} of the
    consumer's C{callContext} (on the clock of C{now}), or C{callTimeout}
    seconds from C{now} (the stream's idle bound: each item, like each
    answer, is awaited that long at most), whichever comes first; C{None}
    for neither.  The I/O layer ends the wait then with the error given
    here (L{DeadlineExceeded}, L{CallTimedOut}) and calls
    L{ClientObjectStreams.timedOut}.

    @return: the time the wait ends and its error, or C{None}.
    """
    name = f"the next item of stream {streamId}"
    idle = None if callTimeout is None else now + callTimeout
    if deadline is not None and (idle is None or deadline <= idle):
        return deadline, DeadlineExceeded(f"{name} did not come within its deadline", name)
    if idle is not None:
        assert callTimeout is not None
        return idle, CallTimedOut(name, callTimeout)
    return None


class _Dropped:
    """A reader's weak reference callback: tells its streams (held weakly too) that it died."""

    __slots__ = ("streams", "streamId")

    def __init__(self, streams: weakref.ref[ClientObjectStreams], streamId: int) -> None:
        self.streams = streams
        self.streamId = streamId

    def __call__(self, reader: object) -> None:
        owner = self.streams()
        if owner is not None:
            owner.readerDropped(self.streamId)


@implementer(ISlicer)
class _AnnouncementSlicer:
    """Announces an async iterable where it stands in a message (OPEN "rpc.stream", its id, CLOSE)."""

    def __init__(self, streams: ClientObjectStreams) -> None:
        self.streams = streams

    def slice(self, obj: Any, encoder: Any) -> None:
        encoder.write_container(ANNOUNCE_OPEN_TYPE, obj, (self.streams.announce(obj),))


@implementer(ISlicer)
class _StreamArgumentSlicer:
    """Refuses a stream in a call's arguments: the clients without Twisted read streams, they do not send them."""

    def slice(self, obj: Any, encoder: Any) -> None:
        raise StreamArgumentRefused(
            f"cannot send {type(obj).__name__} as a stream of objects from this client: the blocking client"
            " sends no streams, the asyncio client async iterables only (an async generator)"
        )
