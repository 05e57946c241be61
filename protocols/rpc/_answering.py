# -*- test-case-name: tests.protocols.rpc.test_call_tallies,tests.protocols.kv.test_threads -*-
"""The calls the peer makes here: finding the method, running it, answering.

Contract: each CALL is answered once, with one ANSWER or one FAIL.  A call
to no exported object, to a method not L{remote}, or with refused arguments
is answered with a FAIL without running, counted as a refusal
(L{protocols.TokenProtocol.logRefusal}).  A method's exception is logged at
a bounded rate and sent back; a L{framing.Violation} refuses the call.  A
Deferred or coroutine is answered when it finishes, and cancelled on the
peer's CANCEL (nothing more is sent for it then).  A call for no answer
(L{NO_ANSWER}) runs alike, its failure only logged.  A second running call
of one request id drops the connection (L{DuplicateRequestId}).  At most
L{protocols.rpc.CallLimits.maxRunning} calls run at once.  A deadline
(L{protocols.rpc._context}) passed on arrival, or while the call runs, is
answered with L{DeadlineExceeded} (the call cancelled).  Calls running when
the connection is lost finish, unanswered.  A call still running once its
method returned is charged to the connection's ledger (L{CALLS_ACCOUNT}, by
L{callBytes}) until it ends.

Cost per call: two dict lookups (object, method) and the method; a call
that runs on, L{callBytes} (O(its arguments)) and a charge.

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
    DuplicateRequestId,
    MessageRefused,
    clipTraceback,
    noSuchMethod,
    noSuchObject,
)
from framing.rpc._errors import (
    TooManyRunningCalls as TooManyRunningCalls,  # (sans-IO since the clients without Twisted)
)
from framing.rpc._incoming import CALLS_ACCOUNT, callBytes, failure, resultRefused, withoutDetails
from framing.rpc._signatures import RemoteMethod
from framing.rpc._wire import ANSWER, CALL, NO_ANSWER, Message

from .._logs import escape
from ._context import CallContext, scope, serving

_calling: ContextVar[Any] = ContextVar("chunkwire.rpc.calling", default=None)


def _dropped(failure: Failure) -> None:
    """The failure of a call nobody is answered for any more: consumed (not logged as unhandled)."""


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


class CallRunner:
    """
    The peer's calls on one connection, run on the reactor at once and each
    answered once: dispatch, and the calls still running (the clients
    without Twisted queue theirs instead: L{framing.rpc._incoming.IncomingCalls}).

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
        self._connection = connection
        self._exports = exports
        self._broker = broker
        self.tracebacks = tracebacks
        self.maxRunning = maxRunning
        self._clock = clock
        self._closed = False
        self._running: dict[int, Deferred[Any]] = {}
        # What each running call's arguments are charged to the ledger (CALLS_ACCOUNT), by request id (those charged).
        self._charged: dict[int, int] = {}
        # Calls for no answer still running: not in _running (nobody can
        # cancel them), but they hold as much while they run.
        self._unanswered = 0
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

    @property
    def runningCount(self) -> int:
        """How many calls are running here (their methods returned a Deferred or a coroutine), for no answer too."""
        return len(self._running) + self._unanswered

    # -- handlers of the message table ---------------------------------------------------

    def callReceived(self, message: Message) -> None:
        """A CALL: run the method and answer, now or when it finishes."""
        if len(message) != 6:
            self._contextCallReceived(message)
            return
        _, requestId, target, name, args, kwargs = message
        if self.starts is not None:
            self.starts[requestId] = (name, perf_counter())
        entry = self._exports.get(target)
        if entry is None:
            self._refuse(requestId, noSuchObject(target), "no-such-object", name)
            return
        obj = entry[0]
        method = obj.remoteMethods.get(name)
        if method is None:
            self._refuse(requestId, noSuchMethod(name, obj.remoteMethods), "no-such-method", name)
            return
        if self.maxRunning is not None and len(self._running) + self._unanswered >= self.maxRunning:
            self._refuse(requestId, TooManyRunningCalls(self.maxRunning), TooManyRunningCalls.code, name)
            return
        # The method (and its coroutine, which copies the context where it
        # is started, below) sees this broker as currentBroker().
        token = _calling.set(self._broker)
        try:
            check = method.checkArguments
            if check is not None:
                check(args, kwargs)
            # (no ** for the commonest call, with no keyword arguments: a cheaper call)
            result = method.function(obj, *args, **kwargs) if kwargs else method.function(obj, *args)
            if type(result) is CoroutineType:
                result = Deferred.fromCoroutine(result)
        except Violation as violation:
            # Refused: by the argument constraints, or by the method (a cap it keeps, a value it checks).
            self._refuse(requestId, violation, violation.code, name)
            return
        except Exception as error:
            self._methodFailed(method, error)
            self._sendFailure(requestId, error, self._tracebackText())
            return
        finally:
            _calling.reset(token)
        # (Deferred's metaclass is ABCMeta, whose isinstance is a Python call: plain values skip it.)
        if type(result) not in _PLAIN and isinstance(result, Deferred):
            self._answerLater(requestId, result, method, args, kwargs)
        else:
            self._sendAnswer(requestId, result, method)

    def _contextCallReceived(self, message: Message) -> None:
        """
        A CALL with a call context: refused if its deadline passed, else run
        as any call, with L{currentCall} giving its context and the calls its
        method makes carrying its deadline; cancelled when the deadline passes.
        """
        _, requestId, target, name, args, kwargs, milliseconds, metadata = message
        clock = self._clock
        if clock is None:
            from twisted.internet import reactor as clock
        deadline = None
        if milliseconds is not None:
            if milliseconds == 0:
                if self.starts is not None:
                    self.starts[requestId] = (name, perf_counter())
                self._sendFailure(requestId, DeadlineExceeded(f"the deadline of {name!r} passed before it ran", name))
                return
            deadline = clock.seconds() + milliseconds / 1000
        served = serving.set(CallContext(deadline, metadata, clock))
        passedOn = scope.set(Scope(deadline, None)) if deadline is not None else None
        if requestId == NO_ANSWER:
            # (read by _answerLater: a call for no answer still running at its deadline is cancelled then)
            self._unansweredDeadline = deadline
        # (read by _answerLater: the metadata is held in the context the running method keeps, charged with it)
        self._metadata = metadata
        try:
            self.callReceived(Message((CALL, requestId, target, name, args, kwargs)))
        finally:
            if passedOn is not None:
                scope.reset(passedOn)
            serving.reset(served)
            self._unansweredDeadline = None
            self._metadata = None
        if deadline is None or requestId == NO_ANSWER:
            return
        running = self._running.get(requestId)
        if running is not None and not running.called:
            timer = clock.callLater(deadline - clock.seconds(), self._deadlinePassed, requestId, running, name)
            running.addBoth(_stopTimer, timer)

    def _deadlinePassed(self, requestId: int, running: Deferred[Any], name: str) -> None:
        """A call's deadline passed while it ran: answer L{DeadlineExceeded}, then cancel it (its end is dropped)."""
        if self._running.get(requestId) is not running:
            return
        self._ended(requestId)
        self._sendFailure(requestId, DeadlineExceeded(f"{name!r} did not finish within its deadline", name))
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
        # Deferred answers (and unregisters) at once.  (setdefault: one dict
        # operation, as storing it is, that also finds an id reused.)
        if self._running.setdefault(requestId, running) is not running:
            self._duplicate(requestId, running)
            return
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

    def _duplicate(self, requestId: int, running: Deferred[Any]) -> None:
        """
        A call reuses the id of a call still running here: its answer could
        not be told from the other's, and one of the two would never be
        answered.  Drop the connection (the peer is told why); the new
        call's outcome is dropped, as a lost connection's calls' are.
        """
        running.addErrback(_dropped)
        self._connection.dropConnection(
            DuplicateRequestId(f"call {requestId} reuses the request id of a call still running here")
        )

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
        self._methodFailed(method, error)
        self._sendFailure(requestId, error, failure.getTraceback() if self.tracebacks else None)

    def _onlyFailed(self, failure: Failure, method: RemoteMethod) -> None:
        """A call for no answer failed later: log it (a refusal, or the method's failure); nothing is sent."""
        error = failure.value
        assert error is not None
        if isinstance(error, Violation):
            self._logRefusal(NO_ANSWER, error, error.code, method.name)
        else:
            self._methodFailed(method, error)

    def _sendAnswer(self, requestId: int, result: Any, method: RemoteMethod) -> None:
        if requestId == NO_ANSWER:
            if self.answered is not None:
                self.answered(NO_ANSWER, None)
            return
        if self._closed or self._connection.failure is not None:
            return
        if method.result is not None:
            violation = resultRefused(method.result, result)
            if violation is not None:
                self._refuse(requestId, violation, violation.code, method.name)
                return
        try:
            self._connection.sendObject(Message((ANSWER, requestId, result)))
        except Exception as error:
            if isinstance(error, Violation):
                error.where = "result" + error.where
            self._sendFailure(requestId, error, self._tracebackText())
            return
        if self.answered is not None:
            self.answered(requestId, None)

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

    def _methodFailed(self, method: RemoteMethod, error: BaseException) -> None:
        """Log a remote method's exception (the caller gets it too), without a traceback, within the log rate."""
        self._connection.logFailure(
            "method-failed",
            "{peer}: remote method {name} raised {error}",
            name=method.name,
            error=escape(f"{type(error).__name__}: {short_repr(error, 200)}"),
        )
