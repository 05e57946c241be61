"""Object URLs: the text format, its vectors, and TLS pinned to the key hash a URL carries."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from twisted.internet.protocol import Factory
from twisted.trial.unittest import SkipTest, SynchronousTestCase, TestCase

from framing.login._urls import SCHEME, InvalidURL
from protocols.auth._identity import ServerIdentity, keyHash, spkiHash
from protocols.auth._urls import (
    KeyMismatch,
    ObjectURL,
    clientEndpoint,
    pinnedClientOptions,
)

from ..helpers import pytestTest, trialTest
from .tlspeers import ANSWER, GREETING, Proxy, RecorderFactory, hello, removeDirectory, settle, shortDirectory

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "object_urls.json"
HASH = "tuzhz6tqui3dw76ertkohgx2wsvdwcksphksa4bjyxjq4pcry6dq"
NAME = "aaaqeayeaudaocajbifqydiob4ibceqtcqkrmfyydenbwha5dypq"


class FormatTests(SynchronousTestCase):
    """ObjectURL.parse reads the canonical text, str() writes it, and anything else is refused with a reason."""

    def test_roundTrip(self) -> None:
        """Parsing gives the fields, and str() gives back the same text."""
        text = f"chunkwire://{HASH}@localhost:8750,[::1]:8750,unix:/run/a%2Cb.sock/{NAME}"
        url = ObjectURL.parse(text)
        self.assertEqual(url, ObjectURL(HASH, ("localhost:8750", "[::1]:8750", "unix:/run/a,b.sock"), NAME))
        self.assertEqual(str(url), text)
        self.assertEqual(SCHEME, "chunkwire")

    def test_unixPathsAreEncoded(self) -> None:
        """A unix: path keeps letters, digits, -._~/ and percent-encodes every other byte of its UTF-8."""
        url = ObjectURL(HASH, ("unix:/tmp/x y@z%,ü",), NAME)
        self.assertIn("@unix:/tmp/x%20y%40z%25%2C%C3%BC/", str(url))
        self.assertEqual(ObjectURL.parse(str(url)), url)

    def test_refusedWithReason(self) -> None:
        """A bad URL raises InvalidURL (a ValueError) whose reason says what is wrong."""
        with self.assertRaises(InvalidURL) as caught:
            ObjectURL.parse(f"chunkwire://{HASH}@localhost:99999/{NAME}")
        self.assertIsInstance(caught.exception, ValueError)
        self.assertIn("port", caught.exception.reason)
        self.assertIn("port", str(caught.exception))

    def test_constructorChecksFields(self) -> None:
        """An ObjectURL cannot be built from fields no URL text could carry."""
        self.assertRaises(InvalidURL, ObjectURL, HASH, (), NAME)
        self.assertRaises(InvalidURL, ObjectURL, HASH, ("localhost",), NAME)
        self.assertRaises(InvalidURL, ObjectURL, HASH.upper(), ("localhost:1",), NAME)
        self.assertRaises(InvalidURL, ObjectURL, HASH, ("unix:relative",), NAME)
        self.assertRaises(InvalidURL, ObjectURL, HASH, ("localhost:1",), NAME[:25])

    def test_longInputReasonIsShort(self) -> None:
        """A huge input is refused with a message of bounded size."""
        with self.assertRaises(InvalidURL) as caught:
            ObjectURL.parse("chunkwire://" + "a" * 100_000)
        self.assertLess(len(str(caught.exception)), 400)


class VectorTests(SynchronousTestCase):
    """tests/vectors/object_urls.json: key hashes and URLs, as docs/wire-format.md lists them."""

    def setUp(self) -> None:
        self.vectors = json.loads(VECTORS.read_text("utf-8"))

    def test_keyHashes(self) -> None:
        """Each SPKI and each certificate has the key hash the vectors give."""
        for vector in self.vectors["keyHashes"]:
            if "spkiHex" in vector:
                self.assertEqual(spkiHash(bytes.fromhex(vector["spkiHex"])), vector["keyHash"], vector["name"])
            else:
                self.assertEqual(keyHash(vector["certificatePEM"].encode("ascii")), vector["keyHash"], vector["name"])

    def test_noPrivateKey(self) -> None:
        """The vectors file holds no private key."""
        self.assertNotIn("PRIVATE", VECTORS.read_text("utf-8"))

    def test_valid(self) -> None:
        """Each valid URL parses to its fields and formats back to the same text."""
        self.assertTrue(self.vectors["valid"])
        for vector in self.vectors["valid"]:
            url = ObjectURL.parse(vector["url"])
            self.assertEqual(
                (url.keyHash, list(url.hints), url.name),
                (vector["keyHash"], vector["hints"], vector["objectName"]),
                vector["name"],
            )
            self.assertEqual(str(url), vector["url"])

    def test_documented(self) -> None:
        """docs/wire-format.md shows every vector: each key hash, valid URL and invalid vector's name."""
        document = (VECTORS.parents[2] / "docs" / "wire-format.md").read_text("utf-8")
        section = document[document.index("## 11. Object URLs") :]
        shown = [v["keyHash"] for v in self.vectors["keyHashes"]] + [v["url"] for v in self.vectors["valid"]]
        shown += [f"`{v['name']}`" for v in self.vectors["invalid"]]
        self.assertEqual([text for text in shown if text not in section], [])

    def test_invalid(self) -> None:
        """Each invalid URL is refused with InvalidURL and the reason the vectors give."""
        self.assertTrue(self.vectors["invalid"])
        for vector in self.vectors["invalid"]:
            with self.assertRaises(InvalidURL, msg=vector["name"]) as caught:
                ObjectURL.parse(vector["url"])
            self.assertEqual(caught.exception.reason, vector["why"], vector["name"])


