"""Bulk-transfer faults over real loopback TCP: a receiver's disk fails mid-transfer, connections are cut.

Every case checks the same three promises: the caller's Deferred fails with
the reason (or succeeds, verified), nothing half-written appears under the
final name (on disk or in the service's C{list}), and once the fault is
gone the transfer resumes from what the receiver holds and verifies.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.trial.unittest import TestCase

from protocols import bulk, rpc
from protocols.bulk import _files as bulkfiles
from protocols.bulk._files import Assembly, AssemblySink, BulkService, fetchFile, sendFile
from protocols.bulk._integrity import availableDigests, newHash
from protocols.bulk._sinks import Release, Sink
from protocols.bulk._streams import IncomingStream, Stream

from ..processes import figure
from ..protocols.bulk.support import payload, writeFile
from ..protocols.helpers import pytestTest, trialTest
from .support import BulkServerProcess, CuttingProxy

STREAMS = bulk.BulkOptions()
"""Both ends carry bulk streams, with the default options."""
CONNECTING = rpc.ClientOptions(bulk=STREAMS)

SIZE = 8 * 1024 * 1024
"""Eight default 1 MiB chunks: the fault falls well inside the transfer."""
FAIL_AT = 3 * 1024 * 1024
"""How many bytes the failing disk takes before it is full."""


async def _failure(d: Deferred[Any]) -> BaseException:
    """Wait for C{d}; return the exception it failed with (an answer is a test failure)."""
    try:
        result = await d
    except Exception as error:
        return error
    raise AssertionError(f"expected a failure, got {result!r}")


def _visible(directory: Path) -> list[str]:
    """The names a directory listing would present as files (the service hides dot-files)."""
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


class _FullDiskSink(Sink):
    """An assembly sink whose disk is full past C{service.room} bytes while C{service.full} is set."""

    sequential = False
    verifies = True

    def __init__(self, service: _FullDiskService, assembly: Assembly) -> None:
        self.service, self.inner = service, AssemblySink(assembly)

    def write(self, offset: int, data: bytes, release: Release) -> None:
        if self.service.full and self.inner.assembly.held.total + len(data) > self.service.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.inner.assembly.partPath))
        self.inner.write(offset, data, release)

    def complete(self) -> None:
        self.inner.complete()

    def fail(self, reason: BaseException) -> None:
        self.inner.fail(reason)


class _FullDiskService(BulkService):
    """A bulk service whose disk fills up after C{room} bytes of an upload, until C{full} is cleared."""

    room = FAIL_AT
    full = True

    def uploadSink(self, assembly: Assembly, stream: IncomingStream) -> Sink:
        return _FullDiskSink(self, assembly)


async def uploadDiskFull(reactor: Any) -> None:
    """The server's disk fills mid-upload: sendFile fails with ENOSPC's text, nothing is listed; cleared, it resumes."""
    with tempfile.TemporaryDirectory() as work:
        served = Path(work, "served")
        service = _FullDiskService(served, reactor=reactor)
        factory = rpc.serverFactory(service, options=rpc.ServerOptions(bulk=STREAMS, guard=None), clock=reactor)
        port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory)
        description = f"tcp:host=127.0.0.1:port={port.getHost().port}"
        data = payload(SIZE, seed=9)
        source = writeFile(Path(work, "source.bin"), data)

        def connect() -> Deferred[Any]:
            return rpc.connect(reactor, description, options=CONNECTING)

        try:
            error = await _failure(Deferred.fromCoroutine(sendFile(connect, source, "f.bin", clock=reactor)))
            assert os.strerror(errno.ENOSPC) in str(error), repr(error)
            root = await connect()
            assert await root.callRemote("list") == []
            # The upload left with its connections; its partial file stays for a resume.
            version = bulkfiles.fileVersion(source)
            opened = await root.callRemote("openUpload", "f.bin", SIZE, version, list(availableDigests()))
            held = sum(end - start for start, end in opened["held"])
            await root.broker.disconnect()
            assert not (served / "f.bin").exists() and _visible(served) == []
            assert 0 < held <= FAIL_AT, held
            service.full = False
            result = await sendFile(connect, source, "f.bin", clock=reactor)
            assert result.digest == _digest(data)
            assert result.payload <= SIZE - held + 2 * 1024 * 1024, (result.payload, held)
            assert (served / "f.bin").read_bytes() == data and _visible(served) == ["f.bin"]
            figure(f"upload, server disk full: failed with {error!r}; held {held}; resumed sending {result.payload}")
        finally:
            await factory.disconnectAll()
            await port.stopListening()


async def downloadDiskFull(reactor: Any) -> None:
    """The client's disk fills mid-download: fetchFile fails with ENOSPC, the file is absent; cleared, it resumes."""
    with tempfile.TemporaryDirectory() as work:
        served = Path(work, "served")
        served.mkdir()
        data = payload(SIZE, seed=10)
        writeFile(served / "g.bin", data)
        serving = rpc.ServerOptions(bulk=STREAMS)
        port = await rpc.serve(
            reactor, "tcp:0:interface=127.0.0.1", BulkService(served, reactor=reactor), options=serving
        )
        description = f"tcp:host=127.0.0.1:port={port.getHost().port}"
        target = Path(work, "copy.bin")
        written = [0]
        realWriteAt = bulkfiles.writeAt

        def fullDisk(fd: int, piece: Any, offset: int) -> None:
            # The assembly's only disk write: refuse it once FAIL_AT bytes are written.
            if written[0] + len(piece) > FAIL_AT:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written[0] += len(piece)
            realWriteAt(fd, piece, offset)

        def connect() -> Deferred[Any]:
            return rpc.connect(reactor, description, options=CONNECTING)

        try:
            bulkfiles.writeAt = fullDisk
            try:
                error = await _failure(Deferred.fromCoroutine(fetchFile(connect, "g.bin", target, clock=reactor)))
            finally:
                bulkfiles.writeAt = realWriteAt
            assert isinstance(error, OSError) and error.errno == errno.ENOSPC, repr(error)
            assert not target.exists() and _visible(Path(work)) == ["served"]
            result = await fetchFile(connect, "g.bin", target, clock=reactor)
            assert result.digest == _digest(data)
            assert result.payload <= SIZE - written[0] + 2 * 1024 * 1024, (result.payload, written[0])
            assert target.read_bytes() == data
            figure(f"download, client disk full: failed with {error!r}; resumed fetching {result.payload}")
        finally:
            await port.stopListening()


