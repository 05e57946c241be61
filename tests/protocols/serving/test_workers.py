"""Workers: a supervisor binds once, worker processes adopt the socket, dead workers come back, SIGTERM drains.

The reactor tests run real worker processes (C{tests/protocols/serving/workerprocess.py},
and C{twist chunkwire-kv --workers 2}); each is bounded in time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import rpc
from protocols.serving import adoptedEndpoint
from protocols.serving._workers import Supervisor, backoff, bind, twistWorkerCommand
from protocols.testing import SelfSignedCertificate
from tests.processes import ENV, ROOT, readUntil, stop

from ..helpers import pytestTest, trialTest

WORKER = [sys.executable, "-m", "tests.protocols.serving.workerprocess", "--grace", "2"]


class CommandTests(SynchronousTestCase):
    """The pieces of a supervisor that need no process."""

    def test_backoff(self) -> None:
        """Restarts wait 0.1 s, doubling with each quick exit in a row, and never more than 10 s."""
        self.assertEqual([backoff(n) for n in (0, 1, 2, 3)], [0.1, 0.2, 0.4, 0.8])
        self.assertEqual(backoff(50), 10.0)

    def test_twistCommand(self) -> None:
        """A worker runs the supervisor's own twist command without --listen, --workers and --reuse-port."""
        argv = ["/usr/bin/twist", "--log-format", "text", "chunkwire-kv", "--listen", "tcp:1", "-l", "unix:/x"]
        argv += ["--workers=3", "--reuse-port", "--grace", "4", "--workers", "3", "--listen=tcp:2"]
        command = twistWorkerCommand("chunkwire-kv", argv)(["--adopt", "5:inet"])
        expected = [sys.executable, "-m", "twisted", "--log-format", "text", "chunkwire-kv", "--grace", "4"]
        self.assertEqual(command, expected + ["--adopt", "5:inet"])

    def test_heldBytesShared(self) -> None:
        """
        With --workers N each worker gets 1/N of --max-held-bytes (the
        default pool too): the server as a whole holds at most one pool,
        where N workers with the whole pool each held N (kv-workers x
        never-read rose 121-165 MiB above idle with two 64 MiB pools).
        """
        from twisted.plugins.chunkwire_plugins import EchoOptions, _supervisor

        cases = [([], (32 << 20) // 3), (["--max-held-bytes", "3000"], 1000), (["--max-held-bytes", "0"], None)]
        for given, each in cases:
            argv = ["/usr/bin/twist", "chunkwire-echo", "--workers", "3", *given]
            options = EchoOptions()
            options.parseOptions(argv[2:])
            with _patched(sys, "argv", argv):
                command = _supervisor(options, "chunkwire-echo").command(["--adopt", "5:inet"])
            held = [arg.split("=", 1)[1] for arg in command if arg.startswith("--max-held-bytes=")]
            if each is None:
                self.assertEqual(held, [])
            else:
                # The worker's own option comes last: it is the one its parser keeps.
                self.assertEqual(int(held[-1]), each)

    def test_unshareable(self) -> None:
        """Only tcp:, tcp6: and unix: listeners (under haproxy:, ssl: or chunkwire-tls:, or not) can be shared."""
        from twisted.internet import reactor

        for description in ("systemd:domain=INET:index=0", "chunkwire-tls:systemd:index=0:privateKey=k.pem"):
            with self.assertRaises(ValueError) as caught:
                bind(reactor, description, 2)
            self.assertIn("tcp:, tcp6: and unix:", str(caught.exception))

    def test_adoptSpec(self) -> None:
        """--adopt takes FD:FAMILY or FD:FAMILY:haproxy, and refuses anything else."""
        from twisted.internet import reactor

        for bad in ("x:inet", "5", "5:ipx", "5:inet:tls"):
            self.assertRaises(ValueError, adoptedEndpoint, reactor, bad)
        self.assertEqual(adoptedEndpoint(reactor, "7:inet6").fileno, 7)

    def test_pluginOptions(self) -> None:
        """The plugins take --workers, --reuse-port and --grace (1 worker, 30 s by default); ssl: is shared."""
        from twisted.python import usage

        from twisted.plugins import chunkwire_plugins

        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions([])
        self.assertEqual((options["workers"], options["reuse-port"], options["grace"]), (1, False, 30.0))
        options = chunkwire_plugins.EchoOptions()
        options.parseOptions(["--workers", "3", "--reuse-port", "--grace", "2.5", "--adopt", "5:inet"])
        self.assertEqual((options["workers"], options["reuse-port"], options["grace"]), (3, True, 2.5))
        self.assertEqual(options["adopt"], ["5:inet"])
        key = SelfSignedCertificate.generate().writeTo(self.mktemp()).serverPEMPath
        store = ["--store", self.mktemp() + ".sqlite"]
        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions(["--workers", "2", "--listen", f"ssl:8443:privateKey={key}", *store])
        self.assertEqual(options["listen"], [f"ssl:8443:privateKey={key}"])
        bad = ["--workers", "2", "--listen", f"ssl:8443:privateKey={key}:extraCertChain={key}", *store]
        self.assertRaises(usage.UsageError, chunkwire_plugins.KeyValueOptions().parseOptions, bad)
        self.assertRaises(usage.UsageError, chunkwire_plugins.KeyValueOptions().parseOptions, ["--workers", "0"])

    def test_kvWorkersNeedStore(self) -> None:
        """chunkwire-kv --workers N (N > 1) without --store is a usage error naming --store; with it, accepted."""
        from twisted.python import usage

        from twisted.plugins import chunkwire_plugins

        error = self.assertRaises(
            usage.UsageError, chunkwire_plugins.KeyValueOptions().parseOptions, ["--workers", "2"]
        )
        self.assertIn("--store", str(error))
        self.assertNotIn("\n", str(error))
        options = chunkwire_plugins.KeyValueOptions()
        options.parseOptions(["--workers", "2", "--store", self.mktemp() + ".sqlite"])
        self.assertEqual(options["workers"], 2)
        bad = ["--store", "/nonexistent/kv.sqlite"]
        self.assertRaises(usage.UsageError, chunkwire_plugins.KeyValueOptions().parseOptions, bad)

    def test_tcpAddress(self) -> None:
        """SO_REUSEPORT sockets are bound from the tcp: description's port, interface and backlog; others refused."""
        from protocols.serving._workers import _tcpAddress

        self.assertEqual(_tcpAddress("tcp", "tcp:8760:interface=127.0.0.1")[1:], ("127.0.0.1", 8760, 50))
        self.assertEqual(_tcpAddress("tcp6", r"tcp6:port=0:interface=\:\:1:backlog=9")[1:], ("::1", 0, 9))
        for bad in ("tcp:", "tcp:x", "tcp:80:reuse=1"):
            self.assertRaises(ValueError, _tcpAddress, "tcp", bad)

    def test_reusePortSockets(self) -> None:
        """With SO_REUSEPORT each worker gets its own socket, all bound to one port."""
        from twisted.internet import reactor

        if not hasattr(socket, "SO_REUSEPORT"):
            self.skipTest("no SO_REUSEPORT on this platform")
        listener = bind(reactor, "tcp:0:interface=127.0.0.1", 3, reusePort=True)
        try:
            self.assertEqual(len(listener.sockets), 3)
            self.assertEqual(len({sock.getsockname() for sock in listener.sockets}), 1)
            self.assertEqual(len({listener.adoptArgument(n) for n in range(3)}), 3)
        finally:
            listener.close()


async def _pids(reactor: Any, port: int, count: int) -> list[int]:
    """The pid answering each of C{count} fresh connections."""
    pids = []
    for _ in range(count):
        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}")
        pids.append(await root.callRemote("pid"))
        await root.broker.disconnect()
    return pids


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


def _running(supervisor: Supervisor) -> bool:
    """
    Whether every worker of C{supervisor} runs its own program (it has
    exec'd): a SIGTERM that reaches a worker between its fork and its exec
    is taken by the copy of this process's handler and lost, so a test
    stops its supervisor only once its workers are past that point
    (Linux's /proc tells; elsewhere, assumed).
    """
    for process in supervisor.workers.values():
        try:
            with open(f"/proc/{process.pid}/cmdline", "rb") as file:
                if b"workerprocess" not in file.read():
                    return False
        except FileNotFoundError:
            if os.path.isdir("/proc/self"):
                return False
    return True


async def _until(reactor: Any, condition: Any, timeout: float = 60.0) -> None:
    """Wait, turning the reactor, until C{condition()} is true (only a hang misses C{timeout})."""
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await deferLater(reactor, 0.05)
    raise AssertionError("condition not met in time")


async def supervisedWorkers(reactor: Any, reusePort: bool = False) -> None:
    """Two workers serve one port; a killed worker is started again while the other serves; stopping ends both."""
    command = lambda adopt: WORKER + adopt  # noqa: E731
    listen = ["tcp:0:interface=127.0.0.1"]
    supervisor = Supervisor(reactor, listen, command, 2, reusePort=reusePort, env=ENV, path=str(ROOT))
    supervisor.startService()
    port = supervisor.listeners[0].address[1]
    try:
        pids = set(await _pids(reactor, port, 30))
        workers = {process.pid for process in supervisor.workers.values()}
        assert pids <= workers and len(workers) == 2, (pids, workers)
        if reusePort:
            assert len(pids) == 2, pids
        victim = supervisor.workers[0].pid
        os.kill(victim, signal.SIGKILL)
        await _until(reactor, lambda: supervisor.restarts == 1 and 0 in supervisor.workers)
        await _until(reactor, lambda: _running(supervisor))
        assert supervisor.workers[0].pid != victim
        assert victim not in await _pids(reactor, port, 5)
    finally:
        running = [process.pid for process in supervisor.workers.values()]
        await supervisor.stopService()
    for pid in running:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"worker {pid} still runs after the supervisor stopped")


