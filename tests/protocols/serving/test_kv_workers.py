"""C{twist chunkwire-kv --workers 2 --store FILE}, as real processes: one store, right answers from every worker.

Each test starts a supervisor with two C{SO_REUSEPORT} workers on one
SQLite file and talks to it over many connections, which the kernel
spreads over both workers; where Linux's C{/proc} shows which worker holds
which connection, the tests check that both served some.
C{CHUNKWIRE_KV_WORKER_CALLS} sets how many puts and gets the first test
makes (1,000 by default; the issue's figure is 10,000).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import rpc
from tests.processes import ENV, ROOT, readUntil, reservePort, stop

from ..helpers import pytestTest, trialTest

CALLS = int(os.environ.get("CHUNKWIRE_KV_WORKER_CALLS", "1000"))
"""Puts (and as many gets) of L{manyCallsOverTwoWorkers}."""

CONNECTIONS = 20
"""Connections each test opens: enough that both workers get some."""

TIMEOUT = 120.0
"""Seconds a test may take: long enough that only a hang misses it on a loaded machine."""


class Supervisor:
    """A running C{twist chunkwire-kv --workers 2 --reuse-port --store PATH}: its process, workers and address."""

    def __init__(self, path: str, port: int = 0) -> None:
        command = [sys.executable, "-m", "twisted", "--log-format", "text", "chunkwire-kv"]
        command += ["--listen", f"tcp:{port}:interface=127.0.0.1", "--workers", "2", "--reuse-port"]
        command += ["--grace", "2", "--store", path]
        self.process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        started = readUntil(
            self.process,
            rb"worker 0 started: pid (\d+)[\s\S]*worker 1 started: pid (\d+)"
            rb"[\s\S]*starting on (\d+)[\s\S]*starting on (\d+)",
            timeout=60,
        )
        self.workers = [int(started.group(1)), int(started.group(2))]
        self.port = int(started.group(3))
        self.address = f"tcp:host=127.0.0.1:port={self.port}"

    def kill(self) -> None:
        """SIGKILL the supervisor and both workers: nobody gets to close anything."""
        for pid in [self.process.pid, *self.workers]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(30)

    def stop(self) -> None:
        """SIGTERM (the workers drain) and wait; a worker left is killed."""
        stop(self.process)
        for pid in self.workers:
            try:
                os.kill(pid, signal.SIGKILL)  # only if it outlived its supervisor: nothing may outlive the test
            except ProcessLookupError:
                pass


@contextmanager
def scratch() -> Iterator[str]:
    """A directory of its own for a store file, removed afterwards."""
    directory = tempfile.mkdtemp(prefix="chunkwire-kv-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def supervisor(path: str, port: int = 0) -> Iterator[Supervisor]:
    running = Supervisor(path, port)
    try:
        yield running
    finally:
        running.stop()


def socketsOf(pid: int) -> set[str]:
    """The socket inodes process C{pid} holds (Linux's /proc)."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


async def connectAll(reactor: Any, address: str, count: int = CONNECTIONS) -> list[Any]:
    return list(await gatherResults([rpc.connect(reactor, address) for _ in range(count)]))


async def bothServed(reactor: Any, running: Supervisor, roots: list[Any]) -> None:
    """
    Both workers hold some of C{roots}' connections (when /proc shows it):
    each connection's server socket appears among one worker's descriptors
    once the connection is up, so each worker gains one per connection it took.
    """
    if not os.path.isdir("/proc/self/fd"):
        return
    await gatherResults([root.callRemote("list", "-") for root in roots])  # every connection accepted and serving
    held = [len(socketsOf(pid)) for pid in running.workers]
    for root in roots:
        await root.broker.disconnect()
    while True:
        after = [len(socketsOf(pid)) for pid in running.workers]
        gained = [before - now for before, now in zip(held, after, strict=True)]
        if sum(gained) == len(roots):  # every worker has closed its end (the test's timeout bounds the wait)
            break
        await deferLater(reactor, 0.05)
    assert all(count > 0 for count in gained), gained


async def manyCallsOverTwoWorkers(reactor: Any) -> None:
    """CALLS puts and CALLS gets over 20 connections spread over both workers: every answer is right."""
    with scratch() as directory, supervisor(os.path.join(directory, "kv.sqlite")) as running:
        roots = await connectAll(reactor, running.address)

        async def client(index: int) -> None:
            # Each connection puts its own keys and gets those another connection put (through either worker).
            mine = range(index, CALLS, CONNECTIONS)
            for n in mine:
                await roots[index].callRemote("put", f"key-{n}", f"value-{n}")

        await gatherResults([Deferred.fromCoroutine(client(index)) for index in range(CONNECTIONS)])

        async def reader(index: int) -> list[str]:
            root = roots[(index + 1) % CONNECTIONS]
            return [await root.callRemote("get", f"key-{n}") for n in range(index, CALLS, CONNECTIONS)]

        answers = await gatherResults([Deferred.fromCoroutine(reader(index)) for index in range(CONNECTIONS)])
        for index, values in enumerate(answers):
            assert values == [f"value-{n}" for n in range(index, CALLS, CONNECTIONS)], index
        keys = await roots[0].callRemote("list", "key-")
        assert sorted(keys) == sorted(f"key-{n}" for n in range(CALLS))
        await bothServed(reactor, running, roots)


class Recorder(rpc.Referenceable):
    """A watcher recording every change it is told of, and how many it was told it skipped."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []
        self.told = 0

    @rpc.remote
    def changed(self, key: str, value: str | None, skipped: int = 0) -> None:
        self.seen.append((key, value))
        self.told += 1 + skipped


async def watchAcrossWorkers(reactor: Any) -> None:
    """
    20 connections watch one key and each puts a value in turn: every
    watcher hears of every put, via either worker, in order: each value it
    is sent, or as a count of skipped changes (changes through the other
    worker read in one poll are told as one, the last).
    """
    with scratch() as directory, supervisor(os.path.join(directory, "kv.sqlite")) as running:
        roots = await connectAll(reactor, running.address)
        watchers = [Recorder() for _ in roots]
        for root, watcher in zip(roots, watchers, strict=True):
            assert await root.callRemote("watch", "shared", watcher) is None
        expected = []
        for index, root in enumerate(roots):
            await root.callRemote("put", "shared", f"from-{index}")
            expected.append(("shared", f"from-{index}"))
        await roots[0].callRemote("delete", "shared")
        expected.append(("shared", None))
        while any(watcher.told < len(expected) for watcher in watchers):
            await deferLater(reactor, 0.05)  # the other worker's watchers hear within a poll (0.05 s)
        for watcher in watchers:
            # (A value read just as the other worker commits the next one may be told twice: at least, never fewer.)
            assert watcher.told >= len(expected), (watcher.told, watcher.seen)
            assert watcher.seen[-1] == ("shared", None), watcher.seen
            order = [expected.index(change) for change in watcher.seen]
            assert order == sorted(order), watcher.seen  # in order
        await bothServed(reactor, running, roots)


async def answeredPutsSurviveKill(reactor: Any) -> None:
    """Puts over 20 connections; after SIGKILL of all three processes and a restart, every answered put is there."""
    with scratch() as directory:
        await _answeredPutsSurviveKill(reactor, os.path.join(directory, "kv.sqlite"))


async def _answeredPutsSurviveKill(reactor: Any, path: str) -> None:
    answered: list[str] = []
    running = Supervisor(path)
    try:
        roots = await connectAll(reactor, running.address)
        stopping = False

        async def writer(index: int) -> None:
            n = 0
            while not stopping:
                key = f"w{index}-{n}"
                try:
                    await roots[index].callRemote("put", key, key)
                except Exception:
                    return  # the kill: this put may or may not have been done; it was not answered
                answered.append(key)
                n += 1

        writing = gatherResults([Deferred.fromCoroutine(writer(index)) for index in range(CONNECTIONS)])
        while len(answered) < 300:
            await deferLater(reactor, 0.01)
        running.kill()
        stopping = True
        await writing
    finally:
        running.stop()
    with supervisor(path) as again:
        roots = await connectAll(reactor, again.address, 4)
        keys = set(await roots[0].callRemote("list", "w"))
        missing = [key for key in answered if key not in keys]
        assert missing == [], missing[:10]
        for key in answered[:50]:
            assert await roots[len(key) % 4].callRemote("get", key) == key
        for root in roots:
            await root.broker.disconnect()


async def watchingThroughADrain(reactor: Any) -> None:
    """
    kv_client.py watch, while its supervisor drains (SIGTERM) and another
    starts on the port and store: it reconnects, hears the next put, and
    logs no error (it logged an automat NoTransition each time).
    """
    with scratch() as directory:
        await _watchingThroughADrain(reactor, directory)


async def _until(reactor: Any, condition: Any, state: Any) -> None:
    """Wait until C{condition()} holds, the reactor running; after 60 s, fail showing C{state()}."""
    for _ in range(1200):
        if condition():
            return
        await deferLater(reactor, 0.05)
    raise AssertionError(state())


async def _watchingThroughADrain(reactor: Any, directory: str) -> None:
    path = os.path.join(directory, "kv.sqlite")
    # The port is held for the test (the second supervisor binds it once the first is gone, when anything else could).
    reservation = reservePort()
    port = reservation.getsockname()[1]
    try:
        await _watchingOnPort(reactor, directory, path, port)
    finally:
        reservation.close()


async def _watchingOnPort(reactor: Any, directory: str, path: str, port: int) -> None:
    first = Supervisor(path, port)
    command = [sys.executable, "examples/kv_client.py", "--connect", first.address, "watch", "k", "--count", "1"]
    # Its output to a file, read between reactor turns: the reactor runs while the test waits.
    log = os.path.join(directory, "watch.log")
    with open(log, "wb") as output:
        watcher = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=output, stderr=subprocess.STDOUT)

    def printed() -> bytes:
        with open(log, "rb") as output:
            return output.read()

    try:
        await _until(reactor, lambda: printed().count(b"watching k (now unset)\n") == 1, printed)
        first.stop()
        with supervisor(path, port) as second:
            # Watching again: at least once more (under load it may first reach the other, still draining,
            # worker of the first supervisor, and be moved on again, so more than once).
            await _until(reactor, lambda: printed().count(b"watching k (now unset)\n") >= 2, printed)
            root = await rpc.connect(reactor, second.address)
            await root.callRemote("put", "k", "v")
            await root.broker.disconnect()
            await _until(reactor, lambda: watcher.poll() is not None, printed)
        assert watcher.returncode == 0, printed()
        assert printed().endswith(b"k = v\n"), printed()
        assert b"Unhandled" not in printed() and b"Traceback" not in printed(), printed()
    finally:
        first.stop()
        stop(watcher)


class RefusedTests(SynchronousTestCase):
    """What C{twist chunkwire-kv} refuses before it starts anything."""

    def test_workersWithoutStore(self) -> None:
        """--workers 2 without --store: exit status 64, and the error is one line naming --store."""
        command = [sys.executable, "-m", "twisted", "chunkwire-kv", "--workers", "2"]
        result = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 64, result.stdout + result.stderr)
        errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("Error:")]
        self.assertEqual(len(errors), 1, result.stdout + result.stderr)
        self.assertIn("--workers needs --store FILE", errors[0])


class KeyValueWorkerTests(TestCase):
    """The store shared by workers, under trial."""

    test_many_calls_over_two_workers = trialTest(manyCallsOverTwoWorkers, TIMEOUT)
    test_watch_across_workers = trialTest(watchAcrossWorkers, TIMEOUT)
    test_answered_puts_survive_kill = trialTest(answeredPutsSurviveKill, TIMEOUT)
    test_watching_through_a_drain = trialTest(watchingThroughADrain, TIMEOUT)


test_many_calls_over_two_workers = pytestTest(manyCallsOverTwoWorkers, TIMEOUT)
test_watch_across_workers = pytestTest(watchAcrossWorkers, TIMEOUT)
test_answered_puts_survive_kill = pytestTest(answeredPutsSurviveKill, TIMEOUT)
test_watching_through_a_drain = pytestTest(watchingThroughADrain, TIMEOUT)
