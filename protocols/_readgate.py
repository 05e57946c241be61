# -*- test-case-name: tests.protocols.test_flusher,tests.protocols.test_coalescing_parts -*-
"""ReadGate: when a coalescing transport lets the wrapped transport read.

Contract: reading is stopped while the application has paused it, while
the connection's ledger is over its budget (L{framing._ledger.Ledger}), or
while more than the high-water mark waits to be sent (back-pressure), and
started again only when none holds, the backlog counting as over until
it falls to the low-water mark.  The wrapped transport is told only when
that answer changes, and the observer (the protocol) each time it is told.
A decision costs a few comparisons; counting what waits is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ReadGate:
    """
    Whether the wrapped transport should deliver what it reads.

    @ivar paused: C{True} while the application has paused reading.
    @ivar high: with back-pressure on, the bytes waiting to be sent above
        which reading stops; C{None} when off.
    @ivar low: the bytes waiting to be sent at which reading starts again.
    @ivar backlogged: C{True} while reading is stopped because too much
        waits to be sent.
    @ivar overBudget: C{True} while the connection's ledger is over its
        budget (L{setOverBudget}).
    @ivar stopped: C{True} while the wrapped transport was last told to stop.
    @ivar observer: called with C{True} or C{False} whenever the wrapped
        transport is told to stop or start reading; or C{None}.
    """

    def __init__(self, observer: Callable[[bool], None] | None = None) -> None:
        self.observer = observer
        self.paused = False
        self.high: int | None = None
        self.low = 0
        self.backlogged = False
        self.overBudget = False
        self.stopped = False

    def __repr__(self) -> str:
        state = f"paused={self.paused} backlogged={self.backlogged} overBudget={self.overBudget}"
        return f"<ReadGate {state} marks={self.high}/{self.low}>"

    def setLimits(self, high: int | None, low: int, floor: int) -> None:
        """
        Set the marks: C{high} of C{None} turns back-pressure off; both are
        raised to C{floor} (the wrapped transport's own buffer size, below
        which it never reports that its buffer drained).

        @raise ValueError: C{low} is above C{high}.
        """
        if high is not None and low > high:
            raise ValueError(f"the low-water mark {low} is above the high-water mark {high}")
        self.low = max(low, floor)
        self.high = None if high is None else max(high, self.low)

    def checkBacklog(self, pending: int, transport: Any, closed: bool) -> None:
        """
        Decide again whether too much waits, now that C{pending} bytes wait
        to be sent, and tell C{transport} if reading changes (never while
        C{closed}: a closed connection has no backlog).
        """
        high = self.high
        if high is None or closed:
            backlogged = False
        elif self.backlogged:
            backlogged = pending > self.low
        else:
            backlogged = pending > high
        if backlogged != self.backlogged:
            self.backlogged = backlogged
            self._apply(transport, closed)

    def pause(self, transport: Any, closed: bool) -> None:
        """The application asks that reading stop."""
        if not self.paused:
            self.paused = True
            self._apply(transport, closed)

    def resume(self, transport: Any, closed: bool) -> None:
        """The application lets reading start again (once the backlog, if any, has drained)."""
        if self.paused:
            self.paused = False
            self._apply(transport, closed)

    def setOverBudget(self, over: bool, transport: Any, closed: bool) -> None:
        """The connection's ledger went over its budget (C{True}) or fell back within it (C{False})."""
        if over != self.overBudget:
            self.overBudget = over
            self._apply(transport, closed)

    def _apply(self, transport: Any, closed: bool) -> None:
        stop = self.paused or self.backlogged or self.overBudget
        if stop == self.stopped:
            return
        self.stopped = stop
        if stop:
            transport.pauseProducing()
        elif not closed:
            transport.resumeProducing()
        if self.observer is not None:
            self.observer(stop)
