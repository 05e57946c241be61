"""Login attempts, throttled per peer address and per address and claimed name, in bounded memory.

Contract: two kinds of leaky bucket count attempts (each C{burst} deep,
draining at C{rate} per second): one per peer address, and one per
address and the user name the attempt claims (SCRAM's name; a mechanism
without one, as a bearer token, counts per address only).  An attempt
fills its buckets by one when it starts, so attempts still in progress
count as much as failed ones (many connections at once gain nothing).
While a bucket is full, a login that would fill it more is refused before
any checker runs.

Shared addresses (a NAT, a shared host).  A name that has logged in from
an address before is I{trusted} there: its attempts fill only its own
(address, name) bucket, not the address's.  So guesses at other names
from the same address cannot refuse that user's logins: only guesses at
that very name can (at most C{burst}, then C{rate} a second, which is the
point of a throttle).  A name not yet trusted at an address (its first
login there, or after it was forgotten) shares the address's bucket
with everyone behind that address.  A success forgives its own attempt
in the address's bucket (not the others': an attacker behind the same
address does not gain guesses each time the honest user logs in) and
empties its pair's bucket.

Memory.  What is held is one small entry per address, per (address,
name) and per trusted pair, never one per attempt, and at most
C{maxAddresses} of each; the state (L{IThrottleState}) forgets the
entries whose attempts drain soonest first, so a flood from many
addresses cannot clear a guesser's full bucket (see
L{protocols.auth.drains}).  The state is in this process by default
(L{protocols.auth.drains.MemoryThrottleState}); worker processes share one
in SQLite (L{protocols.auth.sharedthrottle.SQLiteThrottleState}), so N
workers do not allow N times the attempts.  If the state cannot be
read or written (the shared file is locked for too long, the disk is
full), the login is refused and the error logged: the throttle fails
closed.  An address is the peer's host, not its port.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

from .drains import MemoryThrottleState

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

    log = Logger(namespace="chunkwire.auth")

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
