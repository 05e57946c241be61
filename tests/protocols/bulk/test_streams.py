"""Tests for streams over an in-memory connection: calls, write counts, flow control, integrity, failures."""

from __future__ import annotations

import errno
import io
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionAborted, ConnectionDone, ConnectionLost
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.protocols.basic import FileSender
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, EncodingError, Limits, Registry
from framing.bulk._wire import DATA_OPEN_TYPE, GRANT, Control, DataUnslicer, dataFramePieces
from framing.slicing._registry import DEFAULT_REGISTRY
from framing.wire import PREAMBLE
from protocols.bulk import (
    BulkOptions,
    FlowControlError,
    IncomingStream,
    IntegrityError,
    SeekableSource,
    Stream,
    StreamReset,
    TransferResult,
)
from protocols.bulk._tuning import inlineHashingWindow
from protocols.rpc import Broker, NoSuchMethod, RemoteViolation
from protocols.testing import connectedPair

from .support import (
    FIRST_DIGEST,
    SMALL,
    BulkPair,
    PushProducer,
    SlowConsumer,
    Store,
    negotiatedHash,
    payload,
    writeFile,
)

CHUNK = SMALL.chunkSize
KiB = 1024
MiB = 1024 * KiB


def quiet(pair: BulkPair) -> list[dict[str, Any]]:
    """Send both brokers' log events to a list."""
    events: list[dict[str, Any]] = []
    pair.server.connection.log = pair.client.connection.log = Logger(observer=events.append)
    return events


class CallTests(SynchronousTestCase):
    """A stream travels as a call's argument (an upload) or result (a download)."""

    def test_upload(self) -> None:
        """A stream argument reaches the method as an IncomingStream; its bytes and digest arrive intact."""
        store = Store()
        pair = BulkPair(store)
        data = payload(200_000)
        answer = pair.root.callRemote("upload", Stream(data))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(data).hexdigest())
        self.assertEqual(b"".join(store.pieces), data)
        self.assertIsInstance(store.streams[0], IncomingStream)
        self.assertEqual(store.streams[0].size, len(data))

    def test_download(self) -> None:
        """A stream result arrives as an IncomingStream the caller receives into a file."""
        pair = BulkPair(Store())
        data = payload(150_000, seed=3)
        incoming = pair.root.callRemote("download", data)
        pair.flush()
        stream = self.successResultOf(incoming)
        path = os.path.join(self.mktemp())
        done = stream.receive(path)
        pair.flush()
        result = self.successResultOf(done)
        self.assertEqual(result.digest, negotiatedHash(data).digest())
        with open(path, "rb") as file:
            self.assertEqual(file.read(), data)
        self.assertEqual(os.listdir(os.path.dirname(os.path.abspath(path))), [os.path.basename(path)])

    def test_uploadFile(self) -> None:
        """A file uploaded by path lands, verified, at the path the method names."""
        pair = BulkPair(Store())
        source = writeFile(self.mktemp(), payload(70_000))
        target = os.path.abspath(self.mktemp())
        answer = pair.root.callRemote("uploadTo", target, Stream(source))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), 70_000)
        with open(target, "rb") as file:
            self.assertEqual(file.read(), payload(70_000))

    def test_senderResult(self) -> None:
        """The sender's whenDone fires with the size, digest and bytes carried once the receiver confirms."""
        pair = BulkPair(Store())
        data = payload(50_000)
        stream = Stream(data)
        pair.root.callRemote("upload", stream)
        pair.flush()
        result = self.successResultOf(stream.whenDone())
        self.assertEqual(result, TransferResult(50_000, negotiatedHash(data).digest(), FIRST_DIGEST, 50_000))
        self.assertEqual(pair.client.bulk.streamCount + pair.server.bulk.streamCount, 0)

    def test_emptyStream(self) -> None:
        """An empty stream completes with the digest of nothing."""
        pair = BulkPair(Store())
        answer = pair.root.callRemote("upload", Stream(b""))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(b"").hexdigest())

    def test_noDigest(self) -> None:
        """A stream sent without a digest completes unchecked."""
        pair = BulkPair(Store())
        answer = pair.root.callRemote("upload", Stream(payload(40_000), digest=None))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), "")

    def test_sentOnce(self) -> None:
        """A Stream can be sent only once; sending it again fails that call."""
        pair = BulkPair(Store())
        stream = Stream(b"abc")
        pair.root.callRemote("upload", stream)
        again = pair.root.callRemote("upload", stream)
        self.failureResultOf(again, RuntimeError)
        pair.flush()

    def test_failedEncodeTakesBack(self) -> None:
        """A stream in a call that cannot be encoded is not announced and can be sent later."""
        pair = BulkPair(Store())
        stream = Stream(b"abc")
        self.failureResultOf(pair.root.callRemote("keep", [stream, object()]), EncodingError)
        self.assertIsNone(stream.streamId)
        answer = pair.root.callRemote("upload", stream)
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(b"abc").hexdigest())


