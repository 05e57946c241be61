"""protocols._guard: preamble, stall, keepalive and idle timeouts and the connection cap, on a fake clock."""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

from framing import Decoder, dumps
from framing._errors import PeerError
from framing.wire import BYTES, OPEN, PING, PONG, PREAMBLE, encode_header
from protocols import TokenProtocol, rpc
from protocols._config import ConnectionConfig
from protocols._guard import ConnectionCounter, GuardedFactory, GuardError, GuardPolicy, guard
from protocols.echo import EchoServer
from protocols.testing import RecordingTransport

from .helpers import cancelDropTimers, pytestTest, tokenBytes, trialTest

OPEN_LIST = encode_header(OPEN, 4) + b"list"

POLICY = GuardPolicy(
    preambleTimeout=5.0,
    stallTimeout=3.0,
    minRate=100.0,
    keepaliveInterval=10.0,
    keepaliveTimeout=4.0,
    idleTimeout=60.0,
    maxConnections=2,
    abortAfter=1.0,
)


class _Connection:
    """One guarded echo server on a StringTransport."""

    def __init__(self, clock: Clock, policy: GuardPolicy = POLICY, counter: ConnectionCounter | None = None) -> None:
        self.protocol: Any = guard(EchoServer(), policy, counter, clock)
        self.transport = StringTransport()
        self.protocol.makeConnection(self.transport)
        self.lost: list[Any] = []
        original = self.protocol.connectionLost

        def lost(reason: Any) -> None:
            self.lost.append(reason)
            original(reason)

        self.protocol.connectionLost = lost

    def dropped(self) -> str | None:
        """The guard's code if it dropped the connection."""
        failure = self.protocol.failure
        if failure is None:
            return None
        assert isinstance(failure.value, GuardError), failure
        return str(failure.value.code)

    def close(self) -> None:
        self.protocol.connectionLost(self.protocol.failure or Exception("closed"))


