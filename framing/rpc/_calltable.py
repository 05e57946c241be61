# -*- test-case-name: tests.framing.rpc.test_calltable,tests.protocols.test_blocking_cost -*-
"""The calls one side made that wait for answers, whatever waits for them: request ids, matching, giving up.

Contract: a L{CallTable} numbers calls from 1 (0 is
L{framing.rpc._wire.NO_ANSWER}), keeps what waits for each (a Deferred, a
thread's slot, a future: opaque here, its method's name read by the
table's C{nameOf}) by request id, and gives each back once when its answer
or end comes.  It holds the answering rules every shell follows: an
ANSWER, a FAIL or a refused answer is matched to its call (an ANSWER by
the dict's own C{pop}, L{CallTable.failed}, L{CallTable.refused}); a
FAIL's error is rebuilt (L{framing.rpc._errors.rebuild}) and a refused
result or answer names the call and the peer; giving up a call
(L{CallTable.giveUp}) makes its CANCEL, and its late answer is then
ignored once; any other answer to a call not pending is the peer's
L{framing.rpc._errors.UnexpectedAnswer} (L{CallTable.strayAnswer}).
Nothing here sends, reads, sleeps or reads a clock.

Cost: adding, matching and giving up a call are O(1) whatever is in flight.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from framing._errors import Violation, short_repr

from ._errors import VIOLATION, MessageRefused, TooManyPendingCalls, UnexpectedAnswer, rebuild
from ._wire import CANCEL, Message

Waiter = TypeVar("Waiter")


def _unnamed(waiter: object) -> str:
    return "a call"


class CallTable(dict[int, Waiter]):
    """
    The pending calls of one connection: a dict of each pending call's
    waiter by request id, which numbers the calls (L{add}), matches FAILs
    and refusals (L{failed}, L{refused}), gives calls up (L{giveUp}) and
    judges answers to none (L{strayAnswer}).  Being the dict itself, its
    length (how many calls wait) and a waiter's C{pop(requestId, None)}
    (an ANSWER's match, written in line on each shell's per-answer path,
    L{strayAnswer} asked when it misses) are single C operations: no
    method of this class runs for them.  Only
    L{add} puts a call in.

    @ivar maxPending: most calls that may wait at once (C{None}: no bound);
        L{add} past it raises L{TooManyPendingCalls}.
    @ivar lastRequestId: the request id given last (0 before the first call).
    """

    __slots__ = ("maxPending", "lastRequestId", "_lateAnswers", "_nameOf")

    def __init__(self, maxPending: int | None = None, nameOf: Callable[[Waiter], str] = _unnamed) -> None:
        """
        @param maxPending: see L{maxPending}.
        @param nameOf: a waiter's method name, for the errors that name the
            call (read only on a FAIL's or a refusal's path).
        """
        super().__init__()
        self.maxPending = maxPending
        self.lastRequestId = 0
        # Answers still expected for calls given up on: one per such call.
        self._lateAnswers = 0
        self._nameOf = nameOf

    def add(self, waiter: Waiter, name: str) -> int:
        """
        Number a new call to method C{name} and keep C{waiter} for its answer.

        @return: the call's request id, to send in its CALL.
        @raise TooManyPendingCalls: L{maxPending} calls already wait (nothing is kept).
        """
        maxPending = self.maxPending
        if maxPending is not None and len(self) >= maxPending:
            raise TooManyPendingCalls(f"cannot call {name!r}: {len(self)} calls already wait for answers")
        requestId = self.lastRequestId = self.lastRequestId + 1
        self[requestId] = waiter
        return requestId

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
        return waiter, violation

    def giveUp(self, requestId: int, tell: bool = True) -> tuple[Waiter, Message | None] | None:
        """
        Give up call C{requestId} without its answer (cancelled, timed out,
        past its deadline): its waiter, no longer pending, and, if C{tell}
        (the connection still sends), the CANCEL to send, after which its
        late answer is ignored once.  C{None} if it is not pending (its
        answer came meanwhile).
        """
        waiter = self.pop(requestId, None)
        if waiter is None:
            return None
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

    def takeAll(self) -> list[Waiter]:
        """Every pending call's waiter, in call order; none is pending any more (the connection ended)."""
        waiters = list(self.values())
        self.clear()
        return waiters
