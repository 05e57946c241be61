"""An object served by a URL kept across restarts: protocols.auth._publishing, and twist chunkwire-kv --names."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from twisted.logger import formatEvent
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import rpc
from protocols.auth import _publishing as publishing
from protocols.auth._authority import CertificateAuthority
from protocols.auth._names import NameTable
from protocols.auth._publishing import URLPublishing, hintsFor
from protocols.auth._urls import ObjectURL
from twisted.plugins import chunkwire_plugins

from ..helpers import capturedLogs, pytestTest, trialTest
from .tlspeers import removeDirectory, shortDirectory


class HintTests(SynchronousTestCase):
    """hintsFor says where clients reach a plain listening description, or that it cannot know."""

    def test_known(self) -> None:
        """A tcp: or tcp6: port on one address, and a unix: socket (made absolute), give their hints."""
        descriptions = ["tcp:8762:interface=192.0.2.7", "tcp6:8763:interface=\\:\\:1", "unix:kv.sock"]
        expected = ["192.0.2.7:8762", "[::1]:8763", "unix:" + os.path.abspath("kv.sock")]
        self.assertEqual(hintsFor(descriptions), expected)

    def test_unknown(self) -> None:
        """Port 0, every address, and endpoints of other kinds are ValueErrors asking for the hint."""
        for description in ("tcp:0:interface=127.0.0.1", "tcp:8762", "tcp:8762:interface=0.0.0.0", "ssl:8762"):
            error = self.assertRaises(ValueError, hintsFor, [description])
            self.assertIn(f"where clients reach {description} is not in it", str(error))


class PublishingTests(SynchronousTestCase):
    """URLPublishing writes a URL once and publishes the object under its name at every start."""

    def setUp(self) -> None:
        directory = Path(self.mktemp()).resolve()
        directory.mkdir()
        self.publishing = URLPublishing(
            str(directory / "kv.names"), str(directory / "kv.pem"), str(directory / "kv.url"), ("127.0.0.1:8762",)
        )
        self.urlFile = Path(self.publishing.urlFile)

    def test_urlWrittenOnce(self) -> None:
        """The first start writes the URL (0600); a restart publishes the object under that URL's name, file alone."""
        store = object()
        table, made = self.publishing.publish(store, "kv store")
        self.assertTrue(made)
        self.assertEqual(self.urlFile.stat().st_mode & 0o777, 0o600)
        written = self.urlFile.read_bytes()
        url = ObjectURL.parse(written.decode().strip())
        self.assertEqual((url.keyHash, url.hints), (self.publishing.serverIdentity().keyHash, ("127.0.0.1:8762",)))
        self.assertEqual(table.lookup(url.name), (store, "kv store"))
        self.assertNotIn(url.name, Path(self.publishing.names).read_text())
        again = object()
        table, made = self.publishing.publish(again, "kv store")
        self.assertFalse(made)
        self.assertEqual(self.urlFile.read_bytes(), written)
        self.assertEqual(table.lookup(url.name), (again, "kv store"))

    def test_unwrittenURLRevoked(self) -> None:
        """When the URL file cannot be written, the new name is revoked: no name is kept that nobody holds."""

        def failing(path: object, content: bytes, *, replace: bool = False) -> None:
            raise OSError(28, "No space left on device")

        self.patch(publishing, "writePrivately", failing)
        self.assertRaises(OSError, self.publishing.publish, object(), "kv store")
        self.assertEqual(len(NameTable(self.publishing.names)), 0)

    def test_badHint(self) -> None:
        """A hint a URL cannot hold is a ValueError when the publishing is made."""
        self.assertRaises(ValueError, URLPublishing, "n", "k", "u", ("127.0.0.1",))

    def test_serverDescriptions(self) -> None:
        """Plain endpoints are served with the key (ssl: for tcp:, chunkwire-tls: for unix:); a TLS one is refused."""
        tls = self.publishing.serverDescriptions(["tcp:8762", "unix:/tmp/kv.sock"])
        self.assertEqual([description.split(":")[0] for description in tls], ["ssl", "chunkwire-tls"])
        self.assertTrue(all(f"privateKey={self.publishing.identity}" in description for description in tls))
        self.assertRaises(ValueError, self.publishing.serverDescriptions, ["ssl:8762:privateKey=x.pem"])


