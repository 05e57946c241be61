"""Errors a caller reads say what to do: the closest method name, the method's signature, how to raise a limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, EncodingError, Limits, dumps
from framing._errors import BodyTooLarge
from framing.rpc._errors import noSuchMethod
from protocols.rpc import NoSuchMethod, Referenceable, RemoteViolation, remote

from .services import RpcPair
from .test_memory import quiet


@dataclass
class Point:
    x: int
    y: int


class Counter(Referenceable):
    """A few methods with the signatures the tests need."""

    def __init__(self) -> None:
        self.calls = 0

    @remote
    def increment(self, by: int = 1) -> int:
        self.calls += 1
        return self.calls

    @remote
    def configure(self, name: str, *, strict: bool) -> str:
        self.calls += 1
        return name

    @remote
    def collect(self, *items: int) -> int:
        self.calls += 1
        return len(items)


class NoSuchMethodTests(SynchronousTestCase):
    """NoSuchMethod suggests the closest remote method name."""

    def test_closestName(self) -> None:
        """A misspelt name is answered with the remote method it is closest to."""
        pair = RpcPair(Counter())
        quiet(pair.server)
        answer = pair.root.callRemote("incremnt")
        pair.flush()
        error = self.failureResultOf(answer, NoSuchMethod).value
        self.assertIn("'incremnt' is not a remote method", error.message)
        self.assertIn("did you mean 'increment'?", error.message)

    def test_nothingClose(self) -> None:
        """A name close to none lists the remote methods instead, and a non-string name is reported as it is."""
        self.assertIn(
            "its remote methods are: collect, configure, increment", noSuchMethod("zz", Counter.remoteMethods).message
        )
        self.assertNotIn("did you mean", noSuchMethod(7, ["a"]).message)


class ArgumentCountTests(SynchronousTestCase):
    """A call whose arguments the method's signature cannot take is refused before the method runs."""

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Counter, Any]:
        counter = Counter()
        pair = RpcPair(counter)
        quiet(pair.server)
        answer = pair.root.callRemote(name, *args, **kwargs)
        pair.flush()
        return counter, answer

    def assertRefused(self, answer: Any, counter: Counter, *needles: str) -> None:
        error = self.failureResultOf(answer, RemoteViolation).value
        self.assertEqual((error.code, error.where, counter.calls), ("wrong-arguments", "args", 0))
        for needle in needles:
            self.assertIn(needle, error.message)

    def test_tooMany(self) -> None:
        """Too many positional arguments are a RemoteViolation naming the method and its parameters."""
        counter, answer = self.call("increment", 1, 2)
        self.assertRefused(answer, counter, "increment(by=1)", "too many positional arguments")

    def test_missingKeyword(self) -> None:
        """A missing keyword-only argument, and an unknown keyword, are refused the same way."""
        counter, answer = self.call("configure", "x")
        self.assertRefused(answer, counter, "configure(", "'strict'")
        counter, answer = self.call("configure", "x", strict=True, loud=True)
        self.assertRefused(answer, counter, "'loud'")

    def test_accepted(self) -> None:
        """Defaults, keywords and *args are accepted as Python would accept them."""
        for name, args, kwargs in [
            ("increment", (), {}),
            ("configure", ("x",), {"strict": False}),
            ("collect", (1, 2, 3), {}),
        ]:
            counter, answer = self.call(name, *args, **kwargs)
            self.successResultOf(answer)
            self.assertEqual(counter.calls, 1)


class FramingAdviceTests(SynchronousTestCase):
    """The framing errors a newcomer meets first name the fix."""

    def test_bodyTooLarge(self) -> None:
        """body-too-large names the Limits field to raise and suggests a bulk Stream for large bytes."""
        [violation] = Decoder(limits=Limits(max_bytes_length=10)).feed(dumps(b"x" * 11))
        self.assertIsInstance(violation, BodyTooLarge)
        self.assertIn("Limits(max_bytes_length=...)", str(violation))
        self.assertIn("protocols.bulk.Stream", str(violation))

    def test_noSlicer(self) -> None:
        """Encoding an unregistered type says to register it with framing.register."""
        with self.assertRaises(EncodingError) as raised:
            dumps(Point(1, 2))
        self.assertIn("framing.register(Point, 'myapp.Point')", str(raised.exception))
