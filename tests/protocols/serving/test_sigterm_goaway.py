"""
A server stopped with SIGTERM sends GOAWAY before it closes: the example
servers (C{examples/kv_server.py}, C{examples/bulk_server.py}) and the
C{twist} plugins (C{chunkwire-kv}, C{chunkwire-bulk}), each as a real
process with one client connected.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from typing import Any

from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from protocols import bulk, rpc
from tests.processes import readUntil, startPython, stop

from ..helpers import pytestTest, trialTest

TIMEOUT = 90.0
"""Seconds a test may take: two process starts on a loaded machine, and the drain."""

LOCAL = "tcp:0:interface=127.0.0.1"
EXAMPLE_PORT = rb"listening on \S+ \(IPv4Address\(type='TCP', host='127\.0\.0\.1', port=(\d+)\)\)"
TWIST_PORT = rb"starting on (\d+)"


def connectBulk(reactor: Any, description: str) -> Any:
    """C{rpc.connect} with bulk options (the default ones), as the bulk services' clients connect."""
    return rpc.connect(reactor, description, options=rpc.ClientOptions(bulk=bulk.BulkOptions()))


async def _exited(reactor: Any, process: subprocess.Popen[bytes]) -> int:
    """Wait, the reactor running, until C{process} has exited; its status (the test's timeout bounds the wait)."""
    while process.poll() is None:
        await deferLater(reactor, 0.05)
    return process.returncode


async def _goAwayOnSigterm(
    reactor: Any, arguments: list[str], started: bytes, connect: Any, call: tuple[Any, ...]
) -> None:
    """Start C{arguments}, connect with C{connect} and make C{call}, SIGTERM the server: GOAWAY arrives, it exits."""
    process = startPython(*arguments)
    try:
        port = int(readUntil(process, started, timeout=60).group(1))
        root = await connect(reactor, f"tcp:host=127.0.0.1:port={port}")
        heard: list[Any] = []
        root.broker.drain.goneAway.append(heard.append)
        lost = root.broker.whenDisconnected()
        await root.callRemote(*call)  # served: the connection is up past any handshake
        process.send_signal(signal.SIGTERM)
        await lost
        assert heard == [root.broker], f"the connection closed without a GOAWAY ({arguments})"
        status = await _exited(reactor, process)
        assert status in (0, -signal.SIGTERM), (status, arguments)  # twist ends by the signal it was sent
    finally:
        stop(process)


async def kvExample(reactor: Any) -> None:
    """examples/kv_server.py, sent SIGTERM with a client connected, sends it GOAWAY, then exits."""
    arguments = ["examples/kv_server.py", "--listen", LOCAL, "--grace", "5"]
    await _goAwayOnSigterm(reactor, arguments, EXAMPLE_PORT, rpc.connect, ("list", ""))


async def bulkExample(reactor: Any) -> None:
    """examples/bulk_server.py, sent SIGTERM with a client connected, sends it GOAWAY, then exits."""
    directory = tempfile.mkdtemp(prefix="chunkwire-sigterm-")
    try:
        arguments = ["examples/bulk_server.py", "--listen", LOCAL, "--dir", directory, "--grace", "5"]
        await _goAwayOnSigterm(reactor, arguments, EXAMPLE_PORT, connectBulk, ("list",))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def kvTwist(reactor: Any) -> None:
    """twist chunkwire-kv (one process), sent SIGTERM with a client connected, sends it GOAWAY, then exits."""
    arguments = ["-m", "twisted", "chunkwire-kv", "--listen", LOCAL, "--grace", "5"]
    await _goAwayOnSigterm(reactor, arguments, TWIST_PORT, rpc.connect, ("list", ""))


async def bulkTwist(reactor: Any) -> None:
    """twist chunkwire-bulk (one process), sent SIGTERM with a client connected, sends it GOAWAY, then exits."""
    directory = tempfile.mkdtemp(prefix="chunkwire-sigterm-")
    try:
        arguments = ["-m", "twisted", "chunkwire-bulk", "--listen", LOCAL, "--dir", directory, "--grace", "5"]
        await _goAwayOnSigterm(reactor, arguments, TWIST_PORT, connectBulk, ("list",))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class GoAwayOnSigtermTests(TestCase):
    """SIGTERM and GOAWAY, under trial."""

    test_kv_example = trialTest(kvExample, TIMEOUT)
    test_bulk_example = trialTest(bulkExample, TIMEOUT)
    test_kv_twist = trialTest(kvTwist, TIMEOUT)
    test_bulk_twist = trialTest(bulkTwist, TIMEOUT)


test_kv_example = pytestTest(kvExample, TIMEOUT)
test_bulk_example = pytestTest(bulkExample, TIMEOUT)
test_kv_twist = pytestTest(kvTwist, TIMEOUT)
test_bulk_twist = pytestTest(bulkTwist, TIMEOUT)
