"""Bulk resources live and die with their owner: stream ids, caps, uploads held by connections, shared digests."""

from __future__ import annotations

import gc
import hashlib
import os
import threading
import time
import weakref
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from framing import Encoder, Limits, Registry
from framing.rpc._wire import CALL, CANCEL, Message, MessageSlicer
from framing.wire import PREAMBLE
from protocols.bulk import BulkOptions, Stream, StreamIdReused, StreamReset, TooManyStreams
from protocols.bulk._channel import SENDING_ACCOUNT, SENDING_STREAM_BYTES, BulkChannel
from protocols.bulk._files import (
    PRIVATE_DIRECTORY,
    Assembly,
    BulkService,
    TooFragmented,
    TooManyUploads,
    UploadBusy,
)
from protocols.bulk._integrity import HashPool, OrderedHasher
from protocols.interop import InteropService
from protocols.rpc import Broker
from tests.protocols.helpers import tracedBytesPer

from .support import FIRST_DIGEST, BulkPair, MemoryNetwork, Store, negotiatedHash, payload, writeFile
from .test_streams import quiet


def partFiles(directory: str) -> list[str]:
    """The partial files of a served directory (in its private directory, and any left beside the files)."""
    private = os.path.join(directory, PRIVATE_DIRECTORY)
    kept = [name for name in os.listdir(private) if name.endswith((".part", ".part.json", ".tmp"))]
    return sorted(kept + [name for name in os.listdir(directory) if ".part" in name])


class StreamIdTests(SynchronousTestCase):
    """A peer's stream ids must be new, and its live streams stay under the cap."""

    def test_idAnnouncedTwice(self) -> None:
        """A stream id announced twice on one connection drops it with stream-id-reused, and releases the first."""
        pair = BulkPair(Store())
        quiet(pair)
        first = pair.root.callRemote("keep", Stream(payload(1000)))
        pair.flush()
        self.successResultOf(first)
        pair.client.bulk.streams.lastSentId = 0  # a client that reuses its id
        second = pair.root.callRemote("keep", Stream(payload(1000)))
        pair.flush()
        self.failureResultOf(second)
        self.assertIsInstance(pair.server.failure.value, StreamIdReused)
        self.assertEqual(pair.server.failure.value.code, "stream-id-reused")
        self.assertEqual(pair.server.bulk.liveIncoming, 0)

    def test_tooManyStreams(self) -> None:
        """One incoming stream past BulkOptions.maxStreams drops the connection with too-many-streams."""
        options = BulkOptions(chunkSize=16 * 1024, window=30 * 1024, grantStep=4 * 1024, maxStreams=2)
        pair = BulkPair(Store(), options=options)
        quiet(pair)
        calls = [pair.root.callRemote("keep", Stream(payload(100))) for _ in range(3)]
        pair.flush()
        self.failureResultOf(calls[2])
        self.assertIsInstance(pair.server.failure.value, TooManyStreams)

    def test_finishedStreamsDoNotCount(self) -> None:
        """Streams that ended (received, or dropped unread) no longer count against the cap."""
        options = BulkOptions(chunkSize=16 * 1024, window=30 * 1024, grantStep=4 * 1024, maxStreams=2)
        pair = BulkPair(Store(), options=options)
        for _ in range(5):
            self.successResultOf(self._call(pair, "upload", Stream(payload(5000))))
            self.successResultOf(self._call(pair, "ignore", Stream(payload(10))))
        gc.collect()  # an unread handle is dropped by its finalizer
        self.assertEqual(pair.server.bulk.liveIncoming, 0)
        self.assertIsNone(pair.server.failure)

    def _call(self, pair: BulkPair, *args: Any) -> Deferred[Any]:
        answer = pair.root.callRemote(*args)
        pair.flush()
        return answer