class _NoAttributes:
    """Stands for a protocol whose every attribute read fails."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"read {name!r} of the protocol")


class GuardTests(SynchronousTestCase):
    """Each guard rule drops exactly the connections it should, at the right time."""

    def setUp(self) -> None:
        self.addCleanup(cancelDropTimers)
        self.clock = Clock()

    def test_preambleTimeout(self) -> None:
        """A connection that never sends its preamble is dropped after preambleTimeout, with an ERROR."""
        connection = _Connection(self.clock)
        self.clock.advance(4.9)
        self.assertIsNone(connection.dropped())
        self.clock.advance(0.2)
        self.assertEqual(connection.dropped(), "preamble-timeout")
        self.assertTrue(connection.transport.disconnecting)
        self.assertIn(b"no preamble", connection.transport.value())

    def test_preambleInTime(self) -> None:
        """A preamble that arrives in time, byte by byte, is not dropped by the preamble rule."""
        connection = _Connection(self.clock)
        for byte in PREAMBLE:
            connection.protocol.dataReceived(bytes([byte]))
            self.clock.advance(0.5)
        self.clock.advance(5)
        self.assertIsNone(connection.dropped())

    def test_bytesWaitingAtTheDeadline(self) -> None:
        """
        Bytes the reactor reads in the same turn as the deadline's timer
        fires are read before the rule drops anyone: a busy reactor runs its
        timers before it reads, so an honest client whose preamble arrived
        during a stall was dropped as silent.  A peer that sent nothing is
        dropped one turn later.
        """
        connection = _Connection(self.clock)
        # Due at the deadline, but after the guard's timer (made earlier): as a read in the turn the timer fires.
        self.clock.callLater(5.0, connection.protocol.dataReceived, PREAMBLE)
        self.clock.advance(5.0)
        self.assertIsNone(connection.dropped())
        silent = _Connection(self.clock)
        self.clock.advance(5.0)
        self.assertEqual(silent.dropped(), "preamble-timeout")

    def test_slowHeader(self) -> None:
        """One byte a second of an object is dropped as stalled after about stallTimeout."""
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE)
        header = encode_header(BYTES, 100_000)
        for byte in header:
            connection.protocol.dataReceived(bytes([byte]))
            self.clock.advance(1)
            if connection.dropped():
                break
        self.assertEqual(connection.dropped(), "stalled")
        self.assertLessEqual(self.clock.seconds(), 4)

    def test_bodyNeverComes(self) -> None:
        """A header whose body never comes is dropped as stalled."""
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE + encode_header(BYTES, 1000) + b"x" * 10)
        self.clock.advance(3.5)
        self.assertEqual(connection.dropped(), "stalled")

    def test_steadyObject(self) -> None:
        """An object arriving at minRate or faster is not dropped, however long it takes."""
        connection = _Connection(self.clock)
        body = b"y" * 3000
        connection.protocol.dataReceived(PREAMBLE + encode_header(BYTES, len(body)))
        for start in range(0, len(body), 150):
            connection.protocol.dataReceived(body[start : start + 150])
            self.clock.advance(1)
        self.assertIsNone(connection.dropped())
        self.assertTrue(connection.transport.value().endswith(tokenBytes(dumps(body))))

    def test_pingsAreNotProgress(self) -> None:
        """PINGs and PONGs between an object's tokens keep the connection alive but not the object: it stalls."""
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE + OPEN_LIST + tokenBytes(dumps(1)))
        for tick in range(100):
            # 20 PINGs and 20 PONGs a second: 360 bytes/s, more than minRate (100) if they counted.
            connection.protocol.dataReceived((encode_header(PING, tick) + encode_header(PONG, tick)) * 20)
            self.clock.advance(0.1)
            if connection.dropped():
                break
        self.assertEqual(connection.dropped(), "stalled")
        self.assertLessEqual(self.clock.seconds(), 4)

    def test_keepalivePingAnswered(self) -> None:
        """After keepaliveInterval of silence a PING goes out; a PONG keeps the connection."""
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE)
        connection.transport.clear()
        self.clock.advance(10.1)
        self.assertEqual(connection.transport.value(), encode_header(PING, 1))
        self.clock.advance(1)
        connection.protocol.dataReceived(encode_header(PONG, 1))
        self.clock.advance(5)
        self.assertIsNone(connection.dropped())

    def test_keepaliveTimeout(self) -> None:
        """A peer that answers nothing after a PING is dropped keepaliveTimeout later."""
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE)
        self.clock.advance(10.1)
        self.assertIsNone(connection.dropped())
        self.clock.advance(4)
        self.assertEqual(connection.dropped(), "keepalive-timeout")

    def test_idleTimeout(self) -> None:
        """A peer that answers PINGs but sends no object is dropped after idleTimeout."""
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE)
        for _ in range(20):
            self.clock.advance(5)
            connection.protocol.dataReceived(encode_header(PONG, 1))
            if connection.dropped():
                break
        self.assertEqual(connection.dropped(), "idle-timeout")
        self.assertAlmostEqual(self.clock.seconds(), 60, delta=5)

    def test_objectsKeepItOpen(self) -> None:
        """A peer sending an object now and then is never dropped."""
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE)
        for _ in range(30):
            self.clock.advance(9)
            connection.protocol.dataReceived(tokenBytes(dumps([1, "two"])))
        self.assertIsNone(connection.dropped())

    def test_maxConnections(self) -> None:
        """Past maxConnections a new connection is dropped at once; closing one makes room."""
        counter = ConnectionCounter()
        first, second = _Connection(self.clock, counter=counter), _Connection(self.clock, counter=counter)
        third = _Connection(self.clock, counter=counter)
        self.assertEqual((first.dropped(), second.dropped()), (None, None))
        self.assertEqual(third.dropped(), "too-many-connections")
        self.assertEqual((counter.active, counter.refused, counter.perPeer), (2, 1, {"192.168.1.1": 2}))
        first.close()
        third.close()
        self.assertEqual(counter.active, 1)
        self.assertIsNone(_Connection(self.clock, counter=counter).dropped())

    def test_refusedWithItsPreamble(self) -> None:
        """Refused as it starts, its preamble held (as an RPC server's is): the preamble, then the ERROR, one write."""
        counter = ConnectionCounter()
        policy = GuardPolicy(maxConnections=1)
        _Connection(self.clock, policy, counter)
        held = guard(
            TokenProtocol(config=ConnectionConfig(holdPreamble=True, clock=self.clock)), policy, counter, self.clock
        )
        transport = RecordingTransport()
        held.makeConnection(transport)
        self.clock.advance(0)
        [written] = transport.writes
        self.assertTrue(written.startswith(PREAMBLE), written)
        with self.assertRaises(PeerError) as raised:
            Decoder().feed(written)
        self.assertIn("too-many-connections: ", str(raised.exception))

    def test_maxPerPeer(self) -> None:
        """Past maxPerPeer connections from one host a new one from it is dropped at once."""
        policy = GuardPolicy(maxConnections=10, maxPerPeer=1)
        counter = ConnectionCounter()
        first = _Connection(self.clock, policy, counter)
        second = _Connection(self.clock, policy, counter)
        self.assertIsNone(first.dropped())
        self.assertEqual(second.dropped(), "too-many-connections")
        self.assertIn(b"limit per peer is 1", second.transport.value())

    def test_maxObjectBytes(self) -> None:
        """An object larger on the wire than maxObjectBytes drops the connection."""
        policy = GuardPolicy(maxObjectBytes=1000, maxConnections=None)
        connection = _Connection(self.clock, policy)
        connection.protocol.dataReceived(PREAMBLE + encode_header(BYTES, 5000) + b"z" * 1200)
        self.assertEqual(connection.dropped(), "object-too-large")

    def test_droppedMidReadNotFollowed(self) -> None:
        """
        A read whose first object makes the application drop the connection, and which then begins another
        object, leaves the guard's timer where it was: a dropped connection's object in progress is not followed.
        """
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE)
        connection.protocol.objectReceived = lambda obj: connection.protocol.dropConnection(GuardError("app", "no"))
        timers = [call.getTime() for call in self.clock.getDelayedCalls()]
        self.assertEqual(len(timers), 1)
        connection.protocol.dataReceived(tokenBytes(dumps(1)) + encode_header(BYTES, 1000) + b"x" * 10)
        self.assertEqual(connection.dropped(), "app")
        self.assertEqual([call.getTime() for call in self.clock.getDelayedCalls()], timers)  # (no stall deadline)
        self.clock.advance(POLICY.stallTimeout + 1)
        self.assertEqual(connection.dropped(), "app")

    def test_readsBetweenObjectsAskNothingOfTheProtocol(self) -> None:
        """
        A read that ends between objects reads nothing of the protocol through the guard's proxy (each such
        read costs several plain ones): the decoder's boundary is read from the guard's own reference to it.
        """
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE)
        watcher = connection.protocol.guard
        proxy, watcher.protocol = watcher.protocol, _NoAttributes()
        try:
            connection.protocol.dataReceived(tokenBytes(dumps(1)) + tokenBytes(dumps("two")))
        finally:
            watcher.protocol = proxy
        self.assertIsNone(connection.dropped())
        self.assertTrue(connection.transport.value().endswith(tokenBytes(dumps(1)) + tokenBytes(dumps("two"))))
        connection.protocol.dataReceived(encode_header(BYTES, 1000) + b"x" * 10)  # (in progress: followed)
        self.clock.advance(POLICY.stallTimeout + 0.5)
        self.assertEqual(connection.dropped(), "stalled")

    def test_timerCancelledOnLoss(self) -> None:
        """A lost connection leaves no timer behind."""
        connection = _Connection(self.clock)
        connection.protocol.dataReceived(PREAMBLE)
        connection.close()
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_abortsIfPeerDoesNotRead(self) -> None:
        """A dropped connection still open abortAfter seconds later is aborted."""
        connection = _Connection(self.clock)
        connection.transport.connected = True
        self.clock.advance(5.1)
        self.clock.advance(1.1)
        self.assertTrue(connection.transport.disconnected)


