"""Tests for protocols.bulk._files: assemblies, the service, resume after cuts, striping (in memory)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger, formatEvent
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from protocols.bulk import IntegrityError, RangeSet, Stream, StreamReset
from protocols.bulk import _files as bulkfiles
from protocols.bulk._files import (
    PRIVATE_DIRECTORY,
    Assembly,
    BadName,
    BulkService,
    FileChanged,
    FileResult,
    NoSuchFile,
    StorageError,
    TransferProgress,
    fetchFile,
    sendFile,
    stripes,
)

from .support import FIRST_DIGEST, SMALL, BulkPair, MemoryNetwork, negotiatedHash, payload, writeFile

CHUNK = SMALL.chunkSize


class AssemblyTests(SynchronousTestCase):
    """A file put together from ranges in any order, across restarts."""

    def setUp(self) -> None:
        self.directory = os.path.abspath(self.mktemp())
        os.makedirs(self.directory)
        self.path = os.path.join(self.directory, "file.bin")
        self.data = payload(100_000)

    def test_outOfOrder(self) -> None:
        """Ranges written in any order, with repeats, make the file; it appears only when committed."""
        assembly = Assembly(self.path, len(self.data), "v1")
        for start, end in [(50_000, 100_000), (10_000, 60_000), (0, 20_000), (30_000, 40_000)]:
            assembly.write(start, self.data[start:end])
        self.assertTrue(assembly.complete)
        self.assertEqual(assembly.duplicates, 30_000)
        self.assertFalse(os.path.exists(self.path))
        digest = self.successResultOf(assembly.verify(hashlib.sha256(self.data).digest()))
        self.assertEqual(digest, hashlib.sha256(self.data).digest())
        assembly.commit()
        with open(self.path, "rb") as file:
            self.assertEqual(file.read(), self.data)
        self.assertEqual(os.listdir(self.directory), ["file.bin"])

    def test_inOrderThenHole(self) -> None:
        """
        Pieces in order (each extending the run from 0, recorded in one
        step), then one past a hole, then repeats and the hole filled:
        what is held, the counts, the sidecar a resume reads and the
        digest are those of the ranges written, whichever way each was
        recorded.
        """
        assembly = Assembly(self.path, len(self.data), "v1")
        for start, end in [(0, 10_000), (10_000, 30_000), (50_000, 70_000), (0, 5_000), (30_000, 50_000)]:
            assembly.write(start, self.data[start:end])
            if end == 30_000:
                self.assertEqual(assembly.held.ranges(), [(0, 30_000)])
        self.assertEqual(assembly.held.ranges(), [(0, 70_000)])
        self.assertEqual((assembly.received, assembly.duplicates), (75_000, 5_000))
        assembly.save()
        assembly.suspend()
        again = Assembly(self.path, len(self.data), "v1")
        self.assertEqual(again.held.ranges(), [(0, 70_000)])
        again.write(70_000, self.data[70_000:])
        digest = self.successResultOf(again.verify(hashlib.sha256(self.data).digest()))
        self.assertEqual(digest, hashlib.sha256(self.data).digest())

    def test_resumeFromSidecar(self) -> None:
        """A new assembly of the same file and version picks up the ranges its sidecar records."""
        first = Assembly(self.path, len(self.data), "v1")
        first.write(0, self.data[:30_000])
        first.write(60_000, self.data[60_000:70_000])
        first.suspend()
        with open(first.sidecarPath) as file:
            header, *lines = file.read().splitlines()
        self.assertEqual(json.loads(header)["size"], first.size)
        held = RangeSet(tuple(map(int, line.split())) for line in lines)
        self.assertEqual(held.ranges(), [(0, 30_000), (60_000, 70_000)])
        second = Assembly(self.path, len(self.data), "v1")
        self.assertEqual(second.missing(), [(30_000, 60_000), (70_000, 100_000)])
        for start, end in second.missing():
            second.write(start, self.data[start:end])
        self.successResultOf(second.verify(hashlib.sha256(self.data).digest()))

    def test_otherVersionStartsAfresh(self) -> None:
        """A sidecar for another version (or size) of the source is not trusted."""
        first = Assembly(self.path, len(self.data), "v1")
        first.write(0, self.data[:30_000])
        first.suspend()
        other = Assembly(self.path, len(self.data), "v2")
        self.assertEqual(other.held.total, 0)
        other.suspend()  # one open assembly per file at a time
        self.assertEqual(Assembly(self.path, len(self.data) + 1, "v1").held.total, 0)

    def test_mismatch(self) -> None:
        """A complete file whose digest is not the sender's fails to verify with IntegrityError."""
        assembly = Assembly(self.path, len(self.data), "v1")
        assembly.write(0, self.data)
        failure = self.failureResultOf(assembly.verify(b"\0" * 32), IntegrityError)
        self.assertIn("sha256", str(failure.value))
        assembly.discard()
        self.assertEqual(os.listdir(self.directory), [])

    def test_incomplete(self) -> None:
        """An incomplete file does not verify."""
        assembly = Assembly(self.path, len(self.data), "v1")
        assembly.write(0, self.data[:10])
        self.failureResultOf(assembly.verify(), IntegrityError)

    def test_outside(self) -> None:
        """A write past the file's end is refused."""
        assembly = Assembly(self.path, 10, "v1")
        self.assertRaises(ValueError, assembly.write, 5, b"x" * 10)

    def test_stripes(self) -> None:
        """Missing ranges split into stripes of about equal size, in order, covering them exactly."""
        self.assertEqual(stripes([(0, 100)], 4), [[(0, 25)], [(25, 50)], [(50, 75)], [(75, 100)]])
        self.assertEqual(stripes([(0, 10), (20, 30)], 2), [[(0, 10)], [(20, 30)]])
        self.assertEqual(stripes([(0, 10), (20, 25)], 2), [[(0, 8)], [(8, 10), (20, 25)]])
        self.assertEqual(stripes([], 3), [])
        self.assertEqual(stripes([(0, 3)], 8), [[(0, 1)], [(1, 2)], [(2, 3)]])


