# -*- test-case-name: tests.protocols.test_clientcontext,tests.protocols.test_options -*-
"""Deadlines and metadata for the calls of the clients without Twisted: C{with callContext(timeout=..., metadata=...):}.

    from protocols.blocking import callContext, connect

    with connect("127.0.0.1:8760") as connection:
        with callContext(timeout=2.0, metadata={"request-id": "r-17"}):
            connection.root.callRemote("get", "greeting")

Contract: the blocking and the asyncio clients give the calls made inside a
C{callContext} block a deadline C{timeout} seconds from the block's start
(on C{time.monotonic}) and its metadata, under the rules of
L{framing.rpc._context} that the Twisted client's L{protocols.rpc.callContext}
follows too: nested blocks keep the earlier deadline and merge metadata; a
call past its deadline raises L{DeadlineExceeded} (and the server is sent a
CANCEL if it was sent).  It is a context variable, so each thread or task has
its own; it is not the Twisted client's.  A method of the client's serving
the server's call reads that call's deadline and metadata with
L{currentCall}, and the calls it makes carry its deadline (L{answering}).
Importing this module loads no Twisted.

Design: docs/design/serving.md
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from framing.rpc._context import NO_CONTEXT, CallContext, Scope, narrowed, served
from framing.rpc._incoming import IncomingCall
from framing.rpc._streamtable import itemWaitBound

calling: ContextVar[Scope | None] = ContextVar("chunkwire.clients.scope", default=None)
"""
The L{Scope} of the calls made in this context by the clients without
Twisted (its deadline on C{time.monotonic}), or C{None}: plain calls.
"""


serving: ContextVar[CallContext] = ContextVar("chunkwire.clients.serving", default=NO_CONTEXT)
"""The L{CallContext} of the server's call this thread or task answers now (L{answering} sets it)."""


def currentCall() -> CallContext:
    """
    The deadline (on C{time.monotonic}) and metadata of the server's call
    whose method (an export of the blocking or asyncio client) runs now:
    in a plain method, and anywhere in a coroutine method's task;
    C{NO_CONTEXT} (no deadline, no metadata) for a call that carried
    neither, and outside a call.  The clients' twin of
    L{protocols.rpc.currentCall}.
    """
    return serving.get()


@contextmanager
def answering(call: IncomingCall, read: float) -> Iterator[None]:
    """
    Run the server's C{call} (read at C{read}, on C{time.monotonic}) inside
    this block: L{currentCall} gives its context, and the calls its method
    makes carry its deadline (wire format 12.7) and no block's metadata (a
    method forwards what it means to), as on the Twisted side.  A task
    started inside keeps both.  Costs two context variable sets.
    """
    milliseconds = call.milliseconds
    deadline = None if milliseconds is None else read + milliseconds / 1000
    context = served(deadline, call.metadata, time.monotonic)
    servedToken = serving.set(context)
    callingToken = calling.set(None if deadline is None else Scope(deadline, None))
    try:
        yield
    finally:
        calling.reset(callingToken)
        serving.reset(servedToken)


@contextmanager
def callContext(timeout: float | None = None, metadata: Mapping[str, str] | None = None) -> Iterator[None]:
    """
    Give the calls the blocking and asyncio clients make inside the C{with}
    block a deadline C{timeout} seconds from now and C{metadata}, on top of
    those of an enclosing block (the earlier deadline wins; metadata is
    merged, the inner value winning for a key).  The deadline is fixed on
    entry: calls made one after the other share it.

    @param timeout: seconds from now; C{None} keeps the enclosing deadline.
    @param metadata: text keys and values (a server refuses more than its
        C{Limits.max_call_metadata} entries or C{max_call_metadata_length}
        characters, with a L{framing.rpc._errors.RemoteViolation}).
    @raise TypeError: a metadata key or value is not text (nothing is sent).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    token = calling.set(narrowed(calling.get(), deadline, metadata))
    try:
        yield
    finally:
        calling.reset(token)


def scopeReader(connection: Scope | None) -> Callable[[], Scope | None]:
    """
    What a connection whose own scope is C{connection} (its
    L{protocols.options.ClientOptions.metadata}, or C{None}) calls for the
    scope of each call: C{calling.get} itself when it has none (no cost on
    a call's path), else L{within} that scope and the block's.
    """
    if connection is None:
        return calling.get

    def read() -> Scope | None:
        return within(connection, calling.get())

    return read


def within(connection: Scope | None, scope: Scope | None) -> Scope | None:
    """
    The scope of a call made in C{scope} (C{calling}'s) on a connection
    whose own is C{connection} (its L{protocols.options.ClientOptions.metadata},
    or C{None}): the connection's metadata under the block's (a key the
    block sets keeps its value), the block's deadline.
    """
    if connection is None:
        return scope
    if scope is None:
        return connection
    return Scope(scope.deadline, {**(connection.metadata or {}), **(scope.metadata or {})})


def itemBound(streamId: int, callTimeout: float | None) -> tuple[float, BaseException] | None:
    """
    How long a consumer of stream C{streamId} waits for its next item, on
    C{time.monotonic}: L{framing.rpc._streamtable.itemWaitBound} with the
    deadline of the enclosing C{callContext} and the client's C{callTimeout}.
    """
    scope = calling.get()
    return itemWaitBound(streamId, time.monotonic(), None if scope is None else scope.deadline, callTimeout)
