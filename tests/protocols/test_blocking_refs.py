"""References either way in the blocking client (L{protocols.blocking}), against the real Twisted server in-process.

The server (L{tests.protocols.clientrefs.Hub}) runs in the test's reactor on
loopback; the blocking client runs in a thread of the reactor's pool, so it
may block while the reactor serves it.  Each body runs under trial and
under pytest-twisted (L{tests.protocols.helpers}).
"""

from __future__ import annotations

import gc
import threading
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase

from framing.rpc._errors import DeadReferenceError, NoSuchMethod
from framing.rpc._limits import CallLimits
from protocols.blocking import BlockingReference, connect
from protocols.options import ClientOptions

from .clientrefs import HANG, Counter, eventually, exportCount, serving, stopServing
from .helpers import pytestTest, trialTest


async def referenceReturnedCalledReleased(reactor: Any) -> None:
    """A returned reference is called; released explicitly and by being dropped, the server forgets it."""
    hub, port = await serving(reactor)
    address = f"127.0.0.1:{port.getHost().port}"
    connection = await deferToThread(
        connect, address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG))
    )
    try:

        def made() -> tuple[int, bool]:
            child = connection.root.callRemote("make", 3)
            assert isinstance(child, BlockingReference), child
            value = child.callRemote("add", 4)
            first, second = connection.root.callRemote("same"), connection.root.callRemote("same")
            child.release()
            try:
                child.callRemote("add", 1)
            except DeadReferenceError:
                refused = True
            else:
                refused = False
            del first, second
            gc.collect()
            return value, refused

        value, refused = await deferToThread(made)
        assert value == 7 and refused
        await eventually(reactor, lambda: exportCount(hub) == 1)
        assert list(hub.broker.references.exports) == [0]
    finally:
        connection.close()
        await stopServing(port)


async def callbackWhileBlocked(reactor: Any) -> None:
    """The server calls the client's callback while the client's thread is blocked in the call that passed it."""
    hub, port = await serving(reactor)
    connection = await deferToThread(
        connect,
        f"127.0.0.1:{port.getHost().port}",
        options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG)),
    )
    mine = Counter(1)
    try:

        def call() -> tuple[Any, int]:
            return connection.root.callRemote("callBack", mine, 2), threading.get_ident()

        result, thread = await deferToThread(call)
        assert result == 3 and mine.value == 3
        assert mine.threads == [thread]  # served on the calling thread, which was reading
    finally:
        connection.close()
        await stopServing(port)


async def callbackErrorsTyped(reactor: Any) -> None:
    """The server's calls to the callback fail as they would on a Twisted client: no such method, violation, error."""
    _, port = await serving(reactor)
    connection = await deferToThread(
        connect,
        f"127.0.0.1:{port.getHost().port}",
        options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG)),
    )
    try:
        outcomes = await deferToThread(connection.root.callRemote, "probe", Counter(0))
        assert outcomes == [
            ("NoSuchMethod", "NoSuchMethod"),
            ("RemoteViolation", "kind-refused"),
            ("RemoteError", "ValueError"),
            ("NoSuchMethod", "NoSuchMethod"),
        ], outcomes
        error = await deferToThread(_raises, connection.root.callRemote, "nothing")
        assert isinstance(error, NoSuchMethod)
    finally:
        connection.close()
        await stopServing(port)


def _raises(function: Any, *args: Any) -> BaseException | None:
    try:
        function(*args)
    except Exception as error:
        return error
    return None


async def servedWithoutCall(reactor: Any) -> None:
    """With no call waiting, serve() reads and serves the server's later call; the server's RELEASE is honoured."""
    hub, port = await serving(reactor)
    connection = await deferToThread(
        connect,
        f"127.0.0.1:{port.getHost().port}",
        options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG)),
    )
    mine = Counter(1)
    try:

        def kept() -> int:
            connection.root.callRemote("keep", mine, 5, 0.05)
            return connection.serve(HANG)

        assert await deferToThread(kept) == 1
        assert mine.value == 6
        references = connection._session.references
        assert references is not None and references.exportCount == 1
        await deferToThread(connection.root.callRemote, "forget")

        def released() -> int:
            connection.root.callRemote("same")  # (reads whatever the server sent meanwhile)
            return references.exportCount

        await eventually(reactor, lambda: hub.kept is None)
        for _ in range(int(HANG / 0.05)):
            if await deferToThread(released) == 0:
                break
        assert references.exportCount == 0
    finally:
        connection.close()
        await stopServing(port)


class BlockingReferenceTests(TestCase):
    """References both ways in the blocking client (trial runs these; pytest the twins below)."""

    timeout = HANG + 30
    test_reference_returned_called_released = trialTest(referenceReturnedCalledReleased, HANG)
    test_callback_while_blocked = trialTest(callbackWhileBlocked, HANG)
    test_callback_errors_typed = trialTest(callbackErrorsTyped, HANG)
    test_served_without_call = trialTest(servedWithoutCall, HANG)


test_reference_returned_called_released = pytestTest(referenceReturnedCalledReleased, HANG)
test_callback_while_blocked = pytestTest(callbackWhileBlocked, HANG)
test_callback_errors_typed = pytestTest(callbackErrorsTyped, HANG)
test_served_without_call = pytestTest(servedWithoutCall, HANG)
