"""The kv service on PostgreSQL, as real processes: servers sharing one database, an outage, a kill -9.

Each test has a schema of its own in the test process's private
PostgreSQL (L{tests.postgres}; the tests skip, saying why, when none can be
had) and runs servers as processes: C{examples/kv_server.py --store URL}
(one process each, standing for hosts) and C{twist chunkwire-kv --workers 2
--store URL} (the supervisor of L{tests.protocols.serving.test_kv_workers}).
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any
from unittest import SkipTest

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import rpc
from protocols.kv import StoreFull, StoreUnavailable
from protocols.kv._postgresql import PostgresStorage
from tests.kv_stores import Scratch
from tests.processes import ENV, ROOT, figure, readUntil, stop

from ..helpers import pytestTest, trialTest
from .test_kv_workers import CONNECTIONS, Recorder, _answeredPutsSurviveKill, connectAll, supervisor

TIMEOUT = 120.0
"""Seconds a test may take: only a hang misses it on a loaded machine."""


class KvServer:
    """A running C{examples/kv_server.py --store URL}, on a port of its own choosing."""

    def __init__(self, url: str, *options: str) -> None:
        command = [sys.executable, "examples/kv_server.py", "--listen", "tcp:0:interface=127.0.0.1", "--store", url]
        self.process = subprocess.Popen(
            [*command, *options], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        self.output = readUntil(self.process, rb"kv server listening on .* port=(\d+)\)")
        self.address = f"tcp:host=127.0.0.1:port={int(self.output.group(1))}"
        self.said = b""

    def stop(self) -> None:
        """Stop it (SIGTERM: it drains); what it wrote is then L{said}."""
        if self.process.poll() is None:
            self.process.terminate()
        assert self.process.stdout is not None
        if not self.process.stdout.closed:
            self.said = self.output.string + self.process.stdout.read()
        stop(self.process)


class Waiting(Recorder):
    """A L{Recorder} that also fires C{waiting[value]} when it is told of C{value}."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: dict[str | None, Deferred[None]] = {}

    @rpc.remote
    def changed(self, key: str, value: str | None, skipped: int = 0) -> None:
        super().changed(key, value, skipped)
        told = self.waiting.pop(value, None)
        if told is not None:
            told.callback(None)


