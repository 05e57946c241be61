"""Tests for the negotiated digest: each side's HELLO lists its digests, a stream uses the first both share."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from framing.bulk import _digests as digests_module
from protocols.bulk import (
    BLAKE3,
    BulkOptions,
    DigestUnavailable,
    IntegrityError,
    Stream,
    availableDigests,
)
from protocols.bulk._files import Assembly, BulkService, recordedAlgorithm, sendFile
from protocols.bulk._integrity import checkAlgorithm, newHash
from protocols.rpc import RemoteViolation

from .support import SMALL, BulkPair, MemoryNetwork, Store, payload, writeFile

CHUNK = SMALL.chunkSize
BOTH = (BLAKE3, "sha256")


def digestOf(algorithm: str, data: bytes) -> bytes:
    hasher = newHash(algorithm)
    hasher.update(data)
    digest: bytes = hasher.digest()
    return digest


def pairOf(server: tuple[str, ...], client: tuple[str, ...]) -> tuple[BulkPair, Store]:
    """A pair whose server and client list C{server} and C{client} digests."""
    store = Store()
    pair = BulkPair(store, options=replace(SMALL, digests=server))
    pair.client.bulk.options = replace(SMALL, digests=client)
    return pair, store


def corrupt(pair: BulkPair) -> None:
    """Flip one byte in the middle of the first big data frame waiting on the client side."""
    # The frames the grants just delivered allow leave at the end of the turn.
    pair.clock.advance(0)
    outgoing = pair.pair.clientTransport.outgoing
    for index, data in enumerate(outgoing):
        if data.startswith(b"\x79bulk.data") and len(data) > 1000:
            middle = len(data) // 2
            outgoing[index] = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
            return
    raise AssertionError("no frame to corrupt")


class AvailabilityTests(SynchronousTestCase):
    """Which digests a process has, and what it does without the blake3 package."""

    def test_blake3First(self) -> None:
        """With the blake3 package installed, BLAKE3 comes first and SHA-256 second."""
        self.assertEqual(availableDigests(), BOTH)
        self.assertEqual(BulkOptions().digests, BOTH)

    def test_withoutBlake3(self) -> None:
        """Without the blake3 package, only SHA-256 is offered, and asking for BLAKE3 is a DigestUnavailable."""
        self.patch(digests_module, "_blake3", None)
        self.assertEqual(availableDigests(), ("sha256",))
        self.assertEqual(BulkOptions().digests, ("sha256",))
        self.assertRaises(DigestUnavailable, checkAlgorithm, BLAKE3)
        self.assertRaises(DigestUnavailable, Stream, b"x", digest=BLAKE3)
        self.assertRaises(DigestUnavailable, BulkOptions, digests=(BLAKE3,))

    def test_unknownDigestRefused(self) -> None:
        """A name no library computes is refused when the options are made."""
        self.assertRaises(DigestUnavailable, BulkOptions, digests=("md17",))
        self.assertRaises(DigestUnavailable, BulkOptions, digests=())


class NegotiationTests(SynchronousTestCase):
    """Both ends check a stream with the first digest of the sender's list that the receiver has."""

    def upload(self, pair: BulkPair, store: Store, data: bytes) -> tuple[Any, Stream]:
        stream = Stream(data)
        answer = pair.root.callRemote("upload", stream)
        pair.flush()
        return self.successResultOf(answer), stream

    def test_eachAlgorithm(self) -> None:
        """Two ends that both list only BLAKE3, or only SHA-256, verify with it, and both results name it."""
        data = payload(3 * CHUNK + 5)
        for algorithm in BOTH:
            pair, store = pairOf((algorithm,), (algorithm,))
            digest, stream = self.upload(pair, store, data)
            self.assertEqual(digest, digestOf(algorithm, data).hex())
            self.assertEqual(self.successResultOf(stream.whenDone()).algorithm, algorithm)

    def test_defaultIsBlake3(self) -> None:
        """Two default ends choose BLAKE3, for the first stream on a connection and for the next."""
        pair, store = pairOf(BOTH, BOTH)
        data = payload(2 * CHUNK)
        for _ in range(2):
            digest, stream = self.upload(pair, store, data)
            self.assertEqual(digest, digestOf(BLAKE3, data).hex())
            self.assertEqual(self.successResultOf(stream.whenDone()).algorithm, BLAKE3)

    def test_mixedPair(self) -> None:
        """A client without blake3 and a server with it agree on SHA-256 both ways: upload and download."""
        pair, store = pairOf(BOTH, ("sha256",))
        data = payload(2 * CHUNK + 1)
        digest, stream = self.upload(pair, store, data)
        self.assertEqual(digest, hashlib.sha256(data).hexdigest())
        self.assertEqual(self.successResultOf(stream.whenDone()).algorithm, "sha256")
        incoming = pair.root.callRemote("download", data)
        pair.flush()
        received = self.successResultOf(incoming)
        self.assertEqual(received.digestName, "sha256")
        pieces: list[bytes] = []
        done = received.receive(pieces.append)
        pair.flush()
        result = self.successResultOf(done)
        self.assertEqual((result.algorithm, result.digest), ("sha256", hashlib.sha256(data).digest()))

    def test_mixedPairPatched(self) -> None:
        """A side made while the blake3 package is missing (patched away) and a default side agree on SHA-256."""
        store = Store()
        pair = BulkPair(store, options=replace(SMALL, digests=BOTH))
        self.patch(digests_module, "_blake3", None)
        pair.client.bulk.options = BulkOptions(chunkSize=CHUNK, window=SMALL.window, grantStep=SMALL.grantStep)
        data = payload(CHUNK + 3)
        stream = Stream(data)
        answer = pair.root.callRemote("upload", stream)
        pair.flush()
        self.assertEqual(self.successResultOf(answer), hashlib.sha256(data).hexdigest())

    def test_corruptedByteCaughtUnderEach(self) -> None:
        """A byte flipped in transit fails both ends with IntegrityError under BLAKE3 and under SHA-256."""
        for algorithm in BOTH:
            pair, store = pairOf((algorithm,), BOTH)
            stream = Stream(payload(5 * CHUNK))
            answer = pair.root.callRemote("upload", stream)
            pair.pump(2)
            corrupt(pair)
            pair.flush()
            failure = self.failureResultOf(answer, IntegrityError)
            self.assertIn(f"{algorithm} mismatch", str(failure.value))
            self.failureResultOf(stream.whenDone(), IntegrityError)


