"""The interop kit: the service's rules in process, and the Python interop server and client as processes."""

from __future__ import annotations

import re
import socket
import sys
import threading
import time

from twisted.internet.defer import CancelledError
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from framing.wire import PREAMBLE
from protocols import interop
from protocols.interop import ApplicationError, InteropService, PatternSource, pattern
from tests.processes import readUntil, runExample, startExample, stop


class ServiceTests(SynchronousTestCase):
    """The interop service's methods, called in process on a fake clock."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.service = InteropService(self.clock, self.mktemp())

    def test_pattern(self) -> None:
        """The pattern's byte at offset i is i mod 251, from any offset, across its internal block."""
        self.assertEqual(pattern(0, 3), b"\x00\x01\x02")
        self.assertEqual(pattern(250, 3), b"\xfa\x00\x01")
        long = pattern(7, 3 << 20)
        self.assertEqual(len(long), 3 << 20)
        self.assertEqual(long, bytes((7 + i) % 251 for i in range(3 << 20)))
        self.assertEqual(PatternSource(10).read(8, 5), pattern(8, 2))

    def test_gather(self) -> None:
        """A gather answers all its calls at once when the last arrives, and none before."""
        calls = [self.service.gather("g", 3) for _ in range(2)]
        for call in calls:
            self.assertNoResult(call)
        calls.append(self.service.gather("g", 3))
        self.assertEqual([self.successResultOf(call) for call in calls], [3, 3, 3])
        self.assertFalse(self.clock.getDelayedCalls())

    def test_gatherTimesOut(self) -> None:
        """Calls still waiting when the gather's deadline passes fail with the service's error, coded so."""
        waiting = self.service.gather("g", 2)
        self.clock.advance(interop.GATHER_TIMEOUT)
        failure = self.failureResultOf(waiting, ApplicationError)
        self.assertEqual(failure.value.code, interop.GATHER_TIMED_OUT)

    def test_gatherCancelled(self) -> None:
        """A cancelled gather call leaves the group, which then needs another call to complete."""
        first = self.service.gather("g", 2)
        first.cancel()
        self.failureResultOf(first, CancelledError)
        second = self.service.gather("g", 2)
        self.assertNoResult(second)
        third = self.service.gather("g", 2)
        self.assertEqual((self.successResultOf(second), self.successResultOf(third)), (2, 2))

    def test_holdStates(self) -> None:
        """A hold is waiting, then released (answering the value), elapsed (answering None) or cancelled."""
        service = self.service
        self.assertEqual(service.holdState("r"), interop.UNKNOWN)
        released = service.hold("r", 1000)
        self.assertEqual(service.holdState("r"), interop.WAITING)
        self.assertTrue(service.release("r", "value"))
        self.assertEqual((self.successResultOf(released), service.holdState("r")), ("value", interop.RELEASED))
        self.assertFalse(service.release("r", "again"))
        elapsed = service.hold("e", 1000)
        self.clock.advance(1)
        self.assertEqual(service.holdState("e"), interop.ELAPSED)
        self.assertIsNone(self.successResultOf(elapsed))
        cancelled = service.hold("c", 1000)
        cancelled.cancel()
        self.failureResultOf(cancelled, CancelledError)
        self.assertEqual(service.holdState("c"), interop.CANCELLED)
        self.assertFalse(self.clock.getDelayedCalls())

    def test_holdsBounded(self) -> None:
        """Past the most holds waiting at once, a hold fails with the service's error, coded too-many-waiting."""
        for number in range(interop.MAX_WAITING):
            self.service.hold(f"k{number}", 1000)
        with self.assertRaises(ApplicationError) as refused:
            self.service.hold("one-more", 1000)
        self.assertEqual(refused.exception.code, interop.TOO_MANY_WAITING)
        self.clock.advance(1)
        self.service.hold("one-more", 1000)

    def test_keysBounded(self) -> None:
        """A table keeps the most recent keys only: the oldest is forgotten first."""
        for number in range(interop.MAX_KEYS + 1):
            self.service.record(f"k{number}", number)
        self.assertIsNone(self.service.recorded("k0"))
        self.assertEqual(self.service.recorded(f"k{interop.MAX_KEYS}"), interop.MAX_KEYS)

    def test_bytesBounded(self) -> None:
        """
        A table's values hold at most MAX_TABLE_BYTES together (by the memory
        they hold): past it the oldest are forgotten; the newest
        is kept whatever its size.
        """
        value = b"x" * (4 * 1024 * 1024)
        count = interop.MAX_TABLE_BYTES // len(value) + 4
        for number in range(count):
            self.service.record(f"k{number}", value)
        self.assertIsNone(self.service.recorded("k0"))
        self.assertIs(self.service.recorded(f"k{count - 1}"), value)
        self.assertLessEqual(self.service._recorded.bytes, interop.MAX_TABLE_BYTES)
        self.service.record("again", b"y" * 10)  # a key set anew counts once
        self.service.record("again", b"y" * 20)
        self.assertEqual(self.service.recorded("again"), b"y" * 20)
        huge = b"z" * (interop.MAX_TABLE_BYTES + 1)
        self.service.record("huge", huge)
        self.assertIs(self.service.recorded("huge"), huge)
        self.assertEqual(self.service._recorded.bytes, sys.getsizeof(huge))

    def test_bytesBoundedByMemoryHeld(self) -> None:
        """
        A table's values are counted by the memory they hold, not by their
        wire bodies: lists of 100,000 small ints (about 3.6 MB held each,
        100 kB of bodies) fill the table's MAX_TABLE_BYTES after about 18.
        """
        value = list(range(1000, 101_000))
        for number in range(40):
            self.service.record(f"k{number}", value)
        self.assertIsNone(self.service.recorded("k0"))
        self.assertIs(self.service.recorded("k39"), value)
        self.assertLessEqual(self.service._recorded.bytes, interop.MAX_TABLE_BYTES)

    def test_registeredError(self) -> None:
        """raiseRegistered raises the registered error with the caller's message and code."""
        with self.assertRaises(ApplicationError) as raised:
            self.service.raiseRegistered("no", 7)
        self.assertEqual((raised.exception.message, raised.exception.code, str(raised.exception)), ("no", 7, "no"))


