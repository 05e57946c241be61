"""steadyAllocator: glibc's malloc thresholds fixed for a process that moves bulk data, nothing done elsewhere."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stdout
from typing import Any

from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import _allocator as allocator
from protocols import bulk, rpc
from protocols._allocator import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, MiB, allocatorSteady, steadyAllocator
from protocols.bulk import _options as options
from tests.processes import ROOT

from ..helpers import pytestTest, trialTest


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

    def test_recordedForThisProcess(self) -> None:
        """Success with this process's C library is recorded (allocatorSteady); a refusal is not."""
        self.patch(allocator, "_steady", False)
        self.patch(allocator, "_glibc", lambda: FakeLibc(answer=0))
        self.assertFalse(steadyAllocator())
        self.assertFalse(allocatorSteady())
        self.patch(allocator, "_glibc", lambda: FakeLibc())
        self.assertTrue(steadyAllocator())
        self.assertTrue(allocatorSteady())

    def test_otherLibraryNotRecorded(self) -> None:
        """Setting a C library handed in (a test's) says nothing about this process."""
        self.patch(allocator, "_steady", False)
        self.assertTrue(steadyAllocator(libc=FakeLibc()))
        self.assertFalse(allocatorSteady())

    def test_thisProcess(self) -> None:
        """On Linux with glibc, this process's C library is found with its mallopt (not called: the suite runs on)."""
        if not allocator._libcVersion().startswith("glibc"):
            raise self.skipTest("not glibc")
        self.assertTrue(callable(allocator._glibc().mallopt))


class ReadSizeTests(SynchronousTestCase):
    """BulkOptions.readSize: by default 1 MiB once the allocator is steady, 512 KiB otherwise; as given if given."""

    def test_adaptiveDefault(self) -> None:
        """The default is decided when asked (as a connection is made), not when the options are built."""
        options = bulk.BulkOptions()
        self.assertEqual(options.readSize, bulk.ADAPTIVE_READ_SIZE)
        self.patch(allocator, "_steady", False)
        self.assertEqual(options.socketReadSize(), bulk.PLAIN_READ_SIZE)
        self.patch(allocator, "_steady", True)
        self.assertEqual(options.socketReadSize(), bulk.STEADY_READ_SIZE)
        self.assertEqual(bulk.STEADY_READ_SIZE, 1 * MiB)
        self.assertEqual(bulk.PLAIN_READ_SIZE, 512 * 1024)

    def test_givenKept(self) -> None:
        """A read size given is used whatever the allocator; None leaves the transport alone; below 0 is refused."""
        self.patch(allocator, "_steady", True)
        self.assertEqual(bulk.BulkOptions(readSize=256 * 1024).socketReadSize(), 256 * 1024)
        self.assertIsNone(bulk.BulkOptions(readSize=None).socketReadSize())
        self.assertRaises(ValueError, bulk.BulkOptions, readSize=-1)


LOCAL = "tcp:0:interface=127.0.0.1"


class Pong(rpc.Referenceable):
    @rpc.remote
    def ping(self) -> int:
        return 1


async def serveAndConnectMakeItSteady(reactor: Any) -> None:
    """
    rpc.serve and rpc.connect with bulk options call steadyAllocator first
    unless the options' steadyAllocator is False, and a connection made then
    reads STEADY_READ_SIZE per turn (one made before, or with the opt-out,
    reads PLAIN_READ_SIZE); without bulk options neither calls it.
    """
    asked: list[str] = []
    real, wasSteady = options.makeAllocatorSteady, allocator._steady

    def recording() -> bool:
        asked.append("asked")
        allocator._steady = True
        return True

    options.makeAllocatorSteady, allocator._steady = recording, False
    optOut = bulk.BulkOptions(steadyAllocator=False)
    roots: list[Any] = []
    try:
        port = await rpc.serve(reactor, LOCAL, Pong(), options=rpc.ServerOptions(bulk=optOut))
        address = f"tcp:host=127.0.0.1:port={port.getHost().port}"
        assert asked == []
        roots.append(await rpc.connect(reactor, address, options=rpc.ClientOptions(bulk=optOut)))
        assert asked == []
        assert roots[-1].broker.transport.transport.bufferSize == bulk.PLAIN_READ_SIZE
        plain = await rpc.serve(reactor, LOCAL, Pong())
        roots.append(await rpc.connect(reactor, address))
        assert asked == []
        await plain.stopListening()
        roots.append(await rpc.connect(reactor, address, options=rpc.ClientOptions(bulk=bulk.BulkOptions())))
        assert asked == ["asked"]
        assert roots[-1].broker.transport.transport.bufferSize == bulk.STEADY_READ_SIZE
        assert await roots[-1].callRemote("ping") == 1
        second = await rpc.serve(reactor, LOCAL, Pong(), options=rpc.ServerOptions(bulk=bulk.BulkOptions()))
        assert asked == ["asked", "asked"]
        await second.stopListening()
    finally:
        options.makeAllocatorSteady, allocator._steady = real, wasSteady
        for root in roots:
            await root.broker.disconnect()
        await port.stopListening()


class ServeAndConnectTests(TestCase):
    """rpc.serve and rpc.connect with bulk options opt the process in to the steady allocator by default (trial)."""

    test_serve_and_connect_make_it_steady = trialTest(serveAndConnectMakeItSteady)


test_serve_and_connect_make_it_steady = pytestTest(serveAndConnectMakeItSteady)


class ExamplesTests(SynchronousTestCase):
    """The example bulk server opts in at start (it builds its own factory); the client connects with bulk options."""

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

    def importExample(self, name: str) -> Any:
        sys.path.insert(0, str(ROOT / "examples"))
        try:
            return __import__(name)
        finally:
            sys.path.pop(0)

    def test_serverLeavesReadSizeToLibrary(self) -> None:
        """The example server's options keep the library's adaptive read size (one place decides it)."""
        server = self.importExample("bulk_server")
        self.assertEqual(server.bulkOptions("auto").readSize, bulk.ADAPTIVE_READ_SIZE)
        self.assertEqual(server.bulkOptions("thread").hashing, "thread")
        self.assertEqual(server.bulkOptions("auto").hashing, "inline")
