# -*- test-case-name: tests.framing.rpc.test_clientstreams,tests.framing.rpc.test_streamtable -*-
"""Object streams of the clients without Twisted, sans-IO: the stream table with a client session's output.

Contract: a L{ClientObjectStreams} is the
L{framing.rpc._streamtable.ObjectStreamTable} of one
L{framing.rpc._session.ClientSession}, adding the encoding of flow messages
into the session's output, the client's reader for a stream the server
announces, and settling a waiting consumer as a call is settled.  With
C{sending} (the asyncio client) an async iterable argument is announced
with its CALL and fed by L{ClientObjectStreams.itemReady}; without it, and
for a plain generator, the argument is refused with
L{StreamArgumentRefused} before anything is sent.  No I/O, no threads, no
clock: the session's owner guards it with the session's lock.

Cost: the table's per ITEM, one encoding per CREDIT; nothing per call
without a stream.

Design: docs/design/rpc-streams.md
"""

from __future__ import annotations

import types
from collections.abc import AsyncIterator, Callable
from typing import Any

from zope.interface import implementer

from framing import Encoder, Registry, Violation
from framing.slicing._interfaces import ISlicer

from ._streams import (
    ANNOUNCE_OPEN_TYPE,
    DEFAULT_WINDOW,
    DEFAULT_WINDOW_BYTES,
    ITEM,
    AnnouncementUnslicer,
    FlowMessage,
    ReceiveWindow,
    addFlowTypes,
    checkItem,
)
from ._streamtable import DEFAULT_MAX_STREAMS, ObjectStreamTable, ReceivedStream, SentStream

_Settled = tuple[Any, Any, "BaseException | None"]


class StreamArgumentRefused(TypeError):
    """A client without Twisted was asked to send a stream of objects in a call's arguments: it reads streams only."""


class ClientObjectStreams(ObjectStreamTable):
    """
    The object streams of one client connection, read and sent (see the
    module docstring): the L{ObjectStreamTable} with the session's output
    (flow messages encoded into it) and its waiters (settled as calls are).

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
        super().__init__(window, windowBytes, maxStreams)
        self.output = output
        self.makeStream = makeStream or ReceivedStream
        self._died = died
        self._encoder: Encoder | None = None
        self._sending = sending

    def install(self, registry: Registry, encoder: Encoder) -> None:
        """Teach the connection's C{registry} the flow messages and the announcement; refuse streams as arguments."""
        self._encoder = encoder
        self.registry = registry
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

    # -- the table's hooks ---------------------------------------------------------------

    def sendFlow(self, message: FlowMessage) -> None:
        self.output.append(self._encoded(message))

    def newReader(self, streamId: int, window: ReceiveWindow) -> ReceivedStream:
        return self.makeStream(self, streamId, window)

    def readerDied(self) -> None:
        if self._died is not None:
            self._died()

    # -- told by the session -----------------------------------------------------

    def received(self, message: FlowMessage, settled: list[_Settled]) -> None:
        """
        One flow message from the server (L{ObjectStreamTable.receivedFlow});
        a consumer or a pull waiting on the stream it changed is settled into C{settled}.

        @raise framing.rpc._streams.ItemCreditExceeded: the server sent past the
            stream's window (the session ends: a broken flow control).
        """
        changed = self.receivedFlow(message)
        if changed is not None:
            _wake(changed, settled)

    def ended(self, reason: BaseException) -> list[_Settled]:
        """The session ended with C{reason}: every stream fails with it (after its items); the waiting consumers."""
        readers, producers = self.connectionEnded(reason)
        settled: list[_Settled] = []
        for reader in readers:
            _wake(reader, settled)
        self.rolledBack()
        for producer in producers:
            if self._sending is not None:
                self._sending(producer)
            _wake(producer, settled)
        return settled

    # -- the streams this side sends -------------------------------------------------

    def announce(self, source: Any) -> int:
        """
        C{source} is being announced in a message: its id (live if the
        message is encoded whole: L{committed}), charged to the ledger
        until it is over.

        @raise framing._errors.ResourceExhausted: the ledger has no room for one more producer.
        """
        producer = SentStream(self.reserveId(), source)
        self.announceProducer(producer)
        return producer.streamId

    def committed(self) -> list[SentStream]:
        """The table's L{ObjectStreamTable.committed}; the I/O layer starts pulling each stream."""
        announcing = super().committed()
        if self._sending is not None:
            for producer in announcing:
                self._sending(producer)
        return announcing

    def probeAnswered(self, producers: list[SentStream], settled: list[_Settled]) -> None:
        """
        The PONG of the probe of C{producers} came, after everything read
        before it was applied: those not taken are closed
        (L{ObjectStreamTable.probed}), each pull woken into C{settled}.
        """
        for producer in self.probed(producers):
            _wake(producer, settled)

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
        if not producer.over:
            super().endSending(producer)

    def failSending(self, producer: SentStream, error: BaseException) -> None:
        """C{producer}'s source raised C{error} (or an item was refused): ERROR, after the items sent."""
        if not producer.over:
            super().failSending(producer, error)

    def producerOver(self, producer: SentStream) -> None:
        """C{producer} is over: the I/O layer's pull is told to stop."""
        super().producerOver(producer)
        if self._sending is not None:
            self._sending(producer)

    def _encoded(self, message: FlowMessage) -> bytes:
        encoder = self._encoder
        assert encoder is not None
        data = encoder.tokens(message)
        return encoder.encode(message) if data is None else data


def _wake(stream: Any, settled: list[_Settled]) -> None:
    """Settle the waiter of C{stream} (a reader's consumer, a producer's pull) into C{settled}, if one waits."""
    waiter = stream.waiter
    if waiter is not None:
        stream.waiter = None
        settled.append((waiter, None, None))


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
