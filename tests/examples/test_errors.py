"""Every example CLI reports a refused connection, a bad endpoint, a port in use and a foreign peer in one line."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from tests.processes import ROOT, runPython

from .cli import address, clientRun, closedPort, foreignServer

CLIENTS = {
    "echo_client.py": ["--count", "5"],
    "kv_client.py": ["get", "greeting"],
    "bulk_client.py": ["list"],
}


def serverArguments(test: SynchronousTestCase) -> dict[str, list[str]]:
    """Each example server's arguments besides --listen."""
    return {
        "echo_server.py": ["--quiet"],
        "kv_server.py": [],
        "bulk_server.py": ["--dir", str(Path(test.mktemp()).resolve())],
    }


class ClientErrorTests(SynchronousTestCase):
    """The example clients: one line on stderr naming the address and the fix, a non-zero exit, --debug for more."""

    def check(self, arguments: list[str], expected: str) -> None:
        for script, rest in CLIENTS.items():
            done = clientRun(script, *arguments, *rest, timeout=30)
            self.assertNotEqual(done.returncode, 0, script)
            self.assertEqual(len(done.stderr.splitlines()), 1, f"{script}: {done.stderr}")
            self.assertIn(expected, done.stderr, script)
            self.assertNotIn("Traceback", done.stderr, script)

    def test_refused(self) -> None:
        """A refused connection is one line naming the endpoint and asking whether the server runs."""
        port = closedPort(self)
        self.check(["--connect", address(port)], f"cannot connect to {address(port)}: connection refused")

    def test_hostPort(self) -> None:
        """HOST:PORT is not an endpoint: the line says so and gives the tcp:host=...:port=... spelling."""
        self.check(["--connect", "127.0.0.1:8750"], "use tcp:host=127.0.0.1:port=8750")

    def test_foreignPeer(self) -> None:
        """A peer that does not speak chunkwire is named as such, with what it sent."""
        port = foreignServer(self)
        self.check(["--connect", address(port)], "not a chunkwire stream: the peer sent an HTTP response")

    def test_silentServer(self) -> None:
        """A server that accepts and says nothing: each client gives up after --timeout with one line saying so."""
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen()  # the kernel completes the handshake; nobody ever reads or writes
            where = address(silent.getsockname()[1])
            self.check(
                ["--connect", where, "--timeout", "1"],
                f"cannot connect to {where}: connected, but the server said nothing",
            )

    def test_unverifiedTLSWarned(self) -> None:
        """An ssl: --connect that verifies nothing is warned about in one line before the client connects."""
        where = f"ssl:host=127.0.0.1:port={closedPort(self)}"
        done = clientRun("bulk_client.py", "--connect", where, "list", timeout=30)
        warning, refused = done.stderr.splitlines()
        self.assertIn(f"warning: {where} verifies nothing about the server", warning)
        self.assertIn("connection refused", refused)

    def test_debug(self) -> None:
        """--debug (after bulk_client's subcommand too) adds the traceback before the same one-line explanation."""
        for script, rest in CLIENTS.items():
            done = clientRun(script, "--connect", address(closedPort(self)), "--debug", *rest, timeout=30)
            self.assertNotEqual(done.returncode, 0, script)
            self.assertIn("Traceback", done.stderr, script)
            self.assertIn("connection refused", done.stderr.splitlines()[-1], script)
        done = clientRun("bulk_client.py", "--connect", address(closedPort(self)), "list", "--debug", timeout=30)
        self.assertIn("Traceback", done.stderr, "--debug after the subcommand")


