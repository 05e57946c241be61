# -*- test-case-name: tests.protocols.rpc.test_calls_alike -*-
"""
This side's calls end alike on the Twisted client (L{protocols.rpc._calls.OutgoingCalls})
and on the clients without Twisted (their L{framing.rpc._session.ClientSession}).

Both make and match their calls on one L{framing.rpc._calltable.CallTable}
(its own tests: tests/framing/rpc/test_calltable.py).  This holds the two
shells to its outcomes: the same CALL and CANCEL bytes for a call given
up, its late answer ignored once and a second one ending the connection,
an answer to no call ending it with the same error and the same ERROR
sent first (wire format 12.3, 12.4), a FAIL and a refused answer failing
the call with the same error, and a call after GOAWAY refused with the same
L{GoingAway}, nothing sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from framing import Violation
from framing._encoder import error_token
from framing._errors import InvalidValue
from framing.rpc._drain import GoingAway
from framing.rpc._errors import UnexpectedAnswer
from framing.rpc._incoming import failure
from framing.rpc._session import ClientSession, Settled
from framing.rpc._wire import ANSWER, GOAWAY, Message
from framing.wire import PREAMBLE
from protocols.rpc import Broker
from protocols.testing import RecordingTransport

from .test_dispatch_alike import encoded
from .test_memory import quiet

VECTORS = Path(__file__).parents[2] / "vectors" / "rpc.json"


class Shells:
    """A Twisted client broker and a client session, both connected, the same peer's name on both."""

    def __init__(self) -> None:
        self.broker = Broker(None, clock=Clock())
        quiet(self.broker)
        self.transport = RecordingTransport()
        self.broker.connection.makeConnection(self.transport)
        self.broker.connection.dataReceived(PREAMBLE)
        self.peer = self.broker.connection.peerName()
        self.session: ClientSession[str] = ClientSession(self.peer)
        self.sent = self.session.start()
        self.session.receive(PREAMBLE)
        self.settled: list[Settled] = []

    def call(self, name: str = "get") -> Deferred[Any]:
        """The same call on both: the Twisted one's Deferred (its failures kept); the session's bytes kept."""
        answer = self.broker.callRemote(0, name, (1,), {})
        _, data = self.session.call(name, 0, name, (1,), {})
        self.sent += data
        return answer

    def feed(self, *messages: Any) -> None:
        """The server's C{messages} to both (what the session settled kept)."""
        self.feedBytes(encoded(*messages))

    def feedBytes(self, data: bytes) -> None:
        self.broker.connection.dataReceived(data)
        self.settled.extend(self.session.receive(data))

    def written(self) -> bytes:
        """What the Twisted client wrote so far."""
        return b"".join(self.transport.writes)

    def sessionSent(self) -> bytes:
        """What the session sent so far (its calls' bytes, its output, the ERROR at its end)."""
        self.sent += self.session.dataToSend()
        return self.sent + self.session.farewell

    def twistedFailure(self) -> BaseException | None:
        failed = self.broker.failure
        return None if failed is None else failed.value


def failureOf(answer: Deferred[Any]) -> BaseException:
    """The error C{answer} failed with (it must have)."""
    failed: list[Failure] = []
    answer.addErrback(failed.append)
    assert failed, "the call did not fail"
    error = failed[0].value
    assert error is not None
    return error


class GivingUpAlikeTests(SynchronousTestCase):
    def test_cancelBytes(self) -> None:
        """A call given up sends the same CALL and CANCEL from both."""
        shells = Shells()
        answer = shells.call()
        answer.cancel()
        self.assertIsInstance(failureOf(answer), CancelledError)
        shells.sent += shells.session.cancel(1)
        self.assertEqual(shells.written(), shells.sessionSent())
        self.assertEqual(shells.session.cancel(1), b"")

    def test_lateAnswerIgnoredOnce(self) -> None:
        """
        The late answer of a call given up is ignored by both, once; a
        second ends both with the same L{UnexpectedAnswer}, and both send
        the same ERROR before they close.
        """
        shells = Shells()
        answer = shells.call()
        answer.cancel()
        failureOf(answer)
        shells.sent += shells.session.cancel(1)
        shells.feed(Message((ANSWER, 1, "late")))
        self.assertIsNone(shells.twistedFailure())
        self.assertIsNone(shells.session.failure)
        self.assertEqual(shells.written(), shells.sessionSent())
        shells.feed(Message((ANSWER, 1, "later")))
        twisted = shells.twistedFailure()
        self.assertIsInstance(twisted, UnexpectedAnswer)
        self.assertIsInstance(shells.session.failure, UnexpectedAnswer)
        self.assertEqual(str(shells.session.failure), str(twisted))
        assert twisted is not None
        self.assertTrue(shells.written().endswith(error_token(twisted)))
        self.assertEqual(shells.written(), shells.sessionSent())


