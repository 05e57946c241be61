"""Objects the RPC tests expose, and an in-memory connection that runs them.

Contract: L{Service} has one remote method per behaviour under test; its
L{Service.waiting} Deferreds let a test answer calls whenever (and in
whatever order) it likes, and L{Service.cancelled} records what the peer
cancelled.  L{RpcPair} joins two brokers in memory on a L{Clock}, so tests
need no reactor; L{RpcPair.flush} delivers everything, end-of-turn work
included.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import Clock

from framing import Limits, Registry
from framing.slicing._constraints import Integer, ListOf, Text, TupleOf
from protocols.rpc import Broker, CallLimits, Referenceable, RemoteReference, registerError, remote
from protocols.testing import MemoryPair, connectedPair


class NotFound(Exception):
    """A registered error: it travels as itself."""

    def __init__(self, key: str, detail: int = 0) -> None:
        super().__init__(key, detail)
        self.key = key
        self.detail = detail


registerError(NotFound, "tests.NotFound")


class Unregistered(Exception):
    """An error nobody registers: it arrives as a RemoteError."""


class Child(Referenceable):
    """A small object sent by reference."""

    def __init__(self, value: int) -> None:
        self.value = value

    @remote
    def get(self) -> int:
        return self.value

    @remote
    def add(self, amount: int) -> int:
        self.value += amount
        return self.value


class Service(Referenceable):
    """
    The root most tests expose.

    @ivar waiting: Deferreds handed out by L{later}, by key.
    @ivar cancelled: keys whose call the peer cancelled, in order.
    @ivar received: the last arguments of L{keep}.
    """

    def __init__(self) -> None:
        self.waiting: dict[Any, Deferred[Any]] = {}
        self.cancelled: list[Any] = []
        self.received: Any = None
        self.shared = Child(7)

    def hidden(self) -> str:
        return "not remote"

    @remote
    def echo(self, value: Any) -> Any:
        return value

    @remote
    def keywords(self, a: int, b: int = 2, *, c: int = 3) -> tuple[int, int, int]:
        return (a, b, c)

    @remote(args={"a": Integer(), "b": Integer(0, 10)}, result=Integer(0, 15))
    def add(self, a: int, b: int) -> int:
        return a + b

    @remote(args=TupleOf(Text(5), ListOf(Integer(0))))
    def pair(self, name: str, numbers: list[int]) -> int:
        return len(name) + sum(numbers)

    @remote(result=Text(3))
    def wordy(self, word: str) -> str:
        return word

    @remote
    def fail(self, kind: str) -> None:
        if kind == "registered":
            raise NotFound("k", 5)
        if kind == "unregistered":
            raise Unregistered("no such thing")
        raise ValueError(f"bad {kind}")

    @remote
    def later(self, key: Any) -> Deferred[Any]:
        d: Deferred[Any] = Deferred(lambda _: self.cancelled.append(key))
        self.waiting[key] = d
        return d

    @remote
    def stubborn(self, key: Any) -> Deferred[Any]:
        """Ignores cancellation: it answers whenever the test fires it."""
        d: Deferred[Any] = Deferred()
        self.waiting[key] = d
        return d

    @remote
    async def coroutine(self, key: Any) -> Any:
        try:
            return await self.later(key)
        except CancelledError:
            self.cancelled.append(("coroutine", key))
            raise

    @remote
    async def asyncFail(self) -> None:
        raise NotFound("async", 1)

    @remote
    def make(self, value: int) -> Child:
        return Child(value)

    @remote
    def many(self, count: int) -> list[Child]:
        return [Child(i) for i in range(count)]

    @remote
    def same(self) -> Child:
        return self.shared

    @remote
    def keep(self, *args: Any) -> bool:
        """Keeps its arguments; true if they all arrived as references."""
        self.received = args
        return all(isinstance(arg, RemoteReference) for arg in args)

    @remote
    def isShared(self, obj: Any) -> bool:
        return obj is self.shared

    @remote
    def callBack(self, ref: RemoteReference, amount: int) -> Deferred[Any]:
        return ref.callRemote("add", amount)

    @remote
    def unencodable(self) -> object:
        return object()


class Overriding(Service):
    """Overrides a remote method without marking it: the override is not remote."""

    def echo(self, value: Any) -> Any:
        return ("overridden", value)


class RpcPair:
    """
    A server broker exposing C{root} and a client broker, joined in memory.

    @ivar clock: the clock both brokers schedule end-of-turn work on.
    @ivar memory: the L{MemoryPair} carrying the bytes.
    @ivar root: the client's reference to C{root}.
    """

    def __init__(
        self,
        root: Referenceable,
        *,
        tracebacks: bool = False,
        serverLimits: Limits | None = None,
        clientLimits: Limits | None = None,
        clientRoot: Referenceable | None = None,
        clientRegistry: Registry | None = None,
        serverCallLimits: CallLimits | None = None,
        clientCallLimits: CallLimits | None = None,
    ) -> None:
        self.clock = Clock()
        self.server = Broker(
            root, clock=self.clock, tracebacks=tracebacks, limits=serverLimits, callLimits=serverCallLimits
        )
        self.client = Broker(
            clientRoot, clock=self.clock, limits=clientLimits, registry=clientRegistry, callLimits=clientCallLimits
        )
        self.memory: MemoryPair = connectedPair(self.server, self.client)
        self.root = self.client.rootReference()

    @property
    def clientWrites(self) -> list[bytes]:
        """Every write the client made, one entry per write."""
        return self.memory.clientTransport.writes

    @property
    def serverWrites(self) -> list[bytes]:
        """Every write the server made, one entry per write."""
        return self.memory.serverTransport.writes

    def flush(self) -> None:
        """Deliver everything, running end-of-turn work (held preambles, RELEASEs) between rounds."""
        for _ in range(1000):
            self.clock.advance(0)
            now = self.clock.seconds()
            due = any(call.getTime() <= now for call in self.clock.getDelayedCalls())
            if not self.memory.flush() and not due:
                return
        raise RuntimeError("the pair is still busy")
