# -*- test-case-name: tests.framing.bulk.test_connection,tests.protocols.bulk.test_states -*-
"""The rules of one bulk connection that every shell shares: announcements, dispatch, receiver credit and checks.

Contract: what wire format 5.5 states about a connection's streams, once,
sans-IO, for the Twisted channel (L{protocols.bulk.BulkChannel}) and the
clients without Twisted (L{framing.bulk._streams.ClientStreams}) alike:

 - L{StreamTable}: the connection's streams both ways, by id.
 - L{Announcements}: increasing stream ids, a cap on live streams (5.5.2), else a
   L{framing.ProtocolError}.
 - L{dispatch}: each control message to the stream it names (GRANT, DONE and
   CANCEL to one this side sends, END and ABORT to one it receives), a CANCEL or
   ABORT as the error it means (L{resetFrom}).
 - L{SendSide}: a sending stream's state and credit (5.5.2, 5.5.3);
   L{resetMessage} the CANCEL or ABORT that gives a stream up.
 - L{ReceiveCredit}: a receiving stream's credit (5.5.3); a frame past it is
   a L{FlowControlError}; credit goes back in steps, at most a window ahead.
 - L{frameProblem}, L{endSize}, L{digestProblem}, L{cancelCode}: where a
   frame may lie, how END is checked (5.5.4), each failure's code.

Cost: no I/O, no clock, no byte held; each check is O(1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from ._credit import SendCredit
from ._digests import IntegrityError
from ._errors import FlowControlError, StreamIdReused, StreamReset, TooManyStreams, peerText
from ._hello import Hello
from ._states import (
    LIVE,
    ON_WIRE,
    RECEIVING_TRANSITIONS,
    SENDING_TRANSITIONS,
    ReceiveEvent,
    ReceiveState,
    SendEvent,
    SendState,
)
from ._wire import ABORT, CANCEL, DONE, END, GRANT, HELLO, Control, controlMessage

Out = TypeVar("Out", bound="SendingEnd")
In = TypeVar("In", bound="ReceivingEnd")


class SendingEnd(Protocol):
    """What the control messages about a stream this side sends call, and what the table announces (L{SendSide})."""

    digestName: str | None

    def announcing(self, streamId: int, digestName: str | None) -> None:
        """Being announced as C{streamId}, checked with C{digestName}."""

    def takenBack(self) -> None:
        """The message announcing it was not sent."""

    def grantReceived(self, count: int) -> None:
        """The receiver granted C{count} more bytes."""

    def doneReceived(self, digest: bytes | None) -> None:
        """The receiver has every byte, verified."""

    def cancelReceived(self, error: BaseException) -> None:
        """The receiver gave the stream up; C{error} is what its CANCEL means (L{resetFrom})."""


class ReceivingEnd(Protocol):
    """What the control messages about a stream this side receives call."""

    def endReceived(self, size: int | None, digest: bytes | None) -> None:
        """The sender sent everything: the object's size and digest."""

    def abortReceived(self, error: BaseException) -> None:
        """The sender gave the stream up; C{error} is what its ABORT means (L{resetFrom})."""


def resetFrom(code: Any, message: Any) -> BaseException:
    """The error a CANCEL or ABORT with C{code} means: L{IntegrityError} for C{integrity}, else a L{StreamReset}."""
    if code == "integrity":
        return IntegrityError(str(message))
    return StreamReset(str(code), str(message))


def dispatch(
    control: Control,
    sending: Mapping[int, SendingEnd],
    receiving: Mapping[int, ReceivingEnd],
    unreceived: Callable[[Control], None] | None = None,
    helloKnown: bool = True,
) -> bool:
    """
    Act on one control message: to the stream of C{sending} or C{receiving}
    it names; an END or ABORT for a stream not in C{receiving} goes to
    C{unreceived} (if given), any other message for an unknown stream is
    ignored (it is over, 5.5), and so is a GRANT before the peer's HELLO
    (C{helloKnown}: a sender sends nothing before it, 5.5.3, and a stream
    started by such a GRANT would have no settled digest).

    @return: whether it was a HELLO (taken as it was decoded; the caller
        answers it).
    """
    op, streamId = control[0], control[1]
    if op == END or op == ABORT:
        incoming = receiving.get(streamId)
        if incoming is None:
            if unreceived is not None:
                unreceived(control)
        elif op == END:
            incoming.endReceived(control[2], control[3])
        else:
            incoming.abortReceived(resetFrom(control[2], control[3]))
        return False
    if op == HELLO:
        return True
    stream = sending.get(streamId)
    if stream is None:
        return False
    if op == GRANT:
        if helloKnown:
            stream.grantReceived(control[2])
    elif op == DONE:
        stream.doneReceived(control[2])
    elif op == CANCEL:
        stream.cancelReceived(resetFrom(control[2], control[3]))
    return False


