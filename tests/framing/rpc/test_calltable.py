"""The sans-IO call table (L{framing.rpc._calltable.CallTable}): ids, matching answers, stray and late ones."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._calltable import CallTable
from framing.rpc._errors import TooManyPendingCalls, UnexpectedAnswer
from framing.rpc._wire import NO_ANSWER


class CallTableTests(SynchronousTestCase):
    """A L{CallTable} numbers calls, gives each waiter back once, and tells late answers from stray ones."""

    def test_numbersFromOne(self) -> None:
        """Request ids start at 1 (0 is NO_ANSWER) and go up by one per call."""
        table: CallTable[str] = CallTable()
        ids = [table.add(f"waiter {n}", "get") for n in range(3)]
        self.assertEqual(ids, [1, 2, 3])
        self.assertNotIn(NO_ANSWER, ids)
        self.assertEqual(table.lastRequestId, 3)
        self.assertEqual(len(table), 3)

    def test_takeGivesTheWaiterOnce(self) -> None:
        """An answer's id gives back that call's waiter, in any order, and only the first time."""
        table: CallTable[str] = CallTable()
        first, second = table.add("a", "get"), table.add("b", "put")
        self.assertEqual(table.take(second), "b")
        self.assertEqual(table.take(first), "a")
        self.assertIsNone(table.take(first))
        self.assertEqual(len(table), 0)

    def test_maxPending(self) -> None:
        """Past maxPending a call is refused with TooManyPendingCalls and nothing is kept nor numbered."""
        table: CallTable[str] = CallTable(maxPending=2)
        table.add("a", "get")
        table.add("b", "get")
        error = self.assertRaises(TooManyPendingCalls, table.add, "c", "slow")
        self.assertIn("'slow'", str(error))
        self.assertEqual((len(table), table.lastRequestId), (2, 2))
        table.take(1)
        self.assertEqual(table.add("c", "get"), 3)

    def test_answerNeverAsked(self) -> None:
        """An answer to an id never given is an UnexpectedAnswer saying so."""
        table: CallTable[str] = CallTable()
        table.add("a", "get")
        error = table.strayAnswer(7, "an answer")
        self.assertIsInstance(error, UnexpectedAnswer)
        self.assertIn("was never made", str(error))

    def test_answeredTwice(self) -> None:
        """A second answer to a call already answered is an UnexpectedAnswer saying so."""
        table: CallTable[str] = CallTable()
        requestId = table.add("a", "get")
        table.take(requestId)
        error = table.strayAnswer(requestId, "a failure")
        self.assertIsInstance(error, UnexpectedAnswer)
        self.assertIn("answered already", str(error))

    def test_oneLateAnswerPerCallGivenUp(self) -> None:
        """A call given up on may still be answered once (ignored); a second such answer is unexpected."""
        table: CallTable[str] = CallTable()
        requestId = table.add("a", "get")
        table.take(requestId)
        table.expectLateAnswer()
        self.assertIsNone(table.strayAnswer(requestId, "an answer"))
        self.assertIsInstance(table.strayAnswer(requestId, "an answer"), UnexpectedAnswer)

    def test_takeAll(self) -> None:
        """takeAll gives every pending waiter in call order and leaves none pending."""
        table: CallTable[str] = CallTable()
        for waiter in "abc":
            table.add(waiter, "get")
        table.take(2)
        self.assertEqual(table.takeAll(), ["a", "c"])
        self.assertEqual(len(table), 0)
        self.assertIsNone(table.take(1))
