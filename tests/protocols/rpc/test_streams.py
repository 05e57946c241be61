"""Object streams in calls (L{protocols.rpc._streams}): results, arguments, both; credit, cancelling, typing."""

from __future__ import annotations

import array
import gc
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from framing import Encoder, Limits, Registry, Violation
from framing.rpc._errors import CallTimedOut, DeadlineExceeded
from framing.rpc._streams import (
    CREDIT,
    END,
    HELD_ACCOUNT,
    ITEM,
    ITEM_FRAMING_BYTES,
    ByteCreditExceeded,
    EndCountMismatch,
    FlowMessage,
    ItemCreditExceeded,
    addFlowTypes,
    leastItemLength,
)
from framing.rpc._streamtable import PRODUCER_BYTES, PRODUCERS_ACCOUNT
from framing.rpc._wire import CALL, Message, MessageSlicer
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE
from protocols.interop import InteropService
from protocols.rpc import (
    Broker,
    CallLimits,
    NoSuchMethod,
    Referenceable,
    RemoteError,
    RemoteInterface,
    RemoteViolation,
    remote,
)
from protocols.rpc._context import callContext
from protocols.rpc._streams import (
    ObjectStream,
    ObjectStreams,
    StreamOptions,
    StreamReader,
)
from protocols.testing import BrokerPair, brokerPair
from tests.protocols.helpers import tracedBytesPer

WINDOW = StreamOptions().window


class Counter:
    """What a producer did: items it made, and whether its C{finally} ran."""

    def __init__(self) -> None:
        self.produced = 0
        self.closed = False


