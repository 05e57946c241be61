# -*- test-case-name: tests.framing.rpc.test_calltable -*-
"""The sans-IO call table (L{framing.rpc._calltable.CallTable}): calls made, answers, errors, giving up, strays."""

from __future__ import annotations

from operator import itemgetter

from twisted.trial.unittest import SynchronousTestCase

from framing import Violation
from framing.rpc._calltable import CallTable
from framing.rpc._drain import GoingAway
from framing.rpc._errors import (
    CallLost,
    DeadReferenceError,
    MessageRefused,
    RemoteError,
    RemoteViolation,
    TooManyPendingCalls,
    UnexpectedAnswer,
)
from framing.rpc._incoming import failure
from framing.rpc._wire import ANSWER, CALL, CANCEL, FAIL, NO_ANSWER, Message


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
        """
        Neither shell numbers a call, builds a CALL's fields, refuses a call
        after GOAWAY or for its name, rebuilds a FAIL's error, words the
        call's name into one, makes a CANCEL, fails the calls at the end or
        tells its extension of a failed call itself.
        """
        import inspect

        import framing.rpc._session
        import protocols.rpc._calls
        import protocols.rpc._drain

        written = (
            "rebuild(",
            "in the answer to",
            "the result of",
            "(CANCEL, ",
            "(CALL, ",
            "NO_ANSWER, target",
            "GoingAway(",
            "a method name is a str",
            "callLost(",
            ".callFailed(",
            "lastRequestId",
            "takeAll(",
        )
        for module in (framing.rpc._session, protocols.rpc._calls, protocols.rpc._drain):
            source = inspect.getsource(module)
            for text in written:
                self.assertNotIn(text, source, module.__name__)


class MakingCallsTests(SynchronousTestCase):
    """L{CallTable.call} and L{CallTable.callOnly}: a CALL's fields, and the refusals before one is made."""

    def test_callFields(self) -> None:
        """A call's fields are the CALL's, in wire order, its request id the one kept."""
        table: CallTable[str] = CallTable()
        self.assertEqual(table.call("a", 3, "get", None, (1, "b")), (CALL, 1, 3, "get", None, 1, "b"))
        self.assertEqual(table.call("b", 0, "put", {"k": 1}, ()), (CALL, 2, 0, "put", {"k": 1}))
        self.assertEqual(dict(table), {1: "a", 2: "b"})
        self.assertEqual(table.add("c", "get"), 3)

    def test_callOnlyKeepsNothing(self) -> None:
        """A call for no answer has request id 0, is kept nowhere and numbers nothing."""
        table: CallTable[str] = CallTable(maxPending=0)
        self.assertEqual(table.callOnly(3, "log", None, ("x",)), (CALL, NO_ANSWER, 3, "log", None, "x"))
        self.assertEqual((len(table), table.lastRequestId), (0, 0))

    def test_nameNotStr(self) -> None:
        """A method name that is no str is a TypeError; nothing is kept nor numbered."""
        table: CallTable[str] = CallTable()
        error = self.assertRaises(TypeError, table.call, "a", 0, b"get", None, ())
        self.assertEqual(str(error), "a method name is a str, not bytes")
        self.assertRaises(TypeError, table.callOnly, 0, 7, None, ())
        self.assertEqual((len(table), table.lastRequestId), (0, 0))

    def test_stop(self) -> None:
        """
        Once stopped, every new call is refused with the error and text
        given (nothing kept nor numbered, a name that is no str still a
        TypeError); the calls in flight are still answered.
        """
        table: CallTable[str] = CallTable()
        first = table.add("a", "get")
        self.assertFalse(table.stopped)
        table.stop("the connection to there is draining (received GOAWAY)", GoingAway)
        self.assertTrue(table.stopped)
        error = self.assertRaises(GoingAway, table.call, "b", 0, "get", None, ())
        self.assertEqual(str(error), "cannot call 'get': the connection to there is draining (received GOAWAY)")
        self.assertIsInstance(error, DeadReferenceError)
        self.assertRaises(GoingAway, table.callOnly, 0, "log", None, ())
        self.assertRaises(TypeError, table.call, "b", 0, None, None, ())
        self.assertEqual(table.lastRequestId, 1)
        self.assertEqual(table.pop(first), "a")

    def test_lost(self) -> None:
        """
        The end fails every pending call, in call order, with the reason
        naming the call and the peer (read once, only if a call waits);
        later calls are refused with a DeadReferenceError saying why.
        """
        table: CallTable[tuple[str, str]] = CallTable(None, itemgetter(1))
        for waiter in ("a", "b"):
            table.call((waiter, f"m{waiter}"), 0, f"m{waiter}", None, ())
        reason = ConnectionError("gone")
        peers = iter(["there"])
        lost = table.lost(reason, lambda: next(peers))
        self.assertEqual([entry for entry, _ in lost], [("a", "ma"), ("b", "mb")])
        for (_, name), error in lost:
            self.assertIsInstance(error, CallLost)
            self.assertIsInstance(error, ConnectionError)
            self.assertEqual(str(error), f"gone (while calling {name!r} on there)")
        self.assertEqual(len(table), 0)
        error = self.assertRaises(DeadReferenceError, table.call, ("c", "mc"), 0, "mc", None, ())
        self.assertEqual(str(error), "cannot call 'mc': the connection ended: gone")
        self.assertNotIsInstance(error, GoingAway)
        self.assertEqual(table.lost(reason, _unread), [])

    def test_callFailedTold(self) -> None:
        """
        callFailed is told of a call failed by a FAIL or a refused answer
        (not cancelled) and of one given up (cancelled, CANCEL or not);
        not of an answer, a late answer ignored, nor the end.
        """
        told: list[tuple[int, bool]] = []
        table: CallTable[str] = CallTable(callFailed=lambda requestId, cancelled: told.append((requestId, cancelled)))
        answered, failed, refused, given, untold, left = (table.add(w, "get") for w in "abcdef")
        table.pop(answered)
        table.failed(failure(failed, KeyError("k")), _unread)
        table.refused(MessageRefused(Violation("too big", "answer"), ANSWER, refused), lambda: "there")
        table.giveUp(given)
        table.giveUp(untold, tell=False)
        self.assertIsNone(table.failed(failure(given, KeyError("late")), _unread))
        table.lost(ConnectionError("gone"), lambda: "there")
        self.assertEqual(told, [(failed, False), (refused, False), (given, True), (untold, True)])
        self.assertNotIn(left, [requestId for requestId, _ in told])


def _unread() -> str:
    raise AssertionError("the peer's name was read")
