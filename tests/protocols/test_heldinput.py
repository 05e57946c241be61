"""Tests for L{protocols._heldinput}: what a paused connection keeps comes back in arrival order, counted."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from protocols._heldinput import NOTHING_HELD, HeldInput


class HeldInputTests(SynchronousTestCase):
    """HeldInput keeps reads undecoded and objects decoded, and counts both."""

    def test_empty(self) -> None:
        """Nothing held: falsy, and both queues say NOTHING_HELD."""
        held = HeldInput()
        self.assertFalse(held)
        self.assertIs(held.nextObject(), NOTHING_HELD)
        self.assertIs(held.nextRead(), NOTHING_HELD)

    def test_order(self) -> None:
        """Objects come out first, then reads, each oldest first; the counts follow."""
        held = HeldInput()
        held.holdObjects(["a", "b"])
        held.holdRead(b"123")
        held.holdRead(b"45")
        self.assertTrue(held)
        self.assertEqual((held.count, held.heldBytes), (4, 5))
        self.assertEqual([held.nextObject(), held.nextObject()], ["a", "b"])
        self.assertIs(held.nextObject(), NOTHING_HELD)
        self.assertEqual(held.nextRead(), b"123")
        self.assertEqual((held.count, held.heldBytes), (1, 2))
        self.assertEqual(held.nextRead(), b"45")
        self.assertFalse(held)
        self.assertEqual((held.count, held.heldBytes), (0, 0))

    def test_clear(self) -> None:
        """clear drops everything held and its bytes."""
        held = HeldInput()
        held.holdRead(b"x" * 10)
        held.holdObjects([1])
        held.clear()
        self.assertFalse(held)
        self.assertEqual(held.heldBytes, 0)
        self.assertIs(held.nextRead(), NOTHING_HELD)
        self.assertIs(held.nextObject(), NOTHING_HELD)
