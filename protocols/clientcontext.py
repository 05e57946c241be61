"""Deadlines and metadata for the calls of the clients without Twisted: C{with callContext(timeout=..., metadata=...):}.

    from protocols.blocking import callContext, connect

    with connect("127.0.0.1:8760") as connection:
        with callContext(timeout=2.0, metadata={"request-id": "r-17"}):
            connection.root.callRemote("get", "greeting")

Contract: the blocking client (L{protocols.blocking}) and the asyncio client
(L{protocols.asyncioclient}) give the calls made inside a C{callContext}
block a deadline C{timeout} seconds from the block's start and its
metadata, as the Twisted client's L{protocols.rpc.callContext} does, with
the same rules (L{framing.rpc.context}, shared by all three): nested blocks
keep the earlier deadline and merge their metadata; each call carries the
milliseconds it has left and the metadata in the CALL's call context
(C{docs/wire-format.md}, section 12.7); a call whose deadline passed before
it is made raises L{DeadlineExceeded} and sends nothing; one sent raises
L{DeadlineExceeded} at its deadline, and the server is sent a CANCEL (the
connection stays up).  On the server, the method sees the time left and
the metadata (L{protocols.rpc.currentCall}), and its own calls to other
services inherit the deadline.

Why a context variable and not a keyword of C{callRemote}: C{callRemote}'s
keyword arguments are the remote method's own, as in the Twisted client.
A context variable follows the code that makes the calls: a thread's
calls (each thread has its own context), a coroutine's and the tasks it
starts inside the block (asyncio copies the context into each task), so
several threads or tasks on one connection each have their own deadlines.

The deadline is read on C{time.monotonic}, the clock both clients wait on
(asyncio's default loop clock too).  This variable is not the Twisted
client's: a C{protocols.rpc.callContext} block gives nothing to these
clients' calls, nor this one to the Twisted client's.  Importing this module
loads no Twisted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from framing.rpc.context import Scope, narrowed
from framing.rpc.errors import DeadlineExceeded

__all__ = ["DeadlineExceeded", "callContext", "calling"]

calling: ContextVar[Scope | None] = ContextVar("chunkwire.clients.scope", default=None)
"""
The L{Scope} of the calls made in this context by the clients without
Twisted (its deadline on C{time.monotonic}), or C{None}: plain calls.
"""


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
        characters, with a L{framing.rpc.errors.RemoteViolation}).
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
