"""Tests for receive-window autotuning: the base RTT from PING/PONG, and windows grown on latent paths only."""

from __future__ import annotations

import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import rpc
from protocols._guard import GuardPolicy, guard
from protocols.bulk import BulkOptions, Receiver, Stream
from protocols.bulk._tuning import MIN_TUNED_RTT, RoundTrips, WindowTuner
from protocols.rpc import Broker, ClientOptions, ServerOptions, serverFactory

from ...delayproxy import DOWN, UP, DelayedPair
from ..helpers import pytestTest, trialTest
from .support import Store, payload

KiB = 1024
MiB = 1024 * KiB

OPTIONS = BulkOptions(chunkSize=64 * KiB, window=128 * KiB, grantStep=32 * KiB, maxWindow=4 * MiB, hashing="inline")
"""A window of 128 KiB that may grow to 4 MiB."""

DELAY = 0.025
RATE = 8 * MiB
"""A 50 ms RTT, 8 MiB/s link: it holds 400 KiB, so a 128 KiB window caps a stream at 2.5 MiB/s."""


class LatentPair(DelayedPair):
    """
    A L{DelayedPair} whose directions are also links of C{rate} bytes per
    second: each write crosses in pieces of at most C{piece} bytes, one
    after the other, each delivered C{delay} after it has crossed (as TCP
    would deliver a large write through a slow link).
    """

    def __init__(self, server: Any, client: Any, clock: Clock, delay: float, rate: float, piece: int = 16 * KiB):
        self.rate, self.piece = rate, piece
        self.free = {UP: 0.0, DOWN: 0.0}
        DelayedPair.__init__(self, server, client, clock, delay)
        self.record = False

    def collect(self) -> None:
        for direction, transport, receiver in (
            (UP, self.clientTransport, self.server),
            (DOWN, self.serverTransport, self.client),
        ):
            data = transport.value()
            transport.clear()
            for start in range(0, len(data), self.piece):
                piece = data[start : start + self.piece]
                now = self.clock.seconds()
                crossed = self.free[direction] = max(now, self.free[direction]) + len(piece) / self.rate
                self.clock.callLater(crossed + self.delay - now, self._deliver, receiver, piece)


class Latent:
    """A client and a L{Store} server joined by a L{LatentPair}, the client uploading to the server."""

    def __init__(
        self,
        options: BulkOptions = OPTIONS,
        delay: float = DELAY,
        rate: float = RATE,
        guardPolicy: GuardPolicy | None = None,
    ) -> None:
        self.clock = Clock()
        self.store = Store()
        self.server = Broker(self.store, clock=self.clock, bulk=options)
        if guardPolicy is not None:
            self.server = guard(self.server, guardPolicy, None, self.clock)
        self.client = Broker(clock=self.clock, bulk=options)
        self.pair = LatentPair(self.server.connection, self.client.connection, self.clock, delay, rate)
        self.root = self.client.rootReference()
        self.pair.runUntil(lambda: False, 1.0)  # the connection settles

    def upload(self, size: int, window: int | None = None) -> tuple[Receiver, float]:
        """Send C{size} bytes (no digest) and receive them; return the receiving side and the seconds taken."""
        started = self.clock.seconds()
        self.root.callRemote("keep", Stream(payload(size), digest=None))
        self.pair.runUntil(lambda: bool(self.store.streams), 10.0)
        incoming = self.store.streams[-1]
        done: list[Any] = []
        incoming.receive(self.store.pieces.append, window=window).addBoth(done.append)
        self.pair.runUntil(lambda: bool(done), 120.0)
        self.pair.runUntil(lambda: False, 1.0)  # DONE reaches the sender
        assert done and done[0].size == size, done
        receiving = incoming.receiver
        assert receiving is not None
        return receiving, self.clock.seconds() - started


class FakePings:
    """A sendPing whose PONGs the test delivers: C{answer()} fires the oldest ping in flight."""

    def __init__(self) -> None:
        self.sent: list[Deferred[float]] = []

    def __call__(self) -> Deferred[float]:
        ping: Deferred[float] = Deferred()
        self.sent.append(ping)
        return ping

    def answer(self) -> None:
        self.sent[-1].callback(0.0)


