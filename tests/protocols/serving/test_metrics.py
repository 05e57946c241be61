"""The Prometheus interceptor: calls, errors, latency per method, connections, bytes; and the /metrics page."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase, TestCase

try:
    from prometheus_client import CollectorRegistry

    from protocols.serving.metrics import OTHER, UNKNOWN, PrometheusInterceptor, metricsSite
except ImportError:  # the chunkwire[metrics] extra is not installed
    CollectorRegistry = None

from ..helpers import pytestTest, trialTest
from ..rpc.services import NotFound
from ..rpc.test_interceptors import Pair

SKIP = "prometheus_client (the chunkwire[metrics] extra) is not installed" if CollectorRegistry is None else None


class PrometheusTests(SynchronousTestCase):
    """What the interceptor records, in memory."""

    skip = SKIP

    def setUp(self) -> None:
        self.registry = CollectorRegistry()
        self.metrics = PrometheusInterceptor(self.registry, maxMethods=3)
        self.pair = Pair([self.metrics], [])

    def value(self, name: str, **labels: str) -> Any:
        return self.registry.get_sample_value(name, labels)

    def call(self, name: str, *args: Any) -> Any:
        return self.pair.call(name, *args)

    def test_callsAndLatency(self) -> None:
        """Each ended call is counted by side, method and outcome, and its latency observed per method."""
        for value in range(3):
            self.call("echo", value)
        self.failureResultOf(self.call("fail", "registered"), NotFound)
        self.assertEqual(self.value("chunkwire_rpc_calls_total", side="server", method="echo", outcome="ok"), 3)
        self.assertEqual(self.value("chunkwire_rpc_calls_total", side="server", method="fail", outcome="error"), 1)
        count = self.value("chunkwire_rpc_call_duration_seconds_count", side="server", method="echo")
        self.assertEqual(count, 3)

    def test_unknownMethods(self) -> None:
        """Calls of methods that do not exist share one label, so a peer cannot make up new series."""
        for name in ("a", "b", "c", "d"):
            self.failureResultOf(self.call(name))
        labels = {"side": "server", "method": UNKNOWN, "outcome": "refused"}
        self.assertEqual(self.value("chunkwire_rpc_calls_total", **labels), 4)

    def test_methodCap(self) -> None:
        """Past maxMethods distinct methods, further ones count under <other>."""
        for name in ("echo", "keywords", "same", "make"):
            self.call(name, *((1,) if name in ("echo", "keywords", "make") else ()))
        self.assertEqual(self.value("chunkwire_rpc_calls_total", side="server", method=OTHER, outcome="ok"), 1)

    def test_connectionsAndBytes(self) -> None:
        """Connections open and opened, and the bytes both ways, are exported."""
        self.call("echo", b"x" * 1000)
        self.assertEqual(self.value("chunkwire_connections"), 1)
        self.assertEqual(self.value("chunkwire_connections_opened_total"), 1)
        self.assertGreater(self.value("chunkwire_received_bytes_total"), 1000)
        # Every byte the client sent was read once (an observer of the connection counts them).
        self.assertEqual(self.value("chunkwire_received_bytes_total"), self.pair.client.connection.transport.bytesSent)
        self.assertGreater(self.value("chunkwire_sent_bytes_total"), 1000)
        self.assertEqual(self.value("chunkwire_bulk_streams"), 0)
        self.pair.server.connection.transport.loseConnection()
        self.pair.flush()
        self.assertEqual(self.value("chunkwire_connections"), 0)
        self.assertGreater(self.value("chunkwire_sent_bytes_total"), 1000)

    def test_ledgers(self) -> None:
        """What the open connections' ledgers hold is exported by account, with the largest, the budget and passes."""
        ledger = self.pair.server.connection.ledger
        ledger.charge("test", 1234)
        self.assertEqual(self.value("chunkwire_connection_held_bytes", account="test"), 1234)
        self.assertGreaterEqual(self.value("chunkwire_connection_held_bytes_max"), 1234)
        self.assertEqual(self.value("chunkwire_connection_budget_bytes"), ledger.budget)
        passes = self.value("chunkwire_connection_over_budget_total")
        assert ledger.budget is not None
        ledger.charge("test", ledger.budget)
        self.assertEqual(self.value("chunkwire_connection_over_budget_total"), passes + 1)
        ledger.release("test", ledger.budget + 1234)
        self.assertEqual(self.value("chunkwire_connection_held_bytes", account="test"), 0)


async def metricsPage(reactor: Any) -> None:
    """The /metrics page served with Twisted Web shows the calls made over TCP."""
    if CollectorRegistry is None:
        return
    from twisted.internet.endpoints import serverFromString
    from twisted.web.client import Agent, readBody

    from protocols import rpc
    from tests.protocols.serving.workerprocess import PidService

    registry = CollectorRegistry()
    factory = rpc.serverFactory(
        PidService(reactor), clock=reactor, options=rpc.ServerOptions(interceptors=[PrometheusInterceptor(registry)])
    )
    port = await serverFromString(reactor, "tcp:0:interface=127.0.0.1").listen(factory)
    web = await serverFromString(reactor, "tcp:0:interface=127.0.0.1").listen(metricsSite(registry))
    root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
    await root.callRemote("pid")
    response = await Agent(reactor).request(b"GET", f"http://127.0.0.1:{web.getHost().port}/metrics".encode())
    body = (await readBody(response)).decode()
    assert 'chunkwire_rpc_calls_total{method="pid",outcome="ok",side="server"} 1.0' in body, body
    await root.broker.disconnect()
    await port.stopListening()
    await web.stopListening()


class MetricsPageTests(TestCase):
    """The /metrics page, under trial."""

    skip = SKIP
    test_metrics_page = trialTest(metricsPage)


test_metrics_page = pytestTest(metricsPage)


async def twistMetrics(reactor: Any) -> None:
    """twist chunkwire-kv --metrics ENDPOINT serves /metrics, counting the calls made to the service."""
    if CollectorRegistry is None:
        return
    import subprocess
    import sys
    import time

    from twisted.internet.task import deferLater
    from twisted.web.client import Agent, readBody

    from protocols import rpc
    from tests.processes import ENV, ROOT, readUntil, stop

    # Both on port 0: the ports they got are read from the log (a port picked here and bound later could be taken).
    command = [sys.executable, "-m", "twisted", "--log-format", "text", "chunkwire-kv"]
    command += ["--listen", "tcp:0:interface=127.0.0.1", "--metrics", "tcp:0:interface=127.0.0.1"]
    process = subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        started = readUntil(process, rb"BrokerFactory starting on (\d+)[\s\S]*Site starting on (\d+)", timeout=60)
        service, metrics = int(started.group(1)), int(started.group(2))
        root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={service}")
        await root.callRemote("put", "k", "v")
        await root.broker.disconnect()
        counted = 'chunkwire_rpc_calls_total{method="put",outcome="ok",side="server"} 1.0'
        deadline = time.monotonic() + 60  # only a hang misses it: the page shows the call once the server counted it
        while True:
            response = await Agent(reactor).request(b"GET", f"http://127.0.0.1:{metrics}/metrics".encode())
            body = (await readBody(response)).decode()
            if counted in body or time.monotonic() > deadline:
                break
            await deferLater(reactor, 0.05)
        assert counted in body, body[-3000:]
        assert "chunkwire_connections_opened_total 1.0" in body
    finally:
        stop(process)


class TwistMetricsTests(TestCase):
    """twist --metrics, under trial."""

    skip = SKIP
    test_twist_metrics = trialTest(twistMetrics)


test_twist_metrics = pytestTest(twistMetrics)
