"""How much one RPC connection may make this side hold, and how long it waits.

Contract: a L{CallLimits} is immutable and given to a connection (as the
C{callLimits} of a L{protocols.rpc.ServerOptions} or
L{protocols.options.ClientOptions}, or to a C{Broker}); the connection
checks it in O(1) per call and per received reference.  Sans-IO: the
clients without Twisted read it as the Twisted broker does.  Past a limit
nothing is queued: the call fails at once, or the message carrying the
reference is refused, with a typed error.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CallLimits:
    """
    The per-connection limits of a broker; C{None} turns one off.

    @ivar maxImports: most distinct references the peer may make this side
        hold at once (ids it sent in C{rpc.ref}; the root excepted).  A
        message that would go past it is refused with a
        C{too-many-references} L{framing.Violation}.  10,000: each costs a
        L{RemoteReference} and its record (about 200 bytes), and a peer can
        invent ids freely, so this is what bounds that memory.
    @ivar maxPending: most calls this side may have waiting for the peer's
        answer; C{callRemote} past it fails at once with
        L{protocols.rpc.TooManyPendingCalls}.  10,000: a peer that stops
        answering cannot make this side keep an unbounded table of Deferreds
        (nor, with a timeout, an unbounded set of timers).
    @ivar callTimeout: seconds a call made with C{callRemote} waits for its
        answer before it fails with L{protocols.rpc.CallTimedOut}; the
        request id is then forgotten and the peer is sent a CANCEL, and an
        answer arriving later is ignored (logged at debug level, within the
        connection's log rate).  C{None} (the default for clients): calls
        wait until answered, cancelled, or the connection is lost; use
        C{addTimeout} on one call for a bound of its own.  Servers get
        L{SERVER_CALL_LIMITS}, whose calls to clients (callbacks such as the
        kv example's C{changed()}) time out after 30 s.
    @ivar maxRunning: most of the peer's calls that may be running here at
        once (their methods returned a Deferred or a coroutine that has not
        finished), whether they asked for an answer or not; a call past it
        is refused with a C{too-many-running-calls} L{framing.Violation}
        (a FAIL, or for a call for no answer a logged refusal), counted as
        the connection's refusal, without running.  10,000, as many as a
        caller may have waiting (L{maxPending}): each running call holds its
        arguments and its method's state for as long as it runs, and a call
        for no answer is never slowed by waiting answers, so this is what
        bounds the work a peer can queue here (the bytes its arguments hold
        are bounded by the connection's ledger: account C{calls},
        L{protocols.rpc.answering}).
    """

    maxImports: int | None = 10_000
    maxPending: int | None = 10_000
    callTimeout: float | None = None
    maxRunning: int | None = 10_000


CLIENT_CALL_LIMITS = CallLimits()
"""The defaults of C{connect}, C{reconnecting} and a bare C{Broker}: no call timeout."""

SERVER_CALL_LIMITS = CallLimits(callTimeout=30.0)
"""The defaults of C{serve} and C{serverFactory}: a server's calls to a client time out after 30 s."""