class RoundTripTests(SynchronousTestCase):
    """The base RTT is the smallest sample of the channel's own probes."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.pings = FakePings()
        self.roundTrips = RoundTrips(self.clock, self.pings)

    def test_oneProbeInFlight(self) -> None:
        """A probe is not sent while another waits for its answer."""
        self.roundTrips.probe()
        self.roundTrips.probe()
        self.assertEqual(len(self.pings.sent), 1)
        self.pings.answer()
        self.roundTrips.probe()
        self.assertEqual(len(self.pings.sent), 2)

    def test_minimumKept(self) -> None:
        """Each answer is a sample; the base is the smallest, and an inflated later sample does not raise it."""
        for seconds in (0.3, 0.1, 0.2):
            self.roundTrips.probe()
            self.clock.advance(seconds)
            self.pings.answer()
        self.assertAlmostEqual(self.roundTrips.base or 0, 0.1)
        self.assertEqual(self.roundTrips.samples, 3)

    def test_lostProbeIsNoSample(self) -> None:
        """A probe whose connection is lost is no sample, logs no error, and lets the next probe go."""
        self.roundTrips.probe()
        self.clock.advance(0.5)
        self.pings.sent[-1].errback(ConnectionDone())
        self.assertEqual((self.roundTrips.base, self.roundTrips.samples), (None, 0))
        self.roundTrips.probe()
        self.assertEqual(len(self.pings.sent), 2)


class TunerTests(SynchronousTestCase):
    """A tuner grows the window only when the sender ran out of credit."""

    def tuner(self, base: float = 0.1, probed: bool = True) -> WindowTuner:
        """A tuner on a path of C{base} seconds, measured by a probe (if C{probed}) or else by a first frame."""
        clock = Clock()
        pings = self.pings = FakePings()
        roundTrips = RoundTrips(clock, pings)
        if probed:
            roundTrips.probe()
            clock.advance(base)
            pings.answer()
        else:
            roundTrips.sample(base)
        return WindowTuner(100_000, 10_000_000, 10_000, roundTrips)

    def feed(self, tuner: WindowTuner, ahead: int) -> bool:
        """1 MB/s for a second (frames of 10 kB every 10 ms), the receiver granting C{ahead} bytes past what arrived."""
        grew = False
        for step in range(101):
            now, received = step * 0.01, step * 10_000
            tuner.granted(now, received + ahead)
            grew = tuner.frameArrived(now, received + 10_000, received) or grew
        return grew

    def test_growsWhenCreditLimited(self) -> None:
        """A sender that always used up its credit (100 kB per 0.1 s RTT) gets twice that: 200 kB."""
        tuner = self.tuner()
        self.assertTrue(self.feed(tuner, 100_000))
        self.assertEqual(tuner.window, 200_000)

    def test_probeConfirmsFirst(self) -> None:
        """A first frame's sample alone grows nothing (the source may have been slow to start); a probe goes out."""
        tuner = self.tuner(probed=False)
        self.assertFalse(self.feed(tuner, 100_000))
        self.assertEqual((tuner.window, len(self.pings.sent)), (100_000, 1))

    def test_staysOnShortPaths(self) -> None:
        """Under MIN_TUNED_RTT (a LAN, loopback), a credit-limited sender does not grow the window."""
        tuner = self.tuner(base=MIN_TUNED_RTT * 0.9)
        self.assertFalse(self.feed(tuner, 100_000))
        self.assertEqual(tuner.window, 100_000)
        self.assertTrue(tuner.fixed)

    def test_fixedOnlyOnShortPaths(self) -> None:
        """A tuner knows its window fixed once a base RTT under MIN_TUNED_RTT is measured: not before, nor above it."""
        unmeasured = WindowTuner(100_000, 10_000_000, 10_000, RoundTrips(Clock(), FakePings()))
        self.assertFalse(unmeasured.frameArrived(0.0, 10_000, 0))
        self.assertFalse(unmeasured.fixed)
        for base in (MIN_TUNED_RTT, 0.1):
            tuner = self.tuner(base=base)
            self.feed(tuner, 100_000)
            self.assertFalse(tuner.fixed, base)

    def test_staysWhenCreditToSpare(self) -> None:
        """The same rate with credit to spare (the source or the link is the limit) does not grow the window."""
        tuner = self.tuner()
        self.assertFalse(self.feed(tuner, 300_000))
        self.assertEqual(tuner.window, 100_000)