class SendSide:
    """
    The protocol's part of a stream this side sends, whatever shell sends
    it (the Twisted L{protocols.bulk.Stream}, the clients'
    L{framing.bulk._streams.SendStream} are ones): its state in the sending
    table, its credit, and whether the receiver said it receives (a GRANT
    came).  O(1) per event.

    @ivar state: its L{SendState}.
    @ivar credit: its L{SendCredit}.
    @ivar heard: whether a GRANT came for it.
    """

    digestName: str | None
    size: int | None

    def __init__(self) -> None:
        self.state = SendState.NEW
        self.streamId: int | None = None
        self.credit = SendCredit()
        self.heard = False

    def announcing(self, streamId: int, digestName: str | None) -> None:
        """Being announced as C{streamId}, checked with C{digestName} (L{StreamTable.reserve}).

        @raise IllegalTransition: it was announced before (a stream is sent once).
        """
        self.advance(SendEvent.ANNOUNCE)
        self.streamId, self.digestName = streamId, digestName

    def takenBack(self) -> None:
        """The message announcing it was not sent: NEW again, with no id (L{StreamTable.takeBack})."""
        self.advance(SendEvent.TAKE_BACK)
        self.streamId = None

    def helloKnown(self, hello: Hello, ours: tuple[str, ...]) -> int:
        """
        The receiver's HELLO is known (C{ours}: the digests this side
        computes): the stream's digest settles, and it starts with the
        initial window this returns (0: it waits for a first GRANT).

        @raise DigestUnavailable: no digest both sides have fits it; it
            must be given up (ABORT C{digest-unavailable}) before any data
            moves (5.5).
        """
        self.digestName = hello.digestFor(self.digestName, ours)
        return hello.peerWindow

    def advance(self, event: SendEvent) -> None:
        """Move by C{event} (L{SENDING_TRANSITIONS}).

        @raise IllegalTransition: the table has no such move (a bug on this side).
        """
        self.state = SENDING_TRANSITIONS.next(self.state, event)

    def creditArrived(self, count: int, grantStep: int, heard: bool = True) -> bool | None:
        """
        Credit of C{count} bytes: a GRANT (C{heard}) or the initial window
        of the receiver's HELLO.  The first starts the stream (SENDING,
        frames sized by L{SendCredit.firstGrant}): C{True}; more while it
        may still send is added: C{False}; after END or at the end it
        changes nothing (5.5.3): C{None}.
        """
        self.heard = self.heard or heard
        state = self.state
        if state is SendState.ANNOUNCED:
            self.credit.firstGrant(count, grantStep)
            self.advance(SendEvent.START)
            return True
        if state is SendState.SENDING or state is SendState.ENDING:
            self.credit.grant(count)
            return False
        return None

    def allSent(self, given: int | None) -> int:
        """
        Every byte was sent (ENDING; C{given}: what a sequential source gave
        in all, C{None} for an object of the announced size): the size its
        END states (5.5.4), kept as C{size}.

        @raise StreamReset: (C{size}) a size was announced and the source
            gave another, or none is known; the stream must be given up
            with ABORT C{size}.
        """
        self.advance(SendEvent.ALL_SENT)
        size = self.size
        if given is None or size == given:
            if size is None:
                raise StreamReset("size", "a stream of unknown size without a sequential source")
            return size
        if size is not None:
            raise StreamReset("size", f"the source gave {given} bytes, not {size}")
        self.size = given
        return given

    def endMessage(self, digest: bytes | None) -> Control:
        """The END that says the stream is whole (ENDED): its id, its size (L{allSent}) and C{digest} (5.5.4)."""
        self.advance(SendEvent.END_SENT)
        return Control((END, self.streamId, self.size, digest))

    def callFailure(self, cancelled: bool) -> tuple[bool, str | None]:
        """
        The call whose message announced the stream failed (C{cancelled}:
        its caller cancelled it): whether to give the stream up, and the
        code of the ABORT to send then, if any (5.5.2: a stream no GRANT
        came for is given up, with an ABORT once it began sending; one the
        receiver has goes on, unless its caller cancelled the call).
        """
        state = self.state
        if not self.heard and state in ON_WIRE:
            return True, None if state is SendState.ANNOUNCED else "cancelled"
        if cancelled and state is not SendState.DELIVERED and state is not SendState.FAILED:
            return True, "cancelled"
        return False, None


def resetMessage(op: int, streamId: int, code: str, error: BaseException) -> Control:
    """The CANCEL or ABORT (C{op}) of stream C{streamId} with C{code}, telling C{error} as text for people (5.5.4)."""
    return Control((op, streamId, code, controlMessage(peerText(error))))


