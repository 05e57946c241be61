# -*- test-case-name: tests.framing.test_ledger,tests.framing.test_decoding_charge,tests.protocols.rpc.test_refusals -*-
"""Ledger: the bytes one connection holds on its peer's behalf, against one budget.

Contract: every layer that keeps bytes because of a peer (decoded objects
waiting to be taken, stream items inside their window, answers, calls and
notifications waiting to be sent, a client's outbox and automatic replies,
the arguments and metadata of the peer's calls running here) charges them here when it starts holding them and releases
them when it stops, by the bytes actually held (a body's length, an encoded
message's length, a decoded value kept by the memory its objects hold:
L{framing._budget.held_bytes}), never by the count of its wire bodies alone.  The ledger does
not decide what happens when the budget is passed: its owner (the I/O
shell) is told when C{full} changes and stops reading, and a layer that
holds bytes the peer's reading does not pace (a producer, a notifier) asks
L{Ledger.room} before it holds more and refuses, waits or drops instead.
So one number bounds the connection, whatever layer a new method or service
adds, as long as that layer charges here.

Cost: a charge or release is a few integer operations and a dict update;
the owner's callback runs only when C{full} changes.  Process-wide totals
(L{TOTALS}) are kept for metrics at the same cost.
"""

from __future__ import annotations

from collections.abc import Callable


class OverBudget(Exception):
    """
    A connection would hold more for its peer than its budget allows.

    @ivar code: C{"over-budget"}, the code a connection dropped for this
        carries on the wire and in logs.
    """

    code = "over-budget"


class LedgerTotals:
    """
    What every ledger of this process holds, for metrics.

    @ivar held: bytes held by all live ledgers together.
    @ivar full_events: how many times a ledger went over its budget.
    """

    __slots__ = ("held", "full_events")

    def __init__(self) -> None:
        self.held = 0
        self.full_events = 0


TOTALS = LedgerTotals()
"""The process-wide totals every L{Ledger} adds to (read by the metrics page)."""


def _split(budget: int, members: int) -> int:
    """A pool's C{budget} split evenly among its C{members} (all of it for one or none): a ledger's fair share."""
    return budget // members if members > 1 else budget


class LedgerPool:
    """
    The ledgers of many connections (a listener's) under one budget of their own.

    Fair share: each ledger of the pool may hold up to its share,
    C{budget // members} (L{share}: the pool split evenly between the
    ledgers open in it), whatever the others hold; past its share, only
    what the pool has free.  So a ledger of the pool is C{full} while its
    own budget is passed, or once it charges more while the pool's is
    passed and it holds more than its share: once the connections together
    hold more than the pool allows, every one past its share that adds to
    it stops reading until the pool is back within its budget, when each
    is told; a connection within its share (one that holds nothing among
    them) is not held up, and L{Ledger.room} and L{Ledger.spare} count its
    share as room.  One connection cannot starve the others: a partial
    object that took the whole pool while it was free leaves each other
    connection its share, and the hog's object is refused as soon as it
    grows past its share while the pool is over (L{framing._decoder}).
    Cost: the pool may be passed by the shares of connections within
    theirs while others hold more than theirs, at most its budget again
    (the shares add up to it): two pools' worth in the worst case, for a
    moment, never more.  Without a pool, N connections may hold N budgets.

    @ivar budget: the most the pool's ledgers may hold together; C{None}: no bound.
    @ivar held: what they hold now.
    @ivar members: the ledgers open in the pool now.
    """

    __slots__ = ("budget", "held", "members", "_pressed")

    def __init__(self, budget: int | None) -> None:
        if budget is not None and budget < 0:
            raise ValueError("a pool's budget must not be negative")
        self.budget = budget
        self.held = 0
        self.members = 0
        self._pressed: dict[Ledger, None] = {}

    def __repr__(self) -> str:
        return f"<LedgerPool held={self.held} budget={self.budget} members={self.members} pressed={len(self._pressed)}>"

    def share(self) -> int | None:
        """What each ledger may hold whatever the others hold: C{budget // members}; C{None} without a budget."""
        if self.budget is None:
            return None
        return _split(self.budget, self.members)

    def over(self) -> bool:
        """Whether the ledgers together hold more than the budget."""
        return self.budget is not None and self.held > self.budget

    def _wake(self) -> None:
        """The pool is back within its budget: each ledger it held up is judged again."""
        pressed, self._pressed = self._pressed, {}
        for ledger in pressed:
            ledger._judge()


