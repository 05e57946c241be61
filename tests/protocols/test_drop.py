"""TokenProtocol.dropConnection: the public way to drop a peer for a ProtocolError, once, and within a grace."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from framing import ProtocolError
from framing._errors import PeerError
from framing._refusals import MAX_REFUSALS, TooManyRefusals
from protocols import TokenProtocol
from protocols._config import DROP_GRACE
from protocols.testing import BrokerPair, brokerPair, connectedPair

from .rpc.services import Service
from .test_base import Recorder


class Misbehaving(ProtocolError):
    """What an application drops a peer for."""

    code = "misbehaving"


class DropConnectionTests(SynchronousTestCase):
    """An application or a guard drops a connection with dropConnection(error)."""

    def test_drop(self) -> None:
        """The error is logged, sent to the peer, and is the reason both connectionLost and failure give."""
        server, client = Recorder(), Recorder()
        pair = connectedPair(server, client)
        server.dropConnection(Misbehaving("too chatty"))
        pair.flush()
        server.lost[0].trap(Misbehaving)
        self.assertIs(server.failure, server.lost[0])
        self.assertIn("misbehaving: too chatty", formatEvent(server.events[0]))
        client.lost[0].trap(PeerError)
        self.assertIn("too chatty", str(client.lost[0].value))

    def test_once(self) -> None:
        """A second drop changes nothing: the first reason stands and nothing more is written or logged."""
        server, client = Recorder(), Recorder()
        pair = connectedPair(server, client)
        server.dropConnection(Misbehaving("first"))
        writes = len(pair.serverTransport.writes)
        server.dropConnection(Misbehaving("second"), logged=False)
        server.dropConnection(Misbehaving("third"))
        pair.flush()
        self.assertEqual(len(pair.serverTransport.writes), writes)
        self.assertEqual(len(server.events), 1)
        self.assertEqual(len(server.lost), 1)
        self.assertEqual(str(server.lost[0].value), "first")

    def test_notLogged(self) -> None:
        """With logged=False the caller logged already: nothing is logged here."""
        server, client = Recorder(), Recorder()
        pair = connectedPair(server, client)
        server.dropConnection(Misbehaving("quiet"), logged=False)
        pair.flush()
        self.assertEqual(server.events, [])
        server.lost[0].trap(Misbehaving)

    def test_failConnectionIsTheSame(self) -> None:
        """failConnection is the older name of the same method."""
        self.assertIs(TokenProtocol.failConnection, TokenProtocol.dropConnection)


class DropGraceTests(SynchronousTestCase):
    """
    A dropped connection ends even if the peer never reads (issue 39): its
    calls fail with the drop's error at the drop, and the connection is
    aborted C{dropGrace} seconds later if the polite close has not ended it.
    """

    def stalled(self) -> tuple[BrokerPair, Deferred[Any]]:
        """A broker pair whose server reads nothing more, and a 4 MiB echo in flight from the client."""
        pair = brokerPair(Service())
        pair.memory.serverTransport.pauseProducing()  # (the server takes nothing from its socket)
        call = pair.root.callRemote("echo", b"x" * (4 << 20))
        pair.flush()
        self.assertNoResult(call)
        return pair, call

    def test_refusalsDropFailsCallsAtOnceThenAborts(self) -> None:
        """
        Past the refusal rate the client drops the server: the echo in
        flight fails with L{TooManyRefusals} at once; the close cannot end
        (the server reads nothing), so C{dropGrace} seconds later the
        connection is aborted, and not a moment before.
        """
        pair, call = self.stalled()
        connection = pair.client.connection
        connection.log = Logger(observer=lambda event: None)
        for _ in range(MAX_REFUSALS + 1):
            connection.logRefusal("no-such-object", "refused")
        self.failureResultOf(call, TooManyRefusals)
        transport = pair.memory.clientTransport
        pair.clock.advance(DROP_GRACE - 0.1)
        pair.flush()
        self.assertFalse(transport.aborted)
        self.assertFalse(transport.disconnected)
        pair.clock.advance(0.1)
        self.assertTrue(transport.aborted)
        pair.flush()
        self.assertTrue(transport.disconnected)
        self.assertIsNone(connection.lingering)
        self.assertEqual(pair.clock.calls, [])

    def test_graceFromConfig(self) -> None:
        """The grace is the connection's C{config.dropGrace}."""
        pair, call = self.stalled()
        connection = pair.client.connection
        connection.config = connection.config.replace(dropGrace=1.0)
        connection.dropConnection(Misbehaving("go away"), logged=False)
        self.failureResultOf(call, Misbehaving)
        pair.clock.advance(1.0)
        self.assertTrue(pair.memory.clientTransport.aborted)

    def test_pingsFailAtTheDrop(self) -> None:
        """A PING waiting for its PONG fails with the drop's error at the drop, not at the close."""
        pair, call = self.stalled()
        connection = pair.client.connection
        ping = connection.sendPing()
        connection.dropConnection(Misbehaving("go away"), logged=False)
        self.failureResultOf(ping, Misbehaving)
        self.failureResultOf(call, Misbehaving)

    def test_timerCancelledWhenTheCloseEnds(self) -> None:
        """
        A peer that reads lets the polite close end: the abort timer is
        cancelled with it (no delayed call left), nothing is aborted.
        """
        pair = brokerPair(Service())
        connection = pair.server.connection
        connection.dropConnection(Misbehaving("go away"), logged=False)
        self.assertTrue(connection.lingering.active())
        pair.flush()
        self.assertTrue(pair.memory.serverTransport.disconnected)
        self.assertFalse(pair.memory.serverTransport.aborted)
        self.assertIsNone(connection.lingering)
        self.assertEqual(pair.clock.calls, [])

    def test_notAfterTheLoss(self) -> None:
        """A drop after the connection was lost does nothing: no ERROR written, no timer left."""
        pair = brokerPair(Service())
        connection = pair.server.connection
        connection.transport.loseConnection()
        pair.flush()
        self.assertTrue(pair.memory.serverTransport.disconnected)
        writes = len(pair.memory.serverTransport.writes)
        connection.dropConnection(Misbehaving("too late"), logged=False)
        self.assertIsNone(connection.failure)
        self.assertEqual(len(pair.memory.serverTransport.writes), writes)
        self.assertEqual(pair.clock.calls, [])
