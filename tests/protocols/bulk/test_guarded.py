"""The guard's stall and idle rules on a bulk connection: a stream paused by flow control is not a stalled peer."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from protocols._guard import GuardPolicy, guard
from protocols.bulk import Stream
from protocols.rpc import Broker
from protocols.testing import connectedPair

from .support import SMALL, SlowConsumer, Store, payload

CHUNK = SMALL.chunkSize
POLICY = GuardPolicy(
    preambleTimeout=5.0,
    stallTimeout=2.0,
    minRate=1024,
    # (Keepalive is left out: on a zero-latency memory pair a PONG arrives at the very
    # instant of its PING, which the keepalive rule does not count; stall and idle are the subject.)
    keepaliveInterval=None,
    idleTimeout=10.0,
    sendStallTimeout=5.0,
)


class Guarded:
    """A guarded bulk server and a plain bulk client, in memory on one clock."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.store = Store()
        self.server = guard(Broker(self.store, clock=self.clock, bulk=SMALL), POLICY, None, self.clock)
        self.client = Broker(clock=self.clock, bulk=SMALL)
        self.pair = connectedPair(self.server, self.client)
        self.root = self.client.rootReference()

    def run(self, seconds: float, step: float = 0.25) -> None:
        """Let C{seconds} pass, delivering everything at each step."""
        for _ in range(int(seconds / step)):
            self.pair.flush()
            self.clock.advance(step)
        self.pair.flush()

    @property
    def dropped(self) -> str | None:
        failure = self.server.connection.failure
        return None if failure is None else getattr(failure.value, "code", "?")


class PausedStreamTests(SynchronousTestCase):
    """Streams that wait on flow control keep their connection, for longer than every rule's timeout."""

    def test_pausedUploadNotDropped(self) -> None:
        """An upload whose server-side sink is paused waits 60 s (stall 2 s, idle 10 s) and the client is kept."""
        guarded = Guarded()
        data = payload(8 * CHUNK)
        answer = guarded.root.callRemote("uploadSlow", "held", Stream(data))
        guarded.run(60)
        self.assertIsNone(guarded.dropped)
        consumer = guarded.store.sinks["held"]
        self.assertLess(len(consumer.data), len(data))
        while not answer.called:
            consumer.drain()
            guarded.run(0.5)
        self.assertEqual(self.successResultOf(answer), len(data))
        self.assertEqual(consumer.data, data)
        self.assertIsNone(guarded.dropped)

    def test_pausedDownloadNotDropped(self) -> None:
        """A download that the client's paused sink holds waits 60 s, and the server keeps the client."""
        guarded = Guarded()
        data = payload(8 * CHUNK)
        incoming = guarded.root.callRemote("download", data)
        guarded.run(1)
        consumer = SlowConsumer()
        done = self.successResultOf(incoming).receive(consumer)
        guarded.run(60)
        self.assertIsNone(guarded.dropped)
        while not done.called:
            consumer.drain()
            guarded.run(0.5)
        self.assertEqual(self.successResultOf(done).size, len(data))
        self.assertEqual(consumer.data, data)

    def test_idleStillDropsWithoutStreams(self) -> None:
        """With no stream paused the idle rule still drops a connection where nothing completes."""
        guarded = Guarded()
        self.successResultOf(self.ping(guarded))
        guarded.run(12)
        self.assertEqual(guarded.dropped, "idle-timeout")

    def ping(self, guarded: Guarded) -> object:
        answer = guarded.root.callRemote("ping")
        guarded.pair.flush()
        return answer

    def test_peerWithCreditStillIdle(self) -> None:
        """A stream the peer has credit for but sends nothing on is not paused by us: the idle rule applies."""
        guarded = Guarded()
        stream = Stream()  # a producer-fed stream the client never writes to
        answer = guarded.root.callRemote("uploadSlow", "empty", stream)
        guarded.run(12)
        self.assertEqual(guarded.dropped, "idle-timeout")
        self.failureResultOf(answer)
