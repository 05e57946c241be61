# -*- test-case-name: tests.framing.rpc.test_calltable,tests.protocols.test_blocking_cost -*-
"""The calls one side made that wait for answers, whatever waits for them: request ids and matching.

Contract: a L{CallTable} numbers calls from 1 (0 is
L{framing.rpc._wire.NO_ANSWER}), keeps what waits for each (a Deferred, a
thread's slot, a future: opaque here) by request id, and gives each back
once when its answer or end comes.  An answer to a call not pending is
ignored once per call given up on (L{CallTable.expectLateAnswer}); any
other is the peer's L{framing.rpc._errors.UnexpectedAnswer}
(L{CallTable.strayAnswer}).  Nothing here sends, reads, sleeps or reads a
clock.

Cost: adding, matching and giving up a call are O(1) whatever is in flight.

Design: docs/design/rpc-core.md
"""

from __future__ import annotations

from typing import TypeVar

from ._errors import TooManyPendingCalls, UnexpectedAnswer

Waiter = TypeVar("Waiter")


class CallTable(dict[int, Waiter]):
    """
    The pending calls of one connection: a dict of each pending call's
    waiter by request id, which numbers the calls (L{add}) and judges
    answers to none (L{strayAnswer}).  Being the dict itself, its length
    (how many calls wait) and a waiter's C{pop(requestId, None)} (L{take}
    written in line, on a client's per-answer path) are single C operations:
    no method of this class runs for them.  Only L{add} puts a call in.

    @ivar maxPending: most calls that may wait at once (C{None}: no bound);
        L{add} past it raises L{TooManyPendingCalls}.
    @ivar lastRequestId: the request id given last (0 before the first call).
    """

    __slots__ = ("maxPending", "lastRequestId", "_lateAnswers")

    def __init__(self, maxPending: int | None = None) -> None:
        """@param maxPending: see L{maxPending}."""
        super().__init__()
        self.maxPending = maxPending
        self.lastRequestId = 0
        # Answers still expected for calls given up on: one per such call.
        self._lateAnswers = 0

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
        The waiter of call C{requestId}, no longer pending (its answer came,
        or it is being given up or was never sent); C{None} if it is not
        pending (see L{strayAnswer}).
        """
        return self.pop(requestId, None)

    def expectLateAnswer(self) -> None:
        """A call taken without its answer (cancelled, timed out) was told to the peer: its answer may come, once."""
        self._lateAnswers += 1

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