async def supervisedWorkersReusePort(reactor: Any) -> None:
    """With SO_REUSEPORT the kernel spreads connections over both workers; a killed worker comes back."""
    if not hasattr(socket, "SO_REUSEPORT"):
        return
    await supervisedWorkers(reactor, reusePort=True)


async def twistWorkers(reactor: Any) -> None:
    """twist chunkwire-kv --workers 2 serves from two processes, and on SIGTERM every process exits cleanly."""
    command = [sys.executable, "-m", "twisted", "--log-format", "text", "chunkwire-kv"]
    command += ["--listen", "tcp:0:interface=127.0.0.1"]
    store = tempfile.mkdtemp()
    command += ["--workers", "2", "--grace", "2", "--store", os.path.join(store, "kv.sqlite")]
    process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # Port 0: the supervisor logs the port it bound before it starts the workers.
        started = readUntil(
            process, rb"starting on (\d+)[\s\S]*worker 0 started: pid (\d+)[\s\S]*worker 1 started: pid (\d+)", 60
        )
        port = int(started.group(1))
        workers = {int(started.group(2)), int(started.group(3))}
        # The supervisor's socket queues the connection until a worker accepts it: no retry is needed.
        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}")
        await root.callRemote("put", "k", "v")
        assert await root.callRemote("get", "k") == "v"
        lost: Deferred[Any] = root.broker.whenDisconnected()
        process.send_signal(signal.SIGTERM)
        await lost
        await _until(reactor, lambda: process.poll() is not None)
        # twist ends by SIGTERM's own default action once its reactor has stopped cleanly.
        assert process.returncode in (0, -signal.SIGTERM), process.returncode
        assert process.stdout is not None
        output = process.stdout.read()
        assert b"Traceback" not in output and b"Unhandled" not in output, output[-2000:]
        for pid in workers:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            raise AssertionError(f"worker {pid} still runs")
    finally:
        stop(process)  # SIGTERM: a supervisor stops its workers too
        shutil.rmtree(store)


