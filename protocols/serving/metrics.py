# -*- test-case-name: tests.protocols.serving.test_metrics -*-
"""Prometheus metrics for chunkwire services: an interceptor and a /metrics page (the C{chunkwire[metrics]} extra).

Contract: L{PrometheusInterceptor} is an
L{protocols.rpc._interceptors.ICallInterceptor} that records, in a
C{prometheus_client} registry, each call that ends (by side, method and
outcome: C{chunkwire_rpc_calls_total}), its latency
(C{chunkwire_rpc_call_duration_seconds}, by side and method), the
connections open and opened, the bytes received and sent, the bulk
streams in flight, and what the open connections' ledgers hold for their
peers (C{chunkwire_connection_held_bytes} by account, the largest one
connection holds, its budget, and how often a connection went over it:
C{framing/_ledger.py}).  It is an L{protocols.rpc.ICallRecorder}:
each call is counted in a L{protocols.rpc.CallTally} (plain
numbers, no lock: the reactor thread alone writes them), without a call of
this class once its method has succeeded on the connection; they, the
bytes (counted per read) and the streams are handed to Prometheus only
when it scrapes.  Method names come from the peer, so they are labels only
once a call of them succeeded or failed in the method (a refused call of an
unknown method counts as C{"<unknown>"}), and at most C{maxMethods} of them
(then C{"<other>"}).  L{metricsSite} serves C{/metrics} with Twisted Web.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString
from zope.interface import implementer

from framing._ledger import TOTALS, Ledger
from framing.rpc._interception import CLIENT, REFUSED, SERVER, CallTally

from .._interfaces import IConnectionObserver
from ..rpc._interceptors import CallInterceptor

__all__ = [
    "LATENCY_BUCKETS",
    "PrometheusInterceptor",
    "metricsSite",
]

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Seconds: RPC calls on a LAN take from tens of microseconds to seconds."""

UNKNOWN, OTHER = "<unknown>", "<other>"


