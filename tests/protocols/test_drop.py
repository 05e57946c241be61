"""TokenProtocol.dropConnection: the public way to drop a peer for a ProtocolError, once."""

from __future__ import annotations

from twisted.logger import formatEvent
from twisted.trial.unittest import SynchronousTestCase

from framing import ProtocolError
from framing.errors import PeerError
from protocols import TokenProtocol
from protocols.testing import connectedPair

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
