"""Drain over real loopback TCP: a reconnecting client moves its calls to the next server without failing one.

Each reactor test is one C{async def} body run as a trial method and as a
pytest-twisted function (see C{tests/protocols/helpers.py}).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.endpoints import serverFromString
from twisted.internet.task import deferLater
from twisted.logger import formatEvent
from twisted.trial.unittest import TestCase

from framing.rpc._drain import DrainDeadlineExceeded
from protocols.rpc import Referenceable, reconnecting, remote, serverFactory
from protocols.rpc._drain import drainBrokers, drainPort
from tests.processes import reservePort

from ..helpers import capturedLogs, pytestTest, trialTest

LISTEN = "tcp:0:interface=127.0.0.1"


class Recorder(Referenceable):
    """Records each call's number and answers it after a short wait, so calls are in flight at any moment."""

    def __init__(self, reactor: Any, delay: float = 0.002) -> None:
        self.reactor = reactor
        self.delay = delay
        self.seen: list[int] = []

    @remote
    async def record(self, number: int) -> int:
        self.seen.append(number)
        await deferLater(self.reactor, self.delay)
        return number


async def drainMovesCalls(reactor: Any) -> None:
    """While calls stream in, a server drains and another takes its port: no call fails, each is answered once."""
    first, second = Recorder(reactor), Recorder(reactor)
    factory = serverFactory(first, clock=reactor)
    # The port is held for the test (the second server binds it after the first has let it go).
    reservation = reservePort()
    number = reservation.getsockname()[1]
    port = await serverFromString(reactor, f"tcp:{number}:interface=127.0.0.1").listen(factory)
    client = reconnecting(reactor, f"tcp:host=127.0.0.1:port={number}", retryPolicy=lambda attempt: 0.05)
    await client.whenConnected()
    answers: list[int] = []
    failures: list[Any] = []
    calls: list[Deferred[Any]] = []
    replacement: list[Any] = []

    async def switch() -> None:
        await port.stopListening()
        replacement.append(
            await serverFromString(reactor, f"tcp:{number}:interface=127.0.0.1").listen(
                serverFactory(second, clock=reactor)
            )
        )
        await drainBrokers(factory.brokers, 5.0)

    switched: Deferred[None] | None = None
    for index in range(400):
        call = client.callRemote("record", index)
        call.addCallbacks(answers.append, failures.append)
        calls.append(call)
        if index == 150:
            switched = Deferred.fromCoroutine(switch())
        await deferLater(reactor, 0.0005)
    await gatherResults(calls)
    assert switched is not None
    await switched
    assert failures == [], failures
    assert sorted(answers) == list(range(400))
    assert sorted(first.seen + second.seen) == list(range(400))
    assert first.seen and second.seen
    assert client.goAways == 1
    await client.stopService()
    await replacement[0].stopListening()
    reservation.close()


class Stuck(Referenceable):
    """A method that never finishes unless cancelled."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    @remote
    def hang(self) -> Deferred[None]:
        self.started += 1
        return Deferred(lambda _: self._cancelled())

    def _cancelled(self) -> None:
        self.cancelled += 1


async def deadlineOverTcp(reactor: Any) -> None:
    """drainPort stops listening, and a call still running at the deadline fails with DrainDeadlineExceeded."""
    from protocols.rpc import connect

    stuck = Stuck()
    factory = serverFactory(stuck, clock=reactor)
    port = await serverFromString(reactor, LISTEN).listen(factory)
    root = await connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
    call = root.callRemote("hang")
    await _until(reactor, lambda: stuck.started == 1)  # the call runs on the server
    await drainPort(port, factory, 0.2)
    try:
        await call
    except DrainDeadlineExceeded as error:
        assert "drain deadline (0.2 s) passed" in str(error)
    else:
        raise AssertionError("the stuck call did not fail")
    assert stuck.cancelled == 1
    assert not any(broker.isConnected() for broker in factory.brokers)


class Listed(Stuck):
    """L{Stuck}, with a method that answers at once."""

    @remote
    def list(self) -> list[str]:
        return []


async def _until(reactor: Any, condition: Any) -> None:
    """Wait until C{condition()} holds (the test's own timeout bounds the wait)."""
    while not condition():
        await deferLater(reactor, 0.01)


async def preparationCutShort(reactor: Any) -> None:
    """
    A connection that drains, or is lost, while the reconnecting client
    prepares it is retried quietly: nothing is logged as an error (it was
    an automat NoTransition each time a supervisor drained under a watching
    kv_client.py), and the client connects again.
    """
    stuck = Listed()
    factory = serverFactory(stuck, clock=reactor)
    port = await serverFromString(reactor, LISTEN).listen(factory)
    prepared: list[Any] = []

    def prepare(root: Any) -> Deferred[Any]:
        # The first two connections hang in their preparation; the third is prepared at once.
        prepared.append(root)
        return root.callRemote("hang") if len(prepared) <= 2 else root.callRemote("list")

    description = f"tcp:host=127.0.0.1:port={port.getHost().port}"
    with capturedLogs() as events:
        client = reconnecting(reactor, description, retryPolicy=lambda attempt: 0.01, prepareConnection=prepare)
        try:
            await _until(reactor, lambda: len(prepared) == 1 and stuck.cancelled == 0 and factory.brokers)
            await _until(reactor, lambda: stuck.started == 1)  # the hang call reaches the server
            # Drained: the preparing call fails with DrainDeadlineExceeded while the connection is still open.
            await drainBrokers(list(factory.brokers), 0.05)
            await _until(reactor, lambda: len(prepared) == 2 and factory.brokers)
            await _until(reactor, lambda: stuck.started == 2)  # and so does the second
            # Lost: the preparing call fails as the connection goes.
            for broker in list(factory.brokers):
                broker.connection.transport.abortConnection()
            root = await client.whenConnected()
            assert len(prepared) == 3
            assert await root.callRemote("list") == []
        finally:
            await client.stopService()
            await port.stopListening()
    bad = [formatEvent(event) for event in events if event.get("log_failure") is not None]
    bad += [formatEvent(event) for event in events if "NoTransition" in formatEvent(event)]
    assert bad == [], bad


class DrainTcpTests(TestCase):
    """Drain over TCP, under trial."""

    test_drain_moves_calls = trialTest(drainMovesCalls)
    test_deadline_over_tcp = trialTest(deadlineOverTcp)
    test_preparation_cut_short = trialTest(preparationCutShort)


test_drain_moves_calls = pytestTest(drainMovesCalls)
test_deadline_over_tcp = pytestTest(deadlineOverTcp)
test_preparation_cut_short = pytestTest(preparationCutShort)
