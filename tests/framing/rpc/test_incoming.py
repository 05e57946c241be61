# -*- test-case-name: tests.framing.rpc.test_incoming -*-
"""Tests for framing.rpc._incoming's rules of answering, which every shell shares."""

from __future__ import annotations

import inspect

from twisted.trial.unittest import SynchronousTestCase

from framing import Violation
from framing.rpc._errors import NoSuchMethod
from framing.rpc._incoming import failure, resultRefused, withoutDetails
from framing.rpc._wire import FAIL, Message
from framing.slicing._constraints import Integer


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