class Service(Referenceable):
    """Streams out, in, and both ways."""

    def __init__(self) -> None:
        self.counter = Counter()
        self.received: list[Any] = []
        self.block: Deferred[None] | None = None
        self.source: Any = None

    @remote
    async def count(self, n: int) -> AsyncIterator[int]:
        try:
            for i in range(n):
                if self.block is not None and i == 300:
                    await self.block  # a producer that waits (on a Deferred) mid-stream
                self.counter.produced += 1
                yield i
        finally:
            self.counter.closed = True

    @remote
    def numbers(self, n: int) -> Iterator[int]:
        # A plain generator as a result: sent as a stream too.
        return iter(_counted(self.counter, n))

    @remote
    async def failing(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i
        raise ValueError("the producer broke")

    @remote
    async def typedBadly(self) -> AsyncIterator[int]:
        for i in range(30):
            yield "seventeen" if i == 17 else i  # type: ignore[misc]

    @remote
    def untyped(self) -> Any:
        return ObjectStream(["x" if i == 17 else i for i in range(30)])

    @remote
    def echo(self, items: AsyncIterator[int]) -> AsyncIterator[int]:
        async def doubled() -> AsyncIterator[int]:
            async for item in items:
                yield item * 2

        return doubled()

    @remote
    async def total(self, items: AsyncIterator[int]) -> int:
        total = 0
        async for item in items:
            self.received.append(item)
            total += item
        return total

    @remote
    async def firstThree(self, items: AsyncIterator[int]) -> list[int]:
        taken = []
        async for item in items:
            taken.append(item)
            if len(taken) == 3:
                break
        return taken

    @remote
    async def padded(self, n: int) -> AsyncIterator[bytes]:
        for _ in range(n):
            self.counter.produced += 1
            yield bytes(100)

    @remote
    def relay(self, items: AsyncIterator[int]) -> AsyncIterator[int]:
        # A received stream sent on as the result, item by item.
        return items

    @remote
    async def idle(self) -> AsyncIterator[bytes]:
        # A producer that never yields: a test speaks for it with raw bytes.
        await Deferred()
        yield b""

    @remote
    async def mixed(self, n: int) -> AsyncIterator[Any]:
        # Items whose encoding is longer than their length in characters, nested, of every size.
        for i in range(n):
            self.counter.produced += 1
            yield {
                "text": "\u00e9\u4e2d" * (i % 50),
                "nested": [[i, -i, 2.5, None], ("x" * (i % 7),)],
                "raw": bytes(i % 300),
            }

    @remote
    def tracked(self) -> AsyncIterator[int]:
        # An async generator the test can look at (closed or not).
        self.source = _ticks()
        return self.source

    @remote
    def relayLoose(self, items: AsyncIterator[int]) -> AsyncIterator[Any]:
        # Sent on under a looser result type: the argument's check still holds.
        return items

    @remote
    def relayNarrow(self, items: AsyncIterator[Any]) -> AsyncIterator[int]:
        # Sent on under a stricter result type: the sender checks each item against it.
        return items

    @remote
    def ping(self) -> str:
        return "pong"


async def _ticks() -> AsyncIterator[int]:
    for i in range(100_000):
        yield i


def _counted(counter: Counter, n: int) -> Iterator[int]:
    try:
        for i in range(n):
            counter.produced += 1
            yield i
    finally:
        counter.closed = True


class IService(RemoteInterface, Protocol, name="test.streams.IService"):
    def untyped(self) -> Deferred[AsyncIterator[int]]: ...


def run(pair: BrokerPair, coroutine: Any) -> Deferred[Any]:
    """Start C{coroutine} as a Deferred and move everything that can move."""
    done: Deferred[Any] = Deferred.fromCoroutine(coroutine)
    pair.flush()
    return done


def streamsOf(broker: Any) -> ObjectStreams:
    streams: ObjectStreams = broker.extensions[0]
    return streams


class ServerStreamTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.service = Service()
        self.pair = brokerPair(self.service)

    def test_items(self) -> None:
        """Every item of an async generator's result arrives, in order, then the stream ends."""

        async def read() -> list[int]:
            stream = await self.pair.root.callRemote("count", 1000)
            return [item async for item in stream]

        self.assertEqual(self.successResultOf(run(self.pair, read())), list(range(1000)))
        self.assertTrue(self.service.counter.closed)
        self.assertEqual(streamsOf(self.pair.server).streamCount, 0)
        self.assertEqual(streamsOf(self.pair.client).streamCount, 0)

    def test_consumerHeldByNothingElse(self) -> None:
        """
        A consumer nobody holds (its Deferred dropped) waiting for the next
        item is kept by the connection: a garbage collection meanwhile does
        not end it.
        """
        counted: list[int] = []

        async def read() -> None:
            stream = await self.pair.root.callRemote("count", 2000)
            counted.append(await stream.forEach(lambda item: None))

        Deferred.fromCoroutine(read())
        self.pair.memory.pump()
        gc.collect()
        self.pair.flush()
        self.assertEqual(counted, [2000])

    def test_connectionLostWhileAwaited(self) -> None:
        """A consumer waiting (held by nothing else) when the connection is lost gets the reason."""
        outcomes: list[Any] = []

        async def read() -> None:
            stream = await self.pair.root.callRemote("count", 100_000)
            try:
                await stream.forEach(lambda item: None)
            except Exception as error:
                outcomes.append(error)

        self.service.block = Deferred()
        Deferred.fromCoroutine(read())
        self.pair.flush()
        gc.collect()
        self.pair.client.disconnect()
        self.pair.flush()
        self.assertEqual(len(outcomes), 1)
        self.assertIsInstance(outcomes[0], ConnectionDone)

    def test_producerThatWaits(self) -> None:
        """A producer awaiting a Deferred mid-stream is resumed when it fires, and the stream goes on to its end."""
        self.service.block = Deferred()
        stream = self.successResultOf(run(self.pair, self._call("count", 1000)))
        count = stream.forEach(lambda item: None)
        self.pair.flush()
        self.assertNoResult(count)
        self.assertEqual(self.service.counter.produced, 300)
        self.service.block.callback(None)
        self.pair.flush()
        self.assertEqual(self.successResultOf(count), 1000)

    def test_cancelWhileProducerWaits(self) -> None:
        """Cancelling while the producer awaits cancels that await and closes it."""
        self.service.block = Deferred()
        stream = self.successResultOf(run(self.pair, self._call("count", 1000)))
        count = stream.forEach(lambda item: None)
        self.pair.flush()
        stream.cancel()
        self.pair.flush()
        self.failureResultOf(count, CancelledError)
        self.assertTrue(self.service.counter.closed)
        # Fired by nobody but the cancellation of the producer's await.
        self.assertTrue(self.service.block.called)
        self.assertEqual(self.service.counter.produced, 300)

    def test_plainGenerator(self) -> None:
        """A generator returned by a remote method is a stream too."""

        async def read() -> list[int]:
            stream = await self.pair.root.callRemote("numbers", 10)
            return [item async for item in stream]

        self.assertEqual(self.successResultOf(run(self.pair, read())), list(range(10)))

    def test_slowConsumerHoldsWindow(self) -> None:
        """
        A stream of 10^5 items read one at a time, with everything moved in
        between: the producer is never more than a window ahead, the reader
        holds at most a window, and the bytes in transit stay below the byte
        window; then the rest is read to the end.
        """
        total = 100_000
        stream: StreamReader[int] = self.successResultOf(run(self.pair, self._call("count", total)))
        counter = self.service.counter
        for taken in range(1, 200):
            self.assertEqual(self.successResultOf(stream.next()), taken - 1)
            self.pair.flush()
            self.assertLessEqual(counter.produced, taken + WINDOW)
            self.assertLessEqual(stream.window.buffered, WINDOW)
        # The producer was kept to the window the whole time, not just at the end.
        self.assertGreaterEqual(counter.produced, 199)
        count = stream.forEach(lambda item: None)
        self.pair.flush()
        self.assertEqual(self.successResultOf(count), total - 199)
        self.assertEqual(counter.produced, total)

    def test_slowConsumerMemoryBound(self) -> None:
        """
        The memory side of the window: while a consumer reads a stream of 10^5
        items of 100 bytes (10 MB if the producer ran free) one item at a
        time, the process's traced allocations grow by less than 2 MiB.
        """

        tracemalloc.start()
        try:
            stream: StreamReader[bytes] = self.successResultOf(run(self.pair, self._call("padded", 100_000)))
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            for _ in range(300):
                self.assertEqual(len(self.successResultOf(stream.next())), 100)
                self.pair.flush()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        self.assertLessEqual(self.service.counter.produced, 300 + WINDOW)
        self.assertLess(peak - base, 2 * 1024 * 1024)

    def test_unreadStreamDoesNotBlockCalls(self) -> None:
        """A stream nobody reads takes its window and no more; a plain call on the connection is answered."""
        stream = self.successResultOf(run(self.pair, self._call("count", 100_000)))
        answer = self.pair.root.callRemote("ping")
        self.pair.flush()
        self.assertEqual(self.successResultOf(answer), "pong")
        self.assertEqual(self.service.counter.produced, WINDOW)
        self.assertEqual(stream.window.buffered, WINDOW)

    def test_breakStopsProducer(self) -> None:
        """Breaking out of C{async for} (the reader dropped) stops the producer within a window and runs its aclose."""

        async def readSome() -> list[int]:
            taken = []
            async for item in await self.pair.root.callRemote("count", 100_000):
                taken.append(item)
                if len(taken) == 10:
                    break
            return taken

        self.assertEqual(self.successResultOf(run(self.pair, readSome())), list(range(10)))
        self.pair.flush()
        self.assertTrue(self.service.counter.closed)
        self.assertLessEqual(self.service.counter.produced, 10 + WINDOW)
        self.assertEqual(streamsOf(self.pair.server).streamCount, 0)

    def test_cancel(self) -> None:
        """L{StreamReader.cancel} stops the producer; a pending next fails with CancelledError."""
        stream = self.successResultOf(run(self.pair, self._call("count", 100_000)))
        for _ in range(WINDOW):
            self.successResultOf(stream.next())
        waiting = stream.next()
        stream.cancel()
        self.failureResultOf(waiting, CancelledError)
        self.pair.flush()
        self.assertTrue(self.service.counter.closed)
        self.assertLessEqual(self.service.counter.produced, 2 * WINDOW)

    def test_producerError(self) -> None:
        """A producer raising after 5 items: the consumer gets the 5 items, then the error."""
        stream = self.successResultOf(run(self.pair, self._call("failing", 5)))
        items = [self.successResultOf(stream.next()) for _ in range(5)]
        self.assertEqual(items, [0, 1, 2, 3, 4])
        error = self.failureResultOf(stream.next(), RemoteError).value
        self.assertIn("ValueError", error.remoteType)
        self.assertIn("the producer broke", str(error))

    def test_connectionLost(self) -> None:
        """A lost connection ends the reader with the reason (after what it holds) and closes the producer."""
        stream = self.successResultOf(run(self.pair, self._call("count", 100_000)))
        self.pair.client.disconnect()
        self.pair.flush()
        for _ in range(WINDOW):
            self.successResultOf(stream.next())
        self.failureResultOf(stream.next(), ConnectionDone)
        self.assertTrue(self.service.counter.closed)

    def test_drainWaitsForStreams(self) -> None:
        """
        A server's GOAWAY while the client reads a stream: the client closes
        the connection only once the stream is over (its call was answered
        long before), so every item arrives.
        """
        stream = self.successResultOf(run(self.pair, self._call("count", 2000)))
        lost = self.pair.client.whenDisconnected()
        self.pair.server.drain.goAway(grace=60)
        taken = 0
        for _ in range(1000):
            self.pair.flush()
            self.pair.clock.advance(0.01)
            self.assertNoResult(lost)
            self.successResultOf(stream.next())
            taken += 1
        count = stream.forEach(lambda item: None)
        self.pair.flush()
        self.assertEqual(self.successResultOf(count), 1000)
        self.pair.clock.advance(0.01)
        self.pair.flush()
        self.assertIsInstance(self.successResultOf(lost), ConnectionDone)

    def test_forEachWaitsForCallback(self) -> None:
        """forEach takes the next item only once the callback's Deferred fired."""
        stream = self.successResultOf(run(self.pair, self._call("count", 3)))
        seen: list[int] = []
        gates: list[Deferred[None]] = []

        def slow(item: int) -> Deferred[None]:
            seen.append(item)
            gates.append(Deferred())
            return gates[-1]

        count = stream.forEach(slow)
        self.assertEqual(seen, [0])
        gates[0].callback(None)
        self.assertEqual(seen, [0, 1])
        gates[1].callback(None)
        gates[2].callback(None)
        self.assertEqual(self.successResultOf(count), 3)

    def _call(self, name: str, *args: Any) -> Any:
        async def call() -> Any:
            return await self.pair.root.callRemote(name, *args)

        return call()


class StalledStreamTests(SynchronousTestCase):
    """A consumer's wait for the next item of a stalled stream ends at its bound, the stream cancelled."""

    def setUp(self) -> None:
        self.service = Service()
        self.service.block = Deferred()  # the producer stalls after 300 items
        self.pair = brokerPair(self.service)
        self.reasons: list[BaseException] = []

    def readPast(self, first: int) -> Deferred[None]:
        async def read() -> None:
            stream = await self.pair.root.callRemote("count", 1000)
            for _ in range(first):
                await stream.next()
            try:
                await stream.next()
            except Exception as error:
                self.reasons.append(error)

        return run(self.pair, read())

    def test_clientCallTimeout(self) -> None:
        """A client's callTimeout bounds each item's wait (CallTimedOut); the producer is told to stop."""
        self.pair.client.callLimits = CallLimits(callTimeout=2.0)
        self.pair.client.connection.sendBackPressure = False  # a client's connection, as rpc.connect makes
        done = self.readPast(300)
        self.assertEqual(self.reasons, [])
        self.pair.clock.advance(1.9)
        self.pair.flush()
        self.assertEqual(self.reasons, [])
        self.pair.clock.advance(0.2)
        self.pair.flush()
        self.successResultOf(done)
        self.assertEqual([type(reason) for reason in self.reasons], [CallTimedOut])
        self.assertTrue(self.service.counter.closed)

    def test_deadline(self) -> None:
        """The enclosing callContext's deadline bounds the wait too (DeadlineExceeded), on any connection."""

        async def read() -> None:
            stream = await self.pair.root.callRemote("count", 1000)
            with callContext(timeout=5.0, clock=self.pair.clock):
                for _ in range(300):
                    await stream.next()
                try:
                    await stream.next()
                except Exception as error:
                    self.reasons.append(error)

        done = run(self.pair, read())
        self.pair.clock.advance(5.1)
        self.pair.flush()
        self.successResultOf(done)
        self.assertEqual([type(reason) for reason in self.reasons], [DeadlineExceeded])

    def test_serverWaitsForPace(self) -> None:
        """A server's callTimeout (its calls to clients) does not bound the pace of a stream it reads."""
        self.assertIsNotNone(self.pair.server.callLimits.callTimeout)
        self.pair.client.callLimits = self.pair.server.callLimits
        done = self.readPast(300)
        self.pair.clock.advance(120)
        self.pair.flush()
        self.assertNoResult(done)
        self.service.block.callback(None)
        self.pair.flush()
        self.assertEqual(self.reasons, [])


class TypedStreamTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.service = Service()
        self.pair = brokerPair(self.service)

    def test_senderRefusesItem(self) -> None:
        """The server refuses its own item 17 against AsyncIterator[int]: 17 items, then the violation at result[17]."""
        stream = self.successResultOf(run(self.pair, _call(self.pair.root.callRemote, "typedBadly")))
        self.assertEqual([self.successResultOf(stream.next()) for _ in range(17)], list(range(17)))
        error = self.failureResultOf(stream.next(), RemoteViolation).value
        self.assertEqual(error.where, "result[17]")

    def test_receiverRefusesItem(self) -> None:
        """A typed proxy checks each item: an unchecked server's item 17 is refused at result[17], then cancelled."""
        proxy = self.pair.root.typed(IService)
        stream = self.successResultOf(run(self.pair, _call(proxy.untyped)))
        self.assertEqual([self.successResultOf(stream.next()) for _ in range(17)], list(range(17)))
        error = self.failureResultOf(stream.next(), Violation).value
        self.assertEqual(error.where, "result[17]")
        self.failureResultOf(stream.next(), Violation)
        self.pair.flush()
        self.assertEqual(streamsOf(self.pair.client).streamCount, 0)

    def test_argumentItemRefused(self) -> None:
        """The server checks a client stream's items against its hint: item 5 refused at args[0][5]."""
        bad = (("five" if i == 5 else i) for i in range(10))
        answer = self.pair.root.callRemote("total", bad)
        self.pair.flush()
        error = self.failureResultOf(answer, RemoteViolation).value
        self.assertEqual(error.where, "args[0][5]")
        self.assertEqual(self.service.received, [0, 1, 2, 3, 4])

    def test_refusedCallClosesItsStream(self) -> None:
        """A call refused before its arguments were read (no such method) closes the stream it carried, after at most
        the window its producer may send before any credit."""
        counter = Counter()
        answer = self.pair.root.callRemote("noSuchMethod", _counted(counter, 100_000))
        self.pair.flush()
        self.failureResultOf(answer, NoSuchMethod)
        self.assertTrue(counter.closed)
        self.assertLessEqual(counter.produced, WINDOW)
        self.assertEqual(streamsOf(self.pair.client).streamCount, 0)

    def test_notAStream(self) -> None:
        """A list where the hint says AsyncIterator[int] is refused before the method runs."""
        answer = self.pair.root.callRemote("total", [1, 2, 3])
        self.pair.flush()
        self.assertEqual(self.failureResultOf(answer, RemoteViolation).value.where, "args[0]")


class ClientStreamTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.service = Service()
        self.pair = brokerPair(self.service)

    def test_generatorArgument(self) -> None:
        """A plain generator as an argument is read by the server as a stream."""
        answer = self.pair.root.callRemote("total", (i for i in range(1000)))
        self.pair.flush()
        self.assertEqual(self.successResultOf(answer), sum(range(1000)))

    def test_asyncGeneratorArgument(self) -> None:
        """An async generator as an argument, likewise."""

        async def source() -> AsyncIterator[int]:
            for i in range(100):
                yield i

        answer = self.pair.root.callRemote("total", source())
        self.pair.flush()
        self.assertEqual(self.successResultOf(answer), sum(range(100)))

    def test_serverStopsReading(self) -> None:
        """The server takes three items and returns: the client's producer is closed within a window."""
        counter = Counter()
        answer = self.pair.root.callRemote("firstThree", _counted(counter, 100_000))
        self.pair.flush()
        self.assertEqual(self.successResultOf(answer), [0, 1, 2])
        self.assertTrue(counter.closed)
        self.assertLessEqual(counter.produced, 3 + WINDOW)
        self.assertEqual(streamsOf(self.pair.client).streamCount, 0)

    def test_bidirectionalEcho(self) -> None:
        """10^4 items out and back through one call, each direction under its own credit."""
        total = 10_000

        async def echo() -> list[int]:
            stream = await self.pair.root.callRemote("echo", (i for i in range(total)))
            return [item async for item in stream]

        self.assertEqual(self.successResultOf(run(self.pair, echo())), [2 * i for i in range(total)])
        self.assertEqual(streamsOf(self.pair.server).streamCount, 0)
        self.assertEqual(streamsOf(self.pair.client).streamCount, 0)


class ByteWindowTests(SynchronousTestCase):
    def test_byteWindowBoundsItemsInFlight(self) -> None:
        """
        A receiver with a byte window of 2 KiB and room for 1,000 items: items
        of about 100 bytes are never more than the byte window (plus one
        ITEM) ahead of the consumer, whatever the item window allows.
        """
        from twisted.internet.task import Clock

        from protocols.rpc import Broker

        clock = Clock()
        service = Service()
        server = Broker(service, clock=clock)
        client = Broker(clock=clock, extensions=[ObjectStreams(StreamOptions(window=1000, windowBytes=2048))])
        pair = BrokerPair(server, client, clock)
        stream = self.successResultOf(run(pair, _call(pair.root.callRemote, "padded", 5000)))
        for taken in range(1, 300):
            self.assertEqual(len(self.successResultOf(stream.next())), 100)
            pair.flush()
            inFlight = service.counter.produced - taken
            self.assertLessEqual(inFlight * 100, 2048 + 2 * 100 * 20)
        self.assertGreater(service.counter.produced, 299)


class ReceiverByteBoundTests(SynchronousTestCase):
    """The receiver holds the sender to its byte window (section 14.3), not the sender alone."""

    def _pair(self, windowBytes: int) -> tuple[BrokerPair, Service]:
        from twisted.internet.task import Clock

        from protocols.rpc import Broker

        clock = Clock()
        service = Service()
        server = Broker(service, clock=clock)
        client = Broker(clock=clock, extensions=[ObjectStreams(StreamOptions(window=256, windowBytes=windowBytes))])
        return BrokerPair(server, client, clock), service

    def test_hostileSenderOverByteWindow(self) -> None:
        """
        A sender that ignores the byte window (raw ITEMs of 2,000 bytes each
        written on the server's transport, within the item window): the
        receiver holds no more than the byte window plus one ITEM, then
        drops the connection (stream-credit-exceeded).
        """
        pair, _ = self._pair(windowBytes=4096)
        stream = self.successResultOf(run(pair, _call(pair.root.callRemote, "idle")))
        lost = pair.client.whenDisconnected()
        encoder = Encoder(_flowRegistry())
        raw = b"".join(encoder.encode(FlowMessage((ITEM, stream.streamId, bytes(2000)))) for _ in range(WINDOW))
        pair.memory.serverTransport.write(raw)
        pair.flush()
        error = self.successResultOf(lost)
        self.assertIsInstance(error, ByteCreditExceeded)
        self.assertTrue(str(error).startswith("stream-credit-exceeded: "))
        # 4,096 bytes of window: two ITEMs fill it, the third is the one ITEM past it, the fourth breaks the rule.
        self.assertEqual(stream.window.buffered, 3)
        self.assertLessEqual(stream.window.bytesInFlight, 4096 + 2000 + ITEM_FRAMING_BYTES + 3)

    def test_countNeverAboveEncoding(self) -> None:
        """
        The receiver's count of an ITEM is never more than its encoded
        length, whatever its items (numbers alone, strings alone, mixed,
        nested, non-ASCII, subclasses of the built-in types), and is exact
        for an ITEM of small ints.
        """
        from framing.rpc._streams import leastItemLength

        class Text(str):
            pass

        samples: list[tuple[Any, ...]] = [
            tuple(range(10)),
            tuple(range(100_000, 100_128)),
            (1.5, None, True, False, -7, 2**70),
            ("a", "\u00e9" * 40, "\U0001f600" * 3, ""),
            (b"", b"x" * 300),
            ([1, [2, [3, ["deep"]]]], {"k": (1, 2), "\u4e2d": {"x": b"yy"}}, {1, 2}, frozenset({"a"})),
            (bytearray(b"abc"), Text("sub"), "plain", 3),
        ]
        encoder = Encoder(_flowRegistry())
        for items in samples:
            message = FlowMessage((ITEM, 1, *items))
            self.assertLessEqual(leastItemLength(message), len(encoder.encode(message)), items)
        small = FlowMessage((ITEM, 1, *range(10)))
        self.assertEqual(leastItemLength(small), len(encoder.encode(small)))

    def test_honestSenderNeverTrips(self) -> None:
        """
        An honest sender's stream of items of many sizes and shapes (text
        whose UTF-8 is longer than its characters, nested containers, byte
        strings) under a small byte window arrives whole: the receiver's
        count never exceeds the sender's.
        """
        pair, service = self._pair(windowBytes=1500)
        total = 2000

        async def read() -> int:
            stream = await pair.root.callRemote("mixed", total)
            count: int = await stream.forEach(lambda item: None)
            return count

        self.assertEqual(self.successResultOf(run(pair, read())), total)
        self.assertNoResult(pair.client.whenDisconnected())
        self.assertEqual(service.counter.produced, total)


class _OldPeerStreams(ObjectStreams):
    """A peer from before object streams: its registry knows neither the announcement nor the flow messages."""

    def install(self, broker: Any, registry: Any) -> None:
        import weakref

        self._broker = weakref.ref(broker)


class OldPeerTests(SynchronousTestCase):
    """A stream announced to a peer that cannot take it is closed by its sender (section 14.6)."""

    def _pair(self, service: Service) -> BrokerPair:
        from twisted.internet.task import Clock

        from protocols.rpc import Broker

        clock = Clock()
        return BrokerPair(Broker(service, clock=clock), Broker(clock=clock, extensions=[_OldPeerStreams()]), clock)

    def test_answerRefusedByOldPeer(self) -> None:
        """
        An old peer refuses the ANSWER announcing a stream (its call fails,
        unknown-type) and grants no credit: when the PONG of the PING that
        followed the ANSWER comes back, the server closes the producer, which
        made nothing, and forgets the stream; the connection stays up.
        """
        service = Service()
        pair = self._pair(service)
        answer = pair.root.callRemote("tracked")
        pair.flush()
        self.assertEqual(self.failureResultOf(answer, Violation).value.code, "unknown-type")
        self.assertIsNone(service.source.ag_frame)  # closed (never started)
        self.assertEqual(streamsOf(pair.server).streamCount, 0)
        self.assertNoResult(pair.client.whenDisconnected())
        ping = pair.root.callRemote("ping")
        pair.flush()
        self.assertEqual(self.successResultOf(ping), "pong")

    def test_takenStreamOutlivesPong(self) -> None:
        """A peer that took the stream granted credit before its PONG: the stream stays, however slow its reader."""
        service = Service()
        pair = brokerPair(service)
        stream = self.successResultOf(run(pair, _call(pair.root.callRemote, "count", 1000)))
        pair.flush()
        self.assertGreaterEqual(pair.server.connection.pings.sent, 1)
        self.assertFalse(service.counter.closed)
        self.assertEqual(streamsOf(pair.server).streamCount, 1)
        count = stream.forEach(lambda item: None)
        pair.flush()
        self.assertEqual(self.successResultOf(count), 1000)

    def test_creditHeldWhileReadingPaused(self) -> None:
        """
        The server's reading pauses just as the PONG arrives, so the CREDIT
        read with it is held undelivered: the stream is not judged untaken
        while it is held, and goes on once reading resumes.
        """
        service = Service()
        pair = brokerPair(service)
        connection = pair.server.connection
        original = connection.pings.controlEvents

        def pausing(events: list[Any]) -> Any:
            # As a transport pausing reading (its ReadGate) at that moment would.
            connection.inbound.paused = True
            connection.pings.controlEvents = original
            return original(events)

        connection.pings.controlEvents = pausing
        answer = pair.root.callRemote("tracked")
        pair.flush()
        stream = self.successResultOf(answer)
        self.assertTrue(connection.inbound.held)
        pair.clock.advance(1)
        pair.flush()
        self.assertIsNotNone(service.source.ag_frame)
        self.assertEqual(streamsOf(pair.server).streamCount, 1)
        connection.inbound.readingChanged(False)
        pair.flush()
        pair.clock.advance(1)
        taken = [self.successResultOf(stream.next()) for _ in range(WINDOW)]
        self.assertEqual(taken, list(range(WINDOW)))
        stream.cancel()
        pair.flush()


class RelayTests(SynchronousTestCase):
    def test_receivedStreamSentOn(self) -> None:
        """A stream a method received, returned as its result: the caller reads the items it sent."""
        pair = brokerPair(Service())

        async def relay() -> list[int]:
            stream = await pair.root.callRemote("relay", (i for i in range(3000)))
            return [item async for item in stream]

        self.assertEqual(self.successResultOf(run(pair, relay())), list(range(3000)))
        self.assertEqual(streamsOf(pair.server).streamCount, 0)
        self.assertEqual(streamsOf(pair.client).streamCount, 0)

    def _relayed(self, method: str, items: list[Any]) -> tuple[list[Any], Any, Counter]:
        """Call C{method} with a stream of C{items}, read the result: items read, error, the source's counter."""
        pair = brokerPair(Service())
        counter = Counter()
        taken: list[Any] = []

        def source() -> Iterator[Any]:
            try:
                for item in items:
                    counter.produced += 1
                    yield item
            finally:
                counter.closed = True

        async def relay() -> Any:
            stream = await pair.root.callRemote(method, source())
            try:
                async for item in stream:
                    taken.append(item)
            except Exception as error:
                return error
            return None

        error = self.successResultOf(run(pair, relay()))
        pair.flush()
        self.assertEqual(streamsOf(pair.server).streamCount, 0)
        self.assertEqual(streamsOf(pair.client).streamCount, 0)
        return taken, error, counter

    def test_relayedItemRefusedAsArgument(self) -> None:
        """
        A relayed stream's bad item is refused by the relaying side as the
        argument it came in as (args[0][5]), not as its result: the caller
        reads 5 items, then that violation, and its source is closed.
        """
        taken, error, counter = self._relayed("relay", [0, 1, 2, 3, 4, "five", 6])
        self.assertEqual(taken, [0, 1, 2, 3, 4])
        self.assertIsInstance(error, RemoteViolation)
        self.assertEqual(error.where, "args[0][5]")
        self.assertTrue(counter.closed)

    def test_looserResultKeepsArgumentCheck(self) -> None:
        """Returned under a looser type (AsyncIterator[Any]), the argument's AsyncIterator[int] still refuses item 5."""
        taken, error, _ = self._relayed("relayLoose", [0, 1, 2, 3, 4, "five", 6])
        self.assertEqual(taken, [0, 1, 2, 3, 4])
        self.assertIsInstance(error, RemoteViolation)
        self.assertEqual(error.where, "args[0][5]")

    def test_stricterResultCheckedBySender(self) -> None:
        """Returned under a stricter type, each item is checked by the relaying side as its result: result[3]."""
        taken, error, counter = self._relayed("relayNarrow", [0, 1, 2, "three", 4])
        self.assertEqual(taken, [0, 1, 2])
        self.assertIsInstance(error, RemoteViolation)
        self.assertEqual(error.where, "result[3]")
        self.assertTrue(counter.closed)


class FlowControlRuleTests(SynchronousTestCase):
    def test_itemsBeyondCreditDropConnection(self) -> None:
        """A peer sending more items than granted breaks flow control: the connection is dropped."""
        pair = brokerPair(Service())
        stream = self.successResultOf(run(pair, _call(pair.root.callRemote, "count", 0)))
        self.assertIsInstance(stream, StreamReader)
        reader = _freshReader(pair)
        lost = pair.client.whenDisconnected()
        for _ in range(WINDOW + 1):
            pair.server.sendObject(FlowMessage((ITEM, reader.streamId, 1)))
        pair.flush()
        self.assertIsInstance(self.successResultOf(lost), ItemCreditExceeded)
        del reader

    def test_endCountMismatchFailsTheStream(self) -> None:
        """
        An END whose count is not the items that arrived (the ITEM messages
        counted instead) fails the stream after its items, with
        EndCountMismatch; the connection stays up.
        """
        pair = brokerPair(Service())
        self.successResultOf(run(pair, _call(pair.root.callRemote, "count", 0)))
        reader = _freshReader(pair)
        pair.server.sendObject(FlowMessage((ITEM, reader.streamId, 1, 2, 3)))
        pair.server.sendObject(FlowMessage((END, reader.streamId, 1)))
        pair.flush()
        taken = [self.successResultOf(reader.__anext__()) for _ in range(3)]
        self.assertEqual(taken, [1, 2, 3])
        self.failureResultOf(reader.__anext__(), EndCountMismatch)
        self.assertTrue(pair.client.isConnected() and pair.server.isConnected())

    def test_creditFromConsumer(self) -> None:
        """The first CREDIT grants the window, in objects and bytes."""
        pair = brokerPair(Service())
        sent: list[Any] = []
        original = pair.client.sendObject

        def record(obj: Any, outgoing: Any = None) -> None:
            sent.append(obj)
            original(obj, outgoing)

        pair.client.sendObject = record  # type: ignore[method-assign]
        stream = self.successResultOf(run(pair, _call(pair.root.callRemote, "count", 0)))
        credits = [obj for obj in sent if type(obj) is FlowMessage and obj[0] == CREDIT]
        self.assertEqual(credits, [FlowMessage((CREDIT, stream.streamId, WINDOW, StreamOptions().windowBytes))])


def _freshReader(pair: BrokerPair) -> StreamReader[Any]:
    """A reader on the client for a stream the server never really started (announced by hand)."""
    from framing.rpc._streams import Announcement

    streams = streamsOf(pair.client)
    return streams.announced(Announcement((streams.lastAnnounced + 1,)))


def _flowRegistry() -> Registry:
    """A registry that writes flow messages (what a hostile peer encodes its raw bytes with)."""
    registry = Registry(DEFAULT_REGISTRY)
    addFlowTypes(registry)
    return registry


async def _call(method: Any, *args: Any) -> Any:
    return await method(*args)


# -- every kind of item counts its bytes (the receiver's count, section 14.3) ----------------------


@dataclass
class Blob:
    """A registered user type holding a body of its own."""

    label: str
    data: bytes


def _blobRegistry() -> Registry:
    made = Registry(DEFAULT_REGISTRY)
    made.register(Blob, "test.streams.Blob")
    return made


ITEM_SIZE = 256 * 1024
"""The bytes of the body each hostile item holds: four times the byte window below."""

HOSTILE_WINDOW = 64 * 1024


def _bigItems() -> dict[str, Any]:
    """One item of each kind, each holding L{ITEM_SIZE} bytes of bodies (the text: ITEM_SIZE of UTF-8)."""
    items: dict[str, Any] = {
        "memoryview": memoryview(bytes(ITEM_SIZE)),
        "array": array.array("B", bytes(ITEM_SIZE)),
        "bytearray": bytearray(ITEM_SIZE),
        "bytes": bytes(ITEM_SIZE),
        "str": "\u00e9" * (ITEM_SIZE // 2),
        "list of bytes": [bytes(1024) for _ in range(ITEM_SIZE // 1024)],
        "registered type": Blob("b", bytes(ITEM_SIZE)),
    }
    try:
        import numpy
    except ImportError:
        pass
    else:
        items["ndarray"] = numpy.zeros(ITEM_SIZE, dtype=numpy.uint8)
    return items


def bodyBytes(item: Any) -> int:
    """The bytes of the bodies C{item} holds, measured on it (independently of the code under test)."""
    if isinstance(item, str):
        return len(item.encode("utf-8"))
    if isinstance(item, list):
        return sum(map(bodyBytes, item))
    if isinstance(item, Blob):
        return len(item.label) + len(item.data)
    return memoryview(item).nbytes


class EveryKindCountsItsBytesTests(SynchronousTestCase):
    """
    A hostile sender's ITEMs of 256 KiB items of every kind (memoryview,
    array, numpy array, bytearray, bytes, text, lists of byte strings, a
    registered type) to a receiver with a 64 KiB byte window: the receiver
    holds at most the window plus one ITEM, then drops the connection.
    Before, a memoryview, an array or a registered type counted 1 byte, so
    every item the item window allowed was held (256 of 256 KiB each).
    """

    def _hostile(self, item: Any) -> tuple[BrokerPair, StreamReader[Any], BaseException]:
        from twisted.internet.task import Clock

        from protocols.rpc import Broker

        clock = Clock()
        registry = _blobRegistry()
        server = Broker(Service(), clock=clock, registry=registry)
        options = StreamOptions(window=256, windowBytes=HOSTILE_WINDOW)
        client = Broker(clock=clock, registry=registry, extensions=[ObjectStreams(options)])
        pair = BrokerPair(server, client, clock)
        stream: StreamReader[Any] = self.successResultOf(run(pair, _call(pair.root.callRemote, "idle")))
        lost = pair.client.whenDisconnected()
        flows = Registry(registry)
        addFlowTypes(flows)
        message = Encoder(flows).encode(FlowMessage((ITEM, stream.streamId, item)))
        for _ in range(20):
            pair.memory.serverTransport.write(message)
        pair.flush()
        return pair, stream, self.successResultOf(lost)

    def test_everyKindHeldWithinByteWindow(self) -> None:
        for name, item in _bigItems().items():
            with self.subTest(name):
                _, stream, error = self._hostile(item)
                self.assertIsInstance(error, ByteCreditExceeded, name)
                held = list(stream.buffer)
                self.assertEqual(len(held), 1, name)
                self.assertLessEqual(sum(map(bodyBytes, held)), HOSTILE_WINDOW + ITEM_SIZE + 64, name)

    def test_countNeverAboveEncodingForEveryKind(self) -> None:
        """The receiver's count of an ITEM of each kind is its bodies' bytes at least, never more than its encoding."""
        registry = _blobRegistry()
        flows = Registry(registry)
        addFlowTypes(flows)
        encoder = Encoder(flows)
        for name, item in _bigItems().items():
            message = FlowMessage((ITEM, 1, item))
            counted = leastItemLength(message, registry)
            self.assertLessEqual(counted, len(encoder.encode(message)), name)
            self.assertGreaterEqual(counted, bodyBytes(item), name)

    def test_honestSenderOfEveryKindNeverTrips(self) -> None:
        """
        An honest sender's stream of items of every kind under a byte window
        smaller than one item arrives whole (the receiver's count never
        exceeds the sender's); the items held are charged to the
        connection's ledger while held, and nothing once taken.
        """
        from twisted.internet.task import Clock

        from protocols.rpc import Broker

        items = list(_bigItems().values())
        clock = Clock()
        registry = _blobRegistry()
        server = Broker(_Items(items), clock=clock, registry=registry)
        options = StreamOptions(window=256, windowBytes=HOSTILE_WINDOW)
        client = Broker(clock=clock, registry=registry, extensions=[ObjectStreams(options)])
        pair = BrokerPair(server, client, clock)
        stream: StreamReader[Any] = self.successResultOf(run(pair, _call(pair.root.callRemote, "items", 3)))
        pair.flush()
        ledger = pair.client.connection.ledger
        received = []
        for _ in range(3 * len(items)):
            held = ledger.holding(HELD_ACCOUNT)
            self.assertGreater(held, 0)
            self.assertLessEqual(held, stream.window.heldBytes)
            self.assertLessEqual(held, HOSTILE_WINDOW + 2 * ITEM_SIZE)
            received.append(self.successResultOf(stream.next()))
            pair.flush()
        self.assertEqual([type(item) for item in received], [type(item) for item in items] * 3)
        self.failureResultOf(stream.next(), StopAsyncIteration)
        self.assertEqual(ledger.holding(HELD_ACCOUNT), 0)
        self.assertNoResult(pair.client.whenDisconnected())


class _Items(Referenceable):
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    @remote
    def items(self, rounds: int) -> Any:
        return ObjectStream(self.items * rounds)


class LedgerTests(SynchronousTestCase):
    """The items a reader holds are charged to the connection's ledger, and released however the stream ends."""

    def setUp(self) -> None:
        self.service = Service()
        self.pair = brokerPair(self.service)
        self.ledger = self.pair.client.connection.ledger

    def _held(self) -> StreamReader[Any]:
        stream: StreamReader[Any] = self.successResultOf(run(self.pair, _call(self.pair.root.callRemote, "padded", 50)))
        self.pair.flush()
        self.assertEqual(stream.window.buffered, 50)
        self.assertEqual(self.ledger.holding(HELD_ACCOUNT), stream.window.heldBytes)
        self.assertGreaterEqual(stream.window.heldBytes, 50 * 100)
        return stream

    def test_chargedWhatTheyHold(self) -> None:
        """
        An item held is charged the memory it holds, not the count the byte
        window keeps: a list of 100,000 small ints (its bodies count 100 kB)
        over 3.6 MB, about 36 bytes an int; released once taken.
        """
        from twisted.internet.task import Clock

        from protocols.rpc import Broker

        clock = Clock()
        server = Broker(_Items([list(range(1000, 101_000))]), clock=clock)
        client = Broker(clock=clock, extensions=[ObjectStreams(StreamOptions(windowBytes=8 << 20))])
        pair = BrokerPair(server, client, clock)
        stream: StreamReader[Any] = self.successResultOf(run(pair, _call(pair.root.callRemote, "items", 1)))
        pair.flush()
        ledger = pair.client.connection.ledger
        self.assertEqual(stream.window.buffered, 1)
        self.assertGreaterEqual(ledger.holding(HELD_ACCOUNT), 100_000 * 36)
        self.assertEqual(len(self.successResultOf(stream.next())), 100_000)
        self.assertEqual(ledger.holding(HELD_ACCOUNT), 0)

    def test_releasedAsTaken(self) -> None:
        stream = self._held()
        self.assertEqual(self.successResultOf(stream.forEach(lambda item: None)), 50)
        self.assertEqual(self.ledger.holding(HELD_ACCOUNT), 0)

    def test_releasedOnCancel(self) -> None:
        stream = self._held()
        stream.cancel()
        self.assertEqual(self.ledger.holding(HELD_ACCOUNT), 0)

    def test_releasedWhenReaderDropped(self) -> None:
        stream = self._held()
        del stream
        gc.collect()
        self.pair.flush()
        self.pair.clock.advance(0)
        self.assertEqual(self.ledger.holding(HELD_ACCOUNT), 0)

    def test_releasedWithConnection(self) -> None:
        stream = self._held()
        self.pair.client.connection.transport.loseConnection()
        self.pair.flush()
        self.assertEqual(self.ledger.held, 0)
        self.assertEqual(len(stream.buffer), 50)  # (still the consumer's to take, then the connection's error)


class ClientSessionHeldTests(SynchronousTestCase):
    """
    The clients without Twisted (blocking and asyncio: both read streams
    through L{framing.rpc._session.ClientSession}'s ClientObjectStreams): a
    server sending ITEMs of 256 KiB items of every kind to a 64 KiB byte
    window is held to the window plus one ITEM, then the session ends.
    Before, a memoryview, array or registered type counted 1 byte: all 20 held.
    """

    def test_everyKindHeldWithinByteWindow(self) -> None:
        from framing.rpc._session import ClientSession
        from framing.rpc._streams import Announcement
        from framing.rpc._streamtable import ReceivedStream
        from framing.rpc._wire import ANSWER, Message
        from framing.wire import PREAMBLE

        from . import test_stream_vectors

        for name, item in _bigItems().items():
            with self.subTest(name):
                registry = _blobRegistry()
                session: ClientSession[str] = ClientSession("server", registry=registry)
                session.objectStreams.windowBytes = HOSTILE_WINDOW
                session.start()
                requestId, _ = session.call("waiter", 0, "watch", (), {})
                writer = Registry(test_stream_vectors.registry())
                writer.register(Blob, "test.streams.Blob")
                encoder = Encoder(writer)
                answer = encoder.encode(Message((ANSWER, requestId, Announcement((1,)))))
                settled = session.receive(PREAMBLE + answer)
                stream = settled[0][1]
                self.assertIsInstance(stream, ReceivedStream)
                message = encoder.encode(FlowMessage((ITEM, 1, item)))
                for _ in range(20):
                    if session.failure is not None:
                        break
                    session.receive(message)
                self.assertIsInstance(session.failure, ByteCreditExceeded, name)
                held = list(stream.buffer)
                self.assertEqual(len(held), 1, name)
                self.assertLessEqual(sum(map(bodyBytes, held)), HOSTILE_WINDOW + ITEM_SIZE + 64, name)


class ProducerChargeTests(SynchronousTestCase):
    """
    Producers are charged to the connection's ledger while they live
    (PRODUCER_BYTES each, at least what one holds), and a stream without
    room fails its call with resource-exhausted: a peer that calls for
    streams and never takes them holds its budget, not the server's memory
    (4,133 such producers in the interop server, uncharged).
    """

    def connect(self, limits: Limits | None = None) -> tuple[Any, StringTransport, list[bytes]]:
        server = Broker(InteropService(Clock(), self.mktemp()), clock=Clock(), limits=limits)
        transport = StringTransport()
        server.connection.makeConnection(transport)
        server.connection.dataReceived(PREAMBLE)
        registry = Registry()
        registry.add_slicer(Message, MessageSlicer())
        encoder = Encoder(registry)
        calls = [encoder.encode(Message((CALL, n + 1, 0, "count", None, 1_000_000))) for n in range(400)]
        return server, transport, calls

    def test_chargedByWhatItHolds(self) -> None:
        """Each producer waiting for credit is charged PRODUCER_BYTES, no less than it holds (tracemalloc)."""
        server, transport, calls = self.connect()

        def feed(call: bytes) -> None:
            server.connection.dataReceived(call)
            transport.clear()

        held = tracedBytesPer(feed, calls)
        streams = next(e for e in server.extensions if isinstance(e, ObjectStreams))
        self.assertEqual(len(streams.producers), len(calls))
        self.assertLessEqual(held, PRODUCER_BYTES)
        ledger = server.connection.ledger
        self.assertEqual(ledger.holding(PRODUCERS_ACCOUNT), len(calls) * PRODUCER_BYTES)
        server.connection.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(ledger.held, 0)

    def test_noRoomFailsTheCall(self) -> None:
        """Past the ledger's room a stream is not announced: its call fails with resource-exhausted; reading goes on."""
        server, transport, calls = self.connect(Limits(max_connection_memory=10 * PRODUCER_BYTES + 100))
        for call in calls[:15]:
            server.connection.dataReceived(call)
        streams = next(e for e in server.extensions if isinstance(e, ObjectStreams))
        self.assertEqual(len(streams.producers), 10)
        self.assertEqual(server.connection.ledger.holding(PRODUCERS_ACCOUNT), 10 * PRODUCER_BYTES)
        self.assertEqual(transport.value().count(b"resource-exhausted"), 5)
        self.assertFalse(transport.disconnecting)
        self.assertIsNone(server.connection.failure)
        next(iter(streams.producers.values())).cancel()  # one over: its charge is released, and another fits
        server.connection.dataReceived(calls[15])
        self.assertEqual(len(streams.producers), 10)
        self.assertEqual(transport.value().count(b"resource-exhausted"), 5)
