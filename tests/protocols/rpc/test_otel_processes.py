"""protocols.rpc.otel across two processes: the server's span is the child of this process's client span.

The server (C{tests/protocols/rpc/otel_server.py}) runs in a process the
test starts, with its own tracer provider and in-memory exporter, and hands
back what it exported; this process traces its own call.  A process test
(C{PROCESS_TESTS} in dev.py); skipped without OpenTelemetry.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SkipTest, TestCase

from protocols.rpc import RemoteError, connect
from tests.processes import readUntil, startPython, stop

from ..helpers import pytestTest, trialTest

try:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from protocols.rpc.otel import TracingInterceptor
except ImportError:
    TracingInterceptor = None  # type: ignore[assignment,misc]


async def acrossProcesses(reactor: Any) -> None:
    """Two calls to a server process: each server span is the child of its client span, in the same trace."""
    if TracingInterceptor is None:
        raise SkipTest("opentelemetry is not installed (the otel extra)")
    server = startPython("tests/protocols/rpc/otel_server.py")
    try:
        port = int(readUntil(server, rb"listening port=(\d+)").group(1))
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        root = await connect(
            reactor, f"tcp:host=127.0.0.1:port={port}", interceptors=[TracingInterceptor(provider, service="traced")]
        )
        try:
            assert await root.callRemote("echo", "hi") == "hi"
            try:
                await root.callRemote("fail")
            except RemoteError:
                pass
            else:
                raise AssertionError("fail() did not fail")
            theirs = await root.callRemote("spans")
        finally:
            await root.broker.disconnect()
    finally:
        stop(server)
    mine = [span for span in exporter.get_finished_spans() if span.name != "traced/spans"]
    assert [span.name for span in mine] == ["traced/echo", "traced/fail"], mine
    assert [span["name"] for span in theirs] == ["traced/echo", "traced/fail"], theirs
    for client, served in zip(mine, theirs, strict=True):
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
