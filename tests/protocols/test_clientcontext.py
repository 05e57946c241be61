"""Deadlines and metadata in the clients without Twisted (L{protocols._clientcontext}), against the real Twisted server.

The server (L{Timed}) runs in the test's reactor on loopback; the blocking
client runs in a thread of the reactor's pool, the asyncio client on a loop
of its own in such a thread (C{asyncio.run}), so either may block while the
reactor serves it.  Each body runs under trial and under pytest-twisted
(L{tests.protocols.helpers}).  What each client sends (the call context, the
CANCEL at the deadline) is checked byte for byte against scripted servers in
L{ScriptedTests}.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

import tests.protocols.test_blocking as scripted
from framing.rpc._errors import CallTimedOut, DeadlineExceeded
from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import remote
from framing.rpc._wire import ANSWER, CALL, CANCEL, NO_ANSWER, Message
from protocols import asyncioclient, blocking
from protocols._clientcontext import callContext, itemBound
from protocols.options import ClientOptions
from protocols.rpc import RemoteReference, currentCall
from protocols.rpc import callContext as callContext_twisted

from .clientrefs import HANG, Counter, eventually, stopServing
from .helpers import pytestTest, trialTest

LISTEN = "tcp:0:interface=127.0.0.1"
SHORT = 0.3
"""The deadline given to a call that cannot finish in time: it fails at SHORT, and only a hang makes it HANG."""


class Timed(Referenceable):
    """
    The server's root: reports the call context it sees, sleeps until cancelled, calls the client back.

    @ivar cancelled: how many of C{sleep}'s calls were cancelled (by the client's CANCEL or the server's own timer).
    @ivar recorded: the call context each call of C{record} (for no answer) saw.
    """

    def __init__(self) -> None:
        self.cancelled = 0
        self.recorded: list[Any] = []

    @remote
    def peek(self) -> list[Any]:
        """The time this call has left (C{None}: no deadline) and its metadata."""
        call = currentCall()
        return [call.timeRemaining(), dict(call.metadata)]

    @remote
    def record(self) -> None:
        call = currentCall()
        self.recorded.append([call.timeRemaining(), dict(call.metadata)])

    @remote
    def sleep(self) -> Deferred[None]:
        """Never answers by itself: counts its cancellation."""

        def cancelled(_: Deferred[None]) -> None:
            self.cancelled += 1

        return Deferred(cancelled)

    @remote
    async def lookBack(self, callback: RemoteReference) -> Any:
        """Call the client's C{callback.look()} with metadata of this side's own (its deadline is inherited)."""
        with callContext_twisted(metadata={"from": "server"}):
            return await callback.callRemote("look")

    @remote
    async def callBack(self, callback: RemoteReference, amount: int) -> list[Any]:
        """Call the client's C{callback.add(amount)}: made inside this method, the call carries its deadline."""
        left = currentCall().timeRemaining()
        return [await callback.callRemote("add", amount), left]


async def serving(reactor: Any) -> tuple[Timed, Any, str]:
    """A L{Timed} served on loopback: the root, the listening port and its address."""
    from protocols.rpc import serve

    root = Timed()
    port = await serve(reactor, LISTEN, root)
    return root, port, f"127.0.0.1:{port.getHost().port}"


def raised(function: Callable[[], Any]) -> BaseException | None:
    """What C{function()} raised (C{None}: nothing)."""
    try:
        function()
    except Exception as error:
        return error
    return None


# -- the blocking client ---------------------------------------------------------------------


