# -*- test-case-name: tests.protocols.rpc.test_call_tallies,tests.protocols.kv.test_threads -*-
"""The calls the peer makes here: finding the method, running it, answering.

Contract: each CALL is answered once, with one ANSWER or one FAIL.  It is
admitted before its method runs by the rule every shell shares,
L{framing.rpc._incoming.CallAdmission.admit}: a call to no exported
object, to a method not L{remote}, past
L{protocols.rpc.CallLimits.maxRunning} calls running, or with refused
arguments is answered with a FAIL without running, counted as a refusal
(L{protocols.TokenProtocol.logRefusal}); one whose deadline
(L{protocols.rpc._context}) passed on arrival with L{DeadlineExceeded};
one reusing the request id of a call still running here drops the
connection (L{framing.rpc._errors.DuplicateRequestId}).  A method's
exception is logged at a bounded rate and sent back; a
L{framing.Violation} refuses the call.  A Deferred or coroutine is
answered when it finishes, and cancelled on the peer's CANCEL (nothing
more is sent for it then).  A call for no answer (L{NO_ANSWER}) runs
alike, its failure only logged.  A deadline passed while the call runs is
answered with L{DeadlineExceeded} (the call cancelled).  Calls running
when the connection is lost finish, unanswered.  A call still running
once its method returned is charged to the connection's ledger
(L{CALLS_ACCOUNT}, by L{callBytes}) until it ends.

Cost per call: its admission (one Python call, three subscripts, the
argument check) and the method; a call that runs on, L{callBytes} (O(its
arguments)) and a charge.

Design: docs/design/rpc-broker.md
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from contextvars import ContextVar
from time import perf_counter
from types import CoroutineType
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.logger import LogLevel
from twisted.python.failure import Failure

from framing import Violation
from framing._errors import short_repr
from framing.rpc._context import Scope
from framing.rpc._errors import (
    DeadlineExceeded,
    MessageRefused,
    RuleBroken,
    clipTraceback,
)
from framing.rpc._errors import (
    TooManyRunningCalls as TooManyRunningCalls,  # (sans-IO since the clients without Twisted)
)
from framing.rpc._incoming import (
    CALLS_ACCOUNT,
    CallAdmission,
    callBytes,
    failure,
    overDeadline,
    refusalCode,
    resultRefused,
    withoutDetails,
)
from framing.rpc._signatures import RemoteMethod
from framing.rpc._wire import ANSWER, CALL, NO_ANSWER, Message

from .._logs import escape
from ._context import CallContext, scope, serving

_calling: ContextVar[Any] = ContextVar("chunkwire.rpc.calling", default=None)


def currentBroker() -> Any:
    """
    The L{protocols.rpc.Broker} whose peer called the remote method now
    running (in its synchronous part, or anywhere in a coroutine method,
    which keeps the context it started in), or C{None} outside a remote
    call.  Extensions use it to find the connection a call arrived on.
    """
    return _calling.get()


def _expired(failure: Failure, timer: Any, name: str) -> Failure:
    """A call for no answer ended failing: a cancellation by its deadline's C{timer} is told as L{DeadlineExceeded}."""
    if timer.called and isinstance(failure.value, CancelledError):
        raise DeadlineExceeded(f"{name!r} (called for no answer) did not finish within its deadline", name)
    return failure


def _stopTimer(result: Any, timer: Any) -> Any:
    """A call with a deadline ended: its deadline's timer is not needed any more."""
    if timer.active():
        timer.cancel()
    return result


UNANSWERED_REFUSAL = "Refused a call of {name} for no answer from {peer} (not answered): {code}: {violation}"
"""How a refused call for no answer is logged, here and by interceptors: nobody else hears of it."""

_PLAIN = frozenset({int, float, str, bytes, bool, type(None), list, tuple, dict})
"""Result types that are never a Deferred."""