class Servers:
    """The real server (key A, recording) and a proxy in front of it holding key B, both on loopback TCP."""

    async def start(self, reactor: Any) -> Servers:
        self.directory = shortDirectory()
        self.real = ServerIdentity.loadOrCreate(self.directory / "real.pem")
        self.impostor = ServerIdentity.loadOrCreate(self.directory / "proxy.pem")
        self.recorders = RecorderFactory()
        self.realPort = await self.real.serverEndpoint(reactor, "tcp:0:interface=127.0.0.1").listen(self.recorders)
        realURL = ObjectURL(self.real.keyHash, (f"127.0.0.1:{self.realPort.getHost().port}",), NAME)
        self.proxies: list[Proxy] = []

        def buildProxy() -> Proxy:
            self.proxies.append(Proxy(clientEndpoint(reactor, realURL)))
            return self.proxies[-1]

        listening = self.impostor.serverEndpoint(reactor, "tcp:0:interface=127.0.0.1")
        self.proxyPort = await listening.listen(Factory.forProtocol(buildProxy))
        self.proxyHint = f"127.0.0.1:{self.proxyPort.getHost().port}"
        return self

    async def stop(self) -> None:
        for proxy in self.proxies:
            await proxy.lost
            relay = await proxy.upstreamMade
            await relay.lost
        await settle(*self.recorders.built)
        await self.realPort.stopListening()
        await self.proxyPort.stopListening()
        removeDirectory(self.directory)


async def pinnedToTheRightKey(reactor: Any) -> None:
    """A client pinned to the server's key connects and exchanges data."""
    servers = await Servers().start(reactor)
    try:
        url = ObjectURL(servers.real.keyHash, (f"127.0.0.1:{servers.realPort.getHost().port}",), NAME)
        client = await hello(reactor, clientEndpoint(reactor, url))
        assert await client.answered == ANSWER
        assert servers.recorders.built[0].received == GREETING
        await settle(client)
    finally:
        await servers.stop()


async def proxyWithAnotherKey(reactor: Any) -> None:
    """Through a TLS-terminating proxy with another key, the handshake fails and the proxy decrypts zero bytes."""
    servers = await Servers().start(reactor)
    try:
        options = pinnedClientOptions(servers.real.keyHash)
        url = ObjectURL(servers.real.keyHash, (servers.proxyHint,), NAME)
        client = await hello(reactor, clientEndpoint(reactor, url, options=options))
        reason = await client.lost
        assert "SSL" in type(reason).__module__, reason
        assert not client.answered.called
        (mismatch,) = options.mismatches
        assert isinstance(mismatch, KeyMismatch)
        assert (mismatch.expected, mismatch.presented) == (servers.real.keyHash, servers.impostor.keyHash)
        (proxy,) = servers.proxies
        await proxy.lost
        assert proxy.received == b"", proxy.received
        assert all(recorder.received == b"" for recorder in servers.recorders.built)
    finally:
        await servers.stop()


