"""Deadlines and metadata that travel with a call: C{callContext} for the caller, C{currentCall} for the method.

Contract: a caller sets a deadline and metadata for the calls it makes
inside C{with callContext(timeout=..., metadata=...):}; each such call
carries the time it has left (milliseconds, relative, because the two
clocks differ) and the metadata, in the CALL's call context (see
L{framing.rpc.wire} and C{docs/wire-format.md}, section 12.7).  A call whose
deadline passed before it is sent fails at once with L{framing.rpc.DeadlineExceeded}
and sends nothing; one sent fails with L{framing.rpc.DeadlineExceeded} at its deadline
(the peer is sent a CANCEL, as for a timeout).  The callee refuses a call
that arrives with no time left without running it; it runs any other with
L{currentCall} giving its deadline (on the callee's own clock) and
metadata, and the calls its method makes (in its synchronous part, or
anywhere in an C{async def} or C{inlineCallbacks} method, which keep the
context they started in) carry the time it has left, capped by any
C{callContext} of their own.  When that deadline passes before the method
ends, the callee answers L{framing.rpc.DeadlineExceeded} and cancels the method's
Deferred.  Metadata does not flow on by itself: a method forwards what it
means to.

Why a context manager and not C{callRemote(..., timeout=2.0)}:
C{callRemote} passes every keyword argument on to the remote method, so
any name taken for the deadline (C{timeout}, C{metadata}) would be one a
remote method could no longer have as its own.

A call with neither a deadline nor metadata is sent exactly as before, and
costs one C{ContextVar.get} more; a plain call arriving costs nothing more
than a length test.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

from framing.rpc.context import Scope, narrowed
from framing.rpc.errors import DeadlineExceeded

__all__ = ["CallContext", "DeadlineExceeded", "callContext", "currentCall"]

scope: ContextVar[Scope | None] = ContextVar("chunkwire.rpc.scope", default=None)
"""
The L{Scope} of the calls made in this context (C{None}: plain calls), its
deadline on the brokers' clock; read by each outgoing call.  (The clients
without Twisted keep theirs apart, on C{time.monotonic}:
L{protocols.clientcontext}.)
"""


class CallContext:
    """
    The call the running remote method was called with, as L{currentCall} gives it.

    @ivar deadline: when the call's time runs out, in the seconds of the
        broker's clock (C{clock.seconds()}), or C{None} if it has none.
    @ivar metadata: the metadata the caller sent (read-only; empty if none).
    """

    __slots__ = ("deadline", "metadata", "_clock")

    def __init__(self, deadline: float | None, metadata: Mapping[str, str], clock: Any) -> None:
        self.deadline = deadline
        self.metadata = metadata
        self._clock = clock

    def timeRemaining(self) -> float | None:
        """Seconds left before the deadline (0.0 once it passed), or C{None} without a deadline."""
        if self.deadline is None:
            return None
        now: float = self._clock.seconds()
        return max(0.0, self.deadline - now)

    def __repr__(self) -> str:
        return f"<CallContext deadline={self.deadline!r} metadata={dict(self.metadata)!r}>"


NO_CONTEXT = CallContext(None, MappingProxyType({}), None)
"""What L{currentCall} gives outside a call with a deadline or metadata."""

serving: ContextVar[CallContext] = ContextVar("chunkwire.rpc.serving", default=NO_CONTEXT)
"""The L{CallContext} of the call being answered in this context (set by L{protocols.rpc.answering})."""


def currentCall() -> CallContext:
    """
    The deadline and metadata of the call whose remote method runs now (in
    its synchronous part, or anywhere in an C{async def} or
    C{inlineCallbacks} method); L{NO_CONTEXT} (no deadline, no metadata)
    for a call that carried neither, and outside a remote call.
    """
    return serving.get()


@contextmanager
def callContext(
    timeout: float | None = None, metadata: Mapping[str, str] | None = None, clock: Any = None
) -> Iterator[None]:
    """
    Give the calls made inside the C{with} block a deadline C{timeout}
    seconds from now and C{metadata}, on top of those of any enclosing
    C{callContext} or remote call being answered: the earlier deadline
    wins, and metadata is merged (the inner value wins for a key).  The
    deadline is fixed on entry: calls made one after the other share it.

    @param timeout: seconds from now; C{None} keeps the enclosing deadline.
    @param metadata: text keys and values (the receiver refuses more than
        its C{Limits.max_call_metadata} entries or
        C{max_call_metadata_length} characters).
    @param clock: the C{IReactorTime} the deadline is read on (the brokers'
        clock); the global reactor if C{None}.
    @raise TypeError: a metadata key or value is not text.
    """
    deadline = None
    if timeout is not None:
        if clock is None:
            from twisted.internet import reactor as clock
        deadline = clock.seconds() + timeout
    token = scope.set(narrowed(scope.get(), deadline, metadata))
    try:
        yield
    finally:
        scope.reset(token)


@contextmanager
def detached() -> Iterator[None]:
    """
    Make the calls inside the C{with} block plain: no deadline or metadata
    of an enclosing C{callContext} or of the call being answered.  For the
    calls a server makes on its own account while it answers another
    caller (the kv store's C{changed()} calls to watchers, caused by one
    client's put and sent to others): they have the broker's own call
    limits, not that caller's deadline.  Costs one C{ContextVar.set}.
    """
    token = scope.set(None)
    try:
        yield
    finally:
        scope.reset(token)