class UploadOwnerTests(SynchronousTestCase):
    """An unfinished upload belongs to the connections that use it."""

    def setUp(self) -> None:
        self.directory = os.path.abspath(self.mktemp())
        self.service = BulkService(self.directory, maxUploads=3)
        self.network = MemoryNetwork(self.service)

    def connect(self) -> Any:
        root = self.successResultOf(self.network.connect())
        return root, self.network.pairs[-1]

    def call(self, root: Any, *args: Any) -> Deferred[Any]:
        answer = root.callRemote(*args)
        for _ in range(1000):
            if not self.network.step():
                break
        return answer

    def test_emptyUploadsGoWithTheirConnection(self) -> None:
        """Uploads opened and never sent to are closed, forgotten and their files removed when the connection goes."""
        root, pair = self.connect()
        assemblies = []
        for index in range(3):
            self.successResultOf(self.call(root, "openUpload", f"f{index}", 100, "v"))
            assemblies.append(self.service.uploads[f"f{index}"])
        self.assertEqual(len(partFiles(self.directory)), 3)
        self.network.cut(pair)
        self.assertEqual(self.service.uploads, {})
        self.assertEqual(partFiles(self.directory), [])
        self.assertTrue(all(assembly.closed for assembly in assemblies))
        self.assertEqual(self.service.owners.owned, {})

    def test_heldBytesKeptThenSwept(self) -> None:
        """An abandoned upload that holds bytes is closed, kept for a resume, and swept after abandonAfter."""
        root, pair = self.connect()
        data = payload(5000)
        self.successResultOf(self.call(root, "openUpload", "g", len(data), "v"))
        self.successResultOf(self.call(root, "upload", "g", Stream(data, ranges=[(0, 1000)], digest=None)))
        self.network.cut(pair)
        self.assertEqual(self.service.uploads, {})
        self.assertEqual(partFiles(self.directory), ["g.part", "g.part.json"])
        root, pair = self.connect()
        held = self.successResultOf(self.call(root, "openUpload", "g", len(data), "v"))["held"]
        self.assertEqual(held, [[0, 1000]])
        self.network.cut(pair)
        self.assertEqual(self.service.sweep(time.time() + 10), [])
        removed = self.service.sweep(time.time() + self.service.abandonAfter + 1)
        self.assertEqual(sorted(removed), ["g.part", "g.part.json"])
        self.assertEqual(partFiles(self.directory), [])

    def test_tooManyUploads(self) -> None:
        """A connection opening more than maxUploads uploads is refused with TooManyUploads and stays up."""
        root, pair = self.connect()
        for index in range(3):
            self.successResultOf(self.call(root, "openUpload", f"h{index}", 10, "v"))
        self.failureResultOf(self.call(root, "openUpload", "h9", 10, "v"), TooManyUploads)
        self.assertEqual(self.successResultOf(self.call(root, "openUpload", "h0", 10, "v"))["held"], [])
        other, _ = self.connect()
        self.successResultOf(self.call(other, "openUpload", "h9", 10, "v"))

    def test_secondClientCannotRestart(self) -> None:
        """Another connection cannot restart a name being uploaded with another version; the same version joins."""
        first, _ = self.connect()
        second, secondPair = self.connect()
        data = payload(3000)
        self.successResultOf(self.call(first, "openUpload", "i", len(data), "v1"))
        self.successResultOf(self.call(first, "upload", "i", Stream(data, ranges=[(0, 1000)], digest=None)))
        self.failureResultOf(self.call(second, "openUpload", "i", 99, "v2"), UploadBusy)
        self.assertEqual(self.service.uploads["i"].held.total, 1000)
        held = self.successResultOf(self.call(second, "openUpload", "i", len(data), "v1"))["held"]
        self.assertEqual(held, [[0, 1000]])
        self.network.cut(secondPair)
        self.assertIn("i", self.service.uploads)  # the first connection still holds it

    def test_cleanupIsWhatTheConnectionHeld(self) -> None:
        """A lost connection releases its own uploads, one call each, and looks at nobody else's."""
        busy, _ = self.connect()
        for index in range(3):
            self.successResultOf(self.call(busy, "openUpload", f"o{index}", 10, "v"))
        released: list[str] = []
        original = self.service.owners.ownerLost
        self.service.owners.ownerLost = lambda channel, name: (released.append(name), original(channel, name))  # type: ignore[method-assign]
        root, pair = self.connect()
        self.successResultOf(self.call(root, "openUpload", "mine", 10, "v"))
        self.network.cut(pair)
        self.assertEqual(released, ["mine"])
        self.assertEqual(sorted(self.service.uploads), ["o0", "o1", "o2"])

    def test_lastOwnerDecides(self) -> None:
        """An upload used by two connections stays open until both are gone."""
        first, firstPair = self.connect()
        second, secondPair = self.connect()
        self.successResultOf(self.call(first, "openUpload", "j", 10, "v"))
        self.successResultOf(self.call(second, "openUpload", "j", 10, "v"))
        self.network.cut(firstPair)
        self.assertIn("j", self.service.uploads)
        self.network.cut(secondPair)
        self.assertNotIn("j", self.service.uploads)

    def test_cancelledPutFreesItsFile(self) -> None:
        """A put cancelled by the caller (its CANCEL message) closes and removes its temporary file on the server."""
        root, pair = self.connect()
        stream = Stream()  # sends nothing until written to
        call = root.callRemote("put", "k", stream)
        for _ in range(50):
            self.network.step()
        self.assertEqual(len(partFiles(self.directory)), 1)
        # The peer's CANCEL alone (the client's own stream keeps waiting).
        client = root.broker
        client.sendObject(Message((CANCEL, call.requestId)))
        for _ in range(50):
            self.network.step()
        self.assertEqual(partFiles(self.directory), [])
        self.assertEqual(pair.server.bulk.liveIncoming, 0)
        call.cancel()
        self.failureResultOf(call)

    def test_disconnectLeavesNoCycles(self) -> None:
        """After a disconnect the bulk objects of the connection go without a garbage collection."""
        root, pair = self.connect()
        self.successResultOf(self.call(root, "openUpload", "l", 100_000, "v"))
        upload = root.callRemote("upload", "l", Stream(payload(100_000), digest=None))
        put = root.callRemote("put", "m", Stream(payload(100_000)))
        for _ in range(3):
            self.network.step()
        channel = pair.server.bulk
        watched = [weakref.ref(self.service.uploads["l"])]
        watched += [weakref.ref(receiving) for receiving in channel.receivers()]
        watched += [weakref.ref(receiving.sink) for receiving in channel.receivers()]
        self.assertEqual(len(watched), 5)
        del root
        gc.disable()
        try:
            self.network.cut(pair)
            self.failureResultOf(upload)
            self.failureResultOf(put)
            del upload, put
            alive = [ref() for ref in watched]
            self.assertEqual(alive, [None] * len(watched))
        finally:
            gc.enable()
        self.assertEqual(partFiles(self.directory), ["l.part", "l.part.json"])


