"""How-to: trace calls with OpenTelemetry (the otel extra): a client span per call, the server's span its child."""

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from twisted.internet.defer import Deferred
from twisted.internet.task import react

from protocols import rpc
from protocols.options import ClientOptions
from protocols.rpc import ServerOptions
from protocols.rpc.otel import TracingInterceptor


class Names(rpc.Referenceable):
    """A second service, which the greeter calls."""

    @rpc.remote
    def title(self, name: str) -> str:
        return name.title()


class Greeter(rpc.Referenceable):
    def __init__(self, names):
        self.names = names

    @rpc.remote
    async def greet(self, name: str) -> str:
        # Made inside the method: this call's span is a child of greet's server span.
        return f"hello {await self.names.callRemote('title', name)}"


async def main(reactor):
    # One provider for every end, to show the links; each process has its own in real life.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = TracingInterceptor(provider, service="greeter")

    namesPort = await rpc.serve(
        reactor, "tcp:0:interface=127.0.0.1", Names(), options=ServerOptions(interceptors=[tracing])
    )
    names = await rpc.connect(
        reactor, f"tcp:host=127.0.0.1:port={namesPort.getHost().port}", options=ClientOptions(interceptors=[tracing])
    )
    port = await rpc.serve(
        reactor, "tcp:0:interface=127.0.0.1", Greeter(names), options=ServerOptions(interceptors=[tracing])
    )
    root = await rpc.connect(
        reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}", options=ClientOptions(interceptors=[tracing])
    )
    print(await root.callRemote("greet", "ada"))
    for ref in (root, names):
        await ref.broker.disconnect()
    for listening in (port, namesPort):
        await listening.stopListening()
        await listening.factory.disconnectAll()

    spans = {(span.kind.name, span.name): span for span in exporter.get_finished_spans()}
    client, server = spans["CLIENT", "greeter/greet"], spans["SERVER", "greeter/greet"]
    print("spans:", client.name, server.name)
    print("server span's parent is the client span:", server.parent.span_id == client.context.span_id)
    print("attributes:", dict(server.attributes))
    downstream = spans["CLIENT", "greeter/title"]
    print("the greeter's own call is a child of its server span:", downstream.parent.span_id == server.context.span_id)
    print("one trace:", len({span.context.trace_id for span in spans.values()}) == 1, "spans:", len(spans))


react(lambda reactor: Deferred.fromCoroutine(main(reactor)))
