"""How often a received byte is copied on its way to the sink: not at all for sinks that write pieces out."""

from __future__ import annotations

import os
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from protocols import rpc
from protocols.bulk import IncomingStream, Stream, _sinks
from protocols.bulk._files import AssemblySink
from protocols.bulk._sinks import FileSink, OpenFileSink, Piece, Release, Sink

from .support import BulkPair, negotiatedHash, payload


class Recording(Sink):
    """A random-access sink that records each piece as it was handed over."""

    sequential = False

    def __init__(self, views: bool) -> None:
        self.views = views
        self.pieces: list[Piece] = []

    def write(self, offset: int, data: Piece, release: Release) -> None:
        self.pieces.append(data)
        release(len(data))


class Receiving(rpc.Referenceable):
    """Receives each uploaded stream into the sink it was given; answers with the verified digest."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    @rpc.remote
    async def take(self, stream: IncomingStream) -> str:
        result = await stream.receive(self.sink)
        return result.hexdigest


class PieceCopyTests(SynchronousTestCase):
    """A piece cut from a read is copied only for a sink that wants C{bytes}."""

    def upload(self, sink: Any, data: bytes) -> None:
        pair = BulkPair(Receiving(sink))
        answer = pair.root.callRemote("take", Stream(data))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(data).hexdigest())

    def test_viewsNotCopied(self) -> None:
        """A sink that takes views gets each piece cut from a read as a read-only view into it: no copy."""
        sink = Recording(views=True)
        data = payload(100_000)
        self.upload(sink, data)
        views = [piece for piece in sink.pieces if type(piece) is memoryview]
        # Each frame arrives in the read that also holds its header: its body is a view.
        self.assertEqual(len(views), len(sink.pieces))
        self.assertTrue(all(view.readonly and type(view.obj) is bytes for view in views))
        self.assertEqual(b"".join(sink.pieces), data)

    def test_bytesByDefault(self) -> None:
        """A sink that does not say it takes views (a consumer, a callback, the default) gets bytes."""
        sink = Recording(views=False)
        data = payload(100_000)
        self.upload(sink, data)
        self.assertTrue(all(type(piece) is bytes for piece in sink.pieces))
        self.assertEqual(b"".join(sink.pieces), data)

    def test_callbackGetsBytes(self) -> None:
        """A callback receiving a stream is handed bytes."""
        pieces: list[Any] = []
        data = payload(50_000)
        self.upload(pieces.append, data)
        self.assertTrue(pieces)
        self.assertTrue(all(type(piece) is bytes for piece in pieces))

    def test_fileSinksTakeViews(self) -> None:
        """A path, an open file written at its offsets and a file-service assembly all take views."""
        self.assertTrue(FileSink("x").views)
        self.assertTrue(AssemblySink.views)
        with open(os.devnull, "wb") as file:
            self.assertTrue(OpenFileSink(file).views)
        self.assertFalse(OpenFileSink(_Writes()).views)

    def test_shortWritesGoOn(self) -> None:
        """
        A write that the system takes only part of goes on from where it
        stopped, at the right offset: writeAt (the file service's) and a
        path sink's pieces land whole, and the sink releases each piece once.
        """
        real = os.pwrite
        calls: list[int] = []

        def short(fd: int, data: Any, offset: int) -> int:
            calls.append(len(data))
            return real(fd, memoryview(data)[:7], offset)

        self.patch(os, "pwrite", short)
        data = payload(100)
        target = self.mktemp()
        fd = os.open(target, os.O_RDWR | os.O_CREAT)
        try:
            _sinks.writeAt(fd, memoryview(data), 5)
            self.assertEqual(os.pread(fd, 200, 0), bytes(5) + data)
        finally:
            os.close(fd)
        self.assertEqual(calls, list(range(100, 0, -7)))
        sink = FileSink(self.mktemp())
        sink.start(None, lambda reason: None)
        released: list[int] = []
        sink.write(0, data[:40], released.append)
        sink.write(40, memoryview(data)[40:], released.append)
        sink.complete()
        self.assertEqual(released, [40, 60])
        with open(sink.path, "rb") as file:
            self.assertEqual(file.read(), data)

    def test_fileReceivedFromViews(self) -> None:
        """A stream received into a path arrives whole and verified, written from views."""
        path = self.mktemp()
        data = payload(100_000)
        self.upload(path, data)
        with open(path, "rb") as file:
            self.assertEqual(file.read(), data)


class _Writes:
    """A file-like object with only C{write}: it gets bytes, in order."""

    def write(self, data: bytes) -> int:
        return len(data)
