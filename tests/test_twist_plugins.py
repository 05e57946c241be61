"""The twist plugins in twisted/plugins/chunkwire_plugins.py: options, help text, and real services."""

from __future__ import annotations

import socket
import subprocess
import sys

from twisted.application.service import IServiceMaker
from twisted.plugin import IPlugin, getPlugins
from twisted.trial.unittest import SynchronousTestCase

from framing import Decoder, Encoder
from framing.wire import PREAMBLE
from tests.protocols.rpc.test_kv_example import ENV, ROOT, readUntil, stop
from twisted.plugins import chunkwire_plugins


def twist(*arguments: str) -> subprocess.Popen[bytes]:
    """Start C{python -m twisted} (the C{twist} command) with C{arguments}, its log on a pipe."""
    command = [sys.executable, "-m", "twisted", *arguments]
    return subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


class OptionsTests(SynchronousTestCase):
    """The plugins' options parse as their help text says."""

    def test_pluginsFound(self) -> None:
        """Twisted's plugin system finds both service makers by their tap names."""
        names = {maker.tapname for maker in getPlugins(IServiceMaker)}
        self.assertTrue({"chunkwire-echo", "chunkwire-kv"} <= names, names)
        self.assertTrue(IPlugin.providedBy(chunkwire_plugins.echoServiceMaker))

    def test_listenRepeatable(self) -> None:
        """--listen may be given several times and every description is kept, in order."""
        options = chunkwire_plugins.EchoOptions()
        options.parseOptions(["--listen", "tcp:1234", "-l", "unix:/tmp/x.sock", "--trace"])
        self.assertEqual((options["listen"], options["trace"]), (["tcp:1234", "unix:/tmp/x.sock"], True))

    def test_defaults(self) -> None:
        """Without --listen, echo listens on tcp:8750 and kv on tcp:8760, with the default limits."""
        echo, kv = chunkwire_plugins.EchoOptions(), chunkwire_plugins.KeyValueOptions()
        echo.parseOptions([])
        kv.parseOptions([])
        self.assertEqual((echo["listen"], kv["listen"], echo.limits()), (["tcp:8750"], ["tcp:8760"], None))

    def test_maxBytes(self) -> None:
        """--max-bytes becomes the max_bytes_length of the service's Limits."""
        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions(["--max-bytes", "1000"])
        self.assertEqual(options.limits().max_bytes_length, 1000)

    def test_makeService(self) -> None:
        """makeService builds one endpoint service per --listen, not yet started."""
        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions(["--listen", "tcp:0", "--listen", "tcp:0"])
        service = chunkwire_plugins.keyValueServiceMaker.makeService(options)
        self.assertEqual((len(list(service)), service.running), (2, 0))


class TwistTests(SynchronousTestCase):
    """C{twist chunkwire-echo} and C{twist chunkwire-kv} run as real processes."""

    def test_help(self) -> None:
        """twist chunkwire-echo --help describes --listen and --trace and exits cleanly."""
        result = subprocess.run(
            [sys.executable, "-m", "twisted", "chunkwire-echo", "--help"],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=30,
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("--listen", result.stdout)
        self.assertIn("--trace", result.stdout)

    def test_echoOneObject(self) -> None:
        """A chunkwire-echo process sends back an object written to it over a plain socket."""
        server = twist("chunkwire-echo", "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"starting on (\d+)").group(1))
        sent = {"name": "ada", "data": b"\x00\x01" * 100, "n": [1, 2.5, None]}
        with socket.create_connection(("127.0.0.1", port), timeout=20) as connection:
            connection.sendall(PREAMBLE + Encoder().encode(sent))
            decoder = Decoder()
            received: list[object] = []
            while not received:
                chunk = connection.recv(65536)
                self.assertTrue(chunk, "the server closed the connection")
                received += decoder.feed(chunk)
        self.assertEqual(received, [sent])

    def test_keyValue(self) -> None:
        """A chunkwire-kv process stores a value that the example client puts and gets back."""
        server = twist("chunkwire-kv", "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"starting on (\d+)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"

        def client(*arguments: str) -> str:
            command = [sys.executable, "examples/kv_client.py", "--connect", address, *arguments]
            result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 0, result.stderr)
            return result.stdout

        self.assertEqual(client("put", "colour", "blue"), "put colour\n")
        self.assertEqual(client("get", "colour"), "blue\n")