class NamesOptionTests(SynchronousTestCase):
    """twist chunkwire-kv --names: its options, and what they refuse."""

    def setUp(self) -> None:
        self.work = Path(self.mktemp()).resolve()
        self.work.mkdir()
        self.names = str(self.work / "kv.names")
        self.corrupt = self.work / "corrupt.names"
        self.corrupt.write_text("[]")
        # A real key and certificate: the plugin reads an ssl: listener's files while parsing its options.
        key = self.work / "server.pem"
        CertificateAuthority.generate().issue("localhost", server=True).writePEM(key)
        self.tlsListen = f"ssl:1:privateKey={key}"

    def parse(self, *arguments: str) -> chunkwire_plugins.KeyValueOptions:
        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions(list(arguments))
        return options

    def test_defaults(self) -> None:
        """The key and URL files default to the names file's name plus .pem and .url; the listener becomes TLS."""
        options = self.parse("--names", self.names, "--listen", "tcp:8762:interface=127.0.0.1")
        published = options["publishing"]
        self.assertEqual((published.identity, published.urlFile), (self.names + ".pem", self.names + ".url"))
        self.assertEqual(published.hints, ("127.0.0.1:8762",))
        self.assertTrue(options["listen"][0].startswith("ssl:8762:"))
        self.assertEqual(
            options.logins().notice(), f"logins: required (the object URL whose name is kept in {self.names})"
        )

    def test_hints(self) -> None:
        """--url-hint, repeatable, names where clients connect, whatever the listener."""
        options = self.parse(
            "--names", self.names, "--url-hint", "kv.example.com:443", "--url-hint", "[2001:db8::1]:443"
        )
        self.assertEqual(options["publishing"].hints, ("kv.example.com:443", "[2001:db8::1]:443"))

    def test_refused(self) -> None:
        """--names with an unknowable hint, a TLS listener, --client-ca or --workers, and its options alone: refused."""
        for arguments, said in (
            (["--names", self.names], "is not in it (a port 0, every address, another kind): give --url-hint"),
            (["--names", self.names, "--url-hint", "h:1", "--listen", self.tlsListen], "TLS already"),
            (
                ["--names", self.names, "--url-hint", "h:1", "--client-ca", str(self.work), "-l", self.tlsListen],
                "goes with neither --client-ca",
            ),
            (["--names", self.names, "--url-hint", "h:1", "--workers", "2", "--store", "s"], "nor --workers"),
            (["--url-file", "u"], "go with --names"),
            (["--names", str(self.corrupt), "--url-hint", "h:1"], "not a name table"),
        ):
            error = self.assertRaises(usage.UsageError, self.parse, *arguments)
            self.assertIn(said, str(error), arguments)


async def sameURLAfterRestart(reactor: Any) -> None:
    """
    twist chunkwire-kv --names serves the store by the URL it writes at its
    first start, logs where that URL is and never the URL; after a restart
    the same URL reaches the store (kept in --store), and the client sees
    what it put before.
    """
    directory = shortDirectory()
    try:
        arguments = [
            "--listen",
            f"unix:{directory / 'kv.sock'}",
            "--names",
            str(directory / "kv.names"),
            "--store",
            str(directory / "kv.sqlite"),
        ]

        async def run(client: Any) -> list[str]:
            options = chunkwire_plugins.KeyValueOptions()
            options.parseOptions(arguments)
            with capturedLogs() as events:
                service = chunkwire_plugins.keyValueServiceMaker.makeService(options)
            service.startService()
            try:
                url = (directory / "kv.names.url").read_text().strip()
                remote = await rpc.connectURL(reactor, url)
                await client(remote)
                await remote.broker.disconnect()
            finally:
                await service.stopService()
            return [formatEvent(event) for event in events]

        async def put(remote: Any) -> None:
            await remote.callRemote("put", "greeting", "hello")

        async def get(remote: Any) -> None:
            assert await remote.callRemote("get", "greeting") == "hello"

        first = await run(put)
        url = ObjectURL.parse((directory / "kv.names.url").read_text().strip())
        assert any(f"written to {directory / 'kv.names.url'}" in line for line in first), first
        second = await run(get)
        assert ObjectURL.parse((directory / "kv.names.url").read_text().strip()) == url
        assert any("kept since an earlier start" in line for line in second), second
        assert not any(url.name in line for line in first + second)
    finally:
        removeDirectory(directory)


class RestartTests(TestCase):
    """Over a real UNIX socket with TLS (trial runs this; pytest runs the twin below)."""

    timeout = 60
    test_sameURLAfterRestart = trialTest(sameURLAfterRestart)


test_same_url_after_restart = pytestTest(sameURLAfterRestart)
