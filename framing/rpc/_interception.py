# -*- test-case-name: tests.protocols.rpc.test_interceptors_clients,tests.protocols.rpc.test_interceptors -*-
"""The bookkeeping of call interceptors, sans-IO: who is told what, in which order, and the calling side's rules.

Contract: a L{CallInterception} holds one connection's interceptors
(C{callStarted}, C{callEnded}, C{tallyFor}) and tells them of calls, for
every client: the Twisted broker's
L{protocols.rpc._interceptors.Interception} (both sides) and the blocking
and asyncio clients (L{startCall} and L{callSettled} around each call).
C{callStarted} is told in order and may refuse a call by raising (nothing
is sent; it ends L{REFUSED}); on the calling side it sees the metadata to
be sent and may add to it.  Each call that started ends once:
C{callEnded} in reverse order, then each recorder's tally, with L{OK},
L{CANCELLED} (its caller gave up), L{REFUSED} (the peer refused it) or
L{ERROR} (anything else), and the error's wire type name.  An
interceptor's own exception in C{callEnded} or C{tallyFor} is logged,
never raised into the call.  No I/O, no Twisted.

Cost: none for a connection without interceptors; with recorders only
(L{CallInterception.lean}), a tuple, two clock readings and a
L{CallTally} update per call.

Design: docs/design/rpc-broker.md
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ._context import Scope
from ._errors import NO_SUCH_METHOD, NO_SUCH_OBJECT, VIOLATION, describe

SERVER, CLIENT = "server", "client"
"""L{CallInfo.side}: this side answers the call, or makes it."""

OK, ERROR, REFUSED, CANCELLED, LOST, ONE_WAY = "ok", "error", "refused", "cancelled", "lost", "one-way"
"""The outcomes of a call (L{CallInfo.outcome})."""

REFUSALS = frozenset({VIOLATION, NO_SUCH_METHOD, NO_SUCH_OBJECT})
"""The error types of a call the peer refused (L{REFUSED}), rather than one that failed (L{ERROR})."""

now = time.perf_counter

NO_METADATA: Mapping[str, str] = MappingProxyType({})


class CallInfo:
    """
    One call, as interceptors see it.

    @ivar side: L{SERVER} (this side runs it) or L{CLIENT} (this side made it).
    @ivar method: the method's name, as the caller sent it.
    @ivar peer: the peer's address, as text.
    @ivar avatar: the logged-in root of the connection on a server with
        logins, else C{None}.
    @ivar requestId: the call's request id on its connection (0: no answer;
        on the calling side of the clients without Twisted, 0 too).
    @ivar started: C{time.perf_counter()} when it started.
    @ivar ended: the same when it ended, or C{None}.
    @ivar outcome: C{None} until it ends, then L{OK}, L{ERROR}, L{REFUSED},
        L{CANCELLED}, L{LOST} or L{ONE_WAY}.
    @ivar errorType: the wire type name of its failure (C{"KeyError"},
        C{"NoSuchMethod"}, ...), or C{None}.
    @ivar state: free for interceptors (e.g. a tracing span).
    @ivar metadata: the call's metadata (L{protocols.rpc._context}): on the
        answering side what the caller sent (read it, do not change it); on
        the calling side what will be sent, which C{callStarted} may add to
        (trace context, a request id).
    @ivar deadline: the call's deadline in the seconds of the connection's
        clock (the Twisted broker's clock; C{time.monotonic} for the clients
        without Twisted), or C{None}; on the calling side as C{callStarted} sees it.
    """

    __slots__ = (
        "side",
        "method",
        "peer",
        "avatar",
        "requestId",
        "started",
        "ended",
        "outcome",
        "errorType",
        "state",
        "metadata",
        "deadline",
    )

    def __init__(self, side: str, method: str, peer: str, avatar: Any, requestId: int) -> None:
        self.side = side
        self.method = method
        self.peer = peer
        self.avatar = avatar
        self.requestId = requestId
        self.started = now()
        self.ended: float | None = None
        self.outcome: str | None = None
        self.errorType: str | None = None
        self.state: Any = None
        self.metadata: Mapping[str, str] = NO_METADATA
        self.deadline: float | None = None

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, or C{None} before the end."""
        return None if self.ended is None else self.ended - self.started

    def __repr__(self) -> str:
        return f"<CallInfo {self.side} {self.method!r} {self.peer} {self.outcome or 'running'}>"