async def blockingContextSeen(reactor: Any) -> None:
    """
    A call inside callContext carries its deadline and metadata: the method
    sees the time left (under the timeout) and the metadata; a call outside
    the block carries neither; nested blocks merge metadata.
    """
    _, port, address = await serving(reactor)
    connection = await deferToThread(blocking.connect, address, options=ClientOptions(timeout=HANG))

    def calls() -> list[Any]:
        with callContext(timeout=HANG, metadata={"request-id": "r1"}):
            inside = connection.root.callRemote("peek")
            with callContext(metadata={"user": "ada"}):
                nested = connection.root.callRemote("peek")
        return [inside, nested, connection.root.callRemote("peek")]

    try:
        (left, metadata), (nestedLeft, nestedMetadata), outside = await deferToThread(calls)
        assert 0 < left <= HANG and 0 < nestedLeft <= HANG, (left, nestedLeft)
        assert metadata == {"request-id": "r1"}, metadata
        assert nestedMetadata == {"request-id": "r1", "user": "ada"}, nestedMetadata
        assert outside == [None, {}], outside
    finally:
        connection.close()
        await stopServing(port)


async def blockingDeadlinePasses(reactor: Any) -> None:
    """
    A call whose method never answers fails with DeadlineExceeded at its
    deadline (not before), the server's method is cancelled, and the
    connection goes on; a deadline already passed sends nothing.
    """
    root, port, address = await serving(reactor)
    connection = await deferToThread(blocking.connect, address, options=ClientOptions(timeout=HANG))

    def late() -> tuple[BaseException | None, float, BaseException | None, list[Any]]:
        started = time.monotonic()
        with callContext(timeout=SHORT):
            error = raised(lambda: connection.root.callRemote("sleep"))
        took = time.monotonic() - started
        with callContext(timeout=0):
            expired = raised(lambda: connection.root.callRemote("peek"))
        return error, took, expired, connection.root.callRemote("peek")

    try:
        error, took, expired, after = await deferToThread(late)
        assert isinstance(error, DeadlineExceeded) and error.name == "sleep", error
        assert SHORT <= took < HANG, took
        assert isinstance(expired, DeadlineExceeded) and "before it was sent" in str(expired), expired
        assert after == [None, {}], after
        await eventually(reactor, lambda: root.cancelled == 1)
    finally:
        connection.close()
        await stopServing(port)


async def blockingOneWayAndCallback(reactor: Any) -> None:
    """
    A call for no answer carries its context; a server method with a
    deadline calls the client's callback (its CALL carries the deadline it
    inherited) and the callback is served.
    """
    root, port, address = await serving(reactor)
    connection = await deferToThread(blocking.connect, address, options=ClientOptions(timeout=HANG))
    mine = Counter(1)

    def calls() -> Any:
        with callContext(timeout=HANG, metadata={"request-id": "r2"}):
            connection.root.callRemoteOnly("record")
            return connection.root.callRemote("callBack", mine, 2)

    try:
        (value, left) = await deferToThread(calls)
        assert value == 3 and mine.value == 3
        assert 0 < left <= HANG, left
        await eventually(reactor, lambda: len(root.recorded) == 1)
        ((recordedLeft, recordedMetadata),) = root.recorded
        assert 0 < recordedLeft <= HANG and recordedMetadata == {"request-id": "r2"}, root.recorded
    finally:
        connection.close()
        await stopServing(port)


def assertServedInContext(seen: Any) -> None:
    """
    What a client's C{look} saw serving the server's call: its deadline and
    the server's own metadata; and what the call it made carried: the
    deadline (sent rounded up to 1 ms), no metadata.
    """
    left, metadata, (nestedLeft, nestedMetadata) = seen
    assert left is not None and 0 < left <= HANG, left
    assert metadata == {"from": "server"}, metadata
    assert nestedLeft is not None and 0 < nestedLeft <= left + 0.002, (nestedLeft, left)
    assert nestedMetadata == {}, nestedMetadata


class BlockingLooker(Referenceable):
    """A blocking client's export: what its method's currentCall gives, and what a call it makes carries."""

    root: Any = None

    @remote
    def look(self) -> list[Any]:
        call = blocking.currentCall()
        return [call.timeRemaining(), dict(call.metadata), self.root.callRemote("peek")]


