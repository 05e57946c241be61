"""The examples' --trace switch logs each token in readable form and leaves the commands' answers alone."""

from __future__ import annotations

import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase

from tests.protocols.rpc.test_kv_example import ENV, ROOT, readUntil, stop


def start(*command: str) -> subprocess.Popen[bytes]:
    """Start an example server, its output (log included) on a pipe."""
    process = subprocess.Popen(
        [sys.executable, *command], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    return process


def run(*command: str) -> subprocess.CompletedProcess[str]:
    """Run an example client to its end."""
    return subprocess.run([sys.executable, *command], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)


class ExampleTraceTests(SynchronousTestCase):
    """Servers trace into their log; clients trace to stderr."""

    def test_keyValueTrace(self) -> None:
        """kv_server --trace logs the call it receives; kv_client --trace logs it sent and prints the usual answer."""
        server = start("examples/kv_server.py", "--trace", "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"kv server listening on .* port=(\d+)\)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        put = run("examples/kv_client.py", "--trace", "--connect", address, "put", "colour", "blue")
        self.assertEqual((put.returncode, put.stdout), (0, "put colour\n"), put.stderr)
        self.assertIn("-> STRING 'put'", put.stderr)
        self.assertIn("<- SIMPLE None", put.stderr)
        readUntil(server, rb"<- STRING 'put'.*\n.*<- SIMPLE None.*\n.*<- STRING 'colour'")

    def test_echoTrace(self) -> None:
        """echo_server --trace logs what it echoes; echo_client --trace logs what it sends."""
        server = start("examples/echo_server.py", "--trace", "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"echo server listening on .* port=(\d+)\)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        client = run("examples/echo_client.py", "--trace", "--connect", address, "--count", "10", "--window", "2")
        self.assertEqual(client.returncode, 0, client.stderr)
        self.assertIn("-> STRING 'text ✓'", client.stderr)
        readUntil(server, "(?s)<- STRING 'text ✓'.*-> STRING 'text ✓'".encode())

    def test_bulkTrace(self) -> None:
        """bulk_server --trace logs what it receives; bulk_client --trace logs to stderr and still lists the files."""
        directory = self.mktemp()
        server = start(
            "examples/bulk_server.py", "--trace", "--dir", directory, "--listen", "tcp:0:interface=127.0.0.1"
        )
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"bulk server listening on .* port=(\d+)\)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        listing = run("examples/bulk_client.py", "--trace", "--connect", address, "list")
        self.assertEqual((listing.returncode, listing.stdout), (0, ""), listing.stderr)
        self.assertIn("-> STRING 'list'", listing.stderr)
        readUntil(server, rb"<- STRING 'list'")
