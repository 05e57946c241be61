# -*- test-case-name: tests.protocols.rpc.test_limits,tests.protocols.kv.test_limits -*-
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
    """The per-connection limits of a broker; C{None} turns one off.

    Design: docs/design/options.md

    @ivar maxImports: most distinct references the peer may make this side hold (10,000; then refused).
    @ivar maxPending: most calls waiting for the peer's answer (10,000; then L{protocols.rpc.TooManyPendingCalls}).
    @ivar callTimeout: seconds a call waits for its answer, then L{protocols.rpc.CallTimedOut} (C{None}: no bound).
    @ivar maxRunning: most of the peer's calls running here at once (10,000; then refused).
    """

    maxImports: int | None = 10_000
    maxPending: int | None = 10_000
    callTimeout: float | None = None
    maxRunning: int | None = 10_000


CLIENT_CALL_LIMITS = CallLimits()
"""The defaults of C{connect}, C{reconnecting} and a bare C{Broker}: no call timeout."""

SERVER_CALL_LIMITS = CallLimits(callTimeout=30.0)
"""The defaults of C{serve} and C{serverFactory}: a server's calls to a client time out after 30 s."""
