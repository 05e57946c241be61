"""The sans-IO call table (L{framing.rpc._calltable.CallTable}): ids, answers, their errors, giving up, strays."""

from __future__ import annotations

from operator import itemgetter

from twisted.trial.unittest import SynchronousTestCase

from framing import Violation
from framing.rpc._calltable import CallTable
from framing.rpc._errors import MessageRefused, RemoteError, RemoteViolation, TooManyPendingCalls, UnexpectedAnswer
from framing.rpc._incoming import failure
from framing.rpc._wire import ANSWER, CANCEL, FAIL, NO_ANSWER, Message


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
        self.assertEqual(table.giveUp(requestId), ("a", Message((CANCEL, requestId))))
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

    def test_giveUp(self) -> None:
        """
        Giving up takes the call and makes its CANCEL, its late answer then
        ignored once; not telling the peer (the connection no longer
        sends) makes none and expects no answer; a call no longer pending
        gives nothing.
        """
        table: CallTable[str] = CallTable()
        told, untold = table.add("a", "get"), table.add("b", "get")
        self.assertEqual(table.giveUp(untold, tell=False), ("b", None))
        self.assertIsInstance(table.strayAnswer(untold, "an answer"), UnexpectedAnswer)
        self.assertEqual(table.giveUp(told), ("a", Message((CANCEL, told))))
        self.assertIsNone(table.giveUp(told))
        self.assertIsNone(table.strayAnswer(told, "an answer"))
        self.assertIsInstance(table.strayAnswer(told, "an answer"), UnexpectedAnswer)

    def test_failed(self) -> None:
        """
        A FAIL gives its call's waiter and the error rebuilt from it; a
        peer refusing its own result is told naming the call and the
        peer (read only then).
        """
        table: CallTable[tuple[str, str]] = CallTable(None, itemgetter(1))
        plain, result = table.add(("a", "get"), "get"), table.add(("b", "wordy"), "wordy")
        failed = table.failed(failure(plain, KeyError("k")), _unread)
        assert failed is not None
        self.assertEqual(failed[0], ("a", "get"))
        self.assertIsInstance(failed[1], RemoteError)
        failed = table.failed(failure(result, Violation("too long", "result.text")), lambda: "there")
        assert failed is not None
        self.assertIsInstance(failed[1], RemoteViolation)
        self.assertIn("; the result of 'wordy' from there", str(failed[1]))
        self.assertRaises(UnexpectedAnswer, table.failed, failure(plain, KeyError("k")), _unread)
        given = table.add(("c", "get"), "get")
        table.giveUp(given)
        self.assertIsNone(table.failed(failure(given, KeyError("k")), _unread))
        self.assertRaises(UnexpectedAnswer, table.failed, failure(9, KeyError("k")), _unread)

    def test_refused(self) -> None:
        """A refused answer gives its call's waiter and the violation, naming the call and the peer."""
        table: CallTable[tuple[str, str]] = CallTable(None, itemgetter(1))
        requestId = table.add(("a", "big"), "big")
        refused = MessageRefused(Violation("too big", "answer"), ANSWER, requestId)
        answer = table.refused(refused, lambda: "there")
        assert answer is not None
        self.assertEqual(answer[0], ("a", "big"))
        self.assertIs(answer[1], refused.violation)
        self.assertIn("; in the answer to 'big' from there", str(answer[1]))
        self.assertRaises(UnexpectedAnswer, table.refused, MessageRefused(Violation("x"), FAIL, 5), _unread)

    def test_shellsAskTheTable(self) -> None:
        """Neither shell rebuilds a FAIL's error, words the call's name into one or makes a CANCEL itself."""
        import inspect

        import framing.rpc._session
        import protocols.rpc._calls

        for module in (framing.rpc._session, protocols.rpc._calls):
            source = inspect.getsource(module)
            for written in ("rebuild(", "in the answer to", "the result of", "(CANCEL, ", "expectLateAnswer"):
                self.assertNotIn(written, source, module.__name__)


def _unread() -> str:
    raise AssertionError("the peer's name was read")
