"""How-to: trace calls with OpenTelemetry (the otel extra): a client span per call, the server's span its child."""

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from twisted.internet.defer import Deferred
from twisted.internet.task import react

from protocols import rpc
from protocols.rpc.otel import TracingInterceptor


class Greeter(rpc.Referenceable):
    @rpc.remote
    def greet(self, name: str) -> str:
        return f"hello {name}"


async def main(reactor):
    # One provider for both ends, to show the link; each process has its own in real life.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = TracingInterceptor(provider, service="greeter")

    port = await rpc.serve(reactor, "tcp:0:interface=127.0.0.1", Greeter(), interceptors=[tracing])
    root = await rpc.connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}", interceptors=[tracing])
    print(await root.callRemote("greet", "ada"))
    await root.broker.disconnect()
    await port.stopListening()
    await port.factory.disconnectAll()

    spans = {span.kind.name: span for span in exporter.get_finished_spans()}
    client, server = spans["CLIENT"], spans["SERVER"]
    print("spans:", client.name, server.name)
    print("server span's parent is the client span:", server.parent.span_id == client.context.span_id)
    print("attributes:", dict(server.attributes))


react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
