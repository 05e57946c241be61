"""The key-value example runs as its docstrings say: a server process and client processes on endpoint strings."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ENV, ROOT, readUntil, reservePort, runExample, startExample, stop


class KeyValueExampleTests(SynchronousTestCase):
    """examples/kv_server.py and examples/kv_client.py work together over TCP."""

    def client(self, address: str, *arguments: str) -> subprocess.CompletedProcess[str]:
        return runExample("kv_client.py", "--connect", address, *arguments, timeout=30)

    def test_putGetListWatchDelete(self) -> None:
        """The client CLI puts, gets, lists and deletes keys, and a watcher sees every change."""
        server = startExample("kv_server.py", "--listen", "tcp:0:interface=127.0.0.1")
        self.addCleanup(stop, server)
        port = int(readUntil(server, rb"kv server listening on .* port=(\d+)\)").group(1))
        address = f"tcp:host=127.0.0.1:port={port}"
        put = self.client(address, "put", "colour", "blue")
        self.assertEqual((put.returncode, put.stdout), (0, "put colour\n"), put.stderr)
        self.assertEqual(self.client(address, "get", "colour").stdout, "blue\n")
        self.client(address, "put", "count", "1")
        self.assertEqual(self.client(address, "list").stdout, "colour\ncount\n")
        self.assertEqual(self.client(address, "list", "co").stdout, "colour\ncount\n")
        watcher = subprocess.Popen(
            [sys.executable, "examples/kv_client.py", "--connect", address, "watch", "colour", "--count", "2"],
            cwd=ROOT,
            env=ENV,
            stdout=subprocess.PIPE,
        )
        self.addCleanup(stop, watcher)
        readUntil(watcher, rb"watching colour \(now 'blue'\)\n")
        self.client(address, "put", "colour", "green")
        deleted = self.client(address, "delete", "colour")
        self.assertEqual((deleted.returncode, deleted.stdout), (0, "deleted colour\n"), deleted.stderr)
        readUntil(watcher, rb"colour = green\ncolour deleted\n")
        self.assertEqual(watcher.wait(timeout=20), 0)
        missing = self.client(address, "get", "colour")
        self.assertEqual((missing.returncode, missing.stderr), (1, "not found: colour\n"))
        self.assertEqual(self.client(address, "delete", "colour").returncode, 1)

    def test_storeSurvivesRestart(self) -> None:
        """With --store FILE, what a server answered as put is there for the next server on that file."""
        path = os.path.abspath(self.mktemp() + ".sqlite")  # the servers run from the project's root

        def start() -> tuple[Any, str]:
            server = startExample("kv_server.py", "--listen", "tcp:0:interface=127.0.0.1", "--store", path)
            self.addCleanup(stop, server)
            port = int(readUntil(server, rb"kv server listening on .* port=(\d+)\)").group(1))
            return server, f"tcp:host=127.0.0.1:port={port}"

        server, address = start()
        self.assertEqual(self.client(address, "put", "colour", "blue").returncode, 0)
        server.kill()  # no chance to close the file: the put was committed when it was answered
        server.wait()
        _, address = start()
        self.assertEqual(self.client(address, "get", "colour").stdout, "blue\n")

    def test_watchReportsChangeMissedWhileAway(self) -> None:
        """
        A change made while the watcher had no server (here: through another
        server on the same store) is printed and counted when it reconnects,
        so watch --count 1 ends rather than wait for a change already made.
        """
        path = os.path.abspath(self.mktemp() + ".sqlite")

        def start(port: int = 0) -> tuple[Any, int]:
            server = startExample("kv_server.py", "--listen", f"tcp:{port}:interface=127.0.0.1", "--store", path)
            self.addCleanup(stop, server)
            return server, int(readUntil(server, rb"kv server listening on .* port=(\d+)\)").group(1))

        # The watcher's port is held for the test: a server listens on it again later, after letting it go.
        reservation = reservePort()
        self.addCleanup(reservation.close)
        first, port = start(reservation.getsockname()[1])
        address = f"tcp:host=127.0.0.1:port={port}"
        command = [sys.executable, "examples/kv_client.py", "--connect", address, "watch", "colour", "--count", "1"]
        # (reconnecting every 0.5 s at most: with the default's 10 s the watcher would mostly wait out its backoff)
        watcher = subprocess.Popen(command + ["--retry-max", "0.5"], cwd=ROOT, env=ENV, stdout=subprocess.PIPE)
        self.addCleanup(stop, watcher)
        readUntil(watcher, rb"watching colour \(now unset\)\n")
        stop(first)
        other, otherPort = start()
        put = self.client(f"tcp:host=127.0.0.1:port={otherPort}", "put", "colour", "green")
        self.assertEqual(put.returncode, 0, put.stderr)
        stop(other)
        start(port)  # the watcher's address again, on the same store
        readUntil(watcher, rb"watching colour \(now 'green'\)\ncolour = green\n", timeout=60)
        self.assertEqual(watcher.wait(timeout=30), 0)

    def test_retryMaxMustBePositive(self) -> None:
        """watch --retry-max 0 is a usage error (status 2), before anything connects."""
        result = runExample("kv_client.py", "--connect", "tcp:host=127.0.0.1:port=1", "watch", "k", "--retry-max", "0")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--retry-max must be more than 0 seconds", result.stderr)

    def test_storeUnavailable(self) -> None:
        """A --store file that cannot be opened is one line naming it, and exit status 1."""
        result = runExample("kv_server.py", "--listen", "tcp:0", "--store", "/nonexistent/kv.sqlite")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr.count("\n"), 1, result.stderr)
        self.assertIn("--store /nonexistent/kv.sqlite", result.stderr)