class DemandTests(SynchronousTestCase):
    """A peer that demands a digest the other lacks gets a typed error, and no data moves."""

    def test_demandKnownLacking(self) -> None:
        """Once the server's HELLO is known, a stream demanding BLAKE3 of a server without it fails its call locally."""
        pair, store = pairOf(("sha256",), BOTH)
        self.successResultOf(self.ping(pair))
        stream = Stream(payload(CHUNK), digest=BLAKE3)
        answer = pair.root.callRemote("upload", stream)
        pair.flush()
        failure = self.failureResultOf(answer, DigestUnavailable)
        self.assertIn("does not accept blake3", str(failure.value))
        self.assertEqual(pair.client.bulk.framesSent, 0)
        self.assertEqual(store.streams, [])

    def test_demandFirstMessage(self) -> None:
        """A demand in the connection's first message is refused by the server (a violation); no data is sent."""
        pair, store = pairOf(("sha256",), BOTH)
        stream = Stream(payload(CHUNK), digest=BLAKE3)
        answer = pair.root.callRemote("upload", stream)
        pair.flush()
        failure = self.failureResultOf(answer, RemoteViolation)
        self.assertIn("digest-unavailable", str(failure.value))
        self.failureResultOf(stream.whenDone(), DigestUnavailable)
        self.assertEqual(pair.client.bulk.framesSent, 0)

    def test_nothingInCommon(self) -> None:
        """Two ends that share no digest: the first stream is refused by the receiver, the next one by the sender."""
        pair, store = pairOf(("sha256",), (BLAKE3,))
        first = pair.root.callRemote("upload", Stream(payload(CHUNK)))
        pair.flush()
        self.failureResultOf(first, RemoteViolation)
        second = pair.root.callRemote("upload", Stream(payload(CHUNK)))
        pair.flush()
        self.failureResultOf(second, DigestUnavailable)
        self.assertEqual(pair.client.bulk.framesSent, 0)
        # The connection is still good for calls.
        self.assertEqual(self.successResultOf(self.ping(pair)), "pong")

    def ping(self, pair: BulkPair) -> Any:
        answer = pair.root.callRemote("ping")
        pair.flush()
        return answer


