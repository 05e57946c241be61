"""Object stream attacks against a real server process (L{tests.attack.streamserver}).

- Connections closed with their streams unfinished, 60 times over, leave
  nothing behind: before, 60 cycles of 999 input streams grew the server
  from 49 to 400 MiB and a collection 10 s later found 59,940 readers and
  62 brokers alive (Twisted's one shared C{ConnectionDone} kept every
  consumer's frames: see L{protocols.rpc.streams}).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from .attacks_streams import StreamServer, unfinishedStreams

MiB = 1024 * 1024
CYCLES = 60
RSS_BOUND = 64 * MiB
"""How far above idle the server's RSS may be once the cycles are over (it
grew 351 MiB before the fix; about 23 MiB after, CPython keeping arenas)."""
DEADLINE = 60.0
"""Seconds the server may take to see the last connection closed: only a hang misses it."""


class UnfinishedStreamTests(SynchronousTestCase):
    """A server whose clients leave streams unfinished frees them with each connection."""

    def test_unfinishedStreamsFreed(self) -> None:
        """60 cycles of 999 input streams, then 60 of 50 input and 5 output streams: no reader or broker left."""
        with tempfile.TemporaryDirectory() as logs:
            server = StreamServer(Path(logs) / "streams.log")
            try:
                idle = server.rss()
                for _ in range(CYCLES):
                    unfinishedStreams(server.port, 999, 0)
                for _ in range(CYCLES):
                    unfinishedStreams(server.port, 50, 5)
                deadline = time.monotonic() + DEADLINE
                left = server.census()
                while left != (0, 0) and time.monotonic() < deadline:
                    left = server.census()
                after = server.rss()
            finally:
                server.stop()
        self.assertEqual(left, (0, 0), "readers and brokers alive after every connection closed")
        self.assertLess(after - idle, RSS_BOUND, (idle, after))