async def orphanedWorkers(reactor: Any) -> None:
    """Workers whose supervisor is killed (SIGKILL: no chance to stop them) drain and exit by themselves."""
    command = [sys.executable, "-m", "twisted", "--log-format", "text", "chunkwire-echo"]
    command += ["--listen", "tcp:0:interface=127.0.0.1", "--workers", "2", "--grace", "1"]
    process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    workers: list[int] = []
    try:
        # Both workers watch their parent (they do before they listen) once each has logged "starting on"
        # (the supervisor logs its own line first): three in all, in whatever order the processes ran.
        pattern = rb"(?s)(?=.*worker 0 started: pid (\d+))(?=.*worker 1 started: pid (\d+))(?=(?:.*?starting on ){3})"
        started = readUntil(process, pattern, 60)
        workers += [int(started.group(1)), int(started.group(2))]
        process.kill()
        process.wait(10)

        def gone() -> bool:
            for pid in workers:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    continue
                return False
            return True

        await _until(reactor, gone)
    finally:
        stop(process)  # SIGTERM: a supervisor stops its workers too
        for pid in workers:
            # Only if the test failed: nothing may outlive it.
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


async def servedByWorkers(reactor: Any) -> None:
    """
    serveWorkers runs the named factory maker, with its arguments, in each
    worker; the calls are answered by the workers, which stop.
    """
    from protocols.serving._workers import serveWorkers

    factory = "tests.protocols.serving.userservice:greeterFactory"
    listen = ["tcp:0:interface=127.0.0.1"]
    supervisor = serveWorkers(reactor, listen, factory, 2, arguments=["hi"], grace=2.0, env=ENV, path=str(ROOT))
    try:
        port = supervisor.listeners[0].address[1]
        pids = set(await _pids(reactor, port, 4))
        assert pids <= {process.pid for process in supervisor.workers.values()}, pids
        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}")
        assert await root.callRemote("greet", "there") == "hi, there"
        await root.broker.disconnect()
    finally:
        await supervisor.stopService()
    assert supervisor.workers == {}


