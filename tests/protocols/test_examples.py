"""The echo examples run as the README says: a server process and client processes, over TCP and TLS."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ENV, ROOT, runExample


def readPorts(server: subprocess.Popen[bytes], count: int, timeout: float = 20) -> list[int]:
    """Read the server's output until it has said where its C{count} endpoints listen."""
    assert server.stdout is not None
    fd = server.stdout.fileno()
    output = b""
    deadline = time.monotonic() + timeout
    while True:
        # Raw reads after select: a buffered readline could hold a second line
        # that select would then never report.
        ports = [int(port) for port in re.findall(rb"echo server listening on .* port=(\d+)\)", output)]
        if len(ports) >= count:
            return ports
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise AssertionError(f"the echo server did not report its ports in time: {output!r}")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise AssertionError(f"the echo server exited early: {output!r}")
        output += chunk


class ExampleTests(SynchronousTestCase):
    """examples/echo_server.py and examples/echo_client.py work together."""

    def runClient(self, description: str) -> str:
        client = runExample("echo_client.py", "--connect", description, "--count", "200", "--window", "20", timeout=30)
        self.assertEqual(client.returncode, 0, client.stderr)
        return client.stdout

    def test_serverAndClients(self) -> None:
        """The example client checks every sample type against the example server, over TCP and over TLS."""
        directory = Path(self.mktemp())
        made = subprocess.run(
            [sys.executable, "examples/echo_server.py", "--make-cert", str(directory)],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=30,
        )
        self.assertEqual(made.returncode, 0, made.stderr)
        server = subprocess.Popen(
            [
                sys.executable,
                "examples/echo_server.py",
                "--listen",
                "tcp:0:interface=127.0.0.1",
                "--listen",
                f"ssl:0:privateKey={directory / 'server.pem'}:interface=127.0.0.1",
            ],
            cwd=ROOT,
            env=ENV,
            stdout=subprocess.PIPE,
        )
        try:
            tcp, tls = readPorts(server, 2)
            for description in (
                f"tcp:host=127.0.0.1:port={tcp}",
                f"ssl:host=127.0.0.1:port={tls}:caCertsDir={directory / 'ca'}:hostname=localhost",
            ):
                output = self.runClient(description)
                self.assertNotIn("MISMATCH", output)
                self.assertIn("stream     8 chunks", output)
                self.assertEqual(output.count("objects/s"), 2, output)
        finally:
            server.terminate()
            server.wait(timeout=10)
            if server.stdout is not None:
                server.stdout.close()