async def blockingCallbackContext(reactor: Any) -> None:
    """
    The client's method serving the server's call sees that call's deadline
    and metadata (currentCall), and a call it makes carries the deadline
    (wire format 12.7) but not the metadata of the block its thread is in.
    """
    _, port, address = await serving(reactor)
    connection = await deferToThread(blocking.connect, address, options=ClientOptions(timeout=HANG))
    looker = BlockingLooker()
    looker.root = connection.root

    def calls() -> Any:
        with callContext(timeout=HANG, metadata={"request-id": "r3"}):
            return connection.root.callRemote("lookBack", looker)

    try:
        assertServedInContext(await deferToThread(calls))
        assert blocking.currentCall().deadline is None  # (outside a served call: no context)
    finally:
        connection.close()
        await stopServing(port)


# -- the asyncio client ----------------------------------------------------------------------


class AsyncLooker(Referenceable):
    """The asyncio client's twin of L{BlockingLooker}: a coroutine method, whose task keeps the context."""

    root: Any = None

    @remote
    async def look(self) -> list[Any]:
        await asyncio.sleep(0)
        call = asyncioclient.currentCall()
        return [call.timeRemaining(), dict(call.metadata), await self.root.callRemote("peek")]


async def asyncioCallbackContext(reactor: Any) -> None:
    """As L{blockingCallbackContext}, for the asyncio client's coroutine method (run as a task)."""
    _, port, address = await serving(reactor)
    looker = AsyncLooker()

    async def work(connection: asyncioclient.AsyncConnection) -> Any:
        looker.root = connection.root
        with callContext(timeout=HANG, metadata={"request-id": "r3"}):
            return await connection.root.callRemote("lookBack", looker)

    try:
        assertServedInContext(await deferToThread(inLoop, address, work))
    finally:
        await stopServing(port)


def inLoop(address: str, work: Callable[[asyncioclient.AsyncConnection], Awaitable[Any]]) -> Any:
    """Run C{work(connection)} on a new asyncio loop in this thread, connected to C{address}; its result."""

    async def main() -> Any:
        async with await asyncioclient.connect(address, options=ClientOptions(timeout=HANG)) as connection:
            return await asyncio.wait_for(work(connection), HANG)

    return asyncio.run(main())


async def asyncioContextSeen(reactor: Any) -> None:
    """
    Inside callContext the method sees the time left and the metadata, for
    awaited calls and for a task started in the block; outside, neither.
    """
    _, port, address = await serving(reactor)

    async def work(connection: asyncioclient.AsyncConnection) -> list[Any]:
        root = connection.root
        with callContext(timeout=HANG, metadata={"request-id": "r1"}):
            inside = await root.callRemote("peek")
            task = asyncio.create_task(root.callRemote("peek"))  # (the task copies the context)
        return [inside, await task, await root.callRemote("peek")]

    try:
        (left, metadata), (taskLeft, taskMetadata), outside = await deferToThread(inLoop, address, work)
        assert 0 < left <= HANG and 0 < taskLeft <= HANG, (left, taskLeft)
        assert metadata == taskMetadata == {"request-id": "r1"}, (metadata, taskMetadata)
        assert outside == [None, {}], outside
    finally:
        await stopServing(port)


async def asyncioDeadlinePasses(reactor: Any) -> None:
    """
    A call whose method never answers fails with DeadlineExceeded at its
    deadline (not before), the server's method is cancelled, the connection
    goes on; a deadline already passed sends nothing; a call for no answer
    carries its context; the client's callback is served under a deadline.
    """
    root, port, address = await serving(reactor)
    mine = Counter(1)

    async def work(connection: asyncioclient.AsyncConnection) -> list[Any]:
        outcomes: list[Any] = []
        started = time.monotonic()
        with callContext(timeout=SHORT):
            try:
                await connection.root.callRemote("sleep")
            except DeadlineExceeded as error:
                outcomes.append(error)
        outcomes.append(time.monotonic() - started)
        with callContext(timeout=0):
            try:
                await connection.root.callRemote("peek")
            except DeadlineExceeded as error:
                outcomes.append(error)
        with callContext(timeout=HANG, metadata={"request-id": "r2"}):
            await connection.root.callRemoteOnly("record")
            outcomes.append(await connection.root.callRemote("callBack", mine, 2))
        outcomes.append(await connection.root.callRemote("peek"))
        return outcomes

    try:
        late, took, expired, (value, left), after = await deferToThread(inLoop, address, work)
        assert isinstance(late, DeadlineExceeded) and late.name == "sleep", late
        assert SHORT <= took < HANG, took
        assert isinstance(expired, DeadlineExceeded) and "before it was sent" in str(expired), expired
        assert value == 3 and 0 < left <= HANG, (value, left)
        assert after == [None, {}], after
        await eventually(reactor, lambda: root.cancelled == 1 and len(root.recorded) == 1)
        assert root.recorded[0][1] == {"request-id": "r2"}, root.recorded
    finally:
        await stopServing(port)


