"""A service of one's own on workers (L{protocols.serving.serveWorkers}), and TLS listeners shared with workers.

Real processes: the supervisor binds port 0 (it runs in the test process,
which reads the port bound; C{twist} logs it) and two workers adopt each
socket.  One supervisor serves both a plain and a TLS listener, to keep
the processes few.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase, TestCase

from protocols import rpc
from protocols.serving import adoptedEndpoint
from protocols.serving._workers import bind, serveWorkers
from protocols.testing import SelfSignedCertificate
from tests.processes import ENV, ROOT, readUntil, stop

from ..helpers import pytestTest, trialTest

USER_SERVICE = "tests.protocols.serving.userservice"


async def _everyWorker(reactor: Any, address: str, workers: set[int], timeout: float = 60.0) -> set[str]:
    """
    Connect to C{address} afresh until every pid of C{workers} has
    answered (which worker accepts is the kernel's choice: only a hang
    takes C{timeout}); the greetings given.
    """
    seen: set[int] = set()
    greetings: set[str] = set()
    deadline = time.monotonic() + timeout
    while seen != workers:
        assert time.monotonic() < deadline, f"only {seen} of {workers} answered on {address}"
        root = await rpc.connect(reactor, address)
        try:
            seen.add(await root.callRemote("pid"))
            greetings.add(await root.callRemote("greet", "you"))
        finally:
            await root.broker.disconnect()
        assert seen <= workers, (seen, workers)
    return greetings


async def ownServiceOnWorkers(reactor: Any) -> None:
    """
    serveWorkers(serve=...) runs one's own rpc.serve with bulk options, with its argument,
    on two workers: both answer calls on a plain listener and on an ssl:
    one (each worker does the TLS with the description's key; a client
    trusting the CA connects); stopping the supervisor ends both.
    """
    directory = tempfile.mkdtemp()
    certificate = SelfSignedCertificate.generate().writeTo(directory)
    listen = ["tcp:0:interface=127.0.0.1", certificate.serverEndpoint()]
    supervisor = serveWorkers(
        reactor,
        listen,
        serve=f"{USER_SERVICE}:serveGreeter",
        count=2,
        arguments=["hello"],
        grace=2.0,
        env=ENV,
        path=str(ROOT),
    )
    try:
        workers = {process.pid for process in supervisor.workers.values()}
        plain, tls = (listener.address[1] for listener in supervisor.listeners)
        greetings = await _everyWorker(reactor, f"tcp:host=127.0.0.1:port={plain}", workers)
        greetings |= await _everyWorker(reactor, certificate.clientEndpoint(tls), workers)
        assert greetings == {"hello, you"}, greetings
    finally:
        running = [process.pid for process in supervisor.workers.values()]
        await supervisor.stopService()
        shutil.rmtree(directory)
    assert supervisor.workers == {}
    for pid in running:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"worker {pid} still runs after the supervisor stopped")


async def twistKvOverTLS(reactor: Any) -> None:
    """twist chunkwire-kv --workers 2 --listen ssl:0:...: a client trusting the CA puts and gets through TLS."""
    directory = tempfile.mkdtemp()
    certificate = SelfSignedCertificate.generate().writeTo(directory)
    command = [sys.executable, "-m", "twisted", "--log-format", "text", "chunkwire-kv"]
    command += ["--listen", certificate.serverEndpoint(), "--workers", "2", "--grace", "2"]
    command += ["--store", os.path.join(directory, "kv.sqlite")]
    process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        # Port 0: the supervisor logs the port it bound (plain TCP: the workers do the TLS) before the workers start.
        started = readUntil(process, rb"starting on (\d+)[\s\S]*worker 1 started", 60)
        address = certificate.clientEndpoint(int(started.group(1)))
        roots = [await rpc.connect(reactor, address) for _ in range(4)]
        for number, root in enumerate(roots):
            await root.callRemote("put", f"k{number}", "v")
        for root in roots:
            assert await root.callRemote("list", "k") == ["k0", "k1", "k2", "k3"]
        lost: Deferred[Any] = roots[0].broker.whenDisconnected()
        for root in roots[1:]:
            await root.broker.disconnect()
        process.send_signal(signal.SIGTERM)
        await lost
        process.wait(60)
        assert process.stdout is not None
        output = process.stdout.read()
        assert b"Traceback" not in output and b"Unhandled" not in output, output[-2000:]
    finally:
        stop(process)
        shutil.rmtree(directory)


class OwnWorkersTests(TestCase):
    """Under trial."""

    test_own_service_on_workers = trialTest(ownServiceOnWorkers)
    test_twist_kv_over_tls = trialTest(twistKvOverTLS)


test_own_service_on_workers = pytestTest(ownServiceOnWorkers)
test_twist_kv_over_tls = pytestTest(twistKvOverTLS)


class SharedTLSTests(SynchronousTestCase):
    """What the supervisor binds for a TLS listener, and what a worker makes of it (no process)."""

    def test_supervisorBindsPlain(self) -> None:
        """An ssl: listener is bound as plain TCP, and its workers are told the TLS description after the family."""
        from twisted.internet import reactor

        listener = bind(reactor, r"ssl:0:interface=127.0.0.1:privateKey=/k/server.pem:certKey=/k/c\:ert.pem", 2)
        try:
            self.assertEqual(listener.sockets[0].getsockname()[0], "127.0.0.1")
            self.assertEqual(
                listener.tls, r"chunkwire-tls:tcp:0:interface=127.0.0.1:privateKey=/k/server.pem:certKey=/k/c\:ert.pem"
            )
            fd = listener.sockets[0].fileno()
            self.assertEqual(listener.adoptArgument(0), f"{fd}:inet:{listener.tls}")
        finally:
            listener.close()
        listener = bind(reactor, "haproxy:chunkwire-tls:unix:" + self.mktemp() + ":privateKey=k.pem", 1)
        try:
            self.assertTrue(listener.adoptArgument(0).split(":", 2)[2].startswith("haproxy:chunkwire-tls:unix:"))
        finally:
            listener.close()

    def test_unshareableTLS(self) -> None:
        """An ssl: option that cannot be carried to the workers is refused by name, before anything is bound."""
        from twisted.internet import reactor

        with self.assertRaises(ValueError) as caught:
            bind(reactor, "ssl:0:privateKey=k.pem:extraCertChain=chain.pem", 2)
        self.assertIn("extraCertChain", str(caught.exception))

    def test_workerEndpoint(self) -> None:
        """A worker's --adopt with a TLS description serves TLS with its key over the adopted socket."""
        from twisted.internet import reactor

        from protocols._proxyheader import ProxiedEndpoint
        from protocols.auth._tlsendpoints import TLSServerEndpoint

        certificate = SelfSignedCertificate.generate().writeTo(self.mktemp())
        description = f"chunkwire-tls:tcp:0:privateKey={certificate.serverPEMPath}"
        endpoint = adoptedEndpoint(reactor, f"7:inet:{description}")
        self.assertIsInstance(endpoint, TLSServerEndpoint)
        self.assertEqual(endpoint.wrapped.fileno, 7)
        proxied = adoptedEndpoint(reactor, f"7:inet:haproxy:{description}")
        self.assertIsInstance(proxied, ProxiedEndpoint)
        for bad in ("7:inet:ssl:0:privateKey=k.pem", "7:inet:chunkwire-tls:tcp:0", "7:inet:haproxy:tls"):
            self.assertRaises(ValueError, adoptedEndpoint, reactor, bad)

    def test_clientCAReachesWorkers(self) -> None:
        """
        twist --workers with --client-ca: the supervisor's TLS listener names
        the CAs, so each worker requires client certificates; a worker's own
        options (--adopt, the default --listen) are accepted with --client-ca.
        """
        from twisted.plugins.chunkwire_plugins import KeyValueOptions, _supervisor

        certificate = SelfSignedCertificate.generate().writeTo(self.mktemp())
        ca = str(certificate.caDirectory)
        store = self.mktemp() + ".sqlite"
        argv = ["twist", "chunkwire-kv", "--workers", "2", "--store", store, "--client-ca", ca]
        argv += ["--listen", certificate.serverEndpoint()]
        options = KeyValueOptions()
        options.parseOptions(argv[2:])
        old, sys.argv = sys.argv, argv
        try:
            supervisor = _supervisor(options, "chunkwire-kv")
        finally:
            sys.argv = old
        (description,) = supervisor.descriptions
        self.assertTrue(description.startswith("chunkwire-tls:tcp:0:"), description)
        self.assertIn(f"caCertsDir={ca}", description)
        worker = KeyValueOptions()
        worker.parseOptions(["--store", store, "--client-ca", ca, "--adopt", f"7:inet:{description}"])
        endpoint = adoptedEndpoint(None, worker["adopt"][0])
        self.assertIsNotNone(endpoint.options)
