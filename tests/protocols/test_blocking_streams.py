"""Object streams read by the blocking client (L{protocols.blocking}), against the real Twisted server in-process.

The server (L{tests.protocols.clientstreams.Producers}) runs in the test's
reactor on loopback; the blocking client runs in a thread of the reactor's
pool.  Each body runs under trial and under pytest-twisted.
"""

from __future__ import annotations

import gc
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from framing import Violation
from framing.rpc._clientstreams import StreamArgumentRefused
from framing.rpc._errors import CallTimedOut, ConnectionLost, DeadlineExceeded, RemoteError
from framing.rpc._limits import CallLimits
from protocols.blocking import BlockingConnection, BlockingStream, callContext, connect
from protocols.options import ClientOptions

from .clientrefs import HANG, stopServing
from .clientstreams import BAD_INDEX, WINDOW, IProducers, servingStreams
from .helpers import pytestTest, trialTest


async def _connected(port: Any) -> BlockingConnection:
    connection: BlockingConnection = await deferToThread(
        connect,
        f"127.0.0.1:{port.getHost().port}",
        options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG)),
    )
    return connection


async def wholeStreamRead(reactor: Any) -> None:
    """A stream of 10^4 items is read whole by a for loop (credit goes back as items are taken), calls between."""
    _, port = await servingStreams(reactor)
    connection = await _connected(port)
    try:

        def read() -> tuple[list[int], list[int], list[int], int]:
            first = connection.root.callRemote("count", 10_000)
            assert isinstance(first, BlockingStream), first
            second = connection.root.callRemote("count", 3)
            taken = [next(first) for _ in range(10)]
            made = connection.root.callRemote("made")  # a plain call while two streams are open
            taken.extend(first)
            return taken, list(second), made, connection._session.objectStreams.streamCount

        taken, second, made, open = await deferToThread(read)
        assert taken == list(range(10_000))
        assert second == [0, 1, 2]
        assert made[0] >= 10 and open == 0
    finally:
        connection.close()
        await stopServing(port)


