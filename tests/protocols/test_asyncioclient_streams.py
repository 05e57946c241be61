"""Object streams read by the asyncio client (L{protocols.asyncioclient}), against the real Twisted server in-process.

The server (L{tests.protocols.clientstreams.Producers}) runs in the test's
reactor on loopback; the client runs its own asyncio loop (C{asyncio.run})
in a thread of the reactor's pool.  Each body runs under trial and under
pytest-twisted.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Awaitable, Callable
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from framing import Violation
from framing.rpc._clientstreams import StreamArgumentRefused
from framing.rpc._errors import CallTimedOut, ConnectionLost, DeadlineExceeded, RemoteError
from framing.rpc._limits import CallLimits
from protocols.asyncioclient import AsyncConnection, AsyncStream, ServerSilent, callContext, connect
from protocols.options import ClientOptions

from .clientrefs import HANG, stopServing
from .clientstreams import BAD_INDEX, WINDOW, IProducers, servingStreams
from .helpers import pytestTest, trialTest


def inLoop(port: Any, work: Callable[[AsyncConnection], Awaitable[Any]]) -> Any:
    """Run C{work(connection)} on a new asyncio loop in this thread, connected to C{port}; its result."""

    async def main() -> Any:
        connection = await connect(
            f"127.0.0.1:{port.getHost().port}",
            options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG)),
        )
        async with connection:
            return await asyncio.wait_for(work(connection), HANG)

    return asyncio.run(main())


async def _take(stream: Any, count: int) -> list[Any]:
    return [await stream.__anext__() for _ in range(count)]


async def wholeStreamsAndCallsAtOnce(reactor: Any) -> None:
    """Two streams (one of 10^4 items) and calls in flight at once on one connection, each read whole."""
    _, port = await servingStreams(reactor)

    async def work(connection: AsyncConnection) -> tuple[list[int], list[int], list[Any], int]:
        async def read(n: int) -> list[int]:
            stream = await connection.root.callRemote("count", n)
            assert isinstance(stream, AsyncStream), stream
            return [item async for item in stream]

        big, small, *made = await asyncio.gather(
            read(10_000), read(300), *(connection.root.callRemote("made") for _ in range(20))
        )
        return big, small, made, connection._session.objectStreams.streamCount

    try:
        big, small, made, open = await deferToThread(inLoop, port, work)
        assert big == list(range(10_000)) and small == list(range(300))
        assert len(made) == 20 and open == 0
    finally:
        await stopServing(port)


async def slowConsumerHoldsProducer(reactor: Any) -> None:
    """A consumer taking items slowly keeps the server's producer within one window of what it took."""
    producers, port = await servingStreams(reactor)

    async def work(connection: AsyncConnection) -> list[tuple[int, int]]:
        stream = await connection.root.callRemote("endless")
        seen = []
        for taken in (1, 2, WINDOW // 2, WINDOW + 5, 3 * WINDOW):
            while stream.taken < taken:
                await stream.__anext__()
            # (the CREDITs were written before this call: the server pumped what they allowed before answering it)
            produced = (await connection.root.callRemote("made"))[0]
            seen.append((stream.taken, produced))
        await stream.aclose()
        return seen

    try:
        seen = await deferToThread(inLoop, port, work)
        for taken, produced in seen:
            assert produced <= taken + WINDOW, seen
        assert seen[0][1] >= WINDOW // 2, seen  # the window was used, not one item at a time
        assert producers.produced <= 4 * WINDOW
    finally:
        await stopServing(port)


async def breakSendsCancel(reactor: Any) -> None:
    """Breaking out of async for (the stream dropped), aclose(), a cancelled waiting task: CANCEL, finally runs."""
    producers, port = await servingStreams(reactor)

    async def closedSoon(connection: AsyncConnection, expected: int) -> int:
        for _ in range(int(HANG / 0.01)):
            closed: int = (await connection.root.callRemote("made"))[1]
            if closed >= expected:
                return closed
            await asyncio.sleep(0.01)
        return -1

    async def work(connection: AsyncConnection) -> list[int]:
        closed = []
        async for item in await connection.root.callRemote("endless"):
            if item == 5:
                break
        gc.collect()
        closed.append(await closedSoon(connection, 1))
        async with contextlib.aclosing(await connection.root.callRemote("endless")) as stream:
            await stream.__anext__()
        closed.append(await closedSoon(connection, 2))
        idle = await connection.root.callRemote("idle")
        task = asyncio.ensure_future(_take(idle, 2))  # (the second item never comes: the task waits)
        while idle.taken < 1:
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        closed.append(await closedSoon(connection, 3))
        return closed

    try:
        assert await deferToThread(inLoop, port, work) == [1, 2, 3]
        assert producers.produced <= 2 * (WINDOW + 6) + 1
    finally:
        await stopServing(port)


async def producerErrorAfterItems(reactor: Any) -> None:
    """The producer's exception is raised after the items it sent before it."""
    _, port = await servingStreams(reactor)

    async def work(connection: AsyncConnection) -> tuple[list[int], BaseException | None]:
        items: list[int] = []
        try:
            async for item in await connection.root.callRemote("failing", 5):
                items.append(item)
        except Exception as error:
            return items, error
        return items, None

    try:
        items, error = await deferToThread(inLoop, port, work)
        assert items == [0, 1, 2, 3, 4]
        assert isinstance(error, RemoteError) and "the producer broke" in str(error), error
    finally:
        await stopServing(port)


async def typedItemsRefused(reactor: Any) -> None:
    """Through a typed reference, the first item that is no int is refused, its index in where; CANCEL follows."""
    _, port = await servingStreams(reactor)

    async def work(connection: AsyncConnection) -> tuple[list[int], BaseException | None, int]:
        items: list[int] = []
        typed = connection.root.typed(IProducers)
        try:
            async for item in await typed.untyped():
                items.append(item)
        except Violation as violation:
            return items, violation, connection._session.objectStreams.streamCount
        return items, None, -1

    try:
        items, violation, open = await deferToThread(inLoop, port, work)
        assert items == list(range(BAD_INDEX))
        assert isinstance(violation, Violation) and violation.where == f"result[{BAD_INDEX}]", violation
        assert open == 0
    finally:
        await stopServing(port)


async def connectionLossEndsStream(reactor: Any) -> None:
    """The connection's loss ends the iterator with the reason, after the items that came before it."""
    _, port = await servingStreams(reactor)

    async def work(connection: AsyncConnection) -> tuple[list[int], BaseException | None]:
        stream = await connection.root.callRemote("endless")
        items = await _take(stream, 3)
        await connection.root.callRemote("drop")
        try:
            async for item in stream:
                items.append(item)
        except Exception as error:
            return items, error
        return items, None

    try:
        items, error = await deferToThread(inLoop, port, work)
        assert isinstance(error, ConnectionLost), error
        assert items == list(range(len(items))) and len(items) >= 3
    finally:
        await stopServing(port)


async def silentServerEndsStream(reactor: Any) -> None:
    """
    A stream awaited while no call waits is bounded by the server's silence
    too: a server that stops reading (its PING unanswered) ends the wait for
    the next item with ServerSilent after silenceTimeout.
    """
    _, port = await servingStreams(reactor)

    def stopReading() -> None:
        for broker in port.factory.brokers:
            broker.connection.transport.pauseProducing()

    async def main() -> tuple[int, BaseException | None]:
        address = f"127.0.0.1:{port.getHost().port}"
        async with await connect(
            address, options=ClientOptions(timeout=HANG, silenceTimeout=0.6, callLimits=CallLimits(callTimeout=HANG))
        ) as connection:
            stream = await connection.root.callRemote("idle")
            first = await stream.__anext__()
            reactor.callFromThread(stopReading)
            try:
                await asyncio.wait_for(stream.__anext__(), HANG)
            except Exception as error:
                return first, error
            return first, None

    try:
        first, error = await deferToThread(asyncio.run, main())
        assert first == 0
        assert isinstance(error, ServerSilent), error
    finally:
        await stopServing(port)


async def streamArgumentRefused(reactor: Any) -> None:
    """A plain generator in a call's arguments is refused before anything is sent (a TypeError naming why)."""
    _, port = await servingStreams(reactor)

    async def work(connection: AsyncConnection) -> tuple[BaseException | None, list[int]]:
        try:
            await connection.root.callRemote("total", (i for i in range(3)))
        except TypeError as error:
            return error, await connection.root.callRemote("made")
        return None, []

    try:
        error, made = await deferToThread(inLoop, port, work)
        assert isinstance(error, StreamArgumentRefused) and "async iterables only" in str(error), error
        assert made == [0, 0]
    finally:
        await stopServing(port)


async def _stalledStream(reactor: Any, callTimeout: float, scoped: float | None) -> None:
    """
    A server announces a stream, sends one item, then stalls it while it
    answers every PING (the client's silence watch pings it every few
    tenths of a second, so it is never silent): the wait for the next item
    ends with a typed error at the consumer's deadline (C{scoped}: a
    callContext's, else C{callTimeout}), the stream is cancelled (the
    server's producer closed) and the connection goes on.  Before, it waited
    until the test's own bound (HANG).
    """
    producers, port = await servingStreams(reactor)

    async def main() -> tuple[int, BaseException | None, BaseException | None, int]:
        address = f"127.0.0.1:{port.getHost().port}"
        async with await connect(
            address,
            options=ClientOptions(timeout=HANG, silenceTimeout=0.4, callLimits=CallLimits(callTimeout=callTimeout)),
        ) as connection:
            stream = await connection.root.callRemote("idle")
            first = await stream.__anext__()
            error = later = None
            try:
                if scoped is None:
                    await asyncio.wait_for(stream.__anext__(), HANG)
                else:
                    with callContext(scoped):
                        await asyncio.wait_for(stream.__anext__(), HANG)
            except Exception as raised:
                error = raised
            try:
                await stream.__anext__()
            except Exception as raised:
                later = raised
            closed = -1
            for _ in range(int(HANG / 0.01)):
                closed = (await connection.root.callRemote("made"))[1]
                if closed >= 1:
                    break
            return first, error, later, closed

    try:
        first, error, later, closed = await deferToThread(asyncio.run, main())
        assert first == 0
        expected = CallTimedOut if scoped is None else DeadlineExceeded
        assert isinstance(error, expected), error
        assert later is error  # the stream fails with it from now on
        assert closed == 1  # its CANCEL reached the server, and calls still go
    finally:
        await stopServing(port)


async def stalledStreamTimesOut(reactor: Any) -> None:
    """A stalled stream's next item is awaited C{callTimeout} at most: CallTimedOut."""
    await _stalledStream(reactor, callTimeout=1.0, scoped=None)


async def stalledStreamDeadline(reactor: Any) -> None:
    """A stalled stream's next item is awaited until the callContext's deadline at most: DeadlineExceeded."""
    await _stalledStream(reactor, callTimeout=HANG, scoped=1.0)


class AsyncStreamTests(TestCase):
    """Object streams in the asyncio client (trial runs these; pytest the twins below)."""

    timeout = HANG + 30
    test_whole_streams_and_calls_at_once = trialTest(wholeStreamsAndCallsAtOnce, HANG)
    test_slow_consumer_holds_producer = trialTest(slowConsumerHoldsProducer, HANG)
    test_break_sends_cancel = trialTest(breakSendsCancel, HANG)
    test_producer_error_after_items = trialTest(producerErrorAfterItems, HANG)
    test_typed_items_refused = trialTest(typedItemsRefused, HANG)
    test_connection_loss_ends_stream = trialTest(connectionLossEndsStream, HANG)
    test_stream_argument_refused = trialTest(streamArgumentRefused, HANG)
    test_silent_server_ends_stream = trialTest(silentServerEndsStream, HANG)
    test_stalled_stream_times_out = trialTest(stalledStreamTimesOut, 2 * HANG)
    test_stalled_stream_deadline = trialTest(stalledStreamDeadline, 2 * HANG)


test_whole_streams_and_calls_at_once = pytestTest(wholeStreamsAndCallsAtOnce, HANG)
test_slow_consumer_holds_producer = pytestTest(slowConsumerHoldsProducer, HANG)
test_break_sends_cancel = pytestTest(breakSendsCancel, HANG)
test_producer_error_after_items = pytestTest(producerErrorAfterItems, HANG)
test_typed_items_refused = pytestTest(typedItemsRefused, HANG)
test_connection_loss_ends_stream = pytestTest(connectionLossEndsStream, HANG)
test_stream_argument_refused = pytestTest(streamArgumentRefused, HANG)
test_silent_server_ends_stream = pytestTest(silentServerEndsStream, HANG)
test_stalled_stream_times_out = pytestTest(stalledStreamTimesOut, 2 * HANG)
test_stalled_stream_deadline = pytestTest(stalledStreamDeadline, 2 * HANG)


async def clientStreams(reactor: Any) -> None:
    """An async generator as an argument: sent under the server's credit, 10^4 items; stopped early, it is closed."""
    _, port = await servingStreams(reactor)
    closed: list[int] = []

    async def numbers(n: int) -> Any:
        try:
            for i in range(n):
                yield i
        finally:
            closed.append(n)

    async def broken() -> Any:
        yield 1
        raise ValueError("the source broke")

    async def work(connection: AsyncConnection) -> tuple[Any, Any, BaseException | None]:
        counted = await connection.root.callRemote("total", numbers(10_000))
        first = await connection.root.callRemote("firstThree", numbers(1_000_000))
        try:
            await connection.root.callRemote("total", broken())
        except Exception as error:
            return counted, first, error
        return counted, first, None

    try:
        counted, first, error = await deferToThread(inLoop, port, work)
        assert counted == [10_000, sum(range(10_000))]
        assert first == [0, 1, 2]
        assert sorted(closed) == [10_000, 1_000_000]  # the server's CANCEL closed the second one
        assert error is not None and "the source broke" in str(error), error
    finally:
        await stopServing(port)


class AsyncClientStreamTests(TestCase):
    """Streams sent by the asyncio client."""

    timeout = HANG + 30
    test_client_streams = trialTest(clientStreams, HANG)


test_client_streams = pytestTest(clientStreams, HANG)
