"""Shared pieces of the protocol tests: sample objects, comparisons, in-memory
TLS, and the glue that runs one async test body under trial and pytest-twisted.

Contract: a reactor test is written once, as C{async def body(reactor)} with a
one-sentence docstring; L{trialTest} makes it a trial C{TestCase} method and
L{pytestTest} a C{pytest_twisted} test function.  Both bound it in time with
L{TIMEOUT}.
"""

from __future__ import annotations

import gc
import math
import os
import struct
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.protocol import Factory
from twisted.internet.task import Clock
from twisted.logger import globalLogPublisher
from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol

from framing.wire import PREAMBLE
from protocols.testing import MemoryPair, SelfSignedCertificate, connectedPair

REFERENCE_BATCHES = int(os.environ.get("CHUNKWIRE_REFERENCE_BATCHES", "10"))
"""
Batches of 1000 references the references-come-and-go tests send
(tests.protocols.rpc.test_memory, test_tcp): 10 in the default run, where a
reference not released shows in the first batch's count; 100 (a hundred
thousand references) in C{python3 dev.py soak}, which sets
C{CHUNKWIRE_REFERENCE_BATCHES}.
"""

TIMEOUT = 120.0
"""
Seconds any one reactor test may take before it fails: a bound on a hang,
not on speed, so generous enough that no test that passes in seconds on a
quiet machine misses it on a loaded one (a load average of 10 on 2 cores).
"""

Body = Callable[[Any], Awaitable[None]]

EVERY_TYPE: list[Any] = [
    None,
    True,
    False,
    0,
    11,
    12,
    255,
    256,
    2**32,
    2**64 - 1,
    2**64,
    2**200,
    -1,
    -12,
    -(2**64),
    -(2**64) - 1,
    -(2**300),
    0.0,
    -0.0,
    1.5,
    float("inf"),
    float("-inf"),
    float("nan"),
    5e-324,
    b"",
    b"x",
    bytes(range(256)),
    b"\x00" * 70_000,
    "",
    "text",
    "ünïcødé ✓ 🐍",
    "x" * 70_000,
    [],
    [1, [2, [3, []]]],
    (),
    (1, "a", b"b"),
    {},
    {"k": [1, 2], 3: None, (1, 2): "tuple key", b"raw": 2.5},
    set(),
    {1, "a", b"b", (1, 2)},
    frozenset(),
    frozenset({1, 2}),
    {"users": [{"id": i, "name": f"u{i}", "tags": ("a", str(i)), "ok": i % 2 == 0} for i in range(50)]},
]
"""One value of every built-in type the framing core encodes, plus edge values."""


def same(a: Any, b: Any) -> bool:
    """True when C{b} is an exact copy of C{a}: same types all the way down, floats bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def cancelDropTimers() -> None:
    """
    Cancel the global reactor's timers that abort dropped connections
    (L{protocols._lifetime}, C{ConnectionConfig.dropGrace}): a synchronous
    test that drops a connection whose protocol has no clock of its own, on
    a transport that never ends it, leaves one, which would fire in (and
    dirty) a later test's reactor.  Add it as a cleanup.
    """
    from twisted.internet import reactor

    from protocols._lifetime import abortLingering

    for call in reactor.getDelayedCalls():  # type: ignore[attr-defined]
        if call.func is abortLingering and call.active():
            call.cancel()


def tokenBytes(data: bytes) -> bytes:
    """Strip the preamble from a C{framing.dumps} result, leaving the object's tokens."""
    assert data.startswith(PREAMBLE)
    return data[len(PREAMBLE) :]


# -- in-memory TLS --------------------------------------------------------------


class _Given(Factory):
    def __init__(self, protocol: Any) -> None:
        self._protocol = protocol

    def buildProtocol(self, addr: Any) -> Any:
        return self._protocol


class TLSPair:
    """
    Two protocols over TLS (twisted.protocols.tls) over an in-memory pair.

    @ivar pair: the L{MemoryPair} carrying the TLS bytes.
    @ivar clock: the clock C{BufferingTLSTransport} schedules its flushes on.
    """

    def __init__(self, server: Any, client: Any, buffering: bool) -> None:
        certificate = SelfSignedCertificate.generate()
        self.clock = Clock()
        server_factory = TLSMemoryBIOFactory(certificate.serverOptions(), False, _Given(server), self.clock)
        client_factory = TLSMemoryBIOFactory(certificate.clientOptions(), True, _Given(client), self.clock)
        if not buffering:
            # The plain TLSMemoryBIOProtocol turns every write into TLS
            # records at once, so record counts show our own coalescing.
            server_factory.protocol = client_factory.protocol = TLSMemoryBIOProtocol
        self.server, self.client = server, client
        self.pair: MemoryPair = connectedPair(server_factory.buildProtocol(None), client_factory.buildProtocol(None))
        self.flush()

    def flush(self) -> None:
        """Deliver everything, including writes the TLS layer schedules for the next reactor turn."""
        for _ in range(100):
            self.clock.advance(0)
            if not self.pair.flush() and not self.clock.getDelayedCalls():
                return
        raise RuntimeError("TLS pair still busy")


# -- one body, two runners -------------------------------------------------------


def _reactor() -> Any:
    # Imported late: pytest-twisted installs its reactor before tests run,
    # and nothing may install the default one earlier.
    from twisted.internet import reactor

    return reactor


def _bounded(body: Body, timeout: float = TIMEOUT) -> Deferred[None]:
    reactor = _reactor()
    d: Deferred[None] = Deferred.fromCoroutine(body(reactor))  # type: ignore[arg-type]
    return d.addTimeout(timeout, reactor)


def trialTest(body: Body, timeout: float = TIMEOUT) -> Callable[[Any], Deferred[None]]:
    """A trial C{TestCase} method running C{body} within C{timeout} seconds; it takes C{body}'s docstring."""

    def test(self: Any) -> Deferred[None]:
        return _bounded(body, timeout)

    # trial's own per-test timeout (120 s) must not fire first.
    test.timeout = timeout + 30  # type: ignore[attr-defined]
    test.__doc__ = body.__doc__
    return test


def pytestTest(body: Body, timeout: float = TIMEOUT) -> Callable[[], Awaitable[None]]:
    """A pytest-twisted test function running C{body} within C{timeout} seconds; it takes C{body}'s docstring."""
    import pytest_twisted

    async def test() -> None:
        await _bounded(body, timeout)

    # No functools.wraps: pytest would follow __wrapped__ and ask for a
    # "reactor" fixture.
    test.__doc__ = body.__doc__
    test.__name__ = test.__qualname__ = f"test_{body.__name__}"
    marked: Callable[[], Awaitable[None]] = pytest_twisted.ensureDeferred(test)
    return marked


@contextmanager
def capturedLogs() -> Iterator[list[dict[str, Any]]]:
    """Every log event emitted inside the block, in order."""
    events: list[dict[str, Any]] = []
    globalLogPublisher.addObserver(events.append)
    try:
        yield events
    finally:
        globalLogPublisher.removeObserver(events.append)


def tracedBytesPer(feed: Callable[[bytes], object], items: list[bytes], warmUp: int = 20) -> float:
    """
    The bytes tracemalloc sees left held per item after C{feed} took each
    of C{items} past the first C{warmUp} (fed first, untraced: state made
    lazily is no item's), garbage collected before and after.
    """
    for item in items[:warmUp]:
        feed(item)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for item in items[warmUp:]:
            feed(item)
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / len(items[warmUp:])
    finally:
        tracemalloc.stop()
