"""Bulk transfers of the asyncio client (L{protocols.asynciobulk}) against the example bulk server, run as a process.

One server (examples/bulk_server.py) serves the whole class under pytest
(each test its own under trial); each case runs its own event loop
(C{asyncio.run}) and uses file names of its own.  Listed in dev.py's
PROCESS_TESTS (compiled core only).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from framing.bulk import IntegrityError
from framing.bulk._errors import StreamReset
from framing.bulk._states import ReceiveState
from framing.rpc._errors import ConnectionLost
from framing.rpc._limits import CallLimits
from protocols._bulkfiles import Progress, uploadSteps
from protocols.asynciobulk import AsyncBulkConnection, connect, fileStream
from protocols.options import ClientOptions
from tests.protocols.bulkclients import CHUNK, HANG, SIZE, BulkServerCase, digestOf


class AsyncioBulkTests(BulkServerCase):
    """Uploads and downloads awaited on one connection: concurrent, checked, resumed after a cut."""

    def runLoop(self, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run C{work} on a fresh event loop, bounded so that only a hang misses it."""

        async def bounded() -> Any:
            return await asyncio.wait_for(work(), HANG)

        return asyncio.run(bounded())

    async def connect(self, address: str | None = None) -> AsyncBulkConnection:
        return await connect(
            address or self.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG))
        )

    def test_concurrentTransfers(self) -> None:
        """An upload, then a download and a whole upload at once on one connection, all with the file's digest."""
        path, data = self.localFile("async.bin")
        algorithm = self.expectedAlgorithm()

        async def work() -> Any:
            async with await self.connect() as connection:
                sent = await connection.upload(path)
                both = await asyncio.gather(
                    connection.download("async.bin", path.with_name("back.bin")),
                    connection.upload(path, "async-whole.bin", resume=False),
                )
                return sent, both

        sent, (fetched, whole) = self.runLoop(work)
        self.assertEqual((sent.algorithm, sent.digest), (algorithm, digestOf(data, algorithm)))
        self.assertEqual((fetched.digest, whole.digest), (sent.digest, sent.digest))
        self.assertEqual(path.with_name("back.bin").read_bytes(), data)
        self.assertEqual((self.served / "async-whole.bin").read_bytes(), data)

    def test_fileStreamAsArgument(self) -> None:
        """fileStream(path) passed to one's own method (the service's put) sends the file, checked, then closes it."""
        path, data = self.localFile("async-own.bin")
        stream = fileStream(path)

        async def work() -> Any:
            async with await self.connect() as connection:
                return await connection.root.callRemote("put", "async-own.bin", stream)

        hexdigest = self.runLoop(work)
        self.assertEqual(bytes.fromhex(hexdigest), digestOf(data, self.expectedAlgorithm()))
        self.assertEqual(stream.sentBytes, SIZE)
        self.assertTrue(stream.source.closed)  # type: ignore[attr-defined]
        self.assertEqual((self.served / "async-own.bin").read_bytes(), data)

    def test_cancelledReceive(self) -> None:
        """
        Cancelling an awaited receive cancels the stream (CANCEL to the
        server): it fails with StreamReset, nothing more reaches the sink,
        and the connection goes on serving calls.
        """
        path, _ = self.localFile("async-cancelled.bin")

        class FirstWriteCancels:
            def __init__(self) -> None:
                self.writes = 0
                self.task: asyncio.Task[Any] | None = None

            def write(self, offset: int, data: Any) -> None:
                self.writes += 1
                if self.writes == 1 and self.task is not None:
                    self.task.cancel()

        async def work() -> Any:
            async with await self.connect() as connection:
                await connection.upload(path)
                incoming = await connection.root.callRemote("get", "async-cancelled.bin")
                sink = FirstWriteCancels()
                sink.task = asyncio.ensure_future(connection.receive(incoming, sink))
                try:
                    await sink.task
                except asyncio.CancelledError:
                    pass
                else:
                    self.fail("the receive was not cancelled")
                writes = sink.writes
                listed = await connection.root.callRemote("list")
                return incoming, writes, sink.writes, listed

        incoming, writes, later, listed = self.runLoop(work)
        self.assertEqual((incoming.state, type(incoming.failure)), (ReceiveState.FAILED, StreamReset))
        self.assertEqual(later, writes)
        self.assertIn("async-cancelled.bin", [name for name, _ in listed])

    def test_uploadResumedAfterCut(self) -> None:
        """An upload cut after 3 MiB, made again on a new connection, sends only what the server lacks."""
        path, data = self.localFile("async-cut.bin")
        proxy = self.cuttingProxy("up", 3 * CHUNK)
        progress = Progress()

        async def work() -> Any:
            cut = await self.connect(proxy.address)
            try:
                await cut.run(uploadSteps(path, progress=progress))
            except ConnectionLost:
                await cut.close()
            else:
                self.fail("the upload was not cut")
            async with await self.connect() as connection:
                return await connection.run(uploadSteps(path, progress=progress))

        result = self.runLoop(work)
        self.assertGreater(result.resumedFrom, 0)
        self.assertLess(result.moved - SIZE, 2 * CHUNK)
        self.assertEqual((self.served / "async-cut.bin").read_bytes(), data)

    def test_corruptPartialFile(self) -> None:
        """A resumed download whose held bytes were corrupted fails with IntegrityError; nothing is put in place."""
        path, _ = self.localFile("async-corrupt.bin")
        target = path.with_name("copy.bin")
        proxy = self.cuttingProxy("down", 3 * CHUNK)

        async def cutDownload() -> None:
            async with await self.connect() as connection:
                await connection.upload(path)
            cut = await self.connect(proxy.address)
            try:
                await cut.download("async-corrupt.bin", target)
            finally:
                await cut.close()

        self.assertRaises(ConnectionLost, self.runLoop, cutDownload)
        part = path.with_name(".copy.bin.part")
        with open(part, "r+b") as file:
            first = file.read(1)
            file.seek(0)
            file.write(bytes([first[0] ^ 0xFF]))

        async def resume() -> None:
            async with await self.connect() as connection:
                await connection.download("async-corrupt.bin", target)

        self.assertRaises(IntegrityError, self.runLoop, resume)
        self.assertFalse(target.exists())
        self.assertFalse(part.exists())
