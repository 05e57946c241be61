"""Tests for protocols.rpc over real loopback TCP, on Twisted endpoint strings.

Each reactor test is one C{async def} body run twice: as a trial C{TestCase}
method and as a pytest-twisted function (see C{tests/protocols/helpers.py}).
Every test is bounded by C{helpers.TIMEOUT} and listens on 127.0.0.1 only.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import CancelledError, Deferred, TimeoutError, gatherResults
from twisted.internet.endpoints import clientFromString, serverFromString
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from framing import Limits
from framing.wire import PREAMBLE
from protocols.rpc import (
    Broker,
    BrokerFactory,
    DeadReferenceError,
    NoSuchMethod,
    RemoteError,
    RemoteReference,
    RemoteViolation,
    connect,
    reconnecting,
    remote,
    serve,
    serverFactory,
)
from protocols.rpc._options import ServerOptions
from protocols.testing import SelfSignedCertificate, messagesPerWrite, recordSends, recordWrites

from ..helpers import REFERENCE_BATCHES, pytestTest, trialTest
from .services import Child, NotFound, Service

LISTEN = "tcp:0:interface=127.0.0.1"


class TimedService(Service):
    """A service whose coroutines wait on the real reactor."""

    def __init__(self, reactor: Any) -> None:
        super().__init__()
        self.reactor = reactor

    @remote
    async def sleep(self, seconds: float, value: Any) -> Any:
        await deferLater(self.reactor, seconds)
        return value


class Server:
    """A listening RPC server and what a test needs to stop it cleanly."""

    def __init__(self, factory: BrokerFactory, port: Any) -> None:
        self.factory, self.port = factory, port

    @property
    def address(self) -> str:
        return f"tcp:host=127.0.0.1:port={self.port.getHost().port}"

    async def stop(self) -> None:
        await self.port.stopListening()
        await self.factory.disconnectAll()


async def listen(reactor: Any, root: Any, **options: Any) -> Server:
    factory = serverFactory(root, clock=reactor, options=ServerOptions(**options))
    port = await serverFromString(reactor, LISTEN).listen(factory)
    return Server(factory, port)


async def eventually(reactor: Any, condition: Callable[[], bool], seconds: float = 60) -> None:
    """Wait, polling the reactor, until C{condition()} is true; fail after C{seconds} (only a hang takes that long)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {seconds} s")
        await deferLater(reactor, 0.005)


async def failsWith(d: Deferred[Any], *types: type[BaseException]) -> BaseException:
    """Await C{d}, which must fail with one of C{types}; return the exception."""
    try:
        result = await d
    except types as error:
        return error
    raise AssertionError(f"expected {types}, got the result {result!r}")


# -- bodies ------------------------------------------------------------------------------


async def serveAndConnect(reactor: Any) -> None:
    """serve() and connect() on endpoint strings: values, keywords, errors, references and callbacks work."""
    service = Service()
    port = await serve(reactor, LISTEN, service, options=ServerOptions(tracebacks=True))
    root = await connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
    try:
        assert await root.callRemote("echo", {"k": [1, b"2", "3"]}) == {"k": [1, b"2", "3"]}
        assert await root.callRemote("keywords", 1, c=5) == (1, 2, 5)
        error = await failsWith(root.callRemote("fail", "x"), RemoteError)
        assert isinstance(error, RemoteError) and error.remoteType == "ValueError"
        assert error.remoteTraceback is not None and "in fail" in error.remoteTraceback
        assert (await failsWith(root.callRemote("fail", "registered"), NotFound)).args == ("k", 5)
        await failsWith(root.callRemote("hidden"), NoSuchMethod)
        child = await root.callRemote("make", 3)
        assert isinstance(child, RemoteReference) and await child.callRemote("add", 4) == 7
        assert await root.callRemote("isShared", await root.callRemote("same")) is True
        mine = Child(1)
        assert await root.callRemote("callBack", mine, 2) == 3 and mine.value == 3
    finally:
        await root.broker.disconnect()
        await port.stopListening()
        await port.factory.disconnectAll()  # type: ignore[attr-defined]