class StrayAnswersAlikeTests(SynchronousTestCase):
    def test_answerToNoCall(self) -> None:
        """
        An ANSWER or a FAIL to a call never made or answered already ends
        both with the same L{UnexpectedAnswer}; the call waiting fails with
        the same error on both; both send the same ERROR first (wire format
        12.3: the caller closes after an ERROR C{unexpected-answer}).
        """
        for stray in (Message((ANSWER, 9, "x")), failure(9, KeyError("k")), Message((ANSWER, 1, "twice"))):
            shells = Shells()
            shells.call()
            waiting = shells.call("put")
            shells.feed(Message((ANSWER, 1, "first")))
            shells.feed(stray)
            twisted = shells.twistedFailure()
            self.assertIsInstance(twisted, UnexpectedAnswer, stray)
            self.assertEqual(str(shells.session.failure), str(twisted), stray)
            [(waiter, _, error)] = [outcome for outcome in shells.settled if outcome[0] == "put"]
            self.assertEqual(str(error), str(failureOf(waiting)), stray)
            self.assertIn("(while calling 'put' on ", str(error))
            self.assertEqual(shells.written(), shells.sessionSent(), stray)
            assert twisted is not None
            self.assertTrue(shells.written().endswith(error_token(twisted)), stray)
            self.assertTrue(str(twisted).startswith("unexpected-answer: "), stray)


class FailuresAlikeTests(SynchronousTestCase):
    def test_fail(self) -> None:
        """A FAIL fails the call with the same error on both (a result refused by the peer naming the call)."""
        for error in (KeyError("k"), Violation("too long", "result.text")):
            shells = Shells()
            answer = shells.call()
            shells.feed(failure(1, error))
            [(_, _, sessionError)] = shells.settled
            twisted = failureOf(answer)
            self.assertIs(type(sessionError), type(twisted))
            self.assertEqual(str(sessionError), str(twisted))

    def test_refusedAnswer(self) -> None:
        """An answer refused after its id fails the call with the same violation, naming it and the peer."""
        [vector] = [v for v in json.loads(VECTORS.read_text())["errors"] if v["name"].startswith("fail-type-name-not")]
        shells = Shells()
        answer = shells.call()
        shells.feedBytes(bytes.fromhex(vector["hex"])[len(PREAMBLE) :])
        [(_, _, sessionError)] = shells.settled
        twisted = failureOf(answer)
        self.assertIsInstance(twisted, InvalidValue)
        self.assertIs(type(sessionError), type(twisted))
        self.assertEqual(str(sessionError), str(twisted))
        self.assertIn(f"; in the answer to 'get' from {shells.peer}", str(twisted))
        self.assertIsNone(shells.twistedFailure())
        self.assertIsNone(shells.session.failure)


class GoingAwayAlikeTests(SynchronousTestCase):
    def test_callAfterGoAway(self) -> None:
        """
        After the server's GOAWAY a new call, for an answer or none, is
        refused by both with the same L{GoingAway}, nothing sent; the call
        in flight is still answered.
        """
        shells = Shells()
        inFlight = shells.call()
        shells.feed(Message((GOAWAY, 5000)))
        before = shells.written(), shells.sessionSent()
        twisted = failureOf(shells.broker.callRemote(0, "later", (), {}))
        session = self.assertRaises(GoingAway, shells.session.call, "w", 0, "later", (), {})
        self.assertIsInstance(twisted, GoingAway)
        self.assertEqual(str(session), str(twisted))
        drain = f"the connection to {shells.peer} is draining (received GOAWAY)"
        self.assertEqual(str(session), f"cannot call 'later': {drain}")
        only = self.assertRaises(GoingAway, shells.broker.callRemoteOnly, 0, "log", (), {})
        self.assertEqual(str(self.assertRaises(GoingAway, shells.session.callOnly, 0, "log", (), {})), str(only))
        self.assertEqual((shells.written(), shells.sessionSent()), before)
        shells.feed(Message((ANSWER, 1, "last")))
        self.assertEqual(self.successResultOf(inFlight), "last")
        self.assertEqual(shells.settled, [("get", "last", None)])
