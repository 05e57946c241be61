"""framing.rpc._context: how call scopes nest and what a call carries of its deadline, the same for every client."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._context import Scope, callBound, narrowed, sendingDeadline, sentWith, timeUp
from framing.rpc._errors import CallTimedOut, DeadlineExceeded


class NarrowedTests(SynchronousTestCase):
    """A nested block's scope."""

    def test_earlierDeadlineWins(self) -> None:
        """The inner block cannot extend the outer deadline; it may shorten it; None keeps the outer one."""
        outer = Scope(10.0, None)
        self.assertEqual(narrowed(outer, 20.0, None).deadline, 10.0)
        self.assertEqual(narrowed(outer, 5.0, None).deadline, 5.0)
        self.assertEqual(narrowed(outer, None, None).deadline, 10.0)
        self.assertEqual(narrowed(None, 7.0, None).deadline, 7.0)
        self.assertIsNone(narrowed(None, None, {"a": "b"}).deadline)

    def test_metadataMerged(self) -> None:
        """Metadata is merged, the inner value winning; the outer scope's dict is left as it was."""
        outer = Scope(None, {"a": "1", "b": "2"})
        inner = narrowed(outer, None, {"b": "3", "c": "4"})
        self.assertEqual(inner.metadata, {"a": "1", "b": "3", "c": "4"})
        self.assertEqual(outer.metadata, {"a": "1", "b": "2"})
        self.assertIsNone(narrowed(None, 1.0, None).metadata)

    def test_metadataIsText(self) -> None:
        """A key or value that is not text is refused with TypeError."""
        for metadata in ({"a": 1}, {1: "a"}, {"a": b"x"}):
            with self.assertRaises(TypeError):
                narrowed(None, None, metadata)  # type: ignore[arg-type]


class SendingDeadlineTests(SynchronousTestCase):
    """What a call carries of its deadline."""

    def test_millisecondsRoundedUp(self) -> None:
        """The seconds left and the milliseconds carried, rounded up (never before the caller's deadline)."""
        left, milliseconds = sendingDeadline("get", 10.0, 9.9995)
        self.assertAlmostEqual(left, 0.0005)
        self.assertEqual(milliseconds, 1)
        self.assertEqual(sendingDeadline("get", 12.0, 10.0)[1], 2000)

    def test_passed(self) -> None:
        """No time left: DeadlineExceeded naming the call."""
        for now in (10.0, 11.0):
            with self.assertRaises(DeadlineExceeded) as raised:
                sendingDeadline("get", 10.0, now)
            self.assertEqual(raised.exception.name, "get")


class SentWithTests(SynchronousTestCase):
    """What a CALL made in a scope carries in its keyword arguments' place, for every shell (L{sentWith})."""

    def test_noScope(self) -> None:
        """In no scope: the keyword arguments or None, no time left, and the clock is not read."""
        self.assertEqual(sentWith("f", {}, None, _unread), (None, None))
        self.assertEqual(sentWith("f", {"a": 1}, None, _unread), ({"a": 1}, None))

    def test_metadataOnly(self) -> None:
        """A scope without a deadline: the call context of its metadata, no time left, the clock not read."""
        self.assertEqual(
            sentWith("f", {"a": 1}, Scope(None, {"k": "v"}), _unread), (({"a": 1}, None, {"k": "v"}), None)
        )
        self.assertEqual(sentWith("f", {"a": 1}, Scope(None, {}), _unread), ({"a": 1}, None))

    def test_deadline(self) -> None:
        """With a deadline: the milliseconds left on the clock, rounded up, and the seconds; else DeadlineExceeded."""
        sent, left = sentWith("f", {}, Scope(12.0, {"k": "v"}), lambda: 10.0005)
        self.assertEqual(sent, (None, 2000, {"k": "v"}))
        self.assertAlmostEqual(left or 0.0, 1.9995)
        with self.assertRaises(DeadlineExceeded):
            sentWith("f", {}, Scope(10.0, None), lambda: 10.0)

    def test_shellsAskTheRule(self) -> None:
        """No shell builds a call context or reads a deadline's milliseconds itself: each asks sentWith."""
        import inspect

        import framing.rpc._session
        import protocols.asyncioclient
        import protocols.blocking
        import protocols.rpc._calls

        for module in (framing.rpc._session, protocols.asyncioclient, protocols.blocking, protocols.rpc._calls):
            source = inspect.getsource(module)
            self.assertNotIn("callContext(kwargs", source, module.__name__)
            self.assertNotIn("sendingDeadline(", source, module.__name__)


class CallBoundTests(SynchronousTestCase):
    """callBound and timeUp: how long a call waits, and what it fails with then, for every shell."""

    def test_unbounded(self) -> None:
        """No deadline and no callTimeout: no bound."""
        self.assertEqual(callBound(None, None), (None, False))

    def test_timeoutOnly(self) -> None:
        """No deadline: callTimeout bounds the call."""
        self.assertEqual(callBound(None, 5.0), (5.0, False))

    def test_deadlineOnly(self) -> None:
        """No callTimeout: the time the deadline leaves bounds the call."""
        self.assertEqual(callBound(2.5, None), (2.5, True))

    def test_earlierWins(self) -> None:
        """The earlier of the two bounds the call; a tie goes to the deadline."""
        self.assertEqual(callBound(2.0, 5.0), (2.0, True))
        self.assertEqual(callBound(7.0, 5.0), (5.0, False))
        self.assertEqual(callBound(5.0, 5.0), (5.0, True))

    def test_timeUp(self) -> None:
        """The deadline's bound fails with DeadlineExceeded, callTimeout's with CallTimedOut naming it."""
        error = timeUp("f", True, 5.0)
        self.assertIsInstance(error, DeadlineExceeded)
        self.assertEqual(error.name, "f")
        timedOut = timeUp("f", False, 5.0)
        self.assertIsInstance(timedOut, CallTimedOut)
        assert isinstance(timedOut, CallTimedOut)
        self.assertEqual((timedOut.name, timedOut.seconds), ("f", 5.0))

    def test_shellsAskTheRule(self) -> None:
        """No shell chooses between a call's deadline and callTimeout itself: each asks callBound."""
        import inspect

        import protocols.asyncioclient
        import protocols.blocking
        import protocols.rpc._calls

        for module in (protocols.asyncioclient, protocols.blocking, protocols.rpc._calls):
            source = inspect.getsource(module)
            self.assertIn("callBound(", source, module.__name__)
            self.assertNotIn("did not finish within its deadline", source, module.__name__)


def _unread() -> float:
    raise AssertionError("the clock was read")