class RecordingFactory(BrokerFactory):
    """Makes brokers whose raw TCP transport's writes are recorded from the very first, in C{recorded}."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorded: dict[Broker, list[bytes]] = {}

    def buildProtocol(self, addr: Any) -> Any:
        connection = super().buildProtocol(addr)
        broker, makeConnection = connection.receiver, connection.makeConnection

        def recordingMakeConnection(transport: Any) -> None:
            self.recorded[broker] = recordWrites(transport)
            makeConnection(transport)

        connection.makeConnection = recordingMakeConnection  # type: ignore[method-assign]
        return connection


async def writeCounts(reactor: Any) -> None:
    """
    Over TCP the first call shares the preamble's write, every sequential
    call and answer is one write, and calls or answers made while one read
    is handled share a write, each still whole.
    """
    factory = RecordingFactory(Service(), clock=reactor)
    port = await serverFromString(reactor, LISTEN).listen(factory)
    server = Server(factory, port)
    clientFactory = RecordingFactory(clock=reactor)
    connecting = clientFromString(reactor, server.address).connect(clientFactory)
    # Called in the connection's own reactor turn, as connect()'s callbacks are.
    first = connecting.addCallback(
        lambda connection: (connection.receiver, connection.receiver.rootReference().callRemote("echo", "first"))
    )
    client, answer = await first
    recorded = clientFactory.recorded[client]
    try:
        assert len(recorded) == 1 and recorded[0].startswith(PREAMBLE + b"\x73rpc"), recorded
        assert await answer == "first"
        (serving,) = factory.brokers
        servingRecorded = factory.recorded[serving]
        root = client.rootReference()
        for i in range(20):
            assert await root.callRemote("echo", i) == i
        assert messagesPerWrite(recorded) == [1] * 21
        # The server's preamble may leave alone (a write of no message) before the first call comes.
        answered = messagesPerWrite(servingRecorded)
        assert [count for count in answered if count] == [1] * 21, answered
        # Made from the callback of the 20th answer, so inside one read: one write.
        assert await gatherResults([root.callRemote("echo", i) for i in range(100)]) == list(range(100))
        assert messagesPerWrite(recorded)[21:] == [100]
        answers = messagesPerWrite(servingRecorded)[len(answered) :]
        assert sum(answers) == 100 and 0 not in answers, answers
    finally:
        await client.disconnect()
        await server.stop()


async def oneSendPerCall(reactor: Any) -> None:
    """Each sequential call and each answer is one send system call on its socket."""
    server = await listen(reactor, Service())
    root = await connect(reactor, server.address)
    try:
        assert await root.callRemote("echo", "warm") == "warm"
        (serving,) = server.factory.brokers
        sent = recordSends(root.broker.transport.transport)
        answered = recordSends(serving.transport.transport)
        for i in range(50):
            assert await root.callRemote("echo", i) == i
        assert messagesPerWrite(sent, preamble=False) == [1] * 50
        assert messagesPerWrite(answered, preamble=False) == [1] * 50
    finally:
        await root.broker.disconnect()
        await server.stop()


async def outOfOrder(reactor: Any) -> None:
    """Ten thousand calls in flight over TCP, answered in a shuffled order, each get their own answer."""
    service = Service()
    server = await listen(reactor, service)
    root = await connect(reactor, server.address)
    try:
        count = 10_000
        answers = gatherResults([root.callRemote("later", i) for i in range(count)])
        await eventually(reactor, lambda: len(service.waiting) == count, seconds=10)
        order = list(range(count))
        random.Random(3).shuffle(order)
        for i in order:
            service.waiting[i].callback(-i)
        assert await answers == [-i for i in range(count)]
        assert root.broker.pendingCount == 0
    finally:
        await root.broker.disconnect()
        await server.stop()


async def cancelAndTimeout(reactor: Any) -> None:
    """Cancel and addTimeout fail the call at once and cancel the server's Deferred or coroutine."""
    service = TimedService(reactor)
    server = await listen(reactor, service)
    root = await connect(reactor, server.address)
    try:
        waiting = root.callRemote("later", "cancelled")
        await eventually(reactor, lambda: "cancelled" in service.waiting)
        waiting.cancel()
        await failsWith(waiting, CancelledError)
        await eventually(reactor, lambda: service.cancelled == ["cancelled"])
        timed = root.callRemote("coroutine", "timed").addTimeout(0.05, reactor)
        await failsWith(timed, TimeoutError)
        await eventually(reactor, lambda: ("coroutine", "timed") in service.cancelled)
        sleeping = root.callRemote("sleep", 10, "never")
        await deferLater(reactor, 0.02)
        sleeping.cancel()
        await failsWith(sleeping, CancelledError)
        assert await root.callRemote("sleep", 0.01, "slept") == "slept"
        (serving,) = server.factory.brokers
        await eventually(reactor, lambda: serving.runningCount == 0)
    finally:
        await root.broker.disconnect()
        await server.stop()


