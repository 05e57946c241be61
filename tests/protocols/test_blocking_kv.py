"""The blocking client (L{protocols.blocking}) against the real key-value example server, run as a process.

One server (examples/kv_server.py) serves the whole class under pytest (each test
its own under trial: tests.processes.ClassProcessesCase); each case uses
keys of its own.  Listed in dev.py's PROCESS_TESTS (compiled core only).
"""

from __future__ import annotations

import threading
from typing import Any

from framing.rpc._errors import DeadReferenceError, NoSuchMethod, RemoteViolation
from framing.rpc._limits import CallLimits
from framing.rpc._referenceable import Referenceable
from framing.rpc._signatures import remote
from protocols.blocking import BlockingConnection, connect
from protocols.kv import KeyNotFound
from protocols.options import ClientOptions
from tests.processes import ClassProcessesCase, readUntil, startExample, stop

HANG = 30.0
"""Seconds within which anything that is not a hang finishes, however loaded the machine."""


class Watcher(Referenceable):
    """A watcher as a client without Twisted writes it: the server calls its C{changed}."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, str | None]] = []

    @remote
    def changed(self, key: str, value: str | None) -> None:
        self.changes.append((key, value))


class KeyValueTests(ClassProcessesCase):
    """Calls of every outcome against examples/kv_server.py, as the Twisted client makes them."""

    server: Any  # a zygote child or a Popen (tests.processes.startExample)
    address: str

    @classmethod
    def startProcesses(cls) -> None:
        cls.server = startExample("kv_server.py", "--listen", "tcp:0:interface=127.0.0.1")
        port = int(readUntil(cls.server, rb"port=(\d+)").group(1))
        cls.address = f"127.0.0.1:{port}"

    @classmethod
    def stopProcesses(cls) -> None:
        stop(cls.server)

    def connect(self) -> BlockingConnection:
        connection = connect(self.address, options=ClientOptions(timeout=HANG, callLimits=CallLimits(callTimeout=HANG)))
        self.addCleanup(connection.close)
        return connection

    def test_putGetListDelete(self) -> None:
        """put, get, list and delete return the server's results."""
        root = self.connect().root
        self.assertIsNone(root.callRemote("put", "basic/a", "one"))
        root.callRemote("put", "basic/b", "two")
        self.assertEqual(root.callRemote("get", "basic/a"), "one")
        self.assertEqual(root.callRemote("list", prefix="basic/"), ["basic/a", "basic/b"])
        self.assertTrue(root.callRemote("delete", "basic/a"))
        self.assertEqual(root.callRemote("list", "basic/"), ["basic/b"])

    def test_registeredError(self) -> None:
        """A missing key raises KeyNotFound itself (registered on both sides), not a RemoteError."""
        root = self.connect().root
        error = self.assertRaises(KeyNotFound, root.callRemote, "get", "missing/key")
        self.assertEqual(error.args, ("missing/key",))

    def test_noSuchMethod(self) -> None:
        """A method the server does not expose raises NoSuchMethod, suggesting the close one."""
        error = self.assertRaises(NoSuchMethod, self.connect().root.callRemote, "gett", "k")
        self.assertIn("did you mean 'get'", str(error))

    def test_violation(self) -> None:
        """An argument over the interface's constraint raises RemoteViolation saying which; the connection stays."""
        root = self.connect().root
        error = self.assertRaises(RemoteViolation, root.callRemote, "put", "k" * 2000, "v")
        self.assertEqual((error.code, error.where), ("body-too-large", "args[0]"))
        error = self.assertRaises(RemoteViolation, root.callRemote, "get")
        self.assertEqual(error.code, "wrong-arguments")
        root.callRemote("put", "violation/ok", "still up")
        self.assertEqual(root.callRemote("get", "violation/ok"), "still up")

    def test_threads(self) -> None:
        """Eight threads calling at once on one connection each get their own values back."""
        root = self.connect().root
        seen: dict[int, list[Any]] = {}

        def work(worker: int) -> None:
            values = []
            for n in range(50):
                key = f"threads/{worker}/{n}"
                root.callRemote("put", key, f"{worker}:{n}")
                values.append(root.callRemote("get", key))
            seen[worker] = values

        threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(HANG)
        self.assertEqual(seen, {worker: [f"{worker}:{n}" for n in range(50)] for worker in range(8)})

    def test_closed(self) -> None:
        """After the context manager closes the connection, a call raises DeadReferenceError."""
        with connect(self.address, options=ClientOptions(timeout=HANG)) as connection:
            connection.root.callRemote("put", "closed/k", "v")
        self.assertRaises(DeadReferenceError, connection.root.callRemote, "get", "closed/k")

    def test_watch(self) -> None:
        """A watcher passed to watch() is called back during the put that changes its key; unwatch() stops it."""
        root = self.connect().root
        watcher = Watcher()
        self.assertIsNone(root.callRemote("watch", "watch/k", watcher))
        root.callRemote("put", "watch/k", "one")
        root.callRemote("delete", "watch/k")
        # The server's changed() calls come before its answers: served by the time each call returned.
        self.assertEqual(watcher.changes, [("watch/k", "one"), ("watch/k", None)])
        self.assertTrue(root.callRemote("unwatch", "watch/k", watcher))
        root.callRemote("put", "watch/k", "two")
        self.assertEqual(len(watcher.changes), 2)