class Announcements:
    """
    The checks on the streams a peer announces (5.5.2): ids increase, and
    at most C{maxLive} are live at once.

    @ivar lastId: the last id announced.
    @ivar maxLive: the most streams the peer may have live, or C{None} for no bound.
    """

    __slots__ = ("lastId", "maxLive")

    def __init__(self, maxLive: int | None = None) -> None:
        self.lastId = 0
        self.maxLive = maxLive

    def check(self, streamId: Any, live: int) -> int:
        """
        The peer announced C{streamId} with C{live} of its streams live: its id, if it may.

        @raise StreamIdReused: the id is not an INT above every id announced before.
        @raise TooManyStreams: one stream more than C{maxLive}.
        """
        if type(streamId) is not int or streamId <= self.lastId:
            raise StreamIdReused(f"stream id {streamId!r} announced after stream id {self.lastId}")
        if self.maxLive is not None and live >= self.maxLive:
            raise TooManyStreams(f"more than {self.maxLive} incoming streams at once")
        self.lastId = streamId
        return streamId


class StreamTable(Generic[Out, In]):
    """
    One connection's streams, both ways, by id (5.5: each direction has
    ids of its own): those this side sends (C{sending}), those it receives
    (C{receiving}), the ids of the peer's streams live (announced, not over
    nor dropped), and the checks on its announcements.  Routing a control
    message (L{dispatch}) is one dict lookup.

    @ivar sending: the streams this side sends, by id.
    @ivar receiving: the streams this side receives, by the peer's id.
    @ivar live: the ids of the peer's streams live.
    @ivar announcements: the L{Announcements} of the peer's streams.
    """

    __slots__ = ("sending", "receiving", "live", "announcements", "lastSentId")

    def __init__(self, maxLive: int | None = None) -> None:
        self.sending: dict[int, Out] = {}
        self.receiving: dict[int, In] = {}
        self.live: set[int] = set()
        self.announcements = Announcements(maxLive)
        self.lastSentId = 0

    def reserve(self, stream: Out, hello: Hello, ours: tuple[str, ...]) -> int:
        """
        C{stream} is being announced in a message (5.5.2): its digest
        settled if the peer's HELLO came (L{Hello.digestFor}, C{ours} the
        digests this side computes), the next id this side sends (ids
        increase and are never given twice, even when taken back), and it
        is in C{sending} until it is over or L{takeBack}.

        @raise DigestUnavailable: the peer computes no digest that fits it (it stays NEW).
        @raise IllegalTransition: it was announced before.
        """
        digestName = hello.digestFor(stream.digestName, ours)
        streamId = self.lastSentId + 1
        stream.announcing(streamId, digestName)
        self.lastSentId = streamId
        self.sending[streamId] = stream
        return streamId

    def takeBack(self, stream: Out, streamId: int) -> None:
        """The message announcing C{stream} as C{streamId} was not sent: out of the table, NEW again, the id unused."""
        if self.sending.get(streamId) is stream:
            del self.sending[streamId]
        stream.takenBack()

    def __len__(self) -> int:
        """Streams in the table, both ways."""
        return len(self.sending) + len(self.receiving)

    def check(self, streamId: Any) -> int:
        """
        The peer announced C{streamId}: its id, if it may (L{Announcements.check}).

        @raise StreamIdReused: the id is not above every id announced before.
        @raise TooManyStreams: one stream more than the peer may have live.
        """
        return self.announcements.check(streamId, len(self.live))

    def dispatch(self, control: Control, helloKnown: bool, unreceived: Callable[[Control], None] | None = None) -> bool:
        """Act on one control message (L{dispatch}), the peer's HELLO known or not; whether it was a HELLO."""
        return dispatch(control, self.sending, self.receiving, unreceived, helloKnown)


