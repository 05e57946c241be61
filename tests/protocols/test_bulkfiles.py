"""The file steps of the clients without Twisted: partial downloads, file sources, uploads reading each byte once."""

from __future__ import annotations

import gc
import hashlib
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing.bulk._digests import NEGOTIATED
from framing.bulk._fileerrors import UploadBusy
from protocols import _bulkfiles as bulkfiles
from protocols._bulkfiles import (
    Call,
    FileHash,
    FileSource,
    FileTransfer,
    Hash,
    PartialFile,
    Progress,
    Receive,
    StepRunner,
    downloadSteps,
    fileStream,
    uploadSteps,
)
from protocols.bulk._files import Assembly

SIZE = 100_000


def payload(size: int = SIZE) -> bytes:
    """C{size} bytes that differ from offset to offset."""
    return bytes(i * 7 % 251 for i in range(size))


class PartialFileTests(SynchronousTestCase):
    """Resume, refusal, commit and discard of a partial download, in the one sidecar format."""

    def setUp(self) -> None:
        self.directory = Path(self.mktemp())
        self.directory.mkdir()
        self.target = self.directory / "f.bin"
        self.data = payload()

    def names(self) -> list[str]:
        return sorted(os.listdir(self.directory))

    def test_assemblyResumedByPartialFile(self) -> None:
        """Ranges a Twisted client's Assembly held when suspended are what a PartialFile resumes with."""
        assembly = Assembly(self.target, SIZE, "v1", "sha256")
        assembly.write(0, self.data[:30_000])
        assembly.write(60_000, self.data[60_000:70_000])
        assembly.suspend()
        partial = PartialFile(self.target, SIZE, "v1", "sha256")
        self.addCleanup(partial.discard)
        self.assertEqual(partial.held.toList(), [[0, 30_000], [60_000, 70_000]])
        self.assertEqual(partial.missing(), [(30_000, 60_000), (70_000, SIZE)])

    def test_partialFileResumedByAssembly(self) -> None:
        """Ranges a PartialFile held when closed are what a Twisted client's Assembly resumes with; it completes."""
        partial = PartialFile(self.target, SIZE, "v1", "sha256")
        partial.write(10_000, self.data[10_000:40_000])
        partial.close()
        assembly = Assembly(self.target, SIZE, "v1", "sha256")
        self.assertEqual((assembly.held.toList(), assembly.restarted), ([[10_000, 40_000]], False))
        assembly.write(0, self.data[:10_000])
        assembly.write(40_000, self.data[40_000:])
        self.successResultOf(assembly.verify())
        assembly.commit()
        self.assertEqual(self.target.read_bytes(), self.data)
        self.assertEqual(self.names(), ["f.bin"])

    def test_shortWritesContinued(self) -> None:
        """
        A write the file takes in parts (pwrite short) is continued to its end,
        hashed once, and recorded whole; the held bytes before it are read to be
        hashed first, and a piece in order reads nothing back.
        """
        realPwrite = os.pwrite
        writes: list[tuple[int, int]] = []

        def shortPwrite(fd: int, data: Any, offset: int) -> int:
            writes.append((offset, len(data)))
            return realPwrite(fd, memoryview(data)[:7_000], offset)

        self.patch(bulkfiles.os, "pwrite", shortPwrite)
        partial = PartialFile(self.target, SIZE, "v1", "sha256")
        partial.write(0, self.data[:20_000])
        partial.running = running = FileHash("sha256")
        partial.write(20_000, memoryview(self.data)[20_000:50_000])
        self.assertEqual(running.hashed, 50_000)
        partial.write(50_000, self.data[50_000:])
        self.assertEqual(writes[:3], [(0, 20_000), (7_000, 13_000), (14_000, 6_000)])
        self.assertEqual(writes[3:5], [(20_000, 30_000), (27_000, 23_000)])
        self.assertEqual((partial.held.toList(), running.hashed), ([[0, SIZE]], SIZE))
        self.assertEqual(running.digest(), hashlib.sha256(self.data).digest())
        partial.commit()
        self.assertEqual(self.target.read_bytes(), self.data)

    def test_otherFileStartsAfresh(self) -> None:
        """A record of another size, version or algorithm is not resumed: the partial file starts empty."""
        for size, version, algorithm in [(SIZE + 1, "v1", "sha256"), (SIZE, "v2", "sha256"), (SIZE, "v1", "blake3")]:
            partial = PartialFile(self.target, SIZE, "v1", "sha256")
            partial.write(0, self.data[:5_000])
            partial.close()
            other = PartialFile(self.target, size, version, algorithm)
            self.assertEqual((other.held.toList(), other.rejected), ([], False))
            self.assertEqual(os.path.getsize(self.directory / ".f.bin.part"), 0)
            other.discard()

    def test_rangesPastThePartRejected(self) -> None:
        """A record claiming bytes past the partial file's end is refused: nothing is resumed."""
        partial = PartialFile(self.target, SIZE, "v1", "sha256")
        partial.write(0, self.data[:5_000])
        partial.close()
        os.truncate(self.directory / ".f.bin.part", 4_000)
        again = PartialFile(self.target, SIZE, "v1", "sha256")
        self.addCleanup(again.discard)
        self.assertEqual((again.held.toList(), again.rejected), ([], True))

    def test_commitAndDiscard(self) -> None:
        """commit moves the part into place and removes the record; discard removes both."""
        partial = PartialFile(self.target, SIZE, "v1", "sha256")
        partial.write(0, self.data)
        partial.save()
        self.assertEqual(self.names(), [".f.bin.part", ".f.bin.part.json"])
        partial.commit()
        self.assertEqual((self.names(), self.target.read_bytes()), (["f.bin"], self.data))
        other = PartialFile(self.directory / "g.bin", SIZE, "v1", "sha256")
        other.write(0, self.data[:100])
        other.save()
        other.discard()
        self.assertEqual(self.names(), ["f.bin"])

    def test_partLinkNotFollowed(self) -> None:
        """A symbolic link under the partial file's name is not opened (nor its target written)."""
        outside = self.directory / "outside"
        outside.write_bytes(b"kept")
        os.symlink(outside, self.directory / ".f.bin.part")
        self.assertRaises(OSError, PartialFile, self.target, SIZE, "v1", "sha256")
        self.assertEqual(outside.read_bytes(), b"kept")

    def test_oneDownloadAtATime(self) -> None:
        """
        While a PartialFile or a Twisted client's Assembly has a destination's
        partial file open, the other cannot open it (UploadBusy), and nothing
        it held is touched; once closed, it resumes.
        """
        partial = PartialFile(self.target, SIZE, "v1", "sha256")
        partial.write(0, self.data[:20_000])
        self.assertRaises(UploadBusy, PartialFile, self.target, SIZE, "v1", "sha256")
        self.assertRaises(UploadBusy, Assembly, self.target, SIZE, "v1", "sha256")
        partial.close()
        assembly = Assembly(self.target, SIZE, "v1", "sha256")
        self.assertEqual(assembly.held.toList(), [[0, 20_000]])
        self.assertRaises(UploadBusy, PartialFile, self.target, SIZE, "v1", "sha256")
        assembly.suspend()
        resumed = PartialFile(self.target, SIZE, "v1", "sha256")
        self.addCleanup(resumed.discard)
        self.assertEqual(resumed.held.toList(), [[0, 20_000]])

    def test_partialFileMode(self) -> None:
        """The partial file is made with the Twisted client's mode (0644, less the umask): the file it becomes."""
        old = os.umask(0o022)
        try:
            partial = PartialFile(self.target, SIZE, "v1", "sha256")
        finally:
            os.umask(old)
        self.addCleanup(partial.discard)
        self.assertEqual(os.stat(self.directory / ".f.bin.part").st_mode & 0o777, 0o644)