class ChannelCycleTests(SynchronousTestCase):
    """A bulk channel is freed by reference counting alone once its connection lets it go."""

    def test_channelHoldsNoCycle(self) -> None:
        """
        What the channel holds (its L{Resources}: a logger and how to name
        the peer) does not hold the channel: the hostile peer found one
        channel per closed connection of the interop server alive until a
        garbage collection (42 after an 8 s flood, all freed by one).
        """
        channel = BulkChannel(BulkOptions(), Clock())
        self.assertEqual(channel.resources._peer(), "?")
        ref = weakref.ref(channel)
        gc.collect()
        gc.disable()
        try:
            del channel
            self.assertIsNone(ref())
        finally:
            gc.enable()


class FragmentTests(SynchronousTestCase):
    """An upload's held ranges are capped, and the sidecar grows by what changed."""

    def setUp(self) -> None:
        self.path = os.path.join(os.path.abspath(self.mktemp()), "f.bin")
        os.makedirs(os.path.dirname(self.path))

    def test_fragmentCap(self) -> None:
        """A write making more disjoint ranges than maxFragments fails with TooFragmented; filling holes does not."""
        assembly = Assembly(self.path, 100, "v", maxFragments=3)
        for offset in (0, 10, 20):
            assembly.write(offset, b"x")
        self.assertRaises(TooFragmented, assembly.write, 30, b"x")
        assembly.write(1, b"x" * 9)
        self.assertEqual(len(assembly.held), 3)

    def test_sidecarAppends(self) -> None:
        """Saving after one more range writes one short line, however many ranges are held."""
        assembly = Assembly(self.path, 1_000_000, "v", maxFragments=20_000)
        for offset in range(0, 20_000, 2):
            assembly.write(offset, b"x")
            assembly.save()
        before = os.path.getsize(assembly.sidecarPath)
        assembly.write(500_000, b"y")
        assembly.save()
        self.assertLess(os.path.getsize(assembly.sidecarPath) - before, 20)
        self.assertLess(before, 40 * len(assembly.held))
        self.assertRaises(UploadBusy, Assembly, self.path, 1_000_000, "v")  # one open assembly per file
        assembly.suspend()
        resumed = Assembly(self.path, 1_000_000, "v")
        self.assertEqual(resumed.held, assembly.held)


