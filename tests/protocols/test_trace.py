"""TokenProtocol(trace=True) logs each token sent and received through twisted.logger, and costs nothing when off."""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from protocols import TokenProtocol
from protocols.echo import EchoClient, EchoServer
from protocols.testing import connectedPair


def traced(protocol: TokenProtocol) -> list[dict[str, Any]]:
    """Switch tracing on for C{protocol} and return the list its log events go to."""
    events: list[dict[str, Any]] = []
    protocol.trace = True
    protocol.log = Logger(namespace="test", observer=events.append)
    return events


class ProtocolTraceTests(SynchronousTestCase):
    """A traced connection logs every token with structured fields."""

    def test_echoTraced(self) -> None:
        """The server's log shows the request received and the same tokens sent back, in order."""
        server = EchoServer()
        events = traced(server)
        pair = connectedPair(server, EchoClient())
        answer = pair.client.echo({"n": 5})
        pair.flush()
        self.assertEqual(self.successResultOf(answer), {"n": 5})
        lines = [(event["direction"], event["token"]) for event in events]
        tokens = ["OPEN 'dict'", "STRING 'n'", "INT 5", "CLOSE"]
        self.assertEqual(
            lines,
            [("sent", "PREAMBLE version 1"), ("received", "PREAMBLE version 1")]
            + [("received", token) for token in tokens]
            + [("sent", token) for token in tokens],
        )
        address = server.transport.getPeer()
        self.assertEqual({event["peer"] for event in events}, {f"{address.host}:{address.port}"})
        self.assertEqual(events[4]["kind"], "INT")
        self.assertEqual(events[4]["value"], 5)

    def test_constructorArgument(self) -> None:
        """trace=True given to the constructor switches tracing on for that connection only."""
        self.assertTrue(EchoServer(trace=True).trace)
        self.assertFalse(EchoServer().trace)

    def test_offByDefault(self) -> None:
        """Untraced, no method is replaced on the protocol and the transport is not wrapped."""
        pair = connectedPair(EchoServer(), EchoClient())
        self.assertNotIn("dataReceived", vars(pair.server))
        self.assertEqual(type(pair.server.transport.transport).__name__, "MemoryTransport")

    def test_writesUnchanged(self) -> None:
        """Tracing does not change what is written: still one write per message."""
        server = EchoServer()
        traced(server)
        pair = connectedPair(server, EchoClient())
        pair.flush()
        before = len(pair.serverTransport.writes)
        pair.client.echo(list(range(10)))
        pair.flush()
        self.assertEqual(len(pair.serverTransport.writes), before + 1)