class ServerErrorTests(SynchronousTestCase):
    """The example servers: one line for a port in use or a bad endpoint, and a non-zero exit."""

    def check(self, listen: str, expected: str) -> None:
        for script, rest in serverArguments(self).items():
            done = clientRun(script, "--listen", listen, *rest, timeout=30)
            self.assertNotEqual(done.returncode, 0, script)
            self.assertEqual(len(done.stderr.splitlines()), 1, f"{script}: {done.stdout} {done.stderr}")
            self.assertIn(expected, done.stderr, script)

    def test_portInUse(self) -> None:
        """Listening on a port another socket holds says "address already in use" and names the endpoint."""
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            listen = f"tcp:{port}:interface=127.0.0.1"
            self.check(listen, f"cannot listen on {listen}: Address already in use")

    def test_hostPort(self) -> None:
        """--listen HOST:PORT is refused with the tcp:PORT:interface=HOST spelling."""
        self.check("127.0.0.1:8750", "use tcp:8750:interface=127.0.0.1")

    def test_badDescription(self) -> None:
        """
        A --listen that does not parse (tcp:abc, which Twisted refuses with a
        bare int() ValueError) is one line naming the option and the description.
        """
        self.check("tcp:abc", "--listen tcp:abc: not a server endpoint description (")


class EndpointHintTests(SynchronousTestCase):
    """examples/_errors.endpointHint spells a plain address as an endpoint, for clients and for servers."""

    def test_hints(self) -> None:
        """HOST:PORT, PORT and [IPv6]:PORT get the endpoint that means them; anything else gets no hint."""
        sys.path.insert(0, str(ROOT / "examples"))
        try:
            from _errors import endpointHint
        finally:
            sys.path.pop(0)
        self.assertEqual(endpointHint("localhost:8750", False), "use tcp:host=localhost:port=8750")
        self.assertEqual(endpointHint("8750", False), "use tcp:host=127.0.0.1:port=8750")
        self.assertEqual(endpointHint("[::1]:8750", False), "use tcp:host=\\:\\:1:port=8750")
        self.assertEqual(endpointHint("0.0.0.0:8750", True), "use tcp:8750:interface=0.0.0.0")
        self.assertEqual(endpointHint("8750", True), "use tcp:8750")
        self.assertEqual(endpointHint("[::1]:8750", True), "use tcp:8750:interface=\\:\\:1")
        self.assertEqual(endpointHint("tpc:host=x:port=1", False), "")


_COLLECTOR_PROBE = """
import atexit, gc, json, sys
sys.path.insert(0, "examples")
from _errors import runCommand

seen = {}
kept = []

async def main(reactor):
    from twisted.internet.task import deferLater

    seen["loading"] = gc.isenabled()  # main's start: what it imports before its first wait loads here
    await deferLater(reactor, 0, lambda: None)
    seen["running"] = gc.isenabled()
    seen["frozen"] = gc.get_freeze_count()
    kept.extend([] for _ in range(1000))  # made while the command runs: frozen only at the exit
    raise SystemExit(3)

def report():
    # Frozen: tracked, yet in none of the collector's generations (gc.get_objects lists those).
    collectable = {id(thing) for thing in gc.get_objects()}
    seen["keptFrozen"] = all(gc.is_tracked(thing) and id(thing) not in collectable for thing in kept)
    print(json.dumps(seen), flush=True)

atexit.register(report)
runCommand(main, None, False)
"""


class RunCommandTests(SynchronousTestCase):
    """L{_errors.runCommand}'s start-up and exit: the cyclic collector paused while modules load, frozen at the exit."""

    def test_collectorPausedWhileLoadingFrozenAtExit(self) -> None:
        """
        C{main}'s start (where a command imports Twisted and chunkwire) runs
        with the collector off; once the reactor runs it is on again with
        what was loaded frozen out of its reach; at the exit what the
        command made is frozen too (the interpreter's teardown skips walking
        it), and the exit status is C{main}'s.
        """
        done = runPython("-c", _COLLECTOR_PROBE, timeout=60)
        self.assertEqual(done.returncode, 3, done.stderr)
        seen = json.loads(done.stdout.splitlines()[-1])
        self.assertFalse(seen["loading"])
        self.assertTrue(seen["running"])
        self.assertGreater(seen["frozen"], 10000)  # Twisted's modules and their objects
        self.assertTrue(seen["keptFrozen"])
