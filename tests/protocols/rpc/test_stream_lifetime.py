"""A connection closed with object streams unfinished frees its readers, producers and broker (over real TCP).

The leak this pins: Twisted hands every connection it closes cleanly the
same C{ConnectionDone} instance, and the readers of a lost connection
were failed with it; raised in the method's coroutine awaiting a reader,
it kept that coroutine's frames (each raise adds to its traceback), and so
every closed connection's readers, streams and broker, for the life of the
process (60 cycles: 59,940 readers and 62 brokers alive after a
collection).  Each reactor test body runs under trial and pytest-twisted
(C{tests/protocols/helpers.py}).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator
from typing import Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from framing.rpc._limits import SERVER_CALL_LIMITS
from protocols.rpc import Broker, BrokerFactory, Referenceable, connect, remote
from protocols.rpc._endpoints import listenWith

from ..helpers import pytestTest, trialTest

LISTEN = "tcp:0:interface=127.0.0.1"
CYCLES = 60
"""Connections opened and closed with their streams unfinished."""
INPUTS = 50
"""Streams each connection hands the server's method, none of them ever fed."""
OUTPUTS = 5
"""Streams each connection asks the server for, none of them ever read to its end."""


class Unfinished(Referenceable):
    """Methods whose streams a client leaves unfinished; everything they are given or make is tracked weakly."""

    def __init__(self) -> None:
        self.tracked: list[weakref.ref[Any]] = []
        self.started = 0
        self.taken = 0

    @remote
    async def swallow(self, streams: list[Any]) -> int:
        self.tracked.extend(weakref.ref(stream) for stream in streams)
        self.started += 1
        count = 0
        async for _ in streams[0]:
            count += 1
        return count

    @remote
    async def consume(self, items: Any) -> int:
        """Take C{items} one by one (the last one taken stays in this frame while it waits for the next)."""
        self.tracked.append(weakref.ref(items))
        count = 0
        async for _ in items:
            count += 1
            self.taken += 1
        return count

    @remote
    def firehose(self) -> AsyncIterator[bytes]:
        source = _endless()
        self.tracked.append(weakref.ref(source))
        return source


async def _endless() -> AsyncIterator[bytes]:
    while True:
        yield b"x" * 1000


async def _oneThenNothing() -> AsyncIterator[list[bytes]]:
    yield [b"x" * 1000]
    await Deferred()


async def _never() -> AsyncIterator[int]:
    await Deferred()
    yield 0


class _TrackingFactory(BrokerFactory):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.made: list[weakref.ref[Broker]] = []

    def brokerConnected(self, broker: Broker) -> None:
        super().brokerConnected(broker)
        self.made.append(weakref.ref(broker))


async def _until(reactor: Any, condition: Any) -> None:
    """Wait (a reactor turn at a time) until C{condition()}; the test's own timeout bounds it."""
    while not condition():
        await deferLater(reactor, 0.01)


async def unfinishedStreamsFreed(reactor: Any) -> None:
    """60 connections closed with input and output streams unfinished leave no reader, source or broker alive."""
    service = Unfinished()
    factory = _TrackingFactory(service, clock=reactor, callLimits=SERVER_CALL_LIMITS)
    port = await listenWith(reactor, LISTEN, factory)
    try:
        address = f"tcp:host=127.0.0.1:port={port.getHost().port}"
        for cycle in range(CYCLES):
            root = await connect(reactor, address)
            root.callRemote("swallow", [_never() for _ in range(INPUTS)]).addErrback(lambda failure: None)
            outputs = gatherResults([root.callRemote("firehose") for _ in range(OUTPUTS)])
            readers = await outputs
            await _until(reactor, lambda cycle=cycle: service.started > cycle)
            await root.broker.disconnect()
            del readers, outputs, root
            await _until(reactor, lambda: not factory.brokers)
        gc.collect()
        made = factory.made
        assert len(made) == CYCLES, len(made)
        alive = [ref() for ref in made if ref() is not None]
        assert alive == [], f"{len(alive)} of {CYCLES} brokers alive after their connections closed"
        left = [ref() for ref in service.tracked if ref() is not None]
        assert len(service.tracked) == CYCLES * (INPUTS + OUTPUTS), len(service.tracked)
        assert left == [], f"{len(left)} readers and sources alive, e.g. {left[:3]}"
    finally:
        await port.stopListening()


async def consumersFreedWithoutCollection(reactor: Any) -> None:
    """
    A method waiting in C{async for} on a stream argument when its
    connection is lost lets go of its reader, the item it took last and
    its broker by reference counting alone (no garbage collection runs):
    the reader hands it a copy of its connection's end, so the coroutine's
    frames raised through are not held by the reader they hold.
    """
    service = Unfinished()
    factory = _TrackingFactory(service, clock=reactor, callLimits=SERVER_CALL_LIMITS)
    port = await listenWith(reactor, LISTEN, factory)
    gc.collect()
    gc.disable()
    try:
        address = f"tcp:host=127.0.0.1:port={port.getHost().port}"
        for cycle in range(3):
            root = await connect(reactor, address)
            call = root.callRemote("consume", _oneThenNothing())
            call.addErrback(lambda failure: None)
            await _until(reactor, lambda cycle=cycle: service.taken > cycle)  # its one item taken, waiting for more
            await root.broker.disconnect()
            del root, call
            await _until(reactor, lambda: not factory.brokers)
        await deferLater(reactor, 0.01)  # (the end's last callbacks)
        alive = [ref() for ref in factory.made if ref() is not None]
        assert alive == [], f"{len(alive)} of 3 brokers alive after their connections closed, without a collection"
        left = [ref() for ref in service.tracked if ref() is not None]
        assert left == [], f"{len(left)} readers alive without a collection: {left[:4]}"
    finally:
        gc.enable()
        await port.stopListening()


class StreamLifetimeTests(TestCase):
    """Unfinished streams freed with their connection (trial runs these; pytest runs the twin below)."""

    test_unfinished_streams_freed = trialTest(unfinishedStreamsFreed, timeout=90)
    test_consumers_freed_without_collection = trialTest(consumersFreedWithoutCollection, timeout=60)


test_unfinished_streams_freed = pytestTest(unfinishedStreamsFreed, timeout=90)
test_consumers_freed_without_collection = pytestTest(consumersFreedWithoutCollection, timeout=60)