class FileSourceTests(SynchronousTestCase):
    """A whole file as a stream's source (fileStream): read in order, closed by itself."""

    def setUp(self) -> None:
        directory = Path(self.mktemp())
        directory.mkdir()
        self.path = directory / "f.bin"
        self.data = payload()
        self.path.write_bytes(self.data)

    def openDescriptors(self) -> int:
        return len(os.listdir("/proc/self/fd"))

    def test_readInOrderThenClosed(self) -> None:
        """The frames are the file's bytes at their offsets; the file is closed once the last is taken."""
        before = self.openDescriptors()
        source = FileSource(self.path)
        self.assertEqual((source.size, source.available(), source.closed), (SIZE, SIZE, False))
        self.assertEqual(self.openDescriptors(), before + 1)
        frames = []
        while source.available():
            frames.append(source.take(30_000))
        self.assertEqual([offset for offset, _ in frames], [0, 30_000, 60_000, 90_000])
        self.assertEqual(b"".join(data for _, data in frames), self.data)
        self.assertTrue(source.closed)
        self.assertEqual(self.openDescriptors(), before)

    def test_closedWhenDropped(self) -> None:
        """A stream given up midway (collected unfinished) closes its file."""
        before = self.openDescriptors()
        stream = fileStream(self.path)
        self.assertEqual((stream.size, stream.digestName), (SIZE, NEGOTIATED))
        stream.source.take(1000)
        del stream
        gc.collect()
        self.assertEqual(self.openDescriptors(), before)

    def test_takeAfterClose(self) -> None:
        """A source closed early refuses to read (its descriptor's number may be another file's by now)."""
        source = FileSource(self.path)
        source.close()
        source.close()
        self.assertRaises(OSError, source.take, 10)

    def test_emptyFile(self) -> None:
        """An empty file is a stream of size 0, closed at once (no frame will ever be taken)."""
        self.path.write_bytes(b"")
        stream = fileStream(self.path, None)
        self.assertEqual((stream.size, stream.digestName, stream.source.available()), (0, None, 0))
        assert isinstance(stream.source, FileSource)
        self.assertTrue(stream.source.closed)

    def test_missingFile(self) -> None:
        """A file that cannot be opened raises there, before any call."""
        self.assertRaises(FileNotFoundError, fileStream, self.path.with_name("absent.bin"))


