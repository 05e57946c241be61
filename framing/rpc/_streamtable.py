# -*- test-case-name: tests.framing.rpc.test_streamtable,tests.framing.rpc.test_clientstreams -*-
"""One connection's object streams, sans-IO, both ways: the one table of their ids, states and rules.

Contract: an L{ObjectStreamTable} holds every rule of section 14 of
C{docs/wire-format.md} that neither moves bytes nor waits, for every shell
(L{protocols.rpc._streams.ObjectStreams} and
L{framing.rpc._clientstreams.ClientObjectStreams} subclass it): the peer's
streams (announcement ids, L{ObjectStreamIdReused},
L{TooManyObjectStreams}, ITEM windows, checks and ledger charge, END,
ERROR, the consumer's take and cancel), this side's (ids, CREDIT, CANCEL,
L{ObjectStreamTable.endSending}, L{ObjectStreamTable.failSending}, the
announcement kept or undone with its message and the probe that follows
it: L{ObjectStreamTable.committed}, L{ObjectStreamTable.probed}), and
the connection's end (L{ObjectStreamTable.connectionEnded}).  A reader is
C{(ended, error)} and in L{ObjectStreamTable.readers} while open; the shell
keeps only its waiting, timers and pacing.  No I/O, no clock.

Cost: one dict lookup and the window's O(1) count per ITEM, a CREDIT per
quarter window.

Design: docs/design/rpc-streams.md
"""

from __future__ import annotations

import collections
import weakref
from typing import Any

from framing import Registry, Violation
from framing._errors import ResourceExhausted
from framing._ledger import Ledger
from framing.slicing._constraints import Constraint

from ._errors import CallTimedOut, DeadlineExceeded, describe, rebuild
from ._streams import (
    CANCEL,
    CREDIT,
    DEFAULT_WINDOW,
    DEFAULT_WINDOW_BYTES,
    END,
    ERROR,
    ITEM,
    Announcement,
    FlowMessage,
    ObjectStreamIdReused,
    ReceiveWindow,
    SendWindow,
    TooManyObjectStreams,
    checkItem,
    itemCheckFor,
)

PRODUCERS_ACCOUNT = "stream-producers"
"""The ledger account of this side's object-stream producers, while they live (L{PRODUCER_BYTES} each)."""

PRODUCER_BYTES = 3072
"""
What one producer's state holds while it waits for credit (its state, its
window, its source's iterator, the shell's pulling), charged to the
connection's ledger from its announcement until it is over (the items it
sends are charged as they wait to be sent): measured with tracemalloc,
2.6 kB in the Twisted shell for the interop service's C{count()}
(tests/protocols/rpc/test_streams.py C{ProducerChargeTests}, which fails if
a producer holds more).  Without it a peer that called for streams and
never read (nor answered the PING that would close an untaken stream)
made the interop server hold 4,133 of them, uncharged.
"""

DEFAULT_MAX_STREAMS = 1000
"""Streams the peer may have announced to this side at once."""


class ReceivedStream:
    """
    One stream the peer sends, as the table holds it: the items received
    and not yet taken, its window, how it ended.  Each shell subclasses it
    with its way of waiting (a Deferred, a future, a thread's slot).

    @ivar streamId: the peer's id of the stream.
    @ivar window: its L{ReceiveWindow} (C{window.buffered}: items held).
    @ivar buffer: the items received, checked and not yet taken.
    @ivar taken: items taken by the consumer so far.
    @ivar waiter: what a client's consumer waits on (opaque here), or C{None}.
    @ivar ended: END came (or the stream was cancelled here).
    @ivar error: why the stream failed (ERROR, a refused item, a time-out, the connection's end), or C{None}.
    """

    isObjectStream = True

    def __init__(self, streams: ObjectStreamTable, streamId: int, window: ReceiveWindow) -> None:
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
        (L{framing.rpc._streams.StreamOf} calls this).  Only the first
        constraint is the reader's: a later one is the check of the stream
        sent on (a method returning the stream it was given), its producer's.

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

    def changed(self) -> None:
        """The table changed this stream (items, its end, a refused item): the shell wakes its consumer here."""

    @property
    def finished(self) -> bool:
        """Whether the stream is over and nothing is left to take."""
        return (self.ended or self.error is not None) and not self.buffer

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.streamId}: {self.taken} taken, {len(self.buffer)} held>"