async def until(reactor: Any, condition: Any, state: Any, timeout: float = 60.0) -> None:
    """Wait, the reactor running, until C{condition()}; fail showing C{state()} after C{timeout} seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(state())
        await deferLater(reactor, 0.02)


async def withScratch(reactor: Any, body: Any) -> None:
    scratch = Scratch("postgresql")
    try:
        await body(reactor, scratch)
    finally:
        scratch.cleanUp()


async def watchAcrossProcesses(reactor: Any) -> None:
    """
    A watcher on one server process hears of every put and delete made
    through another (two workers of a supervisor, over many connections),
    each told or counted as skipped, in order, and the reverse: PostgreSQL's
    NOTIFY reaches every process on the database.
    """
    await withScratch(reactor, _watchAcrossProcesses)


async def _watchAcrossProcesses(reactor: Any, scratch: Scratch) -> None:
    alone = KvServer(scratch.where)
    try:
        with supervisor(scratch.where) as workers:
            here = await rpc.connect(reactor, alone.address)
            there = await connectAll(reactor, workers.address)
            watcher, back = Recorder(), Waiting()
            assert await here.callRemote("watch", "k", watcher) is None
            assert await there[0].callRemote("watch", "back", back) is None
            expected = []
            for index, root in enumerate(there):
                await root.callRemote("put", "k", f"v{index}")
                expected.append(("k", f"v{index}"))
            await there[1].callRemote("delete", "k")
            expected.append(("k", None))
            await until(reactor, lambda: watcher.told >= len(expected), lambda: watcher.seen)
            assert watcher.seen[-1] == ("k", None), watcher.seen
            order = [expected.index(change) for change in watcher.seen]
            assert order == sorted(order), watcher.seen
            delays = []
            for n in range(20):
                told = back.waiting[str(n)] = Deferred()
                began = time.monotonic()
                await here.callRemote("put", "back", str(n))
                await told.addTimeout(60, reactor)
                delays.append(time.monotonic() - began)
            delays.sort()
            figure(
                f"kv on PostgreSQL, a watch across processes: put answered and told to the other process's watcher "
                f"in {delays[10] * 1000:.1f} ms (median of 20), {delays[-1] * 1000:.1f} ms at most"
            )
            for root in [here, *there]:
                await root.broker.disconnect()
    finally:
        alone.stop()


async def limitsAcrossProcesses(reactor: Any) -> None:
    """--max-keys counts the keys put through every process: past it, a put on either is a StoreFull."""
    await withScratch(reactor, _limitsAcrossProcesses)


async def _limitsAcrossProcesses(reactor: Any, scratch: Scratch) -> None:
    servers = [KvServer(scratch.where, "--max-keys", "3") for _ in range(2)]
    try:
        first = await rpc.connect(reactor, servers[0].address)
        second = await rpc.connect(reactor, servers[1].address)
        await first.callRemote("put", "k1", "x")
        await second.callRemote("put", "k2", "x")
        await first.callRemote("put", "k3", "x")
        for root in (first, second):
            try:
                await root.callRemote("put", "k4", "x")
            except StoreFull:
                pass
            else:
                raise AssertionError("a put past --max-keys was answered")
        assert await second.callRemote("list", "") == ["k1", "k2", "k3"]
        for root in (first, second):
            await root.broker.disconnect()
    finally:
        for server in servers:
            server.stop()


async def outageAndRecovery(reactor: Any) -> None:
    """
    PostgreSQL stopped (pg_ctl stop -m immediate): a put fails with
    kv.StoreUnavailable well within its 30 s deadline, and the server says
    nothing of the driver's; PostgreSQL started again: without restarting
    the kv servers, calls succeed, what was put before is there, and a
    watcher connected through the outage hears of another server's put.
    """
    await withScratch(reactor, _outageAndRecovery)


async def _outageAndRecovery(reactor: Any, scratch: Scratch) -> None:
    from tests.postgres import server

    database = server()
    first, second = KvServer(scratch.where), KvServer(scratch.where)
    try:
        here = await rpc.connect(reactor, first.address)
        there = await rpc.connect(reactor, second.address)
        watcher = Recorder()
        await here.callRemote("watch", "k", watcher)
        await here.callRemote("put", "before", "1")
        database.stop("immediate")
        try:
            began = time.monotonic()
            with rpc.callContext(timeout=30):
                failed = here.callRemote("put", "during", "x")
            try:
                await failed
            except StoreUnavailable as error:
                assert "SQLSTATE" in str(error) or "cannot be reached" in str(error) or "failed" in str(error)
            else:
                raise AssertionError("a put was answered while the database was down")
            failedAfter = time.monotonic() - began
            assert failedAfter < 30
        finally:
            database.start()
        restarted = time.monotonic()

        async def putAgain() -> bool:
            try:
                await there.callRemote("put", "k", "after")
            except StoreUnavailable:
                return False
            return True

        deadline = time.monotonic() + 60
        while not await putAgain():
            assert time.monotonic() < deadline, "the kv server did not recover within 60 s"
            await deferLater(reactor, 0.1)
        recovered = time.monotonic() - restarted
        assert await here.callRemote("get", "before") == "1"
        await until(reactor, lambda: ("k", "after") in watcher.seen, lambda: watcher.seen)
        figure(
            f"kv on PostgreSQL, outage: a put made while the database was down failed with StoreUnavailable in "
            f"{failedAfter * 1000:.0f} ms; the first put succeeded {recovered * 1000:.0f} ms after it was started again"
        )
        for root in (here, there):
            await root.broker.disconnect()
    finally:
        first.stop()
        second.stop()
    for kv in (first, second):
        assert b"psycopg" not in kv.said and b"Traceback" not in kv.said, kv.said.decode(errors="replace")


async def answeredPutsSurviveKill(reactor: Any) -> None:
    """Puts over 20 connections to two workers on PostgreSQL; after SIGKILL of them all, each answered put is there."""
    await withScratch(reactor, lambda reactor, scratch: _answeredPutsSurviveKill(reactor, scratch.where))


class UnreachableTests(SynchronousTestCase):
    """What C{twist chunkwire-kv} says when its database cannot be reached as it starts."""

    def test_unreachableIsAUsageError(self) -> None:
        """
        --store with a URL nothing answers: exit status 64, one error line
        naming --store in the store's words, the URL's password not shown.
        """
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise SkipTest("psycopg is not installed (pip install 'chunkwire[postgresql]')") from None
        url = "postgresql://kv:s3cret@127.0.0.1:1/kv?connect_timeout=2"
        command = [sys.executable, "-m", "twisted", "chunkwire-kv", "--store", url]
        result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
        said = result.stdout + result.stderr
        self.assertEqual(result.returncode, 64, said)
        errors = [line for line in said.splitlines() if line.startswith("Error:")]
        self.assertEqual(len(errors), 1, said)
        self.assertIn("--store postgresql://kv:***@127.0.0.1:1/kv", errors[0])
        self.assertIn("cannot be reached", errors[0])
        self.assertNotIn("s3cret", said)
        self.assertNotIn("Connection refused", said)

    def test_unreachableInProcess(self) -> None:
        """
        Opening a L{PostgresStorage} on a URL nothing answers fails with
        L{StoreUnavailable} in the storage's words (no driver message, no
        password).
        """
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise SkipTest("psycopg is not installed (pip install 'chunkwire[postgresql]')") from None
        error = self.assertRaises(StoreUnavailable, PostgresStorage, "postgresql://kv:s3cret@127.0.0.1:1/kv", 1.0)
        self.assertEqual(str(error), "the store's database cannot be reached now (no connection)")


class PostgreSQLServiceTests(TestCase):
    """The kv service on PostgreSQL, under trial."""

    test_watch_across_processes = trialTest(watchAcrossProcesses, TIMEOUT)
    test_limits_across_processes = trialTest(limitsAcrossProcesses, TIMEOUT)
    test_outage_and_recovery = trialTest(outageAndRecovery, TIMEOUT)
    test_answered_puts_survive_kill = trialTest(answeredPutsSurviveKill, TIMEOUT)


test_watch_across_processes = pytestTest(watchAcrossProcesses, TIMEOUT)
test_limits_across_processes = pytestTest(limitsAcrossProcesses, TIMEOUT)
test_outage_and_recovery = pytestTest(outageAndRecovery, TIMEOUT)
test_answered_puts_survive_kill = pytestTest(answeredPutsSurviveKill, TIMEOUT)
assert CONNECTIONS >= 2
