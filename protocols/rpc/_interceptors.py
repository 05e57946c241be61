# -*- test-case-name: tests.protocols.rpc.test_interceptors,tests.protocols.rpc.test_call_tallies -*-
"""Interceptors: hooks around each call, on the side that answers it and on the side that makes it.

Contract: an interceptor (L{ICallInterceptor}; subclass L{CallInterceptor}
for no-op defaults) is told when each call starts and when it ends, with a
L{CallInfo} (the method's name, the peer, the avatar, the side, the
C{time.perf_counter} times, the outcome).  C{callStarted} may refuse the
call by raising: the method does not run (answering side) or nothing is
sent (calling side), and the caller gets that error.  Each call that
started ends exactly once, with L{OK}, L{ERROR}, L{REFUSED}, L{CANCELLED},
L{LOST} or L{ONE_WAY} (answering side only).  Interceptors run in the order
given at start and in reverse at end.  On the answering side
C{enterMethod} (undone by C{exitMethod}) sets the context variables the
method sees.  An interceptor's own exception in C{callEnded}, C{tallyFor}
or a connection hook is logged, never raised into the connection.

Cost: nothing for a broker without interceptors (they are installed per
connection, L{protocols.rpc.BrokerFactory}'s C{interceptors}, through
L{protocols.rpc._broker.Broker.interceptCalls} and
L{protocols.rpc._broker.Broker.sendThrough}); with recorders only
(L{ICallRecorder}), a call that succeeds costs a tuple, two clock readings
and its L{CallTally}'s update; C{enterMethod} costs nothing where no
interceptor has one.

Design: docs/design/rpc-broker.md
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

from twisted.internet.defer import CancelledError, Deferred, fail
from twisted.python.failure import Failure
from zope.interface import Interface, implementer

from framing import Violation
from framing._errors import short_repr
from framing.rpc._incoming import failure
from framing.rpc._interception import (
    CANCELLED,
    CLIENT,
    ERROR,
    LOST,
    OK,
    ONE_WAY,
    REFUSALS,
    REFUSED,
    SERVER,
    CallHooks,
    CallInfo,
    CallInterception,
    now,
)
from framing.rpc._wire import NO_ANSWER, Message

from .._logs import escape
from ._answering import UNANSWERED_REFUSAL
from ._context import scope
from ._refs import CallSender


class ICallRecorder(Interface):  # type: ignore[misc]
    """
    What an interceptor that only counts and times calls implements instead
    of C{callEnded}: gRPC's stats handler beside its interceptors.  It hands
    out a L{CallTally} per method, so a call that no other interceptor
    watches is never given a L{CallInfo}, and one that succeeds is counted
    without a call of the recorder.
    """

    def tallyFor(side, method, outcome, errorType):  # type: ignore[no-untyped-def]
        """
        The L{CallTally} where a call of C{method} on C{side} that ended with
        C{outcome} (and C{errorType}) counts, or C{None} to leave it out.
        The tally given for a call that succeeded on the answering side is
        kept by the connection for that method's later successes.
        """


class ICallInterceptor(Interface):  # type: ignore[misc]
    """Hooks around each call and each connection (see L{protocols.rpc._interceptors})."""

    def callStarted(call):  # type: ignore[no-untyped-def]
        """A call starts (a L{CallInfo}); raise to refuse it."""

    def callEnded(call):  # type: ignore[no-untyped-def]
        """A call ended: C{call.outcome}, C{call.duration} and C{call.errorType} are set."""

    def enterMethod(call):  # type: ignore[no-untyped-def]
        """
        The method of a call answered here (a L{CallInfo} that C{callStarted}
        saw, on the answering side) is about to run, in the current context:
        set up what it should run in (context variables: an OpenTelemetry
        span made current, a request id for logs), and return what
        C{exitMethod} needs to undo it.  Told in the interceptors' order;
        an exception is logged and the method runs anyway.
        """

    def exitMethod(call, entered):  # type: ignore[no-untyped-def]
        """
        The method's synchronous part returned (or raised): undo what
        C{enterMethod} set up, C{entered} being what it returned.  Told in
        reverse order, each time C{enterMethod} returned (an C{async def}
        method's later steps keep the context they started in).
        """

    def connectionMade(broker):  # type: ignore[no-untyped-def]
        """A connection with these interceptors is up (its L{protocols.rpc.Broker})."""

    def connectionLost(broker):  # type: ignore[no-untyped-def]
        """That connection ended."""


@implementer(ICallInterceptor, ICallRecorder)
class CallInterceptor(CallHooks):
    """
    An L{ICallInterceptor} and L{ICallRecorder} that does nothing: subclass
    it and override what you need (its call hooks are
    L{framing.rpc._interception.CallHooks}', which every client runs).
    """

    def enterMethod(self, call: CallInfo) -> Any:
        return None

    def exitMethod(self, call: CallInfo, entered: Any) -> None:
        pass

    def connectionMade(self, broker: Any) -> None:
        pass

    def connectionLost(self, broker: Any) -> None:
        pass


class ConnectionMetadata(CallInterceptor):
    """
    Adds a connection's metadata (L{protocols.options.ClientOptions.metadata})
    to each call the connection makes, under the call's own (a key the
    call's C{callContext} sets keeps its value).  Costs one dict update per call.
    """

    def __init__(self, metadata: Mapping[str, str]) -> None:
        self.metadata = metadata

    def callStarted(self, call: CallInfo) -> None:
        if call.side == CLIENT:
            # (the calling side's metadata is a dict of its own: what will be sent)
            sent = cast("dict[str, str]", call.metadata)
            for key, value in self.metadata.items():
                sent.setdefault(key, value)


class Interception(CallInterception):
    """
    The interceptors of one connection: the L{protocols._interfaces.IBrokerExtension}
    that tells them of its start and end, and the wrappers that tell them of each call.

    A call is kept as a L{CallInfo} when some interceptor has a
    C{callStarted} or C{callEnded} of its own; when all of them only record
    (L{ICallRecorder}), it is kept as C{(method, start time)}, which costs a
    fraction of a L{CallInfo} (the Prometheus interceptor's case).  Who is
    told what, and the calling side's rules, are
    L{framing.rpc._interception.CallInterception}'s; this adds the broker's
    glue (its dispatch, its Deferreds, its log) and the answering side.
    It is the broker's L{protocols.rpc._refs.CallSender}
    (L{protocols.rpc.Broker.sendThrough}), in front of the one before.
    """

    controlTypes: tuple[type, ...] = ()

    def __init__(self, broker: Any, interceptors: Sequence[Any]) -> None:
        super().__init__(interceptors)
        self.broker = broker
        self._entering = tuple((i.enterMethod, i.exitMethod) for i in self.interceptors if _overrides(i, "enterMethod"))
        self._lean = self.lean and not self._entering
        self._answering: dict[int, CallInfo | tuple[str, float]] = {}
        self._peer: Any = None
        self._avatar: Any = None
        broker.incoming.answered = self._answeredHere
        # What the broker's dispatch hands the peer's CALLs and CANCELs to, behind this interception's own.
        self._call = broker.incoming.callReceived
        self._cancel = broker.incoming.cancelReceived
        if self._lean:
            # The calls answered here are timed by CallRunner itself: no CALL handler of ours in their path.
            broker.incoming.starts = self._answering
        broker.interceptCalls(None if self._lean else self._callReceived, self._cancelReceived)
        self._sender: CallSender = broker.sendThrough(self)
        broker.extensions = (*broker.extensions, self)

    # -- IBrokerExtension ---------------------------------------------------------------

    def install(self, broker: Any, registry: Any) -> None:
        pass

    def controlReceived(self, obj: Any) -> None:
        pass

    def connectionMade(self) -> None:
        for interceptor in self.interceptors:
            self.safely(interceptor.connectionMade, self.broker)

    def connectionLost(self, reason: Failure) -> None:
        # (emptied in place: in the recorders' case CallRunner writes to this same dict)
        entries = list(self._answering.values())
        self._answering.clear()
        for entry in entries:
            self.finish(entry, LOST, None, SERVER)
        for interceptor in self._reversed:
            self.safely(interceptor.connectionLost, self.broker)

    # -- the answering side ------------------------------------------------------------

    def _info(self, side: str, method: str, requestId: int) -> CallInfo:
        if self._peer is None:
            self._learnPeer()
        return CallInfo(side, method, self._peer, self._avatar, requestId)

    def _learnPeer(self) -> None:
        """At the first call (after any login): the peer's name, and the avatar on a server with logins."""
        broker = self.broker
        self._peer = str(broker.connection.peerName())
        if getattr(broker.factory, "gate", None) is not None:
            root = broker.references.exports.get(0)
            self._avatar = root[0] if root is not None else None

    def _callReceived(self, message: Message) -> None:
        # Runs for every call: _info written out.
        requestId = message[1]
        if self._peer is None:
            self._learnPeer()
        info = CallInfo(SERVER, message[3], self._peer, self._avatar, requestId)
        if len(message) != 6:
            # A call context: (..., deadline in milliseconds, metadata); the deadline as the method will see it.
            info.metadata = MappingProxyType(message[7])
            if message[6] is not None:
                info.deadline = _seconds(self.broker.clock) + message[6] / 1000
        if self._started:
            try:
                for started in self._started:
                    started(info)
            except Exception as error:
                self._refuse(info, error)
                return
        if requestId == NO_ANSWER:
            if self._entering:
                self._callInside(info, message)
            else:
                self._call(message)
            self.end(info, ONE_WAY)
            return
        self._answering[requestId] = info
        if self._entering:
            self._callInside(info, message)
        else:
            self._call(message)

    def _callInside(self, info: CallInfo, message: Message) -> None:
        """Run the call's method inside what each C{enterMethod} set up, undone in reverse order once it returned."""
        entered: list[tuple[Any, Any]] = []
        for enter, exit in self._entering:
            try:
                entered.append((exit, enter(info)))
            except Exception:
                self.broker.connection.log.failure("an interceptor's enterMethod failed for {call}", call=info)
        try:
            self._call(message)
        finally:
            for exit, token in reversed(entered):
                try:
                    exit(info, token)
                except Exception:
                    self.broker.connection.log.failure("an interceptor's exitMethod failed for {call}", call=info)

    def _refuse(self, info: CallInfo, error: Exception) -> None:
        """
        An interceptor refused the call: answer it with C{error}, without
        running it; a call for no answer is only logged, with its method.
        """
        refusal = failure(info.requestId, error)
        info.errorType = refusal[2]
        connection = self.broker.connection
        if info.requestId == NO_ANSWER:
            _logUnanswered(connection, info.method, error, refusal[3])
        else:
            if isinstance(error, Violation):
                connection.logRefusal(error.code, refusal[3])
            connection.sendObject(refusal)
        self.end(info, REFUSED)

    def _cancelReceived(self, message: Message) -> None:
        entry = self._answering.pop(message[1], None)
        self._cancel(message)
        if entry is not None:
            self.finish(entry, CANCELLED, None, SERVER)

    def _answeredHere(self, requestId: int, errorType: str | None) -> None:
        entry = self._answering.pop(requestId, None)
        if type(entry) is tuple and errorType is None and requestId:
            # Every call that succeeds, when the interceptors only record: _record written out.
            seconds = now() - entry[1]
            tally = self._okTallies.get(entry[0])
            if tally is None:
                self.record(SERVER, entry[0], OK, None, seconds)
                return
            tally.ok += 1
            # Most calls fit the first bucket: one comparison instead of a bisection's four or five.
            if seconds <= tally.first:
                tally.buckets[0] += 1
            else:
                tally.buckets[bisect_left(tally.bounds, seconds)] += 1
            tally.total += seconds
        elif entry is not None:
            if requestId == NO_ANSWER:
                self.finish(entry, ONE_WAY, None, SERVER)
            elif errorType is None:
                self.finish(entry, OK, None, SERVER)
            else:
                self.finish(entry, REFUSED if errorType in REFUSALS else ERROR, errorType, SERVER)

    # -- the calling side ----------------------------------------------------------------

    def callRemote(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Deferred[Any]:
        """Send the call through the sender before this, telling the interceptors of its start and end."""
        if self._lean:
            started = now()
            call: Deferred[Any] = self._sender.callRemote(target, name, args, kwargs)
            return call.addBoth(self._answered, (name, started))
        if self._peer is None:
            self._learnPeer()
        try:
            entry, sending = self.startCall(name, self._peer, self._avatar, scope.get())
        except Exception as error:
            return fail(error)
        if sending is not None:
            token = scope.set(sending)
            try:
                call = self._sender.callRemote(target, name, args, kwargs)
            finally:
                scope.reset(token)
        else:
            call = self._sender.callRemote(target, name, args, kwargs)
        if type(entry) is CallInfo:
            entry.requestId = getattr(call, "requestId", 0)
        call.addBoth(self._answered, entry)
        return call

    def callRemoteOnly(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Send a call for no answer through the sender before this (the calling side's interceptors see none)."""
        self._sender.callRemoteOnly(target, name, args, kwargs)

    def _answered(self, result: Any, entry: CallInfo | tuple[str, float]) -> Any:
        if not isinstance(result, Failure):
            self.finish(entry, OK, None, CLIENT)
            return result
        error = result.value
        assert error is not None
        self.callSettled(entry, error, isinstance(error, CancelledError))
        return result

    # -- both ---------------------------------------------------------------------------

    def logFailure(self, template: str, **fields: Any) -> None:
        """An interceptor's hook raised: the connection's log says so, with the failure."""
        self.broker.connection.log.failure(template, **fields)


def _logUnanswered(connection: Any, method: str, error: Exception, text: str) -> None:
    """
    Log a call for no answer that an interceptor refused: its caller is
    never told, so this line is all there is of it.  A L{Violation} counts
    as a refusal of the peer (as when the method's constraints refuse it);
    any other error is logged as a failure here.
    """
    if isinstance(error, Violation):
        connection.logRefusal(error.code, text, UNANSWERED_REFUSAL, name=escape(method))
        return
    template = "{peer}: an interceptor refused a call of {name} for no answer (not answered): {error}"
    shown = escape(f"{type(error).__name__}: {short_repr(error, 200)}")
    connection.logFailure("call-refused", template, name=escape(method), error=shown)


def _seconds(clock: Any) -> float:
    """C{clock.seconds()}, on the global reactor if C{clock} is C{None}."""
    if clock is None:
        from twisted.internet import reactor as clock
    seconds: float = clock.seconds()
    return seconds


def _overrides(interceptor: Any, name: str) -> bool:
    """Whether C{interceptor}'s hook C{name} is its own, not L{CallInterceptor}'s no-op."""
    return getattr(type(interceptor), name, None) is not getattr(CallInterceptor, name)


def intercept(broker: Any, interceptors: Sequence[Any]) -> Interception | None:
    """Install C{interceptors} on C{broker} (before its connection starts); C{None} if there are none."""
    if not interceptors:
        return None
    return Interception(broker, interceptors)
