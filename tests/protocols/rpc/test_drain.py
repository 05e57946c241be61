"""GOAWAY on one connection, in memory: no new calls, calls in flight answered, then closed; the deadline."""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._drain import DrainDeadlineExceeded, GoingAway
from framing.rpc._wire import GOAWAY, Message
from protocols.rpc import DeadReferenceError
from protocols.rpc._drain import drainBrokers

from .services import RpcPair, Service
from .test_memory import messagesIn, quiet


class DrainTests(SynchronousTestCase):
    """The server end sends GOAWAY; the client end stops calling and closes once idle."""

    def setUp(self) -> None:
        self.service = Service()
        self.pair = RpcPair(self.service)
        self.events = quiet(self.pair.server, self.pair.client)
        self.pair.flush()
        self.lost = self.pair.server.whenDisconnected()

    def goAway(self, grace: float = 5.0) -> Deferred[BaseException]:
        lost = self.pair.server.drain.goAway(grace)
        self.pair.flush()
        return lost

    def test_goawayOnTheWire(self) -> None:
        """GOAWAY is one RPC message carrying the grace time in milliseconds."""
        self.service.later("running")
        self.pair.root.callRemote("later", "k")
        self.pair.flush()
        self.goAway(2.5)
        sent = messagesIn(b"".join(self.pair.serverWrites))
        self.assertEqual(sent[-1], Message((GOAWAY, 2500)))

    def test_idleClientClosesAtOnce(self) -> None:
        """A client with no call waiting closes the connection as soon as GOAWAY arrives."""
        self.goAway()
        self.assertTrue(self.lost.called)
        self.assertTrue(self.pair.client.drain.draining)

    def test_newCallsRefused(self) -> None:
        """After GOAWAY neither end sends a new call: callRemote fails with GoingAway, a DeadReferenceError."""
        call = self.pair.root.callRemote("later", "k")
        self.goAway()
        refused = self.pair.root.callRemote("echo", 1)
        error = self.failureResultOf(refused, GoingAway).value
        self.assertIsInstance(error, DeadReferenceError)
        self.assertIn("draining", str(error))
        fromServer = self.pair.server.rootReference().callRemote("echo", 1)
        self.failureResultOf(fromServer, GoingAway)
        self.assertRaises(GoingAway, self.pair.root.callRemoteOnly, "echo", 1)
        self.assertNoResult(call)

    def test_callInFlightAnswered(self) -> None:
        """A call running when GOAWAY is sent is answered, and then the client closes the connection."""
        call = self.pair.root.callRemote("later", "k")
        self.pair.flush()
        self.goAway()
        self.assertFalse(self.lost.called)
        self.service.waiting["k"].callback("done")
        self.pair.flush()
        self.pair.clock.advance(0.05)
        self.pair.flush()
        self.assertEqual(self.successResultOf(call), "done")
        self.assertTrue(self.lost.called)

    def test_callCrossingGoawayAnswered(self) -> None:
        """A call sent before the client saw GOAWAY (it crossed it on the wire) is still answered."""
        call = self.pair.root.callRemote("echo", "crossing")
        self.pair.server.drain.goAway(5.0)
        self.pair.flush()
        self.assertEqual(self.successResultOf(call), "crossing")
        self.pair.clock.advance(0.05)
        self.pair.flush()
        self.assertTrue(self.lost.called)

    def test_deadlineFailsRunningCalls(self) -> None:
        """A call still running when the grace time passes fails with DrainDeadlineExceeded, which says so."""
        call = self.pair.root.callRemote("later", "k")
        self.pair.flush()
        self.goAway(1.0)
        self.pair.clock.advance(1.0)
        self.pair.flush()
        error = self.failureResultOf(call, DrainDeadlineExceeded).value
        self.assertIn("drain deadline (1 s) passed", str(error))
        self.assertEqual(error.grace, 1.0)
        self.assertEqual(self.service.cancelled, ["k"])
        self.assertTrue(self.lost.called)

    def test_deadlineStopsWhenClosed(self) -> None:
        """Once the connection is closed, no drain timer is left behind."""
        self.goAway(3.0)
        self.assertEqual(self.pair.clock.getDelayedCalls(), [])

    def test_secondGoawayIgnored(self) -> None:
        """Sending GOAWAY twice sends one message."""
        self.pair.root.callRemote("later", "k")
        self.pair.flush()
        self.goAway()
        before = len(b"".join(self.pair.serverWrites))
        self.goAway()
        self.assertEqual(len(b"".join(self.pair.serverWrites)), before)

    def test_drainBrokers(self) -> None:
        """drainBrokers fires once every connection it was given is closed."""
        done = drainBrokers([self.pair.server], 5.0)
        self.pair.flush()
        self.assertIsNone(self.successResultOf(done))
        self.assertIsNone(self.successResultOf(drainBrokers([], 1.0)))


class RefusedGoawayTests(SynchronousTestCase):
    """A malformed GOAWAY is refused as one message; the connection stays up."""

    def test_negativeGrace(self) -> None:
        """A GOAWAY whose grace is not a non-negative integer is refused, and the connection keeps working."""
        pair = RpcPair(Service())
        events = quiet(pair.server, pair.client)
        pair.flush()
        pair.server.sendObject(Message((GOAWAY, "soon")))
        pair.flush()
        self.assertFalse(pair.client.drain.draining)
        self.assertEqual([event.get("code") for event in events], ["kind-refused"])
        call = pair.root.callRemote("echo", 3)
        pair.flush()
        self.assertEqual(self.successResultOf(call), 3)
