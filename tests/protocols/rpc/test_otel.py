"""protocols.rpc.otel in one process: a CLIENT span per call, its SERVER span as its child, RPC attributes, errors."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from twisted.internet.task import deferLater
from twisted.trial.unittest import SkipTest, SynchronousTestCase

from protocols.rpc import Broker, Referenceable, callContext, currentCall, remote
from protocols.rpc._interceptors import intercept
from protocols.testing import connectedPair

from .services import RpcPair
from .test_memory import quiet

try:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    from protocols.rpc.otel import TracingInterceptor
except ImportError:
    TracingInterceptor = None  # type: ignore[assignment,misc]


class Service(Referenceable):
    @remote
    def echo(self, value: Any) -> Any:
        return value

    @remote
    def headers(self) -> dict[str, str]:
        return dict(currentCall().metadata)

    @remote
    def fail(self) -> None:
        raise KeyError("missing")


class Relay(Referenceable):
    """Server A of a chain: passes each call on to server B (C{downstream}), now or after a turn of the clock."""

    def __init__(self) -> None:
        self.downstream: Any = None
        self.clock: Any = None
        self.currentInside: list[Any] = []

    @remote
    def relay(self, value: Any) -> Any:
        self.currentInside.append(trace.get_current_span())
        return self.downstream.callRemote("echo", value)

    @remote
    async def relayLater(self, value: Any) -> Any:
        await deferLater(self.clock, 0)
        self.currentInside.append(trace.get_current_span())
        return await self.downstream.callRemote("echo", value)


class TracingTests(SynchronousTestCase):
    """Both ends traced into one in-memory exporter."""

    def setUp(self) -> None:
        if TracingInterceptor is None:
            raise SkipTest("opentelemetry is not installed (the otel extra)")
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.pair = RpcPair(Service())
        quiet(self.pair.server, self.pair.client)
        intercept(self.pair.client, [TracingInterceptor(self.provider, service="svc")])
        intercept(self.pair.server, [TracingInterceptor(self.provider, service="svc")])

    def call(self, name: str, *args: Any) -> list[Any]:
        outcome: list[Any] = []
        self.pair.root.callRemote(name, *args).addBoth(outcome.append)
        self.pair.flush()
        return outcome

    def spans(self) -> dict[Any, Any]:
        return {span.kind: span for span in self.exporter.get_finished_spans()}

    def test_serverSpanIsTheClientSpansChild(self) -> None:
        """One CLIENT and one SERVER span, the server's parent being the client's, with the RPC attributes."""
        self.assertEqual(self.call("echo", 5), [5])
        spans = self.spans()
        client, server = spans[SpanKind.CLIENT], spans[SpanKind.SERVER]
        self.assertEqual(server.context.trace_id, client.context.trace_id)
        self.assertEqual(server.parent.span_id, client.context.span_id)
        self.assertTrue(server.parent.is_remote)
        for span in (client, server):
            self.assertEqual(span.name, "svc/echo")
            self.assertEqual(
                dict(span.attributes), {"rpc.system": "chunkwire", "rpc.service": "svc", "rpc.method": "echo"}
            )
            self.assertEqual(span.status.status_code, StatusCode.UNSET)

    def test_clientSpanIsAChildOfTheCurrentSpan(self) -> None:
        """A call made inside a span: the client span is its child, in its trace."""
        with self.provider.get_tracer("test").start_as_current_span("outer") as outer:
            self.assertEqual(self.call("echo", 1), [1])
        client = self.spans()[SpanKind.CLIENT]
        self.assertEqual(client.parent.span_id, outer.get_span_context().span_id)

    def test_traceContextInMetadata(self) -> None:
        """The method sees the W3C traceparent of the client span beside the caller's own metadata."""
        with callContext(metadata={"request-id": "r1"}):
            (headers,) = self.call("headers")
        client = self.spans()[SpanKind.CLIENT]
        self.assertEqual(headers["request-id"], "r1")
        self.assertEqual(
            headers["traceparent"],
            f"00-{client.context.trace_id:032x}-{client.context.span_id:016x}-{client.context.trace_flags:02x}",
        )

    def test_failureMarksBothSpans(self) -> None:
        """A method that raises: both spans end with status ERROR and error.type the error's type name."""
        (failure,) = self.call("fail")
        failure.trap(Exception)
        for span in self.spans().values():
            self.assertEqual(span.status.status_code, StatusCode.ERROR)
            self.assertEqual(span.attributes["error.type"], "KeyError")

    def chain(self) -> tuple[Relay, Any]:
        """
        Client -> server A -> server B, every broker traced into the one
        exporter: A's root, and a flush that carries both connections.
        """
        relay = Relay()
        pair = RpcPair(relay)
        quiet(pair.server, pair.client)
        relay.clock = pair.clock
        down = Broker(Service(), clock=pair.clock)
        up = Broker(clock=pair.clock)
        quiet(down, up)
        for broker in (pair.client, pair.server, up, down):
            intercept(broker, [TracingInterceptor(self.provider, service="svc")])
        memory = connectedPair(down, up)
        relay.downstream = up.rootReference()

        def flush() -> None:
            for _ in range(100):
                pair.clock.advance(0)
                if not (pair.memory.flush() | memory.flush()):
                    return

        self.flushChain = flush
        return relay, pair.root

    def assertChained(self, method: str) -> None:
        """The four spans of one call through the chain are one trace, each the child of the one before."""
        spans = {(span.kind, span.name): span for span in self.exporter.get_finished_spans()}
        self.assertEqual(len(spans), 4, spans)
        clientSpan = spans[SpanKind.CLIENT, f"svc/{method}"]
        serverA = spans[SpanKind.SERVER, f"svc/{method}"]
        clientOfA = spans[SpanKind.CLIENT, "svc/echo"]
        serverB = spans[SpanKind.SERVER, "svc/echo"]
        self.assertIsNone(clientSpan.parent)
        self.assertEqual(serverA.parent.span_id, clientSpan.context.span_id)
        self.assertEqual(clientOfA.parent.span_id, serverA.context.span_id)
        self.assertFalse(clientOfA.parent.is_remote)
        self.assertEqual(serverB.parent.span_id, clientOfA.context.span_id)
        self.assertEqual({span.context.trace_id for span in spans.values()}, {clientSpan.context.trace_id})

    def test_callsTheMethodMakesAreChildrenOfItsSpan(self) -> None:
        """
        Client -> A -> B: A's call to B, made in A's method, is a child of
        A's server span, and B's server span its child: one trace of four spans.
        """
        relay, root = self.chain()
        outcome: list[Any] = []
        root.callRemote("relay", 7).addBoth(outcome.append)
        self.flushChain()
        self.assertEqual(outcome, [7])
        self.assertChained("relay")
        # Current inside the method; not once it returned.
        (inside,) = relay.currentInside
        serverA = [s for s in self.exporter.get_finished_spans() if s.kind == SpanKind.SERVER and s.name == "svc/relay"]
        self.assertEqual(inside.get_span_context().span_id, serverA[0].context.span_id)
        self.assertFalse(trace.get_current_span().get_span_context().is_valid)

    def test_asyncMethodKeepsItsSpanCurrent(self) -> None:
        """An async method's call to B, made after a turn of the reactor, is still a child of its server span."""
        relay, root = self.chain()
        outcome: list[Any] = []
        root.callRemote("relayLater", "x").addBoth(outcome.append)
        self.flushChain()
        self.assertEqual(outcome, ["x"])
        self.assertChained("relayLater")
        self.assertFalse(trace.get_current_span().get_span_context().is_valid)

    def test_noTracerProviderRecordsNothing(self) -> None:
        """With OpenTelemetry's default (no SDK provider set up), calls work and record nothing here."""
        pair = RpcPair(Service())
        intercept(pair.client, [TracingInterceptor(trace.NoOpTracerProvider())])
        outcome: list[Any] = []
        pair.root.callRemote("headers").addBoth(outcome.append)
        pair.flush()
        self.assertEqual(outcome, [{}])
        self.assertEqual(self.exporter.get_finished_spans(), ())


class WithoutTheExtraTests(SynchronousTestCase):
    """Importing the module without OpenTelemetry names the extra."""

    def test_importErrorNamesTheExtra(self) -> None:
        """With opentelemetry hidden, importing protocols.rpc.otel raises ImportError naming chunkwire[otel]."""
        code = (
            "import sys; sys.modules['opentelemetry'] = None\n"
            "try:\n    import protocols.rpc.otel\nexcept ImportError as e:\n    print(e)\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        self.assertIn("chunkwire[otel]", done.stdout, done.stderr)