class ReadsCounted(SimpleNamespace):
    """C{os} as L{protocols._bulkfiles} sees it, each C{pread} and C{preadv} recorded as C{(offset, length)}."""

    def __init__(self) -> None:
        super().__init__(**{name: getattr(os, name) for name in dir(os) if not name.startswith("__")})
        self.reads: list[tuple[int, int]] = []

        def pread(fd: int, count: int, offset: int) -> bytes:
            data = os.pread(fd, count, offset)
            self.reads.append((offset, len(data)))
            return data

        def preadv(fd: int, buffers: list[Any], offset: int) -> int:
            count = os.preadv(fd, buffers, offset)
            self.reads.append((offset, count))
            return count

        self.pread, self.preadv = pread, preadv

    def bytesRead(self) -> tuple[int, int]:
        """C{(bytes read in all, distinct bytes read)}."""
        seen: set[int] = set()
        for offset, length in self.reads:
            seen.update(range(offset, offset + length))
        return sum(length for _, length in self.reads), len(seen)


class UploadReadsTests(SynchronousTestCase):
    """The resumable upload's steps read each byte of the file once: to send it (hashed then) or, held, to hash it."""

    size = 10 * 65_536 + 1234
    frame = 65_536

    def setUp(self) -> None:
        directory = Path(self.mktemp())
        directory.mkdir()
        self.path = directory / "f.bin"
        self.data = os.urandom(self.size)
        self.path.write_bytes(self.data)
        self.os = ReadsCounted()
        self.patch(bulkfiles, "os", self.os)
        self.steps: list[str] = []

    def upload(
        self, held: list[list[int]], progress: Progress | None = None, cutAfter: int | None = None
    ) -> tuple[FileTransfer | None, list[tuple[int, bytes]]]:
        """
        Run the upload's steps against a service holding C{held}; the outcome
        (C{None}: cut) and the frames sent (C{cutAfter} of them, then the connection is lost).
        """
        steps = uploadSteps(self.path, resume=True, digests=["sha256"], progress=progress)
        runner, sent = StepRunner(steps), []
        while (step := runner.next()) is not None:
            if isinstance(step, Hash):
                self.steps.append(f"hash to {step.end}")
                runner.succeeded(step.compute())
                continue
            assert isinstance(step, Call)
            self.steps.append(step.name)
            if step.name == "openUpload":
                runner.succeeded({"algorithm": "sha256", "held": held})
            elif step.name == "upload":
                source = step.args[1].source
                while source.available():
                    if len(sent) == cutAfter:
                        steps.close()
                        return None, sent
                    sent.append(source.take(self.frame))
                runner.succeeded(None)
            else:
                # The service's digest of the file it holds (held + sent) is the file's.
                runner.succeeded({"digest": hashlib.sha256(self.data).hexdigest()})
        return runner.outcome, sent

    def test_freshUploadReadsOnce(self) -> None:
        """A fresh upload reads each byte once, to send it, and its digest is the whole file's."""
        result, sent = self.upload([])
        assert result is not None
        self.assertEqual(b"".join(data for _, data in sent), self.data)
        self.assertEqual(self.os.bytesRead(), (self.size, self.size))
        self.assertEqual(result.digest, hashlib.sha256(self.data).digest())
        self.assertEqual(self.steps, ["openUpload", "upload", "finishUpload"])

    def test_resumedUploadReadsOnce(self) -> None:
        """Resumed with held ranges before, between and after the sent ones: no byte read twice, every byte hashed."""
        held = [[0, 3 * self.frame], [5 * self.frame, 6 * self.frame + 7], [9 * self.frame, self.size]]
        result, sent = self.upload(held)
        assert result is not None
        self.assertEqual(
            [(offset, len(data)) for offset, data in sent],
            [(3 * self.frame, self.frame), (4 * self.frame, self.frame)]
            + [
                (6 * self.frame + 7, self.frame),
                (7 * self.frame + 7, self.frame),
                (8 * self.frame + 7, self.frame - 7),
            ],
        )
        self.assertEqual(self.os.bytesRead(), (self.size, self.size))
        self.assertEqual(result.digest, hashlib.sha256(self.data).digest())
        # The held start is hashed before the stream, the held end after it.
        self.assertEqual(
            self.steps, ["openUpload", f"hash to {3 * self.frame}", "upload", f"hash to {self.size}", "finishUpload"]
        )

    def test_allHeldHashedOnce(self) -> None:
        """A file the service holds whole is read once, to hash it, and nothing is sent."""
        result, sent = self.upload([[0, self.size]])
        assert result is not None
        self.assertEqual((sent, self.os.bytesRead()), ([], (self.size, self.size)))
        self.assertEqual(result.digest, hashlib.sha256(self.data).digest())

    def test_nextAttemptHashesNothingAgain(self) -> None:
        """After a cut, the next attempt (same Progress) reads only what it sends again and what was never read."""
        progress = Progress()
        result, sent = self.upload([], progress, cutAfter=4)
        self.assertEqual((result, len(sent)), (None, 4))
        # The service stored two of the four frames sent before the cut.
        self.os.reads.clear()
        result, sent = self.upload([[0, 2 * self.frame]], progress)
        assert result is not None
        self.assertEqual(sent[0][0], 2 * self.frame)
        self.assertEqual(self.os.bytesRead(), (self.size - 2 * self.frame, self.size - 2 * self.frame))
        self.assertEqual(result.digest, hashlib.sha256(self.data).digest())