class WriteCountTests(SynchronousTestCase):
    """One transport write per chunk: the bzr HPSS rule."""

    def test_oneWritePerChunk(self) -> None:
        """An upload of N chunks is the call, N frame writes of one chunk each, and the end: N + 2 writes."""
        # No autotuning: its one round-trip probe would add a PONG write.
        wide = BulkOptions(chunkSize=CHUNK, window=20 * CHUNK, grantStep=CHUNK, hashing="inline", maxWindow=0)
        pair = BulkPair(Store(), options=wide)
        data = payload(10 * CHUNK)
        pair.flush()
        before = len(pair.pair.clientTransport.writes)
        pair.root.callRemote("upload", Stream(data, digest=None))
        pair.flush()
        writes = pair.pair.clientTransport.writes[before:]
        frames = [w for w in writes if len(w) > CHUNK]
        self.assertEqual(len(frames), 10)
        self.assertEqual(len(writes), 12)
        self.assertEqual(b"".join(w[-CHUNK - 1 : -1] for w in frames), data)
        self.assertEqual(pair.client.bulk.framesSent, 10)

    def test_oneWritePerFrameUnderCredit(self) -> None:
        """With a window under two chunks, every data frame is still exactly one write, whatever its size."""
        pair = BulkPair(Store(), options=replace(SMALL, maxWindow=0))
        data = payload(10 * CHUNK)
        pair.flush()
        before = len(pair.pair.clientTransport.writes)
        pair.root.callRemote("upload", Stream(data, digest=None))
        pair.flush()
        writes = pair.pair.clientTransport.writes[before + 1 : -1]
        self.assertEqual(len(writes), pair.client.bulk.framesSent)
        pieces: list[bytes] = []
        registry = Registry(DEFAULT_REGISTRY)
        target = lambda *_: lambda offset, piece: pieces.append(piece)  # noqa: E731
        registry.add_unslicer(DATA_OPEN_TYPE, lambda limits: DataUnslicer(limits, target))
        decoder = Decoder(registry=registry, preamble=False)
        for count, write in enumerate(writes, 1):
            self.assertEqual(decoder.feed(write), [])
            self.assertTrue(decoder.at_boundary)
            self.assertEqual(decoder.objects_completed, count)
        self.assertEqual(b"".join(pieces), data)

    def test_frameLayout(self) -> None:
        """A frame is the stream id, offset and body between OPEN "bulk.data" and CLOSE, written at once."""
        pieces = dataFramePieces(3, 1 << 20, b"body")
        joined = b"".join(pieces)
        self.assertTrue(joined.startswith(b"\x79bulk.data"))
        self.assertTrue(joined.endswith(b"\x24body\x80"))
        self.assertIs(pieces[1], pieces[1])


