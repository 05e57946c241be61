# -*- test-case-name: tests.framing.rpc.test_context -*-
"""A call's deadline and metadata, sans-IO: the scope calls are made in, how scopes nest, what a call carries.

Contract: every client (the Twisted broker's L{protocols.rpc._context}, and
the clients without Twisted through L{protocols._clientcontext}) keeps the
deadline and metadata of the calls made in a block as a L{Scope} in a
context variable of its own, and uses these functions, so the rules are
written once:

 - L{narrowed}: the scope inside a nested block, the earlier deadline
   winning and the metadata merged (the inner value winning); metadata
   that is not text keys and values is refused with C{TypeError}.
 - L{sendingDeadline}: the milliseconds left, rounded up, relative as the
   two ends' clocks differ; a call past its deadline is never sent.
 - L{sentWith}: what a call made in a scope carries in the keyword
   arguments' place (wire format 12.7), and the seconds it has left.
 - L{callBound}, L{timeUp}: how long a call waits (its deadline or
   C{callTimeout}, the earlier) and what it fails with then.

A deadline is in seconds on the scope owner's clock (the reactor's,
C{time.monotonic}); this module reads none: C{now} or a clock is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ._errors import CallTimedOut, DeadlineExceeded
from ._wire import callContext


class Scope:
    """
    What the calls made in a block carry: a deadline (seconds on the
    scope's owner's clock, or C{None}) and metadata to send (or C{None}).
    """

    __slots__ = ("deadline", "metadata")

    def __init__(self, deadline: float | None, metadata: dict[str, str] | None) -> None:
        self.deadline = deadline
        self.metadata = metadata

    def __repr__(self) -> str:
        return f"<Scope deadline={self.deadline!r} metadata={self.metadata!r}>"


class CallContext:
    """
    The call a running remote method was called with, as each client's
    C{currentCall} gives it (the Twisted one's L{protocols.rpc.currentCall},
    the clients' without Twisted L{protocols.blocking.currentCall}).

    @ivar deadline: when the call's time runs out, in the seconds of the
        serving side's clock (the reactor's; C{time.monotonic} on the
        clients without Twisted), or C{None} if it has none.
    @ivar metadata: the metadata the caller sent (read-only; empty if none).
    """

    __slots__ = ("deadline", "metadata", "_now")

    def __init__(self, deadline: float | None, metadata: Mapping[str, str], now: Callable[[], float] | None) -> None:
        """C{now}: the clock C{deadline} is on (read by L{timeRemaining}; C{None} only without a deadline)."""
        self.deadline = deadline
        self.metadata = metadata
        self._now = now

    def timeRemaining(self) -> float | None:
        """Seconds left before the deadline (0.0 once it passed), or C{None} without a deadline."""
        if self.deadline is None or self._now is None:
            return None
        return max(0.0, self.deadline - self._now())

    def __repr__(self) -> str:
        return f"<CallContext deadline={self.deadline!r} metadata={dict(self.metadata)!r}>"


NO_CONTEXT = CallContext(None, MappingProxyType({}), None)
"""What C{currentCall} gives outside a call with a deadline or metadata."""


def served(deadline: float | None, metadata: Mapping[str, str] | None, now: Callable[[], float]) -> CallContext:
    """The L{CallContext} of a call read with C{deadline} (on C{now}'s clock) and C{metadata} (C{None}: none)."""
    if deadline is None and not metadata:
        return NO_CONTEXT
    return CallContext(deadline, MappingProxyType(dict(metadata or {})), now)


def narrowed(outer: Scope | None, deadline: float | None, metadata: Mapping[str, str] | None) -> Scope:
    """
    The scope of a block nested in C{outer} (C{None}: in none) that asks
    for C{deadline} (C{None}: the outer one) and adds C{metadata}.

    @raise TypeError: a metadata key or value is not text.
    """
    if outer is not None and outer.deadline is not None:
        deadline = outer.deadline if deadline is None else min(deadline, outer.deadline)
    merged = dict(outer.metadata) if outer is not None and outer.metadata else None
    if metadata:
        for key, value in metadata.items():
            if type(key) is not str or type(value) is not str:
                raise TypeError(f"call metadata is text keys and values, not {key!r}: {value!r}")
        merged = {**(merged or {}), **metadata}
    return Scope(deadline, merged)


def sendingDeadline(name: str, deadline: float, now: float) -> tuple[float, int]:
    """
    The seconds a call of C{name} has left at C{now} and the milliseconds
    it carries (rounded up: the callee's deadline is never before the caller's).

    @raise framing.rpc.DeadlineExceeded: none are left.
    """
    left = deadline - now
    if left <= 0:
        raise DeadlineExceeded(f"the deadline of {name!r} passed before it was sent", name)
    return left, math.ceil(left * 1000)


def sentWith(
    name: str, kwargs: dict[str, Any], scope: Scope | None, clock: Callable[[], float]
) -> tuple[Any, float | None]:
    """
    What a call of C{name} with keyword arguments C{kwargs}, made in
    C{scope}, carries in its CALL's keyword-arguments place, and the
    seconds it has left (C{None}: no deadline): C{kwargs or None} in no
    scope; else the call context (L{framing.rpc._wire.callContext}) of the
    milliseconds its deadline leaves at C{clock()} (L{sendingDeadline}; the
    clock is read only for a deadline) and the metadata.  The shells write
    the first case in line on their per-call paths (no call made for it).

    @raise framing.rpc.DeadlineExceeded: the deadline passed (nothing is to be sent).
    """
    if scope is None:
        return kwargs or None, None
    deadline = scope.deadline
    if deadline is None:
        return callContext(kwargs, None, scope.metadata), None
    left, milliseconds = sendingDeadline(name, deadline, clock())
    return callContext(kwargs, milliseconds, scope.metadata), left


def callBound(left: float | None, callTimeout: float | None) -> tuple[float | None, bool]:
    """
    How long a call waits for its answer: the seconds (C{None}: no bound)
    and whether they are its deadline's.  The seconds its deadline leaves
    (C{left}, from L{sentWith}; C{None}: no deadline) bound it unless
    C{callTimeout} is shorter; a tie goes to the deadline.
    """
    if left is not None and (callTimeout is None or left <= callTimeout):
        return left, True
    return callTimeout, False


def timeUp(name: str, byDeadline: bool, callTimeout: float | None) -> TimeoutError:
    """
    What a call of C{name} fails with when its bound (L{callBound}) passed:
    L{DeadlineExceeded} for its deadline's, else L{CallTimedOut} naming C{callTimeout}.
    """
    if byDeadline:
        return DeadlineExceeded(f"{name!r} did not finish within its deadline", name)
    return CallTimedOut(name, callTimeout or 0.0)
