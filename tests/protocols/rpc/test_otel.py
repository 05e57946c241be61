"""protocols.rpc.otel in one process: a CLIENT span per call, its SERVER span as its child, RPC attributes, errors."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from twisted.trial.unittest import SkipTest, SynchronousTestCase

from protocols.rpc import Referenceable, callContext, currentCall, remote
from protocols.rpc.interceptors import intercept

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