LISTENING = (
    rb"(?s)test certificates: --ca-dir (\S+) --client-pem (\S+)\n"
    rb".*interop server listening on .*? port=(\d+)\)"
    rb".*interop login server listening on .*? port=(\d+)\)"
    rb".*interop certificate login server listening on .*? port=(\d+)\)"
)
"""What the interop server prints once its three endpoints listen, and where its test certificates are."""
CASE_LINE = re.compile(r"^case (\S+): (pass|FAIL: .*)$")
LOGIN_TIMEOUT = 2
"""The login server's timeout in the test (the default, 10 s, would make login_timeout wait that long)."""


class ProcessTests(SynchronousTestCase):
    """examples/interop_server.py and examples/interop_client.py as processes over loopback, on this run's core."""

    def test_allCasesPass(self) -> None:
        """The Python client runs every case against the Python server: each prints its line and passes."""
        server = startExample(
            "interop_server.py",
            "--listen",
            "tcp:0:interface=127.0.0.1",
            "--login-listen",
            "tcp:0:interface=127.0.0.1",
            "--certificate-listen",
            "ssl:0:interface=127.0.0.1",
            "--login-timeout",
            str(LOGIN_TIMEOUT),
        )
        self.addCleanup(stop, server)
        caDirectory, clientPEM, port, loginPort, certificatePort = (
            field.decode() for field in readUntil(server, LISTENING, timeout=60).groups()
        )
        listed = runExample("interop_client.py", "--list", timeout=60)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        names = [line.split(":")[0] for line in listed.stdout.splitlines()]
        client = runExample(
            "interop_client.py",
            "--server",
            f"127.0.0.1:{port}",
            "--login-server",
            f"127.0.0.1:{loginPort}",
            "--certificate-server",
            f"127.0.0.1:{certificatePort}",
            "--ca-dir",
            caDirectory,
            "--client-pem",
            clientPEM,
            "--login-timeout",
            str(LOGIN_TIMEOUT),
            timeout=300,
        )
        lines = client.stdout.splitlines()
        matched = [CASE_LINE.match(line) for line in lines]
        self.assertTrue(all(matched), client.stdout)
        results = {match.group(1): match.group(2) for match in matched if match is not None}
        self.assertEqual([name for name in results], names, client.stdout)
        failed = {name: result for name, result in results.items() if result != "pass"}
        self.assertEqual(failed, {}, client.stderr)
        self.assertEqual(client.returncode, 0, client.stderr)

    def test_failureExits1(self) -> None:
        """Against no server, the client prints a FAIL line naming the connection's error, and exits with 1."""
        client = runExample("interop_client.py", "--server", "127.0.0.1:1", "--case", "empty_call", timeout=60)
        self.assertEqual(client.returncode, 1, client.stderr)
        self.assertRegex(client.stdout, r"^case empty_call: FAIL: .*connection refused")