async def guardedRpc(reactor: Any) -> None:
    """A guarded RPC server over loopback TCP answers calls and drops a silent connection after its preamble timeout."""
    from tests.protocols.rpc.services import Service

    factory = GuardedFactory(rpc.serverFactory(Service(), clock=reactor), GuardPolicy(preambleTimeout=0.3), reactor)
    port = await _listen(reactor, factory)
    try:
        ref = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
        assert await ref.callRemote("add", 2, 3) == 5
        data = await deferToThread(_readUntilClosed, port.getHost().port)
        assert b"no preamble" in data, data
        assert await ref.callRemote("add", 1, 1) == 2
        await ref.broker.disconnect()
    finally:
        await factory.disconnectAll()
        await port.stopListening()


def _readUntilClosed(port: int) -> bytes:
    """Connect, send nothing, and read until the server closes (in a thread: it blocks)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as silent:
        data = b""
        while chunk := silent.recv(4096):
            data += chunk
        return data


async def _listen(reactor: Any, factory: Any) -> Any:
    from twisted.internet.endpoints import serverFromString

    return await serverFromString(reactor, "tcp:0:interface=127.0.0.1").listen(factory)


class GuardReactorTests(TestCase):
    """The guard on a real server under trial."""

    test_guarded_rpc = trialTest(guardedRpc)


test_guarded_rpc = pytestTest(guardedRpc)


class _Idle:
    """A stand-in guard for L{ConnectionCounter}: idle for C{idle} seconds, evicted when told."""

    def __init__(self, idle: float) -> None:
        self.idle = idle
        self.evicted = False

    def idleFor(self) -> float:
        return self.idle

    def evict(self) -> None:
        self.evicted = True


class ActivityOrderTests(SynchronousTestCase):
    """The counter's connections by activity: the one evicted is the one least recently active."""

    policy = GuardPolicy(maxConnections=2, maxPerPeer=None, evictIdleAfter=1.0)

    def test_touchedMovesToTheEnd(self) -> None:
        """A connection that completes an object becomes the latest; another admitted after it, the latest then."""
        counter = ConnectionCounter()
        first, second = _Idle(10.0), _Idle(10.0)
        counter.admit("a", self.policy, first)  # type: ignore[arg-type]
        counter.admit("b", self.policy, second)  # type: ignore[arg-type]
        self.assertIs(counter.latest, second)
        counter.touched(first)  # type: ignore[arg-type]
        self.assertIs(counter.latest, first)
        self.assertIsNone(counter.admit("c", self.policy, _Idle(0.0)))  # type: ignore[arg-type]
        self.assertEqual((first.evicted, second.evicted), (False, True))

    def test_releasedIsNotLatest(self) -> None:
        """A released connection stops being the latest, and touching it (late) does not bring it back."""
        counter = ConnectionCounter()
        only = _Idle(0.0)
        counter.admit("a", self.policy, only)  # type: ignore[arg-type]
        counter.release("a", only)  # type: ignore[arg-type]
        self.assertIsNone(counter.latest)
        counter.touched(only)  # type: ignore[arg-type]
        self.assertIsNone(counter.latest)

    def test_guardSkipsTheLatest(self) -> None:
        """A guard already the latest does not touch the counter again; after another connection's object, it does."""
        counter = ConnectionCounter()
        touched: list[Any] = []
        touch = counter.touched
        counter.touched = lambda guard: (touched.append(guard), touch(guard))  # type: ignore[method-assign]
        clock = Clock()
        connections = [_Connection(clock, self.policy, counter).protocol for _ in range(2)]
        for protocol in connections:
            protocol.dataReceived(PREAMBLE)
        first, second = connections
        for _ in range(3):
            first.dataReceived(dumps(1)[len(PREAMBLE) :])
        self.assertEqual(touched, [first.guard])
        second.dataReceived(dumps(1)[len(PREAMBLE) :])
        first.dataReceived(dumps(1)[len(PREAMBLE) :])
        self.assertEqual(touched, [first.guard, second.guard, first.guard])