async def slowConsumerHoldsProducer(reactor: Any) -> None:
    """A consumer taking items slowly keeps the server's producer within one window of what it took."""
    producers, port = await servingStreams(reactor)
    connection = await _connected(port)
    try:

        def slowly() -> list[tuple[int, int]]:
            stream = connection.root.callRemote("endless")
            seen = []
            for taken in (1, 2, WINDOW // 2, WINDOW + 5, 3 * WINDOW):
                while stream.taken < taken:
                    next(stream)
                # (the CREDITs went before this call: the server pumped what they allowed before answering it)
                produced = connection.root.callRemote("made")[0]
                seen.append((stream.taken, produced))
            stream.close()
            return seen

        seen = await deferToThread(slowly)
        for taken, produced in seen:
            assert produced <= taken + WINDOW, seen
        assert seen[0][1] >= WINDOW // 2, seen  # the window was used, not one item at a time
        assert producers.produced <= 4 * WINDOW
    finally:
        connection.close()
        await stopServing(port)


async def breakSendsCancel(reactor: Any) -> None:
    """Breaking out of the for loop (the stream dropped) or close() sends CANCEL: the producer's finally runs."""
    producers, port = await servingStreams(reactor)
    connection = await _connected(port)
    try:

        def broken() -> list[int]:
            closed = []
            for item in connection.root.callRemote("endless"):
                if item == 5:
                    break
            gc.collect()
            closed.append(_closedSoon(connection, 1))
            with connection.root.callRemote("endless") as stream:
                next(stream)
            closed.append(_closedSoon(connection, 2))
            return closed

        assert await deferToThread(broken) == [1, 2]
        assert producers.produced <= 2 * (WINDOW + 6)
    finally:
        connection.close()
        await stopServing(port)


def _closedSoon(connection: BlockingConnection, expected: int) -> int:
    """Ask the server, call after call, until C{expected} producers were closed (or only a hang misses it)."""
    for _ in range(int(HANG / 0.01)):
        closed: int = connection.root.callRemote("made")[1]
        if closed >= expected:
            return closed
    return -1


async def producerErrorAfterItems(reactor: Any) -> None:
    """The producer's exception is raised after the items it sent before it."""
    _, port = await servingStreams(reactor)
    connection = await _connected(port)
    try:

        def read() -> tuple[list[int], BaseException | None]:
            items: list[int] = []
            try:
                for item in connection.root.callRemote("failing", 5):
                    items.append(item)
            except Exception as error:
                return items, error
            return items, None

        items, error = await deferToThread(read)
        assert items == [0, 1, 2, 3, 4]
        assert isinstance(error, RemoteError) and "the producer broke" in str(error), error
    finally:
        connection.close()
        await stopServing(port)


async def typedItemsRefused(reactor: Any) -> None:
    """Through a typed reference, the first item that is no int is refused, its index in where; CANCEL follows."""
    _, port = await servingStreams(reactor)
    connection = await _connected(port)
    try:

        def read() -> tuple[list[int], BaseException | None, int]:
            items: list[int] = []
            typed = connection.root.typed(IProducers)
            try:
                for item in typed.untyped():
                    items.append(item)
            except Violation as violation:
                return items, violation, connection._session.objectStreams.streamCount
            return items, None, -1

        items, violation, open = await deferToThread(read)
        assert items == list(range(BAD_INDEX))
        assert isinstance(violation, Violation) and violation.where == f"result[{BAD_INDEX}]", violation
        assert open == 0
    finally:
        connection.close()
        await stopServing(port)


async def connectionLossEndsStream(reactor: Any) -> None:
    """The connection's loss ends the iterator with the reason, after the items that came before it."""
    _, port = await servingStreams(reactor)
    connection = await _connected(port)
    try:

        def read() -> tuple[list[int], BaseException | None]:
            stream = connection.root.callRemote("endless")
            items = [next(stream) for _ in range(3)]
            connection.root.callRemote("drop")
            try:
                items.extend(stream)
            except Exception as error:
                return items, error
            return items, None

        items, error = await deferToThread(read)
        assert isinstance(error, ConnectionLost), error
        assert items == list(range(len(items))) and len(items) >= 3
    finally:
        connection.close()
        await stopServing(port)


async def streamArgumentRefused(reactor: Any) -> None:
    """A generator in a call's arguments is refused before anything is sent (a TypeError naming the limitation)."""
    _, port = await servingStreams(reactor)
    connection = await _connected(port)
    try:

        def call() -> tuple[BaseException | None, list[int]]:
            try:
                connection.root.callRemote("count", (i for i in range(3)))
            except TypeError as error:
                return error, connection.root.callRemote("made")
            return None, []

        error, made = await deferToThread(call)
        assert isinstance(error, StreamArgumentRefused) and "sends no streams" in str(error), error
        assert made == [0, 0]  # the connection goes on
    finally:
        connection.close()
        await stopServing(port)


async def _stalledStream(reactor: Any, callTimeout: float, scoped: float | None) -> None:
    """
    A server announces a stream, sends one item, then stalls it while it
    answers every PING (the client's silence watch pings it every few
    tenths of a second, so it is never silent): the wait for the next item
    ends with a typed error at the consumer's deadline (C{scoped}: a
    callContext's, else C{callTimeout}), the stream is cancelled (the
    server's producer closed) and the connection goes on.  Before, it waited
    for good (the server's connection is dropped after HANG, so a hang fails).
    """
    producers, port = await servingStreams(reactor)
    address = f"127.0.0.1:{port.getHost().port}"
    connection: BlockingConnection = await deferToThread(
        connect,
        address,
        options=ClientOptions(timeout=HANG, silenceTimeout=0.4, callLimits=CallLimits(callTimeout=callTimeout)),
    )
    rescue = reactor.callLater(HANG, lambda: port.factory.disconnectAll())

    def read() -> tuple[int, BaseException | None, BaseException | None, int]:
        stream = connection.root.callRemote("idle")
        first = next(stream)
        error = later = None
        try:
            if scoped is None:
                next(stream)
            else:
                with callContext(scoped):
                    next(stream)
        except Exception as raised:
            error = raised
        try:
            next(stream)
        except Exception as raised:
            later = raised
        return first, error, later, _closedSoon(connection, 1)

    try:
        first, error, later, closed = await deferToThread(read)
        assert first == 0
        expected = CallTimedOut if scoped is None else DeadlineExceeded
        assert isinstance(error, expected), error
        assert later is error  # the stream fails with it from now on
        assert closed == 1  # its CANCEL reached the server, and calls still go
    finally:
        if rescue.active():
            rescue.cancel()
        connection.close()
        await stopServing(port)


async def stalledStreamTimesOut(reactor: Any) -> None:
    """A stalled stream's next item is awaited C{callTimeout} at most: CallTimedOut."""
    await _stalledStream(reactor, callTimeout=1.0, scoped=None)


async def stalledStreamDeadline(reactor: Any) -> None:
    """A stalled stream's next item is awaited until the callContext's deadline at most: DeadlineExceeded."""
    await _stalledStream(reactor, callTimeout=HANG, scoped=1.0)


class BlockingStreamTests(TestCase):
    """Object streams in the blocking client (trial runs these; pytest the twins below)."""

    timeout = HANG + 30
    test_whole_stream_read = trialTest(wholeStreamRead, HANG)
    test_slow_consumer_holds_producer = trialTest(slowConsumerHoldsProducer, HANG)
    test_break_sends_cancel = trialTest(breakSendsCancel, HANG)
    test_producer_error_after_items = trialTest(producerErrorAfterItems, HANG)
    test_typed_items_refused = trialTest(typedItemsRefused, HANG)
    test_connection_loss_ends_stream = trialTest(connectionLossEndsStream, HANG)
    test_stream_argument_refused = trialTest(streamArgumentRefused, HANG)
    test_stalled_stream_times_out = trialTest(stalledStreamTimesOut, 2 * HANG)
    test_stalled_stream_deadline = trialTest(stalledStreamDeadline, 2 * HANG)


test_whole_stream_read = pytestTest(wholeStreamRead, HANG)
test_slow_consumer_holds_producer = pytestTest(slowConsumerHoldsProducer, HANG)
test_break_sends_cancel = pytestTest(breakSendsCancel, HANG)
test_producer_error_after_items = pytestTest(producerErrorAfterItems, HANG)
test_typed_items_refused = pytestTest(typedItemsRefused, HANG)
test_connection_loss_ends_stream = pytestTest(connectionLossEndsStream, HANG)
test_stream_argument_refused = pytestTest(streamArgumentRefused, HANG)
test_stalled_stream_times_out = pytestTest(stalledStreamTimesOut, 2 * HANG)
test_stalled_stream_deadline = pytestTest(stalledStreamDeadline, 2 * HANG)