class ClientDeadlineTests(TestCase):
    """Both clients' deadlines and metadata against the Twisted server (trial runs these; pytest the twins below)."""

    timeout = HANG + 30
    test_blocking_context_seen = trialTest(blockingContextSeen, HANG)
    test_blocking_deadline_passes = trialTest(blockingDeadlinePasses, HANG)
    test_blocking_one_way_and_callback = trialTest(blockingOneWayAndCallback, HANG)
    test_asyncio_context_seen = trialTest(asyncioContextSeen, HANG)
    test_asyncio_deadline_passes = trialTest(asyncioDeadlinePasses, HANG)
    test_blocking_callback_context = trialTest(blockingCallbackContext, HANG)
    test_asyncio_callback_context = trialTest(asyncioCallbackContext, HANG)


test_blocking_context_seen = pytestTest(blockingContextSeen, HANG)
test_blocking_deadline_passes = pytestTest(blockingDeadlinePasses, HANG)
test_blocking_one_way_and_callback = pytestTest(blockingOneWayAndCallback, HANG)
test_asyncio_context_seen = pytestTest(asyncioContextSeen, HANG)
test_asyncio_deadline_passes = pytestTest(asyncioDeadlinePasses, HANG)
test_blocking_callback_context = pytestTest(blockingCallbackContext, HANG)
test_asyncio_callback_context = pytestTest(asyncioCallbackContext, HANG)


# -- what goes on the wire, against scripted servers ---------------------------------------------


def cancelScript(seen: list[Any]) -> Callable[[scripted.ScriptedPeer], None]:
    """Keep the first CALL and what follows it (the CANCEL), answer the first late and the next call at once."""

    def script(peer: scripted.ScriptedPeer) -> None:
        first = peer.next()
        seen.extend([first, peer.next()])
        second = peer.next()
        seen.append(second)
        peer.send(Message((ANSWER, first[1], "late")))  # (the one late answer the client expects: ignored)
        peer.send(Message((ANSWER, second[1], "fresh")))
        peer.next()

    return script


