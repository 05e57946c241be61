"""What the bulk tests share: a service to call, in-memory connections, sources and consumers.

Contract: L{BulkPair} joins two brokers carrying bulk (C{Broker(bulk=...)}) in memory on a L{Clock}
(hashing inline, small chunks and windows so that flow control shows in a
few kilobytes); L{MemoryNetwork} makes such connections on demand for the
file helpers and can cut them.  Nothing here needs a reactor.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IConsumer, IPushProducer
from twisted.internet.task import Clock
from zope.interface import implementer

from protocols import rpc
from protocols.bulk import BulkOptions, IncomingStream, Stream
from protocols.bulk._integrity import availableDigests, newHash
from protocols.rpc import Broker
from protocols.testing import MemoryPair, connectedPair

SMALL = BulkOptions(chunkSize=16 * 1024, window=30 * 1024, grantStep=4 * 1024, hashing="inline")
"""Options that make flow control visible with small data: 16 KiB chunks, a window under two chunks."""


def payload(size: int, seed: int = 0) -> bytes:
    """C{size} bytes that differ at every offset (so a misplaced piece shows)."""
    block = bytes((i * 7 + seed) % 251 for i in range(251))
    return (block * (size // 251 + 1))[:size]


@implementer(IConsumer)
class SlowConsumer:
    """
    An L{IConsumer} that pauses its producer after every write until the
    test calls L{drain}, as a slow disk or a slow peer would.

    @ivar received: what was written to it, in order.
    """

    def __init__(self, pauseEvery: int = 1) -> None:
        self.received: list[bytes] = []
        self.producer: Any = None
        self.pauseEvery = pauseEvery
        self.unregistered = False

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self.producer = producer

    def unregisterProducer(self) -> None:
        self.unregistered = True

    def write(self, data: bytes) -> None:
        self.received.append(data)
        if len(self.received) % self.pauseEvery == 0:
            self.producer.pauseProducing()

    def drain(self) -> None:
        """Let the producer go on."""
        self.producer.resumeProducing()

    @property
    def data(self) -> bytes:
        return b"".join(self.received)


@implementer(IPushProducer)
class PushProducer:
    """A push producer writing C{data} to a consumer in C{piece}-sized writes when the test calls L{step}."""

    def __init__(self, consumer: Any, data: bytes, piece: int) -> None:
        self.consumer = consumer
        self.data = data
        self.piece = piece
        self.offset = 0
        self.paused = False
        self.stopped = False
        self.pauses = 0

    def pauseProducing(self) -> None:
        self.paused = True
        self.pauses += 1

    def resumeProducing(self) -> None:
        self.paused = False

    def stopProducing(self) -> None:
        self.stopped = True

    def step(self) -> bool:
        """Write pieces until paused or done; return whether it is done."""
        while not self.paused and self.offset < len(self.data):
            self.consumer.write(self.data[self.offset : self.offset + self.piece])
            self.offset += self.piece
        return self.offset >= len(self.data)


class Store(rpc.Referenceable):
    """
    The service the stream tests call.

    @ivar streams: the incoming streams received, in order.
    @ivar results: what each receive fired with (a result or a Failure).
    @ivar sinks: what each named receive wrote into.
    """

    def __init__(self) -> None:
        self.streams: list[IncomingStream] = []
        self.results: list[Any] = []
        self.sinks: dict[str, Any] = {}
        self.pieces: list[bytes] = []

    @rpc.remote
    async def upload(self, stream: IncomingStream) -> str:
        """Receive into a list of pieces; answer with the verified digest (hex)."""
        self.streams.append(stream)
        result = await stream.receive(self.pieces.append)
        return result.hexdigest

    @rpc.remote
    async def uploadTo(self, path: str, stream: IncomingStream) -> int:
        """Receive into the file C{path}; answer with its size."""
        result = await stream.receive(path)
        return result.size

    @rpc.remote
    async def uploadSlow(self, key: str, stream: IncomingStream) -> int:
        """Receive into a L{SlowConsumer} kept as C{sinks[key]}; answer with the size."""
        consumer = self.sinks[key] = SlowConsumer()
        result = await stream.receive(consumer)
        return result.size

    @rpc.remote
    def keep(self, stream: IncomingStream) -> None:
        """Keep the stream without receiving it (the test receives it)."""
        self.streams.append(stream)

    @rpc.remote
    def ignore(self, stream: IncomingStream) -> None:
        """Drop the stream unread."""

    @rpc.remote
    def download(self, data: bytes) -> Stream:
        """Send C{data} back as a stream."""
        return Stream(data)

    @rpc.remote
    def downloadFile(self, path: str) -> Stream:
        """Send the file C{path} as a stream."""
        return Stream(path)

    @rpc.remote
    def ping(self) -> str:
        return "pong"


class BulkPair:
    """
    Two bulk brokers joined in memory on a L{Clock}.

    @ivar pair: the L{MemoryPair}.
    @ivar root: the client's reference to the server's root.
    """

    def __init__(
        self,
        root: rpc.Referenceable | None = None,
        options: BulkOptions = SMALL,
        maxChunk: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.clock = clock or Clock()
        self.server = Broker(root, clock=self.clock, bulk=options)
        self.client = Broker(clock=self.clock, bulk=options)
        self.pair: MemoryPair = connectedPair(self.server, self.client, maxChunk=maxChunk)
        self.root = self.client.rootReference()

    def flush(self, rounds: int = 100_000) -> None:
        """Deliver everything, end-of-turn work included, until nothing moves."""
        for _ in range(rounds):
            self.clock.advance(0)
            if not self.pair.flush() and not self._due():
                return
        raise RuntimeError("the pair is still busy")

    def _due(self) -> bool:
        """Whether a delayed call is due now (end-of-turn work; not a timeout far ahead)."""
        now = self.clock.seconds()
        return any(call.getTime() <= now for call in self.clock.getDelayedCalls())

    def pump(self, rounds: int = 1) -> None:
        """Deliver what was written, C{rounds} times (partial progress)."""
        for _ in range(rounds):
            self.clock.advance(0)
            self.pair.pump()


class MemoryNetwork:
    """
    Connections to one root made on demand (for L{protocols.bulk._files}'s
    C{connect} argument), all in memory and moved by L{run}.

    @ivar pairs: every connection made, oldest first.
    """

    def __init__(self, root: rpc.Referenceable, options: BulkOptions = SMALL, maxChunk: int | None = 4096) -> None:
        self.root = root
        self.options = options
        self.maxChunk = maxChunk
        self.clock = Clock()
        self.pairs: list[MemoryPair] = []

    def connect(self) -> Deferred[rpc.RemoteReference]:
        server = Broker(self.root, clock=self.clock, bulk=self.options)
        client = Broker(clock=self.clock, bulk=self.options)
        self.pairs.append(connectedPair(server, client, maxChunk=self.maxChunk))
        return succeed(client.rootReference())

    def live(self) -> list[MemoryPair]:
        return [pair for pair in self.pairs if pair.clientTransport.connected]

    def step(self) -> bool:
        """Deliver one round on every live connection and run due timers; return whether anything moved."""
        moved = False
        for pair in self.live():
            moved = pair.pump() or moved
        self.clock.advance(0.01)
        return moved

    def cut(self, pair: MemoryPair) -> None:
        """Drop C{pair}'s connection at once: what is in flight is lost."""
        pair.clientTransport.abortConnection()
        pair.pump()

    def run(self, done: Deferred[Any], cutAfter: Iterator[int] | None = None, rounds: int = 200_000) -> Any:
        """
        Step until C{done} fires; if C{cutAfter} is given, cut the newest
        live connection after each of its numbers of rounds in turn.
        """
        countdown = next(cutAfter, None) if cutAfter is not None else None
        for _ in range(rounds):
            if done.called:
                break
            self.step()
            live = self.live()
            if countdown is not None and live:
                # Count only rounds with a connection up: a cut must fall mid-transfer.
                countdown -= 1
                if countdown <= 0:
                    self.cut(live[-1])
                    countdown = next(cutAfter, None) if cutAfter is not None else None
        else:
            raise RuntimeError("the transfer did not finish")
        results: list[Any] = []
        done.addBoth(results.append)
        return results[0]


def writeFile(path: str | os.PathLike[str], data: bytes) -> str:
    with open(path, "wb") as file:
        file.write(data)
    return os.fspath(path)


FIRST_DIGEST = availableDigests()[0]
"""The digest two default connections choose: BLAKE3 when the blake3 package is installed, else SHA-256."""


def negotiatedHash(data: bytes = b"") -> Any:
    """A hash object (C{digest}, C{hexdigest}) of C{data} under L{FIRST_DIGEST}."""
    hasher = newHash(FIRST_DIGEST)
    hasher.update(data)
    return hasher
