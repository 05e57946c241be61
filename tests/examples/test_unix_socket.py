"""The echo example over a UNIX socket, as the README and docs/services.rst show it beside TCP and TLS."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ENV, ROOT, readUntil, runExample, stop


class UnixSocketTests(SynchronousTestCase):
    """examples/echo_server.py listens on TCP and a UNIX socket at once; the client works over the socket."""

    def test_echoOverUnixSocket(self) -> None:
        """The example client checks every sample type against the server over unix:path=..., with no mismatch."""
        if not hasattr(socket, "AF_UNIX"):
            self.skipTest("no UNIX sockets on this platform")
        # A short directory: a UNIX socket's path is limited to about 100 bytes.
        directory = Path(tempfile.mkdtemp(prefix="cw-"))
        self.addCleanup(shutil.rmtree, directory, True)
        path = directory / "echo.sock"
        command = ["examples/echo_server.py", "--listen", "tcp:0:interface=127.0.0.1", "--listen", f"unix:{path}"]
        server = subprocess.Popen([sys.executable, *command], cwd=ROOT, env=ENV, stdout=subprocess.PIPE)
        self.addCleanup(stop, server)
        readUntil(server, rb"echo server listening on unix:" + re.escape(str(path).encode()))
        client = runExample("echo_client.py", "--connect", f"unix:path={path}", "--count", "50", timeout=30)
        self.assertEqual(client.returncode, 0, client.stderr)
        self.assertNotIn("MISMATCH", client.stdout)
        self.assertIn("stream     8 chunks", client.stdout)
        self.assertEqual(client.stdout.count("objects/s"), 2, client.stdout)