class DownloadReadsTests(SynchronousTestCase):
    """The resumable download's steps read back nothing they wrote: only held bytes are read, once, to hash them."""

    size = 10 * 65_536 + 1234
    frame = 65_536

    def setUp(self) -> None:
        directory = Path(self.mktemp())
        directory.mkdir()
        self.target = directory / "f.bin"
        self.data = os.urandom(self.size)
        self.os = ReadsCounted()
        self.patch(bulkfiles, "os", self.os)
        self.steps: list[str] = []

    def hold(self, ranges: list[tuple[int, int]]) -> None:
        """Leave a partial download of the file holding C{ranges} (as a cut one does)."""
        partial = PartialFile(self.target, self.size, "v1", "sha256")
        for start, end in ranges:
            partial.write(start, self.data[start:end])
        partial.close()

    def download(self, progress: Progress | None = None) -> FileTransfer:
        """Run the download's steps against a service with the file; the outcome."""
        runner = StepRunner(downloadSteps("f.bin", self.target, digests=["sha256"], progress=progress))
        info = {"algorithm": "sha256", "digest": hashlib.sha256(self.data).hexdigest(), "size": self.size}
        while (step := runner.next()) is not None:
            if isinstance(step, Hash):
                self.steps.append(f"hash to {step.end}")
                runner.succeeded(step.compute())
            elif isinstance(step, Receive):
                self.steps.append("receive")
                for start, end in step.stream.ranges:  # type: ignore[attr-defined]
                    for offset in range(start, end, self.frame):
                        step.sink.write(offset, self.data[offset : min(end, offset + self.frame)])
                runner.succeeded((0, None))
            else:
                assert isinstance(step, Call)
                self.steps.append(step.name)
                if step.name == "stat":
                    runner.succeeded(info | {"version": "v1"})
                else:
                    runner.succeeded(SimpleNamespace(ranges=step.args[2], receivedBytes=0))
        assert runner.outcome is not None
        return runner.outcome

    def test_freshDownloadReadsNothing(self) -> None:
        """A fresh download hashes what arrives as it writes it: no byte of the file is read back."""
        result = self.download()
        self.assertEqual(self.target.read_bytes(), self.data)
        self.assertEqual((result.digest, self.os.bytesRead()), (hashlib.sha256(self.data).digest(), (0, 0)))
        self.assertEqual(self.steps, ["stat", "download", "receive"])

    def test_resumedDownloadReadsHeldOnce(self) -> None:
        """Resumed with held ranges before, between and after the missing ones: each held byte read once."""
        held = [(0, 3 * self.frame), (5 * self.frame, 6 * self.frame + 7), (9 * self.frame, self.size)]
        self.hold(held)
        self.os.reads.clear()
        result = self.download()
        total = sum(end - start for start, end in held)
        self.assertEqual(self.os.bytesRead(), (total, total))
        self.assertEqual(result.digest, hashlib.sha256(self.data).digest())
        self.assertEqual(self.target.read_bytes(), self.data)
        self.assertEqual(
            self.steps, ["stat", f"hash to {3 * self.frame}", "download", "receive", f"hash to {self.size}"]
        )


