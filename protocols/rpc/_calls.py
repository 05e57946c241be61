# -*- test-case-name: tests.protocols.rpc.test_calls,tests.protocols.rpc.test_served_call -*-
"""The calls one side makes, as Deferreds: timeouts and cancelling on the sans-IO call table.

Contract: each call is one CALL message, one send transaction; it gets its
answer or errbacks (every pending call at once with the reason when the
connection is lost).  Every rule of making a call is sans-IO, shared with
the clients' session: request ids, the CALL's fields, refusing calls after
GOAWAY (L{framing.rpc._drain.GoingAway}) or past C{CallLimits.maxPending}
(L{TooManyPendingCalls}), matching an answer, a FAIL's error, the text
naming the call, the CANCEL of a call given up, the late or stray answer
rule and the calls failed by the end are
L{framing.rpc._calltable.CallTable}'s; what a CALL carries in a
C{callContext} and how long it waits, L{framing.rpc._context}'s.  This
module adds the Deferreds, the timers, the log and the writing.  With
C{CallLimits.callTimeout}, or a deadline (L{protocols.rpc._context}), each
call has a timer.  A call for no answer (L{OutgoingCalls.callRemoteOnly})
is sent and forgotten, counted nowhere.

Cost: sending, answering, failing and cancelling are O(1) whatever is in
flight and however old the connection.

Design: docs/design/rpc-twisted.md
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.logger import LogLevel
from twisted.python.failure import Failure

from framing._outgoing import Outgoing
from framing.rpc._calltable import CallTable
from framing.rpc._connection import RpcConnection
from framing.rpc._context import Scope, callBound, sentWith, timeUp
from framing.rpc._drain import GoingAway
from framing.rpc._errors import DeadlineExceeded, DeadReferenceError
from framing.rpc._limits import CallLimits
from framing.rpc._wire import Message

from ._context import scope

CallSent = Callable[[Deferred[Any], Outgoing], object]
"""An extension's C{callSent(call, outgoing)} (see L{protocols._interfaces.IBrokerExtension})."""


def reactorOf(clock: Any) -> Any:
    """C{clock}, or the global reactor if it is C{None} (imported only then)."""
    if clock is None:
        from twisted.internet import reactor

        clock = reactor
    return clock


class _Call(Deferred[Any]):
    """
    The caller's L{Deferred} for one call; it knows its request id so that
    cancelling it is O(1), its method's name for its errors, and its
    timeout's delayed call, if it has one.
    """

    __slots__ = ("requestId", "name", "timer")

    requestId: int
    name: str
    timer: Any


def callName(call: _Call) -> str:
    """A call's method name (a call is the caller's L{Deferred}), as the call table's errors name it."""
    return call.name


def _callsGone(call: Deferred[Any]) -> None:
    """The canceller of calls made after the connection was lost: nothing is pending any more."""


