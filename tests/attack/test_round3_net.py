"""Hostile peers, round three: the connection-level items, as processes against the twist plugins.

Each test starts C{twist chunkwire-kv} (L{attacks_round3_net.Twist}),
attacks it from this process with raw sockets or paused clients, and
asserts outcomes only: what was refused or dropped (with the logged code),
that new honest clients got every answer right, and that the server's
descriptors and RSS stayed bounded.  No timing ratio is asserted; the
deadlines are generous enough that only a hang misses them.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from typing import Any

from twisted.internet.task import deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import rpc
from protocols._proxyheader import ProxyHeaderError, TrustedProxies, readHeader
from tests.processes import figure

from ..protocols.helpers import pytestTest, trialTest
from .attacks_round3_net import DEADLINE, Twist, closeAll, closedByServer, honestCalls, rawConnections, waitFor

RSS_BOUND = 64 * 1024 * 1024
"""Most an attack may add to the server's RSS."""

TEST_TIMEOUT = 180.0
"""Seconds one of these tests may take: only a hang misses it on a loaded machine (each runs for seconds)."""


async def drainNonReader(reactor: Any) -> None:
    """A drain with a client that reads nothing exits once the grace (plus ABORT_AFTER) has passed, not later."""
    grace = 2.0
    server = Twist("chunkwire-kv", "--grace", str(grace))
    try:
        await server.listening(reactor)
        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={server.port}")
        await root.callRemote("put", "big", "x" * 1_000_000)
        # Stop reading, then ask for far more than the kernel's socket buffers hold.
        tcp = root.broker.connection.transport.transport
        tcp.pauseProducing()
        for _ in range(80):
            root.callRemote("get", "big").addErrback(lambda _: None)
        # The server is answering (so it has calls to finish, its answers more than the buffers hold)
        # once answer bytes wait unread in this side's socket.
        await waitFor(reactor, lambda: unread(tcp.socket) > 0, lambda: server.log()[-2000:])
        server.process.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        took = await server.exited(reactor, DEADLINE)
        assert took is not None, f"still running {DEADLINE} s after SIGTERM with grace {grace}: {server.log()[-2000:]}"
        # The grace is what ended it: the drain waited for it, then aborted the connection the peer did not read.
        assert time.monotonic() - stopped >= grace - 0.1
        assert "after the drain deadline; aborting the connection" in server.log(), server.log()[-2000:]
        root.broker.connection.transport.abortConnection()
    finally:
        server.stop()


