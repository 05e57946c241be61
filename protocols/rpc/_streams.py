# -*- test-case-name: tests.protocols.rpc.test_streams,tests.protocols.test_asyncioclient_streams -*-
"""Object streams in calls on Twisted: a remote method returns or takes an async iterator.

Contract: every L{Broker} loads an L{ObjectStreams} extension, so an async
generator, async iterator, generator or L{ObjectStream} in a call's
arguments or result travels as a stream (L{framing.rpc._streams}); the
receiver iterates a L{StreamReader}.  The producer is pulled only while
the consumer's credit allows, and the connection paces it besides
(L{PACE_BYTES}, the send high-water mark, the ledger:
L{ObjectStreams.pace}).  The producer's end sends END, its exception
ERROR; a consumer's cancel or drop sends CANCEL and closes the producer;
a lost connection ends both.

Each producer is charged to the connection's ledger while it lives
(L{framing.rpc._streamtable.PRODUCER_BYTES}); a stream the ledger has no room for is not announced
(L{framing._errors.ResourceExhausted}: a call's answer becomes its FAIL).

Cost: one message per item and one CREDIT per quarter window; a pull
that completes without waiting costs no Deferred.

Design: docs/design/rpc-streams.md
"""

from __future__ import annotations

import copy
import types
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from twisted.internet.defer import CancelledError, Deferred, fail, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from framing import EncodingError, Registry, Violation
from framing._ledger import Ledger
from framing._outgoing import Outgoing
from framing.rpc._streams import (
    ANNOUNCE_OPEN_TYPE,
    CANCEL,
    CREDIT,
    DEFAULT_WINDOW,
    DEFAULT_WINDOW_BYTES,
    ITEM,
    Announcement,
    AnnouncementUnslicer,
    FlowMessage,
    ObjectStreamIdReused,
    ReceiveWindow,
    TooManyObjectStreams,
    addFlowTypes,
    checkItem,
)
from framing.rpc._streamtable import ObjectStreamTable, ReceivedStream, SentStream, itemWaitBound
from framing.slicing._interfaces import ISlicer

from .._interfaces import IBrokerExtension
from ._context import scope as call_scope

T = TypeVar("T")


@dataclass(frozen=True)
class StreamOptions:
    """
    How much one connection's streams may hold.

    @ivar window: items a stream this side receives may have in flight
        (granted and not yet taken by its consumer).
    @ivar windowBytes: encoded bytes of items such a stream may have in flight.
    @ivar maxStreams: streams the peer may have announced to this side at
        once (more drops the connection: L{TooManyObjectStreams}).
    """

    window: int = DEFAULT_WINDOW
    windowBytes: int = DEFAULT_WINDOW_BYTES
    maxStreams: int = 1000

    def __post_init__(self) -> None:
        if self.window < 1 or self.windowBytes < 1 or self.maxStreams < 1:
            raise ValueError("a stream window and the stream count must be at least 1")


class ObjectStream:
    """
    Send any iterable or async iterable as a stream (async generators,
    generators and async iterator classes are sent as streams as they are;
    wrap a list or another plain iterable to stream it rather than send it whole).

    @ivar source: what the items are taken from.
    """

    isObjectStream = True

    def __init__(self, source: Iterable[Any] | AsyncIterable[Any]) -> None:
        self.source = source


# -- the producer's side --------------------------------------------------------------


@types.coroutine
def _finishStep(step: Any, yielded: Any) -> Generator[Any, Any, Any]:
    """
    Drive to its end C{step}, an awaitable already started that yielded
    C{yielded} (under a coroutine runner: L{Deferred.fromCoroutine}), and
    return its result.
    """
    while True:
        try:
            try:
                sent = yield yielded
            except BaseException as error:
                yielded = step.throw(error)
            else:
                yielded = step.send(sent)
        except StopIteration as done:
            return done.value


async def _await(awaitable: Any) -> Any:
    return await awaitable


PROBE_RETRY = 0.1
"""Seconds between looks at a connection whose reading is paused, before judging the streams a PONG probed."""

BATCH_ITEMS = 128
"""The most items one ITEM message gathers."""