class OutgoingCalls:
    """
    The calls this side made on one connection that wait for answers.

    @ivar callLimits: the L{CallLimits} (pending calls and their timeout).
    """

    def __init__(
        self,
        connection: Any,
        callLimits: CallLimits,
        clock: Any = None,
        callSent: Iterable[CallSent] = (),
        *,
        rpc: RpcConnection[Any],
    ) -> None:
        """
        @param connection: the L{protocols.TokenProtocol} the calls are sent on.
        @param rpc: the connection (L{framing.rpc._connection.RpcConnection},
            made with L{callName}): its C{calls} are each pending call's
            Deferred by request id; an ANSWER to no call is its rule.
        @param clock: the C{IReactorTime} of timeouts; the global reactor if C{None}.
        @param callSent: called with each call and its L{Outgoing} before
            its message is encoded (the extensions' C{callSent}).
        """
        self._connection = connection
        self.callLimits = callLimits
        self._clock = clock
        self._callSent = tuple(callSent)
        self._open = False
        self._table: CallTable[_Call] = rpc.calls
        self._unmatched = rpc.answerReceived
        self._cancelCall = self._cancel  # bound once: one canceller for every call
        self._scope = scope.get  # bound once: what every call reads of its context

    @property
    def open(self) -> bool:
        """Whether calls may be sent: the connection is up and not lost (it may be closing)."""
        return self._open

    @property
    def pendingCount(self) -> int:
        """How many calls wait for their answer."""
        return len(self._table)

    def start(self) -> None:
        """The connection is up: calls may be sent."""
        self._open = True

    def callRemote(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Deferred[Any]:
        """
        Call method C{name} of the peer's export C{target}; see
        L{protocols.rpc.RemoteReference.callRemote}, which is how applications call.
        """
        if not self._open or self._connection.transport.disconnecting:
            return fail(DeadReferenceError(f"cannot call {name!r}: the connection is not up"))
        context = self._scope()
        if context is not None:
            return self._callWithContext(target, name, args, kwargs, context)
        try:
            call = self._send(target, name, kwargs or None, args)
        except Exception:
            return fail()
        timeout = self.callLimits.callTimeout
        if timeout is not None and call.called is False:
            call.timer = reactorOf(self._clock).callLater(timeout, self._timeUp, call.requestId, name, False)
        return call

    def _send(self, target: int, name: str, sent: Any, args: tuple[Any, ...]) -> _Call:
        """
        Make a call pending and send its CALL, whose keyword-arguments place
        holds C{sent} (the keyword arguments, C{None}, or a call context).
        (Raising, not a failed Deferred: the callers' C{try} costs nothing
        on the path that does not raise, where a test of what came back did.)

        @return: the pending L{_Call}.
        @raise Exception: it could not be made (L{CallTable.call}: after
            GOAWAY, a name that is no str, too many waiting) or sent (nothing is pending).
        """
        # (Deferred's own __init__, then the fields set here: one call less per call than an __init__ of ours)
        call = _Call(self._cancelCall)
        # Pending before sending: a synchronous transport may answer at once.
        fields = self._table.call(call, target, name, sent, args)
        call.requestId, call.name, call.timer = fields[1], name, None
        try:
            # (made here only for the extensions to see: else sendObject makes one if a slicer runs)
            outgoing = None
            if self._callSent:
                outgoing = Outgoing()
                for callSent in self._callSent:
                    callSent(call, outgoing)
            self._connection.sendObject(Message(fields), outgoing)
        except Exception:
            self._table.take(fields[1])
            raise
        return call

    def _callWithContext(
        self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], context: Scope
    ) -> Deferred[Any]:
        """L{callRemote} for a call with a deadline or metadata (see L{protocols.rpc._context})."""
        clock = reactorOf(self._clock)
        try:
            sent, left = sentWith(name, kwargs, context, clock.seconds)
        except DeadlineExceeded:
            return fail()
        try:
            call = self._send(target, name, sent, args)
        except Exception:
            return fail()
        if call.called is False:
            seconds, byDeadline = callBound(left, self.callLimits.callTimeout)
            if seconds is not None:
                call.timer = clock.callLater(seconds, self._timeUp, call.requestId, name, byDeadline)
        return call

    def callRemoteOnly(self, target: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """
        Call method C{name} of the peer's export C{target} for no answer; see
        L{protocols.rpc.RemoteReference.callRemoteOnly}.

        @raise framing.rpc.DeadReferenceError: the connection is not up (a L{GoingAway} after GOAWAY).
        @raise TypeError: C{name} is no str.
        @raise framing.rpc.DeadlineExceeded: it is made in a C{callContext} whose deadline passed (nothing is sent).
        @raise framing.EncodingError: an argument cannot be sent (nothing is).
        """
        if not self._open or self._connection.transport.disconnecting:
            raise DeadReferenceError(f"cannot call {name!r}: the connection is not up")
        # Extensions' callSent are not told: there is no call to tie anything to.
        sent: Any = kwargs or None  # (sentWith's rule for a call in no scope, in line)
        context = self._scope()
        if context is not None:
            sent = sentWith(name, kwargs, context, reactorOf(self._clock).seconds)[0]
        self._connection.sendObject(Message(self._table.callOnly(target, name, sent, args)))

    def stop(self, why: str) -> None:
        """
        Either end sent GOAWAY: every new call fails with L{GoingAway}
        (C{"cannot call 'NAME': WHY"}) and nothing is sent
        (L{CallTable.stop}); the calls in flight go on.
        """
        self._table.stop(why, GoingAway)

    def _timeUp(self, requestId: int, name: str, byDeadline: bool) -> None:
        """
        A call's time ran out (L{framing.rpc._context.callBound}): forget it,
        tell the peer, and fail it with L{framing.rpc.DeadlineExceeded} or
        L{CallTimedOut} (L{framing.rpc._context.timeUp}).
        """
        self._giveUp(requestId, timeUp(name, byDeadline, self.callLimits.callTimeout))

    def _giveUp(self, requestId: int, error: Exception) -> None:
        """Forget a call whose time ran out, send CANCEL, and fail it with C{error}."""
        given = self._table.giveUp(requestId, self._open and self._connection.failure is None)
        if given is None:
            return
        call, cancel = given
        call.timer = None
        if cancel is not None:
            self._connection.sendObject(cancel)
        call.errback(error)

    def _cancel(self, call: Deferred[Any]) -> None:
        """The canceller of every call: forget it and tell the peer; the Deferred then fails with CancelledError."""
        assert isinstance(call, _Call)
        given = self._table.giveUp(call.requestId, self._open)
        if given is None:
            return
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        cancel = given[1]
        if cancel is not None:
            self._connection.sendObject(cancel)

    # -- answers (reactions of the connection's rules: framing.rpc._connection.Shell) ----------------

    def answerReceived(self, message: Message) -> None:
        """
        An ANSWER, matched in line (the broker's route for it: one call, as
        before the connection's rules): the call's Deferred fires with the
        result, as L{answered}; one to no call is the connection's rule
        (L{framing.rpc._connection.RpcConnection.answerReceived}).
        """
        call = self._table.pop(message[1], None)  # (the CallTable is the dict: its match in one C call, for every call)
        if call is None:
            self._unmatched(message)
            return
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        call.callback(message[2])

    def callAnswered(self, call: _Call, result: Any) -> None:
        """Call C{call} was answered (L{framing.rpc._connection.RpcConnection.answerReceived}): it fires."""
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        call.callback(result)

    def failed(self, call: _Call, error: BaseException) -> None:
        """Call C{call} failed (a FAIL, or its answer refused here: L{CallTable.failed}, L{CallTable.refused})."""
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None
        call.errback(error)

    def ignored(self, requestId: int, what: str) -> None:
        """The late answer C{what} to C{requestId}, given up on, is ignored: logged at debug, within the log rate."""
        template = "{peer}: ignoring {what} to request {id}, which is not pending: it was cancelled or timed out"
        self._connection.logFailure("not-pending", template, LogLevel.debug, what=what, id=requestId)

    def connectionLost(self, reason: Failure) -> None:
        """Fail every pending call with C{reason}, naming its method and the peer; later calls fail at once."""
        self._open = False
        self._cancelCall = _callsGone
        error = reason.value
        assert error is not None
        for call, lost in self._table.lost(error, self._connection.peerName):
            if call.timer is not None:
                call.timer.cancel()
                call.timer = None
            call.errback(lost)
