"""The asyncio client of several addresses (L{protocols.asyncioclient.AsyncFailover}) against server processes."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from framing.rpc._addresses import PICK_FIRST, ROUND_ROBIN, AddressState, NoAddressReady
from framing.rpc._errors import ConnectionLost, ServerSilent
from framing.rpc._limits import CallLimits
from protocols.asyncioclient import AsyncFailover, callContext, connect
from protocols.options import ClientOptions
from tests.processes import figure
from tests.protocols.failover import HANG, Server, startServers, stopAll, wasRecorded


class FailoverTests(SynchronousTestCase):
    """Calls move from a server that dies or drains to another; a call written is never sent twice."""

    def setUp(self) -> None:
        self.servers = startServers(3)
        self.addCleanup(stopAll, self.servers)

    def runLoop(self, scenario: Callable[[], Awaitable[None]]) -> None:
        """Run C{scenario} on a new event loop, bounded by twice L{HANG}."""
        asyncio.run(asyncio.wait_for(scenario(), HANG * 2))

    async def client(self, policy: str, servers: list[Server] | None = None) -> AsyncFailover:
        addresses: list[str] = [server.address for server in servers or self.servers]
        return await connect(
            addresses,
            options=ClientOptions(
                policy=policy, timeout=HANG, moveTimeout=HANG, callLimits=CallLimits(callTimeout=HANG)
            ),
        )

    def test_roundRobinSpreads(self) -> None:
        """round_robin connects to every address, and nine calls reach all three servers."""

        async def scenario() -> None:
            async with await self.client(ROUND_ROBIN) as client:
                # The first call starts a connection to every address and goes to the first ready;
                # round_robin spreads over ready connections only, so wait for all three.
                await client.root.callRemote("whoami")
                end = asyncio.get_running_loop().time() + HANG
                while {address.state for address in client.book.addresses} != {AddressState.READY}:
                    self.assertLess(asyncio.get_running_loop().time(), end, "not every address became ready")
                    await asyncio.sleep(0.01)
                names = {await client.root.callRemote("whoami") for _ in range(9)}
                self.assertEqual(names, {"s0", "s1", "s2"})

        self.runLoop(scenario)

    def test_pickFirstSticks(self) -> None:
        """pick_first connects to the first address alone and sends every call there."""

        async def scenario() -> None:
            async with await self.client(PICK_FIRST) as client:
                self.assertEqual({await client.root.callRemote("whoami") for _ in range(5)}, {"s0"})
                self.assertEqual(
                    [address.state for address in client.book.addresses],
                    [AddressState.READY, AddressState.IDLE, AddressState.IDLE],
                )

        self.runLoop(scenario)

    def killMoves(self, policy: str, killed: Server) -> None:
        async def scenario() -> None:
            async with await self.client(policy) as client:
                for _ in range(6):
                    await client.root.callRemote("whoami")
                gone = await asyncio.to_thread(killed.kill)
                names = [await client.root.callRemote("whoami") for _ in range(6)]
                moved = time.monotonic() - gone
                self.assertNotIn(killed.name, names)
                figure(f"asyncio {policy}: six calls answered by the others {moved * 1000:.1f} ms after the kill")

        self.runLoop(scenario)

    def test_killMovesPickFirst(self) -> None:
        """pick_first: the first server killed, the next calls go to the second, none failing."""
        self.killMoves(PICK_FIRST, self.servers[0])

    def test_killMovesRoundRobin(self) -> None:
        """round_robin: one server killed, the next calls go to the other two, none failing."""
        self.killMoves(ROUND_ROBIN, self.servers[1])

    def test_drainMovesNewCalls(self) -> None:
        """A server's GOAWAY: a call in flight finishes there; new calls go to another server."""

        async def scenario() -> None:
            async with await self.client(PICK_FIRST) as client:
                self.assertEqual(await client.root.callRemote("whoami"), "s0")
                inFlight = asyncio.ensure_future(client.root.callRemote("held", "inflight"))
                await asyncio.to_thread(self.servers[0].waitFor, "record inflight")
                await asyncio.to_thread(self.servers[0].drain)
                # The server answers a call that crossed its GOAWAY on the wire (it says "draining" once the
                # GOAWAY is written, not read): the next call moves once the client has read it.
                draining = client.book.addresses[0].connection
                assert draining is not None
                end = asyncio.get_running_loop().time() + HANG
                while draining.acceptsCalls:
                    self.assertLess(asyncio.get_running_loop().time(), end, "the client never read the GOAWAY")
                    await asyncio.sleep(0.01)
                self.assertEqual(await client.root.callRemote("record", "after-drain"), "s1")
                self.servers[0].release()
                self.assertEqual(await inFlight, "s0")
                self.assertFalse(wasRecorded(self.servers[0], "after-drain"))

        self.runLoop(scenario)

    def test_sentCallNotResent(self) -> None:
        """A call written to a server that then dies fails with ConnectionLost, and no other server receives it."""

        async def scenario() -> None:
            async with await self.client(PICK_FIRST) as client:
                hanging = asyncio.ensure_future(client.root.callRemote("hang", "once"))
                await asyncio.to_thread(self.servers[0].waitFor, "record once")
                await asyncio.to_thread(self.servers[0].kill)
                with self.assertRaises(ConnectionLost):
                    await hanging
                self.assertEqual(await client.root.callRemote("whoami"), "s1")
                for server in self.servers[1:]:
                    async with await connect(
                        server.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG))
                    ) as direct:
                        self.assertNotIn("once", await direct.root.callRemote("seen"))

        self.runLoop(scenario)

    def test_cutOffServer(self) -> None:
        """
        A server that goes silent (SIGSTOP: its connection stays open, as a
        host cut off): the call written there fails with ServerSilent after
        the silence bound, not sent again; the next call goes to another server.
        """

        async def scenario() -> None:
            addresses = [server.address for server in self.servers]
            async with await connect(
                addresses, options=ClientOptions(policy=PICK_FIRST, timeout=HANG, silenceTimeout=1.0, moveTimeout=HANG)
            ) as client:
                self.assertEqual(await client.root.callRemote("whoami"), "s0")
                self.servers[0].pause()
                self.addCleanup(self.servers[0].resume)
                started = time.monotonic()
                with self.assertRaises(ServerSilent):
                    await client.root.callRemote("record", "silent")
                self.assertEqual(await client.root.callRemote("whoami"), "s1")
                moved = time.monotonic() - started
                self.assertFalse(wasRecorded(self.servers[1], "silent") or wasRecorded(self.servers[2], "silent"))
                figure(f"asyncio pick_first, silence 1 s: another server answered {moved:.2f} s after one went silent")

        self.runLoop(scenario)

    def test_noneReady(self) -> None:
        """Every server gone: a call fails with NoAddressReady at its deadline, having sent nothing."""

        async def scenario() -> None:
            async with await self.client(ROUND_ROBIN, self.servers[:2]) as client:
                for server in self.servers[:2]:
                    server.kill()
                with callContext(timeout=0.5), self.assertRaises(NoAddressReady) as raised:
                    await client.root.callRemote("whoami")
                self.assertEqual(len(raised.exception.errors), 2)

        self.runLoop(scenario)

    def test_nameWithSeveralAddresses(self) -> None:
        """A host name counts as all its addresses: 'localhost' gives each of getaddrinfo's, and calls get through."""
        port = self.servers[0].port
        expected: set[Any] = {info[4][:2] for info in socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)}

        async def scenario() -> None:
            async with await connect(
                [f"localhost:{port}"], options=ClientOptions(policy=ROUND_ROBIN, timeout=HANG)
            ) as client:
                self.assertEqual({address.target for address in client.book.addresses}, expected)
                self.assertEqual(await client.root.callRemote("whoami"), "s0")

        self.runLoop(scenario)
