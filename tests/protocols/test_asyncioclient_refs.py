"""References either way in the asyncio client (L{protocols.asyncioclient}), against the real Twisted server in-process.

The server (L{tests.protocols.clientrefs.Hub}) runs in the test's reactor on
loopback; the client runs its own asyncio loop (C{asyncio.run}) in a thread
of the reactor's pool.  Each body runs under trial and under pytest-twisted.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from framing.rpc._errors import DeadReferenceError
from framing.rpc._limits import CallLimits
from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import remote
from protocols.asyncioclient import AsyncConnection, AsyncReference, connect
from protocols.options import ClientOptions

from .clientrefs import HANG, Counter, eventually, exportCount, serving, stopServing
from .helpers import pytestTest, trialTest


class AsyncCounter(Referenceable):
    """A callback whose method is a coroutine: run as a task on the client's loop."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.threads: list[int] = []
        self.called = asyncio.Event()

    @remote
    async def add(self, amount: int) -> int:
        await asyncio.sleep(0)
        self.threads.append(threading.get_ident())
        self.value += amount
        self.called.set()
        return self.value


def inLoop(port: Any, work: Callable[[AsyncConnection], Awaitable[Any]]) -> Any:
    """Run C{work(connection)} on a new asyncio loop in this thread, connected to C{port}; its result."""

    async def main() -> Any:
        connection = await connect(
            f"127.0.0.1:{port.getHost().port}",
            options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG)),
        )
        async with connection:
            return await work(connection)

    return asyncio.run(main())


async def referenceReturnedCalledReleased(reactor: Any) -> None:
    """A returned reference is awaited; released explicitly and by being dropped, the server forgets it."""
    hub, port = await serving(reactor)
    held, released, done = threading.Event(), threading.Event(), threading.Event()

    async def work(connection: AsyncConnection) -> tuple[int, bool]:
        child = await connection.root.callRemote("make", 3)
        assert isinstance(child, AsyncReference), child
        value = await child.callRemote("add", 4)
        first, second = await connection.root.callRemote("same"), await connection.root.callRemote("same")
        assert first is second
        held.set()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, done.wait, HANG)
        done.clear()
        child.release()
        try:
            await child.callRemote("add", 1)
        except DeadReferenceError:
            refused = True
        else:
            refused = False
        del first, second
        gc.collect()
        await asyncio.sleep(0)  # (the RELEASE is sent on the loop's next turn)
        released.set()
        await loop.run_in_executor(None, done.wait, HANG)  # (connected while the server's table is looked at)
        return value, refused

    try:
        running = deferToThread(inLoop, port, work)
        await eventually(reactor, held.is_set)
        assert exportCount(hub) == 3  # the root, the child, the shared object
        done.set()
        await eventually(reactor, released.is_set)
        await eventually(reactor, lambda: list(hub.broker.references.exports) == [0])
        done.set()
        value, refused = await running
        assert value == 7 and refused
    finally:
        done.set()
        await stopServing(port)


async def callbacksOnTheLoop(reactor: Any) -> None:
    """The server calls back a plain method and a coroutine method while the client awaits; both run on its loop."""
    _, port = await serving(reactor)
    plain, coroutine = Counter(1), AsyncCounter(10)

    async def work(connection: AsyncConnection) -> tuple[Any, Any, int]:
        one = await connection.root.callRemote("callBack", plain, 2)
        two = await connection.root.callRemote("callBack", coroutine, 5)
        return one, two, threading.get_ident()

    try:
        one, two, loopThread = await deferToThread(inLoop, port, work)
        assert (one, two) == (3, 15)
        assert plain.threads == coroutine.threads == [loopThread]
    finally:
        await stopServing(port)


async def callbackErrorsTyped(reactor: Any) -> None:
    """The server's calls to the callback fail as they would on a Twisted client."""
    _, port = await serving(reactor)

    async def work(connection: AsyncConnection) -> Any:
        return await connection.root.callRemote("probe", Counter(0))

    try:
        outcomes = await deferToThread(inLoop, port, work)
        assert outcomes == [
            ("NoSuchMethod", "NoSuchMethod"),
            ("RemoteViolation", "kind-refused"),
            ("RemoteError", "ValueError"),
            ("NoSuchMethod", "NoSuchMethod"),
        ], outcomes
    finally:
        await stopServing(port)


async def calledLater(reactor: Any) -> None:
    """The server calls the callback after answering, while no call waits: served on the loop all the same."""
    _, port = await serving(reactor)
    mine = AsyncCounter(1)

    async def work(connection: AsyncConnection) -> int:
        mine.called = asyncio.Event()
        await connection.root.callRemote("keep", mine, 5, 0.05)
        await asyncio.wait_for(mine.called.wait(), HANG)
        return mine.value

    try:
        assert await deferToThread(inLoop, port, work) == 6
    finally:
        await stopServing(port)


class AsyncReferenceTests(TestCase):
    """References both ways in the asyncio client (trial runs these; pytest the twins below)."""

    timeout = HANG + 30
    test_reference_returned_called_released = trialTest(referenceReturnedCalledReleased, HANG)
    test_callbacks_on_the_loop = trialTest(callbacksOnTheLoop, HANG)
    test_callback_errors_typed = trialTest(callbackErrorsTyped, HANG)
    test_called_later = trialTest(calledLater, HANG)


test_reference_returned_called_released = pytestTest(referenceReturnedCalledReleased, HANG)
test_callbacks_on_the_loop = pytestTest(callbacksOnTheLoop, HANG)
test_callback_errors_typed = pytestTest(callbackErrorsTyped, HANG)
test_called_later = pytestTest(calledLater, HANG)
