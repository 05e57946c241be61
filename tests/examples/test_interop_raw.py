"""examples/interop_client.py's raw peer keeps at most RAW_LIMIT bytes of what a server sends (a flooding server)."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ROOT


def _imported() -> ModuleType:
    """Import examples/interop_client.py as the examples do (their directory on sys.path, for as long as it takes)."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import interop_client
    finally:
        sys.path.pop(0)
    return interop_client


interop_client = _imported()


class _Transport:
    """Records what the raw peer does to its connection."""

    def __init__(self) -> None:
        self.aborted = 0

    def abortConnection(self) -> None:
        self.aborted += 1


class RawPeerTests(SynchronousTestCase):
    """A server that sends more than any answer to a raw case fails the case; the client does not grow."""

    def setUp(self) -> None:
        self.peer = interop_client.RawPeer(Clock())
        self.transport = _Transport()
        self.peer.transport = self.transport  # type: ignore[assignment]

    def test_floodNotKept(self) -> None:
        """Past RAW_LIMIT bytes nothing more is kept, and the connection is closed once."""
        chunk = b"\0" * 65536
        for _ in range(2 * interop_client.RAW_LIMIT // len(chunk)):
            self.peer.dataReceived(chunk)
        self.assertLessEqual(len(self.peer.data), interop_client.RAW_LIMIT)
        self.assertTrue(self.peer.overflowed)
        self.assertEqual(self.transport.aborted, 1)

    def test_caseFailsPastTheLimit(self) -> None:
        """A case waiting for something the first RAW_LIMIT bytes did not hold fails at once, saying why."""
        self.peer.dataReceived(b"\0" * (interop_client.RAW_LIMIT + 1))
        waited: Deferred[Any] = Deferred.fromCoroutine(self.peer.until(lambda things: None, "an answer", 60.0))
        failure = self.failureResultOf(waited, interop_client.CaseFailed)
        self.assertIn(f"first {interop_client.RAW_LIMIT} bytes", str(failure.value))

    def test_smallAnswersKept(self) -> None:
        """What a server answering a raw case sends is kept whole."""
        self.peer.dataReceived(b"x" * 100)
        self.assertEqual(bytes(self.peer.data), b"x" * 100)
        self.assertFalse(self.peer.overflowed)
