"""What a receiver does per read of a data frame into a file, hashed inline: the functions it runs, counted."""

from __future__ import annotations

import os
import sys
from collections import Counter
from types import FrameType
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

import framing
import protocols
from protocols.bulk import BulkOptions, Stream
from protocols.bulk._sinks import FileSink

from .support import BulkPair, negotiatedHash, payload
from .test_copies import Receiving

ROOTS = tuple(package.__file__.rsplit("/", 1)[0] + "/" for package in (framing, protocols))  # type: ignore[union-attr]

CHUNK = 4096
OPTIONS = BulkOptions(chunkSize=CHUNK, window=8 * CHUNK, grantStep=CHUNK, hashing="inline")
"""Frames of 4 KiB, a window whose grant step is one frame (hashed inline, halved to 16 KiB): a grant per read."""


def counted(pair: BulkPair, reads: list[Counter[str]]) -> None:
    """Count what each read of the server's connection holding a data frame runs, one L{Counter} per read."""
    connection = pair.pair.serverTransport.protocol
    original = connection.dataReceived

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(ROOTS):
            # By the file's name without its private underscore: _receiving.py counts as receiving.py.
            calls[frame.f_code.co_filename.rsplit("/", 1)[1].removeprefix("_") + ":" + frame.f_code.co_name] += 1
        elif event == "c_call" and arg is os.pwrite:
            calls["os.pwrite"] += 1

    calls: Counter[str] = Counter()

    def dataReceived(data: bytes) -> None:
        if len(data) <= CHUNK:
            original(data)
            return
        calls.clear()
        sys.setprofile(profile)
        try:
            original(data)
        finally:
            sys.setprofile(None)
        reads.append(Counter(calls))

    connection.dataReceived = dataReceived


class FrameReadTests(SynchronousTestCase):
    """A stream received into a path on a short path (in memory: no delay), read a frame at a time."""

    def setUp(self) -> None:
        self.path = self.mktemp()
        self.data = payload(200 * CHUNK)
        pair = BulkPair(Receiving(self.path), options=OPTIONS)
        self.reads: list[Counter[str]] = []
        counted(pair, self.reads)
        answer = pair.root.callRemote("take", Stream(self.data))
        pair.flush()
        self.assertEqual(self.successResultOf(answer), negotiatedHash(self.data).hexdigest())
        with open(self.path, "rb") as file:
            self.assertEqual(file.read(), self.data)
        # Past the start (the initial window, the round-trip probe): the steady state of a transfer.
        self.steady = self.reads[20:]
        self.assertGreater(len(self.steady), 150)

    def test_oneWritePerFrame(self) -> None:
        """Each frame's body is written with one pwrite, and hashed with one call."""
        for calls in self.steady:
            self.assertEqual((calls["os.pwrite"], calls["integrity.py:_consume"]), (1, 1), calls)

    def test_oneGrantDecisionPerPiece(self) -> None:
        """
        The inline hasher is done with a piece at once, so only the sink's release asks whether to grant:
        one decision per piece, not one per release.
        """
        for calls in self.steady:
            self.assertEqual((calls["receiving.py:piece"], calls["receiving.py:_released"]), (1, 1), calls)
            self.assertEqual(calls["receiving.py:_hashRelease"], 0, calls)

    def test_grantWrittenAsBytes(self) -> None:
        """Each read frees a grant step and sends one GRANT, written as its bytes: no encoder, no send transaction."""
        for calls in self.steady:
            self.assertEqual(calls["wire.py:grantMessage"], 1, calls)
            self.assertEqual(calls["channel.py:sendControl"], 1, calls)
            sent = [name for name in calls if name.endswith((":sendObject", ":encode_into", ":write_container"))]
            self.assertEqual(sent, [], calls)

    def test_noTunerOnAShortPath(self) -> None:
        """Once the path showed itself too short to tune (loopback, a LAN), no frame or grant runs the tuner."""
        self.assertTrue(any(calls["tuning.py:frameArrived"] for calls in self.reads[:20]))
        for calls in self.steady:
            self.assertEqual([name for name in calls if name.startswith("tuning.py:")], [], calls)


class ShortWriteTests(SynchronousTestCase):
    """A file sink whose pwrite writes less than asked still writes the whole piece, at its offset."""

    def test_shortWrites(self) -> None:
        written: list[int] = []
        pwrite = os.pwrite

        def shortWrite(fd: int, data: Any, offset: int) -> int:
            piece = bytes(data[:1000])
            written.append(len(piece))
            return pwrite(fd, piece, offset)

        self.patch(os, "pwrite", shortWrite)
        path = self.mktemp()
        sink = FileSink(path)
        sink.start(None, lambda error: None)
        released: list[int] = []
        data = payload(2500)
        sink.write(0, memoryview(data), released.append)
        sink.write(2500, data[:10], released.append)
        sink.complete()
        with open(path, "rb") as file:
            self.assertEqual(file.read(), data + data[:10])
        self.assertEqual((written, released), ([1000, 1000, 500, 10], [2500, 10]))
