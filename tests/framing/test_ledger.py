"""The per-connection ledger: bytes charged and released by account, against one budget."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from framing import Limits
from framing._ledger import TOTALS, Ledger, LedgerPool


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


class PoolTests(SynchronousTestCase):
    """Ledgers in a pool share its budget: past it, every one past its share is full until the pool is back."""

    def test_poolPressesHolders(self) -> None:
        """Two ledgers past their shares over the pool's are full; one within its share is not."""
        pool = LedgerPool(100)
        told: dict[str, list[bool]] = {"a": [], "b": [], "c": []}
        a = Ledger(80, told["a"].append, pool)
        b = Ledger(80, told["b"].append, pool)
        c = Ledger(80, told["c"].append, pool)
        self.assertTrue(a.charge("x", 60))
        self.assertFalse(b.charge("x", 60))
        self.assertEqual(pool.held, 120)
        self.assertTrue(b.full)
        self.assertFalse(a.full)  # (it charged before the pool went over)
        self.assertFalse(a.charge("x", 1))  # its next charge finds the pool over
        self.assertFalse(c.full)
        self.assertTrue(c.room(33))  # (its share, 100 // 3, fits whatever the others hold)
        self.assertFalse(c.room(34))
        b.release("x", 21)  # the pool back within its budget: every ledger it held up is told
        self.assertEqual((told["a"], told["b"], told["c"]), ([True, False], [True, False], []))

    def test_closeLetsThePoolGo(self) -> None:
        """A closed ledger's bytes leave the pool, and the ledgers it held up are told."""
        pool = LedgerPool(10)
        told: list[bool] = []
        a, b = Ledger(None, None, pool), Ledger(None, told.append, pool)
        a.charge("x", 20)
        b.charge("x", 6)  # (past its share, 10 // 2)
        self.assertTrue(b.full)
        a.close()
        self.assertEqual((pool.held, pool.members, told), (6, 1, [True, False]))

    def test_fairShare(self) -> None:
        """One ledger holding the whole pool leaves each other its share, budget // members: room, spare, not full."""
        pool = LedgerPool(100)
        told: list[bool] = []
        hog, honest = Ledger(None, None, pool), Ledger(None, told.append, pool)
        self.assertEqual(pool.share(), 50)
        self.assertTrue(hog.charge("x", 100))  # (the pool was free)
        self.assertEqual(honest.spare(), 50)
        self.assertTrue(honest.room(50))
        self.assertFalse(honest.room(51))
        self.assertTrue(honest.charge("x", 50))
        self.assertEqual((honest.full, told, pool.held), (False, [], 150))
        self.assertFalse(honest.charge("x", 1))  # past its share while the pool is over: held up
        self.assertFalse(hog.charge("x", 1))
        self.assertEqual(told, [True])
        hog.close()  # the hog gone: the pool within its budget, its one member's share all of it
        self.assertEqual((pool.share(), told), (100, [True, False]))