class ServiceTests(SynchronousTestCase):
    """The service's calls, used directly."""

    def setUp(self) -> None:
        self.directory = os.path.abspath(self.mktemp())
        self.service = BulkService(self.directory)
        self.pair = BulkPair(self.service)

    def call(self, *args: Any) -> Any:
        answer = self.pair.root.callRemote(*args)
        self.pair.flush()
        return answer

    def test_putAndGet(self) -> None:
        """A file uploads through one call (a stream argument) and downloads through another (a stream result)."""
        data = payload(80_000)
        digest = self.successResultOf(self.call("put", "a.bin", Stream(data)))
        self.assertEqual(digest, negotiatedHash(data).hexdigest())
        incoming = self.successResultOf(self.call("get", "a.bin"))
        pieces: list[bytes] = []
        done = incoming.receive(pieces.append)
        self.pair.flush()
        self.assertEqual(self.successResultOf(done).hexdigest, digest)
        self.assertEqual(b"".join(pieces), data)
        self.assertEqual(self.successResultOf(self.call("list")), [["a.bin", 80_000]])

    def test_noSuchFile(self) -> None:
        """get, stat and download of a missing file fail with NoSuchFile, which says the name and not the path."""
        for call in [("get", "gone.bin"), ("stat", "gone.bin"), ("download", "gone.bin", "1-1", [[0, 1]])]:
            failure = self.failureResultOf(self.call(*call), NoSuchFile)
            self.assertEqual(str(failure.value), "no such file: gone.bin")
            self.assertNotIn(self.directory, repr(failure.value.args))

    def test_diskFullNamesNoPath(self) -> None:
        """
        The server's disk fills mid-upload (an injected ENOSPC naming the
        partial file): the caller's call fails with a StorageError and its
        stream with a StreamReset, both saying ENOSPC and neither naming
        where the server keeps its files; the server's log has the path.
        """
        partPath = os.path.join(self.directory, "served", ".f.bin.part")

        def fullDisk(fd: int, data: Any, offset: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), partPath)

        events: list[dict[str, Any]] = []
        self.patch(bulkfiles, "writeAt", fullDisk)
        self.patch(bulkfiles, "_log", Logger(namespace="test", observer=events.append))
        data = payload(40_000)
        self.successResultOf(self.call("openUpload", "f.bin", len(data), "v"))
        stream = Stream(data)
        failure = self.failureResultOf(self.call("upload", "f.bin", stream), StorageError)
        self.assertEqual(str(failure.value), "the server could not store f.bin: ENOSPC (No space left on device)")
        reset = self.failureResultOf(stream.whenDone(), StreamReset).value
        self.assertEqual((reset.code, reset.message), ("sink-failed", "ENOSPC (No space left on device)"))
        self.assertIn(partPath, " ".join(formatEvent(event) for event in events))

    def test_badNames(self) -> None:
        """Paths, hidden names and empty names are refused with BadName, which arrives as itself."""
        for name in ("../x", "a/b", ".hidden", ""):
            self.failureResultOf(self.call("get", name), BadName)

    def test_wrongDigest(self) -> None:
        """Finishing an upload with the wrong digest fails with IntegrityError and leaves no file behind."""
        data = payload(40_000)
        self.successResultOf(self.call("openUpload", "b.bin", len(data), "v"))
        self.successResultOf(self.call("upload", "b.bin", Stream(data, digest=None)))
        self.failureResultOf(self.call("finishUpload", "b.bin", b"\1" * 32), IntegrityError)
        self.assertEqual(os.listdir(self.directory), [PRIVATE_DIRECTORY])
        # Only the key of the service's sidecars stays in its private directory.
        self.assertEqual(os.listdir(os.path.join(self.directory, PRIVATE_DIRECTORY)), ["sidecar.key"])

    def test_finishTwice(self) -> None:
        """A repeated finishUpload (its first answer lost) answers the same, and a repeated openUpload holds all."""
        data = payload(40_000)
        digest = hashlib.sha256(data).digest()
        self.successResultOf(self.call("openUpload", "c.bin", len(data), "v"))
        self.successResultOf(self.call("upload", "c.bin", Stream(data, digest=None)))
        first = self.successResultOf(self.call("finishUpload", "c.bin", digest))
        self.assertEqual(self.successResultOf(self.call("finishUpload", "c.bin", digest))["digest"], first["digest"])
        self.assertEqual(self.successResultOf(self.call("openUpload", "c.bin", len(data), "v"))["held"], [[0, 40_000]])

    def test_fileChanged(self) -> None:
        """A download of a file that changed since its stat fails with FileChanged."""
        path = writeFile(os.path.join(self.directory, "d.bin"), payload(1000))
        info = self.successResultOf(self.call("stat", "d.bin"))
        writeFile(path, payload(1001))
        self.failureResultOf(self.call("download", "d.bin", info["version"], [[0, 10]]), FileChanged)

    def test_statDigestKept(self) -> None:
        """stat computes a stored file's digest once and keeps it in the service's private directory."""
        writeFile(os.path.join(self.directory, "e.bin"), payload(5000))
        info = self.successResultOf(self.call("stat", "e.bin"))
        self.assertEqual(info["digest"], hashlib.sha256(payload(5000)).hexdigest())
        self.assertIn("e.bin.sha256.digest.json", os.listdir(os.path.join(self.directory, PRIVATE_DIRECTORY)))


