"""Login attempts, throttled per peer address, in bounded memory.

Contract: each address has a leaky bucket of attempts (C{burst} deep,
draining at C{rate} per second).  Each login attempt fills its address's
bucket by one when it starts, so attempts still in progress count as much
as failed ones (many connections at once gain nothing); a successful login
empties it.  While the bucket is full, a login from that address is refused
before any checker runs.  What is held is one small entry per address, never one
per attempt, and at most C{maxAddresses} entries: the least recently failed
address is forgotten first, so a flood from many addresses costs bounded
memory (and at worst lets a forgotten address try C{burst} more times).
An address is the peer's host, not its port.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class LoginThrottle:
    """
    Counts login attempts per address and says when an address must wait.

    @ivar burst: attempts an address may make without a success before it waits.
    @ivar rate: attempts per second forgiven.
    @ivar maxAddresses: most addresses remembered.
    @ivar throttled: logins refused by the throttle so far.
    """

    def __init__(self, clock: Any, *, burst: int = 10, rate: float = 0.5, maxAddresses: int = 10_000) -> None:
        """
        @param clock: an C{IReactorTime} (its C{seconds()} is read).
        @param burst: attempts allowed without a success (at least 1).
        @param rate: attempts forgiven per second (positive).
        @param maxAddresses: addresses remembered (at least 1).
        """
        if burst < 1 or rate <= 0 or maxAddresses < 1:
            raise ValueError("burst and maxAddresses must be at least 1 and rate positive")
        self.clock = clock
        self.burst = burst
        self.rate = rate
        self.maxAddresses = maxAddresses
        self.throttled = 0
        # address -> (attempts still counted, when they were last counted)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def __len__(self) -> int:
        """How many addresses are remembered."""
        return len(self._buckets)

    def _level(self, address: str, now: float) -> float:
        entry = self._buckets.get(address)
        if entry is None:
            return 0.0
        level, since = entry
        return max(0.0, level - (now - since) * self.rate)

    def admit(self, address: str) -> bool:
        """
        Whether a login from C{address} may be tried now; if so it is
        counted.  (If not, it counts in L{throttled}.)
        """
        now = self.clock.seconds()
        level = self._level(address, now) + 1
        if level > self.burst:
            self.throttled += 1
            return False
        self._buckets[address] = (level, now)
        self._buckets.move_to_end(address)
        while len(self._buckets) > self.maxAddresses:
            self._buckets.popitem(last=False)
        return True

    def succeeded(self, address: str) -> None:
        """A login from C{address} succeeded: its attempts are forgiven."""
        self._buckets.pop(address, None)


def addressOf(peer: Any) -> str:
    """The throttling key of a transport's C{getPeer()}: its host, or the whole address for UNIX sockets."""
    host = getattr(peer, "host", None)
    if isinstance(host, str):
        return host
    name = getattr(peer, "name", None)
    return f"unix:{name!r}" if name is not None else repr(peer)
