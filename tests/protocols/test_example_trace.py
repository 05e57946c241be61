"""The examples' --trace switch logs each token in readable form and leaves the commands' answers alone."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import readUntil, runExample, startExample, stop


class ExampleTraceTests(SynchronousTestCase):
    """Servers trace into their log; clients trace to stderr."""

    def test_keyValueTrace(self) -> None:
        """kv_server --trace logs the call it receives; kv_client --trace logs it sent and prints the usual answer."""
        server = startExample("kv_server.py", "--trace", "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"kv server listening on .* port=(\d+)\)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        put = runExample("kv_client.py", "--trace", "--connect", address, "put", "colour", "blue")
        self.assertEqual((put.returncode, put.stdout), (0, "put colour\n"), put.stderr)
        self.assertIn("-> STRING 'put'", put.stderr)
        self.assertIn("<- SIMPLE None", put.stderr)
        readUntil(server, rb"<- STRING 'put'.*\n.*<- SIMPLE None.*\n.*<- STRING 'colour'")

    def test_echoTrace(self) -> None:
        """echo_server --trace logs what it echoes; echo_client --trace logs what it sends."""
        server = startExample("echo_server.py", "--trace", "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"echo server listening on .* port=(\d+)\)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        client = runExample("echo_client.py", "--trace", "--connect", address, "--count", "10", "--window", "2")
        self.assertEqual(client.returncode, 0, client.stderr)
        self.assertIn("-> STRING 'text ✓'", client.stderr)
        readUntil(server, "(?s)<- STRING 'text ✓'.*-> STRING 'text ✓'".encode())

    def test_bulkTrace(self) -> None:
        """bulk_server --trace logs what it receives; bulk_client --trace logs to stderr and still lists the files."""
        directory = self.mktemp()
        server = startExample("bulk_server.py", "--trace", "--dir", directory, "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"bulk server listening on .* port=(\d+)\)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        listing = runExample("bulk_client.py", "--trace", "--connect", address, "list")
        self.assertEqual((listing.returncode, listing.stdout), (0, ""), listing.stderr)
        self.assertIn("-> STRING 'list'", listing.stderr)
        readUntil(server, rb"<- STRING 'list'")
