"""Bulk transfers of the blocking client (L{protocols.blockingbulk}) against the example bulk server, run as a process.

One server (examples/bulk_server.py) serves the whole class under pytest
(each test its own under trial); each case uses file names of its own.
Cuts are made by L{tests.protocols.bulkclients.CuttingProxy}; the Twisted
client, where a partial download passes between it and the blocking
client, is C{examples/bulk_client.py --hashing thread fetch} run as a process
(with C{--hashing thread} it runs on Twisted, not on the blocking client).  Listed in
dev.py's PROCESS_TESTS (compiled core only).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing.bulk import IntegrityError, NoSuchFile
from framing.bulk._streams import ClientStreams
from framing.rpc._errors import ConnectionLost
from framing.rpc._limits import CallLimits
from protocols.blockingbulk import (
    BlockingBulkConnection,
    FileTransfer,
    Interrupted,
    Interruption,
    TransferProgress,
    connect,
    fetchFile,
    fileStream,
    sendFile,
)
from protocols.options import ClientOptions
from tests.examples.cli import address, clientRun, slowLink
from tests.protocols.bulkclients import CHUNK, HANG, SIZE, BulkServerCase, MiB, digestOf


class BlockingBulkTests(BulkServerCase):
    """Uploads and downloads as the Twisted bulk client makes them: checked, resumed after a cut."""

    def connect(self, address: str | None = None) -> BlockingBulkConnection:
        connection = connect(
            address or self.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG))
        )
        self.addCleanup(connection.close)
        return connection

    def test_uploadThenDownload(self) -> None:
        """An upload then a download of it, resumable and whole (put/get), give the file back with one digest."""
        path, data = self.localFile("round.bin")
        connection = self.connect()
        algorithm = self.expectedAlgorithm()
        sent = connection.upload(path)
        self.assertEqual((sent.name, sent.size, sent.algorithm, sent.moved), ("round.bin", SIZE, algorithm, SIZE))
        self.assertEqual(sent.digest, digestOf(data, algorithm))
        self.assertEqual((self.served / "round.bin").read_bytes(), data)
        fetched = connection.download("round.bin", path.with_name("back.bin"))
        self.assertEqual((fetched.digest, fetched.moved), (sent.digest, SIZE))
        self.assertEqual(path.with_name("back.bin").read_bytes(), data)
        whole = connection.upload(path, "whole.bin", resume=False)
        self.assertEqual((whole.digest, whole.algorithm), (sent.digest, algorithm))
        gotten = connection.download("whole.bin", path.with_name("whole.bin"), resume=False)
        self.assertEqual(gotten.digest, sent.digest)
        self.assertEqual(path.with_name("whole.bin").read_bytes(), data)
        self.assertRaises(NoSuchFile, connection.download, "absent.bin", path.with_name("absent.bin"))

    def test_fileStreamAsArgument(self) -> None:
        """fileStream(path) passed to one's own method (the service's put) sends the file, checked, then closes it."""
        path, data = self.localFile("own.bin")
        stream = fileStream(path)
        hexdigest = self.connect().root.callRemote("put", "own.bin", stream)
        self.assertEqual(bytes.fromhex(hexdigest), digestOf(data, self.expectedAlgorithm()))
        self.assertEqual((stream.sentBytes, stream.digestName), (SIZE, self.expectedAlgorithm()))
        self.assertTrue(stream.source.closed)  # type: ignore[attr-defined]
        self.assertEqual((self.served / "own.bin").read_bytes(), data)

    def test_uploadResumedAfterCut(self) -> None:
        """An upload cut after 3 MiB resumes on a new connection from what the server holds: under two chunks resent."""
        path, data = self.localFile("cut-up.bin")
        proxy = self.cuttingProxy("up", 3 * CHUNK)
        addresses = iter([proxy.address, self.address])
        result = sendFile(lambda: self.connect(next(addresses)), path, retries=1, retryDelay=0.01)
        self.assertGreater(result.resumedFrom, 0)
        self.assertLess(result.moved - SIZE, 2 * CHUNK)
        self.assertGreaterEqual(proxy.forwarded["up"], 3 * CHUNK)
        self.assertEqual((self.served / "cut-up.bin").read_bytes(), data)

    def test_downloadResumedAfterCut(self) -> None:
        """A download cut after 3 MiB resumes from its .part file on a new connection: under two chunks resent."""
        path, data = self.localFile("cut-down.bin")
        self.connect().upload(path)
        target = path.with_name("copy.bin")
        proxy = self.cuttingProxy("down", 3 * CHUNK)
        self.assertRaises(ConnectionLost, self.connect(proxy.address).download, "cut-down.bin", target)
        self.assertFalse(target.exists())
        again = self.connect().download("cut-down.bin", target)
        self.assertGreater(again.resumedFrom, CHUNK)
        self.assertEqual(again.moved, SIZE - again.resumedFrom)
        self.assertEqual(target.read_bytes(), data)
        self.assertFalse(path.with_name(".copy.bin.part").exists())

    def test_fetchFileReconnects(self) -> None:
        """fetchFile reconnects after a cut by itself and counts what crossed both connections."""
        path, data = self.localFile("fetched.bin")
        self.connect().upload(path)
        proxy = self.cuttingProxy("down", 3 * CHUNK)
        addresses = iter([proxy.address, self.address])
        target = path.with_name("fetched-copy.bin")
        result = fetchFile(lambda: self.connect(next(addresses)), "fetched.bin", target, retries=1, retryDelay=0.01)
        self.assertLess(result.moved - SIZE, 2 * CHUNK)
        self.assertEqual(target.read_bytes(), data)

    def test_corruptPartialFile(self) -> None:
        """A resumed download whose held bytes were corrupted fails with IntegrityError; nothing is put in place."""
        path, _ = self.localFile("corrupt.bin")
        self.connect().upload(path)
        target = path.with_name("corrupt-copy.bin")
        proxy = self.cuttingProxy("down", 3 * CHUNK)
        self.assertRaises(ConnectionLost, self.connect(proxy.address).download, "corrupt.bin", target)
        part = path.with_name(".corrupt-copy.bin.part")
        with open(part, "r+b") as file:
            first = file.read(1)
            file.seek(0)
            file.write(bytes([first[0] ^ 0xFF]))
        error = self.assertRaises(IntegrityError, self.connect().download, "corrupt.bin", target)
        self.assertNotEqual(error.expected, error.actual)
        self.assertFalse(target.exists())
        self.assertFalse(part.exists())

    def test_changedFileAfterCut(self) -> None:
        """A resumed upload whose file changed under the same size and time fails with the server's IntegrityError."""
        path, data = self.localFile("changed.bin")
        info = os.stat(path)
        proxy = self.cuttingProxy("up", 3 * CHUNK)
        self.assertRaises(ConnectionLost, self.connect(proxy.address).upload, path)
        changed = bytes([data[0] ^ 0xFF]) + data[1:]
        path.write_bytes(changed)
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
        self.assertRaises(IntegrityError, self.connect().upload, path)
        self.assertFalse((self.served / "changed.bin").exists())

    def test_uploadAndDownloadAtOnce(self) -> None:
        """
        An upload and a download at the same time on one connection, from two
        threads, with the client's socket buffers small: both finish whole,
        with their digests (the thread that reads while the other's frames
        are sent holds no lock in a blocking send, so the reading goes on).
        """
        down, downData = self.localFile("both-down.bin")
        self.connect().upload(down)
        up, upData = self.localFile("both-up.bin")
        connection = self.connect()
        connection._socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        connection._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        outcomes: dict[str, Any] = {}

        def move(kind: str, action: Callable[[], FileTransfer]) -> None:
            try:
                outcomes[kind] = action()
            except BaseException as error:
                outcomes[kind] = error

        def download() -> FileTransfer:
            return connection.download("both-down.bin", down.with_name("copy.bin"))

        threads = [
            threading.Thread(target=move, args=("up", lambda: connection.upload(up)), daemon=True),
            threading.Thread(target=move, args=("down", download), daemon=True),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(HANG)
        self.assertFalse(any(thread.is_alive() for thread in threads), f"still moving after {HANG} s")
        algorithm = self.expectedAlgorithm()
        self.assertEqual(outcomes["up"].digest, digestOf(upData, algorithm))
        self.assertEqual(outcomes["down"].digest, digestOf(downData, algorithm))
        self.assertEqual((self.served / "both-up.bin").read_bytes(), upData)
        self.assertEqual(down.with_name("copy.bin").read_bytes(), downData)

    def test_fetchInterruptedThenResumed(self) -> None:
        """
        An Interruption interrupted from another thread mid-download ends
        fetchFile at once with Interrupted (no reconnection), the partial
        file and its record kept; the next fetchFile resumes from them, its
        progress saying what was held and ending at the whole size.
        """
        path, data = self.localFile("stopped.bin")
        self.connect().upload(path)
        target = path.with_name("copy.bin")
        slow = slowLink(self, self.port, 2_000_000)  # 8 MiB take 4 s: mid-way when interrupted
        progress, interruption = TransferProgress(), Interruption()

        def interruptOnceMoving() -> None:
            deadline = time.monotonic() + 60
            while progress.done < CHUNK and time.monotonic() < deadline:
                time.sleep(0.01)
            interruption.interrupt()

        threading.Thread(target=interruptOnceMoving, daemon=True).start()
        options = ClientOptions(timeout=HANG)
        with self.assertRaises(Interrupted):
            fetchFile(
                lambda: connect(f"127.0.0.1:{slow}", options=options),
                "stopped.bin",
                target,
                progress=progress,
                interruption=interruption,
            )
        self.assertEqual((progress.total, progress.attempts), (SIZE, 1))
        self.assertEqual(
            sorted(p.name for p in path.parent.iterdir()), [".copy.bin.part", ".copy.bin.part.json", path.name]
        )
        again = TransferProgress()
        resumed = fetchFile(lambda: connect(self.address, options=options), "stopped.bin", target, progress=again)
        self.assertGreaterEqual(resumed.resumedFrom, CHUNK)
        self.assertEqual((again.held, again.total, again.done), (resumed.resumedFrom, SIZE, SIZE))
        self.assertEqual(target.read_bytes(), data)

    def test_connectMakesReadsSteady(self) -> None:
        """
        connect() fixes the malloc thresholds (steadyAllocator, on glibc) and
        the connection then reads STEADY_READ_SIZE per recv; steady=False leaves both.
        """
        from protocols import _allocator, blockingbulk

        self.patch(_allocator, "_steady", False)
        plain = connect(self.address, options=ClientOptions(timeout=HANG), steady=False)
        self.addCleanup(plain.close)
        self.assertFalse(_allocator.allocatorSteady())
        self.assertLess(plain._readSize, blockingbulk.STEADY_READ_SIZE)
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return
        steady = self.connect()
        self.assertTrue(_allocator.allocatorSteady())
        self.assertEqual(steady._readSize, blockingbulk.STEADY_READ_SIZE)

    def test_downloadPathPerPiece(self) -> None:
        """
        A download's receive path runs one Python call per piece where it ran
        two (the body's target is a partial of ClientStreams._piece, not a
        lambda around it), PartialFile.write neither looks its descriptor up
        through a method nor calls readFrom with nothing held before the piece,
        and a GRANT the socket takes whole is sent without a clock read or
        _after (nor a generator to size it).  Counted with sys.setprofile.
        """
        path, data = self.localFile("counted.bin")
        connection = self.connect()
        connection.upload(path)
        calls: Counter[str] = Counter()
        # A function made in _dataStarting (the lambda each piece used to go through): its lines.
        starting = range(
            ClientStreams._dataStarting.__code__.co_firstlineno, ClientStreams._piece.__code__.co_firstlineno
        )

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call":
                code = frame.f_code
                name = code.co_filename.rsplit("/", 1)[-1] + ":" + code.co_name
                if name == "_streams.py:<lambda>" and code.co_firstlineno in starting:
                    name = "_streams.py:_dataStarting's <lambda>"
                calls[name] += 1

        sys.setprofile(profile)
        try:
            fetched = connection.download("counted.bin", path.with_name("counted-back.bin"))
        finally:
            sys.setprofile(None)
        self.assertEqual(fetched.digest, digestOf(data, self.expectedAlgorithm()))
        # (a frame begins by its tokens, or, its headers found whole in a read, at once)
        pieces, frames = calls["_streams.py:_piece"], calls["_wire.py:begin_body"] + calls["_wire.py:begin_frame"]
        self.assertGreaterEqual(frames, SIZE // CHUNK)
        self.assertEqual(calls["_bulkfiles.py:write"], pieces)
        self.assertGreater(calls["blocking.py:_sendRest"], 0)
        for gone in (
            "_bulkfiles.py:_descriptor",
            "_bulkfiles.py:readFrom",
            "blocking.py:_after",
            "blocking.py:<genexpr>",
        ):
            self.assertEqual(calls[gone], 0, gone)


class SharedPartialFileTests(BulkServerCase):
    """
    One partial download for every client: what the Twisted client's fetch
    left when cut, the blocking client resumes, and the reverse.
    """

    def connect(self, address: str | None = None) -> BlockingBulkConnection:
        connection = connect(
            address or self.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG))
        )
        self.addCleanup(connection.close)
        return connection

    def twistedFetch(self, name: str, target: Path, port: int) -> tuple[int, str, str]:
        """C{examples/bulk_client.py fetch NAME --output TARGET} on Twisted through C{port}: status, stdout, stderr."""
        arguments = ["--connect", address(port), "--hashing", "thread", "fetch", name, "--output", target.name]
        done = clientRun("bulk_client.py", *arguments, cwd=target.parent)
        return done.returncode, done.stdout, done.stderr

    def test_twistedPartialResumedByBlocking(self) -> None:
        """The Twisted client's fetch, cut after 3 MiB, leaves .part and its record: the blocking client resumes it."""
        path, data = self.localFile("from-twisted.bin")
        self.connect().upload(path)
        target = path.with_name("copy.bin")
        proxy = self.cuttingProxy("down", 3 * CHUNK)
        status, _, err = self.twistedFetch("from-twisted.bin", target, int(proxy.address.rpartition(":")[2]))
        self.assertNotEqual(status, 0, err)
        self.assertEqual(
            sorted(p.name for p in path.parent.iterdir()), [".copy.bin.part", ".copy.bin.part.json", path.name]
        )
        again = self.connect().download("from-twisted.bin", target)
        self.assertGreater(again.resumedFrom, CHUNK)
        self.assertEqual(again.moved, SIZE - again.resumedFrom)
        self.assertEqual(again.digest, digestOf(data, self.expectedAlgorithm()))
        self.assertEqual(target.read_bytes(), data)
        self.assertEqual(sorted(p.name for p in path.parent.iterdir()), ["copy.bin", path.name])

    def test_blockingPartialResumedByTwisted(self) -> None:
        """The blocking client's download, cut after 3 MiB, leaves .part and its record: bulk_client.py resumes it."""
        path, data = self.localFile("from-blocking.bin")
        self.connect().upload(path)
        target = path.with_name("copy.bin")
        proxy = self.cuttingProxy("down", 3 * CHUNK)
        self.assertRaises(ConnectionLost, self.connect(proxy.address).download, "from-blocking.bin", target)
        self.assertEqual(
            sorted(p.name for p in path.parent.iterdir()), [".copy.bin.part", ".copy.bin.part.json", path.name]
        )
        status, out, err = self.twistedFetch("from-blocking.bin", target, self.port)
        self.assertEqual(status, 0, err)
        summary = re.search(r"resumed from ([\d.]+) MiB, ([\d.]+) MiB moved in this run$", out.splitlines()[-1])
        self.assertIsNotNone(summary, out)
        assert summary is not None
        resumed, moved = float(summary.group(1)), float(summary.group(2))
        self.assertGreater(resumed, CHUNK / MiB)
        self.assertLess(moved, SIZE / MiB - CHUNK / MiB)
        self.assertRegex(out, rf"(?m)^resuming from-blocking\.bin from {summary.group(1)} MiB of [\d.]+ MiB$")
        self.assertIn(digestOf(data, self.expectedAlgorithm()).hex(), out)
        self.assertEqual(target.read_bytes(), data)
        self.assertEqual(sorted(p.name for p in path.parent.iterdir()), ["copy.bin", path.name])


class ReadSizeTests(SynchronousTestCase):
    """A bulk connection of the blocking client reads as much at a time as the Twisted one (steady allocator)."""

    def test_steadyReadSizeIsTwisted(self) -> None:
        """blockingbulk.STEADY_READ_SIZE is protocols.bulk.STEADY_READ_SIZE (kept apart: that package loads Twisted)."""
        from protocols import blockingbulk, bulk

        self.assertEqual(blockingbulk.STEADY_READ_SIZE, bulk.STEADY_READ_SIZE)