def unread(connection: Any) -> int:
    """Bytes waiting in C{connection}'s kernel receive queue (FIONREAD)."""
    import fcntl
    import struct
    import termios

    queued: int = struct.unpack("i", fcntl.ioctl(connection.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    return queued


def scrape(port: int) -> bytes:
    """One blocking GET /metrics; the whole response (empty if the connection was refused)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        chunks = []
        try:
            while chunk := connection.recv(65536):
                chunks.append(chunk)
        except OSError:
            pass
        return b"".join(chunks)


async def metricsFlood(reactor: Any) -> None:
    """1,020 half-sent requests to /metrics take at most its own 16 slots: new RPC clients get 5 of 5, fds stay low."""
    listen = "tcp:0:interface=127.0.0.1:backlog=1024"
    server = Twist("chunkwire-kv", "--metrics", listen, "--metrics-lifetime", "2", nofile=1024)
    attackers: list[Any] = []
    try:
        await server.listening(reactor)
        metrics = server.metricsPort
        before = server.resources()
        for _ in range(20):
            attackers += rawConnections(51, "127.0.0.1", metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            await deferLater(reactor, 0)
        # The server has met the flood (its first refusals are logged) before its resources are read.
        await server.until(reactor, "connections refused so far, 16 were up")
        during = server.resources()
        answered = await honestCalls(reactor, server.port, 5)
        assert answered == 5, f"{answered} of 5 honest clients answered: {server.log()[-2000:]}"
        assert during["fds"] < before["fds"] + 16 + 8, (before, during)
        assert during["rss"] - before["rss"] < RSS_BOUND, (before, during)
        closeAll(attackers)
        attackers = []
        # Once the half-sent requests' lifetime (2 s) is over, the page answers again.
        body = b""

        def answers() -> bool:
            nonlocal body
            body = scrape(metrics)
            return b"chunkwire_connections" in body

        await waitFor(reactor, answers, lambda: body[-500:])
    finally:
        closeAll(attackers)
        server.stop()


class MetricsTests(TestCase):
    test_metrics_flood = trialTest(metricsFlood, timeout=TEST_TIMEOUT)


test_metrics_flood = pytestTest(metricsFlood, timeout=TEST_TIMEOUT)


async def capFromFiftyAddresses(reactor: Any) -> None:
    """1,000 idle connections from 50 addresses leave the reserve to new addresses; past it, the longest idle go."""
    from framing.wire import PREAMBLE

    server = Twist("chunkwire-kv", "--evict-idle-after", "1")
    attackers: list[Any] = []
    try:
        await server.listening(reactor)
        before = server.resources()
        for n in range(50):
            attackers += rawConnections(20, f"127.0.1.{n + 1}", server.port, PREAMBLE)
            await deferLater(reactor, 0)
        first = list(attackers)
        # The last 50 of the 1,000 slots are for new addresses: about 950 of these get in, the rest are
        # refused.  Wait until the server has dealt with every one (each held or closed), however long it takes.
        await waitFor(
            reactor,
            lambda: closedByServer(first) + server.resources()["fds"] - before["fds"] >= len(first),
            lambda: (closedByServer(first), server.resources(), before, server.log()[-2000:]),
        )
        await server.until(reactor, "are kept for addresses with none up")
        refused = closedByServer(first)
        # New clients get 5 of 5.
        answered = await honestCalls(reactor, server.port, 5, bind="127.0.9.1")
        assert answered == 5, f"{answered} of 5 honest clients answered: {server.log()[-2000:]}"
        # The behaviour under test, not a wait for an event: the first flood's connections
        # (all read by now) stay idle past --evict-idle-after (1 s), so that they may be evicted.
        await deferLater(reactor, 1.2)
        # 200 more addresses, one connection each, fill the reserve; then the server is full.
        for n in range(200):
            attackers += rawConnections(1, f"127.0.2.{n + 1}", server.port, PREAMBLE)
        # The room came from the connections idle longest: the first flood's (beyond the 50 the reserve refused).
        await waitFor(
            reactor,
            lambda: closedByServer(first) - refused >= 150,
            lambda: (refused, closedByServer(first), server.log()[-2000:]),
        )
        answered = await honestCalls(reactor, server.port, 5, bind="127.0.9.2")
        assert answered == 5, f"{answered} of 5 honest clients answered when full: {server.log()[-2000:]}"
        during = server.resources()
        # Never more than the cap: the evicted are aborted at once.
        assert during["fds"] < before["fds"] + 1000 + 16, (before, during)
        assert during["rss"] - before["rss"] < RSS_BOUND, (before, during)
    finally:
        closeAll(attackers)
        server.stop()


class CapTests(TestCase):
    test_cap_from_fifty_addresses = trialTest(capFromFiftyAddresses, timeout=TEST_TIMEOUT)


test_cap_from_fifty_addresses = pytestTest(capFromFiftyAddresses, timeout=TEST_TIMEOUT)


async def trustedProxyAddresses(reactor: Any) -> None:
    """
    Behind haproxy:, 25 clients relayed by the trusted proxy are each counted
    under their own address (25 of 25 served), and a client that reaches the
    backend directly with spoofed PROXY headers is throttled and logged under
    its own address.
    """
    from twisted.cred.credentials import UsernamePassword
    from twisted.internet.endpoints import TCP4ClientEndpoint

    from protocols.auth import LoginRefused
    from protocols.auth._users import addUser

    from .attacks_round3_net import HeaderFirstEndpoint, ProxyRelay, proxyV2

    with tempfile.TemporaryDirectory() as directory:
        users = os.path.join(directory, "users")
        addUser(users, "ada", b"correct horse", iterations=4096)
        listen = "haproxy:tcp:0:interface=127.0.0.1:backlog=1024"
        server = Twist("chunkwire-kv", "--users", users, "--trusted-proxy", "127.0.0.2", listen=listen)
        relay: ProxyRelay | None = None
        roots: list[Any] = []
        try:
            await server.listening(reactor)
            relay = ProxyRelay(reactor, server.port, "127.0.0.2")
            front = await relay.start()
            before = server.resources()
            good = UsernamePassword(b"ada", b"correct horse")
            for n in range(25):
                description = f"tcp:host=127.0.0.1:port={front}:bindAddress=127.0.3.{n + 1}:timeout=30"
                try:
                    roots.append(await rpc.login(reactor, description, good).addTimeout(DEADLINE, reactor))
                except Exception:
                    continue
            answered = 0
            for n, root in enumerate(roots):
                await root.callRemote("put", f"k{n}", f"v{n}")
                answered += await root.callRemote("get", f"k{n}") == f"v{n}"
            assert answered == 25, f"{answered} of 25 relayed clients served: {server.log()[-2000:]}"
            # A direct client (127.0.0.3, no trusted proxy) claims a new source for each wrong password.
            refused = 0
            for n in range(30):
                inner = TCP4ClientEndpoint(reactor, "127.0.0.1", server.port, bindAddress=("127.0.0.3", 0))
                header = proxyV2((f"10.0.{n // 250}.{n % 250 + 1}", 40000 + n), ("127.0.0.1", server.port))
                try:
                    await rpc.login(reactor, HeaderFirstEndpoint(inner, header), UsernamePassword(b"ada", b"guess"))
                except LoginRefused:
                    refused += 1
            # Then the right password, claiming yet another fresh source: were the
            # guesses counted under their claimed sources, this one would get in;
            # counted under the direct client's own address, it is throttled.  (The
            # log cannot tell: login refusals are logged at a bounded rate.)
            inner = TCP4ClientEndpoint(reactor, "127.0.0.1", server.port, bindAddress=("127.0.0.3", 0))
            header = proxyV2(("10.0.9.9", 40999), ("127.0.0.1", server.port))
            try:
                late = await rpc.login(reactor, HeaderFirstEndpoint(inner, header), good)
            except LoginRefused:
                throttled = True
            else:
                throttled = False
                late.broker.transport.loseConnection()
            log = server.log()
            figure(f"trusted proxy: {answered} of 25 relayed served; spoofed guesses throttled: {throttled}")
            assert refused == 30 and throttled, (refused, throttled, log[-2000:])
            assert "from 10.0." not in log and "host='10.0." not in log, log[-3000:]
            assert "which is no trusted proxy, claims 10.0.0.1" in log, log[-2000:]
            after = server.resources()
            assert after["rss"] - before["rss"] < RSS_BOUND, (before, after)
            assert after["fds"] < before["fds"] + 25 + 16, (before, after)
        finally:
            for root in roots:
                root.broker.connection.transport.abortConnection()
            if relay is not None:
                await relay.stop()
            server.stop()


class ProxyTests(TestCase):
    test_trusted_proxy_addresses = trialTest(trustedProxyAddresses, timeout=TEST_TIMEOUT)


test_trusted_proxy_addresses = pytestTest(trustedProxyAddresses, timeout=TEST_TIMEOUT)


class HeaderTests(SynchronousTestCase):
    """The PROXY header reader (sans-IO) and whom it believes."""

    def test_versions(self) -> None:
        """v1 and v2 headers give their source and length; LOCAL and UNKNOWN give no source."""
        from .attacks_round3_net import proxyV2

        v2 = proxyV2(("10.0.0.7", 4000), ("127.0.0.1", 80))
        source, length = readHeader(v2 + b"rest") or (None, 0)
        self.assertEqual((source.host, source.port, length), ("10.0.0.7", 4000, len(v2)))
        v1 = b"PROXY TCP6 2001:db8::1 ::1 5000 80\r\n"
        source, length = readHeader(v1 + b"rest") or (None, 0)
        self.assertEqual((source.host, length), ("2001:db8::1", len(v1)))
        self.assertEqual(readHeader(b"PROXY UNKNOWN\r\n"), (None, 15))
        self.assertEqual(readHeader(v2[:12] + b"\x20\x00\x00\x00"), (None, 16))

    def test_partialAndBad(self) -> None:
        """A partial header asks for more; anything else is a typed error, a v1 line past 107 bytes included."""
        from .attacks_round3_net import proxyV2

        self.assertIsNone(readHeader(b"PROX"))
        self.assertIsNone(readHeader(proxyV2(("10.0.0.7", 1), ("127.0.0.1", 2))[:20]))
        for bad, code in [
            (b"GET / HTTP/1.1\r\n", "no-proxy-header"),
            (b"PROXY " + b"x" * 120, "proxy-header-too-long"),
            (b"PROXY TCP4 10.0.0.1 ::1 1 2\r\n", "bad-proxy-header"),
            (b"PROXY TCP4 nonsense 10.0.0.1 1 2\r\n", "bad-proxy-header"),
        ]:
            with self.assertRaises(ProxyHeaderError) as caught:
                readHeader(bad)
            self.assertEqual(caught.exception.code, code)

    def test_trust(self) -> None:
        """Loopback (and UNIX sockets) by default; --trusted-proxy names addresses and networks; none trusts nobody."""
        from twisted.internet.address import IPv4Address, IPv6Address, UNIXAddress

        default = TrustedProxies()
        self.assertTrue(default.trusts(IPv4Address("TCP", "127.0.0.9", 1)))
        self.assertTrue(default.trusts(IPv6Address("TCP", "::1", 1)))
        self.assertTrue(default.trusts(UNIXAddress(None)))
        self.assertFalse(default.trusts(IPv4Address("TCP", "10.0.0.1", 1)))
        named = TrustedProxies.parse("10.1.0.0/16, 192.0.2.7")
        self.assertTrue(named.trusts(IPv4Address("TCP", "10.1.200.3", 1)))
        self.assertTrue(named.trusts(IPv6Address("TCP", "::ffff:192.0.2.7", 1)))
        self.assertFalse(named.trusts(IPv4Address("TCP", "127.0.0.1", 1)))
        self.assertFalse(TrustedProxies.parse("none").trusts(IPv4Address("TCP", "127.0.0.1", 1)))
        self.assertRaises(ValueError, TrustedProxies.parse, "not-an-address")


class DrainTests(TestCase):
    test_drain_non_reader = trialTest(drainNonReader, timeout=TEST_TIMEOUT)


test_drain_non_reader = pytestTest(drainNonReader, timeout=TEST_TIMEOUT)