async def proxyWithItsOwnKey(reactor: Any) -> None:
    """The same proxy passes data when the URL names the proxy's own key (so the refusal above is the key's doing)."""
    servers = await Servers().start(reactor)
    try:
        url = ObjectURL(servers.impostor.keyHash, (servers.proxyHint,), NAME)
        client = await hello(reactor, clientEndpoint(reactor, url))
        assert await client.answered == ANSWER
        (proxy,) = servers.proxies
        assert proxy.received == GREETING
        assert servers.recorders.built[0].received == GREETING
        await settle(client)
    finally:
        await servers.stop()


async def wrongKeyOverUNIX(reactor: Any) -> None:
    """Over a UNIX socket, a server with another key fails the handshake and receives nothing; the right key works."""
    directory = shortDirectory()
    server = ServerIdentity.loadOrCreate(directory / "server.pem")
    other = ServerIdentity.loadOrCreate(directory / "other.pem")
    factory = RecorderFactory()
    port = await server.serverEndpoint(reactor, f"unix:{directory / 's.sock'}").listen(factory)
    try:
        options = pinnedClientOptions(other.keyHash)
        wrong = ObjectURL(other.keyHash, (f"unix:{directory / 's.sock'}",), NAME)
        refused = await hello(reactor, clientEndpoint(reactor, wrong, options=options))
        await refused.lost
        assert [m.presented for m in options.mismatches] == [server.keyHash]
        await factory.built[0].lost
        assert factory.built[0].received == b""
        right = ObjectURL(server.keyHash, wrong.hints, NAME)
        client = await hello(reactor, clientEndpoint(reactor, right))
        assert await client.answered == ANSWER
        await settle(client, factory.built[1])
    finally:
        await port.stopListening()
        removeDirectory(directory)


async def pinnedOverIPv6(reactor: Any) -> None:
    """A URL with an [IPv6]:port hint reaches the server on ::1 with the pinned key."""
    if not socket.has_ipv6:
        raise SkipTest("no IPv6")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        raise SkipTest("no IPv6 loopback interface") from None
    directory = shortDirectory()
    server = ServerIdentity.loadOrCreate(directory / "server.pem")
    factory = RecorderFactory()
    port = await server.serverEndpoint(reactor, r"tcp6:0:interface=\:\:1").listen(factory)
    try:
        url = ObjectURL.parse(f"chunkwire://{server.keyHash}@[::1]:{port.getHost().port}/{NAME}")
        client = await hello(reactor, clientEndpoint(reactor, url))
        assert await client.answered == ANSWER
        await settle(client, *factory.built)
    finally:
        await port.stopListening()
        removeDirectory(directory)


class PinnedTests(TestCase):
    """Pinned TLS over real sockets (trial runs these; pytest runs the twins below)."""

    timeout = 30
    test_pinnedToTheRightKey = trialTest(pinnedToTheRightKey)
    test_proxyWithAnotherKey = trialTest(proxyWithAnotherKey)
    test_proxyWithItsOwnKey = trialTest(proxyWithItsOwnKey)
    test_wrongKeyOverUNIX = trialTest(wrongKeyOverUNIX)
    test_pinnedOverIPv6 = trialTest(pinnedOverIPv6)


test_pinned_to_the_right_key = pytestTest(pinnedToTheRightKey)
test_proxy_with_another_key = pytestTest(proxyWithAnotherKey)
test_proxy_with_its_own_key = pytestTest(proxyWithItsOwnKey)
test_wrong_key_over_unix = pytestTest(wrongKeyOverUNIX)
test_pinned_over_ipv6 = pytestTest(pinnedOverIPv6)


class EndpointTests(SynchronousTestCase):
    """clientEndpoint's arguments."""

    def test_hintMustBeTheURLs(self) -> None:
        """A hint that is not the URL's, or options pinned to another key, are a ValueError."""
        from twisted.internet import reactor

        url = ObjectURL(HASH, ("localhost:1",), NAME)
        self.assertRaises(ValueError, clientEndpoint, reactor, url, "localhost:2")
        other = pinnedClientOptions("a" * 52)
        self.assertRaises(ValueError, clientEndpoint, reactor, url, options=other)
