"""protocols.rpc.otel across two processes: the server's span is the child of this process's client span.

The server (C{tests/protocols/rpc/otel_server.py}) runs in a process the
test starts, with its own tracer provider and in-memory exporter, and hands
back what it exported; this process traces its own call.  A process test
(C{PROCESS_TESTS} in dev.py); skipped without OpenTelemetry.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SkipTest, TestCase

from protocols.options import ClientOptions
from protocols.rpc import Referenceable, RemoteError, connect, remote, serve
from protocols.rpc._options import ServerOptions
from tests.processes import readUntil, startPython, stop

from ..helpers import pytestTest, trialTest

try:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from protocols.rpc.otel import TracingInterceptor
except ImportError:
    TracingInterceptor = None  # type: ignore[assignment,misc]


class Echo(Referenceable):
    """This process's own traced server: the last hop of the relayed call."""

    @remote
    def echo(self, value: Any) -> Any:
        return value


async def acrossProcesses(reactor: Any) -> None:
    """
    Two calls to a server process: each server span is the child of its
    client span, in the same trace.  A third, relayed by the server process
    back to a traced server in this one, is a chain of four spans across the
    two processes, each the child of the one before.
    """
    if TracingInterceptor is None:
        raise SkipTest("opentelemetry is not installed (the otel extra)")
    server = startPython("tests/protocols/rpc/otel_server.py")
    try:
        port = int(readUntil(server, rb"listening port=(\d+)").group(1))
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracing = TracingInterceptor(provider, service="traced")
        root = await connect(reactor, f"tcp:host=127.0.0.1:port={port}", options=ClientOptions(interceptors=[tracing]))
        lastHop = await serve(
            reactor, "tcp:0:interface=127.0.0.1", Echo(), options=ServerOptions(interceptors=[tracing])
        )
        try:
            assert await root.callRemote("echo", "hi") == "hi"
            try:
                await root.callRemote("fail")
            except RemoteError:
                pass
            else:
                raise AssertionError("fail() did not fail")
            assert await root.callRemote("relay", lastHop.getHost().port, "hop") == "hop"
            theirs = await root.callRemote("spans")
        finally:
            await root.broker.disconnect()
            await lastHop.stopListening()
            await lastHop.factory.disconnectAll()  # type: ignore[attr-defined]
    finally:
        stop(server)
    mine = [span for span in exporter.get_finished_spans() if span.name != "traced/spans"]
    # The chain's spans here: the last hop's server span, then the relay's client span (which ends last).
    relayed = mine.pop()
    lastServed = mine.pop()
    assert [span.name for span in mine] == ["traced/echo", "traced/fail"], mine
    assert [span["name"] for span in theirs] == ["traced/echo", "traced/fail", "traced/echo", "traced/relay"], theirs
    theirRelayClient, theirRelayServer = theirs[2:]
    assert (relayed.name, relayed.kind.name) == ("traced/relay", "CLIENT"), relayed
    assert (lastServed.name, lastServed.kind.name) == ("traced/echo", "SERVER"), lastServed
    assert (theirRelayClient["kind"], theirRelayServer["kind"]) == ("CLIENT", "SERVER"), theirs
    assert theirRelayServer["parent"] == format(relayed.context.span_id, "016x")
    assert theirRelayClient["parent"] == theirRelayServer["span"]
    assert format(lastServed.parent.span_id, "016x") == theirRelayClient["span"]
    traceId = format(relayed.context.trace_id, "032x")
    assert (
        theirRelayServer["trace"] == theirRelayClient["trace"] == format(lastServed.context.trace_id, "032x") == traceId
    )
    for client, served in zip(mine, theirs[:2], strict=True):
        assert client.kind.name == "CLIENT" and served["kind"] == "SERVER"
        assert served["trace"] == format(client.context.trace_id, "032x")
        assert served["parent"] == format(client.context.span_id, "016x")
        assert served["attributes"]["rpc.system"] == "chunkwire"
        assert served["attributes"]["rpc.method"] == client.attributes["rpc.method"]
    assert theirs[0]["status"] == "UNSET" and theirs[1]["status"] == "ERROR"
    assert theirs[1]["attributes"]["error.type"] == "KeyError"


class AcrossProcessesTests(TestCase):
    """The two-process trace (pytest runs this file: it is a process test; the trial twin is for import safety)."""

    test_across_processes = trialTest(acrossProcesses)


test_across_processes = pytestTest(acrossProcesses)
