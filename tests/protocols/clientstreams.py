"""What the tests of object streams in the clients without Twisted share: the Twisted server's producers.

The server is the real Twisted RPC server (L{protocols.rpc.serve}) on
loopback, in the test's reactor; the client under test runs in a thread of
the reactor's pool.  Each producer counts the items it made and records
whether its C{finally} ran, so that a test can assert what the server did.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

from twisted.internet.defer import Deferred

from framing.rpc._interfaces import RemoteInterface
from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import remote
from framing.rpc._streams import DEFAULT_WINDOW
from protocols.rpc import currentBroker, serve
from protocols.rpc._streams import ObjectStream

from .clientrefs import LISTEN

WINDOW = DEFAULT_WINDOW
"""Items a client's stream lets the server have in flight."""

BAD_INDEX = 17
"""Where L{Producers.untyped}'s stream holds an item that is no int."""


class Producers(Referenceable):
    """
    The server's root: methods whose results are streams of objects.

    @ivar produced: items the producers made so far.
    @ivar closed: how many producers' C{finally} ran.
    """

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.produced = 0
        self.closed = 0

    def _counted(self, n: int | None) -> Iterator[int]:
        try:
            i = 0
            while n is None or i < n:
                self.produced += 1
                yield i
                i += 1
        finally:
            self.closed += 1

    @remote
    def count(self, n: int) -> Iterator[int]:
        return self._counted(n)

    @remote
    def endless(self) -> Iterator[int]:
        return self._counted(None)

    @remote
    async def failing(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i
        raise ValueError("the producer broke")

    @remote
    async def idle(self) -> AsyncIterator[int]:
        """One item, then a wait that never ends (a consumer's next item waits for good)."""
        try:
            yield 0
            await Deferred()
            yield 1
        finally:
            self.closed += 1

    @remote
    def untyped(self) -> Any:
        return ObjectStream(["x" if i == BAD_INDEX else i for i in range(30)])

    @remote
    async def total(self, items: AsyncIterator[int]) -> list[int]:
        """The count and the sum of the items of a stream the client sends."""
        count = total = 0
        async for item in items:
            count += 1
            total += item
        return [count, total]

    @remote
    async def firstThree(self, items: AsyncIterator[int]) -> list[int]:
        """The first three items of a stream the client sends: then it stops reading (CANCEL)."""
        taken = []
        async for item in items:
            taken.append(item)
            if len(taken) == 3:
                break
        return taken

    @remote
    def made(self) -> list[int]:
        """C{[produced, closed]}."""
        return [self.produced, self.closed]

    @remote
    def drop(self) -> None:
        """Drop this connection once the answer is sent."""
        transport = currentBroker().transport
        self.reactor.callLater(0, transport.loseConnection)


class IProducers(RemoteInterface, Protocol, name="test.clientstreams.IProducers"):
    def untyped(self) -> AsyncIterator[int]: ...


async def servingStreams(reactor: Any) -> tuple[Producers, Any]:
    """A L{Producers} served on loopback: it and the listening port."""
    producers = Producers(reactor)
    port = await serve(reactor, LISTEN, producers)
    return producers, port