class ReceiveSide:
    """
    The protocol's part of a stream this side receives, whatever shell
    receives it (the Twisted L{protocols.bulk.Receiver}, the clients'
    L{framing.bulk._streams.IncomingTransfer}): its state in the receiving
    table, and what the sender's END and this side's DONE do (5.5.4).
    O(1) per event.

    @ivar state: its L{ReceiveState}.
    @ivar streamId: the sender's id for it.
    """

    streamId: int

    def __init__(self) -> None:
        self.state = ReceiveState.ANNOUNCED

    def advance(self, event: ReceiveEvent) -> None:
        """Move by C{event} (L{RECEIVING_TRANSITIONS}).

        @raise IllegalTransition: the table has no such move (a bug on this side).
        """
        self.state = RECEIVING_TRANSITIONS.next(self.state, event)

    def ending(self) -> bool:
        """The sender's END came: whether it ends the stream (ENDED); a repeated or late END changes nothing."""
        if self.state is not ReceiveState.RECEIVING:
            return False
        self.advance(ReceiveEvent.END)
        return True

    def allReleased(self, received: int, size: int | None, whole: bool) -> int:
        """
        Every byte of an ended stream released by the sink and the hasher
        (VERIFYING): the size its END stated, checked (L{endSize}: for a
        C{whole} stream, C{received} bytes).

        @raise StreamReset: (C{size}) the END's size is wrong; the stream is given up (CANCEL C{size}).
        """
        self.advance(ReceiveEvent.ALL_RELEASED)
        return endSize(received, size, whole)

    def doneMessage(self, digest: bytes | None) -> Control:
        """Arrived whole and verified, the sink completed (DONE): the DONE telling the sender, with C{digest}."""
        self.advance(ReceiveEvent.COMPLETED)
        return Control((DONE, self.streamId, digest))

    def failing(self) -> bool:
        """The stream fails: whether it was live (now FAILED); one already over stays as it is."""
        if self.state not in LIVE:
            return False
        self.advance(ReceiveEvent.FAIL)
        return True


class ReceiveCredit:
    """
    A receiving stream's credit (5.5.3): what it granted, what frames
    announced, and how much to grant as bytes are released.

    @ivar window: the most bytes granted ahead of what is released (a shell may grow it).
    @ivar grantStep: the smallest grant sent while the stream is under way.
    @ivar granted: bytes of credit granted so far (the initial window included).
    @ivar announced: body bytes announced by frame headers so far.
    """

    __slots__ = ("window", "grantStep", "granted", "announced")

    def __init__(self, window: int, grantStep: int) -> None:
        self.window = window
        self.grantStep = grantStep
        self.granted = 0
        self.announced = 0

    def frameAnnounced(self, streamId: int, length: int) -> None:
        """
        A frame of C{length} body bytes is announced: it is counted.

        @raise FlowControlError: it goes past the credit granted.
        """
        announced = self.announced + length
        if announced > self.granted:
            raise FlowControlError(f"stream {streamId}: {announced} bytes sent, {self.granted} granted")
        self.announced = announced

    def firstGrant(self, released: int) -> int:
        """The grant that says the stream is received: the window ahead of C{released}, perhaps 0 (counted)."""
        count = max(released + self.window - self.granted, 0)
        self.granted += count
        return count

    def due(self, released: int) -> int:
        """With C{released} bytes released, the grant to send now (counted), or 0 while less than a step is due."""
        more = released + self.window - self.granted
        if more < self.grantStep:
            return 0
        self.granted += more
        return more

    @property
    def senderShort(self) -> bool:
        """Whether the sender has less credit left than a step (this side holds the stream)."""
        return self.granted - self.announced < self.grantStep


def frameProblem(offset: int, length: int, expected: int | None, size: int | None) -> StreamReset | None:
    """
    Why a frame at C{offset} of C{length} bytes cannot be taken, or C{None}:
    C{out-of-order} if it does not start at C{expected} (a receiver that
    takes bytes only in order), C{size} if it reaches past the announced C{size}.
    """
    if expected is not None and offset != expected:
        return StreamReset("out-of-order", f"data at {offset}, expected {expected}")
    if size is not None and offset + length > size:
        return StreamReset("size", f"data up to {offset + length}, past the announced size of {size} bytes")
    return None


def endSize(received: int, size: int | None, whole: bool = True) -> int:
    """
    The size an END stating C{size} ends a stream with, C{received} bytes
    having come.

    @raise StreamReset: (C{size}) it states none, or (for a C{whole}
        stream, not one of ranges its store checks) another size than was
        received.
    """
    if size is None or (whole and received != size):
        raise StreamReset("size", f"received {received} bytes, the sender said {size}")
    return size


def digestProblem(name: str | None, sent: bytes | None, actual: bytes | None) -> IntegrityError | None:
    """
    Why a stream checked with digest C{name} and hashed to C{actual} fails
    the END's digest C{sent}, or C{None}; with C{actual} C{None} (not
    hashed yet), only whether one was sent.
    """
    if sent is None:
        return IntegrityError("the sender sent no digest")
    if actual is not None and sent != actual:
        return IntegrityError(f"{name} mismatch: sent {sent.hex()}, received {actual.hex()}", sent.hex(), actual.hex())
    return None


def cancelCode(error: BaseException) -> str:
    """The code a stream failed with C{error} is cancelled with: a reset's own, C{integrity}, else C{cancelled}."""
    if isinstance(error, StreamReset):
        return error.code
    if isinstance(error, IntegrityError):
        return "integrity"
    return "cancelled"
