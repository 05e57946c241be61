# -*- test-case-name: tests.protocols.auth.test_login,tests.attack.test_round3_auth -*-
"""Login attempts, throttled per peer address and per address and claimed name, in bounded memory.

Contract: leaky buckets (C{burst} deep, draining at C{rate} per second)
count attempts per peer host and per (host, claimed name); an attempt fills
them when it starts, and a login that would overfill one is refused before
any checker runs.  A name that has logged in from an address is trusted
there: its attempts fill only its own bucket, so guesses at other names
behind a shared address cannot lock it out.  If the state cannot be read or
written the login is refused and the error logged (the throttle fails
closed).  Worker processes may share the state in SQLite
(L{protocols.auth._sharedthrottle.SQLiteThrottleState}).

Cost: one small entry per address, per (address, name) and per trusted
pair, at most C{maxAddresses} of each, never one per attempt; the entries
that drain soonest are forgotten first (L{protocols.auth._drains}).

Design: docs/design/auth.md
"""

from __future__ import annotations

from typing import Any

from .._logs import NamedLogger
from ._drains import MemoryThrottleState

ADDRESS, PAIR = "address", "pair"
"""The state's two tables of buckets."""


class ThrottleStateError(Exception):
    """The throttle's state could not be read or written; the login it was asked about is refused."""


def pairKey(address: str, name: str) -> str:
    """The key of the (address, name) bucket: NUL cannot occur in either part's text as the wire gives it."""
    return f"{address}\0{name}"


class LoginThrottle:
    """
    Counts login attempts per address and per (address, name) and says when one must wait.

    @ivar burst: attempts an address (or a name at an address) may make without a success before it waits.
    @ivar rate: attempts per second forgiven.
    @ivar maxAddresses: most addresses (and most pairs, and trusted pairs) remembered by the default state.
    @ivar state: the L{IThrottleState} the counts are kept in.
    @ivar throttled: logins refused by the throttle so far (in this process).
    """

    log = NamedLogger(namespace="chunkwire.auth")

    def __init__(
        self,
        clock: Any,
        *,
        burst: int = 10,
        rate: float = 0.5,
        maxAddresses: int = 10_000,
        state: Any = None,
    ) -> None:
        """
        @param clock: an C{IReactorTime} (its C{seconds()} is read).
        @param burst: attempts allowed without a success (at least 1).
        @param rate: attempts forgiven per second (positive).
        @param maxAddresses: entries remembered in each table (at least 1), when C{state} is not given.
        @param state: where the counts live (an L{IThrottleState}); in this process's memory if C{None}.
        """
        if burst < 1 or rate <= 0 or maxAddresses < 1:
            raise ValueError("burst and maxAddresses must be at least 1 and rate positive")
        self.clock = clock
        self.burst = burst
        self.rate = rate
        self.maxAddresses = maxAddresses
        self.state: Any = state if state is not None else MemoryThrottleState(maxAddresses, maxAddresses, maxAddresses)
        self.throttled = 0

    def __len__(self) -> int:
        """How many addresses are remembered."""
        return int(self.state.size(ADDRESS))

    def _level(self, table: str, key: str, now: float) -> float:
        until: float = self.state.until(table, key)
        return max(0.0, (until - now) * self.rate)

    def admit(self, address: str, name: str | None = None) -> bool:
        """
        Whether a login from C{address} claiming C{name} may be tried now; if
        so it is counted.  (If not, it counts in L{throttled}.)

        @param name: the user name the attempt claims, or C{None} if its mechanism names nobody before the check.
        """
        try:
            admitted = self._admit(address, name)
        except ThrottleStateError as error:
            self.log.error("refusing a login: the login throttle's state failed: {error}", error=str(error))
            admitted = False
        if not admitted:
            self.throttled += 1
        return admitted

    def _admit(self, address: str, name: str | None) -> bool:
        now = self.clock.seconds()
        state = self.state
        with state.atomically():
            pair = None if name is None else pairKey(address, name)
            if pair is not None:
                pairLevel = self._level(PAIR, pair, now) + 1
                if pairLevel > self.burst:
                    return False
                if state.isTrusted(pair):
                    state.setUntil(PAIR, pair, now + pairLevel / self.rate)
                    return True
            level = self._level(ADDRESS, address, now) + 1
            if level > self.burst:
                return False
            state.setUntil(ADDRESS, address, now + level / self.rate)
            if pair is not None:
                state.setUntil(PAIR, pair, now + pairLevel / self.rate)
            return True

    def succeeded(self, address: str, name: str | None = None) -> None:
        """
        A login from C{address} claiming C{name} succeeded: its own attempt is
        forgiven, the pair's bucket emptied and the pair trusted at that address.
        """
        try:
            self._succeeded(address, name)
        except ThrottleStateError as error:
            self.log.error("the login throttle's state failed: {error}", error=str(error))

    def _succeeded(self, address: str, name: str | None) -> None:
        now = self.clock.seconds()
        state = self.state
        with state.atomically():
            if name is not None:
                pair = pairKey(address, name)
                trusted = state.isTrusted(pair)
                state.forget(PAIR, pair)
                state.trust(pair)
                if trusted:
                    return  # its attempt was never counted against the address
            until = state.until(ADDRESS, address) - 1 / self.rate
            if until <= now:
                state.forget(ADDRESS, address)
            else:
                state.setUntil(ADDRESS, address, until)
