"""The blocking client of several addresses (L{protocols.blocking.BlockingFailover}) against server processes."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._addresses import PICK_FIRST, ROUND_ROBIN, AddressState, NoAddressReady
from framing.rpc._errors import ConnectionLost, ServerSilent
from framing.rpc._limits import CallLimits
from protocols.blocking import BlockingFailover, callContext, connect
from protocols.options import ClientOptions
from tests.processes import figure
from tests.protocols.failover import HANG, Server, startServers, stopAll, wasRecorded


class FailoverTests(SynchronousTestCase):
    """Calls move from a server that dies or drains to another; a call written is never sent twice."""

    def setUp(self) -> None:
        self.servers = startServers(3)
        self.addCleanup(stopAll, self.servers)

    def client(self, policy: str, servers: list[Server] | None = None) -> BlockingFailover:
        addresses: list[str] = [server.address for server in servers or self.servers]
        client = connect(
            addresses,
            options=ClientOptions(
                policy=policy, timeout=HANG, moveTimeout=HANG, callLimits=CallLimits(callTimeout=HANG)
            ),
        )
        self.addCleanup(client.close)
        return client

    def test_roundRobinSpreads(self) -> None:
        """round_robin connects to every address, and nine calls reach all three servers."""
        client = self.client(ROUND_ROBIN)
        names = {client.root.callRemote("whoami") for _ in range(9)}
        self.assertEqual(names, {"s0", "s1", "s2"})
        self.assertEqual({address.state for address in client.book.addresses}, {AddressState.READY})

    def test_pickFirstSticks(self) -> None:
        """pick_first connects to the first address alone and sends every call there."""
        client = self.client(PICK_FIRST)
        self.assertEqual({client.root.callRemote("whoami") for _ in range(5)}, {"s0"})
        self.assertEqual(
            [address.state for address in client.book.addresses],
            [AddressState.READY, AddressState.IDLE, AddressState.IDLE],
        )

    def killMoves(self, policy: str, killed: Server) -> None:
        client = self.client(policy)
        for _ in range(6):
            client.root.callRemote("whoami")
        gone = killed.kill()
        names = [client.root.callRemote("whoami") for _ in range(6)]
        moved = time.monotonic() - gone
        self.assertNotIn(killed.name, names)
        figure(f"blocking {policy}: six calls answered by the others {moved * 1000:.1f} ms after the kill")

    def test_killMovesPickFirst(self) -> None:
        """pick_first: the first server killed, the next calls go to the second, none failing."""
        self.killMoves(PICK_FIRST, self.servers[0])

    def test_killMovesRoundRobin(self) -> None:
        """round_robin: one server killed, the next calls go to the other two, none failing."""
        self.killMoves(ROUND_ROBIN, self.servers[1])

    def test_drainMovesNewCalls(self) -> None:
        """A server's GOAWAY: a call in flight finishes there; new calls go to another server."""
        client = self.client(PICK_FIRST)
        self.assertEqual(client.root.callRemote("whoami"), "s0")
        answers: list[Any] = []
        inFlight = threading.Thread(target=lambda: answers.append(client.root.callRemote("held", "inflight")))
        inFlight.start()
        self.servers[0].waitFor("record inflight")
        self.servers[0].drain()
        # The server answers a call that crossed its GOAWAY on the wire (it said "draining" once the GOAWAY was
        # written, not read): the call moves once the client has read it (the in-flight call's thread reads it).
        draining = client.book.addresses[0].connection
        assert draining is not None
        deadline = time.monotonic() + HANG
        while draining.acceptsCalls and time.monotonic() < deadline:
            time.sleep(0.01)  # (polling a state under a deadline: the GOAWAY's arrival, read by another thread)
        self.assertFalse(draining.acceptsCalls)
        self.assertEqual(client.root.callRemote("record", "after-drain"), "s1")
        self.servers[0].release()
        inFlight.join(HANG)
        self.assertEqual(answers, ["s0"])
        self.assertFalse(wasRecorded(self.servers[0], "after-drain"))

    def test_sentCallNotResent(self) -> None:
        """A call written to a server that then dies fails with ConnectionLost, and no other server receives it."""
        client = self.client(PICK_FIRST)
        errors: list[BaseException] = []

        def call() -> None:
            try:
                client.root.callRemote("hang", "once")
            except BaseException as error:
                errors.append(error)

        caller = threading.Thread(target=call)
        caller.start()
        self.servers[0].waitFor("record once")
        self.servers[0].kill()
        caller.join(HANG)
        self.assertEqual(len(errors), 1)
        self.assertIsInstance(errors[0], ConnectionLost)
        self.assertEqual(client.root.callRemote("whoami"), "s1")
        for server in self.servers[1:]:
            with connect(
                server.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG))
            ) as direct:
                self.assertNotIn("once", direct.root.callRemote("seen"))

    def test_cutOffServer(self) -> None:
        """
        A server that goes silent (SIGSTOP: its connection stays open, as a
        host cut off): the call written there fails with ServerSilent after
        the silence bound, not sent again; the next call goes to another server.
        """
        addresses = [server.address for server in self.servers]
        client = connect(
            addresses, options=ClientOptions(policy=PICK_FIRST, timeout=HANG, silenceTimeout=1.0, moveTimeout=HANG)
        )
        self.addCleanup(client.close)
        self.assertEqual(client.root.callRemote("whoami"), "s0")
        self.servers[0].pause()
        self.addCleanup(self.servers[0].resume)
        started = time.monotonic()
        self.assertRaises(ServerSilent, client.root.callRemote, "record", "silent")
        self.assertEqual(client.root.callRemote("whoami"), "s1")
        moved = time.monotonic() - started
        self.assertFalse(wasRecorded(self.servers[1], "silent") or wasRecorded(self.servers[2], "silent"))
        figure(f"blocking pick_first, silenceTimeout 1 s: a call to another server {moved:.2f} s after one went silent")

    def test_noneReady(self) -> None:
        """Every server gone: a call fails with NoAddressReady at its deadline, having sent nothing."""
        client = self.client(ROUND_ROBIN, self.servers[:2])
        for server in self.servers[:2]:
            server.kill()
        with callContext(timeout=0.5):
            error = self.assertRaises(NoAddressReady, client.root.callRemote, "whoami")
        self.assertEqual(len(error.errors), 2)

    def test_nameWithSeveralAddresses(self) -> None:
        """A host name counts as all its addresses: 'localhost' gives each of getaddrinfo's, and calls get through."""
        port = self.servers[0].port
        expected = {info[4][:2] for info in socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)}
        client = connect(
            [f"localhost:{port}"],
            options=ClientOptions(policy=ROUND_ROBIN, timeout=HANG, callLimits=CallLimits(callTimeout=HANG)),
        )
        self.addCleanup(client.close)
        self.assertEqual({address.target for address in client.book.addresses}, expected)
        self.assertEqual(client.root.callRemote("whoami"), "s0")
