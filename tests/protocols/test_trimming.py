"""The allocator trim after a connection that held much ends: on its own thread, at a bounded rate."""

from __future__ import annotations

import threading
from typing import Any

from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from framing.wire import PREAMBLE
from protocols import _trimming as trimming
from protocols._base import TokenProtocol
from protocols._trimming import TRIM_AFTER_PEAK, Trimmer

DEADLINE = 60.0
"""Seconds a trim may take to happen on its thread: only a hang misses it."""


class TrimmerTests(SynchronousTestCase):
    """Requests run the trim on its own thread, no sooner than the delay after one and the interval after the last."""

    def test_boundedRate(self) -> None:
        """Many requests make one trim after the delay; the next waits out the interval since the last."""
        ran = [threading.Event(), threading.Event(), threading.Event()]
        gate = threading.Event()
        waits: list[float] = []
        trims: list[int] = []

        def trim() -> None:
            trims.append(len(waits))
            ran[len(trims) - 1].set()

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            gate.wait(DEADLINE)  # (the first trim waits until every request of the burst was made)

        trimmer = Trimmer(trim, interval=5.0, delay=0.25, clock=lambda: 100.0, sleep=sleep)
        for _ in range(50):
            trimmer.request()
        gate.set()
        self.assertTrue(ran[0].wait(DEADLINE))
        trimmer.request()
        self.assertTrue(ran[1].wait(DEADLINE))
        self.assertEqual((waits, trims), ([0.25, 5.0], [1, 2]))
        thread = trimmer._thread
        assert thread is not None
        thread.join(DEADLINE)
        self.assertFalse(thread.is_alive())  # (no thread is left between trims)

    def test_noTrimWithout(self) -> None:
        """Where there is no malloc_trim, a request does nothing (and starts no thread)."""
        trimmer = Trimmer(None)
        trimmer.request()
        self.assertIsNone(trimmer._thread)


class _Requests:
    def __init__(self) -> None:
        self.count = 0

    def request(self) -> None:
        self.count += 1


class ConnectionTests(SynchronousTestCase):
    """A connection asks for a trim when it ends if its ledger held at least TRIM_AFTER_PEAK at once."""

    def ended(self, held: int) -> int:
        requests = _Requests()
        self.patch(trimming, "TRIMMER", requests)
        protocol: Any = TokenProtocol()
        protocol.makeConnection(StringTransport())
        protocol.dataReceived(PREAMBLE)
        protocol.ledger.charge("test", held)
        protocol.connectionLost(Failure(ConnectionDone()))
        return requests.count

    def test_muchHeld(self) -> None:
        self.assertEqual(self.ended(TRIM_AFTER_PEAK), 1)

    def test_littleHeld(self) -> None:
        self.assertEqual(self.ended(TRIM_AFTER_PEAK - 1), 0)
