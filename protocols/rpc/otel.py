# -*- test-case-name: tests.protocols.rpc.test_otel,tests.protocols.rpc.test_otel_processes -*-
"""OpenTelemetry tracing of calls: a client span per call made, a server span per call answered, its child.

Contract: L{TracingInterceptor} is an interceptor
(C{protocols/rpc/_interceptors.py}) for both ends' brokers.  Each call made
gets a CLIENT span (a child of the current span) whose W3C trace context
travels in the call's metadata; each call answered a SERVER span under
that context, current while the method runs, so the method's own calls
and spans are its children.  Attributes follow OpenTelemetry's RPC
conventions (C{rpc.system} C{"chunkwire"}, C{rpc.service}, C{rpc.method});
a failed call has status ERROR with C{error.type}.  Needs the C{otel} extra
(C{opentelemetry-api}); nothing else imports it.

Cost: with no tracer provider the spans do not record; a broker without
this interceptor pays nothing.

Design: docs/design/rpc-twisted.md
"""

from __future__ import annotations

from typing import Any

try:
    from opentelemetry import trace
    from opentelemetry.context import attach, detach
    from opentelemetry.trace import SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as error:  # pragma: no cover - the extra's absence is tested in a subprocess
    raise ImportError(
        "protocols.rpc.otel needs OpenTelemetry: install chunkwire's otel extra"
        " (from a clone: pip install './chunkwire[otel]')"
    ) from error

from framing.rpc._interception import CLIENT, OK, ONE_WAY, CallInfo

from ._interceptors import CallInterceptor

__all__ = ["RPC_SYSTEM", "TracingInterceptor"]

RPC_SYSTEM = "chunkwire"
"""The value of C{rpc.system} on every span."""


class TracingInterceptor(CallInterceptor):
    """
    Traces each call with OpenTelemetry (see L{protocols.rpc.otel}).

    @ivar service: the C{rpc.service} attribute and span name prefix, or C{None}.
    """

    def __init__(self, tracerProvider: Any = None, service: str | None = None, propagator: Any = None) -> None:
        """
        @param tracerProvider: the OpenTelemetry C{TracerProvider}; the global one if C{None}.
        @param service: the name of the service called (C{rpc.service}); left out if C{None}.
        @param propagator: the C{TextMapPropagator} that writes and reads the
            trace context in the metadata; W3C trace context if C{None}.
        """
        self.service = service
        self._tracer = trace.get_tracer("chunkwire.rpc", tracer_provider=tracerProvider)
        self._propagator = propagator if propagator is not None else TraceContextTextMapPropagator()

    def _attributes(self, call: CallInfo) -> dict[str, str]:
        attributes = {"rpc.system": RPC_SYSTEM, "rpc.method": call.method}
        if self.service is not None:
            attributes["rpc.service"] = self.service
        return attributes

    def _name(self, call: CallInfo) -> str:
        return call.method if self.service is None else f"{self.service}/{call.method}"

    def callStarted(self, call: CallInfo) -> None:
        """Start the call's span; on the calling side, put its trace context in the call's metadata."""
        if call.side == CLIENT:
            span = self._tracer.start_span(self._name(call), kind=SpanKind.CLIENT, attributes=self._attributes(call))
            carrier: dict[str, str] = {}
            self._propagator.inject(carrier, context=trace.set_span_in_context(span))
            # (the calling side's metadata is a dict the call sends: see CallInfo.metadata)
            call.metadata.update(carrier)  # type: ignore[attr-defined]
        else:
            parent = self._propagator.extract(dict(call.metadata))
            span = self._tracer.start_span(
                self._name(call), context=parent, kind=SpanKind.SERVER, attributes=self._attributes(call)
            )
        call.state = span

    def enterMethod(self, call: CallInfo) -> Any:
        """Make the call's server span current while its method runs: the spans it starts are its children."""
        span = call.state
        if span is None:
            return None
        return attach(trace.set_span_in_context(span))

    def exitMethod(self, call: CallInfo, entered: Any) -> None:
        """The method returned (its coroutine keeps its own context): the span current before is again."""
        if entered is not None:
            detach(entered)

    def callEnded(self, call: CallInfo) -> None:
        """End the call's span, with status ERROR and C{error.type} unless it succeeded."""
        span = call.state
        if span is None:
            return
        call.state = None
        if call.outcome not in (OK, ONE_WAY):
            errorType = call.errorType or str(call.outcome)
            span.set_attribute("error.type", errorType)
            span.set_status(Status(StatusCode.ERROR, errorType))
        span.end()