class SourceTests(SynchronousTestCase):
    """Every kind of source: random-access, iterables, async iterators, producers."""

    def upload(self, source: Any, expected: bytes, **kwargs: Any) -> tuple[BulkPair, Store]:
        store = Store()
        pair = BulkPair(store)
        answer = pair.root.callRemote("upload", Stream(source, **kwargs))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(expected).hexdigest())
        self.assertEqual(b"".join(store.pieces), expected)
        return pair, store

    def test_fileObject(self) -> None:
        """An open binary file is sent whole, from offset 0."""
        data = payload(60_000)
        file = io.BytesIO(data)
        file.seek(500)
        self.upload(file, data)

    def test_seekableSource(self) -> None:
        """Any SeekableSource is read where the stream needs it."""

        class Zeros(SeekableSource):
            size = 50_000

            def read(self, offset: int, length: int) -> bytes:
                return bytes(min(length, self.size - offset))

        self.upload(Zeros(), bytes(50_000))

    def test_iterable(self) -> None:
        """An iterable of byte strings is sent in order, pieces joined or split into frames."""
        pieces = [payload(n, seed=n) for n in (1, 5000, 40_000, 3, 0, 17_000)]
        self.upload(iter(pieces), b"".join(pieces))

    def test_asyncIterator(self) -> None:
        """An async iterator is pulled as credit allows, its awaits included."""
        pieces = [payload(20_000, seed=i) for i in range(5)]

        async def produce() -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

        self.upload(produce(), b"".join(pieces))

    def test_bodyProducer(self) -> None:
        """An object with startProducing (Twisted's IBodyProducer) writes into the stream; its Deferred ends it."""
        data = payload(90_000)

        class Producer:
            def __init__(self) -> None:
                self.sender = FileSender()

            def startProducing(self, consumer: Any) -> Deferred[Any]:
                return self.sender.beginFileTransfer(io.BytesIO(data), consumer)

            def pauseProducing(self) -> None:
                self.sender.pauseProducing()

            def resumeProducing(self) -> None:
                self.sender.resumeProducing()

            def stopProducing(self) -> None:
                self.sender.stopProducing()

        self.upload(Producer(), data)

    def test_pullProducer(self) -> None:
        """A pull producer (FileSender) registered with the stream is asked for data as it is sent."""
        data = payload(100_000)
        store = Store()
        pair = BulkPair(store)
        stream = Stream()
        FileSender().beginFileTransfer(io.BytesIO(data), stream).addCallback(lambda _: stream.finish())
        answer = pair.root.callRemote("upload", stream)
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(data).hexdigest())

    def test_pushProducerPaused(self) -> None:
        """A push producer is paused once a chunk is buffered and resumed as it is sent."""
        data = payload(200_000)
        store = Store()
        pair = BulkPair(store)
        stream = Stream()
        producer = PushProducer(stream, data, 4096)
        stream.registerProducer(producer, True)
        answer = pair.root.callRemote("upload", stream)
        for _ in range(10_000):
            if producer.step():
                break
            pair.pump()
        stream.finish()
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(data).hexdigest())
        self.assertGreater(producer.pauses, 5)

    def test_declaredSizeChecked(self) -> None:
        """A sequential source that gives another size than declared fails both ends."""
        pair = BulkPair(Store())
        stream = Stream(iter([b"abc"]), size=10)
        answer = pair.root.callRemote("upload", stream)
        pair.flush()
        self.failureResultOf(stream.whenDone(), StreamReset)
        self.failureResultOf(answer, StreamReset)

    def test_sourceFails(self) -> None:
        """A source that raises abandons the stream: the receiver fails and a file sink leaves nothing."""

        def broken() -> Any:
            yield b"x" * 30_000
            raise OSError("the disk went away")

        pair = BulkPair(Store())
        target = os.path.abspath(self.mktemp())
        stream = Stream(broken())
        answer = pair.root.callRemote("uploadTo", target, stream)
        pair.flush()
        self.failureResultOf(stream.whenDone(), OSError)
        failure = self.failureResultOf(answer, StreamReset)
        self.assertEqual(failure.value.code, "source-failed")
        self.assertFalse(os.path.exists(os.path.dirname(target)) and os.listdir(os.path.dirname(target)))

    def test_failuresNameNoLocalFiles(self) -> None:
        """
        A source or a sink that fails with an OSError naming a file abandons
        the stream; the other end is told the errno (its name and text) but
        not the file: where a side keeps its files is not its peer's
        business.  The side that failed gets the error itself.
        """

        def unreadable() -> Any:
            yield b"x" * 30_000
            raise OSError(errno.EIO, os.strerror(errno.EIO), "/home/sender/private/source.bin")

        pair = BulkPair(Store())
        stream = Stream(unreadable())
        answer = pair.root.callRemote("upload", stream)
        pair.flush()
        self.assertIn("/home/sender/private", str(self.failureResultOf(stream.whenDone(), OSError).value))
        told = self.failureResultOf(answer, StreamReset).value
        self.assertEqual((told.code, told.message), ("source-failed", "EIO (Input/output error)"))

        def fullDisk(piece: bytes) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/srv/receiver/.f.bin.part")

        store = Store()
        pair = BulkPair(store)
        stream = Stream(payload(CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        received = store.streams[0].receive(fullDisk)
        pair.flush()
        self.assertIn("/srv/receiver", str(self.failureResultOf(received, OSError).value))
        told = self.failureResultOf(stream.whenDone(), StreamReset).value
        self.assertEqual((told.code, told.message), ("sink-failed", "ENOSPC (No space left on device)"))

    def test_rangesNeedRandomAccess(self) -> None:
        """Ranges can only be given for a random-access source, and must lie inside it."""
        self.assertRaises(ValueError, Stream, iter([b"x"]), ranges=[(0, 1)])
        self.assertRaises(ValueError, Stream, b"abc", ranges=[(2, 5)])
        self.assertRaises(TypeError, Stream, 42)


class FlowControlTests(SynchronousTestCase):
    """Credit per stream: a slow consumer stops its own stream and nothing else."""

    def test_slowConsumerHoldsAtMostWindow(self) -> None:
        """A consumer that stops reading makes the sender stop once the window is used: nothing piles up."""
        store = Store()
        pair = BulkPair(store)
        stream = Stream(payload(40 * CHUNK))
        pair.root.callRemote("uploadSlow", "a", stream)
        pair.flush()
        consumer = store.sinks["a"]
        receiving = pair.server.bulk.receiverFor(stream.streamId)
        self.assertEqual(receiving.sinkReleased, len(consumer.data))
        self.assertLessEqual(stream.sentBytes - len(consumer.data), receiving.window)
        self.assertGreater(stream.sentBytes - len(consumer.data), receiving.window // 2)
        self.assertLess(stream.sentBytes, 4 * CHUNK)

    def test_verifyingReceiverHalvesWindow(self) -> None:
        """A receiver hashing in the reactor thread keeps half the window in flight (the same time, not bytes)."""
        store = Store()
        pair = BulkPair(store)
        checked, unchecked = Stream(payload(10 * CHUNK)), Stream(payload(10 * CHUNK), digest=None)
        pair.root.callRemote("uploadSlow", "checked", checked)
        pair.root.callRemote("uploadSlow", "unchecked", unchecked)
        pair.flush()
        windows = {s: pair.server.bulk.receiverFor(s.streamId).window for s in (checked, unchecked)}
        self.assertEqual(windows, {checked: SMALL.window // 2, unchecked: SMALL.window})

    def test_verifyingReceiverWindowHoldsAReadAndAStep(self) -> None:
        """
        Where one read can take (nearly) all of the halved window, a receiver
        hashing in the reactor thread keeps a read and a grant step instead
        (never more than the window): with the defaults, 960 KiB on a
        connection reading 512 KiB, 1.5 MiB on one reading 1 MiB, and half
        where the read size is not known.
        """
        defaults = BulkOptions()
        self.assertEqual(inlineHashingWindow(defaults, None), 960 * KiB)
        self.assertEqual(inlineHashingWindow(defaults, 512 * KiB), 960 * KiB)
        self.assertEqual(inlineHashingWindow(defaults, MiB), 1536 * KiB)
        self.assertEqual(inlineHashingWindow(replace(defaults, window=MiB), MiB), MiB)

    def test_verifyingReceiverGrantsWithDataInFlight(self) -> None:
        """
        A receiver hashing in the reactor thread whose reads take 1 MiB (the
        steady allocator's read size) grants what each read freed while at
        least a grant step it granted before is still to come: the sender
        is never left with nothing in flight while the receiver writes and
        hashes.  (With the halved window, 960 KiB, every read took all of it
        and every grant found nothing in flight.)
        """
        store = Store()
        pair = BulkPair(store, options=BulkOptions(), maxChunk=MiB)
        channel = pair.server.bulk
        channel.readSize = MiB  # what a TCP connection reading 1 MiB per read says
        inFlight: list[int] = []
        sendControl = channel.sendControl

        def recording(op: int, streamId: Any, *values: Any) -> None:
            receiver = channel.receiverFor(streamId)
            if op == GRANT and values[0] and receiver is not None:
                # Granted before this grant, and not read yet.
                inFlight.append(receiver.granted - values[0] - receiver.received)
            sendControl(op, streamId, *values)

        channel.sendControl = recording  # type: ignore[method-assign]
        data = payload(16 * MiB)
        answer = pair.root.callRemote("upload", Stream(data))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(data).hexdigest())
        self.assertEqual(b"".join(store.pieces), data)
        self.assertGreater(len(inFlight), 10)
        self.assertGreaterEqual(min(inFlight), 384 * KiB, inFlight)

    def test_grantsReadTogetherMakeOneFrame(self) -> None:
        """
        Grants that arrive in one read make one frame of their sum (up to a
        chunk), sent at the end of the turn, not one frame each: a receiver
        grants per piece it frees, so a read that held two half-chunk frames
        brings two grants, and answering each at once kept frames at half a
        chunk for the rest of the stream.
        """
        store = Store()
        pair = BulkPair(store)
        stream = Stream(payload(10 * CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        # Kept, not received: the sender spent the initial window and waits.
        self.assertTrue(stream.waitingForCredit)
        frames, sent = pair.client.bulk.framesSent, stream.sentBytes
        assert stream.streamId is not None
        pair.server.bulk.sendControl(GRANT, stream.streamId, CHUNK // 2)
        pair.server.bulk.sendControl(GRANT, stream.streamId, CHUNK // 2)
        pair.pair.pump()  # both grants, in one read
        pair.clock.advance(0)  # the end of that turn
        self.assertEqual((pair.client.bulk.framesSent - frames, stream.sentBytes - sent), (1, CHUNK))
        store.streams[0].cancel()
        pair.flush()
        self.failureResultOf(stream.whenDone(), StreamReset)

    def test_slowConsumerDrains(self) -> None:
        """Draining a paused consumer returns credit and the transfer completes, intact."""
        store = Store()
        pair = BulkPair(store)
        data = payload(20 * CHUNK)
        answer = pair.root.callRemote("uploadSlow", "a", Stream(data))
        pair.flush()
        while not answer.called:
            store.sinks["a"].drain()
            pair.flush()
        self.assertEqual(self.successResultOf(answer), len(data))
        self.assertEqual(store.sinks["a"].data, data)
        self.assertTrue(store.sinks["a"].unregistered)

    def test_pausePerStream(self) -> None:
        """With two streams on one connection, pausing one consumer leaves the other running to the end."""
        store = Store()
        pair = BulkPair(store)
        slow = Stream(payload(30 * CHUNK))
        fast = Stream(payload(30 * CHUNK, seed=9))
        slowAnswer = pair.root.callRemote("uploadSlow", "slow", slow)
        fastAnswer = pair.root.callRemote("upload", fast)
        pair.flush()
        self.assertEqual(self.successResultOf(fastAnswer), negotiatedHash(payload(30 * CHUNK, seed=9)).hexdigest())
        self.assertNoResult(slowAnswer)
        self.assertLessEqual(slow.sentBytes - len(store.sinks["slow"].data), SMALL.window)

    def test_smallCallDuringPausedTransfer(self) -> None:
        """A small call completes while a big transfer on the same connection is paused by a slow consumer."""
        store = Store()
        pair = BulkPair(store)
        big = Stream(payload(1000 * CHUNK))
        answer = pair.root.callRemote("uploadSlow", "big", big)
        pair.flush()
        for _ in range(3):
            ping = pair.root.callRemote("ping")
            pair.flush()
            self.assertEqual(self.successResultOf(ping), "pong")
        self.assertNoResult(answer)
        self.assertLessEqual(big.sentBytes - len(store.sinks["big"].data), SMALL.window)

    def test_interleavedWithCalls(self) -> None:
        """While a stream flows, calls made between its frames are answered before it ends."""
        store = Store()
        pair = BulkPair(store)
        big = Stream(payload(200 * CHUNK), digest=None)
        answer = pair.root.callRemote("upload", big)
        answered = []
        for _ in range(20):
            pair.pump(3)
            pair.root.callRemote("ping").addCallback(answered.append)
        pair.pump(10)
        self.assertGreater(len(answered), 10)
        self.assertLess(big.sentBytes, 200 * CHUNK)
        pair.flush()
        self.successResultOf(answer)

    def test_creditRespected(self) -> None:
        """The sender never has more than the window in flight, frame after frame."""
        store = Store()
        pair = BulkPair(store)
        stream = Stream(payload(50 * CHUNK))
        pair.root.callRemote("upload", stream)
        for _ in range(200):
            pair.pump()
            receiving = pair.server.bulk.receiverFor(stream.streamId)
            if receiving is not None:
                self.assertLessEqual(stream.sentBytes - receiving.sinkReleased, SMALL.window)
        pair.flush()
        self.successResultOf(stream.whenDone())

    def test_windowSmallerThanChunk(self) -> None:
        """A receiver window smaller than the sender's chunk makes smaller frames, not a stall."""
        options = BulkOptions(chunkSize=64 * 1024, window=10_000, grantStep=2000, hashing="inline")
        pair = BulkPair(Store(), options=options)
        data = payload(100_000)
        answer = pair.root.callRemote("upload", Stream(data))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(data).hexdigest())

    def test_flowControlViolation(self) -> None:
        """A peer that sends data it was not granted has its connection dropped."""
        pair = BulkPair(Store())
        events = quiet(pair)
        stream = Stream(payload(CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        # A stream id of its own (ids must increase), with a tiny window.
        streamId = (stream.streamId or 0) + 100
        incoming = pair.server.bulk.announcementReceived((streamId, CHUNK, None))  # type: ignore[arg-type]
        receiving = incoming.receive(lambda data: None, window=100)
        pair.client.transport.writeSequence(dataFramePieces(streamId, 0, b"x" * (SMALL.startWindow + 1)))
        pair.client.transport.flush()
        pair.flush()
        self.assertIsInstance(pair.server.failure.value, FlowControlError)
        self.failureResultOf(receiving, FlowControlError)
        self.assertTrue(any("flow-control" in str(event.get("code")) for event in events))


class IntegrityTests(SynchronousTestCase):
    """A corrupted transfer is an error on both sides, and never presented as complete."""

    def corrupt(self, pair: BulkPair) -> None:
        """Flip one byte in the middle of the first big write waiting on the client side."""
        # The frames the grants just delivered allow leave at the end of the turn.
        pair.clock.advance(0)
        outgoing = pair.pair.clientTransport.outgoing
        for index, data in enumerate(outgoing):
            if data.startswith(b"\x79bulk.data") and len(data) > 1000:
                middle = len(data) // 2
                outgoing[index] = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
                return
        raise AssertionError("no frame to corrupt")

    def test_mismatch(self) -> None:
        """A byte flipped in transit fails the receiver and the sender with IntegrityError; no file appears."""
        pair = BulkPair(Store())
        target = os.path.abspath(self.mktemp())
        stream = Stream(payload(5 * CHUNK))
        answer = pair.root.callRemote("uploadTo", target, stream)
        pair.pump(2)
        self.corrupt(pair)
        pair.flush()
        failure = self.failureResultOf(answer, IntegrityError)
        self.assertIn("mismatch", str(failure.value))
        self.failureResultOf(stream.whenDone(), IntegrityError)
        directory = os.path.dirname(target)
        self.assertEqual(os.listdir(directory) if os.path.exists(directory) else [], [])

    def test_consumerToldNothingComplete(self) -> None:
        """With a consumer sink, a mismatch fails the receive, so the application knows to drop what it got."""
        store = Store()
        pair = BulkPair(store)
        stream = Stream(payload(5 * CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        consumer = SlowConsumer(pauseEvery=1_000_000)
        done = store.streams[0].receive(consumer)
        pair.pump(2)
        self.corrupt(pair)
        pair.flush()
        self.failureResultOf(done, IntegrityError)
        self.assertTrue(consumer.unregistered)


class CancelTests(SynchronousTestCase):
    """Either side giving up, and connections going away."""

    def test_droppedUnread(self) -> None:
        """A stream the receiver drops unread fails the sender with StreamReset "cancelled"."""
        pair = BulkPair(Store())
        stream = Stream(payload(CHUNK))
        pair.root.callRemote("ignore", stream)
        pair.flush()
        failure = self.failureResultOf(stream.whenDone(), StreamReset)
        self.assertEqual(failure.value.code, "cancelled")

    def test_refusedCallFailsStream(self) -> None:
        """A stream in a call the peer refused before reading it fails with the call, instead of waiting."""
        clock = Clock()
        server = Broker(Store(), clock=clock, bulk=SMALL, limits=Limits(max_bytes_length=1000))
        client = Broker(clock=clock, bulk=SMALL)
        pair = connectedPair(server, client)
        stream = Stream(b"abc")
        answer = client.rootReference().callRemote("keep", [b"x" * 5000, stream])
        for _ in range(10):
            clock.advance(0)
            pair.flush()
        self.failureResultOf(answer, RemoteViolation)
        failure = self.failureResultOf(stream.whenDone(), StreamReset)
        self.assertIn("the call carrying the stream failed", str(failure.value))

    def test_unknownMethodCancelsStream(self) -> None:
        """A stream sent to a method that does not exist is cancelled by the receiver as it is dropped."""
        pair = BulkPair(Store())
        stream = Stream(b"abc")
        answer = pair.root.callRemote("nothingHere", stream)
        pair.flush()
        self.failureResultOf(answer, NoSuchMethod)
        self.failureResultOf(stream.whenDone(), StreamReset)

    def test_receiverCancels(self) -> None:
        """Cancelling mid-way stops the sender; frames in flight are dropped on arrival."""
        store = Store()
        pair = BulkPair(store)
        stream = Stream(payload(100 * CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        got: list[bytes] = []
        done = store.streams[0].receive(got.append)
        pair.pump(3)
        store.streams[0].cancel()
        pair.flush()
        self.failureResultOf(done, StreamReset)
        self.failureResultOf(stream.whenDone(), StreamReset)
        self.assertLess(stream.sentBytes, 100 * CHUNK)
        self.assertEqual(pair.client.bulk.streamCount + pair.server.bulk.streamCount, 0)

    def test_longReasonStillCancels(self) -> None:
        """A cancel whose reason is long non-ASCII text still reaches the sender, cut to 512 bytes of UTF-8."""
        store = Store()
        pair = BulkPair(store)
        stream = Stream(payload(100 * CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        store.streams[0].cancel("é" * 600)
        pair.flush()
        failure = self.failureResultOf(stream.whenDone(), StreamReset)
        self.assertEqual(failure.value.code, "cancelled")
        self.assertEqual(failure.value.message, "é" * 256)

    def test_longReasonStillAborts(self) -> None:
        """An abort whose reason is long non-ASCII text still reaches the receiver."""
        store = Store()
        pair = BulkPair(store)
        stream = Stream(payload(100 * CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        done = store.streams[0].receive(lambda data: None)
        pair.pump(3)
        stream.abort("€" * 600)
        pair.flush()
        self.assertEqual(self.failureResultOf(done, StreamReset).value.code, "cancelled")

    def test_writesAfterFailureDropped(self) -> None:
        """Once a stream has failed, what a producer still writes is dropped, not kept."""
        store = Store()
        pair = BulkPair(store)
        stream = Stream()
        pair.root.callRemote("keep", stream)
        pair.flush()
        done = store.streams[0].receive(lambda data: None)
        store.streams[0].cancel()
        pair.flush()
        self.failureResultOf(done, StreamReset)
        stream.write(b"x" * 100_000)
        self.assertEqual(stream.buffered, 0)

    def test_receiveOnClosedConnection(self) -> None:
        """Receiving a stream whose connection is already gone fails at once."""
        store = Store()
        pair = BulkPair(store)
        pair.root.callRemote("keep", Stream(b"abc"))
        pair.flush()
        pair.pair.clientTransport.abortConnection()
        pair.flush()
        self.failureResultOf(store.streams[0].receive(lambda data: None), ConnectionDone)

    def test_senderAborts(self) -> None:
        """A sender that aborts fails the receiver with StreamReset."""
        store = Store()
        pair = BulkPair(store)
        stream = Stream(payload(100 * CHUNK))
        pair.root.callRemote("keep", stream)
        pair.flush()
        done = store.streams[0].receive(lambda data: None)
        pair.pump(3)
        stream.abort()
        pair.flush()
        self.failureResultOf(done, StreamReset)

    def test_connectionLost(self) -> None:
        """Losing the connection fails every stream on both sides; a partial file is removed."""
        store = Store()
        pair = BulkPair(store)
        target = os.path.abspath(self.mktemp())
        os.makedirs(os.path.dirname(target), exist_ok=True)
        stream = Stream(payload(100 * CHUNK))
        answer = pair.root.callRemote("uploadTo", target, stream)
        pair.pump(5)
        pair.pair.clientTransport.abortConnection()
        pair.flush()
        self.failureResultOf(stream.whenDone(), ConnectionAborted)
        self.failureResultOf(answer, ConnectionLost)
        self.assertEqual(os.listdir(os.path.dirname(target)), [])

    def test_sequentialSinkOutOfOrder(self) -> None:
        """Ranges sent to a sink that needs order are refused with StreamReset "out-of-order"."""
        pair = BulkPair(Store())
        stream = Stream(payload(3 * CHUNK), ranges=[(CHUNK, 3 * CHUNK)])
        answer = pair.root.callRemote("upload", stream)
        pair.flush()
        self.assertEqual(self.failureResultOf(answer, StreamReset).value.code, "out-of-order")

    def test_preambleOnlyOnce(self) -> None:
        """The connection starts with one preamble whatever streams follow."""
        pair = BulkPair(Store())
        pair.root.callRemote("upload", Stream(b"x"))
        pair.flush()
        self.assertEqual(b"".join(pair.pair.clientTransport.writes).count(PREAMBLE), 1)
        self.assertIsInstance(Control((0, 1, 2)), tuple)
