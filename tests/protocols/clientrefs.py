"""What the tests of references in the clients without Twisted share: the Twisted server's root, the callback.

The server is the real Twisted RPC server (L{protocols.rpc.serve}) on
loopback, in the test's reactor; the client under test runs in a thread of
the reactor's pool (C{deferToThread}), so that it may block while the
reactor serves it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from twisted.internet.task import deferLater

from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import remote
from protocols.rpc import RemoteReference, currentBroker, serve

LISTEN = "tcp:0:interface=127.0.0.1"
HANG = 30.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""


class Child(Referenceable):
    """An object the server returns by reference."""

    def __init__(self, value: int) -> None:
        self.value = value

    @remote
    def add(self, amount: int) -> int:
        self.value += amount
        return self.value


class Hub(Referenceable):
    """
    The server's root: returns references, calls the client's callbacks.

    @ivar broker: the connection's broker, once a method ran (the tests read its export table).
    @ivar kept: the client's callback kept by L{keep}.
    """

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.broker: Any = None
        self.kept: RemoteReference | None = None
        self.shared = Child(100)

    @remote
    def make(self, value: int) -> Child:
        self.broker = currentBroker()
        return Child(value)

    @remote
    def same(self) -> Child:
        self.broker = currentBroker()
        return self.shared

    @remote
    async def callBack(self, callback: RemoteReference, amount: int) -> Any:
        """Call the client's C{callback.add(amount)} while the client waits for this answer."""
        return await callback.callRemote("add", amount)

    @remote
    async def probe(self, callback: RemoteReference) -> list[Any]:
        """Call the client's callback in every failing way; what each failed with (type name, code or remote type)."""
        outcomes: list[Any] = []
        for name, args in (("hidden", ()), ("add", ("not a number",)), ("fail", ()), ("nothing", ())):
            try:
                outcomes.append(("answered", await callback.callRemote(name, *args)))
            except Exception as error:
                outcomes.append(
                    (type(error).__name__, getattr(error, "code", None) or getattr(error, "remoteType", None))
                )
        return outcomes

    @remote
    def keep(self, callback: RemoteReference, amount: int, delay: float) -> None:
        """Keep C{callback} and call its C{add(amount)} after C{delay} seconds, this call answered at once."""
        self.kept = callback
        self.reactor.callLater(delay, callback.callRemote, "add", amount)

    @remote
    def forget(self) -> None:
        """Drop the kept callback (the server's reference dies: its RELEASE goes to the client)."""
        self.kept = None


class Counter(Referenceable):
    """The client's callback: counts, and records the thread each call ran on."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.threads: list[int] = []

    @remote
    def add(self, amount: int) -> int:
        self.threads.append(threading.get_ident())
        self.value += amount
        return self.value

    @remote
    def fail(self) -> None:
        raise ValueError("as asked")

    def hidden(self) -> str:
        return "not remote"


async def serving(reactor: Any) -> tuple[Hub, Any]:
    """A L{Hub} served on loopback: the hub and the listening port."""
    hub = Hub(reactor)
    port = await serve(reactor, LISTEN, hub)
    return hub, port


async def stopServing(port: Any) -> None:
    await port.stopListening()
    await port.factory.disconnectAll()


async def eventually(reactor: Any, condition: Callable[[], bool], seconds: float = HANG) -> None:
    """Wait, turning the reactor, until C{condition()} is true (only a hang misses C{seconds})."""
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await deferLater(reactor, 0.01)
    raise AssertionError("condition not met in time")


def exportCount(hub: Hub) -> int:
    """How many objects the server exports on the hub's connection (its root included)."""
    count: int = hub.broker.exportCount
    return count
