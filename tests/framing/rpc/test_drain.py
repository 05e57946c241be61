# -*- test-case-name: tests.framing.rpc.test_drain -*-
"""Tests for framing.rpc._drain: GOAWAY's states and when its receiver closes, sans-IO."""

from __future__ import annotations

import inspect

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._drain import OPEN, RECEIVED, SENT, Drain
from framing.rpc._wire import GOAWAY, Message


class DrainTests(SynchronousTestCase):
    def test_send(self) -> None:
        """Going away: GOAWAY with the grace in whole milliseconds (never below 0), once; no new call then."""
        drain = Drain()
        self.assertTrue(drain.state.calling)
        self.assertEqual(drain.send(2.5004), Message((GOAWAY, 2500)))
        self.assertIs(drain.state, SENT)
        self.assertFalse(drain.state.calling)
        self.assertEqual(drain.grace, 2.5004)
        self.assertIsNone(drain.send(1.0))
        self.assertEqual(Drain().send(-3.0), Message((GOAWAY, 0)))

    def test_received(self) -> None:
        """The peer's first GOAWAY changes the state and sets the grace; a later one (or one after ours) does not."""
        drain = Drain()
        self.assertFalse(drain.draining)
        self.assertTrue(drain.received(Message((GOAWAY, 1500))))
        self.assertIs(drain.state, RECEIVED)
        self.assertEqual(drain.grace, 1.5)
        self.assertTrue(drain.draining)
        self.assertFalse(drain.received(Message((GOAWAY, 9000))))
        self.assertEqual(drain.grace, 1.5)
        sender = Drain()
        sender.send(1.0)
        self.assertFalse(sender.received(Message((GOAWAY, 0))))
        self.assertIs(sender.state, SENT)

    def test_closes(self) -> None:
        """
        The receiver of GOAWAY closes once nothing is in flight either way:
        no call waiting, none of the peer's running, no object stream open.
        """
        drain = Drain()
        self.assertIs(drain.state, OPEN)
        self.assertFalse(drain.closes(0, 0, 0))
        drain.received(Message((GOAWAY, 0)))
        self.assertTrue(drain.closes(0, 0, 0))
        self.assertFalse(drain.closes(1, 0, 0))
        self.assertFalse(drain.closes(0, 1, 0))
        self.assertFalse(drain.closes(0, 0, 1))

    def test_senderDoesNotCloseWhenIdle(self) -> None:
        """The sender of GOAWAY closes at its grace's end, not when idle (its peer closes first)."""
        drain = Drain()
        drain.send(1.0)
        self.assertFalse(drain.closes(0, 0, 0))

    def test_shellsCallTheRule(self) -> None:
        """The Twisted drain and the clients' session ask the one Drain; neither builds GOAWAY nor judges idleness."""
        import framing.rpc._session
        import protocols.rpc._drain

        for module in (framing.rpc._session, protocols.rpc._drain):
            source = inspect.getsource(module)
            self.assertIn(".closes(", source, module.__name__)
            self.assertNotIn("((GOAWAY,", source, module.__name__)
            self.assertNotIn("/ 1000", source, module.__name__)