class SentStream:
    """
    One stream this side sends, as the table tracks it; the shell pulls its
    source while L{SendWindow.open} (and subclasses it with its pulling).

    @ivar streamId: this side's id of the stream.
    @ivar window: its L{SendWindow}.
    @ivar sent: items sent so far.
    @ivar over: ended, failed or cancelled: nothing more is sent.
    @ivar check: the item constraint and the stream's name in C{where}, if the stream is typed.
    @ivar waiter: what a client's pull waits on for credit (opaque), settled when CREDIT or CANCEL comes.
    @ivar handle: the client's own (its pulling task), untouched here.
    @ivar credited: a CREDIT of the peer's came for it (a stream of a probed message without one was not taken).
    """

    def __init__(self, streamId: int, source: Any) -> None:
        self.streamId = streamId
        self.source = source
        self.window = SendWindow()
        self.sent = 0
        self.over = False
        self.check: tuple[Constraint, str] | None = itemCheckFor(source)
        self.waiter: Any = None
        self.handle: Any = None
        self.credited = False
        self.ledger: Ledger | None = None
        """The ledger it is charged to (L{PRODUCER_BYTES}) until it is over, or C{None}."""


class ObjectStreamTable:
    """
    The object streams of one connection, both ways (see the module docstring).

    A shell subclasses it and gives L{sendFlow} and L{newReader} (and, if it
    wants to hear of readers dropped unfinished, L{readerDied}).

    @ivar readers: the peer's streams not over here, by id (held weakly: a reader dropped is cancelled).
    @ivar producers: this side's live streams, by id.
    @ivar dropped: the ids of readers dropped unfinished, their CANCELs due (never replaced).
    @ivar failure: why the connection ended, or C{None} while it is up.
    """

    def __init__(
        self,
        window: int = DEFAULT_WINDOW,
        windowBytes: int = DEFAULT_WINDOW_BYTES,
        maxStreams: int = DEFAULT_MAX_STREAMS,
    ) -> None:
        self.window = window
        self.windowBytes = windowBytes
        self.maxStreams = maxStreams
        self.readers: dict[int, weakref.ref[ReceivedStream]] = {}
        # Every live reader's weak reference (whose callback lets its held items go) and window, over or not.
        self.windows: dict[int, tuple[weakref.ref[ReceivedStream], ReceiveWindow]] = {}
        self.producers: dict[int, SentStream] = {}
        self.dropped: list[int] = []
        self.ledger: Ledger | None = None
        self.registry: Registry | None = None
        self.failure: BaseException | None = None
        self.lastAnnounced = 0
        self.nextId = 1
        # This side's streams announced in the message being encoded (live once it is encoded whole: committed).
        self.announcing: list[SentStream] = []

    @property
    def streamCount(self) -> int:
        """Streams in flight on this connection, both ways (work a drain waits for)."""
        return len(self.producers) + len(self.readers)

    # -- the shell's part ------------------------------------------------------------

    def sendFlow(self, message: FlowMessage) -> None:
        """Send one flow message (the table calls it only while the connection is up)."""
        raise NotImplementedError

    def newReader(self, streamId: int, window: ReceiveWindow) -> ReceivedStream:
        """The shell's reader of the peer's stream C{streamId}."""
        return ReceivedStream(self, streamId, window)

    def readerDied(self) -> None:
        """A reader was dropped unfinished (L{dropped} has its id): call L{cancelDropped} soon, not now."""

    def heldLedger(self) -> Ledger | None:
        """The ledger a new reader's held items are charged to."""
        return self.ledger

    # -- the peer's streams ------------------------------------------------------------

    def announced(self, announcement: Announcement) -> ReceivedStream:
        """
        The peer announced a stream (as its announcement is decoded): its
        reader, and the first CREDIT (the whole window) sent.

        @raise ObjectStreamIdReused: the id is not above the peer's last one.
        @raise TooManyObjectStreams: the peer has L{maxStreams} streams here already.
        """
        (streamId,) = announcement
        if streamId <= self.lastAnnounced:
            raise ObjectStreamIdReused(f"stream {streamId} announced after stream {self.lastAnnounced}")
        if len(self.readers) >= self.maxStreams:
            raise TooManyObjectStreams(f"more than {self.maxStreams} streams announced at once")
        self.lastAnnounced = streamId
        window = ReceiveWindow(self.window, self.windowBytes, self.heldLedger(), self.registry)
        reader = self.newReader(streamId, window)
        ref = weakref.ref(reader, _Dropped(weakref.ref(self), streamId))
        self.readers[streamId] = ref
        self.windows[streamId] = (ref, window)
        objects, windowBytes = window.first()
        self._send(FlowMessage((CREDIT, streamId, objects, windowBytes)))
        return reader

    def receivedFlow(self, message: FlowMessage) -> Any:
        """
        One flow message from the peer, applied: an ITEM, END or ERROR of
        one of its streams, a CREDIT or CANCEL of one of this side's.

        @return: the reader or producer it changed (its consumer or its pull
            to wake), or C{None} (a stream over here, the peer has not heard yet).
        @raise framing.rpc._streams.ItemCreditExceeded: the peer sent past a
            stream's window (a broken flow control: the connection ends).
        """
        tag = message[0]
        if tag == CREDIT or tag == CANCEL:
            producer = self.producers.get(message[1])
            if producer is None:
                return None
            if tag == CREDIT:
                producer.credited = True
                producer.window.granted(message[2], message[3])
            else:
                self.producerOver(producer)
            return producer
        ref = self.readers.get(message[1])
        reader = ref() if ref is not None else None
        if reader is None:
            return None
        if tag == ITEM:
            window = reader.window
            if reader.ended or reader.error is not None:
                window.discarded(message)
                return None
            items, refused = window.arrived(message)
            reader.buffer.extend(items)
            if refused is not None:
                self.refused(reader, refused)
        else:
            del self.readers[reader.streamId]
            if tag == END:
                # END counts the items sent: another count fails the stream alone (section 14.4).
                problem = reader.window.endProblem(message[2])
                if problem is None:
                    reader.ended = True
                else:
                    reader.error = problem
            else:
                reader.error = rebuild(message[2], message[3], None, message[4])
        return reader

    def take(self, reader: ReceivedStream) -> Any:
        """
        The next item of C{reader}, held already (and checked as it
        arrived): counted, its bytes released once every item of its ITEM
        is taken, its credit given back (a CREDIT, a step at a time).

        @raise IndexError: no item is held.
        """
        item = reader.buffer.popleft()
        reader.taken += 1
        grant = reader.window.taken()
        if grant and not reader.ended and reader.error is None:
            self._send(FlowMessage((CREDIT, reader.streamId, grant, reader.window.windowBytes)))
        return item

    def cancel(self, reader: ReceivedStream) -> None:
        """The consumer stops reading C{reader}: the items held dropped, CANCEL sent (once, if not over)."""
        reader.buffer.clear()
        reader.window.dropHeld()
        if reader.error is None and not reader.ended:
            reader.ended = True
            self._cancelled(reader)

    def timedOut(self, reader: ReceivedStream, error: BaseException) -> None:
        """
        C{reader}'s consumer waited for an item past its bound: the stream
        fails with C{error} from now on, its items dropped, CANCEL sent (if it was not over).
        """
        reader.waiter = None
        reader.buffer.clear()
        reader.window.dropHeld()
        if reader.error is None and not reader.ended:
            self._cancelled(reader)
        reader.error = error

    def refused(self, reader: ReceivedStream, violation: Violation) -> None:
        """An item of C{reader} arrived that its constraint refuses: CANCEL now; the items held, then C{violation}."""
        if reader.error is None and not reader.ended:
            self._cancelled(reader)
        reader.error = violation

    def readerDropped(self, streamId: int) -> None:
        """A reader died unfinished (on whatever thread the collector ran): its CANCEL is due (L{readerDied})."""
        if streamId in self.readers or streamId in self.windows:
            self.dropped.append(streamId)
            self.readerDied()

    def cancelDropped(self) -> None:
        """The items of the readers dropped unfinished let go, and their CANCELs sent."""
        dropped = list(self.dropped)
        del self.dropped[: len(dropped)]
        for streamId in dropped:
            entry = self.windows.pop(streamId, None)
            if entry is not None:
                entry[1].dropHeld()
            if self.readers.pop(streamId, None) is not None:
                self._send(FlowMessage((CANCEL, streamId)))

    def _cancelled(self, reader: ReceivedStream) -> None:
        if self.readers.pop(reader.streamId, None) is not None:
            self._send(FlowMessage((CANCEL, reader.streamId)))

    # -- this side's streams ------------------------------------------------------------

    def reserveId(self) -> int:
        """The id of the next stream this side sends."""
        streamId = self.nextId
        self.nextId += 1
        return streamId

    def admitProducer(self, producer: SentStream) -> None:
        """
        Charge C{producer} to the connection's ledger (L{PRODUCER_BYTES})
        until it is over (L{producerOver}), before it is announced.

        @raise ResourceExhausted: the ledger has no room for one more
            producer (the message announcing it fails to encode).
        """
        ledger = self.heldLedger()
        if ledger is None:
            return
        if not ledger.room(PRODUCER_BYTES):
            raise ResourceExhausted(
                f"no room for another object stream ({PRODUCER_BYTES} bytes; the connection's ledger: "
                f"{ledger.held} held of {ledger.budget}, spare {ledger.spare()})"
            )
        ledger.charge(PRODUCERS_ACCOUNT, PRODUCER_BYTES)
        producer.ledger = ledger

    def announceProducer(self, producer: SentStream) -> bool:
        """
        C{producer} is announced in the message being encoded: charged
        (L{admitProducer}), and live once the message is encoded whole
        (L{committed}), or forgotten if it is not (L{rolledBack}).

        @return: whether it is the message's first stream (the shell then
            arranges for L{committed} or L{rolledBack} to be called, once).
        @raise ResourceExhausted: as L{admitProducer}.
        """
        self.admitProducer(producer)
        announcing = self.announcing
        announcing.append(producer)
        return len(announcing) == 1

    def committed(self) -> list[SentStream]:
        """
        The message announcing L{announcing} was encoded whole (and will be
        sent): each stream is live (L{producerLive}).  A PING follows the
        message, one per message whatever its streams (C{docs/wire-format.md}
        14.6), and at its PONG the shell asks L{probed} about them.

        @return: the message's streams, which that PING probes.
        """
        announcing, self.announcing = self.announcing, []
        for producer in announcing:
            self.producerLive(producer)
        return announcing

    def rolledBack(self) -> None:
        """The message announcing L{announcing} was not encoded whole: its streams forgotten, their charges released."""
        announcing, self.announcing = self.announcing, []
        for producer in announcing:
            self.releaseProducer(producer)

    def untaken(self, producers: list[SentStream]) -> list[SentStream]:
        """Those of C{producers} the peer has given no credit that are not over (see L{probed})."""
        return [producer for producer in producers if not producer.credited and not producer.over]

    def probed(self, producers: list[SentStream]) -> list[SentStream]:
        """
        The PONG of the PING that followed the message announcing
        C{producers} came, and everything read before it was applied: a
        peer that read the announcement granted credit before it answered,
        so a stream without credit yet was not taken (an old peer refused
        the message, or the peer refused it whole before reading the
        announcement).  Each such stream is over (L{producerOver}), nothing
        sent for it (C{docs/wire-format.md} 14.6).

        @return: the streams closed, whose pulls the shell stops.
        """
        closed = self.untaken(producers)
        for producer in closed:
            self.producerOver(producer)
        return closed

    def producerLive(self, producer: SentStream) -> None:
        """C{producer}'s announcement is sent (or being sent): the peer's CREDIT and CANCEL reach it."""
        self.producers[producer.streamId] = producer

    def producerOver(self, producer: SentStream) -> None:
        """
        C{producer} ended, failed or was cancelled: nothing more reaches it,
        and what it was charged (L{admitProducer}) is released.
        """
        if self.producers.get(producer.streamId) is producer:
            del self.producers[producer.streamId]
        self.releaseProducer(producer)

    def releaseProducer(self, producer: SentStream) -> None:
        """
        C{producer} is over (L{producerOver}), or was never live (the
        message announcing it failed to encode): what it was charged is released.
        """
        producer.over = True
        ledger = producer.ledger
        if ledger is not None:
            producer.ledger = None
            ledger.release(PRODUCERS_ACCOUNT, PRODUCER_BYTES)

    def endSending(self, producer: SentStream) -> None:
        """C{producer}'s source is spent: it is over, and END goes with the count of items sent."""
        self.producerOver(producer)
        self._send(FlowMessage((END, producer.streamId, producer.sent)))

    def failSending(self, producer: SentStream, error: BaseException) -> None:
        """
        C{producer}'s source raised C{error} (or an item was refused): it is
        over, and ERROR goes after the items sent (without its details if they do not encode).
        """
        self.producerOver(producer)
        typeName, text, details = describe(error)
        try:
            self._send(FlowMessage((ERROR, producer.streamId, typeName, text, details)))
        except Exception:
            self._send(FlowMessage((ERROR, producer.streamId, typeName, text, None)))

    # -- the connection's end ---------------------------------------------------------------

    def connectionEnded(self, reason: BaseException) -> tuple[list[ReceivedStream], list[SentStream]]:
        """
        The connection ended with C{reason}: every reader not over fails with
        it (after its items), every producer is over, the items held are let
        go (the connection's ledger closes with it) and nothing more is sent.

        @return: the readers failed and the producers that were live (to wake, to close).
        """
        self.failure = reason
        failed: list[ReceivedStream] = []
        readers = self.readers
        while readers:
            reader = readers.popitem()[1]()
            if reader is not None and not reader.ended and reader.error is None:
                reader.error = reason
                failed.append(reader)
        self.dropped.clear()
        self.windows.clear()
        producers = list(self.producers.values())
        self.producers.clear()
        for producer in producers:
            self.releaseProducer(producer)  # (the shell is told of them by its caller, once)
        return failed, producers

    def _send(self, message: FlowMessage) -> None:
        if self.failure is None:
            self.sendFlow(message)


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
    L{ObjectStreamTable.timedOut}.

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
    """A reader's weak reference callback: tells its table (held weakly too) that it died."""

    __slots__ = ("streams", "streamId")

    def __init__(self, streams: weakref.ref[ObjectStreamTable], streamId: int) -> None:
        self.streams = streams
        self.streamId = streamId

    def __call__(self, reader: object) -> None:
        owner = self.streams()
        if owner is not None:
            owner.readerDropped(self.streamId)
