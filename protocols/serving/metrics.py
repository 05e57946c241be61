"""Prometheus metrics for chunkwire services: an interceptor and a /metrics page (the C{chunkwire[metrics]} extra).

Contract: L{PrometheusInterceptor} is an
L{protocols.rpc.interceptors.ICallInterceptor} that records, in a
C{prometheus_client} registry, each call that ends (by side, method and
outcome: C{chunkwire_rpc_calls_total}), its latency
(C{chunkwire_rpc_call_duration_seconds}, by side and method), the
connections open and opened, the bytes received and sent, and the bulk
streams in flight.  Per call it costs one dict lookup, one counter
increment and one histogram observation: the label children are made once
per (side, method, outcome).  Bytes are counted per read as a plain integer
and, like connections' sent bytes and streams, handed to Prometheus only
when it scrapes.  Method names come from the peer, so they are labels only
once a call of them succeeded or failed in the method (a refused call of an
unknown method counts as C{"<unknown>"}), and at most C{maxMethods} of them
(then C{"<other>"}).  L{metricsSite} serves C{/metrics} with Twisted Web.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..rpc.interceptors import REFUSED, CallInfo, CallInterceptor

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Seconds: RPC calls on a LAN take from tens of microseconds to seconds."""

UNKNOWN, OTHER = "<unknown>", "<other>"


class PrometheusInterceptor(CallInterceptor):
    """
    Records calls, latency, connections, bytes and streams in a Prometheus registry.

    @ivar registry: the C{CollectorRegistry} the metrics are in.
    """

    def __init__(
        self,
        registry: CollectorRegistry = REGISTRY,
        namespace: str = "chunkwire",
        buckets: tuple[float, ...] = LATENCY_BUCKETS,
        maxMethods: int = 1000,
    ) -> None:
        self.registry = registry
        self.maxMethods = maxMethods
        self._calls = Counter(
            "rpc_calls", "RPC calls ended", ["side", "method", "outcome"], namespace=namespace, registry=registry
        )
        self._latency = Histogram(
            "rpc_call_duration_seconds",
            "Seconds from a call's start to its end",
            ["side", "method"],
            namespace=namespace,
            registry=registry,
            buckets=buckets,
        )
        self._open = Gauge("connections", "RPC connections open", namespace=namespace, registry=registry)
        self._opened = Counter("connections_opened", "RPC connections opened", namespace=namespace, registry=registry)
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._methods: set[str] = set()
        self._live: dict[Any, None] = {}
        self._received = 0
        self._sentClosed = 0
        self._prefix = f"{namespace}_" if namespace else ""
        registry.register(_LiveCollector(self))

    # -- calls -------------------------------------------------------------------------

    def callEnded(self, call: CallInfo) -> None:
        key = (call.side, call.method, call.outcome or "")
        children = self._children.get(key)
        if children is None:
            children = self._child(call)
        assert call.ended is not None
        children[0].inc()
        children[1].observe(call.ended - call.started)

    def _child(self, call: CallInfo) -> tuple[Any, Any]:
        method = call.method
        if call.outcome == REFUSED and call.errorType in ("NoSuchMethod", "NoSuchObject"):
            method = UNKNOWN
        elif method not in self._methods:
            if len(self._methods) >= self.maxMethods:
                method = OTHER
            else:
                self._methods.add(method)
        outcome = call.outcome or ""
        children = (self._calls.labels(call.side, method, outcome), self._latency.labels(call.side, method))
        if method == call.method:
            # Cached only under the peer's own name once it is a label: unknown names stay uncached.
            self._children[(call.side, call.method, outcome)] = children
        return children

    # -- connections ---------------------------------------------------------------------

    def connectionMade(self, broker: Any) -> None:
        self._open.inc()
        self._opened.inc()
        self._live[broker] = None
        connection = broker.connection
        received = connection.dataReceived

        def counting(data: bytes) -> None:
            self._received += len(data)
            received(data)

        connection.dataReceived = counting

    def connectionLost(self, broker: Any) -> None:
        self._open.dec()
        self._live.pop(broker, None)
        self._sentClosed += _sent(broker)

    def sentBytes(self) -> int:
        """Bytes sent on every connection so far."""
        return self._sentClosed + sum(_sent(broker) for broker in self._live)

    def receivedBytes(self) -> int:
        """Bytes received on every connection so far."""
        return self._received

    def streams(self) -> int:
        """Bulk streams in flight on the open connections, both ways."""
        return sum(
            extension.streamCount
            for broker in self._live
            for extension in broker.extensions
            if hasattr(extension, "streamCount")
        )


def _sent(broker: Any) -> int:
    transport = broker.connection.transport
    return int(getattr(transport, "bytesSent", 0) or 0)


class _LiveCollector:
    """What is read only when Prometheus scrapes: bytes and streams."""

    def __init__(self, interceptor: PrometheusInterceptor) -> None:
        self._interceptor = interceptor

    def collect(self) -> Iterator[Any]:
        interceptor = self._interceptor
        prefix = interceptor._prefix
        yield CounterMetricFamily(f"{prefix}received_bytes", "Bytes received", value=interceptor.receivedBytes())
        yield CounterMetricFamily(f"{prefix}sent_bytes", "Bytes sent", value=interceptor.sentBytes())
        yield GaugeMetricFamily(f"{prefix}bulk_streams", "Bulk streams in flight", value=interceptor.streams())


def metricsSite(registry: CollectorRegistry = REGISTRY) -> Any:
    """A Twisted Web C{Site} serving the registry's metrics at C{/metrics}."""
    from prometheus_client.twisted import MetricsResource
    from twisted.web.resource import Resource
    from twisted.web.server import Site

    root = Resource()  # type: ignore[no-untyped-call]
    root.putChild(b"metrics", MetricsResource(registry=registry))  # type: ignore[no-untyped-call, arg-type]
    return Site(root)  # type: ignore[no-untyped-call]
