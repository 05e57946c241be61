# -*- test-case-name: tests.framing.rpc.test_calltable,tests.protocols.rpc.test_calls_alike -*-
"""The calls one side makes that wait for answers, whatever waits for them: every rule of making a call.

Contract: a L{CallTable} makes each call (L{CallTable.call}: its request
id, from 1, and the CALL's fields; L{CallTable.callOnly}, id 0, for no
answer) or refuses it: once calls stopped (L{CallTable.stop}:
L{framing.rpc._drain.GoingAway} after GOAWAY, a
L{framing.rpc._errors.DeadReferenceError} after the end), for a name that
is no C{str}, past C{maxPending}.  It keeps each call's waiter (opaque
here) by request id and gives it back once: for its ANSWER (the dict's own
C{pop}), its FAIL (L{CallTable.failed}), a refused answer
(L{CallTable.refused}), giving it up with its CANCEL (L{CallTable.giveUp})
or the end (L{CallTable.lost}), with the error naming the call.  An
answer to no call is an L{framing.rpc._errors.UnexpectedAnswer} ending the
connection, but for the one late answer of a call given up
(L{CallTable.strayAnswer}; C{docs/wire-format.md} 12.3).  Its
C{callFailed} hears of each call the peer failed or the caller gave up.
No I/O, no clock: a shell keeps its waiters, timers, log and writes.

Cost: making, matching, failing and giving up a call are O(1) whatever is
in flight: a call is one method, an ANSWER one C{pop}.

Design: docs/design/same-bytes.md
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from framing._errors import Violation, short_repr

from ._errors import (
    VIOLATION,
    DeadReferenceError,
    MessageRefused,
    TooManyPendingCalls,
    UnexpectedAnswer,
    callLost,
    rebuild,
)
from ._wire import CALL, CANCEL, NO_ANSWER, Message

Waiter = TypeVar("Waiter")

CallFailed = Callable[[int, bool], object]
"""C{callFailed(requestId, cancelled)}: a call failed by the peer's word, or was given up (C{cancelled})."""


def _unnamed(waiter: object) -> str:
    return "a call"