class DigestCacheTests(SynchronousTestCase):
    """A stored file's digest is computed once, however many ask at once."""

    def test_concurrentStatsShareOneHash(self) -> None:
        """64 concurrent stat calls on one file run one computation and all get its digest."""
        directory = os.path.abspath(self.mktemp())
        service = BulkService(directory)
        data = payload(10_000)
        writeFile(os.path.join(directory, "big"), data)
        gate: Deferred[None] = Deferred()
        computed = []
        original = service.digests.hashFile

        async def slowHash(path: Any) -> bytes:
            computed.append(path)
            await gate
            return await original(path)

        service.digests.hashFile = slowHash  # type: ignore[method-assign]
        answers = [Deferred.fromCoroutine(service.stat("big", [FIRST_DIGEST])) for _ in range(64)]
        self.assertEqual(len(computed), 1)
        gate.callback(None)
        digests = {self.successResultOf(answer)["digest"] for answer in answers}
        self.assertEqual(digests, {negotiatedHash(data).hexdigest()})
        os.unlink(os.path.join(directory, PRIVATE_DIRECTORY, f"big.{FIRST_DIGEST}.digest.json"))
        self.successResultOf(Deferred.fromCoroutine(service.stat("big")))
        self.assertEqual(len(computed), 1)  # kept in memory too


class _Reactor:
    """callFromThread into a list the test thread runs."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.lock = threading.Lock()

    def callFromThread(self, f: Any, *args: Any) -> None:
        with self.lock:
            self.calls.append((f, args))

    def run(self) -> None:
        with self.lock:
            calls, self.calls = self.calls, []
        for f, args in calls:
            f(*args)


class HashPoolTests(SynchronousTestCase):
    """Hashing runs in a bounded pool of threads, never a thread per hasher."""

    def test_bounded(self) -> None:
        """300 hashers at once run in at most the pool's threads, and each digest is right; idle threads end."""
        pool = HashPool(maxThreads=2, idleTimeout=0.2)
        reactor = _Reactor()
        before = threading.active_count()
        results: list[tuple[int, bytes]] = []
        for index in range(300):
            hasher = OrderedHasher("sha256", None, reactor, pool)
            hasher.offer(0, payload(3000, seed=index % 7))
            hasher.finish(3000).addCallback(lambda digest, index=index: results.append((index, digest)))
        peak = 0
        deadline = time.monotonic() + 60  # only a hang takes that long
        while len(results) < 300 and time.monotonic() < deadline:
            peak = max(peak, threading.active_count() - before)
            reactor.run()
            time.sleep(0.005)
        self.assertEqual(len(results), 300)
        self.assertLessEqual(peak, 2)
        # The hashers finish in any order; each one's digest is its own data's.
        expected = [hashlib.sha256(payload(3000, seed=seed)).digest() for seed in range(7)]
        self.assertEqual(sorted(results), [(index, expected[index % 7]) for index in range(300)])
        while pool.threads and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(pool.threads, 0)