class AutotuneTests(SynchronousTestCase):
    """Over a latent, rate-limited in-memory link, a stream's window grows to what the path needs, and only there."""

    def test_growsToTheTarget(self) -> None:
        """The window grows from 128 KiB to about twice the 400 KiB the link holds; the upload runs at link rate."""
        receiving, seconds = Latent().upload(8 * MiB)
        inFlight = RATE * 2 * DELAY
        self.assertGreaterEqual(receiving.window, inFlight)
        self.assertLessEqual(receiving.window, 2.5 * inFlight)
        # 8 MiB at 8 MiB/s, plus the call, the first grant and the ramp.
        self.assertLess(seconds, 1.5)

    def test_firstFrameSendsAProbe(self) -> None:
        """A tuned stream's first frame follows no grant and is no sample: it sends a probe, which measures the RTT."""
        latent = Latent()
        roundTrips = latent.server.bulk.roundTrips
        self.assertEqual(roundTrips.samples, 0)
        latent.root.callRemote("keep", Stream(payload(64 * KiB), digest=None))
        latent.pair.runUntil(lambda: bool(latent.store.streams), 10.0)
        incoming = latent.store.streams[0]
        incoming.receive(latent.store.pieces.append)
        latent.pair.runUntil(lambda: roundTrips.samples > 0, 10.0)
        self.assertEqual((roundTrips.samples, roundTrips.probed), (1, 1))
        # The RTT, give or take the data the PING and PONG queue behind on the 8 MiB/s link.
        self.assertTrue(2 * DELAY <= (roundTrips.base or 0) < 2 * DELAY + 0.02, roundTrips.base)

    def test_fixedWindowIsSlower(self) -> None:
        """Without autotuning the same upload is capped at about a window per RTT (2.5 MiB/s): over 3 s."""
        options = BulkOptions(chunkSize=64 * KiB, window=128 * KiB, grantStep=32 * KiB, maxWindow=0)
        receiving, seconds = Latent(options).upload(8 * MiB)
        self.assertEqual(receiving.window, 128 * KiB)
        self.assertGreater(seconds, 3.0)

    def test_notPastMaxWindow(self) -> None:
        """With maxWindow under the target, the window stops at maxWindow."""
        options = BulkOptions(chunkSize=64 * KiB, window=128 * KiB, grantStep=32 * KiB, maxWindow=256 * KiB)
        receiving, _ = Latent(options).upload(8 * MiB)
        self.assertEqual(receiving.window, 256 * KiB)

    def test_noGrowthWithoutDelay(self) -> None:
        """On a link with no delay the window stays as configured, and no probe is sent: one sample per stream."""
        latent = Latent(delay=0.0)
        receiving, _ = latent.upload(8 * MiB)
        self.assertEqual(latent.server.bulk.roundTrips.samples, 1)
        # The first frame's first piece crossing the 8 MiB/s link: 2 ms, no more.
        self.assertLess(latent.server.bulk.roundTrips.base or 0, MIN_TUNED_RTT)
        self.assertEqual(receiving.window, 128 * KiB)
        # Let go once the path showed itself too short to tune: no clock read for it per frame and per grant.
        self.assertIsNone(receiving.tuner)

    def test_disabled(self) -> None:
        """maxWindow equal to the window, or 0, turns autotuning off: no probes, and the window stays."""
        for maxWindow in (128 * KiB, 0):
            options = BulkOptions(chunkSize=64 * KiB, window=128 * KiB, grantStep=32 * KiB, maxWindow=maxWindow)
            latent = Latent(options)
            receiving, _ = latent.upload(4 * MiB)
            self.assertEqual(receiving.window, 128 * KiB)
            self.assertIsNone(receiving.tuner)
            self.assertEqual(latent.server.bulk.roundTrips.samples, 0)

    def test_explicitWindowKept(self) -> None:
        """A window given to receive is kept as it is."""
        receiving, _ = Latent().upload(4 * MiB, window=100 * KiB)
        self.assertEqual(receiving.window, 100 * KiB)

    def test_maxWindowChecked(self) -> None:
        """A negative maxWindow is refused."""
        self.assertRaises(ValueError, BulkOptions, maxWindow=-1)