async def connectionLost(reactor: Any) -> None:
    """When the server drops the connection every pending call fails at once and later calls fail too."""
    service = Service()
    server = await listen(reactor, service)
    root = await connect(reactor, server.address)
    child = await root.callRemote("make", 1)
    pending = [root.callRemote("later", i) for i in range(50)]
    await eventually(reactor, lambda: len(service.waiting) == 50)
    lost = root.whenDisconnected()
    await server.stop()
    reason = await lost
    assert isinstance(reason, (ConnectionDone, ConnectionLost)), reason
    for call in pending:
        assert call.called
        await failsWith(call, ConnectionDone, ConnectionLost)
    await failsWith(root.callRemote("echo", 1), DeadReferenceError)
    await failsWith(child.callRemote("get"), DeadReferenceError)


async def violationKeepsConnection(reactor: Any) -> None:
    """A call refused for the server's limits fails alone; the connection and later calls go on."""
    server = await listen(reactor, Service(), limits=Limits(max_bytes_length=1000))
    root = await connect(reactor, server.address)
    try:
        error = await failsWith(root.callRemote("echo", b"x" * 5000), RemoteViolation)
        assert isinstance(error, RemoteViolation)
        assert (error.code, error.where) == ("body-too-large", "args[0]")
        assert await root.callRemote("echo", b"x" * 1000) == b"x" * 1000
    finally:
        await root.broker.disconnect()
        await server.stop()


async def asyncMethods(reactor: Any) -> None:
    """Calls to async def methods that wait on the reactor can be awaited together and finish in any order."""
    server = await listen(reactor, TimedService(reactor))
    root = await connect(reactor, server.address)
    try:
        results = await gatherResults([root.callRemote("sleep", 0.01 * (10 - i), i) for i in range(10)])
        assert results == list(range(10))
    finally:
        await root.broker.disconnect()
        await server.stop()


async def referencesComeAndGo(reactor: Any) -> None:
    """
    Thousands of references go back and forth over TCP and the export tables
    shrink back (L{REFERENCE_BATCHES} of 1000: a hundred thousand in C{dev.py soak}).
    """
    server = await listen(reactor, Service())
    root = await connect(reactor, server.address)
    try:
        (serving,) = server.factory.brokers
        start = serving.exportCount
        for _ in range(REFERENCE_BATCHES):
            refs = await root.callRemote("many", 1000)
            assert len(refs) == 1000 and serving.exportCount == start + 1000
            del refs
        await eventually(reactor, lambda: serving.exportCount == start)
        assert root.broker.importCount == 1  # the root itself
        mine = [Child(i) for i in range(100)]
        assert await root.callRemote("keep", *mine) is True
        assert root.broker.exportCount == 100
        assert await root.callRemote("keep") is True  # the server drops what it kept
        await eventually(reactor, lambda: root.broker.exportCount == 0)
    finally:
        await root.broker.disconnect()
        await server.stop()


async def reconnectingClient(reactor: Any) -> None:
    """A reconnecting client reconnects after the server drops it; calls in between fail at once."""
    server = await listen(reactor, Service())
    roots: list[RemoteReference] = []
    client = reconnecting(reactor, server.address, retryPolicy=lambda attempt: 0.02, prepareConnection=roots.append)
    try:
        first = await client.whenConnected(failAfterFailures=3)
        assert client.isConnected() and roots == [first]
        assert await first.callRemote("echo", 1) == 1
        assert await client.callRemote("echo", 2) == 2
        lost = first.whenDisconnected()
        await server.factory.disconnectAll()
        await lost
        await failsWith(client.callRemote("echo", 3), DeadReferenceError)
        await failsWith(first.callRemote("echo", 3), DeadReferenceError)
        second = await client.whenConnected(failAfterFailures=3)
        assert second is not first and len(roots) == 2
        assert await client.callRemote("echo", 4) == 4
    finally:
        await client.stopService()
        await server.stop()


