# -*- test-case-name: tests.framing.rpc.test_incoming -*-
"""Tests for framing.rpc._incoming's rules of admitting and answering the peer's calls, which every shell shares."""

from __future__ import annotations

import inspect
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Violation
from framing._ledger import Ledger
from framing.rpc._errors import (
    DeadlineExceeded,
    DuplicateRequestId,
    NoSuchMethod,
    NoSuchObject,
    TooManyRunningCalls,
    WrongArguments,
    describe,
)
from framing.rpc._incoming import (
    CallAdmission,
    IncomingCalls,
    failure,
    overDeadline,
    refusalCode,
    resultRefused,
    withoutDetails,
)
from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import remote
from framing.rpc._wire import CALL, FAIL, NO_ANSWER, Message
from framing.slicing._constraints import Integer

REUSES = "reuses the request id of a call still running here"


class Target(Referenceable):
    """An exported object: one remote method, one that is not."""

    @remote
    def add(self, a: int, b: int) -> int:
        return a + b

    def hidden(self) -> None:
        """Not remote."""


def admission(maxRunning: int | None = 2) -> CallAdmission[str]:
    """A L{CallAdmission} exporting a L{Target} as 0 and a plain object (no remote methods) as 1."""
    return CallAdmission({0: [Target(), 0], 1: [object(), 1]}, maxRunning)


