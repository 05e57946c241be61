"""How-to: a remote method that returns a stream of objects, one that takes one, and one that does both."""

from collections.abc import AsyncIterator
from typing import Protocol

from twisted.internet.defer import Deferred
from twisted.internet.task import react

from framing import Violation
from protocols import rpc


class IPrices(rpc.RemoteInterface, Protocol, name="howto.IPrices"):
    def ticks(self, count: int) -> Deferred[AsyncIterator[int]]: ...

    def average(self, prices: AsyncIterator[int]) -> Deferred[float]: ...

    def doubled(self, prices: AsyncIterator[int]) -> Deferred[AsyncIterator[int]]: ...


class Prices(rpc.Referenceable):
    def __init__(self) -> None:
        self.closed = 0

    @rpc.remote
    async def ticks(self, count: int) -> AsyncIterator[int]:
        # An async generator: each item goes as the caller's credit allows.
        try:
            for tick in range(count):
                yield 100 + tick
        finally:
            self.closed += 1  # runs when the caller stops early too

    @rpc.remote
    async def average(self, prices: AsyncIterator[int]) -> float:
        seen = [price async for price in prices]
        return sum(seen) / len(seen)

    @rpc.remote
    def doubled(self, prices: AsyncIterator[int]) -> AsyncIterator[int]:
        async def each() -> AsyncIterator[int]:
            async for price in prices:
                yield price * 2

        return each()

    @rpc.remote
    async def mislabelled(self) -> AsyncIterator[int]:
        yield 1
        yield "two"  # type: ignore[misc]

    @rpc.remote
    def howManyClosed(self) -> int:
        return self.closed


async def main(reactor):
    service = Prices()
    port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", service)
    root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
    prices = root.typed(IPrices)

    # A server stream, read with async for.
    print("ticks:", [tick async for tick in await prices.ticks(5)])

    # Stop early: the server's generator is closed (its finally runs).
    async for tick in await prices.ticks(1_000_000):
        if tick == 102:
            break
    await root.callRemote("howManyClosed")  # a round trip: the CANCEL, sent at the end of the turn, is there
    print("closed on the server:", await root.callRemote("howManyClosed"))

    # A client stream: pass a generator (or an async generator).
    print("average:", await root.callRemote("average", (price for price in [10, 20, 30])))

    # Both ways, and with Deferreds instead of async for.
    doubled = await root.callRemote("doubled", (price for price in range(1, 4)))
    got = []
    count = await doubled.forEach(got.append)
    print("doubled:", got, "count:", count)

    # Typed: an item its hint refuses ends the stream with a Violation naming it.
    try:
        async for _ in await root.callRemote("mislabelled"):
            pass
    except rpc.RemoteViolation as error:
        print("refused by the server:", error.where)
    except Violation as error:
        print("refused here:", error.where)

    await rpc.referenceOf(root).broker.disconnect()
    await port.stopListening()


react(main)