class CallTable(dict[int, Waiter]):
    """
    The calls of one connection waiting for answers: a dict of each
    pending call's waiter by request id, which makes the calls (L{call},
    L{callOnly}; L{stop} refuses them from then on), matches FAILs and
    refusals (L{failed}, L{refused}), gives calls up (L{giveUp}), ends them
    all (L{lost}) and judges answers to none (L{strayAnswer}).  Being the
    dict itself, its length (how many calls wait) and a waiter's
    C{pop(requestId, None)} (an ANSWER's match, written in line on each
    shell's per-answer path, L{strayAnswer} asked when it misses) are
    single C operations: no method of this class runs for them.  Only
    L{call} (and L{add}) puts a call in.

    @ivar maxPending: most calls that may wait at once (C{None}: no bound);
        L{call} past it raises L{TooManyPendingCalls}.
    @ivar lastRequestId: the request id given last (0 before the first call).
    @ivar callFailed: told C{(requestId, cancelled)} of each call failed by
        a FAIL or a refused answer (C{False}) or given up (C{True}); C{None}: nobody.
    """

    __slots__ = ("maxPending", "lastRequestId", "callFailed", "_lateAnswers", "_nameOf", "_refusal", "_named")

    def __init__(
        self,
        maxPending: int | None = None,
        nameOf: Callable[[Waiter], str] = _unnamed,
        callFailed: CallFailed | None = None,
    ) -> None:
        """
        @param maxPending: see L{maxPending}.
        @param nameOf: a waiter's method name, for the errors that name the
            call (read only on a FAIL's, a refusal's or the end's path).
        @param callFailed: see L{callFailed}.
        """
        super().__init__()
        self.maxPending = maxPending
        self.lastRequestId = 0
        self.callFailed = callFailed
        # Answers still expected for calls given up on: one per such call.
        self._lateAnswers = 0
        self._nameOf = nameOf
        # Why no new call is made (stop): the error's type and the text after the method's name; None: calls are.
        self._refusal: tuple[type[DeadReferenceError], str] | None = None
        # The type a method's name must be for a call to be made: str, or None once calls stopped (no name is of
        # it). One test per call for both refusals: type(name) is not self._named.
        self._named: type | None = str

    def call(self, waiter: Waiter, target: int, name: str, sent: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """
        Make a call to method C{name} of the peer's export C{target}: number
        it and keep C{waiter} for its answer.  C{sent} is the CALL's
        keyword-arguments place (L{framing.rpc._context.sentWith}'s),
        C{args} its positional arguments.

        @return: the CALL's fields, C{(CALL, requestId, target, name, sent,
            *args)}, for the shell to encode (as a L{Message}) and send whole;
            if that fails, it L{take}s the call back.
        @raise DeadReferenceError: calls stopped (L{stop}; a L{GoingAway} after GOAWAY); nothing is kept.
        @raise TypeError: C{name} is no C{str}.
        @raise TooManyPendingCalls: L{maxPending} calls already wait.
        """
        if type(name) is not self._named:
            raise self._refused(name)
        if self.maxPending is not None and len(self) >= self.maxPending:
            raise TooManyPendingCalls(f"cannot call {name!r}: {len(self)} calls already wait for answers")
        requestId = self.lastRequestId = self.lastRequestId + 1
        self[requestId] = waiter
        # (a tuple added to args, not (..., *args): no list built, grown and copied into a tuple per call)
        return (CALL, requestId, target, name, sent) + args

    def callOnly(self, target: int, name: str, sent: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """
        A call to method C{name} of export C{target} for no answer (request
        id L{NO_ANSWER}: nothing is kept, nothing comes back): its CALL's
        fields, as L{call}'s, which it raises as (but L{TooManyPendingCalls}).
        """
        if type(name) is not self._named:
            raise self._refused(name)
        return (CALL, NO_ANSWER, target, name, sent) + args

    def add(self, waiter: Waiter, name: str) -> int:
        """
        L{call} with no CALL to make here: number a new call to method
        C{name} and keep C{waiter} for its answer; its request id.
        """
        requestId: int = self.call(waiter, 0, name, None, ())[1]
        return requestId

    def stop(self, why: str, error: type[DeadReferenceError] = DeadReferenceError) -> None:
        """
        Make no new call from now (those waiting go on): each is refused
        with C{error("cannot call 'NAME': WHY")}, a L{GoingAway} once either
        end sent GOAWAY (the call may go to another connection), a
        L{DeadReferenceError} once the connection ended (L{lost}).
        """
        self._refusal = (error, why)
        self._named = None

    @property
    def stopped(self) -> bool:
        """Whether calls are refused (L{stop})."""
        return self._refusal is not None

    def _refused(self, name: Any) -> Exception:
        """Why L{call} or L{callOnly} makes no call to C{name}: its name is no str, or calls stopped."""
        if type(name) is not str:
            return TypeError(f"a method name is a str, not {type(name).__name__}")
        assert self._refusal is not None
        error, why = self._refusal
        return error(f"cannot call {name!r}: {why}")

    def take(self, requestId: int) -> Waiter | None:
        """
        The waiter of call C{requestId}, no longer pending (it was never
        sent); C{None} if it is not pending.  (A call given up is L{giveUp}'s.)
        """
        return self.pop(requestId, None)

    def failed(self, message: Message, peer: Callable[[], str]) -> tuple[Waiter, BaseException] | None:
        """
        A FAIL: its call's waiter, no longer pending, and the error to fail
        it with, rebuilt from the message (L{framing.rpc._errors.rebuild});
        a peer refusing its own result (a
        L{framing.rpc._errors.RemoteViolation} at C{"result..."}) is told
        naming the call and C{peer()}.  C{None} if no call waits but the
        one late answer expected for a call given up on (ignore it).

        @raise UnexpectedAnswer: no call waits and none was given up (see
            L{strayAnswer}): drop the connection with it.
        """
        _, requestId, typeName, text, remoteTraceback, details = message
        waiter = self.pop(requestId, None)
        if waiter is None:
            self._notPending(requestId, "a failure")
            return None
        error = rebuild(typeName, text, remoteTraceback, details)
        if typeName == VIOLATION:  # (a RemoteViolation, then: told so, with no call per FAIL)
            violation: Any = error
            if violation.where.startswith("result"):
                violation.message += f"; the result of {short_repr(self._nameOf(waiter))} from {peer()}"
        if self.callFailed is not None:
            self.callFailed(requestId, False)
        return waiter, error

    def refused(self, refused: MessageRefused, peer: Callable[[], str]) -> tuple[Waiter, Violation] | None:
        """
        An ANSWER or FAIL this side refused: its call's waiter and the
        violation to fail it with, which names the call and C{peer()}.
        C{None} and raises as L{failed}.
        """
        waiter = self.pop(refused.requestId, None)
        if waiter is None:
            self._notPending(refused.requestId, "a refused answer")
            return None
        violation = refused.violation
        violation.message += f"; in the answer to {short_repr(self._nameOf(waiter))} from {peer()}"
        if self.callFailed is not None:
            self.callFailed(refused.requestId, False)
        return waiter, violation

    def giveUp(self, requestId: int, tell: bool = True) -> tuple[Waiter, Message | None] | None:
        """
        Give up call C{requestId} without its answer (cancelled, timed out,
        past its deadline): its waiter, no longer pending, and, if C{tell}
        (the connection still sends), the CANCEL to send, after which its
        late answer is ignored once; L{callFailed} is told (cancelled).
        C{None} if it is not pending (its answer came meanwhile).
        """
        waiter = self.pop(requestId, None)
        if waiter is None:
            return None
        if self.callFailed is not None:
            self.callFailed(requestId, True)
        if not tell:
            return waiter, None
        self._lateAnswers += 1
        return waiter, Message((CANCEL, requestId))

    def _notPending(self, requestId: int, what: str) -> None:
        """L{strayAnswer}'s verdict on C{what} for C{requestId}, raised if it is an L{UnexpectedAnswer}."""
        unexpected = self.strayAnswer(requestId, what)
        if unexpected is not None:
            raise unexpected

    def strayAnswer(self, requestId: int, what: str) -> UnexpectedAnswer | None:
        """
        The peer sent C{what} (C{"an answer"}, C{"a failure"}) for
        C{requestId}, which is not pending: C{None} if it is the one late
        answer expected for a call given up on (ignore it); otherwise the
        L{UnexpectedAnswer} to drop the connection with.
        """
        made = 0 < requestId <= self.lastRequestId
        if self._lateAnswers and made:
            self._lateAnswers -= 1
            return None
        how = "was answered already" if made else "was never made"
        return UnexpectedAnswer(f"{what} to request {requestId}, which {how}")

    def lost(self, reason: BaseException, peer: Callable[[], str]) -> list[tuple[Waiter, BaseException]]:
        """
        The connection ended with C{reason}: every pending call's waiter, in
        call order, and the error to fail it with (C{reason} naming the call
        and C{peer()}, read only if a call waits:
        L{framing.rpc._errors.callLost}); none is pending any more, and no
        new call is made (L{stop}: a L{DeadReferenceError} saying C{reason}).
        L{callFailed} is not told: the end is everybody's.
        """
        self.stop(f"the connection ended: {reason}")
        if not self:
            return []
        name, where = self._nameOf, peer()
        return [(waiter, callLost(reason, name(waiter), where)) for waiter in self.takeAll()]

    def takeAll(self) -> list[Waiter]:
        """Every pending call's waiter, in call order; none is pending any more (see L{lost})."""
        waiters = list(self.values())
        self.clear()
        return waiters