class ScriptedTests(SynchronousTestCase):
    """The call context each client sends, and the CANCEL it sends at the deadline."""

    def assertSent(self, seen: list[Any]) -> None:
        first, cancel, second = seen
        # Decoded as the server's unslicer hands it on: (CALL, id, target, name, args, kwargs, ms, metadata).
        self.assertEqual(first[:6], (CALL, 1, 0, "slow", (1,), {"k": 2}))
        self.assertTrue(0 < first[6] <= SHORT * 1000, first)
        self.assertEqual(first[7], {"request-id": "r1"})
        self.assertEqual(cancel, Message((CANCEL, 1)))
        self.assertEqual(second, Message((CALL, 2, 0, "next", (), {})))

    def test_blockingSendsContextAndCancel(self) -> None:
        """The blocking client's CALL carries the time left and the metadata; at the deadline, a CANCEL."""
        seen: list[Any] = []
        server = scripted.ScriptedServer(self, cancelScript(seen))
        with blocking.connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
            with callContext(timeout=SHORT, metadata={"request-id": "r1"}):
                with self.assertRaises(DeadlineExceeded):
                    connection.root.callRemote("slow", 1, k=2)
            self.assertEqual(connection.root.callRemote("next"), "fresh")
        self.assertTrue(server.done.wait(HANG))
        self.assertSent(seen)

    def test_asyncioSendsContextAndCancel(self) -> None:
        """The asyncio client's CALL carries the time left and the metadata; at the deadline, a CANCEL."""
        seen: list[Any] = []
        server = scripted.ScriptedServer(self, cancelScript(seen))

        async def main() -> Any:
            async with await asyncioclient.connect(server.address, options=ClientOptions(timeout=HANG)) as connection:
                with callContext(timeout=SHORT, metadata={"request-id": "r1"}):
                    with self.assertRaises(DeadlineExceeded):
                        await connection.root.callRemote("slow", 1, k=2)
                return await connection.root.callRemote("next")

        self.assertEqual(asyncio.run(asyncio.wait_for(main(), HANG)), "fresh")
        self.assertTrue(server.done.wait(HANG))
        self.assertSent(seen)

    def test_oneWayCarriesContext(self) -> None:
        """Both clients' calls for no answer carry the context; one whose deadline passed sends nothing."""

        def blockingSide(address: str) -> None:
            with blocking.connect(address, options=ClientOptions(timeout=HANG)) as connection:
                with callContext(metadata={"a": "b"}):
                    connection.root.callRemoteOnly("note", 1)
                with callContext(timeout=0), self.assertRaises(DeadlineExceeded):
                    connection.root.callRemoteOnly("note", 2)

        async def asyncioSide(address: str) -> None:
            async with await asyncioclient.connect(address, options=ClientOptions(timeout=HANG)) as connection:
                with callContext(metadata={"a": "b"}):
                    await connection.root.callRemoteOnly("note", 1)
                with callContext(timeout=0), self.assertRaises(DeadlineExceeded):
                    await connection.root.callRemoteOnly("note", 2)

        sides: list[tuple[str, Callable[[str], Any]]] = [
            ("blocking", blockingSide),
            ("asyncio", lambda address: asyncio.run(asyncio.wait_for(asyncioSide(address), HANG))),
        ]
        for client, side in sides:
            seen: list[Any] = []

            def script(peer: scripted.ScriptedPeer, seen: list[Any] = seen) -> None:
                while (message := peer.next()) is not None:
                    seen.append(message)

            server = scripted.ScriptedServer(self, script)
            side(server.address)
            self.assertTrue(server.done.wait(HANG))
            self.assertEqual(seen, [Message((CALL, NO_ANSWER, 0, "note", (1,), {}, None, {"a": "b"}))], client)

    def test_metadataIsText(self) -> None:
        """callContext refuses metadata that is not text, before any call."""
        with self.assertRaises(TypeError):
            with callContext(metadata={"a": 1}):  # type: ignore[dict-item]
                pass


class ClientRulesTests(SynchronousTestCase):
    """The clients ask the rules of a call in a callContext: L{itemBound}, L{framing.rpc._context.sentWith}."""

    def test_itemBound(self) -> None:
        """A stream item's wait ends at the enclosing callContext's deadline, or callTimeout, whichever is first."""
        self.assertIsNone(itemBound(3, None))
        bound = itemBound(3, 5.0)
        assert bound is not None
        self.assertIsInstance(bound[1], CallTimedOut)
        with callContext(timeout=1.0):
            bound = itemBound(3, 5.0)
        assert bound is not None
        self.assertIsInstance(bound[1], DeadlineExceeded)
        self.assertTrue(bound[0] <= time.monotonic() + 1.0)

    def test_clientsAskTheRule(self) -> None:
        """Neither client computes a CALL's milliseconds, its call context or an item's bound itself."""
        import inspect

        for module in (asyncioclient, blocking):
            source = inspect.getsource(module)
            self.assertNotIn("sendingDeadline(", source, module.__name__)
            self.assertNotIn("itemWaitBound(", source, module.__name__)
            self.assertIn("sentWith(", source, module.__name__)