def _refused(port: int) -> bool:
    """Whether a fresh TCP connection to C{port} is refused (rather than queued where nobody accepts)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except ConnectionRefusedError:
        return True
    return False


async def refusedWhileDraining(reactor: Any) -> None:
    """
    Once the supervisor is stopping, a new connection is refused at once,
    while a worker still drains a call: the supervisor's copies of the
    listening sockets are closed then, not once the workers exit (until then
    the kernel queued connections on them that no process would accept).
    """
    for reusePort in (False, True) if hasattr(socket, "SO_REUSEPORT") else (False,):
        command = lambda adopt: WORKER[:-1] + ["10"] + adopt  # noqa: E731  (a grace of 10 s)
        listen = ["tcp:0:interface=127.0.0.1"]
        supervisor = Supervisor(reactor, listen, command, 2, reusePort=reusePort, env=ENV, path=str(ROOT))
        supervisor.startService()
        port = supervisor.listeners[0].address[1]
        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port}")
        await root.callRemote("pid")  # a worker serves this connection (it may still be starting up before)
        await _until(reactor, functools.partial(_running, supervisor))
        slow = root.callRemote("slowPid", 30.0)  # keeps its worker draining until the grace ends
        await root.callRemote("pid")  # answered after the slow call was read: that call has reached its worker
        stopping = supervisor.stopService()
        try:
            deadline = time.monotonic() + 60  # (only a hang takes that long; the drain's grace, 10 s, ends it first)
            while not _refused(port):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"still queued where nobody accepts, 60 s into the drain (reusePort={reusePort})"
                    )
                await deferLater(reactor, 0.1)
            assert not slow.called, "the drain ended before the check"
        finally:
            slow.addErrback(lambda _: None)
            await root.broker.disconnect()  # its worker's drain then ends at once
            await stopping


async def stoppedWithoutSignal(reactor: Any) -> None:
    """
    A worker that never gets its SIGTERM (here: it ignores it, as one that
    took it between fork and exec in effect does) still drains and exits
    when the supervisor stops, told by its stdin's end, long before the kill
    after the grace time.
    """
    deaf = "import signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); sys.argv[0] = 'workerprocess'; "
    deaf += "from twisted.internet import reactor; run = reactor.run; "
    deaf += "reactor.run = lambda: run(installSignalHandlers=False); "
    deaf += "from tests.protocols.serving.workerprocess import main; main()"
    command = lambda adopt: [sys.executable, "-c", deaf, "--grace", "2", *adopt]  # noqa: E731
    supervisor = Supervisor(reactor, ["tcp:0:interface=127.0.0.1"], command, 2, grace=60.0, env=ENV, path=str(ROOT))
    supervisor.startService()
    port = supervisor.listeners[0].address[1]
    await _pids(reactor, port, 2)
    running = [process.pid for process in supervisor.workers.values()]
    started = reactor.seconds()
    await supervisor.stopService()
    assert reactor.seconds() - started < 30, "the workers were killed at the end of the grace time, not stopped"
    for pid in running:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"worker {pid} still runs after the supervisor stopped")


class WorkerTests(TestCase):
    """Workers, under trial."""

    test_supervised_workers = trialTest(supervisedWorkers)
    test_supervised_workers_reuse_port = trialTest(supervisedWorkersReusePort)
    test_twist_workers = trialTest(twistWorkers)
    test_served_by_workers = trialTest(servedByWorkers)
    test_orphaned_workers = trialTest(orphanedWorkers)
    test_refused_while_draining = trialTest(refusedWhileDraining)
    test_stopped_without_signal = trialTest(stoppedWithoutSignal)


test_supervised_workers = pytestTest(supervisedWorkers)
test_supervised_workers_reuse_port = pytestTest(supervisedWorkersReusePort)
test_twist_workers = pytestTest(twistWorkers)
test_served_by_workers = pytestTest(servedByWorkers)
test_orphaned_workers = pytestTest(orphanedWorkers)
test_refused_while_draining = pytestTest(refusedWhileDraining)
test_stopped_without_signal = pytestTest(stoppedWithoutSignal)
