"""Tests for L{protocols.rpc._disconnection}: each waiter fires once the connection is lost, never fails, and can go."""

from __future__ import annotations

from twisted.internet.defer import CancelledError
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from protocols.rpc._disconnection import Disconnection


class DisconnectionTests(SynchronousTestCase):
    """Disconnection hands each caller a Deferred of its own for the end."""

    def test_waitersFireOnNotify(self) -> None:
        """Waiters fire with the exception, in order, on notify (not on lost); later waiters at once."""
        ended = Disconnection()
        fired: list[str] = []
        first, second = ended.wait(), ended.wait()
        first.addCallback(lambda e: fired.append(f"first {type(e).__name__}"))
        second.addCallback(lambda e: fired.append(f"second {type(e).__name__}"))
        ended.lost(Failure(ConnectionLost()))
        self.assertEqual(fired, [])
        self.assertIsNotNone(ended.reason)
        ended.notify()
        self.assertEqual(fired, ["first ConnectionLost", "second ConnectionLost"])
        self.assertIsInstance(self.successResultOf(ended.wait()), ConnectionLost)

    def test_cleanClose(self) -> None:
        """A clean close fires the waiters with ConnectionDone (a result, not a failure)."""
        ended = Disconnection()
        waiter = ended.wait()
        ended.lost(Failure(ConnectionDone()))
        ended.notify()
        self.assertIsInstance(self.successResultOf(waiter), ConnectionDone)

    def test_cancelledForgotten(self) -> None:
        """A cancelled waiter fails with CancelledError and is not kept; the others still fire."""
        ended = Disconnection()
        gone, kept = ended.wait(), ended.wait()
        gone.cancel()
        self.failureResultOf(gone, CancelledError)
        self.assertEqual(len(ended._waiters), 1)
        ended.lost(Failure(ConnectionLost()))
        ended.notify()
        self.assertIsInstance(self.successResultOf(kept), ConnectionLost)
