"""framing.rpc._context: how call scopes nest and what a call carries of its deadline, the same for every client."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._context import Scope, narrowed, sendingDeadline
from framing.rpc._errors import DeadlineExceeded


class NarrowedTests(SynchronousTestCase):
    """A nested block's scope."""

    def test_earlierDeadlineWins(self) -> None:
        """The inner block cannot extend the outer deadline; it may shorten it; None keeps the outer one."""
        outer = Scope(10.0, None)
        self.assertEqual(narrowed(outer, 20.0, None).deadline, 10.0)
        self.assertEqual(narrowed(outer, 5.0, None).deadline, 5.0)
        self.assertEqual(narrowed(outer, None, None).deadline, 10.0)
        self.assertEqual(narrowed(None, 7.0, None).deadline, 7.0)
        self.assertIsNone(narrowed(None, None, {"a": "b"}).deadline)

    def test_metadataMerged(self) -> None:
        """Metadata is merged, the inner value winning; the outer scope's dict is left as it was."""
        outer = Scope(None, {"a": "1", "b": "2"})
        inner = narrowed(outer, None, {"b": "3", "c": "4"})
        self.assertEqual(inner.metadata, {"a": "1", "b": "3", "c": "4"})
        self.assertEqual(outer.metadata, {"a": "1", "b": "2"})
        self.assertIsNone(narrowed(None, 1.0, None).metadata)

    def test_metadataIsText(self) -> None:
        """A key or value that is not text is refused with TypeError."""
        for metadata in ({"a": 1}, {1: "a"}, {"a": b"x"}):
            with self.assertRaises(TypeError):
                narrowed(None, None, metadata)  # type: ignore[arg-type]


class SendingDeadlineTests(SynchronousTestCase):
    """What a call carries of its deadline."""

    def test_millisecondsRoundedUp(self) -> None:
        """The seconds left and the milliseconds carried, rounded up (never before the caller's deadline)."""
        left, milliseconds = sendingDeadline("get", 10.0, 9.9995)
        self.assertAlmostEqual(left, 0.0005)
        self.assertEqual(milliseconds, 1)
        self.assertEqual(sendingDeadline("get", 12.0, 10.0)[1], 2000)

    def test_passed(self) -> None:
        """No time left: DeadlineExceeded naming the call."""
        for now in (10.0, 11.0):
            with self.assertRaises(DeadlineExceeded) as raised:
                sendingDeadline("get", 10.0, now)
            self.assertEqual(raised.exception.name, "get")
