"""The per-connection ledger: bytes charged and released by account, against one budget."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from framing import Limits
from framing.ledger import TOTALS, Ledger


class LedgerTests(SynchronousTestCase):
    def test_chargeAndRelease(self) -> None:
        """Charges add up by account and in all; releases take them back; the peak stays."""
        ledger = Ledger(100)
        self.assertTrue(ledger.charge("send", 30))
        self.assertTrue(ledger.charge("streams", 50))
        self.assertEqual((ledger.held, ledger.holding("send"), ledger.holding("streams")), (80, 30, 50))
        ledger.release("send", 30)
        self.assertEqual((ledger.held, ledger.peak), (50, 80))
        self.assertEqual(ledger.accounts(), {"send": 0, "streams": 50})

    def test_fullAndBack(self) -> None:
        """Going over the budget is told once, and so is falling back to it."""
        told: list[bool] = []
        ledger = Ledger(100, told.append)
        self.assertTrue(ledger.charge("a", 100))
        self.assertFalse(ledger.charge("a", 1))
        self.assertFalse(ledger.charge("b", 10))
        self.assertTrue(ledger.full)
        ledger.release("b", 10)
        self.assertEqual(told, [True])
        ledger.release("a", 1)
        self.assertEqual(told, [True, False])
        self.assertFalse(ledger.full)

    def test_room(self) -> None:
        """room() answers before anything is held; no budget always has room."""
        ledger = Ledger(10)
        ledger.charge("a", 8)
        self.assertTrue(ledger.room(2))
        self.assertFalse(ledger.room(3))
        self.assertTrue(Ledger(None).room(10**12))

    def test_settle(self) -> None:
        """settle() moves an account to a total, up or down."""
        ledger = Ledger(None)
        ledger.settle("send", 40)
        ledger.settle("send", 15)
        self.assertEqual((ledger.held, ledger.peak), (15, 40))

    def test_releaseMoreThanHeld(self) -> None:
        """Releasing what was never charged is a bug, refused."""
        ledger = Ledger(None)
        ledger.charge("a", 5)
        self.assertRaises(ValueError, ledger.release, "a", 6)
        self.assertRaises(ValueError, ledger.charge, "a", -1)

    def test_closeLetsGo(self) -> None:
        """close() lets everything go, from the process totals too, and ignores what comes after."""
        before = TOTALS.held
        told: list[bool] = []
        ledger = Ledger(10, told.append)
        ledger.charge("a", 20)
        self.assertEqual(TOTALS.held, before + 20)
        ledger.close()
        self.assertEqual((ledger.held, TOTALS.held, told), (0, before, [True, False]))
        self.assertTrue(ledger.charge("a", 5))
        ledger.release("a", 5)
        self.assertEqual(ledger.held, 0)

    def test_limitsBudget(self) -> None:
        """The budget is a Limits field, settable and checked."""
        self.assertEqual(Limits().max_connection_memory, 64 * 1024 * 1024)
        self.assertIsNone(Limits(max_connection_memory=None).max_connection_memory)
        self.assertRaises(ValueError, Limits, max_connection_memory=-1)