class ProbeIsolationTests(SynchronousTestCase):
    """The channel's probes and the application's or the guard's pings do not see each other's answers."""

    def test_userPongs(self) -> None:
        """An application's pings during a tuned upload get their own answers; the probes were answered too."""
        latent = Latent()
        server: Any = latent.server
        answers: list[float] = []
        server.connection.sendPing().addCallback(answers.append)
        receiving, _ = latent.upload(4 * MiB)
        server.connection.sendPing().addCallback(answers.append)
        latent.pair.runUntil(lambda: False, 1.0)
        self.assertEqual(len(answers), 2)
        self.assertGreater(receiving.window, OPTIONS.window)
        self.assertGreaterEqual(server.bulk.roundTrips.samples, 2)

    def test_guardKeepalive(self) -> None:
        """A guarded bulk server's keepalive pings are answered and keep it up; they are no RTT samples."""
        policy = GuardPolicy(keepaliveInterval=2.0, keepaliveTimeout=1.0, idleTimeout=None, maxConnections=None)
        latent = Latent(guardPolicy=policy)
        server: Any = latent.server
        receiving, _ = latent.upload(4 * MiB)
        samples = server.bulk.roundTrips.samples
        latent.pair.runUntil(lambda: False, 10.0)
        self.assertGreaterEqual(server.connection.guard.pingsSent, 3)
        self.assertIsNone(server.failure)
        self.assertEqual(server.bulk.roundTrips.samples, samples)
        self.assertGreater(receiving.window, OPTIONS.window)


async def loopbackKeepsWindow(reactor: Any) -> None:
    """
    Over loopback TCP with the default options, a stream keeps the configured
    window, even after a busy start; on a machine so loaded that loopback's
    round trip measured 25 ms, the window is tuned by the rule, within its cap.
    """
    store = Store()
    factory = serverFactory(store, options=ServerOptions(bulk=BulkOptions(), guard=None), clock=reactor)
    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory)
    try:
        address = f"tcp:host=127.0.0.1:port={port.getHost().port}"
        root = await rpc.connect(reactor, address, options=ClientOptions(bulk=BulkOptions()))
        try:
            # A busy reactor right after connecting, as a client building its payload would be.
            time.sleep(0.1)
            await root.callRemote("keep", Stream(payload(32 * MiB), digest=None))
            incoming = store.streams[-1]
            result = await incoming.receive(lambda piece: None)
            assert result.size == 32 * MiB
            receiving = incoming.receiver
            assert incoming.broker.bulk.autotuning and incoming.broker.bulk.roundTrips.samples >= 1
            assert receiving is not None
            base = incoming.broker.bulk.roundTrips.base or 0
            if base < MIN_TUNED_RTT:
                # Loopback as it nearly always measures: the tuner was let go once the path showed itself too
                # short to tune, and the window is the configured one.
                assert receiving.tuner is None and receiving.window == BulkOptions().window, receiving.window
            else:
                # Even loopback's round trip took 25 ms (a clone's run beside four busy loops and two test
                # runners measured one): the rule tunes such a path, within its cap, and never lowers a window.
                assert BulkOptions().window <= receiving.window <= BulkOptions().maxWindow, (base, receiving.window)
        finally:
            await root.broker.disconnect()
    finally:
        await factory.disconnectAll()
        await port.stopListening()


class LoopbackTests(TestCase):
    """Autotuning over real loopback TCP (trial runs this; pytest runs the twin below)."""

    test_loopback_keeps_window = trialTest(loopbackKeepsWindow)


test_loopback_keeps_window = pytestTest(loopbackKeepsWindow)
