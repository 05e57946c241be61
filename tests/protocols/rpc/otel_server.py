"""A traced RPC server for tests/protocols/rpc/test_otel_processes.py: run by the test in a process of its own.

It serves a root whose C{echo} is traced by L{protocols.rpc.otel.TracingInterceptor}
into an in-memory exporter, and whose C{spans} returns what was exported, so the
test can check across the two processes that its server span is the child of
the test's client span.  Its C{relay(port, value)} calls C{echo} on the test's
own traced server at C{port}, for a chain of three hops across the two
processes.  It prints C{listening port=N} once it listens.
"""

from __future__ import annotations

import sys
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred

from protocols.options import ClientOptions
from protocols.rpc import Referenceable, connect, remote, serve
from protocols.rpc._options import ServerOptions
from protocols.rpc.otel import TracingInterceptor


def spanFacts(span: Any) -> dict[str, Any]:
    """What the test compares of a finished span, as values chunkwire sends."""
    parent = span.parent
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace": format(span.context.trace_id, "032x"),
        "span": format(span.context.span_id, "016x"),
        "parent": None if parent is None else format(parent.span_id, "016x"),
        "status": span.status.status_code.name,
        "attributes": {key: str(value) for key, value in span.attributes.items()},
    }


class Traced(Referenceable):
    def __init__(self, exporter: InMemorySpanExporter, interceptor: TracingInterceptor) -> None:
        self.exporter = exporter
        self.interceptor = interceptor

    @remote
    def echo(self, value: Any) -> Any:
        return value

    @remote
    def fail(self) -> None:
        raise KeyError("missing")

    @remote
    async def relay(self, port: int, value: Any) -> Any:
        """Call C{echo(value)} on the traced server at C{port} (on loopback), from inside this method."""
        downstream = await connect(
            reactor, f"tcp:host=127.0.0.1:port={port}", options=ClientOptions(interceptors=[self.interceptor])
        )
        try:
            return await downstream.callRemote("echo", value)
        finally:
            await downstream.broker.disconnect()

    @remote
    def spans(self) -> list[dict[str, Any]]:
        return [spanFacts(span) for span in self.exporter.get_finished_spans()]


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptor = TracingInterceptor(provider, service="traced")
    port = await serve(
        reactor,
        "tcp:0:interface=127.0.0.1",
        Traced(exporter, interceptor),
        options=ServerOptions(interceptors=[interceptor]),
    )
    print(f"listening port={port.getHost().port}", flush=True)


if __name__ == "__main__":
    ensureDeferred(main()).addErrback(lambda failure: (failure.printTraceback(file=sys.stdout), reactor.stop()))
    reactor.run()