class FileServiceTests(SynchronousTestCase):
    """The file service checks files with the negotiated digest and records it in the resume sidecar."""

    def setUp(self) -> None:
        self.directory = os.path.abspath(self.mktemp())
        os.makedirs(self.directory)
        self.data = payload(6 * CHUNK + 7)
        self.source = writeFile(os.path.join(self.directory, "source.bin"), self.data)

    def send(self, digests: list[str] | None) -> Any:
        service = BulkService(os.path.join(self.directory, "served"))
        network = MemoryNetwork(service)
        done = sendFile(network.connect, self.source, "f.bin", clock=network.clock, digests=digests)
        return network.run(Deferred.fromCoroutine(done))

    def test_sendEach(self) -> None:
        """sendFile offering only SHA-256, or the default list, is verified with that digest, named in its result."""
        for digests, algorithm in ((["sha256"], "sha256"), (None, BLAKE3)):
            result = self.send(digests)
            self.assertEqual((result.algorithm, result.digest), (algorithm, digestOf(algorithm, self.data)))

    def test_sidecarRecordsAlgorithm(self) -> None:
        """An assembly's sidecar records its digest algorithm."""
        target = os.path.join(self.directory, "a.bin")
        assembly = Assembly(target, len(self.data), "v1", BLAKE3)
        assembly.write(0, self.data[:1000])
        assembly.suspend()
        self.assertEqual(recordedAlgorithm(target), BLAKE3)
        with open(os.path.join(self.directory, ".a.bin.part.json")) as sidecar:
            self.assertEqual(json.loads(sidecar.readline())["algorithm"], BLAKE3)

    def test_oldSidecarResumed(self) -> None:
        """A SHA-256 sidecar left by an earlier version is resumed under SHA-256 by a client offering BLAKE3 first."""
        served = os.path.join(self.directory, "served")
        os.makedirs(served)
        target = os.path.join(served, "old.bin")
        with open(os.path.join(served, ".old.bin.part"), "wb") as part:
            part.write(self.data[:5000])
        with open(os.path.join(served, ".old.bin.part.json"), "w") as sidecar:
            sidecar.write(json.dumps({"v": 2, "size": len(self.data), "version": "v1", "algorithm": "sha256"}))
            sidecar.write("\n0 5000\n")
        service = BulkService(served)
        answer = service.openUpload("old.bin", len(self.data), "v1", list(BOTH))
        self.assertEqual(answer, {"held": [[0, 5000]], "algorithm": "sha256"})
        assembly = service.uploads["old.bin"]
        assembly.write(5000, self.data[5000:])
        self.assertEqual(self.successResultOf(assembly.verify()), hashlib.sha256(self.data).digest())
        self.assertFalse(os.path.exists(target))

    def test_serviceWithoutCommonDigest(self) -> None:
        """A client offering only digests the service does not accept gets DigestUnavailable."""
        service = BulkService(os.path.join(self.directory, "served"), digests=["sha256"])
        self.assertRaises(DigestUnavailable, service.openUpload, "x.bin", 10, "v1", [BLAKE3])