class CallRunner(CallAdmission[Deferred[Any]]):
    """
    The peer's calls on one connection, admitted (L{CallAdmission.admit}),
    run on the reactor at once and each answered once: dispatch, and the
    calls still running (the clients without Twisted queue theirs instead:
    L{framing.rpc._incoming.IncomingCalls}).

    @ivar tracebacks: whether FAIL messages carry the local traceback.
    """

    def __init__(
        self,
        connection: Any,
        exports: dict[int, list[Any]],
        broker: Any,
        tracebacks: bool,
        maxRunning: int | None = None,
        clock: Any = None,
    ) -> None:
        """
        @param connection: the L{protocols.TokenProtocol} answers are sent on.
        @param exports: the export table (id to C{[object, count]}; see
            L{protocols.rpc._tables.ReferenceTable.exports}), only read here.
        @param broker: what L{currentBroker} names while a method runs.
        @param maxRunning: most calls running here at once (C{None}: no cap).
        @param clock: the C{IReactorTime} of deadlines; the global reactor if C{None}.
        """
        super().__init__(exports, maxRunning)
        self._connection = connection
        self._broker = broker
        self.tracebacks = tracebacks
        self._clock = clock
        self._closed = False
        # What each running call's arguments are charged to the ledger (CALLS_ACCOUNT), by request id (those charged).
        self._charged: dict[int, int] = {}
        # (_running: the calls running here by request id; _unanswered: those for no answer, not in _running, as
        # nobody can cancel them, but they hold as much while they run.  Both counted by admit's bound.)
        # The deadline of the call for no answer being received (see _contextCallReceived), else None.
        self._unansweredDeadline: float | None = None
        # The metadata of the call with a call context being received (see _contextCallReceived), else None.
        self._metadata: dict[str, str] | None = None
        self.starts: dict[int, tuple[str, float]] | None = None
        """
        Where each call's method name and start time (C{time.perf_counter})
        are kept by request id when this is set (interceptors that only
        record set it: L{protocols.rpc._interceptors}); L{answered} reads them.
        """
        self.answered: Callable[[int, str | None], None] | None = None
        """
        Told of each call answered here, once its answer is sent: its
        request id, and C{None} for an ANSWER or the wire type name of the
        error a FAIL carried.  A call for no answer is told of once, with
        L{NO_ANSWER} and C{None}, when its method returned (interceptors set
        it: L{protocols.rpc._interceptors}).
        """

    # -- handlers of the message table ---------------------------------------------------

    def callReceived(self, message: Message, milliseconds: int | None = None) -> None:
        """
        A CALL: admitted (L{CallAdmission.admit}; C{milliseconds}, the
        deadline of the call context L{_contextCallReceived} read), run,
        and answered, now or when it finishes.
        """
        if len(message) != 6:
            self._contextCallReceived(message)
            return
        _, requestId, target, name, args, kwargs = message
        if self.starts is not None:
            self.starts[requestId] = (name, perf_counter())
        try:
            obj, method = self.admit(requestId, target, name, args, kwargs, milliseconds)
        except Exception as refused:
            self._notAdmitted(requestId, refused, name)
            return
        # The method (and its coroutine, which copies the context where it
        # is started, below) sees this broker as currentBroker().
        token = _calling.set(self._broker)
        try:
            # (no ** for the commonest call, with no keyword arguments: a cheaper call)
            result = method.function(obj, *args, **kwargs) if kwargs else method.function(obj, *args)
            if type(result) is CoroutineType:
                result = Deferred.fromCoroutine(result)
        except Violation as violation:
            # Refused by the method (a cap it keeps, a value it checks).
            self._refuse(requestId, violation, violation.code, name)
            return
        except Exception as error:
            self._methodFailed(method.name, error)
            self._sendFailure(requestId, error, self._tracebackText())
            return
        finally:
            _calling.reset(token)
        # (Deferred's metaclass is ABCMeta, whose isinstance is a Python call: plain values skip it.)
        if type(result) not in _PLAIN and isinstance(result, Deferred):
            self._answerLater(requestId, result, method, args, kwargs)
        elif requestId == NO_ANSWER:
            # (tested here, not in _sendAnswer, which a Deferred's answer reaches only for a call with an id)
            if self.answered is not None:
                self.answered(NO_ANSWER, None)
        else:
            self._sendAnswer(requestId, result, method)

    def _contextCallReceived(self, message: Message) -> None:
        """
        A CALL with a call context: admitted as any call (refused if its
        deadline passed: L{CallAdmission.admit}), run with L{currentCall}
        giving its context and the calls its method makes carrying its
        deadline; cancelled when the deadline passes.
        """
        _, requestId, target, name, args, kwargs, milliseconds, metadata = message
        clock = self._clock
        if clock is None:
            from twisted.internet import reactor as clock
        deadline = None
        if milliseconds is not None:
            deadline = clock.seconds() + milliseconds / 1000
        # (a call of this id already running is not this call's: see below)
        before = self._running.get(requestId)
        served = serving.set(CallContext(deadline, metadata, clock.seconds))
        passedOn = scope.set(Scope(deadline, None)) if deadline is not None else None
        if requestId == NO_ANSWER:
            # (read by _answerLater: a call for no answer still running at its deadline is cancelled then)
            self._unansweredDeadline = deadline
        # (read by _answerLater: the metadata is held in the context the running method keeps, charged with it)
        self._metadata = metadata
        try:
            self.callReceived(Message((CALL, requestId, target, name, args, kwargs)), milliseconds)
        finally:
            if passedOn is not None:
                scope.reset(passedOn)
            serving.reset(served)
            self._unansweredDeadline = None
            self._metadata = None
        if deadline is None or requestId == NO_ANSWER:
            return
        running = self._running.get(requestId)
        if running is not None and running is not before and not running.called:
            timer = clock.callLater(deadline - clock.seconds(), self._deadlinePassed, requestId, running, name)
            running.addBoth(_stopTimer, timer)

    def _deadlinePassed(self, requestId: int, running: Deferred[Any], name: str) -> None:
        """A call's deadline passed while it ran: answer L{DeadlineExceeded}, then cancel it (its end is dropped)."""
        if self._running.get(requestId) is not running:
            return
        self._ended(requestId)
        self._sendFailure(requestId, overDeadline(name))
        try:
            running.cancel()
        except Exception:
            self._connection.log.failure("Cancelling request {id} failed", id=requestId)

    def callRefused(self, refused: MessageRefused) -> None:
        """A CALL this side refused while decoding it: answer it with a FAIL."""
        violation = refused.violation
        self._refuse(refused.requestId, violation, violation.code)

    def cancelReceived(self, message: Message) -> None:
        """A CANCEL: cancel the call's Deferred if it still runs."""
        requestId = message[1]
        running = self._ended(requestId)
        if running is None:
            template = "{peer}: ignoring a cancel of call {id}, not running"
            self._connection.logFailure("not-running", template, LogLevel.debug, id=requestId)
            return
        try:
            running.cancel()
        except Exception:
            # A canceller's bug must not reach dataReceived and drop the
            # connection.  Our bug, not the peer's: logged in full.
            self._connection.log.failure("Cancelling request {id} failed", id=requestId)

    def connectionLost(self) -> None:
        """Drop the answers of the calls still running, and what refers back to the broker."""
        self._closed = True
        self._running.clear()
        self._charged.clear()  # (the connection's ledger is closed with it: what they held is let go at once)
        self._broker = None

    def abandonRunning(self, error: BaseException) -> None:
        """
        Answer every call still running with a FAIL describing C{error}, then
        cancel it (its own failure is then dropped): a drain's deadline
        passed (L{protocols.rpc._drain}).
        """
        running, self._running = self._running, {}
        charged, self._charged = self._charged, {}
        if charged:
            self._connection.ledger.release(CALLS_ACCOUNT, sum(charged.values()))
        for requestId, call in running.items():
            self._sendFailure(requestId, error)
            try:
                call.cancel()
            except Exception:
                self._connection.log.failure("Cancelling request {id} failed", id=requestId)

    # -- answering -------------------------------------------------------------------------

    def _answerLater(
        self, requestId: int, running: Deferred[Any], method: RemoteMethod, args: Any, kwargs: Any
    ) -> None:
        """
        C{running}, the Deferred of a call's method, is answered when it
        fires; while it runs, the call's arguments (C{args}, C{kwargs}) and
        metadata are charged to the ledger (L{_charge}).
        """
        if requestId == NO_ANSWER:
            # Not kept in _running: with no id, the peer cannot cancel it; its deadline, if any, can.
            self._unanswered += 1
            if self._unansweredDeadline is not None:
                self._expireUnanswered(running, self._unansweredDeadline, method.name)
            running.addBoth(self._unansweredEnded, 0 if running.called else self._charge(args, kwargs))
            running.addErrback(self._onlyFailed, method)
            if self.answered is not None:
                self.answered(NO_ANSWER, None)
            return
        # Registered before the callbacks are added: an already-fired
        # Deferred answers (and unregisters) at once.  (Its id names no other
        # call running here: admit refused that on arrival, and the method's
        # synchronous part, all that ran since, reads nothing from the peer.)
        self._running[requestId] = running
        running.addCallbacks(
            self._deferredAnswered,
            self._deferredFailed,
            callbackArgs=(requestId, method),
            errbackArgs=(requestId, method),
        )
        if self._running.get(requestId) is running:
            # Still running (not answered at once): what it holds is charged until it ends (_ended).
            self._charged[requestId] = self._charge(args, kwargs)

    def _charge(self, args: Any, kwargs: Any) -> int:
        """Charge the ledger what a call that runs on holds (L{callBytes}: its arguments and metadata); that count."""
        connection = self._connection
        held = callBytes(args, kwargs, self._metadata, connection.registry)
        connection.ledger.charge(CALLS_ACCOUNT, held)
        return held

    def _ended(self, requestId: int) -> Deferred[Any] | None:
        """
        Call C{requestId} runs here no more (answered, failed, cancelled):
        forgotten, and what it was charged released; its Deferred, or
        C{None} if it was not running.
        """
        running = self._running.pop(requestId, None)
        held = self._charged.pop(requestId, 0)
        if held:
            self._connection.ledger.release(CALLS_ACCOUNT, held)
        return running

    def _expireUnanswered(self, running: Deferred[Any], deadline: float, name: str) -> None:
        """
        Cancel C{running}, a call for no answer, if it still runs at its
        C{deadline}; its end is then logged as L{DeadlineExceeded}.
        """
        clock = self._clock
        if clock is None:
            from twisted.internet import reactor as clock
        timer = clock.callLater(max(deadline - clock.seconds(), 0.0), running.cancel)
        running.addBoth(_stopTimer, timer)
        running.addErrback(_expired, timer, name)

    def _unansweredEnded(self, result: Any, held: int) -> Any:
        """A call for no answer ended: it runs no more, and what it was charged (C{held}) is released."""
        self._unanswered -= 1
        if held:
            self._connection.ledger.release(CALLS_ACCOUNT, held)
        return result

    def _deferredAnswered(self, result: Any, requestId: int, method: RemoteMethod) -> None:
        if self._ended(requestId) is not None:
            self._sendAnswer(requestId, result, method)

    def _deferredFailed(self, failure: Failure, requestId: int, method: RemoteMethod) -> None:
        # Popped already: cancelled by the peer, or the connection is gone.
        # Either way nobody waits for this failure; it is consumed here.
        if self._ended(requestId) is None:
            return
        error = failure.value
        assert error is not None
        if isinstance(error, Violation):
            self._refuse(requestId, error, error.code, method.name)
            return
        self._methodFailed(method.name, error)
        self._sendFailure(requestId, error, failure.getTraceback() if self.tracebacks else None)

    def _onlyFailed(self, failure: Failure, method: RemoteMethod) -> None:
        """A call for no answer failed later: log it (a refusal, or the method's failure); nothing is sent."""
        error = failure.value
        assert error is not None
        if isinstance(error, Violation):
            self._logRefusal(NO_ANSWER, error, error.code, method.name)
        else:
            self._methodFailed(method.name, error)

    def _sendAnswer(self, requestId: int, result: Any, method: RemoteMethod) -> None:
        """Send call C{requestId}'s ANSWER of C{result} (its id is never L{NO_ANSWER}), or the FAIL saying why not."""
        connection = self._connection
        if self._closed or connection.failure is not None:
            return
        if method.result is not None:
            violation = resultRefused(method.result, result)
            if violation is not None:
                self._refuse(requestId, violation, violation.code, method.name)
                return
        try:
            connection.sendObject(Message((ANSWER, requestId, result)))
        except Exception as error:
            if isinstance(error, Violation):
                error.where = "result" + error.where
            self._sendFailure(requestId, error, self._tracebackText())
            return
        if self.answered is not None:
            self.answered(requestId, None)

    def _notAdmitted(self, requestId: int, error: Exception, name: str) -> None:
        """
        C{error}, why L{CallAdmission.admit} refused call C{requestId} of
        C{name} (called where it is caught): a broken rule
        (L{framing.rpc._errors.DuplicateRequestId}) drops the connection
        (the peer is told why); a refusal (L{refusalCode}) is answered and
        counted; anything else is answered alone: a passed deadline, or an
        argument check's own bug (logged as a method's failure is).
        """
        if isinstance(error, RuleBroken):
            self._connection.dropConnection(error)
            return
        code = refusalCode(error)
        if code is not None:
            self._refuse(requestId, error, code, name)
            return
        if isinstance(error, DeadlineExceeded):
            self._sendFailure(requestId, error)
            return
        self._methodFailed(name, error)
        self._sendFailure(requestId, error, self._tracebackText())

    def _refuse(self, requestId: int, error: Exception, code: str, name: str = "?") -> None:
        """Answer a call this side refuses with a FAIL (none if it asks for no answer), and count it as a refusal."""
        self._logRefusal(requestId, error, code, name)
        self._sendFailure(requestId, error)

    def _logRefusal(self, requestId: int, error: Exception, code: str, name: str) -> None:
        """Count a refused call as a refusal, and log it."""
        if requestId == NO_ANSWER:
            template = UNANSWERED_REFUSAL
        else:
            template = "Refused call {id} of {name} from {peer}: {code}: {violation}"
        self._connection.logRefusal(code, str(error), template, id=requestId, name=escape(name))

    def _sendFailure(self, requestId: int, error: BaseException, remoteTraceback: str | None = None) -> None:
        if requestId == NO_ANSWER:
            if self.answered is not None:
                self.answered(NO_ANSWER, None)
            return
        if self._closed or self._connection.failure is not None:
            return
        message = failure(requestId, error, clipTraceback(remoteTraceback) if self.tracebacks else None)
        send = self._connection.sendObject
        try:
            send(message)
        except Exception:
            send(withoutDetails(message))
        if self.answered is not None:
            self.answered(requestId, message[2])

    def _tracebackText(self) -> str | None:
        return traceback.format_exc() if self.tracebacks else None

    def _methodFailed(self, name: str, error: BaseException) -> None:
        """Log remote method C{name}'s exception (the caller gets it too), without a traceback, within the log rate."""
        self._connection.logFailure(
            "method-failed",
            "{peer}: remote method {name} raised {error}",
            name=name,
            error=escape(f"{type(error).__name__}: {short_repr(error, 200)}"),
        )
