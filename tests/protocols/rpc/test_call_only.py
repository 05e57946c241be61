"""callRemoteOnly: one CALL with request id 0, run by the peer, never answered, its failures logged there."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import formatEvent
from twisted.trial.unittest import SynchronousTestCase

from framing import EncodingError
from framing.rpc._wire import ANSWER, CALL, FAIL, NO_ANSWER
from framing.slicing._constraints import Integer
from protocols.bulk import BulkOptions
from protocols.rpc import Broker, DeadReferenceError, Referenceable, remote
from protocols.testing import connectedPair

from .services import RpcPair
from .test_memory import messagesIn, quiet


class Sink(Referenceable):
    """Records what it is told; fails or defers on request."""

    def __init__(self) -> None:
        self.told: list[Any] = []
        self.waiting: Deferred[Any] | None = None

    @remote
    def tell(self, value: Any, *, extra: Any = None) -> str:
        self.told.append((value, extra))
        return "a result nobody reads"

    @remote
    def explode(self) -> None:
        raise ValueError("boom")

    @remote
    def later(self) -> Deferred[Any]:
        self.waiting = Deferred()
        return self.waiting

    @remote(args={"small": Integer(0, 10)})
    def bounded(self, small: int) -> None:
        self.told.append(small)


def texts(events: list[dict[str, Any]]) -> str:
    """Every event's format, filled in, one per line."""
    return "\n".join(formatEvent(event) for event in events)


class CallOnlyTests(SynchronousTestCase):
    """A call for no answer runs on the server and nothing comes back."""

    def setUp(self) -> None:
        self.sink = Sink()
        self.pair = RpcPair(self.sink)
        self.events = quiet(self.pair.server, self.pair.client)
        self.pair.flush()
        self.serverWritesBefore = len(self.pair.serverWrites)

    def serverMessages(self) -> list[Any]:
        return messagesIn(b"".join(self.pair.serverWrites))

    def assertNothingAnswered(self) -> None:
        kinds = [message[0] for message in self.serverMessages()]
        self.assertNotIn(ANSWER, kinds)
        self.assertNotIn(FAIL, kinds)
        self.assertEqual(len(self.pair.serverWrites), self.serverWritesBefore)

    def test_runsUnanswered(self) -> None:
        """The method runs with the arguments, the client writes one message, the server writes nothing."""
        clientWrites = len(self.pair.clientWrites)
        result = self.pair.root.callRemoteOnly("tell", 5, extra="x")
        self.assertIsNone(result)
        self.assertEqual(len(self.pair.clientWrites), clientWrites + 1)
        sent = messagesIn(b"".join(self.pair.clientWrites))[-1]
        self.assertEqual((sent[0], sent[1], sent[3]), (CALL, NO_ANSWER, "tell"))
        self.assertEqual(self.pair.client.pendingCount, 0)
        self.assertEqual(self.pair.clock.getDelayedCalls(), [])
        self.pair.flush()
        self.assertEqual(self.sink.told, [(5, "x")])
        self.assertNothingAnswered()
        self.assertTrue(self.pair.client.isConnected())

    def test_failureLogged(self) -> None:
        """A method's exception is logged on the server with the method name and the peer, and not sent back."""
        self.pair.root.callRemoteOnly("explode")
        self.pair.flush()
        self.assertNothingAnswered()
        logged = texts(self.events)
        self.assertIn("remote method explode raised ValueError", logged)
        self.assertIn(self.pair.server.connection.peerName(), logged)
        self.assertTrue(self.pair.client.isConnected())
        answer = self.pair.root.callRemote("tell", 1)
        self.pair.flush()
        self.assertEqual(self.successResultOf(answer), "a result nobody reads")

    def test_deferredFailureLogged(self) -> None:
        """
        A method's Deferred failing later is logged, not answered, and
        nothing waits on it any more; it counts as running until then (the
        running cap counts calls for no answer too).
        """
        self.pair.root.callRemoteOnly("later")
        self.pair.flush()
        self.assertEqual(self.pair.server.runningCount, 1)
        assert self.sink.waiting is not None
        self.sink.waiting.errback(KeyError("gone"))
        self.pair.flush()
        self.assertEqual(self.pair.server.runningCount, 0)
        self.assertNothingAnswered()
        self.assertIn("remote method later raised KeyError", texts(self.events))

    def test_refusedLogged(self) -> None:
        """Arguments the constraints refuse are logged as a refusal naming the method, and not answered."""
        self.pair.root.callRemoteOnly("bounded", 99)
        self.pair.root.callRemoteOnly("nothing")
        self.pair.flush()
        self.assertEqual(self.sink.told, [])
        self.assertNothingAnswered()
        logged = texts(self.events)
        self.assertIn("Refused a call of bounded for no answer", logged)
        self.assertIn("Refused a call of nothing for no answer", logged)
        self.assertTrue(self.pair.client.isConnected())

    def test_deadReference(self) -> None:
        """On a lost connection the call raises DeadReferenceError at once."""
        self.pair.client.disconnect()
        self.pair.flush()
        self.assertRaises(DeadReferenceError, self.pair.root.callRemoteOnly, "tell", 1)

    def test_unencodable(self) -> None:
        """An argument that cannot be sent raises at once, and nothing is sent."""
        writes = len(self.pair.clientWrites)
        self.assertRaises(EncodingError, self.pair.root.callRemoteOnly, "tell", object())
        self.pair.flush()
        self.assertEqual(len(self.pair.clientWrites), writes)
        self.assertEqual(self.sink.told, [])


class BulkCallOnlyTests(SynchronousTestCase):
    """A bulk broker is a broker: callRemoteOnly works on it the same way."""

    def test_bulk(self) -> None:
        """The method runs on a bulk server and nothing is answered."""
        clock = Clock()
        sink = Sink()
        server, client = Broker(sink, clock=clock, bulk=BulkOptions()), Broker(clock=clock, bulk=BulkOptions())
        memory = connectedPair(server, client)
        clock.advance(0)
        memory.flush()
        before = len(memory.serverTransport.writes)
        client.rootReference().callRemoteOnly("tell", b"data")
        for _ in range(5):
            clock.advance(0)
            memory.flush()
        self.assertEqual(sink.told, [(b"data", None)])
        self.assertEqual(len(memory.serverTransport.writes), before)