BATCH_BYTES = 16 * 1024
"""About how many encoded bytes one ITEM gathers (its count follows the size of the last one)."""

PACE_BYTES = 64 * 1024
"""Encoded bytes a producer sends before the reactor serves everything else (and it looks at the connection again)."""

PACE_RETRY = 0.05
"""Seconds between looks at a connection too full for its producers to send more (its send backlog or its ledger)."""

_WAITING, _PULLING, _PAUSED, _DONE = "waiting", "pulling", "paused", "done"
"""A producer's states: waiting for credit (or announced, not yet granted any), waiting for its source, waiting for
its turn or for the connection to take more (L{ObjectStreams.pace}), over."""


class _Producer(SentStream):
    """
    One stream this side sends (the table's L{SentStream}): pulls its source
    under credit, one ITEM per batch of items, then END or ERROR; C{state}
    is its pacing here (L{_WAITING}, L{_PULLING}, L{_PAUSED}, L{_DONE}).
    """

    def __init__(self, streams: ObjectStreams, streamId: int, source: Any) -> None:
        super().__init__(streamId, source)
        self.streams = streams
        self.state = _WAITING
        self._pending: Deferred[Any] | None = None
        self._batch: list[Any] = []
        self._batchLimit = 1
        self._itemSize = 0
        self._unpaced = 0
        self.encoder = streams.encoder()
        if isinstance(source, ObjectStream):
            source = source.source
        self.closeable = source
        if isinstance(source, AsyncIterable):
            self.iterator: Any = source.__aiter__()
            self.closeable = self.iterator
            self.isAsync = True
        else:
            self.iterator = iter(source)
            self.isAsync = False

    def granted(self) -> None:
        """The peer's CREDIT was counted (L{ObjectStreamTable.receivedFlow}, which marks it C{credited}): send on."""
        self.pump()

    def pump(self) -> None:
        """
        Send items while the credit allows and the source has them at once
        (all in one write), and the connection takes them: after
        L{PACE_BYTES} the producer waits for the end of the reactor's turn,
        and while the connection's send backlog or its ledger is full, for
        them to drain (L{ObjectStreams.pace}).
        """
        if self.state != _WAITING or not self.window.open():
            return
        streams = self.streams
        transport = streams.transport()
        if transport is None:
            return
        if not streams.roomToSend(transport):
            self.state = _PAUSED
            streams.pace(self)
            return
        transport.hold()
        try:
            if self.isAsync:
                self._pumpAsync(transport)
            else:
                self._pumpSync(transport)
            if self.state != _DONE:
                self.flush(transport)
        finally:
            transport.release()

    def _pumpSync(self, transport: Any) -> None:
        iterator, window = self.iterator, self.window
        while self.state == _WAITING and window.open():
            try:
                item = next(iterator)
            except StopIteration:
                self.end()
                return
            except Exception as error:
                self.fail(error)
                return
            self.itemReady(item, transport)

    def _pumpAsync(self, transport: Any) -> None:
        iterator, window = self.iterator, self.window
        while self.state == _WAITING and window.open():
            step = iterator.__anext__()
            if not hasattr(step, "send"):
                # An awaitable that is no coroutine (a received stream's Deferred): awaited in one.
                step = _await(step)
            try:
                yielded = step.send(None)
            except StopIteration as done:
                self.itemReady(done.value, transport)
                continue
            except StopAsyncIteration:
                self.end()
                return
            except Exception as error:
                self.fail(error)
                return
            # The source waits (on a Deferred): what it gave so far goes now,
            # and Twisted's coroutine runner drives the rest of this step.
            self.flush(transport)
            self.state = _PULLING
            pending = self._pending = Deferred.fromCoroutine(_finishStep(step, yielded))
            pending.addCallbacks(self._pulled, self._pullFailed)
            return

    def _pulled(self, item: Any) -> None:
        self._pending = None
        if self.state != _PULLING:
            return
        self.state = _WAITING
        transport = self.streams.transport()
        if transport is None:
            return
        transport.hold()
        try:
            self.itemReady(item, transport)
            if self.state == _WAITING and not self.window.open():
                self.flush(transport)
        finally:
            transport.release()
        self.pump()

    def _pullFailed(self, failure: Failure) -> None:
        self._pending = None
        if self.state != _PULLING:
            return
        self.state = _WAITING
        error = failure.value
        if isinstance(error, StopAsyncIteration):
            self.end()
        elif isinstance(error, Exception):
            self.fail(error)
        else:
            self.fail(RuntimeError(f"the stream's source raised {type(error).__name__}"))

    def itemReady(self, item: Any, transport: Any) -> None:
        """
        Take C{item} (checked first if the stream is typed) into the ITEM
        being gathered, counted against the credit at once; the ITEM is
        sent once it holds the batch's count (L{_batchLimit}), or when the
        pump stops.
        """
        check = self.check
        if check is not None:
            try:
                checkItem(check[0], item, check[1], self.sent + len(self._batch))
            except Violation as violation:
                self.fail(violation)
                return
        window = self.window
        window.taken()
        batch = self._batch
        batch.append(item)
        # Sent once it holds its count, or (at the last ITEM's size per item) fills the byte window's room.
        if len(batch) >= self._batchLimit or len(batch) * self._itemSize >= window.windowBytes - window.inFlightBytes:
            self.flush(transport)

    def flush(self, transport: Any) -> None:
        """Send the items gathered as one ITEM (into the held transport's buffer), and size the next batch."""
        items = self._batch
        if not items:
            return
        self._batch = []
        message = FlowMessage((ITEM, self.streamId, *items))
        count = len(items)
        # Whole in one call of the compiled core when it can (its length is
        # the ITEM's size); else through the slicers, measured in the buffer.
        tokens = self.encoder.tokens(message) if self.encoder is not None else None
        try:
            if tokens is not None:
                transport.buffer.write_piece(tokens)
                size = len(tokens)
            else:
                buffer = transport.buffer
                before = len(buffer)
                self.streams.send(message)
                size = len(buffer) - before
        except (EncodingError, Violation) as error:
            check = self.check
            if isinstance(error, Violation) and check is not None:
                error.where = f"{check[1]}[{self.sent}..{self.sent + count - 1}]{error.where}"
            self.fail(error)
            return
        self.sent += count
        size = max(size, count)
        self.window.sent(count, size)
        unpaced = self._unpaced = self._unpaced + size
        if unpaced >= PACE_BYTES and self.state == _WAITING:
            # Its turn is over: the reactor serves everything else, then the connection is looked at again.
            self._unpaced = 0
            self.state = _PAUSED
            self.streams.pace(self)
        # Gather as many items as fill BATCH_BYTES at this size, within BATCH_ITEMS.
        self._itemSize = size // count
        self._batchLimit = max(1, min(BATCH_ITEMS, BATCH_BYTES * count // size))

    def resume(self) -> None:
        """Its turn came again (L{ObjectStreams.pace}): send on, if the connection takes more."""
        if self.state == _PAUSED:
            self.state = _WAITING
            self.pump()

    def end(self) -> None:
        """The source is exhausted: the items gathered, then END, with the count of items sent."""
        self._flushHeld()
        self.state = _DONE
        self.streams.endSending(self)

    def fail(self, error: BaseException) -> None:
        """The source raised (or an item was refused): ERROR after the items sent, and the source closed."""
        if self.state != _DONE:
            self._flushHeld()
        self.state = _DONE
        self.streams.failSending(self, error)
        self.close()

    def _flushHeld(self) -> None:
        transport = self.streams.transport()
        if transport is not None:
            self.flush(transport)
        self._batch = []

    def cancel(self) -> None:
        """The receiver cancelled, the call failed or the connection is gone: stop and close the source."""
        if self.state == _DONE:
            return
        self._batch = []
        self.state = _DONE
        self.streams.producerOver(self)
        self.close()

    def close(self) -> None:
        """Close the source: a pull in progress is cancelled, then its C{aclose} (or C{close}) runs."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.addErrback(lambda failure: None)
            pending.cancel()
        closeable = self.closeable
        if self.isAsync:
            aclose = getattr(closeable, "aclose", None)
            if aclose is not None:
                closing: Deferred[Any] = Deferred.fromCoroutine(_await(aclose()))
                closing.addErrback(self.streams.closeFailed)
            return
        close = getattr(closeable, "close", None)
        if close is not None:
            try:
                close()
            except Exception as error:
                self.streams.closeFailed(Failure(error))  # type: ignore[no-untyped-call]


# -- the consumer's side -----------------------------------------------------------------


class StreamReader(ReceivedStream, AsyncIterator[T], Generic[T]):
    """
    A stream of objects received in a call's arguments or result: iterate
    it with C{async for} (its C{__anext__} returns a L{Deferred}), or pull
    with L{next}, or hand each item to a callback with L{forEach}.

    Dropping it unfinished (breaking out of C{async for} with no other
    reference to it) or calling L{cancel} stops the producer.  Typed
    (C{AsyncIterator[T]} in the method's hints), each item is checked as it
    arrives: the first refused cancels the stream at once, and the consumer
    gets the items before it, then its L{framing.Violation}, C{where}
    naming its index (C{"result[17]"}).  The items held (received, not yet
    taken) are charged to the connection's ledger until taken (L{ReceiveWindow}).
    A wait for the next item ends at the enclosing call's deadline (and on
    a client at its C{callTimeout}) with L{framing.rpc.DeadlineExceeded} or
    L{framing.rpc.CallTimedOut}, the stream cancelled (L{ObjectStreams.boundWait}).
    Its state and rules are the table's (L{framing.rpc._streamtable.ReceivedStream});
    this holds the consumer's L{Deferred} and its timer.

    @ivar streamId: the peer's id of the stream.
    @ivar window: its L{ReceiveWindow} (C{window.buffered}: items held, not yet taken).
    @ivar taken: items taken so far.
    """

    streams: ObjectStreams

    def __init__(self, streams: ObjectStreams, streamId: int, window: ReceiveWindow) -> None:
        super().__init__(streams, streamId, window)
        self._waiting: Deferred[T] | None = None
        self._timer: Any = None
        self._wakePending = False

    def __aiter__(self) -> StreamReader[T]:
        return self

    def __anext__(self) -> Deferred[T]:
        """The next item, as a L{Deferred} that fails with C{StopAsyncIteration} at the end."""
        if self.buffer:
            return succeed(self.streams.take(self))
        if self.error is not None:
            return fail(_handed(self.error))
        if self.ended:
            return fail(StopAsyncIteration())
        if self._waiting is not None:
            raise RuntimeError("a stream's next item is already awaited")
        waiting: Deferred[T] = Deferred(self._cancelWaiting)
        self._waiting = waiting
        # Held by the connection while awaited: a consumer waiting on it may be held by nothing else.
        self.streams.awaiting(self)
        self._timer = self.streams.boundWait(self)
        return waiting

    def next(self) -> Deferred[T]:
        """The next item (what C{async for} awaits): fails with C{StopAsyncIteration} at the end."""
        return self.__anext__()

    def forEach(self, callback: Callable[[T], Any]) -> Deferred[int]:
        """
        Call C{callback} with each item, waiting for a L{Deferred} it
        returns before taking the next.

        @return: a L{Deferred} of the count of items, once the stream ended;
            failing with its error, or with what C{callback} raised (the
            stream is then cancelled).
        """
        return Deferred.fromCoroutine(self._each(callback))

    async def _each(self, callback: Callable[[T], Any]) -> int:
        count = 0
        buffer = self.buffer
        take = self.streams.take
        try:
            while True:
                # Items held are taken without a Deferred each.
                if buffer:
                    item = take(self)
                else:
                    try:
                        item = await self.__anext__()
                    except StopAsyncIteration:
                        return count
                result = callback(item)
                if isinstance(result, Deferred):
                    await result
                count += 1
        except BaseException:
            self.cancel()
            raise

    def cancel(self) -> None:
        """
        Stop the stream: CANCEL to the producer, the items held dropped; a
        pending L{next} fails with C{CancelledError}.
        """
        if self.finished:
            return
        self.streams.cancel(self)
        waiting = self._takeWaiting()
        if waiting is not None:
            waiting.errback(CancelledError())

    def aclose(self) -> Deferred[None]:
        """L{cancel}, as an awaitable (for C{contextlib.aclosing})."""
        self.cancel()
        return succeed(None)

    def _cancelWaiting(self, waiting: Deferred[T]) -> None:
        if self._waiting is waiting:
            self._takeWaiting()
            self.streams.cancel(self)

    def _takeWaiting(self) -> Deferred[T] | None:
        """The L{Deferred} a consumer awaits, forgotten here (and the connection's hold on this reader let go)."""
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            self.streams.notAwaiting(self)
            timer, self._timer = self._timer, None
            if timer is not None and timer.active():
                timer.cancel()
        return waiting

    def waitTimedOut(self, error: BaseException) -> None:
        """
        No item came within the wait's bound (L{ObjectStreams.boundWait}):
        the stream is cancelled, and it fails with C{error} now and from now on.
        """
        self._timer = None
        if self._waiting is None:
            return
        self.streams.timedOut(self, error)
        waiting = self._takeWaiting()
        assert waiting is not None
        _failWaiting(waiting, error)

    # -- told by the connection --------------------------------------------------------

    def changed(self) -> None:
        """
        The table changed this stream (items, END, ERROR, a refused item,
        the connection's end): a consumer waiting for items is woken at the
        end of the reactor turn (so that it takes the items of one read in
        one go, without a Deferred of its own each); one waiting for the
        end gets it now.
        """
        if self._waiting is None:
            return
        if self.buffer:
            if not self._wakePending:
                self._wakePending = True
                self.streams.wakeSoon(self)
        elif self.error is not None:
            waiting = self._takeWaiting()
            assert waiting is not None
            _failWaiting(waiting, self.error)
        elif self.ended:
            waiting = self._takeWaiting()
            assert waiting is not None
            waiting.errback(StopAsyncIteration())

    def wake(self) -> None:
        """Hand the consumer waiting for an item the first one held (the end of the turn L{changed} asked for)."""
        self._wakePending = False
        if self._waiting is None or not self.buffer:
            return
        waiting = self._takeWaiting()
        assert waiting is not None
        waiting.callback(self.streams.take(self))


# -- the connection's streams ---------------------------------------------------------------


@implementer(IBrokerExtension)
class ObjectStreams(ObjectStreamTable):
    """
    The object streams of one connection, both ways (every L{Broker} loads
    one; give a broker your own in C{extensions} for other L{StreamOptions}):
    the sans-IO L{ObjectStreamTable} (every stream rule) with the broker's
    output, the reactor's turns and timers, and the producers' pacing.

    @ivar options: its L{StreamOptions}.
    """

    log = Logger()
    controlTypes = (FlowMessage,)

    def __init__(self, options: StreamOptions | None = None) -> None:
        self.options = options = options or StreamOptions()
        super().__init__(options.window, options.windowBytes, options.maxStreams)
        self._broker: Callable[[], Any] = _nothing
        self._gonePending = False
        self._awaited: dict[int, StreamReader[Any]] = {}
        self._toWake: list[StreamReader[Any]] = []
        self._paced: list[_Producer] = []
        self._paceCall: Any = None
        self._up = False

    # -- IBrokerExtension ------------------------------------------------------------------

    def install(self, broker: Any, registry: Registry) -> None:
        """Teach the broker's registry the announcement and the flow messages, and what is sent as a stream."""
        self._broker = weakref.ref(broker)
        self.registry = registry
        addFlowTypes(registry)
        slicer = _AnnouncementSlicer(self)
        for cls in (ObjectStream, StreamReader, types.AsyncGeneratorType, types.GeneratorType, AsyncIterator):
            registry.add_slicer(cls, slicer)
        registry.add_unslicer(ANNOUNCE_OPEN_TYPE, lambda limits: AnnouncementUnslicer(limits, self.announced))

    def connectionMade(self) -> None:
        self._up = True

    def connectionLost(self, reason: Failure) -> None:
        """Every reader fails with C{reason}'s error; every producer is closed."""
        self._up = False
        self._paced = []
        paceCall, self._paceCall = self._paceCall, None
        if paceCall is not None and paceCall.active():
            paceCall.cancel()
        readers, producers = self.connectionEnded(_connectionsOwn(reason.value))
        for producer in producers:
            if isinstance(producer, _Producer):
                producer.cancel()
        for reader in readers:
            reader.changed()
        self._awaited.clear()
        # The registry's slicers refer to this connection's tables: no cycle outlives the end.
        self.registry = None

    def controlReceived(self, message: FlowMessage) -> None:
        """One flow message from the peer, applied by the table; the reader or producer it changed is woken."""
        try:
            changed = self.receivedFlow(message)
        except Exception as error:
            self._dropConnection(error)
            return
        if changed is None:
            return
        tag = message[0]
        if tag == CREDIT:
            changed.granted()
        elif tag == CANCEL:
            changed.cancel()
        else:
            changed.changed()

    # -- for producers and readers ---------------------------------------------------------

    def transport(self) -> Any:
        """The connection's transport while it is up, else C{None}."""
        broker = self._broker()
        if broker is None or not self._up:
            return None
        transport = broker.transport
        return None if transport is None or transport.disconnecting else transport

    def roomToSend(self, transport: Any) -> bool:
        """
        Whether the connection takes more from a producer now: not while
        more than the send high-water mark waits to be sent (its send
        backlog, or what this reactor turn has buffered), nor while its
        ledger has no room for another L{PACE_BYTES}.  A few attribute
        reads.
        """
        if transport.sendBacklogged:
            return False
        high = transport.sendHighWater
        if high is not None and len(transport.buffer) > high:
            return False
        broker = self._broker()
        return broker is not None and broker.connection.ledger.room(PACE_BYTES)

    def pace(self, producer: _Producer) -> None:
        """
        C{producer} has had its turn, or the connection takes no more:
        resume it at the end of this reactor turn if the connection takes
        more then, else look again every L{PACE_RETRY} seconds (a peer that
        does not read makes its producers wait, and nothing else).
        """
        self._paced.append(producer)
        if self._paceCall is None:
            clock = self._clock()
            if clock is not None:
                self._paceCall = clock.callLater(0, self._resumePaced)

    def _resumePaced(self) -> None:
        self._paceCall = None
        transport = self.transport()
        if transport is None:
            self._paced = []
            return
        paced, self._paced = self._paced, []
        if not self.roomToSend(transport):
            self._paced = [producer for producer in paced if producer.state == _PAUSED]
            if self._paced:
                clock = self._clock()
                if clock is not None:
                    self._paceCall = clock.callLater(PACE_RETRY, self._resumePaced)
            return
        for producer in paced:
            producer.resume()

    def encoder(self) -> Any:
        """The connection's L{framing.Encoder}."""
        broker = self._broker()
        return None if broker is None else broker.connection.encoder

    def send(self, message: FlowMessage) -> None:
        """Send one flow message, if the connection is up."""
        broker = self._broker()
        if broker is not None and self.transport() is not None:
            broker.sendObject(message)

    sendFlow = send

    def newReader(self, streamId: int, window: ReceiveWindow) -> StreamReader[Any]:
        return StreamReader(self, streamId, window)

    def heldLedger(self) -> Ledger | None:
        """The connection's ledger (the items readers hold are charged there), or C{None}."""
        broker = self._broker()
        return None if broker is None else getattr(broker.connection, "ledger", None)

    def refused(self, reader: ReceivedStream, violation: Violation) -> None:
        """A refused item (L{ObjectStreamTable.refused}); a consumer waiting with nothing held gets C{violation}."""
        super().refused(reader, violation)
        reader.changed()

    def awaiting(self, reader: StreamReader[Any]) -> None:
        """C{reader}'s consumer waits for its next item: hold it until then (its weak entry alone would not)."""
        self._awaited[reader.streamId] = reader

    def boundWait(self, reader: StreamReader[Any]) -> Any:
        """
        Bound the wait for C{reader}'s next item, as the clients without
        Twisted do (L{framing.rpc._streamtable.itemWaitBound}): by the
        deadline of the enclosing C{callContext} (or of the call being
        answered), and on a client's connection (send back-pressure off,
        see L{protocols._config.ConnectionConfig}) also by the broker's
        C{callTimeout}, as the stream's idle bound (a peer that stalls a
        stream while it answers PINGs is not silent).  A server's
        C{callTimeout} bounds its calls to clients, not the pace of a
        client's stream, so there only the deadline applies.  At the bound
        the reader fails (L{StreamReader.waitTimedOut}).

        @return: the timer (C{IDelayedCall}), or C{None} for no bound.
        """
        broker = self._broker()
        clock = self._clock()
        if broker is None or clock is None:
            return None
        enclosing = call_scope.get()
        idle = None if getattr(broker.connection, "sendBackPressure", False) else broker.callLimits.callTimeout
        now = clock.seconds()
        bound = itemWaitBound(reader.streamId, now, None if enclosing is None else enclosing.deadline, idle)
        if bound is None:
            return None
        when, error = bound
        return clock.callLater(max(0.0, when - now), reader.waitTimedOut, error)

    def notAwaiting(self, reader: StreamReader[Any]) -> None:
        """C{reader}'s consumer has its item (or its end): hold it no more."""
        self._awaited.pop(reader.streamId, None)

    def wakeSoon(self, reader: StreamReader[Any]) -> None:
        """Wake C{reader}'s waiting consumer at the end of this reactor turn (once for all readers woken in it)."""
        if not self._toWake:
            clock = self._clock()
            if clock is None:
                return
            clock.callLater(0, self._wake)
        self._toWake.append(reader)

    def _wake(self) -> None:
        toWake, self._toWake = self._toWake, []
        for reader in toWake:
            reader.wake()

    def _clock(self) -> Any:
        broker = self._broker()
        if broker is None:
            return None
        clock = broker.clock
        if clock is None:
            from twisted.internet import reactor as clock
        return clock

    def readerDied(self) -> None:
        """
        A reader was dropped by its consumer: the items it held are let go
        (their bytes released) and, if its stream is not over, it is
        cancelled, at the end of the turn (a garbage collection may drop it
        in the middle of another message's encoding or ledger charge).
        """
        if self._gonePending:
            return
        clock = self._clock()
        if clock is not None:
            self._gonePending = True
            clock.callLater(0, self._cancelGone)

    def _cancelGone(self) -> None:
        self._gonePending = False
        self.cancelDropped()

    def closeFailed(self, failure: Failure) -> None:
        """Closing a producer's source raised: log it (nobody else will see it)."""
        self.log.failure("Closing an object stream's source failed", failure)

    # -- announcing and receiving announcements -------------------------------------------------

    def reserve(self, source: Any, outgoing: Outgoing) -> int:
        """
        Give C{source} an id as the message C{outgoing} is encoded: its
        producer starts if the message is sent, charged to the connection's
        ledger (L{framing.rpc._streamtable.PRODUCER_BYTES}) until it is over.

        @raise ResourceExhausted: the ledger has no room for one more
            producer (the message fails to encode: a call's answer becomes its FAIL).
        """
        producer = _Producer(self, self.reserveId(), source)
        if self.announceProducer(producer):
            # Live once the message is sent, with a PING after it (one per message: see _committed).
            outgoing.on_commit(self._committed)
            outgoing.on_rollback(self.rolledBack)
        return producer.streamId

    def _committed(self) -> None:
        """
        The message announcing streams was sent: they are live
        (L{ObjectStreamTable.committed}), and a PING follows it, at whose
        PONG a stream not taken is closed (L{_probed}).
        """
        producers = self.committed()
        broker = self._broker()
        if broker is None or self.transport() is None:
            return
        pong = broker.connection.sendPing()
        pong.addCallbacks(lambda roundTrip: self._probed(producers), lambda failure: None)

    def _probed(self, producers: list[SentStream]) -> None:
        """
        The PONG of the PING that followed an announcement came back: the
        table judges the streams (L{ObjectStreamTable.probed}) once
        everything read before the PONG was applied.  A PONG is handled as
        soon as its read is decoded, before the objects of that read are
        delivered (the CREDIT that came before it may not have been yet),
        so they are judged at the end of the turn (later still while the
        connection holds objects undelivered, its reading paused).
        """
        clock = self._clock()
        if clock is not None:
            clock.callLater(0, self._judge, producers)

    def _judge(self, producers: list[SentStream]) -> None:
        if not self.untaken(producers):
            return
        broker = self._broker()
        if broker is None or not self._up:
            return
        if broker.connection.inbound.held:
            # Delivery is paused with objects read before the PONG perhaps still held: judge once they are delivered.
            clock = self._clock()
            if clock is not None:
                clock.callLater(PROBE_RETRY, self._judge, producers)
            return
        for producer in self.probed(producers):
            self.log.info(
                "Object stream {streamId} was not taken by the peer (no credit before its PONG): closed",
                streamId=producer.streamId,
            )
            if isinstance(producer, _Producer):
                producer.cancel()

    def announced(self, announcement: Announcement) -> ReceivedStream:
        """
        The peer announced a stream (L{ObjectStreamTable.announced}): its
        reader; a broken rule drops the connection, and the announcement is refused.
        """
        try:
            return super().announced(announcement)
        except (ObjectStreamIdReused, TooManyObjectStreams) as error:
            self._dropConnection(error)
            raise Violation(str(error)) from None

    def _dropConnection(self, error: Exception) -> None:
        broker = self._broker()
        if broker is not None:
            broker.connection.dropConnection(error)


def _connectionsOwn(error: BaseException | None) -> BaseException:
    """
    A copy of C{error} (the reason a connection was lost) for that
    connection's readers alone, without a traceback.  Twisted hands every
    connection it closes cleanly the same C{ConnectionDone} instance (a
    default argument of its reactor's), and an exception raised in a
    consumer's coroutine keeps that coroutine's frames in its traceback
    (the next raise adds to them): readers failed with the shared instance
    kept every closed connection's consumers, readers and broker alive for
    the life of the process.  A copy is held only by what the connection
    freed holds.
    """
    if error is None:
        return ConnectionError("connection lost")
    try:
        copied = copy.copy(error)
    except Exception:
        copied = ConnectionError(f"connection lost: {type(error).__name__}: {error}")
    copied.__traceback__ = None
    return copied


def _handed(error: BaseException) -> BaseException:
    """
    What a reader hands its consumer for the C{error} it ended with: a copy
    of its own, without a traceback, so that the reader never holds the
    frames the consumer raises it through.  Raised in a method's coroutine
    awaiting the reader, the reader's own instance would gain that
    coroutine's frames in its traceback, and those frames hold the reader
    (and through it its connection, and the last item taken): a reference
    cycle, freed only by a full garbage collection, which a quiet server
    runs seldom (the hostile peer's streams rows kept 4 MiB items, one per
    stream, and their brokers, alive long after the connections closed).
    Cost: one C{copy.copy} per failed wait, none per item.
    """
    try:
        copied = copy.copy(error)
    except Exception:  # (an exception its class cannot rebuild from its args: handed as it is)
        copied = error
    copied.__traceback__ = None
    return copied


def _failWaiting(waiting: Deferred[Any], error: BaseException) -> None:
    """
    Fail the consumer's C{waiting} with a copy of C{error} (L{_handed}),
    and once it has run (a coroutine awaiting it runs at once, within the
    errback), take that copy's traceback away.  Thrown into a coroutine
    Twisted drives, an exception the coroutine does not catch gains a
    traceback holding Twisted's frame that still refers to the L{Failure}
    holding the exception: a cycle, and since the frames raised through
    refer to their callers, it holds what called the errback too (a
    connection's end: its broker, its streams, the items its methods took
    last), until a full garbage collection.  Without the traceback nothing
    is left in a cycle, and reference counting frees it all at once.
    """
    handed = _handed(error)
    try:
        waiting.errback(handed)
    finally:
        handed.__traceback__ = None


def _nothing() -> None:
    return None


@implementer(ISlicer)
class _AnnouncementSlicer:
    """Announces a stream in the message being encoded (OPEN "rpc.stream", its id, CLOSE); it starts if that is sent."""

    def __init__(self, streams: ObjectStreams) -> None:
        self.streams = streams

    def slice(self, obj: Any, encoder: Any) -> None:
        outgoing = encoder.outgoing
        if outgoing is None:
            raise EncodingError("a stream of objects can only be sent in a message, not encoded alone")
        streamId = self.streams.reserve(obj, outgoing)
        encoder.write_container(ANNOUNCE_OPEN_TYPE, obj, (streamId,))
