# -*- test-case-name: tests.protocols.test_tracing -*-
"""Token tracing: one readable log line per token sent and received.

Contract: L{startTracing} taps a connection's writes (a proxy around the
transport under the coalescing layer) and returns a function that logs the
tokens of each received chunk; both go through L{framing._trace}'s
L{TokenTracer}, so a token split over reads or writes is logged once, whole.
Free when off: nothing here runs unless the connection's C{trace} is set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.logger import Logger
from zope.interface import directlyProvides, providedBy

from framing._trace import TokenTracer


def peerName(transport: Any) -> str:
    """C{host:port} of the transport's peer, or its address as text."""
    try:
        address = transport.getPeer()
    except Exception:
        return "an unknown peer"
    host, port = getattr(address, "host", None), getattr(address, "port", None)
    return f"{host}:{port}" if host is not None and port is not None else str(address)


def startTracing(transport: Any, log: Logger) -> Callable[[bytes], None]:
    """
    Log every token written through C{transport} (a
    L{protocols.CoalescingTransport}: the transport it wraps is replaced by
    a logging proxy), and return the function that logs received bytes.
    """
    peer = peerName(transport)
    transport.transport = TracingWriter(transport.transport, log, peer)
    received = TokenTracer()

    def traceReceived(data: bytes) -> None:
        logTokens(log, "received", peer, received.feed(data))

    return traceReceived


def logTokens(log: Logger, direction: str, peer: str, events: Iterable[Any]) -> None:
    """Log each token event, with the fields C{direction}, C{peer}, C{token}, C{kind} and C{value}."""
    arrow = "->" if direction == "sent" else "<-"
    for event in events:
        log.info(
            "{peer} {arrow} {token}",
            direction=direction,
            arrow=arrow,
            peer=peer,
            token=event.text,
            kind=event.kind,
            value=event.value,
        )


class TracingWriter:
    """A transport proxy that logs the tokens of everything written through it."""

    def __init__(self, transport: Any, log: Logger, peer: str) -> None:
        directlyProvides(self, providedBy(transport))
        self._transport = transport
        self._log = log
        self._peer = peer
        self._tracer = TokenTracer()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def write(self, data: bytes) -> None:
        logTokens(self._log, "sent", self._peer, self._tracer.feed(data))
        self._transport.write(data)

    def writeSequence(self, data: Iterable[bytes]) -> None:
        data = list(data)
        for piece in data:
            logTokens(self._log, "sent", self._peer, self._tracer.feed(piece))
        self._transport.writeSequence(data)