class HostileServer:
    """
    Two listening sockets (the --server and --login-server of the client)
    whose connections get C{greeting} and then nothing: each is held open,
    never read, until the test ends.
    """

    def __init__(self, test: SynchronousTestCase, greeting: bytes) -> None:
        self.listeners = []
        for _ in range(2):
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            listener.settimeout(0.2)
            self.listeners.append(listener)
        self.greeting = greeting
        self.held: list[socket.socket] = []
        self.stopped = threading.Event()
        thread = threading.Thread(target=self.serve, daemon=True)
        thread.start()
        test.addCleanup(self.stop, thread)

    def address(self, index: int) -> str:
        return f"127.0.0.1:{self.listeners[index].getsockname()[1]}"

    def serve(self) -> None:
        while not self.stopped.is_set():
            for listener in self.listeners:
                try:
                    connection, _ = listener.accept()
                except OSError:
                    continue
                self.held.append(connection)
                try:
                    connection.sendall(self.greeting)
                except OSError:
                    pass

    def stop(self, thread: threading.Thread) -> None:
        self.stopped.set()
        thread.join(60)
        for each in [*self.listeners, *self.held]:
            each.close()


class HostileServerTests(SynchronousTestCase):
    """The interop client ends every case within its timeout, and passes one only on evidence that it happened."""

    CASES = ("login_required", "empty_call", "ping")

    def runAgainst(self, greeting: bytes) -> None:
        """Run L{CASES} against a L{HostileServer} saying C{greeting}: each FAILs, all within their timeouts."""
        server = HostileServer(self, greeting)
        # A case here can only time out (the server never answers), so its timeout is short: 1 s, not 3.
        arguments = ["--server", server.address(0), "--login-server", server.address(1), "--case-timeout", "1"]
        for name in self.CASES:
            arguments += ["--case", name]
        started = time.monotonic()
        client = runExample("interop_client.py", *arguments, timeout=120)
        # Each case: its 1 s, then at most as long again closing its connections; a generous margin for load.
        self.assertLess(time.monotonic() - started, len(self.CASES) * 2 + 30)
        self.assertEqual(client.returncode, 1, client.stderr)
        results = [CASE_LINE.match(line) for line in client.stdout.splitlines()]
        self.assertEqual([match.group(1) if match else None for match in results], list(self.CASES), client.stdout)
        self.assertEqual([match.group(2)[:4] for match in results if match], ["FAIL"] * len(self.CASES), client.stdout)

    def test_silentServer(self) -> None:
        """Against a server that accepts and says nothing, every case fails within its timeout (none passes)."""
        self.runAgainst(b"")

    def test_silentAfterPreamble(self) -> None:
        """
        Against a server that sends its preamble and then nothing,
        login_required (whose call is not answered) fails: its own
        timeout is no evidence the server closed the connection.
        """
        self.runAgainst(PREAMBLE)

    def test_garbage(self) -> None:
        """Against a server that answers garbage, every case fails: a broken stream is not a refused login."""
        self.runAgainst(PREAMBLE + b"\xff" * 64)
