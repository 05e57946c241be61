# -*- test-case-name: tests.framing.rpc.test_session,tests.protocols.test_drop,tests.attack.test_twisted_drop -*-
"""Refusals: how many a peer may earn before its connection is dropped, the one rule every shell applies.

Contract: an honest peer earns a refusal for a bug (a call to a method or
an object that is not there, an object of a type this side does not take),
not a thousand in seconds.  A peer that sends such things as fast as it can
(a flood of calls to nothing, each owed a FAIL it may never read) is dropped
with L{TooManyRefusals} once it passes L{MAX_REFUSALS} within one interval of
L{REFUSAL_INTERVAL} seconds.  L{RefusalRate} counts them against a clock its
owner gives (the Twisted connection's log, L{protocols._logs.RefusalLog}; the
sans-IO client session, L{framing.rpc._session.ClientSession}): no I/O, no
timer.  Cost: one clock read, one comparison and one addition per refusal.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from framing._errors import ProtocolError

MAX_REFUSALS = 1000
"""Refusals in one interval past which a connection is dropped: an honest peer's bug earns a few, a flood
passes it within its first one or two 64 KiB reads."""

REFUSAL_INTERVAL = 10.0
"""Seconds of one counting interval."""


class TooManyRefusals(ProtocolError):
    """A connection's refusals passed the rate (L{RefusalRate}): it is dropped."""

    code = "too-many-refusals"


class RefusalRate:
    """
    One connection's count of refusals in the current interval.

    @ivar limit: refusals in one interval past which the connection is to
        be dropped; C{None}: never.
    @ivar interval: seconds of one interval.
    @ivar refused: refusals in the current interval.
    @ivar total: refusals over the connection's life.
    """

    __slots__ = ("limit", "interval", "refused", "total", "_now", "_start")

    def __init__(
        self,
        limit: int | None = MAX_REFUSALS,
        interval: float = REFUSAL_INTERVAL,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.interval = interval
        self.refused = 0
        self.total = 0
        self._now = now
        self._start = now()

    def note(self) -> bool:
        """Count one refusal; C{True} if the connection has now passed the rate and is to be dropped."""
        self.total += 1
        now = self._now()
        if now - self._start >= self.interval:
            self._start = now
            self.refused = 0
        self.refused += 1
        limit = self.limit
        return limit is not None and self.refused > limit

    def too_many(self) -> TooManyRefusals:
        """The error to drop the connection with once L{note} said it passed the rate."""
        return TooManyRefusals(f"more than {self.limit} refusals within {self.interval:g} s")