class TransferTests(SynchronousTestCase):
    """sendFile and fetchFile over in-memory connections that the test cuts."""

    def setUp(self) -> None:
        self.directory = os.path.abspath(self.mktemp())
        os.makedirs(self.directory)
        self.service = BulkService(os.path.join(self.directory, "served"))
        self.network = MemoryNetwork(self.service)
        self.data = payload(120 * CHUNK, seed=5)
        self.source = writeFile(os.path.join(self.directory, "source.bin"), self.data)

    def send(self, name: str, cuts: list[int] | None = None, streams: int = 1) -> FileResult:
        done = Deferred.fromCoroutine(
            sendFile(self.network.connect, self.source, name, streams=streams, clock=self.network.clock)
        )
        result = self.network.run(done, iter(cuts) if cuts else None)
        if isinstance(result, Failure):
            result.raiseException()
        assert isinstance(result, FileResult)
        return result

    def fetch(self, name: str, path: str, cuts: list[int] | None = None, streams: int = 1, **kwargs: Any) -> Any:
        done = Deferred.fromCoroutine(
            fetchFile(self.network.connect, name, path, streams=streams, clock=self.network.clock, **kwargs)
        )
        return self.network.run(done, iter(cuts) if cuts else None)

    def served(self, name: str) -> bytes:
        with open(os.path.join(self.directory, "served", name), "rb") as file:
            return file.read()

    def test_send(self) -> None:
        """A file is sent whole, verified, with no byte sent twice."""
        result = self.send("plain.bin")
        # bytes with a hex form, as TransferResult and hashlib give them
        expected = negotiatedHash(self.data)
        self.assertEqual((result.digest, result.hexdigest), (expected.digest(), expected.hexdigest()))
        self.assertEqual(result.payload, len(self.data))
        self.assertEqual(self.served("plain.bin"), self.data)

    def test_resumeAfterFiveCuts(self) -> None:
        """Cut five times at random points, a transfer finishes verified and resends under 2 chunks per cut."""
        for seed in range(4):
            rng = random.Random(seed)
            cuts = [rng.randint(2, 12) for _ in range(5)]
            result = self.send(f"cut{seed}.bin", cuts)
            self.assertEqual(result.cuts, 5, f"seed {seed}")
            self.assertEqual(result.digest, negotiatedHash(self.data).digest())
            self.assertEqual(self.served(f"cut{seed}.bin"), self.data)
            resent = result.payload - len(self.data)
            self.assertLess(resent / result.cuts, 2 * CHUNK, f"seed {seed}: {resent} bytes resent")

    def test_striped(self) -> None:
        """With three streams, three connections each carry a third of the file; the digest verifies."""
        result = self.send("striped.bin", streams=3)
        self.assertEqual(self.served("striped.bin"), self.data)
        self.assertEqual(result.payload, len(self.data))
        self.assertEqual(len(self.network.pairs), 3)
        for pair in self.network.pairs:
            carried = sum(len(write) for write in pair.clientTransport.writes)
            self.assertGreater(carried, len(self.data) // 3)

    def test_stripedWithCuts(self) -> None:
        """A striped transfer cut three times still finishes verified."""
        result = self.send("stripedcut.bin", [6, 5, 7], streams=3)
        self.assertEqual(result.cuts, 3)
        self.assertEqual(self.served("stripedcut.bin"), self.data)

    def test_sameShape(self) -> None:
        """fetchFile takes what sendFile takes (service name, local path, the same keywords) and reports alike."""
        sendProgress, fetchProgress = TransferProgress(), TransferProgress()
        options = {"streams": 2, "retries": 3, "retryDelay": 0.01, "clock": self.network.clock}
        sent = self.network.run(
            Deferred.fromCoroutine(
                sendFile(self.network.connect, self.source, "shape.bin", progress=sendProgress, **options)
            )
        )
        target = os.path.join(self.directory, "shape.bin")
        fetched = self.network.run(
            Deferred.fromCoroutine(
                fetchFile(self.network.connect, "shape.bin", target, progress=fetchProgress, **options)
            )
        )
        self.assertEqual((type(sent), type(fetched)), (FileResult, FileResult))
        self.assertEqual((sent.name, sent.size, sent.digest), (fetched.name, fetched.size, fetched.digest))
        self.assertEqual((sent.payload, fetched.payload), (len(self.data), len(self.data)))
        self.assertEqual((sendProgress.attempts, fetchProgress.attempts), (1, 1))
        self.assertEqual((sendProgress.total, fetchProgress.total), (len(self.data), len(self.data)))

    def test_fetchPathDefaultsToName(self) -> None:
        """Without a path, fetchFile writes the service's name in the current directory (as sendFile names by path)."""
        self.send("here.bin")
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.directory)
        result = self.network.run(
            Deferred.fromCoroutine(fetchFile(self.network.connect, "here.bin", clock=self.network.clock))
        )
        self.assertIsInstance(result, FileResult)
        with open(os.path.join(self.directory, "here.bin"), "rb") as file:
            self.assertEqual(file.read(), self.data)

    def test_fetchAfterCuts(self) -> None:
        """A download cut five times resumes into the same partial file and verifies."""
        self.send("f.bin")
        target = os.path.join(self.directory, "fetched.bin")
        progress = TransferProgress()
        result = self.fetch("f.bin", target, [4, 9, 3, 6, 5], progress=progress)
        self.assertIsInstance(result, FileResult)
        self.assertEqual(result.cuts, 5)
        self.assertLess((result.payload - len(self.data)) / 5, 2 * CHUNK)
        with open(target, "rb") as file:
            self.assertEqual(file.read(), self.data)
        self.assertEqual(progress.done, len(self.data))
        self.assertFalse(os.path.exists(os.path.join(self.directory, ".fetched.bin.part")))

    def test_fetchResumesEarlierRun(self) -> None:
        """A download that gave up leaves its partial file; running it again fetches only what is missing."""
        self.send("g.bin")
        target = os.path.join(self.directory, "g.bin")
        failed = self.fetch("g.bin", target, [8], retries=0)
        self.assertIsInstance(failed, Failure)
        self.assertTrue(os.path.exists(os.path.join(self.directory, ".g.bin.part.json")))
        result = self.fetch("g.bin", target)
        self.assertLess(result.payload, len(self.data))
        with open(target, "rb") as file:
            self.assertEqual(file.read(), self.data)

    def test_fetchStriped(self) -> None:
        """A download striped over two connections verifies."""
        self.send("h.bin")
        target = os.path.join(self.directory, "h-copy.bin")
        result = self.fetch("h.bin", target, streams=2)
        self.assertEqual(result.digest, negotiatedHash(self.data).digest())

    def test_fetchCorrupted(self) -> None:
        """A served file corrupted after its digest was recorded fails the download; nothing appears."""
        self.send("i.bin")
        path = os.path.join(self.directory, "served", "i.bin")
        with open(path, "r+b") as file:
            file.seek(1000)
            file.write(b"\xff")
        stat = os.stat(path)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        record = os.path.join(self.directory, "served", PRIVATE_DIRECTORY, f"i.bin.{FIRST_DIGEST}.digest.json")
        with open(record) as file:
            kept = json.load(file)
        kept["version"] = f"{stat.st_size}-{os.stat(path).st_mtime_ns}"
        with open(record, "w") as file:
            json.dump(kept, file)
        target = os.path.join(self.directory, "i-copy.bin")
        failure = self.fetch("i.bin", target)
        self.assertIsInstance(failure, Failure)
        self.assertIsInstance(failure.value, IntegrityError)
        self.assertFalse(os.path.exists(target))
        self.assertFalse(os.path.exists(os.path.join(self.directory, ".i-copy.bin.part")))