class FileHashTests(SynchronousTestCase):
    """FileHash: a file's digest in order, from frames and reads."""

    def test_frameSentAgainSkipped(self) -> None:
        """Bytes offered again (a frame resent after a cut) are hashed once; a gap is refused."""
        running = FileHash("sha256")
        running.update(0, b"abcdef")
        running.update(3, b"defgh")
        running.update(2, b"cd")
        self.assertEqual((running.hashed, running.digest()), (8, hashlib.sha256(b"abcdefgh").digest()))
        self.assertRaises(ValueError, running.update, 9, b"j")

    def test_readFromAllocatesOnlyWhatItReads(self) -> None:
        """
        Asked to read to where it already hashed (as L{HashingRanges} asks
        before each frame of an upload from 0), L{FileHash.readFrom}
        allocates no buffer; asked for a few bytes, a buffer of those bytes,
        not a megabyte (it zeroed one per frame sent: 1 GiB of memset per
        GiB uploaded); to the end, one of at most a megabyte.
        """
        from protocols import _bulkfiles

        sizes: list[int] = []
        real = _bulkfiles._buffer
        self.patch(_bulkfiles, "_buffer", lambda size: sizes.append(size) or real(size))
        path = Path(self.mktemp())
        path.write_bytes(b"0123456789")
        fd = os.open(path, os.O_RDONLY)
        self.addCleanup(os.close, fd)
        running = FileHash("sha256")
        running.readFrom(fd, 0)
        self.assertEqual(sizes, [])
        running.readFrom(fd, 4)
        running.readFrom(fd, 4)
        self.assertEqual(sizes, [4])
        running.readFrom(fd)
        self.assertEqual(sizes, [4, 1024 * 1024])
        self.assertEqual((running.hashed, running.digest()), (10, hashlib.sha256(b"0123456789").digest()))

    def test_readFromBufferPageAligned(self) -> None:
        """The buffer L{FileHash.readFrom} reads into starts on a page (see its docstring for why)."""
        import ctypes
        import mmap

        from protocols import _bulkfiles

        view = _bulkfiles._buffer(1024 * 1024)
        self.assertEqual(ctypes.addressof(ctypes.c_char.from_buffer(view)) % mmap.PAGESIZE, 0)