async def exampleServerFileSizeLimit(reactor: Any) -> None:
    """The example server's writes fail (EFBIG, a real OS error): uploads fail with it; restarted, they resume."""
    with tempfile.TemporaryDirectory() as work:
        served = Path(work, "served")
        data = payload(SIZE, seed=11)
        source = writeFile(Path(work, "source.bin"), data)
        server = BulkServerProcess(served, fileSizeLimit=FAIL_AT)

        def connect() -> Deferred[Any]:
            return rpc.connect(reactor, server.description, options=CONNECTING)

        try:
            error = await _failure(Deferred.fromCoroutine(sendFile(connect, source, "h.bin", clock=reactor)))
            assert os.strerror(errno.EFBIG) in str(error), repr(error)
            assert _visible(served) == []
            # A whole-file put (FileSink: a temporary name, renamed once verified) fails the same way and
            # leaves nothing: neither the final name nor its temporary file.
            root = await connect()
            try:
                putError = await _failure(root.callRemote("put", "p.bin", Stream(data)))
                assert os.strerror(errno.EFBIG) in str(putError), repr(putError)
                assert await root.callRemote("list") == []
            finally:
                await root.broker.disconnect()
            assert not [p.name for p in served.iterdir() if p.name.startswith(".p.bin")]
            server.stop()
            server = BulkServerProcess(served)
            result = await sendFile(connect, source, "h.bin", clock=reactor)
            assert result.digest == _digest(data)
            assert result.payload <= SIZE - FAIL_AT + 3 * 1024 * 1024, result
            assert (served / "h.bin").read_bytes() == data and _visible(served) == ["h.bin"]
            figure(f"example server, EFBIG: failed with {error!r}; after restart sent {result.payload}")
        finally:
            server.stop()


async def exampleServerCuts(reactor: Any) -> None:
    """Against the example server, an upload and a download each cut four times resume and verify."""
    with tempfile.TemporaryDirectory() as work:
        served = Path(work, "served")
        data = payload(SIZE, seed=12)
        source = writeFile(Path(work, "source.bin"), data)
        server = BulkServerProcess(served)
        cuts = [SIZE // 5] * 4
        try:
            up = await CuttingProxy(reactor, server.port, cuts, "up").start()
            sent = await sendFile(
                lambda: rpc.connect(reactor, up.description, options=CONNECTING), source, "c.bin", clock=reactor
            )
            await up.stop()
            assert (sent.cuts, up.cutsMade) == (4, 4), (sent, up.cutsMade)
            assert sent.digest == _digest(data)
            assert (served / "c.bin").read_bytes() == data
            down = await CuttingProxy(reactor, server.port, cuts, "down").start()
            target = Path(work, "back.bin")
            got = await fetchFile(
                lambda: rpc.connect(reactor, down.description, options=CONNECTING), "c.bin", target, clock=reactor
            )
            await down.stop()
            assert (got.cuts, down.cutsMade) == (4, 4), (got, down.cutsMade)
            assert got.digest == sent.digest and target.read_bytes() == data
            figure(f"example server, 4 cuts each way: sent {sent.payload}, fetched {got.payload} for {SIZE} bytes")
        finally:
            server.stop()


class BulkFaultTests(TestCase):
    """Bulk-transfer faults over loopback TCP (trial runs these; pytest runs the twins below)."""

    timeout = 60
    test_upload_disk_full = trialTest(uploadDiskFull)
    test_download_disk_full = trialTest(downloadDiskFull)
    test_example_server_file_size_limit = trialTest(exampleServerFileSizeLimit)
    test_example_server_cuts = trialTest(exampleServerCuts)


test_upload_disk_full = pytestTest(uploadDiskFull)
test_download_disk_full = pytestTest(downloadDiskFull)
test_example_server_file_size_limit = pytestTest(exampleServerFileSizeLimit)
test_example_server_cuts = pytestTest(exampleServerCuts)


def _digest(data: bytes) -> bytes:
    """C{data}'s digest under the one two default ends choose (BLAKE3 with chunkwire[fast], else SHA-256)."""
    hasher = newHash(availableDigests()[0])
    hasher.update(data)
    digest: bytes = hasher.digest()
    return digest
