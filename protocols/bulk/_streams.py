# -*- test-case-name: tests.protocols.bulk.test_typed_streams,tests.faults.test_bulk_faults -*-
"""Streams: what a sender sends (L{Stream}) and what a receiver receives (L{IncomingStream}).

Contract: this module gathers the public stream names in one place (the
sending side lives in L{protocols.bulk._sending}, the receiving side in
L{protocols.bulk._receiving}, each with its own transition table) and gives
remote interfaces one hint for a stream, L{StreamArg}, that both ends of a
call accept.

Why one hint for two types: a caller passes a L{Stream}, and the method it
calls receives an L{IncomingStream}; an interface is one declaration that
both ends are checked against, so its parameter must accept the caller's
L{Stream}, and mypy's override check then forbids the server's method from
narrowing it to L{IncomingStream}.  L{StreamArg} is the union, and
L{asIncoming} is the server's one-line narrowing, with a clear error where a
L{Stream} reached a method without crossing a connection (a local call).
The same holds for a result: the server returns a L{Stream}, the caller
receives an L{IncomingStream}.
"""

from __future__ import annotations

from typing import TypeAlias

from ._receiving import IncomingStream
from ._sending import Stream

StreamArg: TypeAlias = Stream | IncomingStream
"""
A stream as a remote interface's parameter or result: a L{Stream} where it
is sent, an L{IncomingStream} where it arrives.  As a hint it checks nothing
(a stream travels on the bulk channel, not as a value).
"""


def asIncoming(stream: StreamArg) -> IncomingStream:
    """
    C{stream} as the L{IncomingStream} it is where it arrived: the narrowing
    a method hinted with L{StreamArg} makes before it receives.

    @raise TypeError: C{stream} is a L{Stream}, which becomes an
        L{IncomingStream} only by crossing a connection (the method was
        called locally, not through a reference).
    """
    if isinstance(stream, IncomingStream):
        return stream
    raise TypeError(
        f"{stream!r} was not received: a bulk.Stream arrives as an IncomingStream only through a connection"
    )