class Ledger:
    """
    One connection's budget, and what each of its layers holds against it.

    @ivar budget: the most bytes the connection may hold for its peer before
        it is C{full}; C{None} for no budget (then C{full} is never true,
        but holdings are still counted).
    @ivar held: bytes held now, over every account.
    @ivar peak: the most ever held at once.
    @ivar full: C{True} while C{held} is above C{budget}.
    @ivar on_full: called with C{True} when the ledger goes over its budget
        and with C{False} when it falls back to it or below; or C{None}.
    @ivar pool: the L{LedgerPool} it shares a budget with, or C{None}; while
        the pool is over its budget this ledger is C{full} too, if it holds
        anything.
    """

    __slots__ = ("budget", "held", "peak", "full", "on_full", "pool", "_accounts", "_closed")

    def __init__(
        self, budget: int | None, on_full: Callable[[bool], None] | None = None, pool: LedgerPool | None = None
    ) -> None:
        if budget is not None and budget < 0:
            raise ValueError("a ledger's budget must not be negative")
        self.budget = budget
        self.held = 0
        self.peak = 0
        self.full = False
        self.on_full = on_full
        self.pool = pool
        self._accounts: dict[str, int] = {}
        self._closed = False
        if pool is not None:
            pool.members += 1

    def __repr__(self) -> str:
        return f"<Ledger held={self.held} budget={self.budget} full={self.full}>"

    def charge(self, account: str, count: int) -> bool:
        """
        Record that C{count} more bytes are held under C{account}.

        The bytes are counted whatever the budget (they are already held);
        the answer says whether the ledger is still within its budget.
        After L{close} nothing is counted.

        @raise ValueError: C{count} is negative.
        """
        if count < 0:
            raise ValueError("a charge must not be negative")
        if self._closed:
            return True
        self._accounts[account] = self._accounts.get(account, 0) + count
        held = self.held = self.held + count
        TOTALS.held += count
        if held > self.peak:
            self.peak = held
        budget = self.budget
        pool = self.pool
        if pool is not None:
            pool.held += count
            if pool.budget is not None and pool.held > pool.budget and held > _split(pool.budget, pool.members):
                pool._pressed[self] = None
                if not self.full:
                    self._set_full(True)
                return False
        if budget is not None and held > budget:
            if not self.full:
                self._set_full(True)
            return False
        return True

    def release(self, account: str, count: int) -> None:
        """
        Record that C{count} bytes held under C{account} were let go.

        @raise ValueError: C{count} is negative or more than C{account}
            holds (a layer releasing what it never charged is a bug).
        """
        if count < 0:
            raise ValueError("a release must not be negative")
        if self._closed:
            return
        holds = self._accounts.get(account, 0)
        if count > holds:
            raise ValueError(f"{account!r} releases {count} bytes but holds {holds}")
        self._accounts[account] = holds - count
        self.held -= count
        TOTALS.held -= count
        pool = self.pool
        if pool is not None:
            pool.held -= count
            if pool._pressed and not pool.over():
                pool._wake()
        if self.full:
            self._judge()

    def settle(self, account: str, count: int) -> None:
        """Set what C{account} holds to C{count} (for a layer that knows its total, such as a send buffer)."""
        holds = self._accounts.get(account, 0)
        if count > holds:
            self.charge(account, count - holds)
        elif count < holds:
            self.release(account, holds - count)

    def room(self, count: int = 0) -> bool:
        """
        Whether C{count} more bytes fit within the budget and the pool's, or
        within this ledger's fair share of the pool (L{LedgerPool.share});
        always C{True} without either.
        """
        pool = self.pool
        if pool is not None and pool.budget is not None and pool.held + count > pool.budget:
            if self.held + count > _split(pool.budget, pool.members):
                return False
        return self.budget is None or self.held + count <= self.budget

    def spare(self) -> int | None:
        """
        How many more bytes fit within the budget and the pool's, the pool
        counting what is free in it or what is left of this ledger's fair
        share, whichever is more (negative: how far over the fuller one
        is); C{None} without either.
        """
        pool = self.pool
        left = None if self.budget is None else self.budget - self.held
        if pool is not None and pool.budget is not None:
            free = pool.budget - pool.held
            share = _split(pool.budget, pool.members) - self.held
            pooled = free if free > share else share
            if left is None or pooled < left:
                left = pooled
        return left

    def _judge(self) -> None:
        """Whether this ledger is still over (its budget, or a pool over its own while it holds bytes), told if not."""
        budget, pool = self.budget, self.pool
        over = budget is not None and self.held > budget
        pool_budget = None if pool is None else pool.budget
        if (
            not over
            and pool is not None
            and pool_budget is not None
            and pool.held > pool_budget
            and self.held > _split(pool_budget, pool.members)
        ):
            pool._pressed[self] = None
            over = True
        if self.full and not over:
            self._set_full(False)

    def holding(self, account: str) -> int:
        """The bytes C{account} holds now."""
        return self._accounts.get(account, 0)

    def accounts(self) -> dict[str, int]:
        """A copy of what each account holds now."""
        return dict(self._accounts)

    def close(self) -> None:
        """
        The connection ended: everything it held is let go at once.

        Later charges and releases are ignored, so a layer freed after the
        end needs no special case; C{on_full} is forgotten (told C{False}
        first if the ledger was full).
        """
        if self._closed:
            return
        TOTALS.held -= self.held
        pool = self.pool
        if pool is not None:
            pool.held -= self.held
            pool.members -= 1
            pool._pressed.pop(self, None)
        self.held = 0
        self._accounts.clear()
        self._closed = True
        if pool is not None and pool._pressed and not pool.over():
            pool._wake()
        on_full, self.on_full = self.on_full, None  # (often a bound method of the owner: no cycle outlives the end)
        if self.full:
            self.full = False
            if on_full is not None:
                on_full(False)

    def _set_full(self, full: bool) -> None:
        self.full = full
        if full:
            TOTALS.full_events += 1
        if self.on_full is not None:
            self.on_full(full)
