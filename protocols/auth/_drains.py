# -*- test-case-name: tests.protocols.auth.test_drains,tests.protocols.auth.test_login,tests.attack.test_round3_auth -*-
"""The login throttle's counts in this process: bounded tables that forget the entry draining soonest.

Contract: a L{DrainTable} maps keys to the time their bucket drains
(see L{protocols.auth._interfaces.IThrottleState}) and holds at most
C{capacity} of them.  When a new key would pass that, the entry that
drains soonest is forgotten (an expired one first), never the key being
set.  So a flood of new addresses, each with one attempt, forgets only
entries that hold as little as its own (or less): a guesser's full bucket
is forgotten only once the table holds C{capacity} buckets fuller than
it, and each of those is an address that made that many attempts
itself.  Each set or lookup costs O(log n) (a heap of drain times, with
stale entries dropped lazily and the heap rebuilt when it is over twice
the table's size); memory is O(capacity).

L{MemoryThrottleState} is the default state of a
L{protocols.auth._throttle.LoginThrottle}: two drain tables and a bounded,
least-recently-trusted-first set of trusted pairs, all in this process.
With several worker processes, each has its own: use
L{protocols.auth._sharedthrottle.SQLiteThrottleState} instead.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from zope.interface import implementer

from ._interfaces import IThrottleState


class DrainTable:
    """
    Keys and the times their buckets drain, at most C{capacity} of them (see the module docstring).

    @ivar capacity: the most keys held.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a drain table holds at least one entry")
        self.capacity = capacity
        self._until: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._until)

    def get(self, key: str) -> float:
        """When C{key}'s bucket drains, or C{0.0} if it is not held."""
        return self._until.get(key, 0.0)

    def set(self, key: str, until: float) -> None:
        """Hold that C{key} drains at C{until}; forget the soonest-draining other key if over capacity."""
        self._until[key] = until
        heapq.heappush(self._heap, (until, key))
        while len(self._until) > self.capacity:
            self._evictOneBesides(key)
        if len(self._heap) > 2 * len(self._until) + 16:
            self._heap = [(when, k) for k, when in self._until.items()]
            heapq.heapify(self._heap)

    def pop(self, key: str) -> None:
        """Forget C{key} (its heap entry goes stale and is dropped later)."""
        self._until.pop(key, None)

    def _evictOneBesides(self, keep: str) -> None:
        kept: tuple[float, str] | None = None
        while self._heap:
            when, key = heapq.heappop(self._heap)
            if self._until.get(key) != when:
                continue  # stale: the key was set again or forgotten since
            if key == keep:
                kept = (when, key)
                continue
            del self._until[key]
            break
        if kept is not None:
            heapq.heappush(self._heap, kept)


@implementer(IThrottleState)
class MemoryThrottleState:
    """
    A throttle's counts in this process's memory.

    @ivar tables: C{"address"} and C{"pair"} to their L{DrainTable}.
    @ivar maxTrusted: the most trusted pairs remembered.
    """

    def __init__(self, maxAddresses: int = 10_000, maxPairs: int = 10_000, maxTrusted: int = 10_000) -> None:
        if maxTrusted < 1:
            raise ValueError("maxTrusted must be at least 1")
        self.tables = {"address": DrainTable(maxAddresses), "pair": DrainTable(maxPairs)}
        self.maxTrusted = maxTrusted
        self._trusted: OrderedDict[str, None] = OrderedDict()

    @contextmanager
    def atomically(self) -> Iterator[None]:
        """One process, one thread: nothing to lock."""
        yield

    def until(self, table: str, key: str) -> float:
        return self.tables[table].get(key)

    def setUntil(self, table: str, key: str, until: float) -> None:
        self.tables[table].set(key, until)

    def forget(self, table: str, key: str) -> None:
        self.tables[table].pop(key)

    def size(self, table: str) -> int:
        return len(self.tables[table])

    def isTrusted(self, key: str) -> bool:
        return key in self._trusted

    def trust(self, key: str) -> None:
        self._trusted[key] = None
        self._trusted.move_to_end(key)
        while len(self._trusted) > self.maxTrusted:
            self._trusted.popitem(last=False)
