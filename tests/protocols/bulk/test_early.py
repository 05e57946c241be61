"""Tests for the initial window: a stream sends at once, its early data is held (bounded) until receive()."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import rpc
from protocols.bulk import BulkOptions, IncomingStream, Stream, StreamReset

from ...delayproxy import DelayProxy
from ...processes import figure
from ..helpers import pytestTest, trialTest
from .support import SMALL, BulkPair, Store, negotiatedHash, payload

CHUNK = SMALL.chunkSize


def hello(pair: BulkPair) -> None:
    """One call first, so both HELLOs are known (the case of an established connection)."""
    pair.root.callRemote("ping")
    pair.flush()


class EarlyDataTests(SynchronousTestCase):
    """What the sender sends before the receiver called receive(): at most the initial window, then kept for it."""

    def test_sentBeforeAnyGrant(self) -> None:
        """With both HELLOs known, a stream's first frame is written with its call, before any answer."""
        pair = BulkPair(Store())
        hello(pair)
        pair.root.callRemote("keep", Stream(payload(CHUNK)))
        pair.clock.advance(0)
        self.assertEqual(pair.client.bulk.framesSent, 1)

    def test_heldUpToInitialWindow(self) -> None:
        """A stream nobody receives yet gets exactly the initial window across, held, then completes on receive()."""
        store = Store()
        pair = BulkPair(store)
        data = payload(5 * CHUNK)
        stream = Stream(data)
        pair.root.callRemote("keep", stream)
        pair.flush()
        self.assertEqual(stream.sentBytes, SMALL.startWindow)
        early = pair.server.bulk.early.get(stream.streamId or 0)
        assert early is not None
        self.assertEqual(early.held, SMALL.startWindow)
        pieces: list[bytes] = []
        done = store.streams[0].receive(pieces.append)
        pair.flush()
        self.assertEqual(self.successResultOf(done).digest, negotiatedHash(data).digest())
        self.assertEqual(b"".join(pieces), data)
        self.assertEqual(len(pair.server.bulk.early), 0)

    def test_endBeforeReceive(self) -> None:
        """A stream within the initial window arrives whole, END included, before receive(), which completes it."""
        store = Store()
        pair = BulkPair(store)
        data = payload(1000)
        stream = Stream(data)
        pair.root.callRemote("keep", stream)
        pair.flush()
        pieces: list[bytes] = []
        done = store.streams[0].receive(pieces.append)
        self.assertEqual(self.successResultOf(done).size, 1000)
        self.assertEqual(b"".join(pieces), data)
        pair.flush()
        self.assertEqual(self.successResultOf(stream.whenDone()).size, 1000)

    def test_noInitialWindow(self) -> None:
        """With initialWindow 0 a stream sends nothing until the receiver's first grant, as before."""
        store = Store()
        pair = BulkPair(store, options=replace(SMALL, initialWindow=0))
        stream = Stream(payload(CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        self.assertEqual(stream.sentBytes, 0)
        store.streams[0].receive(lambda piece: None)
        pair.flush()
        self.assertEqual(stream.sentBytes, CHUNK)

    def test_droppedUnreadFreesHeld(self) -> None:
        """A stream dropped unread frees what it held at once, and the sender stops."""
        pair = BulkPair(Store())
        stream = Stream(payload(5 * CHUNK))
        pair.root.callRemote("ignore", stream)
        pair.flush()
        self.assertEqual(len(pair.server.bulk.early), 0)
        self.assertEqual(self.failureResultOf(stream.whenDone(), StreamReset).value.code, "cancelled")


class UnreadTimeoutTests(SynchronousTestCase):
    """A stream that is announced and kept but never received is dropped after unreadTimeout, with a logged reason."""

    def test_droppedAfterTimeout(self) -> None:
        """After unreadTimeout the held data is freed, the sender fails with unread-timeout, a later receive() too."""
        store = Store()
        pair = BulkPair(store, options=replace(SMALL, unreadTimeout=5.0))
        events: list[dict[str, Any]] = []
        self.patch(pair.server.bulk, "log", Logger(observer=events.append))
        stream = Stream(payload(5 * CHUNK))
        pair.root.callRemote("keep", stream)
        done = stream.whenDone()
        pair.flush()
        pair.clock.advance(4.9)
        pair.flush()
        self.assertNoResult(done)
        pair.clock.advance(0.2)
        pair.flush()
        self.assertEqual(len(pair.server.bulk.early), 0)
        self.assertEqual(self.failureResultOf(done, StreamReset).value.code, "unread-timeout")
        self.assertEqual([event["held"] for event in events], [SMALL.startWindow])
        self.assertIn("not received within", events[0]["log_format"])
        late = self.failureResultOf(store.streams[0].receive(lambda piece: None), StreamReset)
        self.assertEqual(late.value.code, "unread-timeout")

    def test_receivedInTimeNotDropped(self) -> None:
        """A stream received before the timeout is never dropped by it."""
        store = Store()
        pair = BulkPair(store, options=replace(SMALL, unreadTimeout=5.0))
        stream = Stream(payload(3 * CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        done = store.streams[0].receive(lambda piece: None)
        pair.flush()
        pair.clock.advance(10)
        pair.flush()
        self.successResultOf(done)
        self.successResultOf(stream.whenDone())


# -- the first byte through a delay proxy ------------------------------------------------------

DELAY = 0.05
RTT = 2 * DELAY


class FirstByte(rpc.Referenceable):
    """Records when the first piece of a stream reaches its sink, and how many GRANTs the server had sent by then."""

    def __init__(self) -> None:
        self.arrived: float | None = None
        self.grantsBefore: int | None = None
        self._channel: Any = None

    @rpc.remote
    def ping(self) -> str:
        return "pong"

    @rpc.remote
    async def take(self, stream: IncomingStream) -> int:
        self._channel = stream.broker.bulk
        result = await stream.receive(self._piece)
        return result.size

    def _piece(self, data: bytes) -> None:
        if self.arrived is None:
            self.arrived = time.perf_counter()
            self.grantsBefore = self._channel.grantsSent


async def firstByteAfter(reactor: Any, options: BulkOptions | None = None) -> tuple[int, float]:
    """
    Through a 50 ms each way proxy: how many GRANTs the server had sent when
    the first byte of a call's stream reached its sink, and that arrival
    after the call, in RTTs.
    """
    service = FirstByte()
    streams = options or BulkOptions()
    port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", service, options=rpc.ServerOptions(bulk=streams))
    proxy = DelayProxy(reactor, port.getHost().port, DELAY, record=False)
    proxyPort = await proxy.start()
    root = None
    try:
        address = f"tcp:host=127.0.0.1:port={proxyPort}"
        root = await rpc.connect(reactor, address, options=rpc.ClientOptions(bulk=streams))
        assert await root.callRemote("ping") == "pong"  # the path is up, the HELLOs are known
        started = time.perf_counter()
        assert await root.callRemote("take", Stream(payload(64 * 1024))) == 64 * 1024
        assert service.arrived is not None and service.grantsBefore is not None
        return service.grantsBefore, (service.arrived - started) / RTT
    finally:
        if root is not None:
            await root.broker.disconnect()
        await proxy.stop()
        await port.stopListening()
        await port.factory.disconnectAll()  # type: ignore[attr-defined]


async def firstByteHalfRoundTrip(reactor: Any) -> None:
    """
    Through a 100 ms RTT proxy a stream's first byte reaches the sink with
    the call, before the receiver sent any GRANT (so about 0.5 RTT after
    it), not after a grant's round trip as with no initial window (1.5
    RTT).  Judged by the order of events, which load does not change; the
    times are shown as figures.
    """
    grants, quick = await firstByteAfter(reactor)
    windowless, slow = await firstByteAfter(reactor, BulkOptions(initialWindow=0))
    assert grants == 0, f"{grants} GRANTs sent before the first byte arrived"
    assert windowless >= 1, "with no initial window the first byte came before any GRANT"
    figure(f"first byte after its call through a 100 ms RTT: {quick:.2f} RTT; with no initial window {slow:.2f} RTT")


class FirstByteTests(TestCase):
    """The first byte's arrival, measured through the TCP delay proxy (trial)."""

    test_firstByteHalfRoundTrip = trialTest(firstByteHalfRoundTrip)


test_first_byte_half_round_trip = pytestTest(firstByteHalfRoundTrip)
