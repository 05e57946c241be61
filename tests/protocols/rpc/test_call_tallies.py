"""Recorders (ICallRecorder): calls counted in CallTally objects, without a CallInfo or a hook call per success."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._interception import (
    CANCELLED,
    CLIENT,
    ERROR,
    LOST,
    OK,
    ONE_WAY,
    REFUSED,
    SERVER,
    CallTally,
)
from protocols.rpc import _answering as answering
from protocols.rpc import _interceptors as interceptors
from protocols.rpc._interceptors import CallInterceptor

from .services import NotFound
from .test_interceptors import Pair, Recorder

BOUNDS = (0.001, 1.0)


class Tallies(CallInterceptor):
    """A recorder: one tally per (side, method), and every time it was asked for one."""

    def __init__(self) -> None:
        self.tallies: dict[tuple[str, str], CallTally] = {}
        self.asked: list[tuple[str, str, str, str | None]] = []

    def tallyFor(self, side: str, method: str, outcome: str, errorType: str | None) -> CallTally:
        self.asked.append((side, method, outcome, errorType))
        return self.tallies.setdefault((side, method), CallTally(BOUNDS))


class CallTallyTests(SynchronousTestCase):
    """CallTally on its own."""

    def test_add(self) -> None:
        """add counts the call by outcome, in the bucket of its seconds, and sums the seconds."""
        tally = CallTally(BOUNDS)
        for outcome, seconds in ((OK, 0.0005), (OK, 0.5), (ERROR, 2.0), (ERROR, 0.001)):
            tally.add(outcome, seconds)
        self.assertEqual((tally.ok, tally.outcomes, tally.buckets), (2, {ERROR: 2}, [2, 1, 1]))
        self.assertAlmostEqual(tally.total, 2.5015)
        self.assertEqual(tally.counts(), [(OK, 2), (ERROR, 2)])

    def test_bounds(self) -> None:
        """Bounds must be given, in ascending order."""
        for bounds in ((), (1.0, 0.5)):
            self.assertRaises(ValueError, CallTally, bounds)

    def test_buckets(self) -> None:
        """Each success falls in the bucket of its seconds, whichever way the connection counts it."""
        recorder = Tallies()
        pair = Pair([recorder], [])
        pair.root.callRemote("echo", 1)
        pair.flush()
        tally = recorder.tallies[(SERVER, "echo")]
        before = list(tally.buckets)
        seconds = iter([0.0, 0.0005, 0.0, 0.5, 0.0, 5.0, 0.0, 0.001])
        self.patch(interceptors, "now", lambda: next(seconds))
        self.patch(answering, "perf_counter", lambda: next(seconds))
        for value in range(4):
            pair.root.callRemote("echo", value)
            pair.flush()
        self.assertEqual(tally.buckets, [before[0] + 2, before[1] + 1, before[2] + 1])


class RecorderTests(SynchronousTestCase):
    """The answering side's recorders, on a pair joined in memory."""

    def setUp(self) -> None:
        self.recorder = Tallies()
        self.pair = Pair([self.recorder], [])

    def tally(self, method: str) -> CallTally:
        return self.recorder.tallies[(SERVER, method)]

    def test_successesCountedWithoutAsking(self) -> None:
        """The recorder is asked for a method's tally at its first success only; later ones are counted in it."""
        for value in range(5):
            self.assertEqual(self.successResultOf(self.pair.call("echo", value)), value)
        self.assertEqual(self.recorder.asked, [(SERVER, "echo", OK, None)])
        tally = self.tally("echo")
        self.assertEqual((tally.ok, sum(tally.buckets), tally.outcomes), (5, 5, {}))
        self.assertGreater(tally.total, 0.0)

    def test_noCallInfo(self) -> None:
        """With only recorders, a call is never given a CallInfo (CallRunner keeps its start)."""
        made: list[Any] = []
        original = interceptors.CallInfo

        def counting(*args: Any) -> Any:
            made.append(args)
            return original(*args)

        self.patch(interceptors, "CallInfo", counting)
        for value in range(3):
            self.pair.call("echo", value)
        self.failureResultOf(self.pair.call("fail", "registered"), NotFound)
        self.assertEqual((made, self.tally("echo").ok, self.tally("fail").outcomes), ([], 3, {ERROR: 1}))

    def test_outcomes(self) -> None:
        """Errors, refusals, cancels, losses and calls for no answer are counted by outcome, with their error type."""
        self.failureResultOf(self.pair.call("fail", "registered"), NotFound)
        self.failureResultOf(self.pair.call("nothing"))
        self.pair.root.callRemoteOnly("echo", 1)
        self.pair.flush()
        cancelled = self.pair.call("later", "a")
        cancelled.cancel()
        self.pair.flush()
        self.failureResultOf(cancelled)
        lost = self.pair.call("later", "b")
        self.pair.server.connection.transport.loseConnection()
        self.pair.flush()
        self.failureResultOf(lost)
        self.assertEqual(
            self.recorder.asked,
            [
                (SERVER, "fail", ERROR, "tests.NotFound"),
                (SERVER, "nothing", REFUSED, "NoSuchMethod"),
                (SERVER, "echo", ONE_WAY, None),
                (SERVER, "later", CANCELLED, None),
                (SERVER, "later", LOST, None),
            ],
        )
        self.assertEqual(self.tally("later").counts(), [(CANCELLED, 1), (LOST, 1)])

    def test_clientSide(self) -> None:
        """On the calling side, a recorder counts each call by outcome as CLIENT."""
        recorder = Tallies()
        pair = Pair([], [recorder])
        for name, args in (("echo", (1,)), ("fail", ("registered",))):
            pair.root.callRemote(name, *args).addErrback(lambda _: None)
            pair.flush()
        self.assertEqual(recorder.asked, [(CLIENT, "echo", OK, None), (CLIENT, "fail", ERROR, "tests.NotFound")])

    def test_withCallEnded(self) -> None:
        """Beside an interceptor with callEnded, calls are kept as CallInfo and the recorder still counts each."""
        ends, recorder = Recorder(), Tallies()
        pair = Pair([ends, recorder], [])
        for value in range(3):
            pair.root.callRemote("echo", value)
            pair.flush()
        self.assertEqual([info.outcome for info in ends.ended], [OK, OK, OK])
        self.assertEqual(recorder.tallies[(SERVER, "echo")].ok, 3)

    def test_brokenRecorder(self) -> None:
        """A tallyFor that raises is logged; the call is answered and the next call is asked for again."""

        class Broken(CallInterceptor):
            def tallyFor(self, side: str, method: str, outcome: str, errorType: str | None) -> CallTally:
                raise RuntimeError("bug in a recorder")

        pair = Pair([Broken()], [])
        for value in (1, 2):
            call = pair.root.callRemote("echo", value)
            pair.flush()
            self.assertEqual(self.successResultOf(call), value)
        failures = [event["log_failure"].value for event in pair.events if "log_failure" in event]
        self.assertEqual([type(error) for error in failures], [RuntimeError, RuntimeError])
