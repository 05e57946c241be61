# -*- test-case-name: tests.protocols.rpc.test_failover,tests.protocols.rpc.test_same_bytes -*-
"""Deadlines and metadata that travel with a call: C{callContext} for the caller, C{currentCall} for the method.

Contract: the calls made inside C{with callContext(timeout=...,
metadata=...):} carry the time they have left (relative milliseconds) and
the metadata in the CALL's call context (C{docs/wire-format.md}, section
12.7).  Such a call fails with L{framing.rpc.DeadlineExceeded} at once,
sending nothing, if its deadline passed, else at its deadline (with a
CANCEL).  The callee refuses a call arriving with no time left, and runs
any other with L{currentCall} giving its deadline and metadata; the calls
its method makes carry the time left, and at the deadline it answers
L{framing.rpc.DeadlineExceeded} and cancels the method.  Metadata is not
forwarded by itself.  A context manager, because C{callRemote} passes
every keyword on to the remote method.

Cost: a call with neither costs one C{ContextVar.get} more; a plain call
arriving, one length test.

Design: docs/design/rpc-twisted.md
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from framing.rpc._context import NO_CONTEXT as NO_CONTEXT
from framing.rpc._context import CallContext as CallContext
from framing.rpc._context import Scope, narrowed

scope: ContextVar[Scope | None] = ContextVar("chunkwire.rpc.scope", default=None)
"""
The L{Scope} of the calls made in this context (C{None}: plain calls), its
deadline on the brokers' clock; read by each outgoing call.  (The clients
without Twisted keep theirs apart, on C{time.monotonic}:
L{protocols._clientcontext}.)
"""


serving: ContextVar[CallContext] = ContextVar("chunkwire.rpc.serving", default=NO_CONTEXT)
"""The L{CallContext} of the call being answered in this context (set by L{protocols.rpc._answering})."""


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