class CallTally:
    """
    The calls of one method on one side, as plain numbers: those that
    succeeded, the others by outcome, and a latency histogram.  The
    interception fills in a recorder's tallies itself (a bound instrument,
    in OpenTelemetry's words), so a call that succeeds costs no call of the
    recorder; the recorder reads them when it reports.

    @ivar bounds: the histogram's bucket bounds in seconds, ascending.
    @ivar first: C{bounds[0]}.
    @ivar ok: calls that succeeded.
    @ivar outcomes: the other calls, by outcome.
    @ivar buckets: calls per bucket: C{buckets[i]} counts those that took at
        most C{bounds[i]} seconds and more than the bound before; the last
        counts those over every bound.
    @ivar total: the seconds of all of them, summed.
    """

    __slots__ = ("bounds", "first", "ok", "outcomes", "buckets", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        if not bounds or list(bounds) != sorted(bounds):
            raise ValueError(f"bucket bounds must be ascending and at least one: {bounds!r}")
        self.bounds = bounds
        self.first = bounds[0]
        self.ok = 0
        self.outcomes: dict[str, int] = {}
        self.buckets = [0] * (len(bounds) + 1)
        self.total = 0.0

    def add(self, outcome: str, seconds: float) -> None:
        """Count one call that ended with C{outcome} after C{seconds}."""
        if outcome == OK:
            self.ok += 1
        else:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.buckets[bisect_left(self.bounds, seconds)] += 1
        self.total += seconds

    def counts(self) -> list[tuple[str, int]]:
        """Calls by outcome."""
        return [(OK, self.ok), *self.outcomes.items()] if self.ok else list(self.outcomes.items())


class CallHooks:
    """
    The call hooks of an interceptor, doing nothing: a hook an interceptor
    does not override is never called (L{overrides}).
    L{protocols.rpc._interceptors.CallInterceptor} adds the Twisted side's.
    """

    def callStarted(self, call: CallInfo) -> None:
        pass

    def callEnded(self, call: CallInfo) -> None:
        pass

    def tallyFor(self, side: str, method: str, outcome: str, errorType: str | None) -> CallTally | None:
        return None


def overrides(interceptor: Any, name: str) -> bool:
    """Whether C{interceptor}'s hook C{name} is its own, not L{CallHooks}'s no-op."""
    return getattr(type(interceptor), name, None) is not getattr(CallHooks, name)


def outcomeOf(error: BaseException, cancelled: bool) -> tuple[str, str]:
    """
    The outcome and error type of a call made here that failed with
    C{error} (C{cancelled}: its caller gave up on it, as its I/O layer
    tells a cancellation).
    """
    errorType = describe(error)[0]
    if cancelled:
        return CANCELLED, errorType
    return (REFUSED if errorType in REFUSALS else ERROR), errorType


class CallInterception:
    """
    The interceptors of one connection, and the calls they are told of (see
    the module docstring).

    @ivar interceptors: the interceptors, in order.
    @ivar lean: no interceptor has a C{callStarted} or C{callEnded} of its
        own: calls are kept as C{(method, start time)} (the answering side
        adds its own test: L{protocols.rpc._interceptors.Interception}).
    """

    def __init__(self, interceptors: Sequence[Any]) -> None:
        self.interceptors = tuple(interceptors)
        self._reversed = tuple(reversed(self.interceptors))
        # The hooks bound once, leaving out the no-ops: a call pays only for hooks that do something.
        self._started = tuple(i.callStarted for i in self.interceptors if overrides(i, "callStarted"))
        self._ended = tuple(i.callEnded for i in self._reversed if overrides(i, "callEnded"))
        self._recorders = tuple(i.tallyFor for i in self._reversed if overrides(i, "tallyFor"))
        # A lone recorder's tallies for the methods that succeeded on the answering side, by method.
        self._okTallies: dict[str, CallTally] = {}
        self.lean = not (self._started or self._ended)

    def logFailure(self, template: str, **fields: Any) -> None:
        """
        An interceptor's hook raised (called inside the C{except}): log it
        with its traceback (stdlib C{logging}, logger C{chunkwire.interceptors};
        the Twisted broker's own log there).
        """
        import logging  # (here: a client that never sees an interceptor fail does not load logging)

        logging.getLogger("chunkwire.interceptors").exception(template.format(**fields))

    # -- the calling side ---------------------------------------------------------------

    def startCall(
        self, method: str, peer: str, avatar: Any, scope: Scope | None
    ) -> tuple[CallInfo | tuple[str, float], Scope | None]:
        """
        A call of C{method} to C{peer} starts, in C{scope} (its deadline and
        the metadata it would carry): tell the interceptors.

        @return: how the call is kept (for L{callSettled}), and the scope to
            make it in when the interceptors changed its metadata (C{None}:
            C{scope} as it is).
        @raise Exception: an interceptor refused it (the call ended
            L{REFUSED}); nothing is to be sent.
        """
        if self.lean:
            return (method, now()), None
        info = CallInfo(CLIENT, method, peer, avatar, 0)
        metadata = dict(scope.metadata) if scope is not None and scope.metadata else {}
        info.metadata = metadata
        if scope is not None:
            info.deadline = scope.deadline
        try:
            for started in self._started:
                started(info)
        except Exception as error:
            info.errorType = describe(error)[0]
            self.end(info, REFUSED)
            raise
        if metadata and (scope is None or metadata != scope.metadata):
            # What the interceptors added goes with the call.
            return info, Scope(info.deadline, metadata)
        return info, None

    def callSettled(self, entry: CallInfo | tuple[str, float], error: BaseException | None, cancelled: bool) -> None:
        """
        A call made here (L{startCall}'s C{entry}) was settled: answered
        (C{error} C{None}), or failed with C{error}; C{cancelled}: its caller
        gave up on it.  Once per call.
        """
        if error is None:
            self.finish(entry, OK, None, CLIENT)
        else:
            outcome, errorType = outcomeOf(error, cancelled)
            self.finish(entry, outcome, errorType, CLIENT)

    # -- both sides ---------------------------------------------------------------------

    def finish(self, entry: CallInfo | tuple[str, float], outcome: str, errorType: str | None, side: str) -> None:
        """A call ended: tell the interceptors, in whichever form it was kept."""
        if type(entry) is tuple:
            method, started = entry
            self.record(side, method, outcome, errorType, now() - started)
            return
        assert isinstance(entry, CallInfo)
        entry.errorType = errorType
        self.end(entry, outcome)

    def end(self, info: CallInfo, outcome: str) -> None:
        """C{info} ended with C{outcome}: C{callEnded} in reverse order, then the recorders."""
        info.ended = now()
        info.outcome = outcome
        index = 0
        try:
            for ended in self._ended:
                ended(info)
                index += 1
        except Exception:
            self._endFailed(info, index)
        if self._recorders:
            self.record(info.side, info.method, outcome, info.errorType, info.ended - info.started)

    def _endFailed(self, info: CallInfo, failed: int) -> None:
        """C{callEnded} number C{failed} raised: log it, and tell the interceptors after it (each once)."""
        self.logFailure("an interceptor's callEnded failed for {call}", call=info)
        for ended in self._ended[failed + 1 :]:
            self.safely(ended, info)

    def record(self, side: str, method: str, outcome: str, errorType: str | None, seconds: float) -> None:
        """Count a call in each recorder's tally for it."""
        for tallyFor in self._recorders:
            try:
                tally = tallyFor(side, method, outcome, errorType)
                if tally is None:
                    continue
                tally.add(outcome, seconds)
            except Exception:
                self.logFailure("interceptor {hook} failed for {method}", hook=tallyFor, method=method)
                continue
            if outcome is OK and side is SERVER and len(self._recorders) == 1:
                self._okTallies[method] = tally

    def safely(self, hook: Any, argument: Any) -> None:
        """Call C{hook(argument)}; its exception is logged."""
        try:
            hook(argument)
        except Exception:
            self.logFailure("interceptor {hook} failed", hook=hook)