class AdmissionTests(SynchronousTestCase):
    """L{CallAdmission.admit}: the one rule admitting the peer's CALL before its method runs, on every shell."""

    def refusal(self, admitted: CallAdmission[Any], *call: Any) -> Exception:
        """What C{admit(*call)} raised (it must raise)."""
        with self.assertRaises(Exception) as raised:
            admitted.admit(*call)
        return raised.exception

    def test_admitted(self) -> None:
        """A call that passes is its exported object and its remote method."""
        calls = admission()
        obj, method = calls.admit(7, 0, "add", (1, 2), None)
        self.assertIs(obj, calls._exports[0][0])
        self.assertIs(method, Target.remoteMethods["add"])
        self.assertEqual(calls.admit(8, 0, "add", (1,), {"b": 2}, 1500), (obj, method))

    def test_refusals(self) -> None:
        """Each refusal is raised as its own error, with the text every shell sends."""
        calls = admission()
        missing = self.refusal(calls, 7, 9, "add", (1, 2), None)
        self.assertIsInstance(missing, NoSuchObject)
        self.assertEqual(describe(missing)[1], "no object is exported as 9 on this connection")
        self.assertIsInstance(self.refusal(calls, 7, 0, "hidden", (), None), NoSuchMethod)
        self.assertIn("did you mean 'add'?", str(self.refusal(calls, 7, 0, "adds", (1, 2), None)))
        self.assertIsInstance(self.refusal(calls, 7, 1, "add", (1, 2), None), NoSuchMethod)
        self.assertIsInstance(self.refusal(calls, 7, 0, "add", (1,), None), WrongArguments)
        violation = self.refusal(calls, 7, 0, "add", ("one", 2), None)
        self.assertIsInstance(violation, Violation)
        self.assertEqual(violation.where, "args[0]")  # type: ignore[attr-defined]
        passed = self.refusal(calls, 7, 0, "add", (1, 2), None, 0)
        self.assertIsInstance(passed, DeadlineExceeded)
        self.assertEqual(str(passed), "the deadline of 'add' passed before it ran")

    def test_runningBound(self) -> None:
        """Past C{maxRunning} calls running, with or without an answer, a call is refused before its check."""
        calls = admission(maxRunning=2)
        calls._running[3] = "running"
        calls._unanswered = 1
        self.assertIsInstance(self.refusal(calls, 7, 0, "add", ("not", "checked"), None), TooManyRunningCalls)
        calls._unanswered = 0
        calls.admit(7, 0, "add", (1, 2), None)
        calls.maxRunning = None
        calls._running.update({n: "running" for n in range(10, 20)})
        calls.admit(7, 0, "add", (1, 2), None)

    def test_reusedRunningIdFirst(self) -> None:
        """
        A request id of a call running here is refused before anything else
        (a FAIL of that id would answer the running call): L{DuplicateRequestId},
        which ends the connection; an id no call runs under, or 0, is not.
        """
        calls = admission(maxRunning=None)
        calls._running[7] = "running"
        for call in [(7, 0, "add", (1, 2), None), (7, 9, "nope", (), None), (7, 0, "add", (), None, 0)]:
            refused = self.refusal(calls, *call)
            self.assertIsInstance(refused, DuplicateRequestId)
            self.assertEqual(str(refused), f"{DuplicateRequestId.code}: call 7 {REUSES}")
        calls._unanswered = 1
        calls.admit(NO_ANSWER, 0, "add", (1, 2), None)
        calls.admit(8, 0, "add", (1, 2), None)

    def test_deadlineBeforeLookups(self) -> None:
        """A passed deadline is refused before the object is looked for; any other deadline is no refusal."""
        calls = admission()
        self.assertIsInstance(self.refusal(calls, 7, 9, "nope", (), None, 0), DeadlineExceeded)
        calls.admit(7, 0, "add", (1, 2), None, 1)

    def test_checksOwnBug(self) -> None:
        """An argument check's own exception is raised as it is, on either path: the shells answer the call with it."""
        calls = admission()
        method = Target.remoteMethods["add"]

        def broken(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
            raise KeyError("a bug")

        for part, args, kwargs in [("checkValues", (1, 2), None), ("checkArguments", (1,), {"b": 2})]:
            original = getattr(method, part)
            setattr(method, part, broken)
            try:
                self.assertIsInstance(self.refusal(calls, 7, 0, "add", args, kwargs), KeyError)
            finally:
                setattr(method, part, original)

    def test_signatureSkippedWithinCounts(self) -> None:
        """
        A call by position within the method's argument counts is checked by
        its constraints alone (the signature's check, which binds, would pass);
        any other by the whole check, the signature's first.
        """
        calls = admission()
        method = Target.remoteMethods["add"]
        self.assertEqual((method.fewest, method.most), (2, 2))
        checked: list[str] = []
        whole, values = method.checkArguments, method.checkValues
        assert whole is not None and values is not None

        def wholeCheck(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
            checked.append("whole")
            whole(args, kwargs)

        def valuesCheck(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
            checked.append("values")
            values(args, kwargs)

        method.checkArguments, method.checkValues = wholeCheck, valuesCheck
        try:
            calls.admit(7, 0, "add", (1, 2), None)
            calls.admit(7, 0, "add", (1,), {"b": 2})
            self.assertIsInstance(self.refusal(calls, 7, 0, "add", (1, 2, 3), None), WrongArguments)
            self.assertIsInstance(self.refusal(calls, 7, 0, "add", (1, "two"), None), Violation)
        finally:
            method.checkArguments, method.checkValues = whole, values
        self.assertEqual(checked, ["values", "whole", "whole", "values"])

    def test_refusalCode(self) -> None:
        """Refusals count under their codes; a passed deadline and a check's bug are not the peer's fault."""
        self.assertEqual(refusalCode(NoSuchObject("x")), "no-such-object")
        self.assertEqual(refusalCode(NoSuchMethod("x")), "no-such-method")
        self.assertEqual(refusalCode(TooManyRunningCalls(3)), "too-many-running-calls")
        self.assertEqual(refusalCode(WrongArguments("x")), "wrong-arguments")
        self.assertIsNone(refusalCode(DeadlineExceeded("late", "add")))
        self.assertIsNone(refusalCode(KeyError("a bug")))

    def test_shellsAreTheRule(self) -> None:
        """
        The Twisted CallRunner and the clients' IncomingCalls are both a
        CallAdmission, and neither looks up a method or counts its running
        calls against the bound itself.
        """
        import protocols.rpc._answering

        self.assertTrue(issubclass(protocols.rpc._answering.CallRunner, CallAdmission))
        self.assertTrue(issubclass(IncomingCalls, CallAdmission))
        for source in (inspect.getsource(protocols.rpc._answering), inspect.getsource(IncomingCalls)):
            self.assertNotIn("remoteMethods", source)
            self.assertNotIn(">= self.maxRunning", source)
            self.assertNotIn("noSuchObject", source)


class AnsweringRulesTests(SynchronousTestCase):
    def test_resultRefused(self) -> None:
        """A result its constraint refuses is the Violation, named at "result"; one it takes, None."""
        constraint = Integer()
        self.assertIsNone(resultRefused(constraint, 3))
        violation = resultRefused(constraint, "three")
        assert violation is not None
        self.assertIsInstance(violation, Violation)
        self.assertTrue(violation.where.startswith("result"), violation.where)

    def test_failure(self) -> None:
        """A FAIL names the error's wire type, its text, the traceback given and its details."""
        error = NoSuchMethod("no method 'x'")
        message = failure(5, error, "Traceback ...")
        self.assertEqual(message[:5], (FAIL, 5, "NoSuchMethod", "no method 'x'", "Traceback ..."))
        self.assertIsNone(failure(5, error)[4])

    def test_withoutDetails(self) -> None:
        """The FAIL whose details cannot be sent keeps all but them."""
        message = Message((FAIL, 9, "T", "text", "tb", {"a": object()}))
        self.assertEqual(withoutDetails(message), Message((FAIL, 9, "T", "text", "tb", None)))

    def test_shellsShareTheRules(self) -> None:
        """The Twisted CallRunner and the clients' session build no FAIL and check no result themselves."""
        import framing.rpc._session
        import protocols.rpc._answering

        for module in (framing.rpc._session, protocols.rpc._answering):
            source = inspect.getsource(module)
            self.assertNotIn("((FAIL,", source, module.__name__)
            self.assertNotIn(".validate(result)", source, module.__name__)
        self.assertNotIn("class IncomingCalls", inspect.getsource(protocols.rpc._answering))


class StoppingTests(SynchronousTestCase):
    """L{IncomingCalls.cancelled} and L{IncomingCalls.expired}: a call the peer gave up on, or past its deadline."""

    def calls(self) -> IncomingCalls:
        from framing.rpc._exports import ExportTable

        return IncomingCalls(ExportTable(Target()), maxRunning=None)

    def test_milliseconds(self) -> None:
        """A call keeps its call context's deadline, in milliseconds as read (none without a context)."""
        calls = self.calls()
        self.assertIsNone(calls.received(Message((CALL, 1, 0, "add", (1, 2), None))))
        self.assertIsNone(calls.received(Message((CALL, 2, 0, "add", (1, 2), None, 50, None))))
        self.assertEqual([call.milliseconds for call in calls.take()], [None, 50])

    def test_expired(self) -> None:
        """
        A call whose deadline passed while it runs is answered with the FAIL
        every shell sends then (the Twisted CallRunner's text), its work
        stopped once, and its own end sends nothing (wire format 12.7).
        """
        calls = self.calls()
        calls.received(Message((CALL, 3, 0, "add", (1, 2), None, 50, None)))
        [call] = calls.take()
        stops: list[None] = []
        call.stop = lambda: stops.append(None)
        message = calls.expired(call)
        self.assertEqual(message, failure(3, overDeadline("add")))
        self.assertEqual(message[2:4], ("chunkwire.DeadlineExceeded", "'add' did not finish within its deadline"))
        self.assertEqual(stops, [None])
        self.assertTrue(call.cancelled)
        self.assertIsNone(calls.expired(call))
        self.assertIsNone(calls.settle(call, 3, None))
        self.assertEqual(stops, [None])
        self.assertEqual(calls.runningCount, 0)

    def test_expiredAfterAnswer(self) -> None:
        """A call answered (or cancelled) already is not expired: nothing to send, nothing stopped."""
        calls = self.calls()
        calls.received(Message((CALL, 4, 0, "add", (1, 2), None, 50, None)))
        calls.received(Message((CALL, 5, 0, "add", (1, 2), None, 50, None)))
        answered, cancelled = calls.take()
        self.assertIsNotNone(calls.settle(answered, 3, None))
        self.assertIsNotNone(calls.cancelled(5))
        cancelled.stop = answered.stop = lambda: self.fail("stopped")
        self.assertIsNone(calls.expired(answered))
        self.assertIsNone(calls.expired(cancelled))

    def test_cancelBeforeRunning(self) -> None:
        """
        A CANCEL read with its CALL (before the I/O layer took the call):
        the call never runs, nothing is answered for it, and what its
        arguments were charged is released.
        """
        calls = self.calls()
        calls.ledger = Ledger(1 << 20)
        calls.received(Message((CALL, 7, 0, "add", (1, 2), None)))
        calls.received(Message((CALL, 8, 0, "add", (3, 4), None)))
        self.assertGreater(calls.ledger.held, 0)
        cancelled = calls.cancelled(7)
        self.assertIsNotNone(cancelled)
        [left] = calls.take()
        self.assertEqual(left.requestId, 8)
        self.assertEqual(calls.runningCount, 1)
        self.assertEqual(calls.ledger.held, left.held)
        self.assertIsNone(calls.settle(cancelled, 3, None))  # (an I/O layer that settles it anyway: nothing)
        self.assertEqual(calls.ledger.held, left.held)

    def test_cancelStops(self) -> None:
        """A CANCEL stops the call's work through what the I/O layer gave it, once (wire format 12.3)."""
        calls = self.calls()
        calls.received(Message((CALL, 6, 0, "add", (1, 2), None)))
        [call] = calls.take()
        stops: list[None] = []
        call.stop = lambda: stops.append(None)
        self.assertIs(calls.cancelled(6), call)
        self.assertIsNone(calls.cancelled(6))
        self.assertEqual(stops, [None])
        self.assertIsNone(calls.settle(call, 3, None))