class PrometheusInterceptor(CallInterceptor):
    """
    Records calls, latency, connections, bytes and streams for a Prometheus registry.

    @ivar registry: the C{CollectorRegistry} the metrics are in.
    @ivar bounds: the latency histogram's bucket bounds, in seconds.
    @ivar prefix: what every metric's name starts with (C{"chunkwire_"}).
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
        self.bounds = tuple(float(bound) for bound in buckets)
        self._tables: dict[str, dict[str, CallTally]] = {SERVER: {}, CLIENT: {}}
        self._methods: set[str] = set()
        self._open = Gauge("connections", "RPC connections open", namespace=namespace, registry=registry)
        self._opened = Counter("connections_opened", "RPC connections opened", namespace=namespace, registry=registry)
        self._live: dict[Any, None] = {}
        self._received = 0
        self._sentClosed = 0
        self.prefix = f"{namespace}_" if namespace else ""
        registry.register(_LiveCollector(self))

    # -- calls -------------------------------------------------------------------------

    def tallyFor(self, side: str, method: str, outcome: str, errorType: str | None) -> CallTally:
        """Where a call counts: its method, C{<unknown>} (a name that is no method), or C{<other>} past the cap."""
        if outcome == REFUSED and errorType in _UNKNOWN_TYPES and method not in self._methods:
            method = UNKNOWN
        elif method not in self._methods:
            if len(self._methods) >= self.maxMethods:
                method = OTHER
            else:
                self._methods.add(method)
        table = self._tables[side]
        tally = table.get(method)
        if tally is None:
            tally = table[method] = CallTally(self.bounds)
        return tally

    def callFigures(self) -> list[tuple[str, str, CallTally]]:
        """Each (side, method) seen, with its figures (for the collector)."""
        return [(side, method, stats) for side, table in self._tables.items() for method, stats in list(table.items())]

    # -- connections ---------------------------------------------------------------------

    def connectionMade(self, broker: Any) -> None:
        self._open.inc()
        self._opened.inc()
        self._live[broker] = None
        broker.connection.addObserver(_ReadCounter(self))

    def connectionLost(self, broker: Any) -> None:
        self._open.dec()
        self._live.pop(broker, None)
        self._sentClosed += _sent(broker)

    def sentBytes(self) -> int:
        """Bytes sent on every connection so far."""
        return self._sentClosed + sum(_sent(broker) for broker in self._live)

    def countReceived(self, length: int) -> None:
        """C{length} more bytes were read from a peer (told by each connection's observer)."""
        self._received += length

    def receivedBytes(self) -> int:
        """Bytes received on every connection so far."""
        return self._received

    def ledgers(self) -> list[Ledger]:
        """The ledgers of the open connections (L{framing._ledger.Ledger})."""
        return [broker.connection.ledger for broker in self._live if hasattr(broker.connection, "ledger")]

    def streams(self) -> int:
        """Bulk streams in flight on the open connections, both ways."""
        return sum(
            extension.streamCount
            for broker in self._live
            for extension in broker.extensions
            if hasattr(extension, "streamCount")
        )


_UNKNOWN_TYPES = frozenset({"NoSuchMethod", "NoSuchObject"})


@implementer(IConnectionObserver)
class _ReadCounter:
    """
    Counts a connection's bytes read into its L{PrometheusInterceptor}
    (an observer: each read once, decoded at once or held first).
    """

    def __init__(self, interceptor: PrometheusInterceptor) -> None:
        self.interceptor = interceptor

    def connectionStarted(self, protocol: Any) -> None:
        pass

    def dataArrived(self, length: int) -> None:
        self.interceptor.countReceived(length)

    def dataDecoded(self, length: int, completed: int, controlBytes: int) -> None:
        pass  # (counted when it arrived)

    def dataRead(self, length: int, completed: int, controlBytes: int) -> None:
        self.interceptor.countReceived(length)

    def sendBacklogChanged(self, backlogged: bool) -> None:
        pass

    def connectionEnded(self, reason: Any) -> None:
        pass


def _sent(broker: Any) -> int:
    transport = broker.connection.transport
    return int(getattr(transport, "bytesSent", 0) or 0)


class _LiveCollector:
    """What is read only when Prometheus scrapes: calls, latency, bytes and streams."""

    def __init__(self, interceptor: PrometheusInterceptor) -> None:
        self._interceptor = interceptor

    def collect(self) -> Iterator[Any]:
        interceptor = self._interceptor
        prefix = interceptor.prefix
        calls = CounterMetricFamily(f"{prefix}rpc_calls", "RPC calls ended", labels=["side", "method", "outcome"])
        latency = HistogramMetricFamily(
            f"{prefix}rpc_call_duration_seconds", "Seconds from a call's start to its end", labels=["side", "method"]
        )
        bounds = [*map(floatToGoString, interceptor.bounds), "+Inf"]
        for side, method, stats in interceptor.callFigures():
            for outcome, count in stats.counts():
                calls.add_metric([side, method, outcome], count)
            cumulative = list(accumulate(stats.buckets))
            latency.add_metric([side, method], list(zip(bounds, cumulative, strict=True)), stats.total)
        yield calls
        yield latency
        yield CounterMetricFamily(f"{prefix}received_bytes", "Bytes received", value=interceptor.receivedBytes())
        yield CounterMetricFamily(f"{prefix}sent_bytes", "Bytes sent", value=interceptor.sentBytes())
        yield GaugeMetricFamily(f"{prefix}bulk_streams", "Bulk streams in flight", value=interceptor.streams())
        yield from _ledgerFamilies(prefix, interceptor.ledgers())


def _ledgerFamilies(prefix: str, ledgers: list[Ledger]) -> Iterator[Any]:
    """The open connections' ledgers: held bytes by account, the largest holder, the budget, budgets passed."""
    held = GaugeMetricFamily(
        f"{prefix}connection_held_bytes", "Bytes the open connections hold for their peers", labels=["account"]
    )
    byAccount: dict[str, int] = {}
    for ledger in ledgers:
        for account, count in ledger.accounts().items():
            byAccount[account] = byAccount.get(account, 0) + count
    for account, count in sorted(byAccount.items()):
        held.add_metric([account], count)
    yield held
    largest = max((ledger.held for ledger in ledgers), default=0)
    yield GaugeMetricFamily(
        f"{prefix}connection_held_bytes_max", "The most bytes one open connection holds for its peer", value=largest
    )
    budgets = [ledger.budget for ledger in ledgers if ledger.budget is not None]
    yield GaugeMetricFamily(
        f"{prefix}connection_budget_bytes", "The largest budget of an open connection", value=max(budgets, default=0)
    )
    yield CounterMetricFamily(
        f"{prefix}connection_over_budget", "Times a connection went over its budget", value=TOTALS.full_events
    )


def metricsSite(registry: CollectorRegistry = REGISTRY) -> Any:
    """A Twisted Web C{Site} serving the registry's metrics at C{/metrics}."""
    from prometheus_client.twisted import MetricsResource
    from twisted.web.resource import Resource
    from twisted.web.server import Site

    root = Resource()  # type: ignore[no-untyped-call]
    root.putChild(b"metrics", MetricsResource(registry=registry))  # type: ignore[no-untyped-call, arg-type]
    return Site(root)  # type: ignore[no-untyped-call]
