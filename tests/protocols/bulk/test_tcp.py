"""Bulk transfer over real loopback TCP, with hashing threads: trial and pytest-twisted run the same bodies."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from typing import Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from protocols import rpc
from protocols.bulk import BulkOptions, IncomingStream, Stream
from protocols.bulk._files import Assembly, AssemblySink, BulkService, fetchFile, sendFile
from protocols.bulk._sinks import Release, Sink
from protocols.testing import recordWrites

from ..helpers import pytestTest, trialTest
from .support import SlowConsumer, Store, negotiatedHash, payload, writeFile

OPTIONS = BulkOptions(chunkSize=256 * 1024, window=480 * 1024, grantStep=64 * 1024)
"""Smaller than the defaults, so a few megabytes exercise many frames and grants."""


class Served:
    """A bulk service on an ephemeral loopback port, and connections to it; close() undoes it all."""

    def __init__(self, reactor: Any, root: Any, options: BulkOptions = OPTIONS) -> None:
        self.reactor = reactor
        self.root = root
        self.options = options
        self.roots: list[Any] = []
        self.port: Any = None

    async def start(self) -> Served:
        self.factory = rpc.serverFactory(
            self.root, options=rpc.ServerOptions(bulk=self.options, guard=None), clock=self.reactor
        )
        from twisted.internet.endpoints import TCP4ServerEndpoint

        self.port = await TCP4ServerEndpoint(self.reactor, 0, interface="127.0.0.1").listen(self.factory)
        return self

    def connect(self) -> Deferred[Any]:
        description = f"tcp:host=127.0.0.1:port={self.port.getHost().port}"
        connected = rpc.connect(self.reactor, description, options=rpc.ClientOptions(bulk=self.options))
        return connected.addCallback(self._keep)

    def _keep(self, root: Any) -> Any:
        self.roots.append(root)
        return root

    async def close(self) -> None:
        await gatherResults([root.broker.disconnect() for root in self.roots])
        await self.factory.disconnectAll()
        await self.port.stopListening()


async def uploadAndDownload(reactor: Any) -> None:
    """Over TCP, a stream goes up as a call argument and comes back as a call result, digest verified."""
    served = await Served(reactor, Store()).start()
    try:
        root = await served.connect()
        data = payload(3_000_000)
        digest = await root.callRemote("upload", Stream(data))
        assert digest == negotiatedHash(data).hexdigest()
        incoming = await root.callRemote("download", data)
        pieces: list[bytes] = []
        result = await incoming.receive(pieces.append)
        assert result.digest == negotiatedHash(data).digest()
        assert b"".join(pieces) == data
    finally:
        await served.close()


async def oneWritePerFrame(reactor: Any) -> None:
    """Over TCP, every data frame reaches the socket transport in exactly one write."""
    served = await Served(reactor, Store()).start()
    try:
        root = await served.connect()
        writes = recordWrites(root.broker.transport.transport)
        stream = Stream(payload(2_000_000), digest=None)
        await root.callRemote("upload", stream)
        frames = [w for w in writes if w.startswith(b"\x79bulk.data")]
        assert len(frames) == root.broker.bulk.framesSent, (len(frames), root.broker.bulk.framesSent)
        assert sum(len(w) for w in frames) < 2_000_000 + 30 * len(frames)
    finally:
        await served.close()


async def readSizeSizesInlineWindow(reactor: Any) -> None:
    """
    Over TCP, each end knows the size of its socket's reads, and a receiver
    hashing in the reactor thread whose read could take (nearly) all of the
    halved window keeps a read and a grant step instead: with 480 KiB
    windows, 64 KiB steps and 256 KiB reads, 320 KiB, not 240 KiB.
    """
    options = replace(OPTIONS, readSize=256 * 1024, hashing="inline")
    store = Store()
    served = await Served(reactor, store, options).start()
    try:
        root = await served.connect()
        data = payload(2_000_000)
        assert await root.callRemote("upload", Stream(data)) == negotiatedHash(data).hexdigest()
        assert root.broker.bulk.readSize == 256 * 1024
        receiver = store.streams[0].receiver
        assert receiver is not None and receiver.window == 320 * 1024, receiver
    finally:
        await served.close()


async def callsDuringPausedTransfer(reactor: Any) -> None:
    """Over TCP, small calls are answered while a large upload is held back by a slow consumer."""
    store = Store()
    served = await Served(reactor, store).start()
    try:
        root = await served.connect()
        big = Stream(payload(20 * OPTIONS.chunkSize))
        answer = root.callRemote("uploadSlow", "big", big)
        deadline = time.monotonic() + 60  # the upload is under way (only a hang takes 60 s)
        while "big" not in store.sinks and time.monotonic() < deadline:
            await deferLater(reactor, 0.005, lambda: None)
        for _ in range(20):
            assert await root.callRemote("ping") == "pong"
        assert not answer.called
        consumer: SlowConsumer = store.sinks["big"]
        assert big.sentBytes - len(consumer.data) <= OPTIONS.window
        while not answer.called:
            consumer.drain()
            await deferLater(reactor, 0.001, lambda: None)
        assert await answer == 20 * OPTIONS.chunkSize
    finally:
        await served.close()


async def hashingThreads(reactor: Any) -> None:
    """With hashing in worker threads, both ends still verify every byte, both ways."""
    threaded = BulkOptions(chunkSize=256 * 1024, window=480 * 1024, grantStep=64 * 1024, hashing="thread")
    factory = rpc.serverFactory(Store(), options=rpc.ServerOptions(bulk=threaded, guard=None), clock=reactor)
    from twisted.internet.endpoints import TCP4ServerEndpoint

    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory)
    address = f"tcp:host=127.0.0.1:port={port.getHost().port}"
    root = await rpc.connect(reactor, address, options=rpc.ClientOptions(bulk=threaded))
    try:
        assert root.broker.bulk.hashReactor is reactor
        data = payload(4_000_000, seed=6)
        assert await root.callRemote("upload", Stream(data)) == negotiatedHash(data).hexdigest()
        incoming = await root.callRemote("download", data)
        result = await incoming.receive(lambda piece: None)
        assert result.digest == negotiatedHash(data).digest()
    finally:
        await root.broker.disconnect()
        await factory.disconnectAll()
        await port.stopListening()


class CuttingSink(Sink):
    """An assembly sink that aborts its connection each time the upload passes the next threshold."""

    sequential = False
    verifies = True

    def __init__(self, service: CuttingService, assembly: Assembly, stream: IncomingStream) -> None:
        self.service = service
        self.inner = AssemblySink(assembly)
        self.stream = stream

    def write(self, offset: int, data: bytes, release: Release) -> None:
        self.inner.write(offset, data, release)
        thresholds = self.service.thresholds
        if thresholds and self.inner.assembly.held.total >= thresholds[0]:
            thresholds.pop(0)
            self.stream.broker.transport.abortConnection()

    def complete(self) -> None:
        self.inner.complete()

    def fail(self, reason: BaseException) -> None:
        self.inner.fail(reason)


class CuttingService(BulkService):
    """A service whose uploads are cut at given byte counts."""

    def __init__(self, directory: str, thresholds: list[int]) -> None:
        super().__init__(directory)
        self.thresholds = thresholds

    def uploadSink(self, assembly: Assembly, stream: IncomingStream) -> Sink:
        return CuttingSink(self, assembly, stream)


async def resumeAfterCuts(reactor: Any) -> None:
    """Over TCP, an upload cut five times resumes each time and resends under two chunks per cut."""
    with tempfile.TemporaryDirectory() as directory:
        size = 40 * OPTIONS.chunkSize
        service = CuttingService(os.path.join(directory, "served"), [size * k // 7 for k in range(1, 6)])
        service.reactor = reactor
        served = await Served(reactor, service).start()
        try:
            source = writeFile(os.path.join(directory, "source.bin"), payload(size, seed=2))
            result = await sendFile(served.connect, source, "cut.bin", clock=reactor, retryDelay=0.01)
            assert result.cuts == 5, result
            assert result.digest == negotiatedHash(payload(size, seed=2)).digest()
            assert (result.payload - size) / result.cuts < 2 * OPTIONS.chunkSize, result
        finally:
            await served.close()


async def stripedBothWays(reactor: Any) -> None:
    """Over TCP, a file goes up and comes back striped over three connections, verified both times."""
    with tempfile.TemporaryDirectory() as directory:
        service = BulkService(os.path.join(directory, "served"), reactor=reactor)
        served = await Served(reactor, service).start()
        try:
            data = payload(5_000_000, seed=4)
            source = writeFile(os.path.join(directory, "source.bin"), data)
            sent = await sendFile(served.connect, source, "s.bin", streams=3, clock=reactor)
            assert len(served.roots) == 3
            target = os.path.join(directory, "back.bin")
            fetched = await fetchFile(served.connect, "s.bin", target, streams=3, clock=reactor)
            assert sent.digest == fetched.digest == negotiatedHash(data).digest()
            with open(target, "rb") as file:
                assert file.read() == data
        finally:
            await served.close()


class BulkOverTCPTests(TestCase):
    """Bulk transfer over loopback TCP (trial)."""

    test_upload_and_download = trialTest(uploadAndDownload)
    test_one_write_per_frame = trialTest(oneWritePerFrame)
    test_read_size_sizes_inline_window = trialTest(readSizeSizesInlineWindow)
    test_calls_during_paused_transfer = trialTest(callsDuringPausedTransfer)
    test_resume_after_cuts = trialTest(resumeAfterCuts)
    test_striped_both_ways = trialTest(stripedBothWays)
    test_hashing_threads = trialTest(hashingThreads)


test_upload_and_download = pytestTest(uploadAndDownload)
test_one_write_per_frame = pytestTest(oneWritePerFrame)
test_read_size_sizes_inline_window = pytestTest(readSizeSizesInlineWindow)
test_calls_during_paused_transfer = pytestTest(callsDuringPausedTransfer)
test_resume_after_cuts = pytestTest(resumeAfterCuts)
test_striped_both_ways = pytestTest(stripedBothWays)
test_hashing_threads = pytestTest(hashingThreads)