class CancelledCallTests(SynchronousTestCase):
    """A cancelled call carrying a stream aborts the stream on both sides."""

    def test_senderStops(self) -> None:
        """Cancelling a put while its stream sends fails the stream at once with StreamReset and closes its source."""
        directory = os.path.abspath(self.mktemp())
        pair = BulkPair(BulkService(os.path.join(directory, "served")))
        source = writeFile(os.path.join(directory, "source.bin"), payload(500_000))
        stream = Stream(source)
        call = pair.root.callRemote("put", "n", stream)
        pair.pump(5)
        self.assertGreater(stream.sentBytes, 0)
        call.cancel()
        self.assertTrue(stream.done)  # at once, not when the receiver answers
        pair.flush()
        self.failureResultOf(call)
        self.assertIsInstance(stream.failure.value, StreamReset)  # type: ignore[union-attr]
        self.assertEqual(partFiles(os.path.join(directory, "served")), [])


class SendingStreamChargeTests(SynchronousTestCase):
    """
    Outgoing streams are charged to the connection's ledger while they wait
    (SENDING_STREAM_BYTES each, at least what one holds), and one without
    room fails its call with resource-exhausted: a peer that asks for
    streams and never reads them (never says HELLO) holds its budget, not
    the server's memory (4,033 such streams in the interop server, uncharged).
    """

    def connect(self, limits: Limits | None = None) -> tuple[Any, StringTransport, list[bytes]]:
        server = Broker(InteropService(Clock(), self.mktemp()), clock=Clock(), limits=limits, bulk=BulkOptions())
        transport = StringTransport()
        server.connection.makeConnection(transport)
        server.connection.dataReceived(PREAMBLE)
        registry = Registry()
        registry.add_slicer(Message, MessageSlicer())
        encoder = Encoder(registry)
        calls = [encoder.encode(Message((CALL, n + 1, 0, "stream", None, f"k{n}", 1 << 30))) for n in range(400)]
        return server, transport, calls

    def test_chargedByWhatItHolds(self) -> None:
        """Each waiting stream is charged SENDING_STREAM_BYTES, no less than it holds (tracemalloc)."""
        server, transport, calls = self.connect()

        def feed(call: bytes) -> None:
            server.connection.dataReceived(call)
            transport.clear()

        held = tracedBytesPer(feed, calls)
        self.assertEqual(len(server.bulk.streams.sending), len(calls))
        self.assertLessEqual(held, SENDING_STREAM_BYTES)
        ledger = server.connection.ledger
        self.assertEqual(ledger.holding(SENDING_ACCOUNT), len(calls) * SENDING_STREAM_BYTES)
        server.connection.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(ledger.held, 0)

    def test_noRoomFailsTheCall(self) -> None:
        """Past the ledger's room a stream is not announced: its call fails with resource-exhausted; reading goes on."""
        budget = 10 * SENDING_STREAM_BYTES + 100
        server, transport, calls = self.connect(Limits(max_connection_memory=budget))
        for call in calls[:15]:
            server.connection.dataReceived(call)
        self.assertEqual(len(server.bulk.streams.sending), 10)
        self.assertEqual(server.connection.ledger.holding(SENDING_ACCOUNT), 10 * SENDING_STREAM_BYTES)
        self.assertEqual(transport.value().count(b"resource-exhausted"), 5)
        self.assertFalse(transport.disconnecting)
        self.assertIsNone(server.connection.failure)
        stream = next(iter(server.bulk.streams.sending.values()))
        stream.abort()  # one over: its charge is released, and another fits
        server.connection.dataReceived(calls[15])
        self.assertEqual(len(server.bulk.streams.sending), 10)
        self.assertEqual(transport.value().count(b"resource-exhausted"), 5)
