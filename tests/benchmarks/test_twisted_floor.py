"""
bench_rpc's twisted-floor peer (a bare Twisted protocol answering the floor client's CALLs with their ANSWERs)
and its twisted-codec peer (a bare Twisted protocol with chunkwire's codec).
"""

from __future__ import annotations

from twisted.internet.protocol import Factory
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._session import ClientSession
from framing.rpc._wire import ROOT_ID
from framing.wire import PREAMBLE
from tests.benchmarks._rpc_peers import PAYLOADS, CodecFloorServer, floorMessages, twistedFloorFactory


class TwistedFloorTests(SynchronousTestCase):
    """The server answers exactly the floor client's calls, with answers a client session settles as the echo."""

    def setUp(self) -> None:
        self.server = twistedFloorFactory().buildProtocol(None)
        self.transport = StringTransport()
        self.server.makeConnection(self.transport)
        # A client session making the floor client's calls, in its order: the CALLs it sends are floorMessages'.
        self.session: ClientSession[str] = ClientSession("floor")
        self.calls = {}
        for payload, value in PAYLOADS.items():
            _, call = self.session.call(payload, ROOT_ID, "echo", (value,), {})
            self.calls[payload] = call

    def answered(self) -> list[tuple[str, object, object]]:
        """What the server wrote, as the client session settles it."""
        settled = self.session.receive(self.transport.value())
        self.transport.clear()
        return settled

    def test_messagesAreTheFloorClients(self) -> None:
        """floorMessages' CALLs are those of a fresh client session's first calls, one per payload."""
        self.assertEqual({payload: call for payload, (call, _) in floorMessages().items()}, self.calls)

    def test_answersEachCall(self) -> None:
        """The preamble first; each CALL, the client's preamble unanswered, gets the ANSWER echoing its value."""
        self.assertTrue(self.transport.value().startswith(PREAMBLE))
        self.server.dataReceived(PREAMBLE)
        self.server.dataReceived(self.calls["int"])
        self.server.dataReceived(self.calls["kib"])
        self.assertEqual(self.answered(), [("int", PAYLOADS["int"], None), ("kib", PAYLOADS["kib"], None)])
        self.assertFalse(self.transport.disconnecting)

    def test_splitAndJoinedReads(self) -> None:
        """A CALL cut across reads is answered once, when whole; two in one read, twice, in order."""
        self.server.dataReceived(PREAMBLE + self.calls["kib"][:7])
        self.assertEqual(self.answered(), [])  # (the server's preamble only)
        self.server.dataReceived(self.calls["kib"][7:] + self.calls["int"])
        self.assertEqual(self.answered(), [("kib", PAYLOADS["kib"], None), ("int", PAYLOADS["int"], None)])

    def test_unknownBytesDropTheConnection(self) -> None:
        """Bytes that begin no known message close the connection, unanswered."""
        self.server.dataReceived(PREAMBLE)
        before = self.transport.value()
        self.server.dataReceived(b"\xffnot a call")
        self.assertTrue(self.transport.disconnecting)
        self.assertEqual(self.transport.value(), before)


class CodecFloorTests(SynchronousTestCase):
    """bench_rpc's twisted-codec peer: a bare Twisted protocol reading and writing RPC messages with our codec."""

    def setUp(self) -> None:
        self.server = Factory.forProtocol(CodecFloorServer).buildProtocol(None)
        self.transport = StringTransport()
        self.server.makeConnection(self.transport)
        self.session: ClientSession[int] = ClientSession("codec floor")

    def call(self, number: int, value: object) -> bytes:
        return self.session.call(number, ROOT_ID, "echo", (value,), {})[1]

    def answered(self) -> list[tuple[int, object, object]]:
        settled = self.session.receive(self.transport.value())
        self.transport.clear()
        return settled

    def test_answersEachCall(self) -> None:
        """The preamble first; each CALL, whatever its value, is answered with it, in order, split or joined."""
        self.assertTrue(self.transport.value().startswith(PREAMBLE))
        first, second, third = self.call(1, 42), self.call(2, PAYLOADS["kib"]), self.call(3, ["a", {"b": 1.5}])
        self.server.dataReceived(PREAMBLE + first)
        self.assertEqual(self.answered(), [(1, 42, None)])
        self.server.dataReceived(second[:5])
        self.assertEqual(self.transport.value(), b"")
        self.server.dataReceived(second[5:] + third)
        self.assertEqual(self.answered(), [(2, PAYLOADS["kib"], None), (3, ["a", {"b": 1.5}], None)])

    def test_answersAreTheChunkwireServers(self) -> None:
        """Its ANSWER is byte for byte the one floorMessages holds for the chunkwire server's answer."""
        for payload, (message, answer) in floorMessages().items():
            server = Factory.forProtocol(CodecFloorServer).buildProtocol(None)
            transport = StringTransport()
            server.makeConnection(transport)
            transport.clear()
            server.dataReceived(PREAMBLE + message)
            self.assertEqual(transport.value(), answer, payload)