async def stoppedWhilePreparing(reactor: Any) -> None:
    """
    A reconnecting client stopped while it prepares a connection closes
    that connection before its stop ends; the connection's loss never
    reaches a stopped service (Twisted's ClientService logged "NoTransition:
    _clientDisconnected in Stopped" when the server closed it later).
    """
    from twisted.logger import globalLogPublisher

    server = await listen(reactor, Service())
    preparing: list[Deferred[None]] = []

    def prepare(root: RemoteReference) -> Deferred[None]:
        preparing.append(Deferred())
        return preparing[-1]

    logged: list[str] = []

    def observe(event: dict[str, Any]) -> None:
        failure = event.get("log_failure")
        if failure is not None:
            logged.append(repr(failure.value))

    globalLogPublisher.addObserver(observe)
    client = reconnecting(reactor, server.address, retryPolicy=lambda attempt: 60.0, prepareConnection=prepare)
    try:
        await eventually(reactor, lambda: len(preparing) == 1 and len(server.factory.brokers) == 1)
        await client.stopService()
        await eventually(reactor, lambda: not server.factory.brokers)
        await deferLater(reactor, 0, lambda: None)  # (one more turn: the client side's loss is delivered)
        assert not [text for text in logged if "NoTransition" in text], logged
    finally:
        globalLogPublisher.removeObserver(observe)
        await server.stop()


async def otherTransports(reactor: Any) -> None:
    """Brokers work the same over ssl: (with a test-made certificate) and unix: endpoints."""
    directory = tempfile.mkdtemp(prefix="cw-rpc-")
    try:
        certificate = SelfSignedCertificate.generate().writeTo(directory)
        for listening, connecting in (
            (certificate.serverEndpoint(0), lambda address: certificate.clientEndpoint(address.port)),
            (f"unix:{directory}/rpc.sock", lambda address: f"unix:path={address.name.decode()}"),
        ):
            factory = serverFactory(Service(), clock=reactor)
            server = Server(factory, await serverFromString(reactor, listening).listen(factory))
            root = await connect(reactor, connecting(server.port.getHost()))
            try:
                child = await root.callRemote("make", 2)
                assert await child.callRemote("add", 3) == 5
                assert await root.callRemote("echo", [b"x" * 100_000]) == [b"x" * 100_000]
            finally:
                await root.broker.disconnect()
                await server.stop()
    finally:
        shutil.rmtree(directory)


# -- trial ---------------------------------------------------------------------------------


class RpcOverTCPTests(TestCase):
    """protocols.rpc over loopback TCP (trial runs these; pytest runs the twins below)."""

    timeout = 30
    test_serve_and_connect = trialTest(serveAndConnect)
    test_write_counts = trialTest(writeCounts)
    test_one_send_per_call = trialTest(oneSendPerCall)
    test_out_of_order = trialTest(outOfOrder)
    test_cancel_and_timeout = trialTest(cancelAndTimeout)
    test_connection_lost = trialTest(connectionLost)
    test_violation_keeps_connection = trialTest(violationKeepsConnection)
    test_async_methods = trialTest(asyncMethods)
    test_references_come_and_go = trialTest(referencesComeAndGo)
    test_reconnecting_client = trialTest(reconnectingClient)
    test_stopped_while_preparing = trialTest(stoppedWhilePreparing)
    test_other_transports = trialTest(otherTransports)


# -- pytest-twisted --------------------------------------------------------------------------

test_serve_and_connect = pytestTest(serveAndConnect)
test_write_counts = pytestTest(writeCounts)
test_one_send_per_call = pytestTest(oneSendPerCall)
test_out_of_order = pytestTest(outOfOrder)
test_cancel_and_timeout = pytestTest(cancelAndTimeout)
test_connection_lost = pytestTest(connectionLost)
test_violation_keeps_connection = pytestTest(violationKeepsConnection)
test_async_methods = pytestTest(asyncMethods)
test_references_come_and_go = pytestTest(referencesComeAndGo)
test_reconnecting_client = pytestTest(reconnectingClient)
test_stopped_while_preparing = pytestTest(stoppedWhilePreparing)
test_other_transports = pytestTest(otherTransports)
