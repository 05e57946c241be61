"""steadyAllocator: glibc's malloc thresholds fixed for a process that moves bulk data, nothing done elsewhere."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stdout
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from protocols import bulk
from protocols.bulk import allocator
from protocols.bulk.allocator import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, MiB, steadyAllocator
from tests.processes import ROOT


class FakeLibc:
    """A C library that records its C{mallopt} calls and answers C{answer} (glibc: 1 for success)."""

    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return self.answer


class SteadyAllocatorTests(SynchronousTestCase):
    """What steadyAllocator asks of the C library, and when it asks nothing."""

    def test_thresholdsFixed(self) -> None:
        """Both thresholds are set (the mmap one first, which stops glibc moving them) and success is reported."""
        libc = FakeLibc()
        self.assertTrue(steadyAllocator(libc=libc))
        self.assertEqual(libc.calls, [(M_MMAP_THRESHOLD, 4 * MiB), (M_TRIM_THRESHOLD, 32 * MiB)])

    def test_refused(self) -> None:
        """A C library that refuses the setting is reported as not set."""
        self.assertFalse(steadyAllocator(libc=FakeLibc(answer=0)))

    def test_notGlibc(self) -> None:
        """Where the C library is not glibc, nothing is asked and the answer is no."""
        self.patch(allocator, "_libcVersion", lambda: "musl")
        self.assertFalse(steadyAllocator())

    def test_thisProcess(self) -> None:
        """On Linux with glibc, this process's C library is found with its mallopt (not called: the suite runs on)."""
        if not allocator._libcVersion().startswith("glibc"):
            raise self.skipTest("not glibc")
        self.assertTrue(callable(allocator._glibc().mallopt))


class ExamplesTests(SynchronousTestCase):
    """The example bulk server and client, as applications that move bulk data, opt in at start."""

    def mainAsks(self, name: str) -> bool:
        asked: list[Any] = []
        self.patch(bulk, "steadyAllocator", lambda: asked.append(True) or True)
        sys.path.insert(0, str(ROOT / "examples"))
        try:
            module = __import__(name)
        finally:
            sys.path.pop(0)
        with redirect_stdout(io.StringIO()):
            self.assertRaises(SystemExit, module.main, ["--help"])
        return bool(asked)

    def test_server(self) -> None:
        """examples/bulk_server.py fixes the thresholds before anything else."""
        self.assertTrue(self.mainAsks("bulk_server"))

    def test_client(self) -> None:
        """examples/bulk_client.py fixes the thresholds before anything else."""
        self.assertTrue(self.mainAsks("bulk_client"))

    def importExample(self, name: str) -> Any:
        sys.path.insert(0, str(ROOT / "examples"))
        try:
            return __import__(name)
        finally:
            sys.path.pop(0)

    def test_serverReadsMoreOnceSteady(self) -> None:
        """With steady buffers the example server reads STEADY_READ_SIZE a turn; else the library's default."""
        server = self.importExample("bulk_server")
        self.assertEqual(server.bulkOptions("auto", True).readSize, bulk.STEADY_READ_SIZE)
        self.assertEqual(server.bulkOptions("auto", False).readSize, bulk.BulkOptions().readSize)
        self.assertNotEqual(bulk.STEADY_READ_SIZE, bulk.BulkOptions().readSize)
        self.assertEqual(server.bulkOptions("thread", True).hashing, "thread")
        self.assertEqual(server.bulkOptions("auto", True).hashing, "inline")

    def test_clientReadsMoreOnceSteady(self) -> None:
        """With steady buffers the example client connects with STEADY_READ_SIZE reads; else with the defaults."""
        client = self.importExample("bulk_client")
        options = client.bulkOptions(True)
        self.assertEqual(options.readSize, bulk.STEADY_READ_SIZE)
        self.assertIsNone(client.bulkOptions(False))
